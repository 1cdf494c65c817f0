"""The workspace of ``mdmem mcp``, opened on a background thread while the MCP SDK imports.

A client starts a new server for each session, waits for ``initialize``, and may search at
once. The SDK's import (about a second on a quiet 2-core machine, nearly all of it pydantic
building the protocol's types) used to come first, then the workspace's imports and the query
encoder's load (onnxruntime reading the default model's ONNX export: a few hundred milliseconds
of native code, mostly without the GIL), one after the other: start → first hybrid search
answered took 2.28 s. Started from the process's start instead, the encoder loads on the other
core while the SDK imports, and the first search waits for neither.

This module imports nothing of the SDK (a thread it starts must not wait for it), nor of the
workspace, the index or a model until its thread runs. What is loaded before the handshake is
only what answers a query without torch or litellm: the workspace's modules and the ONNX
export. A model that needs torch (no export yet, ``$MDMEM_ONNX=0``, another model) or litellm
is loaded only once the client is past ``initialize`` (:meth:`Background.handshake_done`):
seconds of imports holding the GIL would hold ``initialize`` back.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.errors import MdmemError

if TYPE_CHECKING:
    from mdmem import Workspace
    from mdmem.config import Config

__all__ = ["Background", "WorkspaceUnavailable", "in_background"]

log = logging.getLogger("mdmem")

SETTLE_S = 60.0
"""At exit, how long to wait for a query encoder still loading (seconds; it takes one or two)."""


class WorkspaceUnavailable(MdmemError):
    """The workspace could not be opened (said by every call that needs it)."""


class Background:
    """The workspace, opened on a background thread, then the model warmed up (unless a warm
    server answers searches): a client's calls never wait for imports they do not need.

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
        self._handshake = threading.Event()
        self._ws: Workspace | None = None
        self._error: BaseException | None = None
        self.vectors = threading.Event()
        self.waiting_for_handshake = threading.Event()
        """Set while the model's load (it needs torch or litellm) waits for the handshake."""
        if not warm_up:  # (a server in a test, or a host's: the model loads at the first search)
            self.vectors.set()

    def start(self) -> None:
        """Open the workspace and load the query encoder now (once)."""
        with self._started:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="mdmem-open-workspace", daemon=True
                )
                self._thread.start()

    def handshake_done(self) -> None:
        """The client is past ``initialize``: a model that needs torch or litellm may load."""
        self._handshake.set()
        self.start()

    def workspace(self) -> Workspace:
        """The workspace, waiting for it to open (started here if it was not yet)."""
        self.start()
        self._opened.wait()
        if self._ws is None:
            raise WorkspaceUnavailable(
                f"the workspace {self.root} could not be opened: {self._error}"
            )
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
        exception"), which a client that leaves at once would otherwise see."""
        if self._thread is not None:
            self._opened.wait(timeout)  # (the prefetch has started by then, if there is one)
        loading = self._loading
        if loading is not None:
            loading.join(timeout)

    def _run(self) -> None:
        with self._started:
            prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:
            try:
                self._loading = prefetch()
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
            self._warm(self._ws)
        except Exception as exc:  # the search that needs the model says what went wrong
            log.info("warming up the embedding model failed: %s", exc)
        finally:
            self.vectors.set()

    def _warm(self, ws: Workspace) -> None:
        from mdmem.integrations.warm import warm_server_running

        if warm_server_running(self.root):
            return  # it answers searches; its model is loaded there
        # what a search imports, while the encoder loads: not at the first search
        import mdmem.index.federated
        import mdmem.index.search  # noqa: F401

        if not self.vectors.is_set():  # torch or litellm: not before `initialize` is answered
            self.waiting_for_handshake.set()
            self._handshake.wait()
            self.waiting_for_handshake.clear()
        embedder = ws.index.embedder()
        if embedder is not None:
            embedder.embed(["warm up"])


def _light_queries(ws: Workspace) -> bool:
    """Whether this process embeds a query of the workspace's model without importing torch or
    litellm (no model, or the default model's current ONNX export)."""
    from mdmem.index.embed import queries_without_torch

    cfg = ws.config.embedding
    return queries_without_torch(cfg.model, cfg.provider, cfg.device)


def in_background(
    workspace: Workspace | Path,
    *,
    agent: str | None = None,
    config: Config | None = None,
    warm_up: bool = True,
) -> Background:
    """A :class:`Background` over an open workspace, or the folder of one (``config``: its
    mdmem.toml as already read, else read on the background thread). Not started: ``start()``
    it as early as the process can (``mdmem mcp`` does, before the SDK's import), or the
    server starts it at the first message after ``initialize``. ``agent``: the writer of its
    sessions (checked here). ``warm_up``: load the model in the background too (else at the
    first search that needs it, and searches are never answered by keyword alone for want of
    it)."""
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
    ahead: Any = prefetch if isinstance(workspace, Path) and warm_up else None
    return Background(root, opened, warm_up=warm_up, prefetch=ahead)
