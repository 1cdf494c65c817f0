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
    ws.lifecycle.relate(new, old.id, "contradicts")
    ws.lifecycle.relate(new, old.id, "contradicts")  # twice: recorded once
    ws.lifecycle.relate(new.id, extra.id, "supports")
    line = next(ln for ln in (ws.root / "memory.md").read_text().splitlines() if new.id in ln)
    assert f"contradicts={old.id}" in line and f"supports={extra.id}" in line
    assert [(r.source, r.kind) for r in ws.lifecycle.related(old.id)] == [(new.id, "contradicts")]
    kinds = {(r.kind, r.target) for r in ws.lifecycle.related(new.id)}
    assert kinds == {("contradicts", old.id), ("supports", extra.id)}
    assert ws.get(new.id).text == "Deploys go to Fly.io"  # the text is untouched


def test_relate_refuses_unknown_kinds_and_ids(ws: Workspace) -> None:
    entry = ws.remember("Deploys go to Fly.io")
    with pytest.raises(ValueError, match="unknown relation"):
        ws.lifecycle.relate(entry, entry.id, "likes")
    with pytest.raises(EntryNotFoundError):
        ws.lifecycle.relate(entry, "m-0000000000", "refines")


def test_a_relation_to_a_missing_id_is_reported_not_a_crash(ws: Workspace) -> None:
    path = ws.root / "memory.md"
    path.write_text(
        path.read_text()
        + "\n- Hand-written: staging runs on port 6543 <!-- mdmem contradicts=m-gone00000,m-gone11111 -->\n"
    )
    entry = next(e for e in ws.entries("memory.md") if "staging" in e.text)
    found = ws.lifecycle.related(entry.id)
    assert {r.target for r in found} == {"m-gone00000", "m-gone11111"}
    assert not any(r.target_found or r.open for r in found)
    assert "contradicted by" not in ws.build_context().text


def test_context_shows_an_open_contradiction_until_it_is_settled(ws: Workspace) -> None:
    old = ws.remember("The staging port is 5432")
    new = ws.remember("The staging port is 6543")
    ws.lifecycle.relate(new, old.id, "contradicts")
    text = ws.build_context().text
    assert f"The staging port is 5432 (contradicted by {new.id})" in text
    ws.supersede(old.id, new.id)  # settled: the old one is archived
    assert "contradicted by" not in ws.build_context().text


def test_cycles_are_allowed(ws: Workspace) -> None:
    a = ws.remember("Alpha refines beta")
    b = ws.remember("Beta refines alpha")
    ws.lifecycle.relate(a, b.id, "refines")
    ws.lifecycle.relate(b, a.id, "refines")
    assert len(ws.lifecycle.related(a.id)) == 2 and len(ws.lifecycle.related(b.id)) == 2


def _from_files(ws: Workspace, entry_id: str) -> list[tuple[str, str, str, bool]]:
    from mdmem.memory.relations import involving

    return sorted(
        (r.source, r.kind, r.target, r.open) for r in involving(ws._w.documents, entry_id)
    )


def _indexed(ws: Workspace, entry_id: str) -> list[tuple[str, str, str, bool]] | None:
    found = ws.index._backend.relations(entry_id)  # type: ignore[attr-defined]
    return None if found is None else sorted((r.source, r.kind, r.target, r.open) for r in found)


def test_the_index_keeps_a_relations_table_in_step_with_the_files(ws: Workspace) -> None:
    old = ws.remember("Backups run at 02:00")
    new = ws.remember("Backups run at 02:00 and are kept 30 days")
    ws.index._backend.sync(embed=False)
    assert _indexed(ws, old.id) == [] == _from_files(ws, old.id)
    path = ws.root / "memory.md"
    text = path.read_text()
    path.write_text(text.replace(f"id={new.id}", f"id={new.id} refines={old.id}"))  # by hand
    assert _indexed(ws, old.id) is None  # a file changed since the sync: no word that it caught up
    ws.index._backend.sync(embed=False)
    assert _indexed(ws, old.id) == [(new.id, "refines", old.id, True)] == _from_files(ws, old.id)
    assert [(r.source, r.kind) for r in ws.lifecycle.related(old.id)] == [(new.id, "refines")]
    path.write_text(text)  # the relation removed again
    ws.index._backend.sync(embed=False)
    assert _indexed(ws, old.id) == [] == _from_files(ws, old.id)


def test_related_reads_the_table_when_fresh_and_a_deleted_index_rebuilds_it(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = ws.remember("The staging port is 5432")
    new = ws.remember("The staging port is 6543")
    ws.lifecycle.relate(new, old.id, "contradicts")
    ws.index._backend.sync(embed=False)
    ws.index._backend.close()
    assert (ws.files._state_dir / "index.db").is_file()
    for suffix in ("", "-wal", "-shm"):
        (ws.files._state_dir / f"index.db{suffix}").unlink(missing_ok=True)
    fresh = Workspace(ws.root)
    fresh.index._backend.sync(embed=False)  # rebuilt from the files, relations included
    expected = [(new.id, "contradicts", old.id, True)]
    assert _indexed(fresh, old.id) == expected
    monkeypatch.setattr(fresh._w.documents, "all", lambda: pytest.fail("parsed the files"))
    assert [
        (r.source, r.kind, r.target, r.open) for r in fresh.lifecycle.related(old.id)
    ] == expected
    assert fresh.lifecycle.contradicted() == {old.id: [new.id]}


def test_an_index_of_schema_4_fills_its_relations_table_at_the_next_sync(ws: Workspace) -> None:
    old = ws.remember("Deploys go to Heroku")
    new = ws.remember("Deploys go to Fly.io")
    ws.lifecycle.relate(new, old.id, "contradicts")
    ws.index._backend.sync(embed=False)
    conn = ws.index._backend.conn  # type: ignore[attr-defined]
    conn.execute("DROP TABLE relations")  # as an index of schema 4 has it
    conn.execute("PRAGMA user_version = 4")
    ws.close()
    again = Workspace(ws.root)
    assert again.index._backend.relations(old.id) is None  # type: ignore[attr-defined]
    assert again.index._backend.sync(embed=False).updated >= 1  # every file read once
    assert _indexed(again, old.id) == [(new.id, "contradicts", old.id, True)]
