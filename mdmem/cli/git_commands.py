"""Sharing through git: ``sync`` and git's ``merge-driver``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
)
from mdmem.cli.output import fail, log_to_stderr, print_json, warn


def merge_driver(
    base: Annotated[Path, typer.Argument(help="%O: the common ancestor's version.")],
    ours: Annotated[Path, typer.Argument(help="%A: our version; the result is written here.")],
    theirs: Annotated[Path, typer.Argument(help="%B: their version.")],
    path: Annotated[str, typer.Argument(help="%P: the file's path in the repository.")],
    marker_size: Annotated[int, typer.Option(help="%L: conflict marker length.")] = 7,
) -> None:
    """git's merge driver for memory files: merged entry by entry (set up by `mdmem init`).

    Exit 0 when merged cleanly; 1 when conflict markers were left for a person."""
    from mdmem.sharing.git_merge_driver import run_driver

    outcome = run_driver(base, ours, theirs, path, marker_size)
    for message in outcome.messages:
        typer.echo(f"mdmem merge-driver: {message}", err=True)
    raise typer.Exit(1 if outcome.conflicts else 0)


def git_sync(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Fetch and say what would happen; change nothing.")
    ] = False,
    rebase: Annotated[
        bool, typer.Option("--rebase/--merge", help="Pull with a rebase (default) or a merge.")
    ] = True,
    message: Annotated[str | None, typer.Option("--message", "-m", help="Commit message.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Share the workspace through git: commit its files, pull, re-index, push.

    Commits only the workspace's files and refuses when other files are dirty or git could
    not run the merge driver; checks that the merge kept every entry of both sides before it
    pushes; never force-pushes. Exit codes: 0 done, 1 error, 3 refused, 4 pull left conflicts,
    5 push rejected, 6 the merge would have lost entries (undone, nothing pushed)."""
    from mdmem.sharing.git_sync import SyncError

    log_to_stderr()
    ws = open_workspace(ctx)
    try:
        report = ws.sharing.sync(dry_run=dry_run, rebase=rebase, message=message)
    except SyncError as exc:
        if as_json:
            print_json({"error": str(exc), "code": exc.code})
        fail(str(exc), exc.code)
    if as_json:
        print_json(report.to_dict())
        return
    if report.migrated:
        typer.echo(f"merge driver set to {report.migrated} (it was the bare name `mdmem`)")
    for contradiction in report.contradictions:
        warn(f"to settle: {contradiction} (both replace one memory: mdmem forget the wrong one)")
    for note in report.kept_both:
        warn(f"to settle: {note}")
    verb = "would commit" if dry_run else "committed"
    typer.echo(f"{verb} {len(report.committed)} workspace file(s)")
    for path in report.committed:
        typer.echo(f"  {path}")
    if dry_run:
        typer.echo(f"{report.behind} commit(s) to pull, {report.ahead} to push (dry run)")
    else:
        typer.echo(f"pulled {report.behind} commit(s), re-indexed, pushed {report.ahead}")
