"""One search, as a value: what every way in (``Workspace.search``, the remote reader, the warm
server, the CLI, the MCP tools) hands down. The parameters it takes are declared once, in
:mod:`mdmem.index.search_params`; :class:`Filters` and :class:`SearchOptions` spell them out
for type checkers, and a test holds both to that declaration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypedDict

from mdmem.index.filters import Filters
from mdmem.index.search_params import SEARCH_PARAMS


@dataclass(frozen=True)
class SearchRequest:
    """A query and how to search for it; None takes the workspace's ``[search]`` setting.

    Build one with :meth:`of` from the flat keywords a caller knows (``type="fact"``,
    ``since="2026-01-01"``, …): an unknown keyword is a TypeError naming it.
    """

    query: str
    k: int | None = None
    mode: str | None = None
    filters: Filters = field(default_factory=Filters)
    scopes: str | tuple[str, ...] | None = None
    """Some of LOCAL, SHARED, INHERITED, GLOBAL (a list, or ``"shared,inherited"``)."""
    track_access: bool = True
    """Count the hits as accesses (consolidation keeps what is used)."""

    @classmethod
    def of(
        cls,
        query: str | SearchRequest,
        k: int | None = None,
        *,
        mode: str | None = None,
        scopes: str | Sequence[str] | None = None,
        track_access: bool = True,
        **filters: Any,
    ) -> SearchRequest:
        """A request from a query and flat keywords; a request given is returned as it is
        (and no keyword may be given with it)."""
        if isinstance(query, SearchRequest):
            if k is not None or mode is not None or scopes is not None or filters:
                raise TypeError("give a SearchRequest or keywords, not both")
            return query
        unknown = sorted(set(filters) - FILTER_NAMES)
        if unknown:
            raise TypeError(f"unknown search parameter {unknown[0]!r} (known: {KNOWN})")
        wanted = scopes if scopes is None or isinstance(scopes, str) else tuple(scopes)
        return cls(query, k, mode, Filters(**filters), wanted, track_access)

    @classmethod
    def from_params(cls, query: str, params: Mapping[str, Any]) -> SearchRequest:
        """A request from its wire form (:meth:`params`); names that are no search parameter
        are ignored (a newer client may send more)."""
        return cls.of(query, **{name: v for name, v in params.items() if name in SEARCH_PARAMS})

    def params(self) -> dict[str, Any]:
        """Everything but the query, flat, as JSON (the warm server's request)."""
        scopes = list(self.scopes) if isinstance(self.scopes, tuple) else self.scopes
        return {"k": self.k, "mode": self.mode, **asdict(self.filters), "scopes": scopes}


FILTER_NAMES = frozenset(f.name for f in fields(Filters))
"""The keywords :meth:`SearchRequest.of` hands to :class:`Filters` (the search parameters but
``k``, ``mode`` and ``scopes``)."""
KNOWN = ", ".join((*SEARCH_PARAMS, "track_access"))


class SearchOptions(TypedDict, total=False):
    """The keywords ``Workspace.search`` takes after ``query`` and ``k``, typed for IDEs and
    type checkers (``**options: Unpack[SearchOptions]``); each is :class:`SearchRequest`'s.
    A test holds the keys to :data:`~mdmem.index.search_params.SEARCH_PARAMS`."""

    mode: Literal["hybrid", "keyword", "vector"] | None
    """``hybrid`` (keyword and vector, fused), ``keyword`` (FTS5 BM25) or ``vector``; None:
    the workspace's ``[search] mode``."""
    type: str | None
    """Only entries of this type: preference, fact, pattern, skill, event, note …"""
    path: str | None
    """Only files matching this gitignore-style glob (``notes/*.md``, ``.sessions/``)."""
    agent: str | None
    """Only this agent's sessions."""
    session: str | None
    """Only this session (its id)."""
    since: str | None
    """Only what was created on or after this ISO date."""
    until: str | None
    """Only what was created on or before this ISO date."""
    include_archived: bool
    """Also search ``## Archive`` sections (superseded and consolidated entries)."""
    scopes: str | Sequence[str] | None
    """Some of LOCAL, SHARED, INHERITED, GLOBAL (a list, or ``"shared,inherited"``)."""
    track_access: bool
    """Count the hits as accesses (default True; consolidation keeps what is used)."""
