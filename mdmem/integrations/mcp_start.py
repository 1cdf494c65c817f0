"""``mdmem [-w PATH] mcp [--agent NAME]`` without typer: the way every MCP client starts mdmem.

A client starts a new server for each session and waits for its answer to ``initialize``.
Typer's import (it builds validators for every option of every command) cost that answer a
fifth on top of the SDK's own import, which is all the SDK's bare server pays. So this module,
importing only the standard library, :mod:`mdmem.layout` and :mod:`mdmem.config`, reads that
one form of the command itself — exactly the typer command's options for it (a test compares)
— checks what the typer command checks before serving (a workspace's folder, its mdmem.toml,
the agent's name), and serves over stdio. Anything else (``--http``, a remote index, ``--help``,
a usage error) and anything that fails a check goes to the typer command, which then says what
is wrong as it always does.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: this path imports as little as it can
if TYPE_CHECKING:
    from pathlib import Path

    from mdmem.config import Config

__all__ = ["parse_mcp", "serve"]

WORKSPACE_OPTIONS = ("-w", "--workspace")
AGENT_OPTION = "--agent"
REMOTE_ENV = "MDMEM_INDEX_WORKSPACE"
"""With it set, ``mdmem mcp`` serves a remote index (typer's command)."""


def parse_mcp(argv: list[str]) -> tuple[str | None, str | None] | None:
    """``[-w PATH] mcp [--agent NAME]`` read as typer would: (workspace, agent), or None for
    anything else."""
    workspace = None
    rest = list(argv)
    if rest[:1] in ([WORKSPACE_OPTIONS[0]], [WORKSPACE_OPTIONS[1]]) and len(rest) >= 2:
        workspace = rest[1]
        del rest[:2]
    elif rest and rest[0].startswith("--workspace="):
        workspace = rest.pop(0).split("=", 1)[1]
    if rest[:1] != ["mcp"]:
        return None
    options = rest[1:]
    agent = None
    if options[:1] == [AGENT_OPTION] and len(options) == 2:
        agent = options[1]
    elif len(options) == 1 and options[0].startswith(f"{AGENT_OPTION}="):
        agent = options[0].split("=", 1)[1]
    elif options:
        return None
    if agent is not None and agent.startswith("-"):
        return None  # typer reads `--agent --http` as a missing value: its usage error
    return workspace, agent


def serve(argv: list[str]) -> int | None:
    """Serve the workspace over stdio and return the exit code once the client is gone; None
    when typer's command should run instead (before anything was served)."""
    parsed = parse_mcp(argv)
    if parsed is None or os.environ.get(REMOTE_ENV):
        return None
    workspace, agent = parsed
    checked = _checked(workspace, agent)
    if checked is None:
        return None
    root, config = checked
    try:
        from mdmem.integrations import mcp_server
    except ImportError:  # typer's command names the missing SDK
        return None
    _log_to_stderr()
    mcp_server.serve_stdio(mcp_server.build_server(root, agent=agent, config=config))
    return 0


def _checked(workspace: str | None, agent: str | None) -> tuple[Path, Config] | None:
    """The workspace's folder and its mdmem.toml as read, or None when anything the typer
    command checks before serving fails (it then says so)."""
    from mdmem.config import check_name, load_config
    from mdmem.errors import MdmemError
    from mdmem.layout import MARKERS, find_root

    try:
        root = find_root(workspace)
        if not any((root / marker).is_file() for marker in MARKERS):
            return None  # no workspace: typer's command refuses it, naming `mdmem init`
        config = load_config(root)
        if agent is not None:
            check_name(agent, "agent")
    except (MdmemError, OSError, ValueError):
        return None
    return root, config


def _log_to_stderr() -> None:
    """The library's warnings on stderr, one line each, as the typer command shows them (to
    ``sys.stderr`` as it is when a record is emitted, as the typer command's handler does)."""
    import logging

    class CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
        @property  # type: ignore[override]
        def stream(self) -> object:
            return sys.stderr

        @stream.setter
        def stream(self, _: object) -> None:
            pass

    logger = logging.getLogger("mdmem")
    if not logger.handlers:
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("mdmem: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
