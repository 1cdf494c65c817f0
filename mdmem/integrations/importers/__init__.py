"""Chat histories into session files: ``import_path(ws, "export.zip")``.

Formats: ChatGPT and Claude.ai exports (``conversations.json``, or the ``.zip`` as downloaded),
Claude Code logs (``~/.claude/projects/<project>/<session>.jsonl``), Codex CLI logs
(``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) and a generic JSONL of
``{role, content, timestamp}``. Files are read as streams; a record that cannot be read is
reported by file and line and skipped. See ``write.py`` for what is written, idempotence and
undo.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.integrations.importers.common import BadInput, BadRecord, Conversation, text_stream
from mdmem.integrations.importers.export_files import FORMATS, Input, detect, inputs, reader
from mdmem.integrations.importers.logs import IMPORTS_DIR, prune
from mdmem.integrations.importers.write import (
    ImportReport,
    Outcome,
    UndoReport,
    Writer,
    check_full,
    extract_all,
    import_ids,
    known_imports,
    new_id,
    plan,
)
from mdmem.integrations.importers.write import undo as _undo

if TYPE_CHECKING:
    from mdmem import Workspace

__all__ = [
    "FORMATS",
    "BadRecord",
    "Conversation",
    "ImportReport",
    "Outcome",
    "UndoReport",
    "import_ids",
    "import_path",
    "read_conversations",
    "undo",
]

Progress = Callable[[int, int], None]
"""Called with (bytes read so far, bytes in all) as an import goes."""
LOCK_NAME = ".lock"


def import_path(
    ws: Workspace,
    path: str | os.PathLike[str],
    source: str | None = None,
    *,
    extract: bool = False,
    dry_run: bool = False,
    agent: str | None = None,
    offline: bool = False,
    progress: Progress | None = None,
    **llm_kwargs: Any,
) -> ImportReport:
    """Import every conversation in ``path`` (a file, a folder or a ``.zip``) as a session.

    ``source`` forces the format (default: told from each file's content). Conversations
    imported before are skipped, or get only their new turns. ``extract`` runs memory
    extraction on each session written (``offline`` and ``llm_kwargs`` as for
    :meth:`Workspace.extract`). ``agent`` names the sessions' agent (default: the source's
    name). ``dry_run`` writes nothing and reports what would be written.
    """
    if source is not None and source not in FORMATS:
        raise ValueError(f"unknown format {source!r}: one of {', '.join(FORMATS)}")
    check_full(ws)
    if agent is not None:
        from mdmem.config import check_name

        check_name(agent, "agent")
    started = time.perf_counter()
    lock = contextlib.nullcontext() if dry_run else _lock(ws)
    with lock:
        known = known_imports(ws.root)
        writer = None if dry_run else Writer(ws, new_id(ws), agent)
        problems: list[BadRecord] = []
        outcomes: list[Outcome] = []
        log = _resumable_log(Path(path), source, dry_run, progress)
        resumed = None
        if log is not None:
            from mdmem.integrations.importers import log_resume

            state_dir = ws.files._state_dir
            resumed = log_resume.read(log, state_dir, problems.append)
            if resumed.resumed and not _goes_on(resumed.conversation, known):
                # the session does not go on from where the log's memory stops: read it all
                problems.clear()
                resumed = log_resume.read(log, state_dir, problems.append, fresh=True)
            conversations: Any = [resumed.conversation] if resumed.conversation else []
        else:
            conversations = read_conversations(Path(path), source, problems.append, progress)
        for conv in conversations:
            status, turns = plan(conv, known.get((conv.source, conv.id)))
            previous = known.get((conv.source, conv.id))
            if writer is None or status not in ("created", "appended"):
                path_ = previous.path if previous else None
                outcomes.append(
                    Outcome(
                        conv.source, conv.id, conv.title, status, path_, len(turns), 0, conv.where
                    )
                )
                continue
            outcome = writer.write(conv, status, turns, previous)
            outcomes.append(outcome)
            if outcome.path:  # the same conversation twice in one import: append the second
                known[(conv.source, conv.id)] = _known_after(conv, outcome, previous)
        if log is not None and resumed is not None:
            whole = [o.status in ("created", "appended", "unchanged") for o in outcomes]
            kept = resumed if whole == [True] else log_resume.Read(None, False, None)
            log_resume.remember(ws.files._state_dir, log, kept)
        if writer is not None and writer.used:
            prune(ws.files._state_dir / IMPORTS_DIR, newest=writer.id)
    extractions: list[Any] = []
    if extract and not dry_run:
        extractions = extract_all(ws, outcomes, offline, llm_kwargs)
    return ImportReport(
        writer.id if writer is not None and writer.used else None,
        dry_run,
        tuple(outcomes),
        tuple(problems),
        time.perf_counter() - started,
        tuple(extractions),
    )


def _resumable_log(
    path: Path, source: str | None, dry_run: bool, progress: Progress | None
) -> Path | None:
    """``path`` when it is one Claude Code log that an import may read from where the last
    one stopped (:mod:`.log_resume`): a plain file (not an archive), the format given, a real
    import without a progress bar."""
    if source != "claude-code" or dry_run or progress is not None or not path.is_file():
        return None
    from mdmem.integrations.importers.export_files import is_zip

    return None if path.suffix.lower() == ".zip" or is_zip(path) else path


def _goes_on(conv: Conversation | None, known: dict[tuple[str, str], Any]) -> bool:
    """Whether a conversation read on from a remembered point goes on from its session file:
    the file counts no fewer turns than were skipped, and its digest is theirs."""
    if conv is None:
        return False
    before = known.get((conv.source, conv.id))
    if before is None or not conv.skipped <= before.messages <= conv.count:
        return False
    return bool(conv.digest(before.messages) == before.digest)


def read_conversations(
    path: Path,
    source: str | None,
    report: Callable[[BadRecord], None],
    progress: Progress | None = None,
) -> Any:
    """Every conversation in ``path``, streamed file by file."""
    with contextlib.ExitStack() as stack:
        items = inputs(path, stack)
        total = sum(i.size for i in items)
        done = [0]

        def advance(size: int) -> None:
            done[0] += size
            if progress is not None:
                progress(min(done[0], total), total)

        if progress is not None:
            progress(0, total)
        for item in items:
            start = done[0]
            yield from _read_one(item, source, report, advance)
            done[0] = start + item.size  # what was not read of it (a bad tail) counts as read
            if progress is not None:
                progress(min(done[0], total), total)


def _read_one(
    item: Input, source: str | None, report: Callable[[BadRecord], None], advance: Any
) -> Any:
    kind = source or detect(item)
    if kind is None:
        report(BadRecord(item.name, 1, f"not a known format (give --from: {', '.join(FORMATS)})"))
        return
    with item.open() as raw:
        stream = text_stream(raw, advance)
        try:
            yield from reader(kind)(stream, item.name, report)
        except BadInput as exc:
            report(exc.record)


def undo(ws: Workspace, import_id: str) -> UndoReport:
    """Revert one import (see :func:`mdmem.integrations.importers.write.undo`)."""
    with _lock(ws):
        return _undo(ws, import_id)


def _known_after(conv: Conversation, outcome: Outcome, previous: Any) -> Any:
    from mdmem.integrations.importers.write import Known

    count = (
        previous.messages if previous and outcome.status == "appended" else 0
    ) + outcome.messages
    return Known(outcome.path or "", count, conv.digest(count) or "")


def _lock(ws: Workspace) -> Any:
    """One import at a time per workspace (two hooks firing together must not both create
    the same conversation)."""
    from mdmem.writes.file_lock import FileLock

    folder = ws.files._state_dir / IMPORTS_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return FileLock(str(folder / LOCK_NAME))
