"""The write journal stays bounded: Claude Code's Stop hook imports the growing session at every
stop, each import a program write of the session file, and each write keeps the bytes it
replaced and wrote in ``.mdmem/journal/`` for ``mdmem recover``. 200 stops of one growing
session once left 25 MB there (the issue's real run: 38 MB): the per-file byte cap was checked
on every 16th prune of a process only (a hook process prunes once), nothing capped the whole
journal, and each unedited version was stored twice (as ``written``, then as ``replaced``).
Now each prune checks the file's bytes, a ``replaced`` version identical to the ``written`` one
before it shares its file, and a total cap holds over every file
(mdmem/writes/journal.py)."""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from in_process import mdmem

from mdmem import Workspace
from mdmem.config import WriteConfig
from mdmem.integrations import hooks
from mdmem.writes.journal import JOURNAL_DIR, Journal, _always_kept, _stored

SESSION = "7a1b2c3d-0000-4000-8000-0000000000cc"
WORDS = "the login test fails because a cookie race in the session fixture retries".split()
MB = 1_000_000


def _turn(n: int, rng: random.Random) -> str:
    kind = "user" if n % 2 else "assistant"
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(200, 500)))
    record = {
        "sessionId": SESSION,
        "isSidechain": False,
        "type": kind,
        "uuid": f"u-{n}",
        "parentUuid": f"u-{n - 1}",
        "timestamp": f"2026-03-01T{8 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "message": {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]},
    }  # fmt: skip
    return json.dumps(record) + "\n"


def _disk_bytes(folder: Path) -> int:
    """What the journal takes on disk: each file once, however many names it has (as du)."""
    inodes = {}
    for dirpath, _, names in os.walk(folder):
        for name in names:
            info = os.stat(Path(dirpath) / name)
            inodes[info.st_ino] = info.st_size
    return sum(inodes.values())


@pytest.mark.slow
def test_two_hundred_stops_keep_the_journal_under_its_caps(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    log = tmp_path / "claude" / "projects" / "p" / f"{SESSION}.jsonl"
    log.parent.mkdir(parents=True)
    rng = random.Random(40)
    journal = ws.files._state_dir / JOURNAL_DIR
    caps = WriteConfig()
    for n in range(1, 201):
        with log.open("a", encoding="utf-8") as handle:
            handle.write(_turn(n, rng))
        payload = {"hook_event_name": "Stop", "session_id": SESSION, "transcript_path": str(log)}
        if n in (1, 200):  # the installed hook command, as Claude Code runs it
            ran = mdmem(
                "-w",
                str(ws.root),
                "hooks",
                "run",
                "claude-code",
                "import",
                input=json.dumps(payload),
            )
            assert ran.returncode == 0, ran.stderr
        else:  # what that command calls (a new workspace object, as a new hook process)
            stopped = Workspace.open(ws.root)
            assert hooks.import_transcript(stopped, payload) is not None
            stopped.close()
        total = _disk_bytes(journal)
        assert total <= caps.journal_total_mb * MB, f"stop {n}: {total:,} bytes of journal"
        assert total <= caps.journal_mb * MB, f"stop {n}: {total:,} bytes for one file"
    assert log.stat().st_size > 400_000  # a long session, as in the report
    (session,) = (ws.root / ".sessions").glob("*.md")
    rel = f".sessions/{session.name}"
    versions = ws.files.versions(rel)
    # the last acknowledged write is what `mdmem recover` lists first, byte for byte
    assert versions[0].reason == "written"
    assert versions[0].read_bytes() == session.read_bytes()
    # no unedited version is stored twice: the replaced ones share the written ones' files
    stored = {v.path.stat().st_ino for v in versions}
    assert len(stored) <= len([v for v in versions if v.reason == "written"]) + 2
    assert len(versions) >= 10  # the cap leaves many versions of a 0.4 MB file to recover
    listed = mdmem("-w", str(ws.root), "recover", rel, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)[0]["id"] == versions[0].id


PAST = 0.3
"""A protection window the tests wait out (a sleep past it, never a timing assertion)."""


def test_a_replaced_version_equal_to_the_written_one_before_is_stored_once(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path, protect_s=PAST)
    first = journal.add("a.md", b"one\n", "written")
    same = journal.add("a.md", b"one\n", "replaced")  # nobody edited between
    time.sleep(PAST * 1.5)
    journal.add("a.md", b"one\ntwo\n", "written")  # the next prune shares it
    assert same.stat().st_ino == first.stat().st_ino
    edited = journal.add("a.md", b"one\ntwo\nthe person's\n", "replaced")
    time.sleep(PAST * 1.5)
    journal.add("a.md", b"three\n", "written")
    assert edited.stat().st_ino != first.stat().st_ino  # a person's edit is its own version
    # every distinct version is still listed and restorable, in order
    assert [v.read_bytes() for v in journal.entries("a.md")] == [
        b"three\n",
        b"one\ntwo\nthe person's\n",
        b"one\ntwo\n",
        b"one\n",
        b"one\n",
    ]


def test_a_replaced_file_inside_its_window_is_neither_shared_nor_dropped(tmp_path: Path) -> None:
    """A replaced file is the inode an editor may still write into (a late save the guard
    merges; ``mdmem recover`` has it when that merge fails): while recent, it stays itself."""
    journal = Journal(tmp_path, max_bytes=10, total_bytes=10, protect_s=3600)
    first = journal.add("a.md", b"one\n", "written")
    kept = tmp_path / "old"
    kept.write_bytes(b"one\n")
    replaced = journal.keep("a.md", kept)
    journal.add("a.md", b"one\ntwo and more than ten bytes\n", "written")
    assert replaced.exists() and replaced.stat().st_ino != first.stat().st_ino
    with replaced.open("ab") as editor:  # a save landing in the old inode, late
        editor.write(b"a late line\n")
    assert journal.entries("a.md")[1].read_bytes() == b"one\na late line\n"


def test_the_byte_cap_is_checked_by_a_process_that_prunes_once(tmp_path: Path) -> None:
    """A hook process writes once: its one prune must hold the file to ``max_bytes``."""
    for n in range(20):
        journal = Journal(tmp_path, max_bytes=1000, protect_s=0.0)  # a new process each time
        journal.add("s.md", bytes([65 + n]) * 300, "written")
    versions = journal.entries("s.md")
    assert sum(v.size for v in versions) <= 1000
    assert versions[0].read_bytes() == b"T" * 300  # the newest stays


def test_the_total_cap_drops_the_oldest_of_any_file_and_keeps_each_files_newest(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path, max_bytes=10_000, total_bytes=2_000, protect_s=0.0)
    for n in range(12):
        for rel in ("a.md", "b.md", "c.md"):
            journal.add(rel, f"{rel} {n} ".encode() * 20, "written")
            journal.add(rel, f"{rel} {n} person ".encode() * 10, "replaced")
    assert journal.size() <= 2_000
    for rel in ("a.md", "b.md", "c.md"):
        versions = journal.entries(rel)
        assert versions[0].read_bytes() == f"{rel} 11 person ".encode() * 10
        written = [v for v in versions if v.reason == "written"]
        assert written[0].read_bytes() == f"{rel} 11 ".encode() * 20
    # the oldest went: nothing of the first rounds is left
    assert all(b" 0 " not in v.read_bytes() for rel in "abc" for v in journal.entries(f"{rel}.md"))


def test_the_total_cap_keeps_every_files_last_acknowledged_write(tmp_path: Path) -> None:
    """Invariant 1 under the caps: whatever other files' writes push out, a file's last
    program write is found by ``mdmem recover``, even when a person's save came after it."""
    ws = Workspace.init(tmp_path / "w")
    (ws.root / "mdmem.toml").write_text(
        # no late-save window (so nothing is recent enough to be spared by the caps)
        'mode = "full"\n[write]\nlate_save_ms = 0\njournal_mb = 1\njournal_total_mb = 0.03\n'
    )
    ws = Workspace.open(ws.root)
    ws.remember("the deploy key lives in vault path ops/deploy", type="fact")
    acknowledged = (ws.root / "memory.md").read_bytes()
    ws.close()
    # a person rewrites the file: the write is gone from it
    (ws.root / "memory.md").write_text("# Memory\n\nstarted over\n")
    for n in range(40):  # other files' writes push the journal past its total cap
        other = Workspace.open(ws.root)
        other.remember(f"note {n} " + "padding words " * 10, type="fact", file=f"notes/n{n % 4}.md")
        other.close()
    assert _disk_bytes(ws.root / ".mdmem" / JOURNAL_DIR) <= 0.03 * MB
    ran = mdmem("-w", str(ws.root), "recover", "memory.md", "--json")
    assert ran.returncode == 0, ran.stderr
    versions = json.loads(ran.stdout)
    # the version before it (the oldest in the journal) went for the cap; the write stayed
    assert [v["reason"] for v in versions] == ["written"]
    assert Path(versions[0]["path"]).read_bytes() == acknowledged


# ---- the model: writes, a person's edits and new processes, over several files -----------------


class JournalModel(RuleBasedStateMachine):
    """Every actor of the journal as a rule: a program write to one of three files (what it
    replaced, then what it wrote), a person's edit between writes (so the next replaced version
    differs from the last written), and a new process (a fresh ``Journal``, as each hook is),
    with small caps so a few steps reach them. After every step: each file's last program
    write and newest version are listed, byte for byte; every version listed is one that was
    kept, under its reason; the caps hold unless only what is always kept is left; nothing is
    stored twice once out of its (zero) window."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="journal-model-"))
        self.journal = self._process()
        self.current: dict[str, bytes] = {}  # each file's text now
        self.kept: dict[str, list[tuple[str, bytes]]] = {}  # every version kept, oldest first
        self.n = 0

    def _process(self) -> Journal:
        return Journal(self.root, versions=4, max_bytes=600, total_bytes=1200, protect_s=0.0)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(rel=st.sampled_from(["a.md", "b.md", "c.md"]), grow=st.integers(1, 120))
    def program_write(self, rel: str, grow: int) -> None:
        self.n += 1
        before = self.current.get(rel, b"")
        after = before[-300:] + f"write {self.n} ".encode() + b"x" * grow + b"\n"
        replaced = self.root / "swap"
        replaced.write_bytes(before)
        self.journal.keep(rel, replaced)
        self.journal.add(rel, after, "written")
        self.current[rel] = after
        self.kept.setdefault(rel, []).extend([("replaced", before), ("written", after)])

    @rule(rel=st.sampled_from(["a.md", "b.md", "c.md"]))
    def person_edits(self, rel: str) -> None:
        if rel in self.current:
            self.current[rel] += b"a person's line\n"

    @rule()
    def new_process(self) -> None:
        self.journal = self._process()

    @invariant()
    def each_files_last_write_and_newest_version_are_listed(self) -> None:
        for rel, kept in self.kept.items():
            entries = self.journal.entries(rel)
            assert entries[0].reason == "written" and entries[0].read_bytes() == kept[-1][1]
            listed = {(e.reason, e.read_bytes()) for e in entries}
            assert listed <= set(kept), rel

    @invariant()
    def the_caps_hold(self) -> None:
        journal, floor = self.journal, time.time() + 1
        over_total = journal.size() > journal.total_bytes
        for folder, versions in journal._scan().items():
            only_kept = set(versions) <= _always_kept(versions, floor)
            assert only_kept or _stored(versions) <= journal.max_bytes, folder
            assert only_kept or not over_total, folder
            assert len([v for v in versions if v.reason == "written"]) <= journal.versions

    @invariant()
    def an_unedited_version_is_stored_once(self) -> None:
        for versions in self.journal._scan().values():
            written = None
            for version in versions[:-1]:  # the newest is shared at the next prune
                if version.reason == "written":
                    written = version
                elif written is not None and version.path.read_bytes() == written.path.read_bytes():
                    assert version.ino == written.ino, version.path


TestJournalModel = JournalModel.TestCase
# each step is a few real file writes and folder scans: a quarter of the profile's examples
# with 20 steps each (25 in dev and ci, 500 in deep), as the import-log model
TestJournalModel.settings = settings(
    max_examples=max(1, settings.default.max_examples // 4), stateful_step_count=20
)
