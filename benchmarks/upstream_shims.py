"""The stand-ins that put mdmem's adapters where upstream test suites build their reference
classes: loaded by the conftest that ``benchmarks/upstream_suites.py`` writes beside the
extracted tests (not part of mdmem, and never imported by it).

- LangGraph: ``langgraph.store.sqlite`` (not installed here) is provided as a module whose
  ``SqliteStore`` and ``AsyncSqliteStore`` are :class:`~mdmem.integrations.langgraph_store.
  MdmemStore` on a workspace of their own (``":memory:"``: a new one each time; a file path:
  one workspace per path, shared by every store opened on it).
- LangGraph's ``InMemoryStore`` (langgraph-checkpoint's own store tests): the same, always
  on a new workspace.
- Agents SDK: ``agents.SQLiteSession`` is replaced, before the tests import it, by
  :class:`~mdmem.integrations.openai_agents.MdmemSession` on a workspace chosen the same way
  from ``db_path``.

What the references have and the adapters cannot stand in for raises, so that a test using it
fails with a reason that says so instead of passing by accident or failing obscurely:
:class:`SqliteInternal` for the SQLite implementation (private helpers, connections, tables),
:class:`NotOffered` for a reference's option the adapter does not take. The runner classifies
failures by these names; every other failure is a behaviour difference.
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import json
import os
import sys
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mdmem import Workspace
from mdmem.integrations.langgraph_store import MdmemStore
from mdmem.integrations.openai_agents import MdmemSession

ROOT = Path(os.environ.get("UPSTREAM_WORKSPACES", "upstream-workspaces"))
KEYWORD_ONLY = os.environ.get("UPSTREAM_EMBEDDING", "") != "1"
USED = [0]
"""Adapters made during the running test (the conftest records it per test)."""

_numbers = itertools.count()
_by_path: dict[str, Workspace] = {}


class SqliteInternal(AttributeError):
    """A test reached the SQLite implementation itself, which no adapter has (an
    ``AttributeError``, so that ``hasattr`` and ``getattr(..., default)`` in library code stay
    quiet)."""


class NotOffered(Exception):
    """A test used a reference's option the adapter does not take."""


def workspace_for(location: Any) -> Workspace:
    """A full-mode workspace for a reference's connection string or database path."""
    key = str(location)
    if key != ":memory:" and key in _by_path:
        return _by_path[key]
    root = ROOT / f"ws{next(_numbers)}"
    Workspace.init(root, mode="full", agent="upstream")
    if KEYWORD_ONLY:
        (root / "mdmem.toml").write_text(
            'mode = "full"\nagent = "upstream"\n[embedding]\nmodel = ""\n', encoding="utf-8"
        )
    ws = Workspace.open(root)
    if key != ":memory:":
        _by_path[key] = ws
    return ws


def _internal(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise SqliteInternal(f"SQLite internal {name}: the adapter has no such part")

    refuse.__name__ = name
    return refuse


class _Opaque(str):
    """A private constant of the SQLite store: any use of it in a test says so."""

    def __contains__(self, other: object) -> bool:
        raise SqliteInternal(f"SQLite internal {self!s}: the adapter has no such part")


# ---- LangGraph ---------------------------------------------------------------------------------


class _Internals(abc.ABCMeta):
    """``SqliteStore.MIGRATIONS`` and the like, read on the class: refused as internals."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise SqliteInternal(f"SqliteStore.{name}: the adapter has no such part")


class SqliteStore(MdmemStore, metaclass=_Internals):
    """``SqliteStore``'s constructors and ``setup``, over :class:`MdmemStore`."""

    def __init__(
        self, conn: Any = ":memory:", *, index: Any = None, ttl: Any = None, **kwargs: Any
    ) -> None:
        if ttl is not None:
            raise NotOffered("ttl= (MdmemStore declares supports_ttl = False)")
        if kwargs:
            raise NotOffered(f"SqliteStore options {sorted(kwargs)}")
        super().__init__(workspace_for(conn), index=index)
        USED[0] += 1

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(cls, conn_string: str, **kwargs: Any) -> Iterator[SqliteStore]:
        yield cls(conn_string, **kwargs)

    def setup(self) -> None:
        """Nothing to create: the workspace is the store."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise SqliteInternal(f"SqliteStore.{name}: the adapter has no such part")


class AsyncSqliteStore(SqliteStore):
    """``AsyncSqliteStore``'s constructors and ``setup``, over :class:`MdmemStore`."""

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, **kwargs: Any
    ) -> AsyncIterator[AsyncSqliteStore]:
        yield cls(conn_string, **kwargs)

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to create: the workspace is the store."""


class InMemoryStore(MdmemStore):
    """``InMemoryStore(*, index=None)`` over :class:`MdmemStore`, on a new workspace."""

    def __init__(self, *, index: Any = None) -> None:
        super().__init__(workspace_for(":memory:"), index=index)
        USED[0] += 1


def install_langgraph_memory() -> None:
    """``langgraph.store.memory.InMemoryStore`` as the stand-in (tests import it by name)."""
    import langgraph.store.memory

    langgraph.store.memory.InMemoryStore = InMemoryStore  # type: ignore[misc]


def install_langgraph() -> None:
    """``langgraph.store.sqlite`` and ``.base`` as modules holding the stand-ins."""
    package = types.ModuleType("langgraph.store.sqlite")
    package.__path__ = []  # a package, so that ``.base`` imports
    package.SqliteStore = SqliteStore  # type: ignore[attr-defined]
    package.AsyncSqliteStore = AsyncSqliteStore  # type: ignore[attr-defined]
    base = types.ModuleType("langgraph.store.sqlite.base")
    base.BaseSqliteStore = _internal("BaseSqliteStore")  # type: ignore[attr-defined]
    base.SqliteIndexConfig = dict  # type: ignore[attr-defined]
    base.NS_MATCH_FUNCTION = _Opaque("NS_MATCH_FUNCTION")  # type: ignore[attr-defined]

    def internal_name(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _internal(name)

    base.__getattr__ = internal_name  # type: ignore[attr-defined]
    package.base = base  # type: ignore[attr-defined]
    sys.modules["langgraph.store.sqlite"] = package
    sys.modules["langgraph.store.sqlite.base"] = base


# ---- Agents SDK --------------------------------------------------------------------------------


class SQLiteSession(MdmemSession):
    """``SQLiteSession(session_id, db_path=":memory:", ..., session_settings=None)`` over
    :class:`MdmemSession`."""

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> None:
        if (sessions_table, messages_table) != ("agent_sessions", "agent_messages"):
            raise SqliteInternal("table names: the adapter keeps no tables")
        super().__init__(session_id, workspace_for(db_path), session_settings=session_settings)
        USED[0] += 1

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise SqliteInternal(f"SQLiteSession.{name}: the adapter has no such part")


def install_agents() -> None:
    """``agents.SQLiteSession`` (and ``agents.memory``'s) as the stand-in."""
    import agents
    import agents.memory

    agents.SQLiteSession = SQLiteSession  # type: ignore[attr-defined,misc]
    agents.memory.SQLiteSession = SQLiteSession  # type: ignore[attr-defined,misc]


# ---- what each test did, for the runner ----------------------------------------------------------

_results: list[dict[str, Any]] = []


def _reason(report: Any) -> str:
    """A report's one-line reason: the exception's type and message, or a skip's reason."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    USED[0] = 0


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """One row per test: failed if any phase failed, skipped if it was skipped, else passed."""
    if report.when == "setup" or not _results or _results[-1]["test"] != report.nodeid:
        if report.when != "setup":
            return
        _results.append({"test": report.nodeid, "outcome": "passed", "reason": "", "adapter": 0})
    row = _results[-1]
    if report.failed and row["outcome"] != "failed":
        row["outcome"], row["reason"] = "failed", _reason(report)
    elif report.skipped and row["outcome"] == "passed":
        row["outcome"], row["reason"] = "skipped", _reason(report)
    if report.when == "teardown":
        row["adapter"] = USED[0]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module that cannot even be imported counts as one failed test, named after it."""
    if report.failed:
        _results.append(
            {"test": report.nodeid, "outcome": "failed", "reason": _reason(report), "adapter": 0}
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("UPSTREAM_RESULTS")
    if out:
        Path(out).write_text(json.dumps(_results, indent=1), encoding="utf-8")
