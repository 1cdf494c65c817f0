"""Sessions: ``sessions`` (the list) and ``sessions record``."""

from __future__ import annotations

from typing import Annotated

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
    check_date,
)
from mdmem.cli.output import indent, print_json

sessions_app = typer.Typer(
    help="Recorded sessions (the event stream in .sessions/).", no_args_is_help=False
)


@sessions_app.callback(invoke_without_command=True)
def sessions_list(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option(help="Only this agent's sessions.")] = None,
    since: Annotated[str | None, typer.Option(help="Started on or after (YYYY-MM-DD).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="At most this many.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List sessions, newest first (`mdmem sessions record ID` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    if since is not None:
        check_date(since, "--since")
    ws = open_workspace(ctx)
    records = ws.sessions.list(agent=agent, since=since, limit=limit)
    if as_json:
        print_json([r.to_dict(events=False) for r in records])
        return
    if not records:
        typer.echo("No sessions.")
    for r in records:
        when = (r.started or "?")[:16].replace("T", " ")
        tools = sum(r.tools.values())
        typer.echo(
            f"{r.id}  {when}  {r.agent:10} {r.status:9} {len(r.events):3} events "
            f"{tools:3} tools  {r.title}"
        )


@sessions_app.command("record")
def sessions_record(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or part of it.")],
    as_json: JsonOpt = False,
) -> None:
    """Print one session: request, events with importance, response."""
    ws = open_workspace(ctx)
    r = ws.sessions.record(session_id)
    if as_json:
        print_json(r.to_dict())
        return
    tools = ", ".join(f"{k} {v}" for k, v in r.tools.items()) or "none"
    typer.echo(f"{r.title}  ({r.path})")
    typer.echo(
        f"agent {r.agent} | {r.status} | started {r.started} | ended {r.ended or '-'} | "
        f"{r.rounds} rounds | tools: {tools}"
    )
    if r.request:
        typer.echo(f"\nRequest:\n{indent(r.request)}")
    typer.echo("\nEvents:")
    for e in r.events:
        typer.echo(f"  {e.time:8} {e.importance:.2f} [{e.action}] {indent(e.text).lstrip()}")
    if r.response:
        typer.echo(f"\nResponse:\n{indent(r.response)}")
    if r.summary:
        typer.echo(f"\nSummary:\n{indent(r.summary)}")


sessions_app.command("show", hidden=True, help="Old name of `record`.")(sessions_record)
