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
    "UnsafePathError": "mdmem.errors",
    "WorkspaceNotFoundError": "mdmem.errors",
    "Document": "mdmem.markdown",
    "Heading": "mdmem.markdown",
    "Problem": "mdmem.markdown",
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
    "UnsafePathError",
    "WorkspaceNotFoundError",
    "Document",
    "Heading",
    "Problem",
    "Workspace",
]

if TYPE_CHECKING:
    from mdmem.entries import MEMORY_TYPES, Entry
    from mdmem.errors import (
        ConfigError,
        ConflictError,
        EntryNotFoundError,
        FileProblem,
        InvalidNameError,
        MdmemError,
        UnsafePathError,
        WorkspaceNotFoundError,
    )
    from mdmem.markdown import Document, Heading, Problem
    from mdmem.workspace import Workspace


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mdmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
