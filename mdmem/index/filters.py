"""Search filters: what a caller may narrow a search to, checked once, for every backend, and
the one WHERE clause both backends' SQL filters their chunks by."""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pathspec


@dataclass(frozen=True)
class Filters:
    type: str | None = None
    path: str | None = None
    """gitignore-style glob, e.g. ``notes/*.md`` or ``.sessions/``."""
    agent: str | None = None
    session: str | None = None
    since: str | None = None
    """ISO date: only chunks created on or after it."""
    until: str | None = None
    include_archived: bool = False

    def on_columns(self) -> bool:
        """True when a filter on stored columns (type, agent, session, dates) is set."""
        return any(
            v is not None for v in (self.type, self.agent, self.session, self.since, self.until)
        )

    def since_date(self) -> str | None:
        return None if self.since is None else iso_date(self.since, "since")

    def until_date(self) -> str | None:
        return None if self.until is None else iso_date(self.until, "until")

    def path_ok(self, path: str) -> bool:
        if self.path is None:
            return True
        return glob_spec((self.path,)).match_file(path) or fnmatch.fnmatch(path, self.path)


def where_clause(filters: Filters, mark: str) -> tuple[str, list[Any]]:
    """The stored-column filters as a WHERE clause on ``chunks c`` and its arguments, in SQL both
    backends read: ``mark`` is the driver's placeholder (``?`` sqlite3, ``%s`` psycopg). The
    path glob is not SQL: ranking applies it."""
    clauses: list[str] = []
    args: list[Any] = []
    if not filters.include_archived:
        clauses.append("NOT c.archived")
    for column, value in (("type", filters.type), ("agent", filters.agent)):
        if value is not None:
            clauses.append(f"c.{column} = {mark}")
            args.append(value)
    if filters.session is not None:
        clauses.append(f"(c.session = {mark} OR c.path = {mark})")
        args += [filters.session, f".sessions/{filters.session}.md"]
    if (since := filters.since_date()) is not None:
        clauses.append(f"c.created >= {mark}")
        args.append(since)
    if (until := filters.until_date()) is not None:
        clauses.append(f"substr(c.created, 1, 10) <= {mark}")
        args.append(until)
    return (" AND ".join(clauses) or "1 = 1"), args


def iso_date(value: str, name: str) -> str:
    try:
        return dt.date.fromisoformat(str(value)[:10]).isoformat()
    except ValueError:
        raise ValueError(f"--{name} must be a date like 2026-11-22, got {value!r}") from None


@lru_cache(maxsize=64)
def glob_spec(patterns: Sequence[str]) -> pathspec.PathSpec:
    """gitignore-style patterns, compiled once per set."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(list(patterns))
