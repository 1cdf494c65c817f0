"""Assembling the memory section of a prompt from a workspace: which sources, in which mode,
with secrets masked, packed into the budget."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Protocol

from mdmem.config import Config
from mdmem.context import sources as src
from mdmem.context.pack import Context, Source, pack
from mdmem.context.tier_sources import tier_sources
from mdmem.errors import FileProblem, MdmemError
from mdmem.layout import COMPACT_FILE, KNOWLEDGE_FILES, SESSIONS_DIR, TASK_FILE, WORLD_FILE
from mdmem.memory.compact_memory import CompactMemory, read_memory
from mdmem.memory.documents import Documents
from mdmem.memory.relations import contradicted
from mdmem.memory.session_format import SessionRecord
from mdmem.memory.task import Task
from mdmem.memory.tiers import live_session
from mdmem.memory.world import World
from mdmem.redact import Redactor
from mdmem.sharing.pool import POOL_DIR, Pool, PoolEntry
from mdmem.tokens import token_counter

log = logging.getLogger("mdmem")


class Hit(Protocol):
    @property
    def id(self) -> str | None: ...
    @property
    def path(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def citation(self) -> str: ...


class Hits(Protocol):
    problems: list[str]

    def __iter__(self) -> Iterator[Hit]: ...


class Memory(Protocol):
    """What context assembly reads from a workspace (the facade hands it a view of itself)."""

    @property
    def config(self) -> Config: ...
    @property
    def documents(self) -> Documents: ...

    @property
    def redactor(self) -> Redactor: ...
    @property
    def task(self) -> Task: ...
    @property
    def world(self) -> World: ...
    def sessions(
        self, agent: str | None = None, since: str | None = None, limit: int | None = None
    ) -> list[SessionRecord]: ...
    def search(self, query: str, k: int | None = None) -> Hits: ...
    def pool(self, name: str = ...) -> Pool: ...
    def pools(self) -> list[str]: ...


def build_context(
    memory: Memory,
    query: str | None,
    budget_tokens: int | None,
    model: str | None,
    agent: str | None,
) -> Context:
    cfg = memory.config.context
    budget = cfg.budget_tokens if budget_tokens is None else int(budget_tokens)
    model = model or cfg.model or memory.config.llm.model or None
    count = token_counter(model)
    documents = memory.documents
    files = [f for f in KNOWLEDGE_FILES if (documents.root / f).exists()]
    entries = [e for f in files for e in documents.entries_or_warn(f, "context")]
    pools = memory.pools()
    shown = [*files, *(f"{POOL_DIR}/{name}.md" for name in pools)]
    try:
        ranked, related = _found(memory, query, {e.id for e in entries}, shown)
        problems: tuple[str, ...] = ()
    except (MdmemError, OSError) as exc:  # the index is down (a PostgreSQL server away …):
        # every section the files give is built all the same; the search's part is missing
        ranked, related = [], []
        problems = (
            f"the retrieved part of the context is missing: the search failed ({exc}); the "
            "sections read from the files are complete",
        )
        log.warning("context: %s", problems[0])
    sources: list[Source] = []
    if memory.config.mode == "full":
        sources.append(src.task_source(memory.task.state(), TASK_FILE))
        live = live_session(documents, agent or memory.config.agent)
        own = memory.sessions(agent=agent or memory.config.agent, limit=cfg.sessions + 1)
        # the live session is shown by its tiers (L1, L2), not as a recent session
        own = [r for r in own if live is None or r.id != live.id][: cfg.sessions]
        sources.append(src.sessions_source(own, SESSIONS_DIR + "/"))
        sources += tier_sources(memory.config, documents, count, live, own, budget)
        sources.append(src.world_source(memory.world.facts(), WORLD_FILE))
    sources.append(src.shared_source(_shared(memory, pools), POOL_DIR + "/"))
    sources.append(src.knowledge_source(entries, ranked, files, contradicted(entries)))
    if memory.config.mode == "full":
        sources.append(src.retrieved_source(related, missing=bool(problems)))
    else:
        sources.append(src.compact_source(_compact_memory(documents), COMPACT_FILE))
    # a person's file is never rewritten, but its secrets never reach a prompt
    sources = [_masked(source, memory.redactor) for source in sources]
    text, usage = pack(sources, cfg.shares, budget, count)
    return Context(text, count(text), budget, model, memory.config.mode, query, usage, problems)


def _found(
    memory: Memory, query: str | None, known: set[str | None], files: Sequence[str]
) -> tuple[list[str], list[tuple[str, str]]]:
    """Search hits for ``query``: ids of lasting memories to rank first, and other passages
    (not from a file another source shows whole)."""
    ranked: list[str] = []
    related: list[tuple[str, str]] = []
    if not query or not query.strip():
        return ranked, related
    retrieved = memory.config.context.retrieved
    shown = {*files, TASK_FILE, WORLD_FILE, COMPACT_FILE}
    results = memory.search(query, k=max(retrieved * 3, 10))
    for problem in results.problems:
        log.warning("context: %s", problem)
    for hit in results:
        scope = getattr(hit, "scope", None)
        foreign = scope in ("INHERITED", "GLOBAL")  # a parent's or GLOBAL's: shown nowhere else
        if hit.id in known and not foreign:
            ranked.append(hit.id or "")
        elif (foreign or hit.path not in shown) and len(related) < retrieved:
            where = f"{str(scope).lower()} {getattr(hit, 'workspace', '')}/{hit.citation}"
            related.append((where if foreign else hit.citation, hit.text))
    return ranked, related


def _shared(memory: Memory, pools: Sequence[str]) -> list[PoolEntry]:
    entries: list[PoolEntry] = []
    for name in pools:
        try:
            entries += memory.pool(name).list()
        except FileProblem as exc:
            log.warning("context: skipped %s", exc)
    return entries


def _compact_memory(documents: Documents) -> CompactMemory:
    if not (documents.root / COMPACT_FILE).exists():
        return CompactMemory()
    try:
        return read_memory(documents.read(COMPACT_FILE).text)
    except FileProblem as exc:
        log.warning("context: skipped %s", exc)
        return CompactMemory()


def _masked(source: Source, redactor: Redactor) -> Source:
    mask = redactor.mask
    units = tuple(replace(u, text=mask(u.text), group=mask(u.group)) for u in source.units)
    return replace(source, units=units, groups=tuple(mask(g) for g in source.groups))
