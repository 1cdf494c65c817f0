"""A model of the write path (issue 39): every actor a rule, the promises checked after every step.

Actors: two agents (two ``Workspace`` objects on one folder: two late-save guards, as two
processes have) calling remember, update, supersede, forget, pool compare-and-set increments,
task and world writes; a person's editor that reads a file (LF, or converted to CRLF as a
Windows editor or git's autocrlf does), types, edits and deletes its own lines, and saves its
buffer by rename or in place, fresh or stale, inside or outside the late-save window; and time
passing (a sleep past ``write.late_save_ms``, kept small here so the model runs fast).

What must hold (docs/writes.md, DESIGN.md invariants 1 and 4):

- every acknowledged program write is in its file: an entry with its latest text (live, or in
  ``## Archive`` once superseded), a task item, a world fact; the only exception is a stale copy
  a person saved after every window had closed, which replaces the writes it lacks: those must
  then be in the journal (``mdmem recover``);
- every line the person saved is in the file exactly once, until the person deletes or edits
  it; a line the person deleted or edited never comes back in its old form;
- no pool version is acknowledged twice, a read never returns a version below an acknowledged
  one, and (with every increment of one key read-then-compare-and-set) the value is the count
  of acknowledged increments;
- forgotten text is in no file (unless the person saved a copy holding it after the windows
  closed: their own text).

The checks that need the late-save windows closed run after each "time passes" step and at
the end; the others after every step. The failures this model found are pinned as plain
scenario tests in tests/integration/test_write_scenarios.py and test_pool_races.py.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from mdmem import ConflictError, VersionConflict, Workspace

WINDOW_MS = 150
SETTLE_S = 2 * WINDOW_MS / 1000 + 0.1
"""Past every window, with room for the guard's last look on a busy machine."""
INSIDE_S = WINDOW_MS / 2000
"""A save this soon after the file's last program write is inside its window for sure: it must
keep every write. Later, the model accepts a write replaced if the journal holds it."""
MEMORY, POOL, WORLD, TASK = "memory.md", "shared/default.md", "world_state.md", "task_process.md"
_ID = re.compile(r"<!--\s*mdmem\b[^>]*?\bid=([\w-]+)")


@dataclass
class Editor:
    """A person's editor holding one file: its buffer (in its own line endings) and the person's
    lines, in the order typed."""

    path: str
    crlf: bool
    buffer: str
    stale_since: int
    """The count of program writes to the file when the buffer was last in step with it."""
    mine: list[str] = field(default_factory=list)
    """The person's lines now in the buffer."""
    read_at: float = 0.0
    lacking: bool = False
    """Read while the file lacked an acknowledged write (a stale save's, not yet merged back):
    the merge-back is a program write after the read, within a window of it."""


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").split("\n")


def _pick(data: st.DataObject, choices: list[str]) -> str | None:
    """One of ``choices``, drawn as a plain index whatever their number: the files' state
    decides the choices (a merge's timing), and hypothesis replays a run's draws only if
    what is drawn does not depend on it."""
    index = data.draw(st.integers(0, 255))
    return choices[index % len(choices)] if choices else None


def _entry_line(text: str, entry_id: str) -> str | None:
    return next((line for line in _lines(text) if f"id={entry_id} " in line), None)


class WritePath(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root: Path | None = None

    @initialize()
    def setup(self) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="mdmem-write-model-")) / "ws"
        Workspace.init(self.root, mode="full", agent="a")
        config = self.root / "mdmem.toml"
        config.write_text(
            config.read_text() + f'\n[embedding]\nmodel = ""\n[redact]\nenabled = false\n'
            f"[write]\nlate_save_ms = {WINDOW_MS}\n"
        )
        self.agents = [Workspace.open(self.root) for _ in range(2)]
        self.n = 0
        self.writes: dict[str, int] = {}
        """Program writes acknowledged per file (an editor's buffer is stale when fewer)."""
        self.live: dict[str, str] = {}  # entry id -> its text as last acknowledged
        self.archived: set[str] = set()
        self.forgotten: list[str] = []
        self.in_journal: list[str] = []
        """Texts a stale save made outside every window replaced: the journal must hold them."""
        self.either: dict[str, str] = {}
        """Entries (id -> text) a stale save after a window may have replaced."""
        self.archived_either: set[str] = set()
        self.world_either: dict[str, str] = {}
        self.last_write: dict[str, float] = {}
        self.pool: dict[str, int] = {}  # key -> last acknowledged version (= its value)
        self.acked_versions: set[tuple[str, int]] = set()
        self.world: dict[str, str] = {}
        self.tasks: list[str] = []
        self.editors: dict[str, Editor] = {}
        self.person: dict[str, set[str]] = {}  # file -> the person's lines in their last save
        self.gone: dict[str, set[str]] = {}  # file -> lines the person deleted or edited away
        self.steps: list[str] = []
        """The steps so far, for a failure's message (a run without shrinking shows them)."""

    def teardown(self) -> None:
        if self.root is None:
            return
        try:
            self._settle()
            self._check_settled()
        finally:
            for ws in self.agents:
                ws.close()

    # ---- helpers ------------------------------------------------------------------------------

    def _step(self, what: str) -> None:
        self.steps.append(what)

    def _next(self) -> int:
        self.n += 1
        return self.n

    def _text(self, rel: str) -> str:
        assert self.root is not None
        try:
            return (self.root / rel).read_bytes().decode("utf-8").replace("\r\n", "\n")
        except FileNotFoundError:
            return ""

    def _wrote(self, rel: str) -> None:
        self.writes[rel] = self.writes.get(rel, 0) + 1
        self.last_write[rel] = time.monotonic()

    def _settle(self) -> None:
        time.sleep(SETTLE_S)
        for ws in self.agents:
            assert ws._w.writer.guard.wait(timeout=10.0), "a late-save window never closed"

    def _ids(self) -> list[str]:
        return sorted(self.live)

    # ---- the program -------------------------------------------------------------------------

    @rule(agent=st.integers(0, 1))
    def remember(self, agent: int) -> None:
        self._step(f"remember(agent={agent})")
        n = self._next()
        entry = self.agents[agent].remember(f"Fact {n} zq{n}: acknowledged")
        self.live[entry.id] = entry.text
        self._wrote(MEMORY)
        assert entry.text in self._text(MEMORY)

    @rule(agent=st.integers(0, 1), data=st.data())
    def update(self, agent: int, data: st.DataObject) -> None:
        entry_id = _pick(data, self._ids())
        if entry_id is not None:
            self._update(agent, entry_id)

    def _update(self, agent: int, entry_id: str) -> None:
        self._step(f"update(agent={agent}, {entry_id})")
        ws = self.agents[agent]
        found = [e for e in ws.entries(MEMORY) if e.id == entry_id]
        if not found:
            return
        n = self._next()
        try:
            entry = ws.update(found[0], text=f"Fact {n} zq{n}: an update of {entry_id}")
        except ConflictError:
            return
        self.live[entry_id] = entry.text
        self._wrote(MEMORY)

    @rule(agent=st.integers(0, 1), data=st.data())
    def supersede(self, agent: int, data: st.DataObject) -> None:
        entry_id = _pick(data, self._ids())
        if entry_id is not None:
            self._supersede(agent, entry_id)

    def _supersede(self, agent: int, entry_id: str) -> None:
        self._step(f"supersede(agent={agent}, {entry_id})")
        ws = self.agents[agent]
        found = [e for e in ws.entries(MEMORY) if e.id == entry_id]
        if not found:
            return
        n = self._next()
        try:
            new = ws.supersede(found[0], by=f"Fact {n} zq{n}: supersedes {entry_id}")
        except ConflictError:
            return
        del self.live[entry_id]
        self.archived.add(entry_id)
        self.live[new.id] = new.text
        self._wrote(MEMORY)

    @rule(agent=st.integers(0, 1), data=st.data())
    def forget(self, agent: int, data: st.DataObject) -> None:
        self._step(f"forget(agent={agent})")
        entry_id = _pick(data, self._ids())
        if entry_id is None:
            return
        ws = self.agents[agent]
        found = [e for e in ws.entries(MEMORY) if e.id == entry_id]
        if not found:
            return
        text = self.live.pop(entry_id)
        self.either.pop(entry_id, None)  # its journal copies go too: that is what forget does
        ws.forget(found[0])
        self.forgotten.append(text)
        self._wrote(MEMORY)
        assert text not in self._text(MEMORY)

    @rule(agent=st.integers(0, 1), key=st.sampled_from(["n", "m"]))
    def pool_increment(self, agent: int, key: str) -> None:
        """Read, then compare-and-set the value + 1 (the issue's counter)."""
        self._step(f"pool_increment({agent}, {key!r})")
        pool = self.agents[agent].sharing.pool()
        entry = pool.read(key)
        version = entry.version if entry else 0
        assert version >= self.pool.get(key, 0), (
            f"pool {key!r} read version {version} after version {self.pool[key]} was acknowledged"
        )
        value = entry.content if entry else 0
        try:
            written = pool.write(key, value + 1, writer=f"a{agent}", expected_version=version)
        except VersionConflict:
            return
        assert (key, written.version) not in self.acked_versions, (
            f"pool {key!r} version {written.version} acknowledged twice"
        )
        self.acked_versions.add((key, written.version))
        self.pool[key] = written.version
        self._wrote(POOL)

    @rule(agent=st.integers(0, 1), key=st.sampled_from(["db", "host"]))
    def world_set(self, agent: int, key: str) -> None:
        self._step(f"world_set({agent}, {key!r})")
        n = self._next()
        self.agents[agent].world.set(key, f"value{n}")
        self.world[key] = f"value{n}"
        self._wrote(WORLD)

    @rule(agent=st.integers(0, 1))
    def task_add(self, agent: int) -> None:
        self._step(f"task_add({agent})")
        n = self._next()
        self.agents[agent].task.add(f"step {n} of the plan")
        self.tasks.append(f"step {n} of the plan")
        self._wrote(TASK)

    # ---- the person --------------------------------------------------------------------------

    @rule(rel=st.sampled_from([MEMORY, POOL, WORLD]), crlf=st.booleans())
    def editor_reads(self, rel: str, crlf: bool) -> None:
        """The editor opens (or reloads) the file; its buffer is in its own line endings."""
        self._step(f"editor_reads({rel!r}, crlf={crlf})")
        text = self._text(rel)
        if not text:
            return
        buffer = text.replace("\n", "\r\n") if crlf else text
        mine = [line for line in self.person.get(rel, set()) if line in _lines(text)]
        lacking = rel == MEMORY and any(
            (line := _entry_line(text, i)) is None or acked not in line
            for i, acked in self.live.items()
        )
        self.editors[rel] = Editor(
            rel, crlf, buffer, self.writes.get(rel, 0), mine, time.monotonic(), lacking
        )

    @rule(
        data=st.data(),
        change=st.sampled_from(["type", "edit", "delete", "none"]),
        how=st.sampled_from(["rename", "in place"]),
    )
    def editor_saves(self, data: st.DataObject, change: str, how: str) -> None:
        """The person changes their buffer (types a line, edits or deletes one of their own)
        and saves it."""
        rel = _pick(data, sorted(self.editors))
        if rel is not None:
            self._change_and_save(self.editors[rel], change, how, data)

    def _change_and_save(
        self, editor: Editor, change: str, how: str, data: st.DataObject, also_type: bool = False
    ) -> None:
        rel = editor.path
        self._step(f"editor_saves({change!r}, {how!r}) on {rel}")
        nl = "\r\n" if editor.crlf else "\n"
        rows = editor.buffer.split(nl)
        typed = also_type or change == "type" or (change != "none" and not editor.mine)
        old = _pick(data, editor.mine)
        where = data.draw(st.sampled_from(["end", "paragraph"]))
        heading = data.draw(st.integers(0, 255))
        if change == "edit" and old is not None:
            new = f"{old} (edited {self._next()})"
            rows[rows.index(old)] = new
            editor.mine[editor.mine.index(old)] = new
            self.gone.setdefault(rel, set()).add(old)
        elif change == "delete" and old is not None:
            del rows[rows.index(old)]
            editor.mine.remove(old)
            self.gone.setdefault(rel, set()).add(old)
        if typed:
            editor.mine.append(self._person_line(rel, rows, where, heading))
        editor.buffer = nl.join(rows)
        self._save(editor, how)

    def _person_line(self, rel: str, rows: list[str], where: str, heading: int) -> str:
        n = self._next()
        if rel == MEMORY:
            if where == "paragraph":  # a paragraph before one of the headings
                headings = [i for i, row in enumerate(rows) if row.startswith("## ")]
                at = headings[heading % len(headings)] if headings else len(rows)
                line = f"A line the person typed {n}"
                rows[at:at] = [line, ""] if at == 0 or not rows[at - 1] else ["", line, ""]
                return line
            line = f"- PERSON {n}"
            while rows and rows[-1] == "":
                rows.pop()
            rows += [line, ""]
            return line
        if rel == POOL:  # a note under the title, outside every key's section
            line = f"A note from the person {n}"
            rows[1:1] = ["", line]
            return line
        line = f"Note {n} from the person"  # a paragraph of its own, not a fact's next line
        while rows and rows[-1] == "":
            rows.pop()
        rows += ["", line, ""]
        return line

    def _save(self, editor: Editor, how: str) -> None:
        assert self.root is not None
        path = self.root / editor.path
        data = editor.buffer.encode("utf-8")
        stale = editor.lacking or editor.stale_since < self.writes.get(editor.path, 0)
        last = self.last_write.get(editor.path, 0.0)
        if editor.lacking:  # the merge-back it lacked came after the read, as late as a window
            last = max(last, editor.read_at + WINDOW_MS / 1000)
        since = time.monotonic() - last
        if how == "rename":
            tmp = path.with_name(path.name + ".swp-save")
            tmp.write_bytes(data)
            tmp.replace(path)
        else:
            with open(path, "r+b") as handle:
                handle.truncate(0)
                handle.write(data)
        self.person[editor.path] = set(editor.mine)
        if stale and since > INSIDE_S:
            self._maybe_replaced(editor)
        if not stale:
            editor.stale_since = self.writes.get(editor.path, 0)
        # else the buffer still lacks the writes it lacked: the merge-back changed the file,
        # not the editor's buffer, and its next save is a stale copy again

    def _maybe_replaced(self, editor: Editor) -> None:
        """A stale copy saved after the window of the last write may have closed (each step
        takes real time) may replace the program's writes it lacks (docs/writes.md, "What
        remains"): each must then be in the file or in the journal, and is no longer owed."""
        text = editor.buffer.replace("\r\n", "\n")
        if editor.path == MEMORY:
            for entry_id, acked in self.live.items():
                line = _entry_line(text, entry_id)
                if line is None or acked not in line:
                    self.either[entry_id] = acked
            self.archived_either |= {i for i in self.archived if _entry_line(text, i) is None}
            self.forgotten = [t for t in self.forgotten if t not in text]  # the person's text
        elif editor.path == WORLD:
            for key, value in self.world.items():
                if f"{key}**: {value}" not in text:
                    self.world_either[key] = value
        # a pool file never goes back: its acknowledged versions hold whatever is saved

    def _resolve_either(self, memory: str, world: str) -> None:
        """Writes a late stale save may have replaced: in the file, still owed; else in the
        journal, and the file's version (if any) is what is owed from now on."""
        for entry_id, acked in self.either.items():
            line = _entry_line(memory, entry_id)
            if line is not None and acked in line:
                continue
            self.in_journal.append(acked)
            if entry_id in self.live and self.live[entry_id] == acked:
                if line is None:
                    del self.live[entry_id]
                else:
                    self.live[entry_id] = line.split("<!--")[0].strip().removeprefix("- ")
        for entry_id in self.archived_either:
            if _entry_line(memory, entry_id) is None:
                self.archived.discard(entry_id)
        for key, value in self.world_either.items():
            if f"{key}**: {value}" not in world and self.world.get(key) == value:
                self.in_journal.append(value)
                del self.world[key]
        self.either, self.archived_either, self.world_either = {}, set(), {}

    # ---- the interleavings the issue reported, as one step each ---------------------------
    # Picked one rule among many, a read, several writes and a stale save in a row are rare in
    # a 30-step run (the derandomized ci profile found none of D1, D2, D12, D13 on the code
    # before the fix). These rules play such a sequence in one step, its parts drawn.

    def _write_memory(self, op: str, agent: int, held: list[str]) -> None:
        """One program write of memory.md; an update or supersede targets an entry the
        person's copy holds when there is one (that is what the stale save then lacks)."""
        if op == "remember" or not self.live:
            self.remember(agent)
            return
        ids = [i for i in held if i in self.live] or self._ids()
        entry_id = ids[self.n % len(ids)]
        if op == "update":
            self._update(agent, entry_id)
        else:
            self._supersede(agent, entry_id)

    @rule(
        agent_ops=st.lists(
            st.tuples(st.integers(0, 1), st.sampled_from(["remember", "update", "supersede"])),
            min_size=1,
            max_size=3,
        ),
        after_ops=st.lists(
            st.tuples(st.integers(0, 1), st.sampled_from(["remember", "update", "supersede"])),
            max_size=2,
        ),
        crlf=st.booleans(),
        how=st.sampled_from(["rename", "in place"]),
        change=st.sampled_from(["type", "edit", "none"]),
        pause=st.sampled_from([0.0, 0.02, 0.04]),
        data=st.data(),
    )
    def stale_save_between_writes(
        self,
        agent_ops: list[tuple[int, str]],
        after_ops: list[tuple[int, str]],
        crlf: bool,
        how: str,
        change: str,
        pause: float,
        data: st.DataObject,
    ) -> None:
        """D1, D12: the editor reads memory.md, the agents write (remember, update or supersede
        an entry the copy holds), the person saves the stale copy inside the window (typing a
        line, editing one of theirs, or as it is: a CRLF editor changes every line ending),
        and the agents go on writing, on that save, before the guard looked."""
        if not self.live:
            self.remember(0)
        self.editor_reads(MEMORY, crlf)
        editor = self.editors[MEMORY]
        held = [i for i in self.live if _entry_line(editor.buffer, i) is not None]
        self._step(f"stale_save_between_writes: {agent_ops} pause={pause}")
        for agent, op in agent_ops:
            self._write_memory(op, agent, held)
        time.sleep(pause)
        self._change_and_save(editor, change, how, data)
        for agent, op in after_ops:
            self._write_memory(op, agent, held)

    @rule(
        how=st.sampled_from(["rename", "in place"]),
        crlf=st.booleans(),
        agent=st.integers(0, 1),
        data=st.data(),
    )
    def person_edits_own_line_again(
        self, how: str, crlf: bool, agent: int, data: st.DataObject
    ) -> None:
        """D13: the person saves a line of theirs, an agent writes on that save, and the person
        saves again from the same buffer (inside the window), their line edited and one more
        typed: the second save descends from the first, not from the version before it."""
        if not self.live:
            self.remember(agent)
        self.editor_reads(MEMORY, crlf)
        editor = self.editors[MEMORY]
        self._change_and_save(editor, "type", how, data)
        self.remember(agent)
        self._step("  the person edits their line and types one more")
        self._change_and_save(editor, "edit", how, data, also_type=True)

    @rule(agent=st.integers(0, 1), key=st.sampled_from(["n", "m"]), data=st.data())
    def pool_stale_save(self, agent: int, key: str, data: st.DataObject) -> None:
        """D2: the editor reads the pool file, an agent's compare-and-set writes the next
        version, the person saves their copy with a note, and the agents go on reading and
        writing versions."""
        self.pool_increment(agent, key)
        self.editor_reads(POOL, False)
        self.pool_increment(1 - agent, key)
        self._change_and_save(self.editors[POOL], "type", "rename", data)
        self.pool_increment(agent, key)

    # ---- time --------------------------------------------------------------------------------

    @rule()
    def time_passes(self) -> None:
        """Past every late-save window: what a save inside one changed is merged by now."""
        self._step("time_passes()")
        self._settle()
        self._check_settled()

    # ---- the promises ------------------------------------------------------------------------

    @invariant()
    def pool_never_goes_back(self) -> None:
        if self.root is None:
            return
        for key, version in self.pool.items():
            entry = self.agents[0].sharing.pool().read(key)
            assert entry is not None and entry.version >= version, (
                f"pool {key!r} reads version {entry and entry.version} after version {version} "
                f"was acknowledged\nsteps: {'; '.join(self.steps)}"
            )

    @invariant()
    def forgotten_text_stays_gone(self) -> None:
        if self.root is None:
            return
        text = self._text(MEMORY)
        for forgotten in self.forgotten:
            if any(e.stale_since < self.writes.get(MEMORY, 0) for e in self.editors.values()):
                continue  # a stale save may show it until its merge (checked when settled)
            assert forgotten not in text, f"forgotten text is back: {forgotten!r}"

    def _check_settled(self) -> None:
        try:
            self._check_settled_files()
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nsteps: {'; '.join(self.steps)}") from None

    def _check_settled_files(self) -> None:
        memory = self._text(MEMORY)
        self._resolve_either(memory, self._text(WORLD))
        lost = [
            t for i, t in self.live.items() if _entry_line(memory, i) is None or t not in memory
        ]
        assert not lost, f"acknowledged writes missing from memory.md: {lost}\n{memory}"
        for entry_id in self.archived:
            line = _entry_line(memory, entry_id)
            assert line is not None, f"superseded entry {entry_id} missing\n{memory}"
        for text in self.forgotten:
            assert text not in memory, f"forgotten text is back: {text!r}\n{memory}"
        for rel in (MEMORY, POOL, WORLD):
            lines = _lines(self._text(rel))
            for line in self.person.get(rel, set()):
                assert lines.count(line) == 1, (
                    f"{rel}: the person's line {line!r} is there {lines.count(line)} times\n"
                    + "\n".join(lines)
                )
            for line in self.gone.get(rel, set()) - self.person.get(rel, set()):
                assert line not in lines, (
                    f"{rel}: {line!r}, which the person deleted or edited, is back\n"
                    + "\n".join(lines)
                )
        pool = self.agents[1].sharing.pool()
        for key, version in self.pool.items():
            entry = pool.read(key)
            assert entry is not None, f"pool key {key!r} is gone"
            assert (entry.version, entry.content) == (version, version), (
                f"pool {key!r}: version {entry.version}, value {entry.content}; "
                f"{version} increments were acknowledged\n{self._text(POOL)}"
            )
        world = self._text(WORLD)
        for key, value in self.world.items():
            assert f"{key}**: {value}" in world, f"world fact {key}={value} lost\n{world}"
        task = self._text(TASK)
        for item in self.tasks:
            assert item in task, f"task item {item!r} lost\n{task}"
        if self.in_journal:
            assert self.root is not None
            kept = "".join(
                p.read_bytes().decode("utf-8", "replace")
                for p in (self.root / ".mdmem" / "journal").rglob("*")
                if p.is_file()
            )
            missing = [t for t in self.in_journal if t not in kept]
            assert not missing, f"replaced writes in no journal version: {missing}"


WritePath.TestCase.settings = settings(
    settings.default,
    # each example starts a workspace and sleeps past the window in its "time passes" steps
    # (about 4 s an example): bounded so that the ci profile's run stays near a minute on a
    # 2-core machine; `deep` (HYPOTHESIS_PROFILE=deep) runs 2000
    max_examples=min(settings.default.max_examples, 15)
    if settings.default.max_examples <= 100
    else settings.default.max_examples,
    stateful_step_count=30,
    deadline=None,
    # no shrinking: a failure here depends on timing, so replays while shrinking disagree
    # (hypothesis' "flaky") and cost minutes; the failing run's steps are printed as they ran
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
test_write_path_model = pytest.mark.slow(
    pytest.mark.xfail(
        reason="open (docs/writes.md, What remains): on a busy machine the model still fails "
        "now and then (a line the person deleted or edited back, or an acknowledged write "
        "lost), not yet reduced to scenarios; the losses it found before are fixed and "
        "replayed below. The failures depend on timing, so it is not strict",
        strict=False,
    )(WritePath.TestCase)
)


# ---- what the model found, replayed step by step ----------------------------------------------
# A state machine takes no @example: each shrunk failure is its rules called in order with the
# values it drew, then settled and checked as the model's teardown does. Each failed 5 of 5
# before its fix.


class _Draws:
    """The values a failing run drew from ``st.data()``, in order."""

    def __init__(self, *values: object) -> None:
        self.values = list(values)

    def draw(self, strategy: object, label: object = None) -> object:
        return self.values.pop(0)


def _replay(steps: list[dict[str, Any]]) -> None:
    machine = WritePath()
    machine.setup()
    try:
        for step in steps:
            machine.stale_save_between_writes(**step)
    finally:
        machine.teardown()  # settles, checks every acknowledged write, closes


@pytest.mark.slow
def test_a_supersede_next_to_two_updates_survives_a_clash_on_one_of_them() -> None:
    """A merge-back held a supersede, updates of the two entries after it and a remember, into
    a version with a newer update of the middle entry: one clash lost them all (the line merge,
    tests/integration/test_editor_races.py has the merge alone)."""
    _replay([
        dict(after_ops=[], agent_ops=[(0, "supersede")], change="edit", crlf=False,
             data=_Draws(143, "paragraph", 169), how="in place", pause=0.02),
        dict(after_ops=[(1, "remember"), (1, "remember")], agent_ops=[(1, "supersede")],
             change="none", crlf=False, data=_Draws(34, "end", 150), how="rename", pause=0.0),
        dict(after_ops=[], agent_ops=[(1, "update")], change="none", crlf=True,
             data=_Draws(254, "paragraph", 204), how="in place", pause=0.04),
        dict(after_ops=[(0, "update")], agent_ops=[(1, "supersede"), (1, "remember"), (0, "update")],
             change="edit", crlf=True, data=_Draws(1, "end", 153), how="rename", pause=0.04),
        dict(after_ops=[], agent_ops=[(0, "supersede")], change="none", crlf=True,
             data=_Draws(14, "paragraph", 22), how="rename", pause=0.02),
    ])  # fmt: skip


@pytest.mark.slow
def test_a_stale_save_an_agent_wrote_on_is_merged_against_what_it_was_read_from() -> None:
    """A person's stale in-place save, an agent's update made on it that did not stay (the
    save was put back over it): the other agent's guard took the save for a copy of itself
    (it lacked only that update), fell back to its own writes and merged against a version
    holding the first agent's supersede, which the save lacked: the supersede was lost."""
    _replay([
        dict(after_ops=[(1, "remember"), (0, "update")],
             agent_ops=[(0, "remember"), (0, "remember"), (0, "update")], change="none",
             crlf=True, data=_Draws(69, "paragraph", 163), how="rename", pause=0.04),
        dict(after_ops=[], agent_ops=[(0, "supersede"), (1, "supersede"), (1, "update")],
             change="edit", crlf=False, data=_Draws(0, "paragraph", 225), how="in place",
             pause=0.02),
        dict(after_ops=[(0, "supersede"), (1, "supersede")], agent_ops=[(0, "update")],
             change="none", crlf=False, data=_Draws(235, "end", 202), how="in place", pause=0.0),
    ])  # fmt: skip


@pytest.mark.slow
def test_a_write_on_another_agents_write_on_a_stale_save_keeps_that_agents_supersede() -> None:
    """A person's stale save, an agent's remember made on it, the other agent's remember made on
    that: the other agent's guard found no step after the version its write was made on and
    fell back to its own writes, merging against a version holding the first agent's
    supersede, which the save lacked: the supersede was lost (6 of 6 before the fix)."""
    _replay([
        dict(after_ops=[], agent_ops=[(1, "update")], change="none", crlf=True,
             data=_Draws(254, "paragraph", 204), how="in place", pause=0.04),
        dict(after_ops=[(0, "update")], agent_ops=[(1, "supersede"), (1, "remember"), (0, "update")],
             change="edit", crlf=True, data=_Draws(1, "end", 153), how="rename", pause=0.04),
        dict(after_ops=[], agent_ops=[(0, "supersede"), (1, "supersede"), (1, "update")],
             change="edit", crlf=False, data=_Draws(0, "paragraph", 225), how="in place",
             pause=0.02),
        dict(after_ops=[(1, "supersede"), (1, "update")],
             agent_ops=[(0, "remember"), (0, "update"), (1, "remember")], change="none",
             crlf=False, data=_Draws(40, "paragraph", 146), how="in place", pause=0.04),
    ])  # fmt: skip


@pytest.mark.slow
def test_a_stale_save_gets_what_it_lacked_under_the_update_made_on_it() -> None:
    """A person's stale save lacked an agent's remember and update; that agent then updated the
    same entry again, on the save. The other agent's guard merged its supersede as one change
    of the version the save was read from: the two updates clashed, and the merge that avoided
    the clash dropped the remember. What the save lacked now goes back into the save, and the
    writes made on it go on top (6 of 6 lost before)."""
    _replay([
        dict(after_ops=[], agent_ops=[(0, "supersede"), (1, "supersede")], change="none",
             crlf=False, data=_Draws(213, "paragraph", 89), how="rename", pause=0.0),
        dict(after_ops=[(0, "update"), (1, "remember")], agent_ops=[(1, "supersede")],
             change="edit", crlf=True, data=_Draws(225, "end", 116), how="rename", pause=0.02),
        dict(after_ops=[(1, "update")], agent_ops=[(1, "remember"), (1, "update"), (0, "supersede")],
             change="edit", crlf=False, data=_Draws(196, "paragraph", 228), how="rename",
             pause=0.02),
    ])  # fmt: skip


@pytest.mark.slow
def test_two_agents_updating_one_entry_through_stale_saves_keep_the_newer_update() -> None:
    """Agent 0 updated an entry; the person saved a copy lacking it, and agent 1 updated the
    same entry on that copy (the newer update); the person saved again, a copy lacking both.
    Agent 0's guard merged its writes back first, its older update with them; agent 1's then
    found its update clashing with that line, took the merge-back for a person's edit, and the
    newer update was lost (3 of 3 before). Where program lines clash, the newer one wins."""
    _replay([
        dict(after_ops=[(1, "supersede")], agent_ops=[(0, "supersede"), (1, "supersede"), (0, "update")],
             change="edit", crlf=True, data=_Draws(243, "paragraph", 187), how="in place", pause=0.0),
        dict(after_ops=[], agent_ops=[(1, "remember"), (1, "supersede")], change="none", crlf=True,
             data=_Draws(229, "paragraph", 156), how="rename", pause=0.02),
        dict(after_ops=[(0, "supersede"), (0, "supersede")],
             agent_ops=[(0, "supersede"), (0, "remember"), (0, "supersede")], change="edit",
             crlf=False, data=_Draws(157, "paragraph", 244), how="rename", pause=0.02),
        dict(after_ops=[(0, "supersede")], agent_ops=[(0, "update"), (0, "supersede"), (1, "remember")],
             change="none", crlf=True, data=_Draws(110, "paragraph", 55), how="in place", pause=0.04),
        dict(after_ops=[(1, "supersede"), (0, "remember")],
             agent_ops=[(1, "supersede"), (0, "update"), (0, "update")], change="none", crlf=False,
             data=_Draws(207, "end", 200), how="in place", pause=0.0),
        dict(after_ops=[(1, "supersede"), (1, "remember")], agent_ops=[(0, "supersede")], change="type",
             crlf=True, data=_Draws(103, "end", 173), how="rename", pause=0.04),
        dict(after_ops=[], agent_ops=[(0, "supersede"), (1, "remember")], change="type", crlf=True,
             data=_Draws(117, "paragraph", 110), how="rename", pause=0.0),
        dict(after_ops=[], agent_ops=[(0, "remember"), (0, "remember"), (0, "remember")], change="none",
             crlf=True, data=_Draws(70, "end", 176), how="rename", pause=0.0),
        dict(after_ops=[(1, "update")], agent_ops=[(1, "update"), (0, "supersede"), (0, "supersede")],
             change="edit", crlf=False, data=_Draws(37, "end", 5), how="in place", pause=0.0),
        dict(after_ops=[], agent_ops=[(1, "supersede"), (0, "supersede"), (0, "update")], change="none",
             crlf=False, data=_Draws(255, "paragraph", 129), how="in place", pause=0.0),
        dict(after_ops=[(0, "supersede")], agent_ops=[(1, "update")], change="edit", crlf=True,
             data=_Draws(37, "end", 147), how="in place", pause=0.02),
    ])  # fmt: skip
