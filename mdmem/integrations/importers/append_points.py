"""Where an import's next turns go in a session file it wrote, remembered by the file's bytes.

Appending to an imported session (a Claude Code hook's Stop, two new messages) needs two things
from the file: the session's record (title, agent, start, rounds, tool counts) and the offset
at which the next event goes (the end of ``## Events``). Both come from a parse of the whole
file: ~280 ms for a session of 2,400 messages, plus the Markdown parser's import, at every Stop.

The import that writes the file knows both for the text it wrote: the session it recorded with
holds the record and the end of ``## Events`` (it appends one event after another that way,
:meth:`~mdmem.Session.resume`). :func:`remember` keeps them in ``.mdmem/import-appends.json``,
keyed by the SHA-256 of the text written; :func:`recall` gives them back only for a file whose
text has exactly that digest, so any other change (a person's edit, an undo, a late save merged
in, another program's write) makes the next import parse the file as it always did. What is
kept is a function of the bytes: it is what a parse of them would find (a test holds an import
that used it to one that parsed, byte for byte).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATE_FILE = "import-appends.json"
"""In the workspace's ``.mdmem/``."""
VERSION = 1
KEEP = 32
"""Session files remembered per workspace (the newest written; a workspace appends to a few)."""


@dataclass(frozen=True)
class AppendPoint:
    """What an import appending to a session file needs from it, for one exact text."""

    title: str
    agent: str
    started: str | None
    rounds: int
    tools: dict[str, int]
    offset: int
    """Character offset in the text where the next event goes."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def recall(state_dir: Path, rel: str, text: str) -> AppendPoint | None:
    """The append point remembered for ``rel`` when its text is ``text`` exactly; else None."""
    try:
        with open(state_dir / STATE_FILE, encoding="utf-8") as handle:
            state = json.load(handle)
        if state.get("version") != VERSION:
            return None
        entry = state["files"][rel]
        if entry["sha"] != digest(text):
            return None
        point = AppendPoint(
            str(entry["title"]),
            str(entry["agent"]),
            None if entry["started"] is None else str(entry["started"]),
            int(entry["rounds"]),
            {str(k): int(v) for k, v in dict(entry["tools"]).items()},
            int(entry["offset"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return point if 0 < point.offset <= len(text) else None


def remember(state_dir: Path, rel: str, text: str, point: AppendPoint | None) -> None:
    """Keep ``point`` for ``rel`` as ``text`` (or forget ``rel`` when None). Never raises: a
    state that cannot be written costs only the next import its shortcut."""
    path = state_dir / STATE_FILE
    try:
        try:
            with open(path, encoding="utf-8") as handle:
                state: dict[str, Any] = json.load(handle)
            if state.get("version") != VERSION or not isinstance(state.get("files"), dict):
                raise ValueError
        except (OSError, ValueError):
            state = {"version": VERSION, "files": {}}
        files = state["files"]
        known = files.pop(rel, None)
        if point is None and known is None:
            return
        if point is not None:
            files[rel] = {
                "sha": digest(text),
                "title": point.title,
                "agent": point.agent,
                "started": point.started,
                "rounds": point.rounds,
                "tools": point.tools,
                "offset": point.offset,
            }
        while len(files) > KEEP:
            files.pop(next(iter(files)))
        _replace_whole(path, json.dumps(state))
    except Exception:  # (the next import parses the file, as it always did)
        return


def _replace_whole(path: Path, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
