"""Ways agents plug into a workspace without importing mdmem themselves.

- :mod:`mdmem.integrations.mcp_server`: ``mdmem mcp``, an MCP server (extra ``mdmem[mcp]``);
- :mod:`mdmem.integrations.memory_tool`: a backend for Claude's memory tool
  (``memory_20250818``; extra ``mdmem[anthropic]``), over :mod:`.memory_files`.

Each module imports its SDK itself, so importing this package costs nothing. Modules here use
the public API only (``from mdmem import Workspace``, ``mdmem.errors``, the result types).
"""
