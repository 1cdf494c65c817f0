"""Hybrid search: keyword (FTS5 BM25) and vector scores, fused, then reranked.

Fusion: each ranking is scaled by its best score (BM25 / best BM25, cosine / best cosine) and
the two are summed with ``keyword_weight`` and ``vector_weight``, over every chunk of the index.
In event streams (session files) a chunk then gains ``neighbour_weight`` times its best
neighbour's score and ``session_weight`` times the best score in its file. Relevance is that,
scaled so the best candidate is 1. The final score is

    relevance_weight·relevance + recency_weight·recency
    + importance_weight·importance + frequency_weight·frequency

with recency = exp(-age_days / recency_days) (1 for evergreen files) and frequency =
log(1 + hits) / log(1 + 20), capped at 1.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pathspec

from mdmem.config import SearchConfig
from mdmem.index.chunks import sha
from mdmem.index.embed import Embedder
from mdmem.index.fts import fts_query
from mdmem.index.sync import Index, Layout

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

    def to_dict(self) -> dict[str, Any]:
        """The JSON of a search, the same for the CLI, the query server and every interface."""
        return {
            "mode": self.mode,
            "fresh": self.fresh,
            "stale": self.stale,
            "problems": self.problems,
            "hits": [hit.to_dict() for hit in self],
        }


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


def check_k(k: object) -> int:
    """``k`` as given, if it is a whole number of hits (a slice with ``k`` ≤ 0 would quietly
    return the wrong number)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer of at least 1, got {k!r}")
    return k


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
    check_k(k)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    hits: list[Hit] = []
    rows: dict[int, dict[str, Any]] = {}
    with _snapshot(index.conn):
        layout = index.layout()
        n = len(layout.rowids)
        if n == 0 or not query.strip():
            return []
        allowed = _allowed(index, layout, filters)
        keyword = np.zeros(n)
        if mode in ("hybrid", "keyword"):
            keyword = _keyword_scores(index, layout, query, config.keyword_candidates)
            keyword[~allowed] = 0.0
        vector: np.ndarray | None = None
        if mode in ("hybrid", "vector") and embedder is not None:
            matrix = index.vectors(embedder.model_id)
            q = embedder.embed([query])[0]
            if matrix.shape[1] == q.shape[0]:
                vector = matrix @ q
        fused = _fuse(keyword, vector, allowed, mode, config)
        fused = _with_context(fused, layout, config)
        fused[~allowed] = 0.0
        top = int(np.count_nonzero(fused > 0))
        if top == 0:
            return []
        pool = min(top, max(config.candidates, k * 3))
        best = np.argpartition(-fused, pool - 1)[:pool]
        best = best[np.argsort(-fused[best], kind="stable")]
        top_score = float(fused[best[0]])
        rowids = [int(layout.rowids[i]) for i in best]
        rows = _chunk_rows(index.conn, rowids)
        access = _access_counts(index.conn, [_access_key(r) for r in rows.values()])
        evergreen = _glob_spec(config.evergreen)
        today = today or dt.date.today()
        for i, rowid in zip(best, rowids, strict=True):
            row = rows[rowid]
            relevance = float(fused[i]) / top_score
            recency = (
                1.0
                if evergreen.match_file(row["path"])
                else _recency(row["created"], today, config)
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
                        keyword=float(keyword[i]) if keyword[i] > 0 else None,
                        vector=float(vector[i]) if vector is not None else None,
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
        keys = {(r["path"], r["start_line"], r["end_line"]): _access_key(r) for r in rows.values()}
        _bump_access(index.conn, [keys[(h.path, h.start_line, h.end_line)] for h in hits])
    return hits


def _keyword_scores(index: Index, layout: Layout, query: str, limit: int) -> np.ndarray:
    scores = np.zeros(len(layout.rowids))
    match = fts_query(query)
    if match is None:
        return scores
    rows = index.conn.execute(
        "SELECT rowid, -rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
        (match, limit),
    ).fetchall()
    if rows:
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        scores[layout.positions(ids)] = [max(r[1], 1e-9) for r in rows]
    return scores


def _fuse(
    keyword: np.ndarray,
    vector: np.ndarray | None,
    allowed: np.ndarray,
    mode: str,
    config: SearchConfig,
) -> np.ndarray:
    """Each ranking scaled by its best allowed score, then a weighted sum."""
    kw_top = float(keyword.max()) if keyword.size else 0.0
    kw = keyword / kw_top if kw_top > 0 else keyword
    if vector is None:
        return kw.copy()
    allowed_vec = vector[allowed]
    vec_top = float(allowed_vec.max()) if allowed_vec.size else 0.0
    vec = vector / vec_top if vec_top > 0 else np.zeros_like(vector)
    if mode == "vector":
        return vec.astype(np.float64)
    return config.keyword_weight * kw + config.vector_weight * vec


def _with_context(fused: np.ndarray, layout: Layout, config: SearchConfig) -> np.ndarray:
    """Event streams (sessions) have locality: a turn next to a relevant turn, or in a session
    that is about the question, is more likely relevant. An entry of a knowledge file stands
    alone: it is its own neighbour and its own session, so both kinds stay on one scale."""
    if config.neighbour_weight <= 0 and config.session_weight <= 0:
        return fused
    base = np.clip(fused, 0.0, None)
    stream = layout.stream
    out = fused.copy()
    if config.neighbour_weight > 0:
        prev = np.where(layout.prev >= 0, base[layout.prev], 0.0)
        nxt = np.where(layout.next >= 0, base[layout.next], 0.0)
        out += config.neighbour_weight * np.where(stream, np.maximum(prev, nxt), base)
    if config.session_weight > 0 and len(layout.file_starts):
        best = np.maximum.reduceat(np.clip(out, 0.0, None), layout.file_starts)
        out += config.session_weight * np.where(stream, best[layout.file_of], base)
    return out


def _allowed(index: Index, layout: Layout, filters: Filters) -> np.ndarray:
    if filters.only_archived_flag():
        return (
            np.ones(len(layout.rowids), dtype=bool)
            if filters.include_archived
            else (~layout.archived)
        )
    where, args = filters.sql()
    rows = index.conn.execute(f"SELECT c.rowid, c.path FROM chunks c WHERE {where}", args)
    ids = np.fromiter((r[0] for r in rows if filters.path_ok(r[1])), dtype=np.int64)
    mask = np.zeros(len(layout.rowids), dtype=bool)
    if ids.size:
        mask[layout.positions(ids)] = True
    return mask


@contextlib.contextmanager
def _snapshot(conn: Any) -> Iterator[None]:
    """One view of the index for the whole ranking. In WAL mode a read transaction sees the
    database as it was when it began, whatever the watcher commits meanwhile, so the layout,
    the vectors and the rows always agree."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


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


def _access_key(row: dict[str, Any]) -> str:
    return row["entry_id"] or sha(row["text"])


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
