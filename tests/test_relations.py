"""Relations (issue 12 §3): written in the source's metadata, read from the files, shown next
to a contradicted memory in the context; a relation to a missing id is reported, never a crash."""

from __future__ import annotations

import pytest

from mdmem import Workspace
from mdmem.errors import EntryNotFoundError


def test_relate_writes_metadata_and_related_lists_both_ends(ws: Workspace) -> None:
    old = ws.remember("Deploys go to Heroku")
    new = ws.remember("Deploys go to Fly.io")
    extra = ws.remember("Fly.io bills per second")
    ws.relate(new, old.id, "contradicts")
    ws.relate(new, old.id, "contradicts")  # twice: recorded once
    ws.relate(new.id, extra.id, "supports")
    line = next(ln for ln in (ws.root / "memory.md").read_text().splitlines() if new.id in ln)
    assert f"contradicts={old.id}" in line and f"supports={extra.id}" in line
    assert [(r.source, r.kind) for r in ws.related(old.id)] == [(new.id, "contradicts")]
    kinds = {(r.kind, r.target) for r in ws.related(new.id)}
    assert kinds == {("contradicts", old.id), ("supports", extra.id)}
    assert ws.get(new.id).text == "Deploys go to Fly.io"  # the text is untouched


def test_relate_refuses_unknown_kinds_and_ids(ws: Workspace) -> None:
    entry = ws.remember("Deploys go to Fly.io")
    with pytest.raises(ValueError, match="unknown relation"):
        ws.relate(entry, entry.id, "likes")
    with pytest.raises(EntryNotFoundError):
        ws.relate(entry, "m-0000000000", "refines")


def test_a_relation_to_a_missing_id_is_reported_not_a_crash(ws: Workspace) -> None:
    path = ws.root / "memory.md"
    path.write_text(
        path.read_text()
        + "\n- Hand-written: staging runs on port 6543 <!-- mdmem contradicts=m-gone00000,m-gone11111 -->\n"
    )
    entry = next(e for e in ws.entries("memory.md") if "staging" in e.text)
    found = ws.related(entry.id)
    assert {r.target for r in found} == {"m-gone00000", "m-gone11111"}
    assert not any(r.target_found or r.open for r in found)
    assert "contradicted by" not in ws.build_context().text


def test_context_shows_an_open_contradiction_until_it_is_settled(ws: Workspace) -> None:
    old = ws.remember("The staging port is 5432")
    new = ws.remember("The staging port is 6543")
    ws.relate(new, old.id, "contradicts")
    text = ws.build_context().text
    assert f"The staging port is 5432 (contradicted by {new.id})" in text
    ws.supersede(old.id, new.id)  # settled: the old one is archived
    assert "contradicted by" not in ws.build_context().text


def test_cycles_are_allowed(ws: Workspace) -> None:
    a = ws.remember("Alpha refines beta")
    b = ws.remember("Beta refines alpha")
    ws.relate(a, b.id, "refines")
    ws.relate(b, a.id, "refines")
    assert len(ws.related(a.id)) == 2 and len(ws.related(b.id)) == 2
