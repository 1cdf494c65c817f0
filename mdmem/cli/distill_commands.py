"""Compaction and extraction: ``compact``, ``extract``."""

from __future__ import annotations

from typing import Annotated

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    DryRunOpt,
    JsonOpt,
    OfflineOpt,
    SourceArg,
)
from mdmem.cli.output import log_to_stderr, print_json, warn


def compact(
    ctx: typer.Context,
    source: SourceArg = None,
    offline: OfflineOpt = False,
    dry_run: DryRunOpt = False,
    no_flush: Annotated[
        bool, typer.Option("--no-flush", help="Skip the memory flush (extraction) that runs first.")
    ] = False,
    into: Annotated[
        str | None, typer.Option(help="Full mode: write the summary into this session.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compact a conversation: keep the current state and key events, drop the rest.

    Minimal mode writes .compact_memory.md (merged with what it held); full mode writes a
    Summary section in the session's file. Lasting memories are extracted first.
    """
    log_to_stderr()
    ws = open_workspace(ctx)
    report = ws.compact(source, offline=offline, dry_run=dry_run, flush=not no_flush, into=into)
    if as_json:
        print_json(report.to_dict())
        return
    if dry_run:
        typer.echo(report.diff or "(no change)", nl=False)
    typer.echo(report.summary(), err=dry_run)
    if report.extraction is not None:
        typer.echo(report.extraction.summary(), err=dry_run)
        for problem in report.extraction.problems:
            warn(problem)


def extract(
    ctx: typer.Context,
    source: SourceArg = None,
    offline: OfflineOpt = False,
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Extract lasting memories (preferences, facts, patterns, skills) into memory.md and
    learnings.md, deduplicated against what is there."""
    log_to_stderr()
    ws = open_workspace(ctx)
    report = ws.extract(source, offline=offline, dry_run=dry_run)
    if as_json:
        print_json(report.to_dict())
        return
    if dry_run:
        typer.echo(report.diff or "(no change)", nl=False)
    else:
        for change in report.changes:
            where = f"{change.path} {change.entry_id}" if change.entry_id else change.replaced or ""
            typer.echo(
                f"{change.action:9} [{change.type}] {change.text}  ({where}; {change.reason})"
            )
    typer.echo(report.summary(), err=dry_run)
    for problem in report.problems:
        warn(problem)
