"""Hybrid search: keyword (FTS5 BM25) and vector candidates, fused, then reranked.

Fusion is weighted reciprocal-rank fusion: a chunk's relevance is
``sum(weight / (rrf_k + rank))`` over the rankings it appears in, scaled so the best candidate
is 1. The final score is ``relevance_weight·relevance + recency_weight·recency +
importance_weight·importance + frequency_weight·frequency`` with recency = exp(-age/recency_days)
(1 for evergreen files) and frequency = log(1 + hits)/log(1 + 20), capped at 1.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pathspec

from mdmem.config import SearchConfig
from mdmem.index.chunks import sha
from mdmem.index.embed import Embedder
from mdmem.index.sync import Index
from mdmem.index.text import fts_query, query_terms

FREQUENCY_SATURATION = 20
MODES = ("hybrid", "keyword", "vector")


@dataclass(frozen=True)
class Scores:
    keyword: float | None
    """BM25 (higher is better), None when keyword search did not find the chunk."""
    vector: float | None
    """Cosine similarity, None when not among the vector candidates."""
    relevance: float
    recency: float
    importance: float
    frequency: float

    def to_dict(self) -> dict[str, float | None]:
        return {
            "keyword": self.keyword,
            "vector": self.vector,
            "relevance": self.relevance,
            "recency": self.recency,
            "importance": self.importance,
            "frequency": self.frequency,
        }


@dataclass(frozen=True)
class Hit:
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    score: float
    scores: Scores
    type: str
    importance: float
    created: str | None
    id: str
    """The entry's id (``m-``/``h-``), or the chunk id for non-entry content."""
    kind: str
    session: str | None = None
    agent: str | None = None

    @property
    def citation(self) -> str:
        if self.end_line > self.start_line:
            return f"{self.path}:{self.start_line}-{self.end_line}"
        return f"{self.path}:{self.start_line}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "heading": self.heading,
            "text": self.text,
            "score": round(self.score, 6),
            "scores": {k: _round(v) for k, v in self.scores.to_dict().items()},
            "type": self.type,
            "importance": self.importance,
            "created": self.created,
            "id": self.id,
            "kind": self.kind,
            "session": self.session,
            "agent": self.agent,
        }


class SearchResults(list[Hit]):
    """A list of hits that also says whether it could be answered from fresh files."""

    def __init__(
        self,
        hits: Sequence[Hit] = (),
        *,
        stale: Sequence[str] = (),
        problems: Sequence[str] = (),
        mode: str = "hybrid",
    ) -> None:
        super().__init__(hits)
        self.stale = list(stale)
        """Files that changed but could not be read: their last indexed text was searched."""
        self.problems = list(problems)
        self.mode = mode

    @property
    def fresh(self) -> bool:
        return not self.stale


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

    def sql(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if not self.include_archived:
            clauses.append("c.archived = 0")
        for column, value in (("type", self.type), ("agent", self.agent)):
            if value is not None:
                clauses.append(f"c.{column} = ?")
                args.append(value)
        if self.session is not None:
            clauses.append("(c.session = ? OR c.path = ?)")
            args += [self.session, f".sessions/{self.session}.md"]
        if self.since is not None:
            clauses.append("c.created >= ?")
            args.append(_iso_date(self.since, "since"))
        if self.until is not None:
            clauses.append("substr(c.created, 1, 10) <= ?")
            args.append(_iso_date(self.until, "until"))
        return (" AND ".join(clauses) or "1"), args

    def only_archived_flag(self) -> bool:
        """True when no filter but the archived one is set (the common, fast case)."""
        return self == Filters(include_archived=self.include_archived)

    def path_ok(self, path: str) -> bool:
        if self.path is None:
            return True
        return _glob(self.path).match_file(path) or fnmatch.fnmatch(path, self.path)


def search(
    index: Index,
    embedder: Embedder | None,
    query: str,
    *,
    k: int,
    mode: str,
    config: SearchConfig,
    filters: Filters,
    track_access: bool = True,
    today: dt.date | None = None,
) -> list[Hit]:
    """Rank the index's chunks for ``query``. The caller makes sure the index is fresh."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "keyword" and embedder is None:
        mode = "keyword"  # no embedding model configured
    conn = index.conn
    where, args = filters.sql()
    pool = max(config.candidates, k * 3)

    keyword: dict[int, float] = {}
    if mode in ("hybrid", "keyword"):
        match = fts_query(query)
        if match is not None:
            rows = conn.execute(
                "SELECT c.rowid, c.path, -bm25(chunks_fts, 1.0, 0.3) AS score "
                "FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
                f"WHERE chunks_fts MATCH ? AND {where} ORDER BY bm25(chunks_fts, 1.0, 0.3) "
                "LIMIT ?",
                [match, *args, pool * 4 if filters.path else pool],
            ).fetchall()
            keyword = {r[0]: r[2] for r in rows if filters.path_ok(r[1])}

    vector: dict[int, float] = {}
    if mode in ("hybrid", "vector") and embedder is not None and query.strip():
        vectors = index.vectors(embedder.model_id)
        if len(vectors.rowids):
            q = embedder.embed([query])[0]
            sims = vectors.matrix @ q
            if filters.only_archived_flag():
                if not filters.include_archived:
                    sims = np.where(vectors.archived, -np.inf, sims)
            else:
                allowed = _allowed_rowids(conn, where, args, filters)
                sims = np.where(np.isin(vectors.rowids, allowed), sims, -np.inf)
            top = min(pool, len(sims))
            best = np.argpartition(-sims, top - 1)[:top]
            vector = {int(vectors.rowids[i]): float(sims[i]) for i in best if np.isfinite(sims[i])}

    fused = _rrf([(keyword, config.keyword_weight), (vector, config.vector_weight)], config.rrf_k)
    if not fused:
        return []
    top_fused = max(fused.values())
    candidates = sorted(fused, key=fused.__getitem__, reverse=True)[:pool]
    rows = _chunk_rows(conn, candidates)
    access = _access_counts(conn, [_access_key(r) for r in rows.values()])
    evergreen = _glob_spec(config.evergreen)
    today = today or dt.date.today()
    hits: list[Hit] = []
    for rowid in candidates:
        row = rows[rowid]
        relevance = fused[rowid] / top_fused
        recency = (
            1.0 if evergreen.match_file(row["path"]) else _recency(row["created"], today, config)
        )
        frequency = min(
            1.0,
            math.log1p(access.get(_access_key(row), 0)) / math.log1p(FREQUENCY_SATURATION),
        )
        score = (
            config.relevance_weight * relevance
            + config.recency_weight * recency
            + config.importance_weight * row["importance"]
            + config.frequency_weight * frequency
        )
        hits.append(
            Hit(
                path=row["path"],
                start_line=row["start_line"],
                end_line=row["end_line"],
                heading=row["heading"],
                text=row["text"],
                score=score,
                scores=Scores(
                    keyword=keyword.get(rowid),
                    vector=vector.get(rowid),
                    relevance=relevance,
                    recency=recency,
                    importance=row["importance"],
                    frequency=frequency,
                ),
                type=row["type"],
                importance=row["importance"],
                created=row["created"],
                id=row["entry_id"] or row["id"],
                kind=row["kind"],
                session=row["session"],
                agent=row["agent"],
            )
        )
    hits.sort(key=lambda h: h.score, reverse=True)
    hits = hits[:k]
    if track_access and hits:
        _bump_access(conn, [_access_key(rows_by_hit) for rows_by_hit in _rows_for(hits, rows)])
    return hits


def highlight(text: str, query: str) -> list[tuple[int, int]]:
    """Character spans of ``text`` that match a query term (for snippets)."""
    terms = [t for t in query_terms(query) if len(t) > 1]
    if not terms:
        return []
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.I)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def _rrf(rankings: list[tuple[dict[int, float], float]], k: int) -> dict[int, float]:
    fused: dict[int, float] = {}
    for scores, weight in rankings:
        if weight <= 0:
            continue
        ordered = sorted(scores, key=scores.__getitem__, reverse=True)
        for rank, rowid in enumerate(ordered, start=1):
            fused[rowid] = fused.get(rowid, 0.0) + weight / (k + rank)
    return fused


def _recency(created: str | None, today: dt.date, config: SearchConfig) -> float:
    if not created:
        return 0.5
    try:
        day = dt.date.fromisoformat(created[:10])
    except ValueError:
        return 0.5
    age = max(0, (today - day).days)
    return math.exp(-age / config.recency_days)


def _chunk_rows(conn: Any, rowids: list[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(rowids), 500):
        part = rowids[start : start + 500]
        cursor = conn.execute(
            "SELECT rowid, id, path, start_line, end_line, heading, text, kind, type, importance, "
            f"created, entry_id, agent, session FROM chunks WHERE rowid IN "
            f"({','.join('?' * len(part))})",
            part,
        )
        names = [d[0] for d in cursor.description]
        for row in cursor:
            out[row[0]] = dict(zip(names, row, strict=True))
    return out


def _allowed_rowids(conn: Any, where: str, args: list[Any], filters: Filters) -> np.ndarray:
    rows = conn.execute(f"SELECT c.rowid, c.path FROM chunks c WHERE {where}", args).fetchall()
    return np.fromiter((r[0] for r in rows if filters.path_ok(r[1])), dtype=np.int64)


def _access_key(row: dict[str, Any]) -> str:
    return row["entry_id"] or sha(row["text"])


def _rows_for(hits: list[Hit], rows: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    by_place = {(r["path"], r["start_line"], r["end_line"]): r for r in rows.values()}
    return [by_place[(h.path, h.start_line, h.end_line)] for h in hits]


def _access_counts(conn: Any, keys: list[str]) -> dict[str, int]:
    if not keys:
        return {}
    found: dict[str, int] = {}
    for start in range(0, len(keys), 500):
        part = keys[start : start + 500]
        for key, count in conn.execute(
            f"SELECT key, count FROM access WHERE key IN ({','.join('?' * len(part))})", part
        ):
            found[key] = count
    return found


def _bump_access(conn: Any, keys: list[str]) -> None:
    now = dt.datetime.now().isoformat(timespec="seconds")
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO access(key, count, last_access) VALUES (?, 1, ?) ON CONFLICT(key) "
            "DO UPDATE SET count = count + 1, last_access = excluded.last_access",
            [(key, now) for key in dict.fromkeys(keys)],
        )
        conn.execute("COMMIT")
    except Exception:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _iso_date(value: str, name: str) -> str:
    try:
        return dt.date.fromisoformat(str(value)[:10]).isoformat()
    except ValueError:
        raise ValueError(f"--{name} must be a date like 2026-11-22, got {value!r}") from None


def _glob(pattern: str) -> pathspec.PathSpec:
    return _glob_spec((pattern,))


def _glob_spec(patterns: Sequence[str]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(list(patterns))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
