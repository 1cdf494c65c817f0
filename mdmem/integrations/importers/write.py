"""Imported conversations into session files, written by mdmem's own :class:`~mdmem.Session`
so they read exactly like native ones; the record of each import, and its undo.

A conversation becomes ``.sessions/YYYYMMDD_HHMMSS_<slug>.md`` (its start time and title), its
frontmatter naming where it came from::

    source: chatgpt
    conversation: 6790f0c4-8a1c-8003-b1a4-6f0e1d2c3b4a   # the source's id: the idempotence key
    imported: 20261122_141519_import                    # the import that last wrote it
    source_messages: 42                                 # turns imported so far
    source_digest: 3f9a2c71d0e4b5a6                     # hash of those turns (a chain)

Importing the same conversation again writes nothing; when it has grown (a Claude Code log
still being written), only the new turns are appended. Every turn passes the secret redactor.
Each import keeps a log in ``.mdmem/imports/<id>/`` (the files it created, and for the files it
appended to, how to get the text before back), which ``undo`` reads; ``logs.py`` keeps those
logs small and bounded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.errors import EntryNotFoundError, ModeError
from mdmem.integrations.importers.common import (
    SESSIONS_DIR,
    BadRecord,
    Conversation,
    Turn,
    session_heads,
    session_skeleton,
    set_frontmatter,
    slugify,
)
from mdmem.integrations.importers.logs import (
    BEFORE_DIR,
    IMPORTS_DIR,
    KEEP_WHOLE,
    LOG,
    UNDONE,
    earlier_text,
    is_import_id,
    reverse_delta,
    sort_key,
    write_delta,
)

if TYPE_CHECKING:
    from mdmem import Session, Workspace
    from mdmem.markdown.parse import Document
    from mdmem.reports import ExtractReport

TRASH_DIR = ".trash"
"""Where an undone import's files go (moved, never deleted)."""
SUMMARY_IMPORTANCE = 0.8
_TITLE_CHARS = 120


@dataclass(frozen=True)
class Outcome:
    """What an import did with one conversation."""

    source: str
    conversation: str
    title: str
    status: str
    """``created``, ``appended`` (new turns of a conversation imported before), ``unchanged``,
    ``changed`` (what was imported is no longer how the source starts: left alone), ``empty``."""
    path: str | None
    messages: int
    """Turns written (or, in a dry run, that would be)."""
    redacted: int = 0
    where: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "conversation": self.conversation,
            "title": self.title,
            "status": self.status,
            "path": self.path,
            "messages": self.messages,
            "redacted": self.redacted,
            "where": self.where,
        }


@dataclass(frozen=True)
class ImportReport:
    """An import's result: each conversation's outcome, the bad records skipped, the time."""

    id: str | None
    """The import's id for ``undo`` (None in a dry run)."""
    dry_run: bool
    outcomes: tuple[Outcome, ...]
    problems: tuple[BadRecord, ...]
    seconds: float
    extractions: tuple[ExtractReport, ...] = field(default_factory=tuple)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def messages(self) -> int:
        return sum(o.messages for o in self.outcomes if o.status in ("created", "appended"))

    @property
    def redacted(self) -> int:
        return sum(o.redacted for o in self.outcomes)

    def summary(self) -> str:
        parts = [
            f"{self.count(s)} {s}" for s in ("created", "appended", "unchanged", "changed", "empty")
        ]
        parts = [p for p in parts if not p.startswith("0 ")]
        head = f"import {self.id}" if self.id else "import"
        plural = "" if len(self.outcomes) == 1 else "s"
        text = f"{head}: {len(self.outcomes)} conversation{plural}"
        text += f" ({', '.join(parts)})" if parts else ""
        text += f", {self.messages:,} messages in {self.seconds:.2f} s"
        if self.seconds > 0 and self.messages:
            text += f" ({self.messages / self.seconds:,.0f}/s)"
        if self.redacted:
            text += f"; {self.redacted} secrets masked"
        if self.problems:
            text += f"; {len(self.problems)} bad records skipped"
        if self.dry_run:
            text += "; dry run: nothing written"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "dry_run": self.dry_run,
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "redacted": self.redacted,
            "conversations": [o.to_dict() for o in self.outcomes],
            "problems": [str(p) for p in self.problems],
            "extractions": [e.to_dict() for e in self.extractions],
        }


@dataclass(frozen=True)
class UndoReport:
    """What undoing one import moved, restored and left alone."""

    id: str
    moved: tuple[str, ...]
    """Session files the import created, now in ``.trash/imports/<id>/``."""
    restored: tuple[str, ...]
    """Session files it appended to, back as they were before."""
    kept: tuple[str, ...]
    """Files left as they are, each with the reason."""

    def summary(self) -> str:
        text = (
            f"undo {self.id}: {len(self.moved)} session files moved to "
            f"{TRASH_DIR}/{IMPORTS_DIR}/{self.id}/, {len(self.restored)} restored"
        )
        return text + (f", {len(self.kept)} kept" if self.kept else "")

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "moved": list(self.moved),
            "restored": list(self.restored),
            "kept": list(self.kept),
        }


# ---- what was imported before ---------------------------------------------------------------


@dataclass(frozen=True)
class Known:
    """A conversation imported before, as its session file's frontmatter says: where, how
    many turns, and their digest."""

    path: str
    messages: int
    digest: str


def known_imports(root: Path) -> dict[tuple[str, str], Known]:
    """Imported conversations in ``.sessions/``, by (source, conversation id), read from the
    head of each file."""
    found: dict[tuple[str, str], Known] = {}
    for rel, front in session_heads(root, "source_messages"):
        source, conv = front.get("source"), front.get("conversation")
        count = str(front.get("source_messages", ""))
        if isinstance(source, str) and isinstance(conv, str) and count.isdigit():
            found[(source, conv)] = Known(rel, int(count), str(front.get("source_digest", "")))
    return found


def plan(conv: Conversation, known: Known | None) -> tuple[str, Sequence[Turn]]:
    """The status an import gives ``conv``, and the turns it writes."""
    if known is None:
        return ("created", conv.turns) if conv.turns else ("empty", ())
    n = known.messages
    if not conv.skipped <= n <= conv.count or not same_start(conv, n, known.digest):
        return "changed", ()
    if n == conv.count:
        return "unchanged", ()
    return "appended", conv.turns[n - conv.skipped :]


def same_start(conv: Conversation, count: int, digest: str) -> bool:
    """Whether ``digest`` (a session's ``source_digest``) is that of ``conv``'s first
    ``count`` turns, by the chain imports write now or the single hash they wrote before."""
    return conv.digest(count) == digest or conv.legacy_digest(count) == digest


# ---- writing ----------------------------------------------------------------------------------


class _Taken(Exception):
    """The session file name is in use: try the next one."""


class Writer:
    """Writes one import's conversations and keeps its log."""

    def __init__(self, ws: Workspace, import_id: str, agent: str | None) -> None:
        self.ws = ws
        self.id = import_id
        self.agent = agent
        self.folder = ws.files._state_dir / IMPORTS_DIR / import_id
        self._log = self.folder / LOG
        self.used = False
        """Whether it wrote anything (an import that wrote nothing leaves no trace)."""

    def write(
        self, conv: Conversation, status: str, turns: Sequence[Turn], known: Known | None
    ) -> Outcome:
        title = _title(self.ws, conv)
        if status == "created":
            path, masked = self._create(conv, title, turns)
        else:
            assert known is not None
            path, masked = self._append(conv, known, turns)
        return Outcome(conv.source, conv.id, title, status, path, len(turns), masked, conv.where)

    def _create(self, conv: Conversation, title: str, turns: Sequence[Turn]) -> tuple[str, int]:
        started = conv.start
        agent = self.agent or conv.source
        base = f"{started.strftime('%Y%m%d_%H%M%S')}_{slugify(title)}"
        front = {"source": conv.source, "conversation": conv.id}
        for n in range(1, 1000):
            stem = base if n == 1 else f"{base}-{n}"
            rel = f"{SESSIONS_DIR}/{stem}.md"
            if (self.ws.root / rel).exists():
                continue
            masked: list[int] = []

            def build(
                current: str, stem: str = stem, rel: str = rel, masked: list[int] = masked
            ) -> str:
                if current:
                    raise _Taken
                skeleton = session_skeleton(title, agent, started, writer=front)
                text, count = self._record(skeleton, rel, stem, title, agent, started, turns)
                masked[:] = [count]
                return self._stamp(text, conv, len(turns))

            try:
                text = self.ws.files.edit(rel, build)
            except _Taken:
                continue
            self._note({"created": rel, "sha": _sha(text)})
            return rel, masked[0]
        raise FileExistsError(f"{SESSIONS_DIR}/{base}.md: too many sessions with this name")

    def _append(self, conv: Conversation, known: Known, turns: Sequence[Turn]) -> tuple[str, int]:
        # What the session file tells (its record, where the new events go) comes from what
        # the last import remembered of the text it wrote (append_points.py), when the file is
        # still exactly that text; else from one parse of it (kept by the workspace's
        # documents, by its bytes), the record and the end of Events both read from it.
        from mdmem.integrations.importers import append_points
        from mdmem.writes.safe_writer import read_markdown

        state = self.ws.files._state_dir
        documents = self.ws._w.documents
        stem = Path(known.path).stem
        _, text_now = read_markdown(self.ws.root / known.path, known.path, documents.max_file_bytes)
        point = append_points.recall(state, known.path, text_now)
        parsed: Document | None = None
        if point is None:
            parsed = documents.read(known.path)
            record = self.ws.sessions.record(stem)
            point = append_points.AppendPoint(
                record.title, record.agent, record.started, record.rounds, dict(record.tools), 0
            )
        started = dt.datetime.fromisoformat(point.started) if point.started else conv.start
        resume = parsed if parsed is not None else (text_now, point.offset)
        before: list[str] = []
        masked: list[int] = []
        built: list[str] = []
        sessions: list[Session] = []

        def build(current: str) -> str:
            before[:] = [current]
            text, count = self._record(
                current,
                known.path,
                stem,
                point.title,
                point.agent,
                started,
                turns,
                tools=point.tools,
                rounds=point.rounds,
                parsed=resume,
                out=sessions,
            )
            masked[:] = [count]
            built[:] = [self._stamp(text, conv, known.messages + len(turns))]
            return built[0]

        text = self.ws.files.edit(known.path, build, create=False)
        delta = write_delta(self.folder, stem, reverse_delta(before[0], text))
        self._note({"appended": known.path, "sha": _sha(text), "delta": delta})
        after = None
        if built and text == built[0] and sessions:
            after = _point_after(sessions[0], point, text)
        append_points.remember(state, known.path, text, after)
        return known.path, masked[0]

    def _record(
        self,
        current: str,
        rel: str,
        stem: str,
        title: str,
        agent: str,
        started: dt.datetime,
        turns: Sequence[Turn],
        tools: Any = None,
        rounds: int = 0,
        parsed: Document | tuple[str, int] | None = None,
        out: list[Session] | None = None,
    ) -> tuple[str, int]:
        """``current`` with ``turns`` recorded by a :class:`~mdmem.Session` (in memory: the
        file is written once, by the caller), and the number of secrets masked. ``parsed``:
        the file as parsed before (or its text and where its events end), which the session
        appends after when ``current`` is still that text. ``out`` receives the session."""
        from mdmem import Session

        buffer = [current]
        now = [started]

        def write(edit: Any) -> str:
            buffer[0] = edit(buffer[0])
            return buffer[0]

        session = Session(
            stem,
            title,
            agent,
            path=rel,
            write=write,
            started=started,
            clock=lambda: now[0],
            redactor=self.ws.files._redactor,
        )
        session.tools = dict(tools or {})
        session.rounds = rounds
        if isinstance(parsed, tuple):
            if parsed[0] == current:
                session.resume_at(*parsed)
        elif parsed is not None and parsed.text == current:
            session.resume(parsed)
        masked = 0
        for turn in turns:
            now[0] = turn.time or now[0]
            masked += record_turn(session, turn)
        session.close("completed")
        if out is not None:
            out[:] = [session]
        return buffer[0], masked

    def _stamp(self, text: str, conv: Conversation, count: int) -> str:
        values = {
            "imported": self.id,
            "source_messages": count,
            "source_digest": conv.digest(count) or "",
        }
        return set_frontmatter(text, values)

    def _note(self, entry: dict[str, object]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.used = True
        with open(self._log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def _point_after(session: Session, was: Any, text: str) -> Any:
    """Where the next import's events go in ``text`` (what was written: the session's last
    text, then the import's frontmatter keys), and the record a parse of it would read; None
    when the session does not know where its events end, or the stamp changed more than the
    frontmatter."""
    from mdmem.integrations.importers.append_points import AppendPoint
    from mdmem.markdown.frontmatter import frontmatter_end

    tail = session.append_point
    if tail is None:
        return None
    wrote, offset = tail
    old_end, new_end = frontmatter_end(wrote), frontmatter_end(text)
    if old_end is None or new_end is None or offset < old_end or offset == 0:
        return None
    if text[new_end:] != wrote[old_end:]:
        return None
    tools = dict(session.tools)
    return AppendPoint(
        was.title, was.agent, was.started, session.rounds, tools, offset + new_end - old_end
    )


def record_turn(session: Session, turn: Turn) -> int:
    """One turn as the session event of its kind; returns the secrets masked in it."""
    side = "sidechain." if turn.sidechain else ""
    name = turn.name or "tool"
    try:
        if turn.kind == "tool_call" and not side:
            call, _ = session.tool(name, turn.text)
            return call.redacted
        if turn.kind == "tool_call":
            return session.event(f"{side}tool_call", f"{name}({turn.text})").redacted
        if turn.kind in ("tool_result", "error"):
            return session.event(f"{side}{turn.kind}", f"{name} → {turn.text}").redacted
        importance = SUMMARY_IMPORTANCE if turn.kind == "summary" else None
        event = session.event(f"{side}{turn.kind}", turn.text, importance)
    except ValueError:  # nothing printable left in it
        return 0
    if turn.kind == "user" and not side:
        session.rounds += 1  # one exchange; written with the frontmatter at the end
    return event.redacted


def _title(ws: Workspace, conv: Conversation) -> str:
    line = " ".join(conv.title.split())[:_TITLE_CHARS].strip()
    line = line.replace("<!--", "").replace("-->", "")
    return ws.files._redactor(line or f"{conv.source} conversation {conv.id[:8]}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---- the import's id, and its undo ------------------------------------------------------------


def check_full(ws: Workspace) -> None:
    if ws.config.mode != "full":
        raise ModeError(
            "import writes session files, which only full mode keeps; this workspace is "
            "minimal (switch with `mdmem mode full`)"
        )


def new_id(ws: Workspace) -> str:
    """A new import's id: its second, and a number after every id of that second that exists
    (never the first free one: a pruned log's id must not name a later import, or ``undo`` of
    the id printed earlier would undo another import, and ids would not sort by age)."""
    base = dt.datetime.now().strftime("%Y%m%d_%H%M%S_import")  # (a plain number to YAML)
    folder = ws.files._state_dir / IMPORTS_DIR
    taken = [sort_key(p.name)[1] for p in folder.glob(f"{base}*")] if folder.is_dir() else []
    n = max(taken, default=0) + 1
    return base if n == 1 else f"{base}-{n}"


def import_ids(ws: Workspace) -> list[str]:
    """The imports recorded in this workspace, newest first."""
    folder = ws.files._state_dir / IMPORTS_DIR
    if not folder.is_dir():
        return []
    names = [p.name for p in folder.iterdir() if (p / LOG).exists()]
    return sorted(names, key=sort_key, reverse=True)


def undo(ws: Workspace, import_id: str) -> UndoReport:
    """Revert one import: the session files it created move to ``.trash/imports/<id>/``; the
    ones it appended to get their earlier text back, unless they changed since (then they are
    kept, and the report says so). Running it twice does nothing more.

    A file appended to twice in one import goes back through both. An import older than the
    newest :data:`~mdmem.integrations.importers.logs.KEEP_WHOLE` no longer keeps the earlier
    texts (``logs.py``): its created files still move, its appended ones are kept and named."""
    folder = ws.files._state_dir / IMPORTS_DIR / import_id
    log = folder / LOG
    if not is_import_id(import_id):
        log = folder / "?"  # a path, or no id mdmem makes: never looked up
    elif (folder / UNDONE).exists():
        return UndoReport(import_id, (), (), ())
    if not log.exists():
        known = ", ".join(import_ids(ws)[:5]) or "none yet"
        raise EntryNotFoundError(
            f"no import {import_id!r} in this workspace (recent: {known}; an import older than "
            f"the newest {KEEP_WHOLE} is forgotten unless it created a session)"
        )
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    moved: list[str] = []
    restored: list[str] = []
    kept: dict[str, str] = {}
    for entry in reversed(entries):
        if "created" in entry:
            where = _move_to_trash(ws, entry["created"], import_id)
            if where:
                moved.append(entry["created"])
        elif "appended" in entry:
            rel = entry["appended"]
            if rel in kept:
                continue
            problem = _restore(ws, rel, folder, entry)
            if problem:
                kept[rel] = problem
                with contextlib.suppress(ValueError):
                    restored.remove(rel)
            elif rel not in restored:
                restored.append(rel)
    log.rename(folder / UNDONE)
    with contextlib.suppress(OSError):
        shutil.rmtree(folder / BEFORE_DIR)  # nothing reads them once undone
    notes = tuple(f"{rel}: {why}" for rel, why in kept.items())
    return UndoReport(import_id, tuple(moved), tuple(restored), notes)


def _move_to_trash(ws: Workspace, rel: str, import_id: str) -> str | None:
    source = ws.root / rel
    if not source.exists():
        return None
    target_dir = ws.root / TRASH_DIR / IMPORTS_DIR / import_id
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / source.name
    n = 1
    while target.exists():
        n += 1
        target = target_dir / f"{source.stem}-{n}{source.suffix}"
    os.rename(source, target)
    return str(target.relative_to(ws.root))


def _restore(ws: Workspace, rel: str, folder: Path, entry: dict[str, Any]) -> str | None:
    """Put back the text ``rel`` had before the import, if the file is still what the import
    wrote; else why not."""
    if not (ws.root / rel).exists():
        return "gone"

    class Changed(Exception):
        pass

    class Pruned(Exception):
        pass

    def edit(current: str) -> str:
        if _sha(current) != entry["sha"]:
            raise Changed
        earlier = earlier_text(folder, entry, current)
        if earlier is None:
            raise Pruned
        return earlier

    try:
        ws.files.edit(rel, edit, create=False)
    except Changed:
        return "changed since the import; left as it is"
    except Pruned:
        return (
            f"its earlier text is no longer kept (only the newest {KEEP_WHOLE} imports keep "
            "it); left as it is"
        )
    return None


def extract_all(
    ws: Workspace, outcomes: Iterable[Outcome], offline: bool, llm_kwargs: dict[str, Any]
) -> list[ExtractReport]:
    """Memory extraction on each session an import wrote."""
    reports = []
    for outcome in outcomes:
        if outcome.status in ("created", "appended") and outcome.path:
            record = ws.sessions.record(Path(outcome.path).stem)
            reports.append(ws.extract(record, offline=offline, **llm_kwargs))
    return reports
