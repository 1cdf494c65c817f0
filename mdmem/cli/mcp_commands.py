"""MCP server: ``mcp``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mdmem.cli.opening import remote_index
from mdmem.cli.options import (
    IndexUrlOpt,
    IndexWorkspaceOpt,
)
from mdmem.cli.output import fail, log_to_stderr


def mcp_serve(
    ctx: typer.Context,
    agent: Annotated[
        str | None, typer.Option(help="The agent writing (sessions); default: mdmem.toml's.")
    ] = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option(help="--http: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="--http: port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="MDMEM_MCP_TOKEN",
            help="--http: require 'Authorization: Bearer TOKEN' (needed off loopback).",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="--http: accept clients that reach this machine by another name or address: "
            "HOST:PORT as in their URL, or HOST for any port (repeatable).",
        ),
    ] = None,
    url: IndexUrlOpt = None,
    index_workspace: IndexWorkspaceOpt = None,
) -> None:
    """Serve this workspace to MCP clients (Claude Code, Claude Desktop, Cursor …).

    Over stdio by default (the client starts it: give -w, clients start servers anywhere);
    --http serves streamable HTTP at http://HOST:PORT/mcp, on loopback unless --token is given.
    """
    from mdmem.integrations.http_guard import allowed_hosts, check_host

    if http:
        try:
            check_host(host, token)
            allowed_hosts(host, allow_host or [])
        except ValueError as exc:
            fail(str(exc), 2)
    remote = remote_index(url, index_workspace)
    root = config = None
    if remote is None:
        from mdmem.config import check_name, load_config
        from mdmem.layout import find_root

        _a_workspace_to_serve(ctx)
        root = find_root(ctx.obj.get("workspace"))
        config = load_config(root)  # a bad mdmem.toml or --agent: said at once, before the SDK
        if agent is not None:
            check_name(agent, "agent")
    try:
        from mdmem.integrations import mcp_server
    except ImportError as exc:
        fail(
            f"mdmem mcp needs the MCP SDK ({exc.name}): install mdmem's mcp extra (in mdmem's "
            "clone: pip install -c constraints.txt '.[mcp]')"
        )
    log_to_stderr()
    if root is None:
        server: Any = _remote_mcp(remote)
    else:  # the workspace opens in the background, once `initialize` is answered
        server = mcp_server.build_server(root, agent=agent, config=config)
    if http:
        typer.echo(f"mdmem: MCP over streamable HTTP at http://{host}:{port}/mcp", err=True)
        mcp_server.serve_http(server, host, port, token, allow_host or [])
    else:
        mcp_server.serve_stdio(server)


def _a_workspace_to_serve(ctx: typer.Context) -> None:
    """`mdmem -w FOLDER mcp` on a folder that is no workspace would serve every .md below it
    and make memory.md and .mdmem/ there at the first `remember`: refused, before anything is
    opened or written (a folder found by looking upwards holds a marker by definition)."""
    import shlex

    from mdmem.layout import MARKERS, find_root

    root = find_root(ctx.obj.get("workspace"))
    if not any((root / marker).is_file() for marker in MARKERS):
        fail(
            f"{root} is no mdmem workspace (no {' or '.join(MARKERS)}); create one with "
            f"`mdmem init {shlex.quote(str(root))}`, or give -w the workspace's folder"
        )


def _remote_mcp(remote: Any) -> Any:
    from mdmem.integrations.mcp_remote import build_remote_server

    return build_remote_server(remote)
