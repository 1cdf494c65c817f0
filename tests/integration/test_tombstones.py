"""Tombstones are bounded (invariant 8), and inside the bound a forgotten text never comes back.

``forget`` leaves one dated line per forgotten entry; a file keeps them for a year
(``tombstones.MAX_AGE``) and at most ``tombstones.MAX_COUNT`` of them, the newest. These tests
forget many entries through the library, merge them with a clone that still holds every one
(edited, superseded), and check both the bound and the guarantee inside it.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.markdown import tombstones
from mdmem.markdown.parse import parse_document
from mdmem.sharing.git_merge_driver import merge_file

FORGOTTEN = 40


def _workspace(root: Path) -> Workspace:
    Workspace.init(root, agent="a").close()
    config = root / "mdmem.toml"
    config.write_text(config.read_text() + '\n[embedding]\nmodel = ""\n')
    return Workspace.open(root)


def _texts(text: str) -> set[str]:
    return {e.text for e in parse_document("memory.md", text).entries}


@pytest.mark.slow  # forty forgets, each through the safe writes and the index
def test_forgetting_many_entries_keeps_each_forgotten_inside_the_bound(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "a")
    entries = [ws.remember(f"Secret number {n}: token-{n:04d}") for n in range(FORGOTTEN)]
    kept = ws.remember("A memory no one forgets")
    base = (tmp_path / "a" / "memory.md").read_text()
    shutil.copytree(tmp_path / "a", tmp_path / "b", ignore=shutil.ignore_patterns(".mdmem"))
    other = Workspace.open(tmp_path / "b")  # a clone that has not synced since
    for n, entry in enumerate(entries):
        if n % 2:
            other.update(entry.id, text=f"Secret number {n}: token-{n:04d}, rotated")
        else:
            other.supersede(entry.id, f"Secret number {n} was replaced")
    other.close()
    for entry in entries:
        ws.forget(entry.id)
    ws.close()
    ours = (tmp_path / "a" / "memory.md").read_text()
    theirs = (tmp_path / "b" / "memory.md").read_text()
    marks = tombstones.read(ours)
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert len(marks) == FORGOTTEN and {m.at for m in marks} == {today}
    rows = [row for row in ours.splitlines() if tombstones.is_tombstone(row)]
    assert rows == [m.line("") for m in sorted(marks)]  # one line each, in one order
    # inside the bound, whichever side merges, every version of each is dropped
    for a, b in ((ours, theirs), (theirs, ours)):
        result = merge_file("memory.md", base, a, b).text
        assert "token-" not in result
        assert tombstones.read(result) == marks
        assert kept.text in _texts(result)
        for n in range(0, FORGOTTEN, 2):  # a supersede's replacement is a new memory: it stays
            assert f"Secret number {n} was replaced" in _texts(result)
    # past the bound the tombstones are gone, and so is the guarantee (docs/sharing.md)
    later = dt.datetime.now(dt.UTC) + tombstones.MAX_AGE + dt.timedelta(days=1)
    result = merge_file("memory.md", base, ours, theirs, now=later).text
    assert not tombstones.read(result)
    assert "token-0001, rotated" in result


def test_a_file_keeps_at_most_max_count_tombstones_the_newest(tmp_path: Path) -> None:
    today = dt.date(2026, 11, 28)
    many = {
        tombstones.Tombstone(
            (today - dt.timedelta(days=n % 400)).isoformat(), f"m-{n:010d}", f"{n:016x}"
        )
        for n in range(tombstones.MAX_COUNT + 300)
    }
    text = tombstones.append("# Memory\n\n## Facts\n", many, today)
    kept = tombstones.read(text)
    young = {m for m in many if m.at >= (today - tombstones.MAX_AGE).isoformat()}
    assert len(young) > tombstones.MAX_COUNT  # the count decides here, not only the age
    assert len(kept) == tombstones.MAX_COUNT
    assert kept == set(sorted(young)[-tombstones.MAX_COUNT :])  # the newest
    assert min(m.at for m in kept) >= min(m.at for m in young)
    # appending to a full file stays at the bound, the new one kept, and it is the same
    # whichever set a merge starts from
    new = tombstones.Tombstone(today.isoformat(), "m-new", "f" * 16)
    again = tombstones.read(tombstones.append(text, [new], today))
    assert len(again) == tombstones.MAX_COUNT and new in again
    assert tombstones.bounded(many | {new}, today) == tombstones.bounded({new} | kept, today)


def test_forget_drops_expired_tombstones_and_reads_undated_ones(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "w")
    path = tmp_path / "w" / "memory.md"
    old = (dt.datetime.now(dt.UTC).date() - tombstones.MAX_AGE - dt.timedelta(days=1)).isoformat()
    legacy = "<!-- mdmem forgotten id=m-0000000001 sum=00000000000000aa -->"
    expired = f"<!-- mdmem forgotten id=m-0000000002 sum=00000000000000bb at={old} -->"
    path.write_text(path.read_text().rstrip("\n") + f"\n\n{legacy}\n{expired}\n")
    entry = ws.remember("A leaked key: sk-live-1234")
    ws.forget(entry.id)
    ws.close()
    marks = tombstones.read(path.read_text())
    assert {m.id for m in marks} == {"m-0000000001", entry.id}  # the undated one: age unknown
    assert "sk-live-1234" not in path.read_text()
