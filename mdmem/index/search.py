"""Hybrid search: the backend's keyword (BM25) and vector candidates, fused, then reranked.
Pure ranking over what an :class:`IndexBackend` returns: no query language here.

Fusion: each ranking is scaled by its best score (BM25 / best BM25, cosine / best cosine) and
the two are summed with ``keyword_weight`` and ``vector_weight``, over the candidates (and the
chunks whose context they lift: every other chunk scores 0).
In event streams (session files) a chunk then gains ``neighbour_weight`` times its best
neighbour's score and ``session_weight`` times the best score in its file; among the
candidates, a turn spoken by the one person the query names gains ``speaker_weight`` of its
score (:mod:`mdmem.index.speakers`), and a chunk dated in the days the query names ("in May
2023", "last week") ``when_weight`` (:mod:`mdmem.index.when`). Relevance is that, scaled so
the best candidate is 1; a candidate under ``min_relevance`` is no hit at all. The final
score (``rerank = "scale"``) is

    relevance × (relevance_weight + recency_weight·recency
                 + importance_weight·importance + frequency_weight·frequency)

(``"add"``: the same terms summed, relevance weighted by ``relevance_weight``) with recency =
exp(-age_days / recency_days) (1 for evergreen files) and frequency = log(1 + hits) /
log(1 + 20), capped at 1.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mdmem.config import SearchConfig
from mdmem.errors import QueryTooLongError
from mdmem.index.backend import ChunkLayout, ChunkRow, IndexBackend, IndexReader, Scored
from mdmem.index.chunks import sha
from mdmem.index.embed import Embedder
from mdmem.index.filters import Filters, glob_spec
from mdmem.index.speakers import addressed, speaker
from mdmem.index.sync import CaughtUp, SyncReport, read_own_writes
from mdmem.index.vector_worker import beside
from mdmem.index.when import chunk_days, lifted, spans
from mdmem.layout import SESSIONS_DIR
from mdmem.memory.session_format import SUMMARY_SECTION
from mdmem.writes.own_writes import OwnWrites

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
    context: float = 0.0
    """The part of ``relevance`` that came from neighbouring entries and the rest of the
    session (event streams only)."""
    floor: float = 0.0
    """The relevance a candidate needed to be a hit (``search.min_relevance``): this hit made
    the cut because ``relevance`` ≥ ``floor``."""
    speaker: float = 0.0
    """The share of its score the hit gained as a turn of the person the query names."""
    when: float = 0.0
    """The share of its score the hit gained as dated in the days the query names."""

    def to_dict(self) -> dict[str, float | None]:
        return {
            "keyword": self.keyword,
            "vector": self.vector,
            "relevance": self.relevance,
            "recency": self.recency,
            "importance": self.importance,
            "frequency": self.frequency,
            "context": self.context,
            "floor": self.floor,
            "speaker": self.speaker,
            "when": self.when,
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
    scope: str | None = None
    """LOCAL, SHARED, INHERITED or GLOBAL (docs/sharing.md)."""
    workspace: str | None = None
    """The folder of the workspace the passage is in (its ``path`` is relative to it)."""
    generation: int | None = None
    """A shared index (PostgreSQL): the index generation this hit was read from."""
    synced: str | None = None
    """A shared index: when it was last synced (a remote reader's lag behind the files)."""

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
            "scope": self.scope,
            "workspace": self.workspace,
            **({} if self.generation is None else {"index": self._index()}),
        }

    def _index(self) -> dict[str, Any]:
        return {"generation": self.generation, "synced": self.synced}


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


def check_k(k: object) -> int:
    """``k`` as given, if it is a whole number of hits (a slice with ``k`` ≤ 0 would quietly
    return the wrong number)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer of at least 1, got {k!r}")
    return k


MAX_QUERY_CHARS = 10_000
"""The longest query a search takes (a few pages). Every stage costs time in the query's
length (masking, segmenting, the keyword terms, the dates it names, the embedding's tokens):
a 1 MB query took 11 s; the vector half reads only its first few hundred tokens anyway."""


def check_query(query: str) -> str:
    """``query`` if a search takes it; QueryTooLongError at once (before any work) if not."""
    if len(query) > MAX_QUERY_CHARS:
        raise QueryTooLongError(
            f"the query is {len(query):,} characters, over the {MAX_QUERY_CHARS:,} a search "
            "takes: search for what you want to find (key words or a question), not a whole text"
        )
    return query


def fresh_search(
    index: IndexBackend,
    query: str,
    *,
    k: int,
    mode: str,
    config: SearchConfig,
    filters: Filters,
    track_access: bool,
    lock_timeout: float,
    defer_bytes: int,
    mask: Callable[[str], str],
    caught_up: Callable[[], CaughtUp | None] | None = None,
    embedder: Embedder | None = None,
    own_writes: OwnWrites | None = None,
) -> SearchResults:
    """Re-index what changed, then :func:`search`; a damaged index is rebuilt and the whole
    run retried. Readers never wait long for a writer: past ``lock_timeout`` (or when the
    index cannot be written) it is searched as it is, and the files not yet indexed are
    reported as stale. ``mask`` hides secrets: the index holds masked text, a remote
    embedding model must not get a secret, and a file that could not be re-read may hold
    older text. ``caught_up`` gives a live watcher's word as of the call: while the index
    is at that generation, the files are not checked at all (no stat of every file). A watcher
    that has heard of a change it has not indexed yet gives no word. ``own_writes``: this
    workspace's writes; one no sync has indexed yet is indexed first (read your own writes).
    ``embedder`` replaces the index's model (one that keeps the query's vector for other
    workspaces)."""
    query = mask(check_query(query))

    def run() -> tuple[SyncReport, list[Hit]]:
        word, mark = read_own_writes(
            index,
            caught_up,
            own_writes,
            embed=mode != "keyword",
            lock_timeout=lock_timeout,
            defer_bytes=defer_bytes,
        )
        if word is not None and mark is None and word.generation == index.generation():
            report = SyncReport(problems=list(word.problems), generation=word.generation)
        else:
            report = index.sync(
                embed=mode != "keyword", lock_timeout=lock_timeout, defer_bytes=defer_bytes
            )
            if own_writes is not None and mark is not None and report.generation is not None:
                own_writes.indexed(mark)
        model = (embedder or index.embedder()) if mode != "keyword" else None
        hits = search(
            index,
            model,
            query,
            k=k,
            mode=mode,
            config=config,
            filters=filters,
            track_access=track_access,
        )
        return report, hits

    with index.searching():
        report, hits = index.recover(run)
    problems = [str(p) for p in report.problems]
    if report.readonly:
        problems.insert(0, report.readonly)
    masked = [_masked(hit, mask) for hit in hits]
    return SearchResults(masked, stale=report.stale, problems=problems, mode=mode)


def search(
    index: IndexReader,
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
    check_query(query)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    with index.reading():
        layout = index.layout()
        n = len(layout.rowids)
        if n == 0 or not query.strip():
            return []
        allowed = layout.allowed(filters, lambda: index.filtered(filters))
        found = _retrieve(index, embedder, query, mode, config, filters)
        positions = _rows(layout, list(found.values()), config)
        if not positions.size:
            return []
        ok = _of(allowed, positions)
        keyword = _gather(found.get("keyword"), positions)
        keyword[~ok] = 0.0
        vector = None if "vector" not in found else _gather(found["vector"], positions)
        alone = _fuse(keyword, vector, ok, mode, config)
        fused = _with_context(alone, positions, layout, config)
        fused[~ok] = 0.0
        best = _candidates(fused, max(config.candidates, k * 3), config.min_relevance)
        if not best.size:
            return []
        rowids = [int(layout.rowids[i]) for i in positions[best]]
        rows = index.chunk_rows(rowids)
        today = today or dt.date.today()
        candidates = [rows[r] for r in rowids]
        spoken = _lift_speaker(fused, best, positions[best], candidates, layout, query, config)
        dated = _lift_when(fused, best, candidates, query, config, today)
        access = index.access_counts([_access_key(r) for r in rows.values()])
        ranked = _Reranker(config, today, float(fused[best].max()))
        hits = [
            ranked.hit(
                rows[rowid],
                float(fused[i]),
                context=float(fused[i] - alone[i]),
                keyword=float(keyword[i]) if keyword[i] > 0 else None,
                vector=float(vector[i]) if vector is not None else None,
                hits=access.get(_access_key(rows[rowid]), 0),
                lifts=(
                    float(spoken[n]) * config.speaker_weight,
                    float(dated[n]) * config.when_weight,
                ),
            )
            for n, (i, rowid) in enumerate(zip(best, rowids, strict=True))
        ]
        hits.sort(key=lambda h: h.score, reverse=True)
        hits = _without_restatements(hits)[:k]
        stamp = getattr(index, "stamp", None)  # a shared index says which generation it read
        if stamp is not None:
            read = stamp()
            hits = [replace(h, generation=read.generation, synced=read.synced) for h in hits]
    if track_access and hits:
        keys = {(r.path, r.start_line, r.end_line): _access_key(r) for r in rows.values()}
        index.bump_access([keys[(h.path, h.start_line, h.end_line)] for h in hits])
    return hits


def _retrieve(
    index: IndexReader,
    embedder: Embedder | None,
    query: str,
    mode: str,
    config: SearchConfig,
    filters: Filters,
) -> dict[str, Scored]:
    """Each retriever's candidates. In hybrid mode the query's embedding and the vector
    scan run on a second thread while the keyword search runs on this one, which holds the
    index's connection: on two cores a search waits for the slower of the two, not both
    (:mod:`.vector_worker`).
    Embedding the query first, on this thread, was slower at 100k chunks and no faster at 1M
    (``benchmarks/side_by_side.py``)."""
    found: dict[str, Scored] = {}
    if mode == "vector" and embedder is None:
        return found
    if mode == "keyword" or embedder is None:
        found["keyword"] = index.keyword_candidates(query, config.keyword_candidates)
        return found
    scan = index.vector_scan(embedder.model_id, filters=filters)

    def vector_half() -> None:
        scan.scan(embedder.embed([query])[0])

    if mode == "hybrid":
        found["keyword"] = beside(
            vector_half, lambda: index.keyword_candidates(query, config.keyword_candidates)
        )
    else:
        vector_half()
    vectors = scan.scored(found.get("keyword"))
    if vectors is not None:
        found["vector"] = vectors
    return found


@dataclass(frozen=True)
class _Reranker:
    """The final score of a candidate: relevance (scaled so the best candidate is 1) with
    recency, importance and frequency, each weighted by a config key."""

    config: SearchConfig
    today: dt.date
    top: float

    def hit(
        self,
        row: ChunkRow,
        fused: float,
        *,
        context: float,
        keyword: float | None,
        vector: float | None,
        hits: int,
        lifts: tuple[float, float] = (0.0, 0.0),
    ) -> Hit:
        """``lifts``: the shares of its score the speaker and time lifts added."""
        config = self.config
        relevance = fused / self.top
        evergreen = glob_spec(config.evergreen).match_file(row.path)
        recency = 1.0 if evergreen else _recency(row.created, self.today, config)
        frequency = min(1.0, math.log1p(hits) / math.log1p(FREQUENCY_SATURATION))
        score = final_score(config, relevance, recency, row.importance, frequency)
        return Hit(
            path=row.path,
            start_line=row.start_line,
            end_line=row.end_line,
            heading=row.heading,
            text=row.text,
            score=score,
            scores=Scores(
                keyword=keyword,
                vector=vector,
                relevance=relevance,
                recency=recency,
                importance=row.importance,
                frequency=frequency,
                context=context / self.top,
                floor=config.min_relevance,
                speaker=lifts[0],
                when=lifts[1],
            ),
            type=row.type,
            importance=row.importance,
            created=row.created,
            id=row.entry_id or row.id,
            kind=row.kind,
            session=row.session,
            agent=row.agent,
        )


_WORD = re.compile(r"[^\W_]{3,}")


def _without_restatements(hits: list[Hit]) -> list[Hit]:
    """A session's ``## Summary`` restates that session's events, which stay in the file: a
    summary line adds nothing below a hit of the same file that says at least half its words,
    so it leaves its place to the next passage (a summary never crowds out its source).
    """
    out: list[Hit] = []
    for hit in hits:
        if hit.path.startswith(f"{SESSIONS_DIR}/") and SUMMARY_SECTION in hit.heading.split(" > "):
            words = set(_WORD.findall(hit.text.lower()))
            said = (set(_WORD.findall(o.text.lower())) for o in out if o.path == hit.path)
            if words and any(len(words & other) * 2 >= len(words) for other in said):
                continue
        out.append(hit)
    return out


def final_score(
    config: SearchConfig, relevance: float, recency: float, importance: float, frequency: float
) -> float:
    """Relevance with recency, importance and frequency (see the module's docstring)."""
    rest = (
        config.recency_weight * recency
        + config.importance_weight * importance
        + config.frequency_weight * frequency
    )
    if config.rerank == "scale":
        return relevance * (config.relevance_weight + rest)
    return config.relevance_weight * relevance + rest


def _candidates(fused: np.ndarray, pool: int, min_relevance: float) -> np.ndarray:
    """Indices of the best ``pool`` candidates, best first (equal scores in layout order): those
    with a relevance of at least ``min_relevance`` of the best one's (and above zero)."""
    top = float(fused.max()) if fused.size else 0.0
    if top <= 0:
        return np.zeros(0, dtype=np.int64)
    eligible = np.flatnonzero(fused >= max(min_relevance * top, np.finfo(float).tiny))
    scores = fused[eligible]
    if len(eligible) > pool:  # the pool's lowest score, and as many of its ties as fit
        cut = np.partition(scores, len(scores) - pool)[len(scores) - pool]
        kept = scores > cut
        kept[np.flatnonzero(scores == cut)[: pool - int(kept.sum())]] = True
        eligible, scores = eligible[kept], scores[kept]
    return eligible[np.argsort(-scores, kind="stable")]


def _rows(layout: ChunkLayout, found: Sequence[Scored], config: SearchConfig) -> np.ndarray:
    """The layout positions (sorted) that can score above zero: the retrievers' candidates,
    their neighbours, and the event-stream files they are in. Every other chunk scores 0, so
    fusion works on these rows only; a retriever that scores every chunk makes it all of them."""
    n = len(layout.rowids)
    if any(f.positions is None for f in found):
        return np.arange(n)
    rows = _unique(np.concatenate([f.positions for f in found] or [np.zeros(0, np.int64)]))
    if config.neighbour_weight > 0 and rows.size:
        around = np.concatenate([rows, layout.prev[rows], layout.next[rows]])
        rows = _unique(around[around >= 0])
    if config.session_weight > 0 and rows.size:
        files = layout.file_of[rows]
        files = _unique(files[layout.stream_files[files]])
        if files.size:  # every chunk of these files: ranges start..end, concatenated
            starts = layout.file_starts[files]
            sizes = np.append(layout.file_starts, n)[files + 1] - starts
            skip = np.repeat(starts - np.cumsum(sizes) + sizes, sizes)
            rows = _unique(np.concatenate([rows, skip + np.arange(int(sizes.sum()))]))
    return rows


def _unique(positions: np.ndarray) -> np.ndarray:
    """Sorted distinct positions, by sorting: faster than ``np.unique``'s hashing on a few
    thousand."""
    positions = np.sort(positions.astype(np.int64, copy=False))
    first = np.ones(len(positions), dtype=bool)
    first[1:] = positions[1:] != positions[:-1]
    return positions[first]


def _gather(found: Scored | None, rows: np.ndarray) -> np.ndarray:
    """A retriever's scores at ``rows`` (0 where a row is not its candidate)."""
    if found is None:
        return np.zeros(len(rows))
    if found.positions is None:
        return _of(found.scores, rows).astype(np.float64)
    out = np.zeros(len(rows))
    out[np.searchsorted(rows, found.positions)] = found.scores
    return out


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


def _with_context(
    fused: np.ndarray, rows: np.ndarray, layout: ChunkLayout, config: SearchConfig
) -> np.ndarray:
    """Event streams (sessions) have locality: a turn next to a relevant turn, or in a session
    that is about the question, is more likely relevant. An entry of a knowledge file stands
    alone: it is its own neighbour and its own session, so both kinds stay on one scale.
    ``fused`` holds the scores of ``rows`` (see :func:`_rows`: every chunk outside them
    scores 0, also with its context)."""
    if config.neighbour_weight <= 0 and config.session_weight <= 0:
        return fused
    base = np.clip(fused, 0.0, None)
    stream = _of(layout.stream, rows)
    out = fused.copy()
    if config.neighbour_weight > 0:
        prev = _at(base, rows, _of(layout.prev, rows), len(layout.rowids))
        nxt = _at(base, rows, _of(layout.next, rows), len(layout.rowids))
        out += config.neighbour_weight * np.where(stream, np.maximum(prev, nxt), base)
    if config.session_weight > 0 and len(rows):
        file_of = _of(layout.file_of, rows)
        starts = np.flatnonzero(np.append(True, file_of[1:] != file_of[:-1]))
        best = np.maximum.reduceat(np.clip(out, 0.0, None), starts)
        in_file = np.repeat(best, np.diff(np.append(starts, len(rows))))
        out += config.session_weight * np.where(stream, in_file, base)
    return out


def _of(column: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A layout ``column`` at ``rows`` (sorted, distinct): the column itself when they are
    every position."""
    return column if len(rows) == len(column) else column[rows]


def _at(values: np.ndarray, rows: np.ndarray, positions: np.ndarray, n: int) -> np.ndarray:
    """``values`` (one per row) at layout ``positions`` (of ``n``): 0 for -1 and for
    positions not in ``rows``."""
    if len(rows) == n:  # every position is a row
        return np.where(positions >= 0, values[positions], 0.0)
    at = np.searchsorted(rows, positions).clip(max=len(rows) - 1)
    return np.where((positions >= 0) & (rows[at] == positions), values[at], 0.0)


def _lift_speaker(
    fused: np.ndarray,
    best: np.ndarray,
    positions: np.ndarray,
    rows: Sequence[ChunkRow],
    layout: ChunkLayout,
    query: str,
    config: SearchConfig,
) -> np.ndarray:
    """Candidates of event streams spoken by the one person the query names gain
    ``speaker_weight`` of their score, in place (see :mod:`mdmem.index.speakers`); which of
    ``best`` were lifted."""
    none = np.zeros(len(best), dtype=bool)
    if config.speaker_weight <= 0:
        return none
    said = [
        speaker(r.text) if layout.stream[i] else None for i, r in zip(positions, rows, strict=True)
    ]
    who = addressed(query, said)
    if who is None:
        return none
    spoken = np.array([s == who for s in said], dtype=bool)
    fused[best[spoken]] *= 1.0 + config.speaker_weight
    return spoken


def _lift_when(
    fused: np.ndarray,
    best: np.ndarray,
    rows: Sequence[ChunkRow],
    query: str,
    config: SearchConfig,
    today: dt.date,
) -> np.ndarray:
    """Candidates dated in the days the query names gain ``when_weight`` of their score, in
    place (see :mod:`mdmem.index.when`); which of ``best`` were lifted."""
    named = spans(query, today) if config.when_weight > 0 else ()
    if not named:
        return np.zeros(len(best), dtype=bool)
    days = [chunk_days(r.created, r.path) for r in rows]
    dated = np.array(lifted(named, days, config.when_days), dtype=bool)
    fused[best[dated]] *= 1.0 + config.when_weight
    return dated


def _recency(created: str | None, today: dt.date, config: SearchConfig) -> float:
    if not created:
        return 0.5
    try:
        day = dt.date.fromisoformat(created[:10])
    except ValueError:
        return 0.5
    age = max(0, (today - day).days)
    return math.exp(-age / config.recency_days)


def _access_key(row: ChunkRow) -> str:
    return row.entry_id or sha(row.text)


def _masked(hit: Hit, mask: Callable[[str], str]) -> Hit:
    text, heading = mask(hit.text), mask(hit.heading)
    if text is hit.text and heading is hit.heading:
        return hit
    return replace(hit, text=text, heading=heading)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)
