"""The import logs stay bounded: Claude Code's Stop hook imports the growing session at every
stop, and each import keeps a log for ``undo`` in ``.mdmem/imports/``. Those logs once kept the
whole earlier text of the session file per stop (199 stops of a 0.46 MB session: 40.5 MB);
now they keep deltas, the newest ``KEEP_WHOLE`` whole, and a hard cap over the folder
(mdmem/integrations/importers/logs.py). The same 200 stops hold the write journal's caps."""

from __future__ import annotations

import datetime as dt
import json
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from growing_session import SESSION, disk_bytes, stop_payload, turn
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from in_process import mdmem

from mdmem import Workspace
from mdmem.config import WriteConfig
from mdmem.errors import EntryNotFoundError
from mdmem.integrations import hooks
from mdmem.integrations.importers import import_ids, import_path, undo
from mdmem.integrations.importers.logs import (
    IMPORTS_DIR,
    KEEP_WHOLE,
    MAX_BYTES,
    MAX_LOGS,
    apply_delta,
    folder_bytes,
    prune,
    reverse_delta,
    sort_key,
)
from mdmem.writes.journal import JOURNAL_DIR, PROTECT_S

MB = 1_000_000


def _stop(ws: Workspace, log: Path, cli: bool) -> str:
    """What Claude Code's Stop hook runs: the installed command (in this process), or what that
    command calls once it has read the hook's JSON (typer's parsing costs 0.4 s a call)."""
    payload = stop_payload(log)
    if not cli:  # a new workspace object, closed after, as a hook process ends
        stopped = Workspace.open(ws.root)
        report = hooks.import_transcript(stopped, payload)
        stopped.close()
        assert report is not None
        return report.summary()
    ran = mdmem(
        "-w", str(ws.root), "hooks", "run", "claude-code", "import", input=json.dumps(payload)
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


@pytest.mark.slow
def test_two_hundred_stops_keep_the_import_logs_and_the_journal_under_their_caps(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One run of 200 stops holds both stores a stop grows: the import logs (``undo``) and the
    write journal (``recover``; tests/integration/test_journal_growth.py says how it once grew),
    checked after every stop."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))  # hooks read from there
    log = tmp_path / "claude" / "projects" / "p" / f"{SESSION}.jsonl"
    log.parent.mkdir(parents=True)
    rng = random.Random(40)
    imports = ws.files._state_dir / IMPORTS_DIR
    journal = ws.files._state_dir / JOURNAL_DIR
    caps = WriteConfig()
    texts: list[str] = []  # the session file after each stop
    ids: list[str] = []  # each stop's import
    session = ""
    for n in range(1, 201):
        with log.open("a", encoding="utf-8") as handle:
            handle.write(turn(n, rng))
        ids.append(_stop(ws, log, cli=n in (1, 200)).split()[1].rstrip(":"))
        (session,) = (p for p in (ws.root / ".sessions").glob("*.md"))
        texts.append(session.read_text(encoding="utf-8"))
        total = folder_bytes(imports)
        assert total <= MAX_BYTES, f"stop {n}: {total:,} bytes of import logs"
        total = disk_bytes(journal)
        assert total <= caps.journal_total_mb * MB, f"stop {n}: {total:,} bytes of journal"
        one = max((disk_bytes(f) for f in journal.iterdir() if f.is_dir()), default=0)
        assert one <= caps.journal_mb * MB, f"stop {n}: {one:,} bytes for one file"
    _check_the_journal(ws, Path(session))
    assert log.stat().st_size > 400_000  # a long session, as in the report
    assert len(set(ids)) == 200
    assert import_ids(ws) == [*reversed(ids[-KEEP_WHOLE:]), ids[0]]  # newest first
    assert len(import_ids(ws)) <= MAX_LOGS
    # the deltas: all the logs together are far smaller than the session file they undo
    assert folder_bytes(imports) < Path(session).stat().st_size // 4
    # the newest imports undo step by step, exactly
    assert undo(ws, ids[-1]).restored == (f".sessions/{Path(session).name}",)
    assert Path(session).read_text(encoding="utf-8") == texts[-2]
    assert undo(ws, ids[-2]).restored == (f".sessions/{Path(session).name}",)
    assert Path(session).read_text(encoding="utf-8") == texts[-3]
    # a stop that only appended and is older than KEEP_WHOLE newer ones is forgotten, said so
    with pytest.raises(EntryNotFoundError, match=f"older than the newest {KEEP_WHOLE}"):
        undo(ws, ids[50])
    # the import that created the session is kept: undoing it moves the session to .trash
    first = ids[0]
    assert json.loads((imports / first / "log.jsonl").read_text().splitlines()[0])["created"]
    done = undo(ws, first)
    assert done.moved == (f".sessions/{Path(session).name}",)
    assert not Path(session).exists()
    assert (ws.root / ".trash" / "imports" / first / Path(session).name).exists()


PROTECTED = dt.timedelta(seconds=PROTECT_S)


def _check_the_journal(ws: Workspace, session: Path) -> None:
    """After the 200 stops: ``mdmem recover`` lists the last write first, byte for byte; no
    unedited version is stored twice; the cap leaves many versions to recover."""
    rel = f".sessions/{session.name}"
    versions = ws.files.versions(rel)
    assert versions[0].reason == "written"
    assert versions[0].read_bytes() == session.read_bytes()
    # a replaced version shares the written one's file once it is older than PROTECT_S at a
    # prune (each write prunes): all but those replaced in the last PROTECT_S before the last
    # write (how many that is depends on the machine's speed: 3 stops a second on a quiet one)
    written = {v.path.stat().st_ino for v in versions if v.reason == "written"}
    for version in versions:
        if version.reason == "replaced" and version.time < versions[0].time - PROTECTED:
            assert version.path.stat().st_ino in written, f"{version.id} stored twice"
    assert len(versions) >= 10
    listed = mdmem("-w", str(ws.root), "recover", rel, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)[0]["id"] == versions[0].id


def test_an_old_import_keeps_what_it_created_and_says_what_it_no_longer_can(
    ws: Workspace, tmp_path: Path
) -> None:
    """Past KEEP_WHOLE newer imports, an import that created a session and appended to another
    still moves what it created; the appended file is kept, with the reason."""
    pair = tmp_path / "pair"
    pair.mkdir()
    first_log = pair / "a.jsonl"
    first_log.write_text('{"role": "user", "content": "first", "conversation_id": "a"}\n')
    import_path(ws, first_log, "jsonl")
    with first_log.open("a") as handle:
        handle.write('{"role": "assistant", "content": "a reply", "conversation_id": "a"}\n')
    second_log = pair / "b.jsonl"
    second_log.write_text('{"role": "user", "content": "second", "conversation_id": "b"}\n')
    both = import_path(ws, pair, "jsonl")
    assert sorted(o.status for o in both.outcomes) == ["appended", "created"]
    other = tmp_path / "other"
    other.mkdir()
    growing = other / "c.jsonl"
    for n in range(KEEP_WHOLE):
        with growing.open("a") as handle:
            handle.write(
                json.dumps({"role": "user", "content": f"turn {n}", "conversation_id": "c"}) + "\n"
            )
        import_path(ws, growing, "jsonl")
    assert both.id in import_ids(ws)
    assert not (ws.files._state_dir / IMPORTS_DIR / both.id / "before").exists()
    done = undo(ws, both.id)
    created = next(o.path for o in both.outcomes if o.status == "created")
    appended = next(o.path for o in both.outcomes if o.status == "appended")
    assert done.moved == (created,) and done.restored == ()
    assert done.kept == (f"{appended}: its earlier text is no longer kept (only the newest "
                         f"{KEEP_WHOLE} imports keep it); left as it is",)  # fmt: skip
    assert (ws.root / appended).exists()


def test_a_file_appended_twice_in_one_import_goes_back_through_both(
    ws: Workspace, tmp_path: Path
) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text('{"role": "user", "content": "hello", "conversation_id": "a"}\n')
    path = import_path(ws, log, "jsonl").outcomes[0].path
    assert path is not None
    before = (ws.root / path).read_text()
    longer = tmp_path / "longer"
    longer.mkdir()
    (longer / "1.jsonl").write_text(log.read_text() + '{"role": "assistant", "content": "hi"}\n')
    (longer / "2.jsonl").write_text(
        (longer / "1.jsonl").read_text() + '{"role": "user", "content": "bye"}\n'
    )
    report = import_path(ws, longer, "jsonl")
    assert [o.status for o in report.outcomes] == ["appended", "appended"]
    assert undo(ws, report.id).restored == (path,)
    assert (ws.root / path).read_text() == before


def test_a_log_written_before_deltas_still_undoes(ws: Workspace, tmp_path: Path) -> None:
    """Logs of earlier versions kept the whole earlier text (``"before": NAME``)."""
    log = tmp_path / "a.jsonl"
    log.write_text('{"role": "user", "content": "hello"}\n')
    path = import_path(ws, log, "jsonl").outcomes[0].path
    assert path is not None
    before = (ws.root / path).read_text()
    with log.open("a") as handle:
        handle.write('{"role": "assistant", "content": "hi"}\n')
    report = import_path(ws, log, "jsonl")
    folder = ws.files._state_dir / IMPORTS_DIR / str(report.id)
    (entry,) = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    (folder / "before" / entry.pop("delta")).unlink()
    (folder / "before" / "old.md").write_text(before)
    (folder / "log.jsonl").write_text(json.dumps({**entry, "before": "old.md"}) + "\n")
    assert undo(ws, str(report.id)).restored == (path,)
    assert (ws.root / path).read_text() == before


_LINES = st.lists(
    st.sampled_from(["a\n", "b\n", "\n", "---\n", "c", "é\r\n", "x y\n"]), max_size=30
)


@given(_LINES, _LINES)
def test_a_reverse_delta_gives_the_earlier_text_back(before: list[str], after: list[str]) -> None:
    old, new = "".join(before), "".join(after)
    assert apply_delta(new, reverse_delta(old, new)) == old


# ---- the model: stops, a person's edits, undos and pruning, in any order ----------------------


class ImportLogModel(RuleBasedStateMachine):
    """Every actor of the import logs as a rule: Claude Code's Stop hook importing growing logs
    (two conversations, so one import can create a session and append to another), a person
    editing a session file, ``undo`` of the newest import not undone yet, and pruning with
    small caps (so a few steps reach them). After every step: each log left is readable and
    holds what its entries name, the newest import's log is never removed, and the caps hold;
    each undo does exactly what its log still allows (checked in the rule)."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="import-logs-"))
        Workspace.init(self.root / "ws", mode="full", agent="a")
        (self.root / "ws" / "mdmem.toml").write_text(
            'mode = "full"\nagent = "a"\n[embedding]\nmodel = ""\n'
        )
        self.ws = Workspace.open(self.root / "ws")
        self.logs = self.root / "logs"
        self.logs.mkdir()
        self.turns = 0
        self.done: list[dict[str, Any]] = []  # each import that wrote: id, its files' texts

    def teardown(self) -> None:
        self.ws.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def imports(self) -> Path:
        return self.ws.files._state_dir / IMPORTS_DIR

    def _text(self, rel: str | None) -> str | None:
        if rel is None or not (self.ws.root / rel).exists():
            return None
        return (self.ws.root / rel).read_text(encoding="utf-8")

    @rule(grow=st.sets(st.sampled_from(["a", "b"]), min_size=1), n=st.integers(1, 2))
    def stop(self, grow: set[str], n: int) -> None:
        for conv in sorted(grow):
            with (self.logs / f"{conv}.jsonl").open("a", encoding="utf-8") as handle:
                for _ in range(n):
                    self.turns += 1
                    role = "user" if self.turns % 2 else "assistant"
                    record = {
                        "role": role,
                        "content": f"turn {self.turns}",
                        "conversation_id": conv,
                    }
                    handle.write(json.dumps(record) + "\n")
        sessions = sorted((self.ws.root / ".sessions").glob("*.md"))
        before = {f".sessions/{p.name}": p.read_text(encoding="utf-8") for p in sessions}
        report = import_path(self.ws, self.logs, "jsonl")
        wrote = [o for o in report.outcomes if o.status in ("created", "appended")]
        assert {o.status for o in report.outcomes} <= {"created", "appended", "unchanged"}
        assert report.id is not None and wrote
        self.done.append({
            "id": report.id, "undone": False,
            "files": [(o.status, o.path, before.get(str(o.path)), self._text(o.path)) for o in wrote],
        })  # fmt: skip

    @rule(words=st.sampled_from(["a person's note", "fixed the port to 5433"]))
    def person_edits(self, words: str) -> None:
        live = [p for p in sorted((self.ws.root / ".sessions").glob("*.md"))]
        if live:
            live[-1].write_text(live[-1].read_text(encoding="utf-8") + f"\n{words}\n")

    @rule()
    def undo_newest(self) -> None:
        waiting = [d for d in self.done if not d["undone"]]
        if not waiting:
            return
        last = waiting[-1]
        last["undone"] = True
        folder = self.imports / last["id"]
        current = {path: self._text(path) for _, path, _, _ in last["files"]}
        if not (folder / "log.jsonl").exists():  # forgotten whole: said so, nothing touched
            with pytest.raises(EntryNotFoundError, match="older than the newest"):
                undo(self.ws, last["id"])
            assert {path: self._text(path) for path in current} == current
            return
        whole = (folder / "before").exists()
        report = undo(self.ws, last["id"])
        moved, restored, kept = [], [], []
        for status, path, before, after in last["files"]:
            now = current[path]
            if status == "created":
                moved += [path] if now is not None else []
                assert self._text(path) is None
            elif now is None:
                kept.append(f"{path}: gone")
            elif now != after:
                kept.append(f"{path}: changed since the import; left as it is")
                assert self._text(path) == now
            elif whole:
                restored.append(path)
                assert self._text(path) == before
            else:
                kept.append(
                    f"{path}: its earlier text is no longer kept (only the newest {KEEP_WHOLE} "
                    "imports keep it); left as it is"
                )
                assert self._text(path) == now
        assert sorted(report.moved) == sorted(moved)
        assert sorted(report.restored) == sorted(restored)
        assert sorted(report.kept) == sorted(kept)

    @rule(keep=st.integers(1, 3), most=st.integers(1, 4))
    def prune_with_small_caps(self, keep: int, most: int) -> None:
        newest = self.done[-1]["id"] if self.done else None
        prune(self.imports, newest, keep_whole=keep, max_logs=most, max_bytes=10**9)
        self.caps = (keep, most)

    @invariant()
    def logs_are_readable_and_the_newest_is_kept(self) -> None:
        for folder in (p for p in self.imports.glob("*_import*") if p.is_dir()):
            logs = [folder / n for n in ("log.jsonl", "undone.jsonl") if (folder / n).exists()]
            assert len(logs) == 1, folder
            entries = [
                json.loads(line) for line in logs[0].read_text(encoding="utf-8").splitlines()
            ]
            if logs[0].name == "log.jsonl":  # (an undone import's deltas are let go)
                for entry in entries:
                    if "delta" in entry:
                        assert (folder / "before" / entry["delta"]).exists(), entry
        if self.done:
            assert (self.imports / self.done[-1]["id"]).is_dir()

    @invariant()
    def no_id_names_two_imports(self) -> None:
        ids = [d["id"] for d in self.done]
        assert len(set(ids)) == len(ids), ids
        assert ids == sorted(ids, key=sort_key)  # and ids sort by age

    @invariant()
    def the_caps_hold(self) -> None:
        assert folder_bytes(self.imports) <= MAX_BYTES
        assert len([p for p in self.imports.glob("*_import*") if p.is_dir()]) <= MAX_LOGS


TestImportLogModel = ImportLogModel.TestCase
# each step is a real import (a locked, fsynced write and its log): a quarter of the profile's
# examples (25 in dev and ci: about 30 s on the shared 2-core machine; 500 in deep)
TestImportLogModel.settings = settings(
    max_examples=max(1, settings.default.max_examples // 4), stateful_step_count=20
)


def test_model_scenario_a_trimmed_import_undoes_what_it_still_can() -> None:
    """A step sequence the model reaches rarely in its bounded run, written out: an import that
    created one session and appended to another is trimmed by a prune; undone after the newer
    one, it moves what it created and keeps the appended file, saying why."""
    model = ImportLogModel()
    try:
        model.stop(grow={"a"}, n=1)
        model.stop(grow={"a", "b"}, n=1)
        model.stop(grow={"a"}, n=1)
        model.prune_with_small_caps(keep=1, most=4)
        model.logs_are_readable_and_the_newest_is_kept()
        assert not (model.imports / model.done[1]["id"] / "before").exists()
        model.undo_newest()  # restores a's text before the third stop
        model.undo_newest()  # moves b; a's earlier text is no longer kept
        model.logs_are_readable_and_the_newest_is_kept()
        model.undo_newest()  # the first: moves a
        assert list((model.ws.root / ".sessions").glob("*.md")) == []
    finally:
        model.teardown()


def test_model_scenario_a_pruned_imports_id_is_never_given_again(ws: Workspace) -> None:
    """Found by the model (deep profile): the first import of a second was pruned, and the next
    import of that second took its id back, so ``undo`` of the id printed for the first undid
    the later one (and ids no longer sorted by age). Written out with the clock's next few
    seconds taken as they would be: an id of each second already given, the bare one pruned."""
    imports = ws.files._state_dir / IMPORTS_DIR
    now = dt.datetime.now()
    for s in range(6):  # this second and the next five: whichever the import falls in
        stamp = (now + dt.timedelta(seconds=s)).strftime("%Y%m%d_%H%M%S")
        (imports / f"{stamp}_import-2").mkdir(parents=True)  # "-2" kept, the bare id pruned
        (imports / f"{stamp}_import-2" / "log.jsonl").write_text('{"created": "x.md"}\n')
    log = ws.root.parent / "a.jsonl"
    log.write_text('{"role": "user", "content": "hello", "conversation_id": "a"}\n')
    report = import_path(ws, log, "jsonl")
    assert report.id is not None and report.id.endswith("_import-3"), report.id
