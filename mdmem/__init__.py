"""mdmem: file-first memory for AI agents.

Markdown files are the truth; everything else is derived. Start with::

    from mdmem import Workspace
    ws = Workspace.open(".")

Names are imported lazily so that ``mdmem --help`` stays instant.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "MEMORY_TYPES": "mdmem.entries",
    "Entry": "mdmem.entries",
    "ConfigError": "mdmem.errors",
    "ConflictError": "mdmem.errors",
    "EntryNotFoundError": "mdmem.errors",
    "FileProblem": "mdmem.errors",
    "InvalidNameError": "mdmem.errors",
    "MdmemError": "mdmem.errors",
    "ModeError": "mdmem.errors",
    "UnsafePathError": "mdmem.errors",
    "WorkspaceNotFoundError": "mdmem.errors",
    "Document": "mdmem.markdown",
    "Heading": "mdmem.markdown",
    "Problem": "mdmem.markdown",
    "Context": "mdmem.context",
    "SourceUsage": "mdmem.context",
    "Event": "mdmem.sessions",
    "Session": "mdmem.sessions",
    "SessionRecord": "mdmem.sessions",
    "TaskItem": "mdmem.task",
    "TaskState": "mdmem.task",
    "WorldFact": "mdmem.world",
    "CompactReport": "mdmem.reports",
    "ExtractReport": "mdmem.reports",
    "MemoryChange": "mdmem.reports",
    "LLMError": "mdmem.llm",
    "Workspace": "mdmem.workspace",
}
__all__ = [  # noqa: RUF022 - grouped as in _EXPORTS
    "MEMORY_TYPES",
    "Entry",
    "ConfigError",
    "ConflictError",
    "EntryNotFoundError",
    "FileProblem",
    "InvalidNameError",
    "MdmemError",
    "ModeError",
    "UnsafePathError",
    "WorkspaceNotFoundError",
    "Document",
    "Heading",
    "Problem",
    "Context",
    "SourceUsage",
    "Event",
    "Session",
    "SessionRecord",
    "TaskItem",
    "TaskState",
    "WorldFact",
    "CompactReport",
    "ExtractReport",
    "MemoryChange",
    "LLMError",
    "Workspace",
]

if TYPE_CHECKING:
    from mdmem.context import Context, SourceUsage
    from mdmem.entries import MEMORY_TYPES, Entry
    from mdmem.errors import (
        ConfigError,
        ConflictError,
        EntryNotFoundError,
        FileProblem,
        InvalidNameError,
        MdmemError,
        ModeError,
        UnsafePathError,
        WorkspaceNotFoundError,
    )
    from mdmem.llm import LLMError
    from mdmem.markdown import Document, Heading, Problem
    from mdmem.reports import CompactReport, ExtractReport, MemoryChange
    from mdmem.sessions import Event, Session, SessionRecord
    from mdmem.task import TaskItem, TaskState
    from mdmem.workspace import Workspace
    from mdmem.world import WorldFact


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mdmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
