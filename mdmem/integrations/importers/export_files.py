"""Where conversations come from: a file, a folder of them, or a ``.zip`` archive as an export
is downloaded; and which format each file is in (from its content, unless the user says)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from mdmem.integrations.importers.common import Conversation, Report

MODULES = {
    "chatgpt": "chatgpt",
    "claude": "claude",
    "claude-code": "claude_code",
    "codex": "codex",
    "jsonl": "jsonl",
}
"""Each format (its reader's ``SOURCE``) → its reader's module, imported when a file of that
format is read: a Claude Code hook loads the Claude Code reader alone."""
FORMATS = tuple(MODULES)
EXPORT_NAME = "conversations.json"
"""The file of a ChatGPT or Claude.ai export that holds the conversations."""
_PEEK = 65_536
_EMPTY_ARRAY = re.compile(r"\s*\[\s*\]\s*")


@dataclass(frozen=True)
class Input:
    """One file to read: on disk, or a member of an archive."""

    name: str
    size: int
    open: Callable[[], IO[bytes]]


def reader(kind: str) -> Callable[[IO[str], str, Report], Iterator[Conversation]]:
    """The ``conversations`` reader of format ``kind`` (one of :data:`FORMATS`)."""
    module = importlib.import_module(f"mdmem.integrations.importers.{MODULES[kind]}")
    return module.conversations  # type: ignore[no-any-return]


def inputs(path: Path, stack: contextlib.ExitStack) -> list[Input]:
    """The files ``path`` holds: itself; in a folder, every export's ``conversations.json``,
    every ``.jsonl`` and every ``.zip`` (at any depth, in name order); in an archive, the
    same among its members. ``stack`` keeps archives open while they are read."""
    if path.is_dir():
        found: list[Input] = []
        for folder, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                if _wanted(name) or name.lower().endswith(".zip"):
                    found += _file_inputs(Path(folder) / name, stack)
        return found
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    return _file_inputs(path, stack, explicit=True)


def _file_inputs(path: Path, stack: contextlib.ExitStack, explicit: bool = False) -> list[Input]:
    if path.suffix.lower() == ".zip" or (explicit and is_zip(path)):
        import zipfile

        archive = stack.enter_context(zipfile.ZipFile(path))
        members = sorted(
            (i for i in archive.infolist() if not i.is_dir() and _wanted(i.filename)),
            key=lambda i: i.filename,
        )
        return [
            Input(f"{path}/{i.filename}", i.file_size, partial(archive.open, i)) for i in members
        ]
    if not explicit and not _wanted(path.name):
        return []
    return [Input(str(path), path.stat().st_size, lambda: open(path, "rb"))]


def is_zip(path: Path) -> bool:
    import zipfile  # (here: the importers of other formats never need it)

    return zipfile.is_zipfile(path)


def _wanted(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    return base == EXPORT_NAME or base.endswith(".jsonl")


def detect(item: Input) -> str | None:
    """The format of a file, from its first records; None when it is none of them."""
    from mdmem.integrations.importers import chatgpt, claude, claude_code, codex, jsonl

    with item.open() as handle:
        head = handle.read(_PEEK).decode("utf-8-sig", errors="replace")
    start = head.lstrip()[:1]
    if start == "[":
        if '"mapping"' in head:
            return chatgpt.SOURCE
        if '"chat_messages"' in head:
            return claude.SOURCE
        if _EMPTY_ARRAY.fullmatch(head):
            # an export with no conversations (``[]``): either export's reader reads it as none
            return chatgpt.SOURCE
        return None
    for line in head.splitlines()[:50]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        if codex.looks_like(record):
            return codex.SOURCE
        if claude_code.looks_like(record):
            return claude_code.SOURCE
        if jsonl.looks_like(record):
            return jsonl.SOURCE
    return None
