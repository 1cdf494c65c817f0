"""The files a new workspace starts with, and switching a workspace between its two modes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from string import Template

from mdmem.config import CONFIG_NAME, Mode
from mdmem.layout import (
    COMPACT_FILE,
    LEARNINGS_FILE,
    MEMORY_FILE,
    SESSIONS_DIR,
    TASK_FILE,
    WORLD_FILE,
)

TEMPLATES = {
    "mdmem.toml": CONFIG_NAME,
    "memory.md": MEMORY_FILE,
    "learnings.md": LEARNINGS_FILE,
    "task_process.md": TASK_FILE,
    "world_state.md": WORLD_FILE,
    "compact_memory.md": COMPACT_FILE,
    "gitignore": ".gitignore",
}
"""Template file → workspace file, in the order ``init`` writes them."""
FULL_ONLY = ("task_process.md", "world_state.md")
"""Templates only full mode writes: minimal mode has no task or world file."""


def check_mode(mode: str) -> Mode:
    if mode not in ("minimal", "full"):
        raise ValueError(f"mode must be 'minimal' or 'full', got {mode!r}")
    return mode  # type: ignore[return-value]


def init_files(root: Path, mode: Mode, agent: str) -> None:
    """Write every template the mode needs; existing files are never overwritten."""
    root.mkdir(parents=True, exist_ok=True)
    for template in TEMPLATES:
        if mode == "full" or template not in FULL_ONLY:
            from_template(root, template, mode=mode, agent=agent)
    if mode == "full":
        (root / SESSIONS_DIR).mkdir(exist_ok=True)


def switch_mode(
    root: Path, mode: Mode, agent: str, edit_config: Callable[[Callable[[str], str]], str]
) -> list[str]:
    """Set ``mode`` in mdmem.toml through ``edit_config`` (only that line changes), then create
    the files the mode needs that are missing. Never deletes a file; returns those created."""
    check_mode(mode)
    edit_config(lambda text: with_mode(text, mode))
    created = []
    for template in FULL_ONLY if mode == "full" else ("compact_memory.md",):
        if from_template(root, template, mode=mode, agent=agent):
            created.append(TEMPLATES[template])
    if mode == "full":
        (root / SESSIONS_DIR).mkdir(exist_ok=True)
    return created


def with_mode(text: str, mode: Mode) -> str:
    """mdmem.toml's text with its top-level ``mode`` line set (its comment kept), or added
    before the first table when there is none."""
    line = f'mode = "{mode}"'
    lines = text.splitlines(keepends=True)
    for n, current in enumerate(lines):
        if re.match(r"^\s*mode\s*=", current):
            comment = re.search(r"\s+#.*$", current.rstrip("\r\n"))
            ending = current[len(current.rstrip("\r\n")) :] or "\n"
            lines[n] = line + (comment.group(0) if comment else "") + ending
            return "".join(lines)
        if current.lstrip().startswith("["):  # top-level keys come before any table
            lines.insert(n, line + "\n")
            return "".join(lines)
    sep = "" if not text or text.endswith("\n") else "\n"
    return text + sep + line + "\n"


def from_template(root: Path, template: str, *, mode: str, agent: str) -> bool:
    """Write one template file into the workspace unless it exists; True if written."""
    text = (templates_dir() / template).read_text(encoding="utf-8")
    if template == "mdmem.toml":
        text = Template(text).substitute(mode=mode, agent=agent)
    try:
        with open(root / TEMPLATES[template], "x", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except FileExistsError:
        return False
    return True


def templates_dir() -> Path:
    """Templates ship inside the wheel as ``mdmem/templates``; a checkout has ``templates/``."""
    package = Path(__file__).parent.parent
    packaged = package / "templates"
    return packaged if packaged.is_dir() else package.parent / "templates"
