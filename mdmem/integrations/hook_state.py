"""What a Claude Code import hook found last time, so that a run with nothing new costs what
Python costs.

``PreCompact``, ``Stop`` and ``SessionEnd`` each import the session's log; most runs find
nothing new (PreCompact right after a Stop; a Stop with no new record). Finding that out used
to cost the whole import machinery: the workspace, its configuration, the log read and
parsed, every session file's head (~0.3 s on a quiet machine, 11x ``python -c pass``).

After each import run, :func:`remember` keeps (in ``.mdmem/hook-imports.json``) what decides
the outcome of the next run, by the file system's word for each input: the log (device, inode,
size, modification and change times, taken before it was read and checked unchanged after),
the session file it maps to and the ``.sessions/`` folder (a file added, removed or renamed
changes the folder's times), ``mdmem.toml``, and the environment that decides where a log may be
read from. :func:`unchanged` answers a later run only when every one of them is as it was and
the last run left the conversation imported whole: then the import would find nothing new, and
the answer is the one it would print (the same bad records named). Anything else (a record
appended, a file edited, truncated or replaced, an undo, another workspace) and the import runs.
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False  # not typing's: this module is on a hook's path before anything else
if TYPE_CHECKING:
    from pathlib import Path

    from mdmem.integrations.importers import ImportReport

STATE_FILE = "hook-imports.json"
"""In the workspace's ``.mdmem/``."""
VERSION = 1
KEEP = 32
"""Logs remembered per workspace (the newest; a workspace sees one or a few at a time)."""
_SECONDS = " in 0.00 s"


def unchanged(root: Path, transcript: str) -> tuple[str, list[str]] | None:
    """What an import of ``transcript`` (an absolute path, as the hook's payload names it)
    would print when nothing it reads changed since the last run imported it whole: (the
    summary, the bad records' lines); else None (the import runs)."""
    started = time.perf_counter()
    if not os.path.isabs(transcript):
        return None
    try:
        with open(_state_path(root), encoding="utf-8") as handle:
            state = json.load(handle)
        entry = state["logs"][transcript]
        if state.get("version") != VERSION or entry["key"] != _key(root, transcript, entry):
            return None
        head, _, tail = str(entry["summary"]).partition("\0")
        seconds = time.perf_counter() - started
        return f"{head} in {seconds:.2f} s{tail}", [str(p) for p in entry["problems"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stat_of(path: str) -> list[int] | None:
    """A file's identity and state as the file system gives it, or None when it is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def remember(
    root: Path, transcript: str, before: list[int] | None, report: ImportReport | None
) -> None:
    """After an import run: what decides the next one (see the module's docstring), when the
    log was the same before and after it was read and its one conversation is imported whole.
    Otherwise the log is forgotten. Never raises: a state that cannot be written costs only
    the next run its shortcut."""
    import dataclasses

    try:
        path = _state_path(root)
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
            if state.get("version") != VERSION or not isinstance(state.get("logs"), dict):
                raise ValueError
        except (OSError, ValueError):
            state = {"version": VERSION, "logs": {}}
        logs = state["logs"]
        logs.pop(transcript, None)
        ok = report is not None and len(report.outcomes) == 1 and before is not None
        ok = ok and os.path.isabs(transcript)
        outcome = report.outcomes[0] if ok and report is not None else None
        if (
            report is not None
            and outcome is not None
            and outcome.status in ("created", "appended", "unchanged")
            and outcome.path
            and stat_of(os.path.realpath(transcript)) == before
        ):
            same = dataclasses.replace(outcome, status="unchanged", messages=0, redacted=0)
            again = dataclasses.replace(
                report, id=None, outcomes=(same,), seconds=0.0, extractions=()
            )
            text = again.summary()
            if text.count(_SECONDS) == 1:
                entry: dict[str, object] = {"session": outcome.path, "log": before}
                entry["key"] = _key(root, transcript, entry)
                entry["summary"] = text.replace(_SECONDS, "\0")
                entry["problems"] = [str(p) for p in report.problems]
                logs[transcript] = entry
        while len(logs) > KEEP:
            logs.pop(next(iter(logs)))
        replace_whole(path, json.dumps(state))
    except Exception:  # (the next run imports as it always did)
        return


def _key(root: Path, transcript: str, entry: dict[str, object]) -> list[object]:
    """Everything the outcome of an import of ``transcript`` depends on, as it is now; the
    log's own state as it was when it was read (``entry["log"]``) must still hold."""
    if stat_of(os.path.realpath(transcript)) != entry["log"]:
        return ["the log changed"]
    sessions = os.path.join(root, ".sessions")
    return [
        os.path.realpath(transcript),
        entry["log"],
        stat_of(os.path.join(root, str(entry["session"]))),
        stat_of(sessions),
        stat_of(os.path.join(root, "mdmem.toml")),
        os.environ.get("CLAUDE_CONFIG_DIR"),
        os.path.expanduser("~"),
        str(root),
    ]


def _state_path(root: Path) -> str:
    return os.path.join(root, ".mdmem", STATE_FILE)


def replace_whole(path: str, text: str) -> None:
    """Replace the file whole (a temporary file renamed over it): a hook killed mid-write
    leaves the last answer, never half of one."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
