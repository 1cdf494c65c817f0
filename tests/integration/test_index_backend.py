"""The index behind the IndexBackend protocol: SQL only in mdmem/index/sqlite/, ranking only
through the protocol, and the SQLite backend matching it method by method."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.index.backend import IndexBackend
from mdmem.index.filters import Filters
from mdmem.index.search import fresh_search
from mdmem.index.sqlite.index import SqliteIndex

PACKAGE = Path(__file__).resolve().parents[2] / "mdmem"
SQLITE = PACKAGE / "index" / "sqlite"
BACKENDS = (SQLITE, PACKAGE / "index" / "postgres")
SQL = re.compile(
    r"\b(SELECT\s+\S.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|"
    r"CREATE\s+(VIRTUAL\s+)?TABLE|PRAGMA)\b|\.execute(many)?\(|import sqlite3|sqlite_utils"
)


def _protocol_members() -> list[str]:
    """IndexBackend's methods, those it takes from IndexReader (what ranking reads) too."""
    protocols = [c for c in IndexBackend.__mro__ if c.__module__ == IndexBackend.__module__]
    return [
        name
        for cls in protocols
        for name, value in vars(cls).items()
        if not name.startswith("_") and callable(value)
    ]


def test_sql_lives_only_in_the_backend_packages() -> None:
    outside = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if not any(backend in path.parents for backend in BACKENDS)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SQL.search(line)
    ]
    assert outside == []
    assert any(SQL.search(p.read_text()) for p in SQLITE.glob("*.py"))  # the pattern works


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_each_index_has_every_protocol_method_with_its_signature(backend: str) -> None:
    from mdmem.index.postgres.index import PostgresIndex

    members = _protocol_members()
    assert {"sync", "keyword_candidates", "vector_scan", "chunk_rows"} <= set(members)
    for name in members:
        wanted = inspect.signature(getattr(IndexBackend, name))
        got = inspect.signature(
            getattr(SqliteIndex if backend == "sqlite" else PostgresIndex, name)
        )
        assert list(got.parameters) == list(wanted.parameters), name
        for param, spec in wanted.parameters.items():
            assert got.parameters[param].kind == spec.kind, (name, param)
            assert got.parameters[param].default == spec.default, (name, param)


class ProtocolOnly:
    """The real SQLite index, seen through the protocol's methods and nothing else."""

    def __init__(self, index: object) -> None:
        self._index = index
        self._allowed = set(_protocol_members())

    def __getattr__(self, name: str) -> object:
        if name not in self._allowed:
            raise AttributeError(f"ranking used {name!r}, which is not in IndexBackend")
        return getattr(self._index, name)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
@pytest.mark.parametrize(
    "filters",
    [Filters(), Filters(path="notes/*.md"), Filters(type="fact", since="2020-01-01")],
    ids=["none", "path", "columns"],
)
def test_ranking_needs_nothing_but_the_protocol(
    indexed: Workspace, mode: str, filters: Filters
) -> None:
    config = indexed.config.search
    query = "where do we deploy the postgres database"
    args = dict(k=8, mode=mode, config=config, filters=filters, track_access=False)
    limits = dict(lock_timeout=5.0, defer_bytes=1_000_000, mask=indexed.files._redactor.mask)
    direct = fresh_search(indexed.index._backend, query, **args, **limits)  # type: ignore[arg-type]
    narrow = fresh_search(ProtocolOnly(indexed.index._backend), query, **args, **limits)  # type: ignore[arg-type]
    assert [h.to_dict() for h in narrow] == [h.to_dict() for h in direct]
    assert direct  # every case finds something, so the comparison means something
    if filters.path:
        assert all(h.path.startswith("notes/") for h in direct)
    if filters.type:
        assert all(h.type == "fact" for h in direct)
