"""The ``mdmem`` command: a thin typer layer over the library, one module per group of commands.

Only typer is imported at start-up; each command imports what it needs, so ``--help`` is
instant. Exit codes: 0 done, 1 an mdmem error (message on stderr), 2 bad usage; `mdmem pool`
adds 3 (a version conflict) and 4 (no such key).

The commands are registered here, in the order ``mdmem --help`` lists them; each group's
module (``*_commands.py``) holds its commands and the sub-apps (``server``, ``sessions``,
``task``, ``world``, ``hooks``, ``pool``) with their subcommands. ``output.py`` prints errors,
warnings and JSON; ``options.py`` declares the options several commands share; ``opening.py``
finds the workspace (or a remote reader's index) a command works on.
"""

from __future__ import annotations

import sys

import typer

from mdmem.cli import (
    distill_commands,
    file_commands,
    git_commands,
    hook_commands,
    import_commands,
    index_commands,
    lifecycle_commands,
    mcp_commands,
    memory_commands,
    pool_commands,
    search_commands,
    session_commands,
    task_commands,
    world_commands,
)
from mdmem.cli.options import WorkspaceOpt

__all__ = ["app", "main"]

app = typer.Typer(
    name="mdmem",
    help="File-first memory for AI agents: Markdown you can edit, indexed for fast search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _main(ctx: typer.Context, workspace: WorkspaceOpt = None) -> None:
    ctx.obj = {"workspace": workspace}


app.command()(memory_commands.init)
app.command()(memory_commands.remember)
# `add` and `show` were these commands' names before the one vocabulary (docs/cli.md): scripts
# and agents' instructions written then keep working, unlisted.
app.command("add", hidden=True, help="Old name of `remember`.")(memory_commands.remember)
app.command()(memory_commands.entries)
app.command("show", hidden=True, help="Old name of `entries`.")(memory_commands.entries)
app.command()(search_commands.search)
app.command()(index_commands.index)
app.command()(index_commands.watch)
app.command()(index_commands.status)
app.command()(memory_commands.mode)
app.command()(search_commands.context)
app.command()(distill_commands.compact)
app.command()(distill_commands.extract)
app.command()(file_commands.recover)
app.command()(file_commands.forget)
app.command("import")(import_commands.import_)
app.command("mcp")(mcp_commands.mcp_serve)
app.command()(lifecycle_commands.consolidate)
app.command("restore")(lifecycle_commands.restore_cmd)
app.command()(lifecycle_commands.related)
app.command()(lifecycle_commands.stats)
app.command("merge-driver")(git_commands.merge_driver)
app.command("sync")(git_commands.git_sync)
app.command()(lifecycle_commands.tiers)
app.command()(lifecycle_commands.promote)
app.add_typer(index_commands.server_app, name="server")
app.add_typer(session_commands.sessions_app, name="sessions")
app.add_typer(task_commands.task_app, name="task")
app.add_typer(world_commands.world_app, name="world")
app.add_typer(hook_commands.hooks_app, name="hooks")
app.add_typer(pool_commands.pool_app, name="pool")


def main() -> None:
    """Console entry point: mdmem errors become one clear line on stderr and exit code 1."""
    try:
        code = app(standalone_mode=False)  # click returns the code of a typer.Exit here
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: bad option, missing argument
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except Exception as exc:
        from mdmem.errors import MdmemError

        if isinstance(exc, MdmemError | ValueError):
            typer.echo(f"mdmem: error: {exc}", err=True)
            sys.exit(1)
        if isinstance(exc, OSError):  # the machine, not mdmem (a full disk): still one line
            from mdmem.writes.os_failures import os_error_line

            typer.echo(f"mdmem: error: {os_error_line(exc)}", err=True)
            sys.exit(1)
        raise
    sys.exit(code if isinstance(code, int) else 0)
