"""Shared pools: ``pool`` and its subcommands, over shared/<pool>.md."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
)
from mdmem.cli.output import fail, print_json

pool_app = typer.Typer(
    help="The shared pool (shared/<pool>.md): versioned keys every agent reads and writes. "
    "Exit codes: 3 a version conflict, 4 no such key."
)


PoolOpt = Annotated[str, typer.Option("--pool", "-p", help="The pool (shared/<pool>.md).")]


KeyArg = Annotated[str, typer.Argument(metavar="KEY", help="The entry's key.")]


ExpectOpt = Annotated[
    int | None,
    typer.Option(
        "--expect-version",
        min=0,
        help="Write only if KEY is at this version (0: only if absent); else exit 3.",
    ),
]


EXIT_CONFLICT = 3


EXIT_NO_KEY = 4


def _pool_value(entry: Any) -> str:
    value = entry.content
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def _pool_line(entry: Any) -> str:
    when = (entry.updated_at or "?")[:19].replace("T", " ")
    value = " ".join(_pool_value(entry).split())
    value = value if len(value) <= 60 else value[:59] + "…"
    edited = " (edited by hand)" if entry.edited else ""
    return f"{entry.key}  v{entry.version}  {when}  {entry.updated_by or '-'}{edited}  {value}"


def _pool_call(call: Any) -> Any:
    """A pool call; a version conflict and a missing key get exit codes of their own."""
    from mdmem.errors import VersionConflict

    try:
        return call()
    except VersionConflict as exc:
        fail(str(exc), EXIT_CONFLICT)
    except KeyError as exc:
        fail(str(exc.args[0]) if exc.args else "no such key", EXIT_NO_KEY)


@pool_app.command("list")
def pool_list(
    ctx: typer.Context,
    pool: PoolOpt = "default",
    prefix: Annotated[str, typer.Option(help="Only keys starting with this.")] = "",
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=0, help="At most this many.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a pool's entries, newest first."""
    entries = open_workspace(ctx).sharing.pool(pool).list(prefix=prefix, limit=limit)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        typer.echo(f"No entries in shared/{pool}.md (write one with `mdmem pool write KEY VALUE`).")
    for entry in entries:
        typer.echo(_pool_line(entry))


@pool_app.command("read")
def pool_read(
    ctx: typer.Context, key: KeyArg, pool: PoolOpt = "default", as_json: JsonOpt = False
) -> None:
    """Print KEY's value (text as it is, structured values as JSON); exit 4 if absent."""
    entry = open_workspace(ctx).sharing.pool(pool).read(key)
    if entry is None:
        fail(f"no key {key!r} in shared/{pool}.md", EXIT_NO_KEY)
    if as_json:
        print_json(entry.to_dict())
        return
    typer.echo(_pool_value(entry))


@pool_app.command("write")
def pool_write(
    ctx: typer.Context,
    key: KeyArg,
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The value ('-': stdin).")],
    pool: PoolOpt = "default",
    parse: Annotated[
        bool, typer.Option("--json-value", help="VALUE is JSON: a structured value.")
    ] = False,
    expect_version: ExpectOpt = None,
    writer: Annotated[str | None, typer.Option(help="Who writes (default: the agent).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write VALUE under KEY; with --expect-version, only if nobody wrote it since (exit 3)."""
    text = sys.stdin.read() if value == "-" else value
    content: Any = text
    if parse:
        try:
            content = json.loads(text)
        except ValueError as exc:
            fail(f"--json-value: VALUE is not JSON: {exc}", 2)
    target = open_workspace(ctx).sharing.pool(pool)
    entry = _pool_call(lambda: target.write(key, content, writer, expect_version))
    if as_json:
        print_json(entry.to_dict())
        return
    typer.echo(f"{entry.citation}  {entry.key}  v{entry.version}")


@pool_app.command("delete")
def pool_delete(
    ctx: typer.Context,
    key: KeyArg,
    pool: PoolOpt = "default",
    expect_version: ExpectOpt = None,
    writer: Annotated[str | None, typer.Option(help="Who deletes (default: the agent).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Move KEY to the pool file's ## Archive (nothing is lost); exit 4 if absent."""
    target = open_workspace(ctx).sharing.pool(pool)
    entry = _pool_call(lambda: target.delete(key, writer, expect_version))
    if as_json:
        print_json(entry.to_dict())
        return
    typer.echo(f"archived {entry.key} (v{entry.version}) in {entry.path}")


# the names scripts written before issue 42 use: hidden, the same commands
pool_app.command("get", hidden=True, help="Old name of `read`.")(pool_read)
pool_app.command("set", hidden=True, help="Old name of `write`.")(pool_write)
pool_app.command("rm", hidden=True, help="Old name of `delete`.")(pool_delete)
