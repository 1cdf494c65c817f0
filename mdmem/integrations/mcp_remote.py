"""``mdmem mcp`` on a machine without the files: a search-only MCP server over a workspace's
index on PostgreSQL (:class:`~mdmem.index.postgres.remote.RemoteIndex`, a URL and a workspace
name). Tools: ``search`` (each hit says which index generation it came from and when that was
synced) and ``status``. Reading files, building a context and every write need the files: run
``mdmem mcp`` where they are for those. Searches run in worker threads over a connection pool.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from mdmem import RemoteIndex
from mdmem.index.request import SearchRequest
from mdmem.integrations.mcp_server import (
    READ_ONLY,
    SEARCH_HIT_KEYS,
    Query,
    _as_tool_error,
    _citation,
    description,
    takes_search_params,
)
from mdmem.paths import client_glob

__all__ = ["build_remote_server"]

INSTRUCTIONS = (
    "mdmem is this team's memory: Markdown files kept on another machine, searched here "
    "through their index. Search it before answering from assumptions; cite what you use as "
    "path:line. Hits say how fresh the index is (generation, synced)."
)


class RemoteTools:
    """The tools over one remote index."""

    def __init__(self, index: RemoteIndex) -> None:
        self.index = index

    @takes_search_params
    def search(self, query: Query, **options: Any) -> dict[str, Any]:
        """Search the memory (hybrid keyword + meaning): passages best first, each with a
        citation path:start-end and the index generation and sync time it was read from."""
        with _as_tool_error():
            if options.get("path") is not None:
                options["path"] = client_glob(options["path"], "path")
            results = self.index.search(SearchRequest.of(query, **options))
        return {
            "query": query,
            "mode": results.mode,
            "answered_by": self.index.where,
            "hits": [
                {
                    "citation": _citation(h.path, h.start_line, h.end_line),
                    **{key: getattr(h, key) for key in SEARCH_HIT_KEYS},
                    "generation": h.generation,
                    "synced": h.synced,
                }
                for h in results
            ],
        }

    def status(self) -> dict[str, Any]:
        """How big and how fresh the memory's index is: files, chunks, model, the index
        generation and when the machine with the files last synced it."""
        with _as_tool_error():
            return self.index.status().to_dict()

    def close(self) -> None:
        self.index.close()


class RemoteMCPServer(MCPServer):
    """MCPServer with the tools of a remote reader (closed by ``serve_stdio``/``serve_http``)."""

    def __init__(self, tools: RemoteTools) -> None:
        super().__init__("mdmem", instructions=INSTRUCTIONS, log_level="WARNING")
        self.tools = tools


def build_remote_server(index: RemoteIndex) -> RemoteMCPServer:
    """The search-only MCP server over ``index``."""
    tools = RemoteTools(index)
    server = RemoteMCPServer(tools)
    for name in ("search", "status"):
        tool = getattr(tools, name)
        server.add_tool(tool, description=description(tool), annotations=READ_ONLY)
    return server
