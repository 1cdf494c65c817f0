"""Ways agents plug into a workspace without importing mdmem themselves.

- :mod:`mdmem.integrations.mcp_server`: ``mdmem mcp``, an MCP server (extra ``mdmem[mcp]``);
- :mod:`mdmem.integrations.memory_tool`: a backend for Claude's memory tool
  (``memory_20250818``; extra ``mdmem[anthropic]``), over :mod:`.memory_files`;
- :mod:`mdmem.integrations.importers`: ``mdmem import`` of chat histories;
- :mod:`mdmem.integrations.openai_agents`, :mod:`mdmem.integrations.langgraph_store`: framework
  adapters (extras ``mdmem[openai-agents]``, ``mdmem[langgraph]``);
- :mod:`mdmem.integrations.hooks`: Claude Code hooks.

Each module imports its SDK itself, so importing this package costs nothing. Modules here use
the public API only (``from mdmem import Workspace``, ``mdmem.errors``, the result types).
"""
