"""Importing chat histories: ``import``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
    OfflineOpt,
)
from mdmem.cli.output import fail, log_to_stderr, print_json, warn

if TYPE_CHECKING:
    from mdmem.workspace import Workspace


def import_(
    ctx: typer.Context,
    path: Annotated[
        Path | None,
        typer.Argument(help="An export or log (.json, .jsonl, .zip), or a folder of them."),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="chatgpt, claude, claude-code, codex or jsonl (default: told from the content).",
        ),
    ] = None,
    extract_: Annotated[
        bool, typer.Option("--extract", help="Extract lasting memories from what is imported.")
    ] = False,
    offline: OfflineOpt = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; print what would be imported.")
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(help="Agent the sessions are recorded under (default: the source's name)."),
    ] = None,
    undo: Annotated[
        str | None,
        typer.Option(
            "--undo", metavar="ID", help="Revert import ID (its id is printed when it ends)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Import chat histories as session files: ChatGPT and Claude.ai exports, Claude Code and
    Codex CLI logs, a generic JSONL of {role, content, timestamp}.

    Importing again writes nothing twice: a conversation imported before is skipped, or gets
    only its new messages. Unreadable records are named (file:line) and skipped.
    """
    from mdmem.integrations import importers

    log_to_stderr()
    ws = open_workspace(ctx)
    if undo is not None:
        done = importers.undo(ws, undo)
        if as_json:
            print_json(done.to_dict())
            return
        for rel in done.moved:
            typer.echo(f"moved     {rel}")
        for rel in done.restored:
            typer.echo(f"restored  {rel}")
        for note in done.kept:
            warn(f"kept {note}")
        typer.echo(done.summary())
        return
    if path is None:
        fail("give a PATH to import (or --undo ID)", 2)
    if from_ is not None and from_ not in importers.FORMATS:
        fail(f"--from must be one of {', '.join(importers.FORMATS)}, got {from_!r}", 2)
    try:
        report = _import_with_progress(ws, path, from_, extract_, offline, dry_run, agent, as_json)
    except OSError as exc:
        fail(str(exc))
    if as_json:
        print_json(report.to_dict())
        return
    for problem in report.problems:
        warn(str(problem))
    verb = {"created": "would create" if dry_run else "created", "appended": "would add to"
            if dry_run else "appended"}  # fmt: skip
    for outcome in report.outcomes:
        if outcome.status in verb:
            typer.echo(
                f"{verb[outcome.status]:12} {outcome.path or outcome.title}  "
                f"({outcome.source}, {outcome.messages} messages)"
            )
        elif outcome.status == "changed":
            warn(
                f"{outcome.where}: {outcome.source} conversation {outcome.conversation} no "
                f"longer starts as imported in {outcome.path}; left alone"
            )
    typer.echo(report.summary())
    for extraction in report.extractions:
        typer.echo(extraction.summary())
        for problem in extraction.problems:
            warn(problem)
    if report.id:
        typer.echo(f"undo with: mdmem import --undo {report.id}", err=True)


def _import_with_progress(
    ws: Workspace,
    path: Path,
    source: str | None,
    extract: bool,
    offline: bool,
    dry_run: bool,
    agent: str | None,
    quiet: bool,
) -> Any:
    """The import, with a progress bar (bytes read) on stderr when it is a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from mdmem.integrations.importers import import_path

    console = Console(stderr=True)
    columns = (TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    disable = quiet or not console.is_terminal
    with Progress(*columns, console=console, transient=True, disable=disable) as bar:
        task = bar.add_task("import", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return import_path(
            ws,
            path,
            source,
            extract=extract,
            offline=offline,
            dry_run=dry_run,
            agent=agent,
            progress=progress,
        )
