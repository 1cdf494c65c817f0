"""``mdmem mcp``: the workspace as an MCP server (extra ``mdmem[mcp]``; the official SDK, 2.x).

Claude Code, Claude Desktop, Cursor and the Agents SDKs start it over stdio; ``--http`` serves
streamable HTTP on loopback. Tools search, read and write the workspace through the public
API (the same safe writes as everything else); resources are its files (``mdmem://memory.md``).

A client starts a new server for every session and waits for ``initialize`` before anything
else, so start-up imports nothing of mdmem's workspace, index or models: the tools' schemas
are built from this module alone, and ``initialize`` and ``tools/list`` are answered as fast as
the SDK's own bare server answers them (``benchmarks/cli_latency.py``). Once the client is past
``initialize``, a background thread opens the workspace and loads the query encoder (the
default model's ONNX export, no torch) or the model. A call that needs the workspace waits for
it to open (imports, well under the model's load); a default search that arrives while the
model itself (torch, litellm) is still loading is answered by keyword alone and says so in
``vectors``, never held for the model's seconds. Sync tools run in worker threads, so an
extraction or a compaction never blocks a search.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
import stat
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import InputRequiredResult, Resource, ToolAnnotations
from pydantic import Field

from mdmem.errors import MdmemError
from mdmem.index.request import SearchRequest
from mdmem.index.search_params import MODES, PARAMETER, SEARCH_OPTIONS
from mdmem.integrations.viewer import capped, masked_lines, numbered
from mdmem.integrations.warm import warm_search, warm_server_running
from mdmem.paths import client_glob, client_name, client_path

if TYPE_CHECKING:  # imported in the background, once the client is past `initialize`
    from mdmem import Entry, Session, SessionRecord, Workspace

__all__ = ["build_server", "serve_http", "serve_stdio"]

log = logging.getLogger("mdmem")
INSTRUCTIONS = (
    "mdmem is this user's memory: Markdown files a person also edits by hand. Search it "
    "before answering from assumptions; remember lasting facts, preferences and skills; cite "
    "what you use as path:line. Read a cited line range with `read`."
)
KEYWORD_ONLY = (
    "keyword only: the embedding model is still loading in the background; searches find by "
    "meaning too once it is loaded (in seconds)"
)
"""``vectors`` of a default search answered before the model could embed its query."""
SEARCH_HIT_KEYS = ("heading", "text", "score", "type", "importance", "created", "id", "session")
LIVE_TITLE = "MCP session"
READ_AGAIN = "read again with start_line={next} for the rest"
SETTLE_S = 60.0
"""At exit, how long to wait for a query encoder still loading (seconds; it takes one or two)."""
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

PATH_KEY = "x-mdmem-path"
"""Marks, in a tool's input schema, an argument that names a file, a folder or a source, and
how it goes through the one resolver (:mod:`mdmem.paths`): ``file`` (:func:`client_path`),
``source`` (a session id, or a transcript inside the workspace: :func:`client_path`),
``glob`` (:func:`client_glob`), ``name`` (:func:`client_name`). A test lists the tools and
fails for a path-like argument without it; a property test sends hostile names to each one
that has it."""


NOT_A_PATH_KEY = "x-mdmem-not-a-path"
"""Marks an argument that only looks path-like (a pool key ``findings/paris``), with why it
never reaches the file system as a path."""
KEY_IN_POOL = "a key inside shared/<pool>.md: text in that file, never a file name"


def _resolved(kind: str) -> dict[str, Any]:
    return {PATH_KEY: kind}


Query = Annotated[str, Field(description="What to look for, in plain words.")]
AgentFilter = Annotated[str | None, Field(description="Only this agent's sessions.")]


def takes_search_params(tool: Callable[..., Any]) -> Callable[..., Any]:
    """A search tool's arguments: its own (``query``), then, for its ``**options``, each
    search parameter of mdmem/index/search_params.py the MCP tools take (the SDK builds a
    tool's input schema from its signature). Both servers' ``search`` tools are built so."""
    types: dict[str, Any] = {"int": int, "str": str, "bool": bool, "mode": Literal[MODES]}
    added = []
    for option in SEARCH_OPTIONS:
        if option.role != PARAMETER or option.mcp is None:
            continue
        kind = types[option.kind] if option.default is not None else types[option.kind] | None
        extra = _resolved(option.path_like) if option.path_like else None
        field = Field(
            ge=option.at_least, le=option.mcp_at_most, description=option.mcp,
            json_schema_extra=extra,
        )  # fmt: skip
        added.append(
            inspect.Parameter(
                option.name, inspect.Parameter.KEYWORD_ONLY, default=option.default,
                annotation=Annotated[kind, field],
            )
        )  # fmt: skip
    own = inspect.signature(tool, eval_str=True)
    fixed = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    typed: Any = tool
    typed.__signature__ = own.replace(parameters=[*fixed, *added])
    return tool


SessionSource = Annotated[
    str | None,
    Field(
        description="Session id, or a transcript file inside the workspace (default: the "
        "latest session).",
        json_schema_extra=_resolved("source"),
    ),
]
PoolName = Annotated[
    str,
    Field(description="The pool: shared/<pool>.md.", json_schema_extra=_resolved("name")),
]


@contextlib.contextmanager
def _as_tool_error() -> Iterator[None]:
    """mdmem's clear errors become the tool result the model reads, never a crash (the SDK
    would answer only "Error executing tool …" and print a traceback): a missing entry, key or
    TODO item (``LookupError``), a bad value, a file that cannot be read or written."""
    try:
        yield
    except (MdmemError, ValueError, LookupError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise ToolError(str(message)) from None
    except OSError as exc:
        raise ToolError(f"{exc.filename or 'file'}: {exc.strerror or exc}") from None


def _entry(entry: Entry) -> dict[str, Any]:
    """An entry as a write reports it: where it is, to be read back with ``read``."""
    return {
        "id": entry.id,
        "citation": _citation(entry.path, entry.start_line, entry.end_line),
        "path": entry.path,
        "start_line": entry.start_line,
        "end_line": entry.end_line,
        "type": entry.type,
        "importance": entry.importance,
        "text": entry.text,
        "secrets_masked": entry.redacted,
    }


def _citation(path: str, start: int, end: int) -> str:
    return f"{path}:{start}-{end}" if end > start else f"{path}:{start}"


class Background:
    """The workspace, opened in a background thread once the client is past ``initialize``,
    then the model warmed up (unless a warm server answers searches): a client's first calls
    never wait for imports it does not need, and ``initialize`` waits for none.

    ``vectors`` is set once a query can be embedded without waiting for the model's load: the
    model embedded once, or the configured model needs no torch for a query (no model, or the
    default model's ONNX export: a search then waits at most for that export's load)."""

    def __init__(
        self,
        root: Path,
        opener: Callable[[], Workspace],
        *,
        warm_up: bool,
        prefetch: Callable[[], threading.Thread | None] | None = None,
    ) -> None:
        """``prefetch``: called first on the background thread, to start what loads on a
        thread of its own beside the workspace's imports (the query encoder); it returns that
        thread, which the process waits for before it exits (:meth:`settle`)."""
        self.root = root
        self._opener = opener
        self._warm_up = warm_up
        self._prefetch = prefetch
        self._started = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loading: threading.Thread | None = None
        self._opened = threading.Event()
        self._ws: Workspace | None = None
        self._error: BaseException | None = None
        self.vectors = threading.Event()
        if not warm_up:  # (a server in a test, or a host's: the model loads at the first search)
            self.vectors.set()

    def start(self) -> None:
        with self._started:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="mdmem-open-workspace", daemon=True
                )
                self._thread.start()

    def workspace(self) -> Workspace:
        """The workspace, waiting for it to open (started here if it was not yet)."""
        self.start()
        self._opened.wait()
        if self._ws is None:
            raise ToolError(f"the workspace {self.root} could not be opened: {self._error}")
        return self._ws

    def opened(self) -> Workspace | None:
        """The workspace if it was opened (or is being opened: then once it is), else None."""
        if self._thread is None:
            return None
        self._opened.wait()
        return self._ws

    def settle(self, timeout: float = SETTLE_S) -> None:
        """Wait for the query encoder's load, if one runs: a process that exits while
        onnxruntime is inside its native load is aborted ("terminate called without an active
        exception"), as a client that leaves right after the handshake would see."""
        if self._thread is not None:
            self._opened.wait(timeout)  # (the prefetch has started by then, if there is one)
        loading = self._loading
        if loading is not None:
            loading.join(timeout)

    def _run(self) -> None:
        if self._prefetch is not None:
            try:
                self._loading = self._prefetch()
            except Exception as exc:  # (the search that loads it again says what is wrong)
                log.info("loading the query encoder ahead failed: %s", exc)
        try:
            self._ws = self._opener()
            if not self.vectors.is_set() and _light_queries(self._ws):
                self.vectors.set()  # a query waits at most for the ONNX export's load
        except BaseException as exc:  # said by every call that needs the workspace
            self._error = exc
            log.warning("the workspace %s could not be opened: %s", self.root, exc)
        finally:
            self._opened.set()
        if self._ws is None or not self._warm_up:
            return
        try:
            if warm_server_running(self.root):
                return  # it answers searches; its model is loaded there
            # what a search imports, while the encoder loads: not at the first search
            import mdmem.index.federated
            import mdmem.index.search  # noqa: F401

            embedder = self._ws.index.embedder()
            if embedder is not None:
                embedder.embed(["warm up"])
        except Exception as exc:  # the search that needs the model says what went wrong
            log.info("warming up the embedding model failed: %s", exc)
        finally:
            self.vectors.set()


def _light_queries(ws: Workspace) -> bool:
    """Whether this process embeds a query of the workspace's model without importing torch or
    litellm (no model, or the default model's current ONNX export)."""
    from mdmem.index.embed import queries_without_torch

    cfg = ws.config.embedding
    return queries_without_torch(cfg.model, cfg.provider, cfg.device)


class Tools:
    """The tools, over one workspace; one live session for ``session_event``."""

    def __init__(self, workspace: Workspace | Background) -> None:
        """``workspace``: open already, or being opened by a :class:`Background`."""
        if isinstance(workspace, Background):
            self.background = workspace
        else:
            self.background = Background(workspace.root, lambda: workspace, warm_up=False)
        self._live: Session | None = None
        self._live_lock = threading.Lock()

    @property
    def ws(self) -> Workspace:
        """The workspace, once open (the first call may wait for the background's imports)."""
        return self.background.workspace()

    # ---- reading --------------------------------------------------------------------------

    @takes_search_params
    def search(self, query: Query, **options: Any) -> dict[str, Any]:
        """Search the memory (hybrid keyword + meaning): passages best first, each with a
        citation path:start-end to read back or quote. Hand edits are seen at once. Just after
        start-up an answer may be keyword-only while the model loads: `vectors` says so."""
        with _as_tool_error():
            if options.get("path") is not None:
                options["path"] = client_glob(options["path"], "path")
            request = SearchRequest.of(query, **options)
            reply = warm_search(self.background.root, query, request.params())
            if reply is not None and not reply.get("ok"):
                raise ToolError(str(reply.get("error")))
            vectors = "ready"
            if reply is not None:
                answered = f"warm server (pid {reply.get('pid')})"
                found, hits = reply, reply["hits"]
            else:
                ws = self.ws
                if (
                    not self.background.vectors.is_set()
                    and (request.mode or ws.config.search.mode) == "hybrid"
                ):
                    request = dataclasses.replace(request, mode="keyword")
                    vectors = KEYWORD_ONLY
                results = ws.search(request)
                answered = "in-process"
                found = {
                    "mode": results.mode,
                    "fresh": results.fresh,
                    "stale": results.stale,
                    "problems": results.problems,
                }
                hits = [hit.to_dict() for hit in results]
        return {
            "query": query,
            "mode": found["mode"],
            "vectors": vectors,
            "answered_by": answered,
            "fresh": found["fresh"],
            "stale": found["stale"],
            "problems": found["problems"],
            "hits": [
                {
                    "citation": _citation(h["path"], h["start_line"], h["end_line"]),
                    **{key: h.get(key) for key in SEARCH_HIT_KEYS},
                    **({"index": h["index"]} if "index" in h else {}),  # PostgreSQL: freshness
                }
                for h in hits
            ],
        }

    def read(
        self,
        path: Annotated[
            str,
            Field(
                description="A workspace file, e.g. memory.md.", json_schema_extra=_resolved("file")
            ),
        ],
        start_line: Annotated[int | None, Field(ge=1, description="First line (1-based).")] = None,
        end_line: Annotated[int | None, Field(ge=1, description="Last line (inclusive).")] = None,
    ) -> str:
        """Read a workspace file, or a line range of it (a citation's lines), numbered like a
        viewer. Secrets show as [REDACTED:kind]. Long files are paged."""
        with _as_tool_error():
            rel, text = self._text(path, "path")
        lines = text.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        first = start_line or 1
        last = min(end_line or len(lines), len(lines))
        if first > len(lines):
            raise ToolError(f"{rel} has {len(lines)} lines; start_line {first} is past its end")
        if last < first:
            raise ToolError(f"end_line {end_line} is before start_line {first}")
        if start_line is not None or end_line is not None:  # a citation's lines: its memories
            self.ws.index._note_read(rel, first, last)
        rows = numbered(masked_lines(lines[first - 1 : last], self.ws.files._redactor.mask), first)
        body = capped(rows, first, len(lines), resume=READ_AGAIN)
        return f"{_citation(rel, first, last)} (of {len(lines)} lines)\n{body}"

    def _text(self, path: str, argument: str) -> tuple[str, str]:
        """A workspace file's text. Only a regular file is opened: opening a FIFO would wait
        for a writer forever (and pin a worker thread), so its kind is checked first, and the
        open itself never waits (``O_NONBLOCK``) in case the name changed in between."""
        rel, absolute = client_path(self.ws.root, path, argument)
        try:
            if not stat.S_ISREG(os.stat(absolute).st_mode):
                raise ToolError(_not_regular(rel, absolute))
            fd = os.open(absolute, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ToolError(_not_regular(rel, absolute))
                data = handle.read(self.ws.config.max_file_bytes + 1)
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError(f"{rel}: no such file in the workspace") from None
        except OSError as exc:
            raise ToolError(f"{rel} cannot be read: {exc.strerror or exc}") from None
        if len(data) > self.ws.config.max_file_bytes:
            raise ToolError(f"{rel} is larger than files.max_file_mb; not read")
        try:
            return rel, data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ToolError(f"{rel} is not UTF-8 text") from None

    def context(
        self,
        query: Annotated[str | None, Field(description="What the next step is about.")] = None,
        budget_tokens: Annotated[int | None, Field(ge=50, description="Token budget.")] = None,
        model: Annotated[str | None, Field(description="Tokenizer (litellm model).")] = None,
    ) -> dict[str, Any]:
        """The memory section of a system prompt within a token budget: the task, recent
        sessions, world state, lasting memories and passages found for the query."""
        with _as_tool_error():
            return self.ws.build_context(query, budget_tokens, model).to_dict()

    def sessions(
        self,
        limit: Annotated[int, Field(ge=1, le=50, description="How many of each.")] = 5,
        agent: AgentFilter = None,
    ) -> dict[str, Any]:
        """Recent sessions (newest first) and the workspace files changed most recently."""
        import datetime as dt

        with _as_tool_error():
            sessions = self.ws.sessions.list(agent=agent, limit=limit)
            files = sorted(self.ws.files._scan().files, key=lambda f: f.mtime_ns, reverse=True)
        return {
            "sessions": [s.to_dict(events=False) for s in sessions],
            "changed_files": [
                {
                    "path": f.path,
                    "modified": dt.datetime.fromtimestamp(f.mtime_ns / 1e9).isoformat(
                        timespec="seconds"
                    ),
                    "bytes": f.size,
                }
                for f in files[:limit]
            ],
        }

    # ---- writing --------------------------------------------------------------------------

    def remember(
        self,
        text: Annotated[str, Field(description="The memory, one plain statement.")],
        type: Literal["preference", "fact", "pattern", "skill"] = "fact",
        importance: Annotated[float, Field(ge=0, le=1)] = 0.5,
        file: Annotated[
            str | None,
            Field(
                description="Markdown file (default by type).", json_schema_extra=_resolved("file")
            ),
        ] = None,
        section: Annotated[str | None, Field(description="Heading to put it under.")] = None,
    ) -> dict[str, Any]:
        """Remember a lasting fact, preference, pattern or skill: appended under the heading
        for its type (skills to learnings.md, the rest to memory.md). The same text already
        there is returned instead of a duplicate. Reports the lines written."""
        with _as_tool_error():
            if file is not None:
                file = client_path(self.ws.root, file, "file")[0]
            entry = self.ws.remember(
                text, type=type, importance=importance, file=file, section=section
            )
        return _entry(entry)

    def update(
        self,
        id: Annotated[str, Field(description="The entry's id (m-… or h-…).")],
        text: Annotated[str | None, Field(description="New text.")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1)] = None,
        type: Literal["preference", "fact", "pattern", "skill"] | None = None,
    ) -> dict[str, Any]:
        """Change one entry in place (text, importance or type); no other line changes."""
        with _as_tool_error():
            return _entry(self.ws.update(id, text, importance=importance, type=type))

    def supersede(
        self,
        id: Annotated[str, Field(description="The entry that is no longer true.")],
        by: Annotated[str, Field(description="Its replacement: new text, or an entry id.")],
        importance: Annotated[float | None, Field(ge=0, le=1)] = None,
    ) -> dict[str, Any]:
        """Replace an outdated entry: the old one moves to the file's Archive section with a
        pointer to the new one (nothing is deleted)."""
        with _as_tool_error():
            return {**_entry(self.ws.supersede(id, by, importance=importance)), "superseded": id}

    def session_event(
        self,
        action: Annotated[
            str, Field(description="planning, thinking, execute, error, complete, …")
        ],
        text: Annotated[str, Field(description="What happened, briefly.")],
        importance: Annotated[float | None, Field(ge=0, le=1)] = None,
        title: Annotated[
            str | None, Field(description="Title of the session, when this starts it.")
        ] = None,
    ) -> dict[str, Any]:
        """Log one step to this server's live session (.sessions/…, started by the first
        event, ended when the server stops)."""
        with _as_tool_error():
            session = self._session(title)
            event = session.event(action, text, importance)
        return {"session": session.id, "path": session.path, **event.to_dict()}

    def _session(self, title: str | None) -> Session:
        with self._live_lock:
            if self._live is None:
                self._live = self.ws.session(title or LIVE_TITLE)
            return self._live

    def close(self) -> None:
        """End the live session (completed) and wait for the late-save windows (nothing to do
        when the workspace was never opened: the client left before any call)."""
        with self._live_lock:
            if self._live is not None:
                with contextlib.suppress(MdmemError, OSError):
                    self._live.close("completed")
        ws = self.background.opened()
        if ws is not None:
            ws.close()
        self.background.settle()

    def task(
        self,
        action: Literal["list", "add", "complete", "done"] = "list",
        text: Annotated[str | None, Field(description="add: the TODO item.")] = None,
        n: Annotated[int | None, Field(ge=1, description="complete: the item's number.")] = None,
    ) -> dict[str, Any]:
        """The current task (task_process.md): list its TODO items, add one, or tick one
        (complete; "done" is its old name)."""
        with _as_tool_error():
            if action == "add":
                if not text:
                    raise ToolError("task add needs text")
                self.ws.task.add(text)
            elif action in ("complete", "done"):
                if n is None:
                    raise ToolError("task complete needs n, the item's number")
                self.ws.task.complete(n)
            return self.ws.task.state().to_dict()

    def world(
        self,
        action: Literal["get", "set"] = "get",
        key: Annotated[str | None, Field(description="The fact's key, e.g. db.")] = None,
        value: Annotated[str | None, Field(description="set: the new value.")] = None,
        section: Annotated[str | None, Field(description="set: heading to put it under.")] = None,
    ) -> dict[str, Any]:
        """The world state (world_state.md): get every fact or one by key, or set one."""
        with _as_tool_error():
            if action == "set":
                if not key or value is None:
                    raise ToolError("world set needs key and value")
                return self.ws.world.set(key, value, section).to_dict()
            facts = self.ws.world.facts()
            if key is None:
                return {"facts": [fact.to_dict() for fact in facts]}
            for fact in facts:
                if fact.key == key:
                    return fact.to_dict()
            raise ToolError(f"no world fact {key!r} in world_state.md")

    def compact(
        self,
        source: SessionSource = None,
        offline: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Compact a session: its current state and key events, after saving its lasting
        memories. Uses the configured LLM, or the offline engine."""
        with _as_tool_error():
            conversation = self._source(source)
            return self.ws.compact(conversation, offline=offline, dry_run=dry_run).to_dict()

    def extract(
        self,
        source: SessionSource = None,
        offline: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Extract lasting memories from a session into memory.md / learnings.md,
        deduplicated against what is there."""
        with _as_tool_error():
            conversation = self._source(source)
            return self.ws.extract(conversation, offline=offline, dry_run=dry_run).to_dict()

    def _source(self, source: str | None) -> Path | SessionRecord | None:
        """What ``source`` names, never outside the workspace: a transcript file inside it (by
        the one resolver), else a recorded session by id. The library reads a path it is given
        from anywhere (the local user's ``mdmem extract FILE``); a client only gets this."""
        if source is None:
            return None
        _, absolute = client_path(self.ws.root, source, "source")
        if absolute.is_file():
            return absolute
        return self.ws.sessions.record(source)

    # ---- the shared pool ------------------------------------------------------------------

    def pool_read(
        self,
        key: Annotated[
            str | None,
            Field(
                description="The key (omit to list the pool).",
                json_schema_extra={NOT_A_PATH_KEY: KEY_IN_POOL},
            ),
        ] = None,
        pool: PoolName = "default",
        prefix: Annotated[str, Field(description="List: only keys starting with this.")] = "",
        limit: Annotated[int, Field(ge=1, le=200, description="List: at most this many.")] = 50,
    ) -> dict[str, Any]:
        """Read the shared pool other agents write to: one key (its value, version, who wrote
        it and when), or its entries newest first. Pass the version to pool_write to update it
        safely."""
        with _as_tool_error():
            shared = self.ws.sharing.pool(client_name(pool, "pool"))
            if key is None:
                entries = shared.list(prefix=prefix, limit=limit)
                return {"pool": pool, "entries": [e.to_dict() for e in entries]}
            entry = shared.read(key)
        if entry is None:
            raise ToolError(f"no key {key!r} in shared/{pool}.md")
        return entry.to_dict()

    def pool_write(
        self,
        key: Annotated[
            str,
            Field(
                description="The key, e.g. findings/paris.",
                json_schema_extra={NOT_A_PATH_KEY: KEY_IN_POOL},
            ),
        ],
        value: Annotated[
            Any, Field(description="Text, or any JSON value (object, list, number, …).")
        ],
        pool: PoolName = "default",
        expected_version: Annotated[
            int | None,
            Field(ge=0, description="Write only if the key is at this version (0: absent)."),
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Merged into the entry's metadata.")
        ] = None,
    ) -> dict[str, Any]:
        """Write a key of the shared pool, read by every agent of this workspace. With
        expected_version the write happens only if nobody changed the key since you read it;
        else an error says which version is there now: read it again and retry."""
        with _as_tool_error():
            shared = self.ws.sharing.pool(client_name(pool, "pool"))
            entry = shared.write(key, value, None, expected_version, metadata)
        return {**entry.to_dict(), "secrets_masked": entry.redacted}

    # ---- resources ------------------------------------------------------------------------

    def file_resource(self, path: str) -> str:
        """A workspace file's text, secrets masked."""
        try:
            _, text = self._text(_unquoted(path), "resource path")
        except (ToolError, MdmemError) as exc:
            raise ResourceNotFoundError(str(exc)) from None
        return "\n".join(masked_lines(text.split("\n"), self.ws.files._redactor.mask))

    def resources(self) -> list[Resource]:
        return [
            Resource(
                uri=f"mdmem://{urllib.parse.quote(f.path)}",
                name=f.path,
                mime_type=mime_type(f.path),
                size=f.size,
            )
            for f in self.ws.files._scan().files
        ]


def _unquoted(path: str) -> str:
    """A resource URI's path, percent-escapes decoded once; an escape that is not UTF-8 (an
    overlong encoding) is refused, never replaced by U+FFFD."""
    try:
        return urllib.parse.unquote(path, errors="strict")
    except UnicodeDecodeError:
        raise ToolError(
            f"resource path {path!r} holds a percent-escape that is not UTF-8"
        ) from None


def mime_type(path: str) -> str:
    """What ``resources/list`` and ``resources/read`` both say a file is."""
    return "text/markdown" if path.lower().endswith((".md", ".markdown")) else "text/plain"


def _not_regular(rel: str, absolute: Any) -> str:
    if os.path.isdir(absolute):
        return f"{rel} is a folder, not a file"
    return f"{rel} is not a regular file (a FIFO, a socket or a device); not read"


def description(tool: Any) -> str:
    """A tool's docstring as its description, without the source's indentation."""
    return inspect.cleandoc(tool.__doc__ or "")


class _AfterHandshake:
    """Middleware that starts the background's work at the first message after ``initialize``
    (``notifications/initialized``, or any request): the answer to ``initialize`` is out by
    then, so its imports never compete with it for the interpreter."""

    def __init__(self, background: Background) -> None:
        self.background = background

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method != "initialize":
            self.background.start()
        return await call_next(ctx)


OLD_TOOL_NAMES = {"recent": "sessions", "pool_get": "pool_read", "pool_set": "pool_write"}
"""Tool names clients were configured with before issue 42 gave each operation one name: a
call by the old name runs the new tool, same arguments; ``tools/list`` shows only the new
names, so a model never sees the same tool twice."""


class MdmemMCPServer(MCPServer):
    """MCPServer with the workspace files as resources, listed as they are now."""

    def __init__(self, tools: Tools) -> None:
        super().__init__(
            "mdmem",
            instructions=INSTRUCTIONS,
            log_level="WARNING",
            middleware=[_AfterHandshake(tools.background)],
        )
        self.tools = tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """A call by an old tool name (:data:`OLD_TOOL_NAMES`) runs the tool it became."""
        return await super().call_tool(OLD_TOOL_NAMES.get(name, name), arguments, context)

    async def list_resources(self) -> list[Resource]:
        files = await anyio.to_thread.run_sync(self.tools.resources)
        return [*await super().list_resources(), *files]

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        """A file's contents with the MIME type ``resources/list`` gave it (the template alone
        would say text/plain for every file)."""
        results = await super().read_resource(uri, context)
        if isinstance(results, InputRequiredResult):
            return results
        path = urllib.parse.unquote(str(uri).removeprefix("mdmem://"))
        return [dataclasses.replace(r, mime_type=mime_type(path)) for r in results]


def build_server(
    workspace: Workspace | Path,
    *,
    agent: str | None = None,
    warm_up: bool = True,
    config: Any = None,
) -> MdmemMCPServer:
    """The MCP server over a workspace; ``agent`` names the writer of its sessions.

    ``workspace``: an open :class:`~mdmem.Workspace`, or the folder of one (``config``, its
    mdmem.toml as already read, else read then), opened in the background once the client is
    past ``initialize``. ``warm_up``: load the model in the background too (else at the first
    search that needs it, and searches are never answered by keyword alone for want of it)."""
    checked = None
    if agent is not None:
        from mdmem.config import check_name

        checked = check_name(agent, "agent")

    def opened() -> Workspace:
        if isinstance(workspace, Path):
            from mdmem.workspace import Workspace

            ws = Workspace(workspace, config)
        else:
            ws = workspace
        if checked is not None:
            ws.config = dataclasses.replace(ws.config, agent=checked)
        return ws

    def prefetch() -> threading.Thread | None:
        from mdmem.config import load_config
        from mdmem.index.embed import prefetch_query_encoder

        cfg = (config if config is not None else load_config(root)).embedding
        return prefetch_query_encoder(cfg.model, cfg.provider, cfg.device, cfg.threads)

    root = workspace if isinstance(workspace, Path) else workspace.root
    ahead = prefetch if isinstance(workspace, Path) and warm_up else None
    tools = Tools(Background(root, opened, warm_up=warm_up, prefetch=ahead))
    server = MdmemMCPServer(tools)
    for name in ("search", "read", "context", "sessions", "pool_read"):
        tool = getattr(tools, name)
        server.add_tool(tool, description=description(tool), annotations=READ_ONLY)
    for name in ("remember", "update", "supersede", "session_event", "task", "world", "pool_write"):
        tool = getattr(tools, name)
        server.add_tool(tool, description=description(tool), annotations=WRITES)
    for name in ("compact", "extract"):
        tool = getattr(tools, name)
        server.add_tool(tool, description=description(tool), annotations=WRITES)
    server.resource(
        "mdmem://{+path}",
        name="workspace file",
        description="A workspace file (mdmem://memory.md, mdmem://.sessions/…), secrets masked.",
        meta={PATH_KEY: {"path": "file"}},
    )(tools.file_resource)
    return server


def serve_stdio(server: MdmemMCPServer) -> None:
    """JSON-RPC on stdout, nothing else (the SDK points fd 1 at stderr while it serves)."""
    try:
        server.run("stdio")
    finally:
        server.tools.close()


def serve_http(
    server: MdmemMCPServer,
    host: str,
    port: int,
    token: str | None,
    extra_hosts: list[str],
) -> None:
    """Streamable HTTP at ``http://host:port/mcp``, DNS-rebinding protection on."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from mdmem.integrations.http_guard import BearerToken, HostGuard, allowed_hosts, check_host

    check_host(host, token)
    hosts = allowed_hosts(host, extra_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts],
    )
    app: Any = server.streamable_http_app(transport_security=security, host=host)
    app = HostGuard(app, hosts)  # (the same rule as the SDK's, with what to pass on a 421)
    if token:
        app = BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    try:
        uvicorn.Server(config).run()
    finally:
        server.tools.close()
