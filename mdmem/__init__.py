"""mdmem: file-first memory for AI agents.

Markdown files are the truth; everything else is derived. Start with::

    from mdmem import Workspace
    ws = Workspace.open(".")

Names are imported lazily so that ``mdmem --help`` stays instant.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `mdmem search` imports this package and not typing

__version__ = "0.1.0"

_EXPORTS = {
    "MEMORY_TYPES": "mdmem.markdown.entries",
    "Entry": "mdmem.markdown.entries",
    "ConfigError": "mdmem.errors",
    "ConflictError": "mdmem.errors",
    "EntryNotFoundError": "mdmem.errors",
    "FileProblem": "mdmem.errors",
    "InvalidNameError": "mdmem.errors",
    "MdmemError": "mdmem.errors",
    "ModeError": "mdmem.errors",
    "UnsafePathError": "mdmem.errors",
    "VersionConflict": "mdmem.errors",
    "WorkspaceNotFoundError": "mdmem.errors",
    "ScopeError": "mdmem.errors",
    "ParentCycleError": "mdmem.errors",
    "Document": "mdmem.markdown.parse",
    "Heading": "mdmem.markdown.parse",
    "Problem": "mdmem.markdown.parse",
    "Context": "mdmem.context.pack",
    "SourceUsage": "mdmem.context.pack",
    "Event": "mdmem.memory.sessions",
    "Session": "mdmem.memory.sessions",
    "SessionRecord": "mdmem.memory.sessions",
    "TaskItem": "mdmem.memory.task",
    "TaskState": "mdmem.memory.task",
    "WorldFact": "mdmem.memory.world",
    "Pool": "mdmem.memory.pool",
    "PoolEntry": "mdmem.memory.pool",
    "ParentSync": "mdmem.memory.resolvers",
    "CompactReport": "mdmem.reports",
    "ExtractReport": "mdmem.reports",
    "MemoryChange": "mdmem.reports",
    "LLMError": "mdmem.distill.llm",
    "Workspace": "mdmem.workspace",
    "RemoteIndex": "mdmem.index.postgres.remote",
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
    "VersionConflict",
    "WorkspaceNotFoundError",
    "ScopeError",
    "ParentCycleError",
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
    "Pool",
    "PoolEntry",
    "ParentSync",
    "CompactReport",
    "ExtractReport",
    "MemoryChange",
    "LLMError",
    "Workspace",
    "RemoteIndex",
]

if TYPE_CHECKING:
    from typing import Any

    from mdmem.context.pack import Context, SourceUsage
    from mdmem.distill.llm import LLMError
    from mdmem.errors import (
        ConfigError,
        ConflictError,
        EntryNotFoundError,
        FileProblem,
        InvalidNameError,
        MdmemError,
        ModeError,
        UnsafePathError,
        VersionConflict,
        WorkspaceNotFoundError,
    )
    from mdmem.index.postgres.remote import RemoteIndex
    from mdmem.markdown.entries import MEMORY_TYPES, Entry
    from mdmem.markdown.parse import Document, Heading, Problem
    from mdmem.memory.pool import Pool, PoolEntry
    from mdmem.memory.sessions import Event, Session, SessionRecord
    from mdmem.memory.task import TaskItem, TaskState
    from mdmem.memory.world import WorldFact
    from mdmem.reports import CompactReport, ExtractReport, MemoryChange
    from mdmem.workspace import Workspace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mdmem' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
