"""One search over a workspace, its parents and the GLOBAL workspace, ranked on one scale.

Each workspace's index ranks its own candidates (:func:`mdmem.index.search.search`), as a shard
would; the hits carry their raw scores (BM25, cosine). Here they are fused again against the
best raw scores of *all* the workspaces, so a passage that is only the best of a small parent
is not lifted to relevance 1: relevance is the fused score over the best fused score of the
whole federation, then recency, importance and frequency apply as in one workspace. Other
workspaces' indexes are opened read-only: never synced, healed or counted in. A parent whose
files changed since its index was built is searched as it is and reported stale.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mdmem.config import Config, SearchConfig, load_config
from mdmem.errors import ConfigError, MdmemError
from mdmem.index.backend import IndexBackend
from mdmem.index.chunks import sha
from mdmem.index.embed import Embedder
from mdmem.index.filters import Filters
from mdmem.index.search import Hit, SearchResults, final_score, search
from mdmem.index.sync import CaughtUp
from mdmem.redact import Redactor
from mdmem.sharing.scopes import (
    GLOBAL,
    INHERITED,
    LOCAL,
    LOCAL_DIRS,
    SHARED,
    global_root,
    parent_chain,
    scope_of,
)

if TYPE_CHECKING:
    from mdmem.index.sqlite.index import SqliteIndex

log = logging.getLogger("mdmem")
WIDEN = 3
MIRROR_DIR = "parents"
"""Under the reading workspace's ``.mdmem/``: a keyword index of each other workspace's files,
searched where that workspace's own index is missing or stale (it is never written)."""
MIRROR_WAIT_S = 5.0
MIRROR_FILE_BYTES = 2_000_000
"""A file this big is left out of a search that reads the files (one search must not stall
on a huge file; the workspace's own index, once built, holds it)."""
"""Each workspace is asked for this many times ``k`` hits: the merge and the scope filter pick
the ``k`` best of them."""


@dataclass(frozen=True)
class Member:
    """Another workspace a search reads: a parent (INHERITED) or the GLOBAL one."""

    root: Path
    scope: str
    index: IndexBackend
    """Opened read-only."""
    caught_up: Callable[[], CaughtUp | None] | None = None
    """A live watcher's word that its index is fresh (then its files are not scanned)."""
    files: Callable[[], SqliteIndex] | None = None
    """A keyword index of its files kept by the reading workspace (:meth:`Federation._mirror`):
    what is searched where its own index is missing, unusable or stale."""


@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    stale: list[str]
    problems: list[str]


def labelled(results: SearchResults, root: Path) -> SearchResults:
    """A workspace's own results, each hit labelled LOCAL or SHARED and with its folder."""
    hits = [replace(h, scope=scope_of(h.path), workspace=str(root)) for h in results]
    return SearchResults(hits, stale=results.stale, problems=results.problems, mode=results.mode)


def search_member(
    member: Member,
    embedder: Embedder | None,
    query: str,
    *,
    k: int,
    mode: str,
    config: SearchConfig,
    filters: Filters,
) -> Found:
    """The SHARED passages of another workspace, from its index as it is; where that index is
    missing or unusable, or for the files changed since it was built, from the files
    themselves (by keyword, through a mirror the reading workspace keeps)."""
    index = member.index
    try:
        with index.searching():
            stale = _stale(member)
            hits = search(
                index,
                embedder if mode != "keyword" else None,
                query,
                k=k,
                mode=mode,
                config=config,
                filters=filters,
                track_access=False,
            )
    except Exception as exc:  # another workspace's index, broken in any way: reported, and
        # this workspace's search goes on (a bug shows in the log with its traceback)
        if not isinstance(exc, MdmemError | OSError):
            log.warning("searching %s failed", member.root, exc_info=True)
        why = (
            "has no index yet"
            if "no index yet" in str(exc)
            else f"could not be read from its index ({exc})"
        )
        return _from_files(member, query, k=k, config=config, filters=filters, why=why)
    changed = set(stale)
    shared = [h for h in hits if scope_of(h.path) == SHARED]
    kept = [_as_member(h, member) for h in shared if h.path not in changed]
    if not stale:
        return Found(kept, [], [])
    found = _from_files(
        member,
        query,
        k=k,
        config=config,
        filters=filters,
        why=_stale_note(stale),
        only=stale,
        indexed=[h for h in shared if h.path in changed],
    )
    return Found([*kept, *found.hits], [str(member.root / p) for p in stale], found.problems)


def _as_member(hit: Hit, member: Member) -> Hit:
    return replace(hit, scope=member.scope, workspace=str(member.root))


def _stale_note(stale: list[str]) -> str:
    return f"is stale: {len(stale)} file(s) changed since its index was built"


def _from_files(
    member: Member,
    query: str,
    *,
    k: int,
    config: SearchConfig,
    filters: Filters,
    why: str,
    only: list[str] | None = None,
    indexed: Sequence[Hit] = (),
) -> Found:
    """Search another workspace's files directly, by keyword: all of them (``only`` None), or
    those changed since its index was built (``indexed``: its index's hits in them, kept with
    their scores where their text is still there). Its index is never written: the mirror
    searched belongs to the reading workspace. The problem line says what was done and why."""
    name = f"{member.scope.lower()} workspace {member.root}"
    what = "those files were" if only is not None else "its files were"
    fix = "its watcher, or `mdmem index` there, re-indexes them"
    if only is None:
        fix = "`mdmem index` there, or its watcher, builds its index"
    try:
        if member.files is None:
            raise MdmemError("no mirror of its files")
        hits, notes = _search_files(
            member.files(), query, k=k, config=config, filters=filters, only=only, indexed=indexed
        )
    except Exception as exc:  # (as for its index: reported, and the search goes on)
        if not isinstance(exc, MdmemError | OSError):
            log.warning("searching the files of %s failed", member.root, exc_info=True)
        return Found([], [], [f"{name} {why}; nor were its files searched: {exc}"])
    note = f"{name} {why}; {what} searched directly, by keyword only ({fix})"
    found = [_as_member(h, member) for h in hits]
    return Found(found, [], [note, *(f"{name}: {n}" for n in notes)])


def _search_files(
    mirror: IndexBackend,
    query: str,
    *,
    k: int,
    config: SearchConfig,
    filters: Filters,
    only: list[str] | None,
    indexed: Sequence[Hit],
) -> tuple[list[Hit], list[str]]:
    """The hits, and what the files' reading left out (a file too big to read for a search,
    one that cannot be read)."""
    with mirror.searching():
        wait, big = MIRROR_WAIT_S, MIRROR_FILE_BYTES
        if only is None:
            report = mirror.sync(embed=False, lock_timeout=wait, defer_bytes=big)
        else:
            report = mirror.sync_paths(only, embed=False, lock_timeout=wait, defer_bytes=big)
        hits = search(
            mirror,
            None,
            query,
            k=k if only is None else 2 * k,
            mode="keyword",
            config=config,
            filters=filters,
            track_access=False,
        )
        lines = _lines(mirror, only) if only is not None else {}
    notes = [str(p) for p in report.problems]
    if only is None:
        return [h for h in hits if scope_of(h.path) == SHARED][:k], notes
    still = [
        replace(h, start_line=lines[h.path, h.text][0], end_line=lines[h.path, h.text][1])
        for h in indexed
        if (h.path, h.text) in lines
    ]
    have, keep = {(h.path, h.text) for h in still}, set(only)
    new = [
        h
        for h in hits
        if h.path in keep and scope_of(h.path) == SHARED and (h.path, h.text) not in have
    ]
    return [*still, *new[:k]], notes


def _lines(mirror: IndexBackend, paths: list[str]) -> dict[tuple[str, str], tuple[int, int]]:
    """Where each passage of these files is now, by (path, text)."""
    wanted = set(paths)
    with mirror.reading():
        layout = mirror.layout()
        files = np.array([path in wanted for path in layout.file_paths], dtype=bool)
        inside = files[layout.file_of] if len(layout.rowids) else np.zeros(0, dtype=bool)
        rows = mirror.chunk_rows([int(r) for r in layout.rowids[inside]])
    return {(r.path, r.text): (r.start_line, r.end_line) for r in rows.values()}


def _stale(member: Member) -> list[str]:
    word = member.caught_up() if member.caught_up is not None else None
    if word is not None and word.generation == member.index.generation():
        return []
    fresh = member.index.freshness()
    return [*(f.path for f in fresh.changed), *fresh.removed]


def one_scale(groups: Sequence[Sequence[Hit]], config: SearchConfig, mode: str) -> list[Hit]:
    """Every workspace's hits re-fused against the best raw keyword and vector scores of all
    of them, then reranked as one list, best first; those under ``min_relevance`` of the best
    are dropped."""
    hits = [h for group in groups for h in group]
    kw_top = max((h.scores.keyword or 0.0 for h in hits), default=0.0)
    vectors = [h.scores.vector for h in hits if h.scores.vector is not None]
    vec_top = max(vectors, default=0.0)
    fused = [_fused(h, kw_top, vec_top, mode, config, bool(vectors)) for h in hits]
    top = max(fused, default=0.0)
    if top <= 0:
        return []
    out = []
    for hit, value in zip(hits, fused, strict=True):
        relevance = value / top
        if relevance < config.min_relevance:
            continue
        s = hit.scores
        score = final_score(config, relevance, s.recency, s.importance, s.frequency)
        context = relevance * s.context / s.relevance if s.relevance > 0 else 0.0
        scores = replace(s, relevance=relevance, context=context)
        out.append(replace(hit, score=score, scores=scores))
    out.sort(key=lambda h: h.score, reverse=True)
    return out


def _fused(
    hit: Hit, kw_top: float, vec_top: float, mode: str, config: SearchConfig, vectors: bool
) -> float:
    """The hit's fused score on the federation's scale: keyword and vector each over the best
    of all workspaces, times the share its neighbours and session added in its own index."""
    s = hit.scores
    kw = (s.keyword or 0.0) / kw_top if kw_top > 0 else 0.0
    vec = (s.vector or 0.0) / vec_top if vec_top > 0 else 0.0
    if mode == "keyword" or not vectors or s.vector is None:
        alone = kw  # (None: read from the files, by keyword only; no vector to weigh it by)
    elif mode == "vector":
        alone = vec
    else:
        alone = config.keyword_weight * kw + config.vector_weight * vec
    own = s.relevance - s.context
    gain = s.relevance / own if own > 0 else 1.0
    return max(alone, 0.0) * gain


def access_key(hit: Hit) -> str:
    """The key the index counts a hit's returns under (its entry id, or its text's hash)."""
    return sha(hit.text) if hit.kind == "block" else hit.id


def merge(
    own: SearchResults | None,
    found: Sequence[Found],
    *,
    k: int,
    config: SearchConfig,
    mode: str,
    scopes: tuple[str, ...] | None,
) -> SearchResults:
    """The workspace's own (labelled) results and the others', ``k`` best on one scale, only
    of ``scopes`` when given."""
    groups: list[Sequence[Hit]] = [own] if own is not None else []
    groups += [f.hits for f in found]
    if scopes is not None:
        groups = [[h for h in g if h.scope in scopes] for g in groups]
    hits = one_scale(groups, config, mode)[:k]
    stale = [*(own.stale if own is not None else []), *(p for f in found for p in f.stale)]
    problems = [*(own.problems if own is not None else []), *(p for f in found for p in f.problems)]
    return SearchResults(hits, stale=stale, problems=problems, mode=mode)


class Federation:
    """The other workspaces one workspace reads: its parent chain (INHERITED) and the GLOBAL
    workspace, each index opened read-only once and kept. The chain is read from the
    mdmem.toml files at each search (a few small reads), so an edit takes effect at once."""

    def __init__(
        self,
        root: Path,
        config: Config,
        embedder: Callable[[], Embedder | None],
        redactor: Redactor,
        caught_up: Callable[[Path], CaughtUp | None] | None = None,
    ) -> None:
        self.root = root
        self.config = config
        self._embedder = embedder
        self._redactor = redactor
        self._caught_up = caught_up
        self._indexes: dict[Path, IndexBackend] = {}
        self._mirrors: dict[Path, SqliteIndex] = {}

    def members(self, scopes: tuple[str, ...] | None = None) -> list[Member]:
        """Parents nearest first, then GLOBAL (unless it is one of them, or this one)."""
        chain = parent_chain(self.root, self.config)
        found = [(a.root, a.config, INHERITED) for a in chain]
        roots = {self.root.resolve(), *(a.root for a in chain)}
        if self.config.scopes.read_global:
            home = global_root()
            if home.is_dir() and home.resolve() not in roots:
                found.append((home.resolve(), _global_config(home), GLOBAL))
        return [
            Member(
                root,
                scope,
                self._index(root, config),
                self._caught_up_of(root),
                self._mirror_of(root, config),
            )
            for root, config, scope in found
            if scopes is None or scope in scopes
        ]

    def _mirror_of(self, root: Path, config: Config) -> Callable[[], SqliteIndex]:
        return lambda: self._mirror(root, config)

    def _mirror(self, root: Path, config: Config) -> SqliteIndex:
        """This workspace's keyword index of ``root``'s files (in its own ``.mdmem/``)."""
        if root not in self._mirrors:
            from mdmem.index.sqlite.index import SqliteIndex
            from mdmem.layout import STATE_DIR

            folder = self.root / STATE_DIR / MIRROR_DIR / f"{root.name}-{sha(str(root))[:12]}"
            folder.mkdir(parents=True, exist_ok=True)
            # only what is inherited: its agents' sessions and notes are never read
            local = tuple("/" + name for name in LOCAL_DIRS)
            files = replace(config.files, exclude=(*config.files.exclude, *local))
            self._mirrors[root] = SqliteIndex(
                root, folder / "index.db", files, lambda: None, redactor=self._redactor
            )
        return self._mirrors[root]

    def _index(self, root: Path, config: Config) -> IndexBackend:
        if root not in self._indexes:
            from mdmem.index import open_index
            from mdmem.layout import STATE_DIR

            self._indexes[root] = open_index(
                root,
                root / STATE_DIR,
                config.files,
                self._embedder,
                redactor=self._redactor,
                config=config.index,
                read_only=True,
            )
        return self._indexes[root]

    def embedder(self) -> Embedder | None:
        return self._embedder()

    def _caught_up_of(self, root: Path) -> Callable[[], CaughtUp | None] | None:
        caught_up = self._caught_up
        return None if caught_up is None else lambda: caught_up(root)

    def close(self) -> None:
        for index in [*self._indexes.values(), *self._mirrors.values()]:
            index.close()
        self._indexes.clear()
        self._mirrors.clear()


def _global_config(home: Path) -> Config:
    """GLOBAL's mdmem.toml; a broken one must not break every workspace's search: it is
    logged and the defaults are used to read its index."""
    try:
        return load_config(home)
    except ConfigError as exc:
        log.warning("GLOBAL workspace: %s; its index is read with the default settings", exc)
        return Config()


OwnSearch = Callable[[int, bool, Embedder | None], SearchResults]
"""(k, track_access, model or None for its own) → the workspace's own results, fresh."""


def search_all(
    own: OwnSearch,
    federation: Federation,
    query: str,
    *,
    k: int,
    mode: str,
    config: SearchConfig,
    filters: Filters,
    scopes: tuple[str, ...] | None,
    track_access: bool,
    mask: Callable[[str], str],
    bump: Callable[[list[str]], object],
) -> SearchResults:
    """The workspace's own hits and its parents' and GLOBAL's, ``k`` best on one scale. With no
    other workspace and no scope filter, exactly the workspace's own search (labelled)."""
    root = federation.root
    members = federation.members(scopes)
    if not members and scopes is None:
        return labelled(own(k, track_access, None), root)
    wide = max(k * WIDEN, k + 10)
    model = federation.embedder() if mode != "keyword" else None
    embedder = _OneQuery(model) if model is not None else None
    mine = labelled(own(wide, False, embedder), root) if _own_wanted(scopes) else None
    masked = mask(query)
    found = [
        search_member(m, embedder, masked, k=wide, mode=mode, config=config, filters=filters)
        for m in members
    ]
    found = [Found([_mask_hit(h, mask) for h in f.hits], f.stale, f.problems) for f in found]
    results = merge(mine, found, k=k, config=config, mode=mode, scopes=scopes)
    if track_access:
        keys = [access_key(h) for h in results if h.workspace == str(root)]
        if keys:
            bump(keys)
    return results


class _OneQuery:
    """The model, keeping the vector of the last single text it embedded: every other
    workspace of one search embeds the same query, once."""

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.model_id = model.model_id
        self._last: tuple[str, np.ndarray] | None = None

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        if len(texts) != 1:
            return self.model.embed(texts, progress)
        if self._last is None or self._last[0] != texts[0]:
            self._last = (texts[0], self.model.embed(texts, progress))
        return self._last[1]


def _own_wanted(scopes: tuple[str, ...] | None) -> bool:
    return scopes is None or LOCAL in scopes or SHARED in scopes


def _mask_hit(hit: Hit, mask: Callable[[str], str]) -> Hit:
    text, heading = mask(hit.text), mask(hit.heading)
    return (
        hit
        if (text, heading) == (hit.text, hit.heading)
        else replace(hit, text=text, heading=heading)
    )
