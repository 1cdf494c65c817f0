"""The anchor for `mdmem mcp`'s start-up: the MCP SDK's bare ``MCPServer`` with one tool, over
stdio, started as a client starts a server (a new Python process). ``benchmarks/cli_latency.py``
times its start → ``initialize`` answered next to mdmem's; nothing of mdmem is imported.

Usage:  .venv/bin/python benchmarks/mcp_bare_server.py   (then speak MCP on stdin/stdout)
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


if __name__ == "__main__":
    server.run("stdio")
