"""The import logs in ``.mdmem/imports/<id>/``: what each import wrote, and what ``undo`` needs
to take it back, kept small and bounded.

Claude Code's hooks import the growing session log at every stop, so one long session makes
hundreds of imports, each appending a few turns to the same session file. Keeping that file's
whole earlier text for each of them grew without bound (199 stops of a 0.46 MB session left
40.5 MB). So:

- **A delta, not a copy.** For a file it appended to, an import keeps only how to turn the text
  it wrote back into the text before (:func:`reverse_delta`: the few lines that changed, the
  frontmatter, the end of the events). The text it wrote is known by its hash, which ``undo``
  checks before applying the delta, so the delta need not hold what the import added.
- **The newest :data:`KEEP_WHOLE` logs stay whole**: each of them can be undone, newest first,
  as ``undo`` always worked (a file restores only when it is still what that import left).
- **Older logs keep only the files they created** (a line each): ``undo`` of an old import
  still moves its sessions to ``.trash/``, which is what undoing a whole conversation needs
  (the import that created it); the earlier texts of the files it appended to are dropped (they
  could only be restored after undoing every newer import that touched the file). An old log
  left with nothing it could undo is removed.
- **A hard cap** over the whole folder: at most :data:`MAX_LOGS` logs and :data:`MAX_BYTES`
  bytes, the oldest going first; the newest import's log is always kept.

:func:`prune` applies these after every import, under the import lock.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMPORTS_DIR = "imports"
"""Under ``.mdmem/``: one folder per import (its log, and how to undo what it appended)."""
LOG = "log.jsonl"
UNDONE = "undone.jsonl"
"""The log of an import that was undone (renamed, so undoing twice does nothing more)."""
BEFORE_DIR = "before"
KEEP_WHOLE = 100
"""The newest imports whose logs keep everything ``undo`` needs, appended files included."""
MAX_LOGS = 1000
"""At most this many import logs; the oldest go first."""
MAX_BYTES = 8_000_000
"""At most this many bytes in ``.mdmem/imports/``; the oldest logs go first (the newest
import's log is kept whatever its size)."""

_NAME = re.compile(r"(\d{8}_\d{6})_import(?:-(\d+))?")

Delta = list[tuple[int, int, str]]
"""``(start, end, text)``: lines ``start:end`` of the text an import wrote are replaced by
``text``; applied from the end back, they give the text before."""


# ---- deltas -----------------------------------------------------------------------------------


def reverse_delta(before: str, after: str) -> Delta:
    """How to get ``before`` back from ``after``, holding only ``before``'s lines that
    ``after`` lacks. Checked by applying it: the result is exact, or the whole text is kept."""
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, new, old, autojunk=False)
    delta = [
        (i1, i2, "".join(old[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]
    if apply_delta(after, delta) != before:  # never expected; a copy is always right
        return [(0, len(new), before)]
    return delta


def apply_delta(after: str, delta: Sequence[Sequence[Any]]) -> str:
    """The text before an import, from the text it wrote and :func:`reverse_delta`."""
    lines = after.splitlines(keepends=True)
    for start, end, text in sorted(delta, key=lambda op: op[0], reverse=True):
        lines[int(start) : int(end)] = [str(text)]
    return "".join(lines)


def write_delta(folder: Path, stem: str, delta: Delta) -> str:
    """Keep ``delta`` in the log's folder under a name of its own; returns the name."""
    where = folder / BEFORE_DIR
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    for n in range(1, 10_000):
        name = f"{stem}.delta.json" if n == 1 else f"{stem}-{n}.delta.json"
        try:
            with open(where / name, "x", encoding="utf-8") as handle:
                json.dump(delta, handle, ensure_ascii=False)
        except FileExistsError:
            continue
        return name
    raise FileExistsError(f"{where}: too many deltas for {stem}")


def earlier_text(folder: Path, entry: dict[str, Any], current: str) -> str | None:
    """The text a file had before the import that wrote ``current`` into it, from the log
    entry that names the file; None when the log no longer keeps it (pruned)."""
    if "delta" in entry:
        delta = json.loads((folder / BEFORE_DIR / entry["delta"]).read_text(encoding="utf-8"))
        return apply_delta(current, delta)
    if "before" in entry:  # logs written before deltas held the whole earlier text
        return (folder / BEFORE_DIR / entry["before"]).read_text(encoding="utf-8")
    return None


# ---- the logs, and their bound ------------------------------------------------------------


def sort_key(name: str) -> tuple[str, int]:
    """Import ids in the order they were made (``…_import-10`` after ``…_import-9``)."""
    match = _NAME.fullmatch(name)
    if match is None:
        return ("", 0)
    return (match.group(1), int(match.group(2) or 1))


def is_import_id(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def import_folders(imports: Path) -> list[Path]:
    """The import log folders, oldest first (folders of other names are not mdmem's: left)."""
    if not imports.is_dir():
        return []
    found = [p for p in imports.iterdir() if p.is_dir() and is_import_id(p.name)]
    return sorted(found, key=lambda p: sort_key(p.name))


def folder_bytes(path: Path | str) -> int:
    """Bytes in the files under ``path`` (0 when it is gone)."""
    total = 0
    try:
        with os.scandir(path) as items:
            for item in items:
                with contextlib.suppress(OSError):
                    if item.is_dir(follow_symlinks=False):
                        total += folder_bytes(item.path)
                    elif item.is_file(follow_symlinks=False):
                        total += item.stat(follow_symlinks=False).st_size
    except OSError:
        return 0
    return total


@dataclass(frozen=True)
class Pruned:
    """What one :func:`prune` did."""

    trimmed: tuple[str, ...]
    """Logs that dropped the earlier texts of the files they appended to."""
    removed: tuple[str, ...]
    """Logs removed whole."""


def prune(
    imports: Path,
    newest: str | None = None,
    *,
    keep_whole: int = KEEP_WHOLE,
    max_logs: int = MAX_LOGS,
    max_bytes: int = MAX_BYTES,
) -> Pruned:
    """Bound ``imports`` (see the module's docstring; the caps are parameters so a test can
    reach them in a few steps). ``newest`` (the import just made) is never removed. Runs under
    the import lock: no import is writing meanwhile."""
    folders = import_folders(imports)
    trimmed: list[str] = []
    removed: list[str] = []
    older = folders[: max(0, len(folders) - keep_whole)]
    for folder in older:
        if folder.name == newest:
            continue
        kept = _trim(folder)
        if kept is None:
            _remove(folder)
            removed.append(folder.name)
        elif kept:
            trimmed.append(folder.name)
    left = [f for f in folders if f.name not in removed]
    sizes = {f.name: folder_bytes(f) for f in left}
    total = sum(sizes.values())
    for folder in list(left):
        if len(left) <= max_logs and total <= max_bytes:
            break
        if folder.name == newest:
            continue
        _remove(folder)
        removed.append(folder.name)
        left.remove(folder)
        total -= sizes[folder.name]
    return Pruned(tuple(trimmed), tuple(removed))


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(line)
                if isinstance(value, dict):
                    yield value


def _trim(folder: Path) -> bool | None:
    """Drop what an old log keeps for the files it appended to. True when it dropped some,
    False when there was nothing to drop, None when nothing worth keeping is left (an undone
    import, one that only appended, or a folder without a log)."""
    log = folder / LOG
    if not log.exists():
        return None
    entries = list(_entries(log))
    if not any("created" in e for e in entries):
        return None
    if not (folder / BEFORE_DIR).exists() and not any(
        "delta" in e or "before" in e for e in entries
    ):
        return False
    lines = []
    for entry in entries:
        if "appended" in entry:
            entry = {"appended": entry["appended"], "sha": entry.get("sha", ""), "pruned": True}
        lines.append(json.dumps(entry) + "\n")
    temporary = folder / (LOG + ".tmp")
    temporary.write_text("".join(lines), encoding="utf-8")
    temporary.replace(log)
    shutil.rmtree(folder / BEFORE_DIR, ignore_errors=True)
    return True


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
