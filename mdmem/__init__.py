"""mdmem: file-first memory for AI agents.

Markdown files are the truth; everything else is derived. Start with::

    from mdmem import Workspace
    ws = Workspace.open(".")

Names are imported lazily so that ``mdmem --help`` stays instant: ``_EXPORTS`` below is the one
list of the public names (``__all__`` and ``dir(mdmem)`` come from it); the imports under
``TYPE_CHECKING`` show the same names to type checkers
(``tests/integration/test_public_api.py`` holds the two to each other).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `mdmem search` imports this package and not typing

__version__ = "0.1.0"

_EXPORTS = {
    "Workspace": "mdmem.workspace",
    "MEMORY_TYPES": "mdmem.markdown.entries",
    "Entry": "mdmem.markdown.entries",
    "Document": "mdmem.markdown.parse",
    "Heading": "mdmem.markdown.parse",
    "Problem": "mdmem.markdown.parse",
    "Hit": "mdmem.index.search",
    "SearchResults": "mdmem.index.search",
    "SearchRequest": "mdmem.index.request",
    "Context": "mdmem.context.pack",
    "SourceUsage": "mdmem.context.pack",
    "Event": "mdmem.memory.session_format",
    "Session": "mdmem.memory.session_writer",
    "SessionRecord": "mdmem.memory.session_format",
    "TaskItem": "mdmem.memory.task",
    "TaskState": "mdmem.memory.task",
    "WorldFact": "mdmem.memory.world",
    "Pool": "mdmem.sharing.pool",
    "PoolEntry": "mdmem.sharing.pool",
    "ParentSync": "mdmem.sharing.resolvers",
    "CompactReport": "mdmem.reports",
    "ExtractReport": "mdmem.reports",
    "MemoryChange": "mdmem.reports",
    "RemoteIndex": "mdmem.index.postgres.remote",
    "MdmemError": "mdmem.errors",
    "ConfigError": "mdmem.errors",
    "ConflictError": "mdmem.errors",
    "EntryNotFoundError": "mdmem.errors",
    "FileProblem": "mdmem.errors",
    "InvalidNameError": "mdmem.errors",
    "ModeError": "mdmem.errors",
    "ParentCycleError": "mdmem.errors",
    "ScopeError": "mdmem.errors",
    "UnsafePathError": "mdmem.errors",
    "VersionConflict": "mdmem.errors",
    "WorkspaceNotFoundError": "mdmem.errors",
    "EditNotApplicable": "mdmem.errors",
    "QueryTooLongError": "mdmem.errors",
    "StateDirError": "mdmem.errors",
    "DiskFullError": "mdmem.errors",
    "LLMError": "mdmem.distill.llm",
}
__all__ = [*_EXPORTS]

if TYPE_CHECKING:  # `X as X`: an explicit re-export (mypy's no_implicit_reexport)
    from typing import Any

    from mdmem.context.pack import Context as Context
    from mdmem.context.pack import SourceUsage as SourceUsage
    from mdmem.distill.llm import LLMError as LLMError
    from mdmem.errors import ConfigError as ConfigError
    from mdmem.errors import ConflictError as ConflictError
    from mdmem.errors import DiskFullError as DiskFullError
    from mdmem.errors import EditNotApplicable as EditNotApplicable
    from mdmem.errors import EntryNotFoundError as EntryNotFoundError
    from mdmem.errors import FileProblem as FileProblem
    from mdmem.errors import InvalidNameError as InvalidNameError
    from mdmem.errors import MdmemError as MdmemError
    from mdmem.errors import ModeError as ModeError
    from mdmem.errors import ParentCycleError as ParentCycleError
    from mdmem.errors import QueryTooLongError as QueryTooLongError
    from mdmem.errors import ScopeError as ScopeError
    from mdmem.errors import StateDirError as StateDirError
    from mdmem.errors import UnsafePathError as UnsafePathError
    from mdmem.errors import VersionConflict as VersionConflict
    from mdmem.errors import WorkspaceNotFoundError as WorkspaceNotFoundError
    from mdmem.index.postgres.remote import RemoteIndex as RemoteIndex
    from mdmem.index.request import SearchRequest as SearchRequest
    from mdmem.index.search import Hit as Hit
    from mdmem.index.search import SearchResults as SearchResults
    from mdmem.markdown.entries import MEMORY_TYPES as MEMORY_TYPES
    from mdmem.markdown.entries import Entry as Entry
    from mdmem.markdown.parse import Document as Document
    from mdmem.markdown.parse import Heading as Heading
    from mdmem.markdown.parse import Problem as Problem
    from mdmem.memory.session_format import Event as Event
    from mdmem.memory.session_format import SessionRecord as SessionRecord
    from mdmem.memory.session_writer import Session as Session
    from mdmem.memory.task import TaskItem as TaskItem
    from mdmem.memory.task import TaskState as TaskState
    from mdmem.memory.world import WorldFact as WorldFact
    from mdmem.reports import CompactReport as CompactReport
    from mdmem.reports import ExtractReport as ExtractReport
    from mdmem.reports import MemoryChange as MemoryChange
    from mdmem.sharing.pool import Pool as Pool
    from mdmem.sharing.pool import PoolEntry as PoolEntry
    from mdmem.sharing.resolvers import ParentSync as ParentSync
    from mdmem.workspace import Workspace as Workspace


if not TYPE_CHECKING:  # hidden from type checkers: for them a misspelt name is an error

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
