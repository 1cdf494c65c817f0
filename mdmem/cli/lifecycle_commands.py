"""Lifecycle: ``consolidate``, ``restore``, ``related``, ``stats``, ``tiers``, ``promote``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    DryRunOpt,
    JsonOpt,
    OfflineOpt,
)
from mdmem.cli.output import log_to_stderr, print_json, warn


def consolidate(
    ctx: typer.Context,
    offline: OfflineOpt = False,
    dry_run: DryRunOpt = False,
    by_importance: Annotated[
        bool,
        typer.Option(
            "--by-importance",
            help="No clustering: keep the consolidate.threshold most important memories, "
            "archive the rest (what to do without embeddings).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge old, rarely used memories that say the same thing, each merge checked for fidelity
    before anything is replaced; the originals go to ## Archive (undo with `mdmem restore ID`).
    """
    log_to_stderr()
    ws = open_workspace(ctx)
    report = ws.lifecycle.consolidate(offline=offline, dry_run=dry_run, by_importance=by_importance)
    if as_json:
        print_json(report.to_dict())
        return
    typer.echo(report.diff or "(no change)\n", nl=False)
    _print_consolidation(report)
    for suggestion in report.suggestions:
        typer.echo(f"suggestion: {suggestion}", err=True)
    for problem in report.problems:
        warn(problem)
    typer.echo(report.summary(), err=True)
    if report.report_path:
        typer.echo(f"report: {report.report_path}", err=True)


def _print_consolidation(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Consolidation", title_justify="left")
    for column in ("clusters", "kept", "merged", "refused", "superseded", "memories", "tokens"):
        table.add_column(column, justify="right")
    table.add_row(
        str(len(report.clusters)),
        str(report.count("kept")),
        f"{report.count('merged')} ({report.merged} → {report.written})",
        str(report.count("refused")),
        str(report.superseded),
        f"{report.memories} → {report.entries_after}",
        f"{report.tokens_before:,} → {report.tokens_after:,}",
    )
    console = Console(stderr=True, width=100)
    console.print(table)
    for merged in report.refused:
        fidelity = merged.fidelity
        console.print(
            f"refused ({fidelity.composite:.3f}): {merged.text[:70]!r}: {fidelity.reason}",
            markup=False,
            highlight=False,
        )
    for change in getattr(report, "changes", ()):  # (--by-importance reports none)
        console.print(f"superseded {change.describe()}", markup=False, highlight=False)


def restore_cmd(
    ctx: typer.Context,
    entry_id: Annotated[
        str, typer.Argument(metavar="ID", help="A merged memory, or an original it archived.")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Undo a consolidation: a merged memory's originals come back (it goes to the archive), or
    one archived original comes back alone."""
    ws = open_workspace(ctx)
    report = ws.lifecycle.restore(entry_id)
    if as_json:
        print_json(report.to_dict())
        return
    for restored in report.restored:
        typer.echo(f"restored  {restored}")
    for archived in report.archived:
        typer.echo(f"archived  {archived}")
    for missing in report.missing:
        warn(f"{missing} (named by refines=) is in no archive: not restored")


def related(
    ctx: typer.Context,
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="The entry's id (m-... or h-...).")],
    as_json: JsonOpt = False,
) -> None:
    """Relations from and to a memory: supports, contradicts, refines (written in the
    metadata of the memory that declares them)."""
    from mdmem.errors import EntryNotFoundError

    ws = open_workspace(ctx)
    found = ws.lifecycle.related(entry_id)
    try:
        ws._w.documents.get(entry_id)  # an unknown id is an error, not an empty list ...
    except EntryNotFoundError:
        if not found:
            raise
        warn(f"{entry_id} is in no file; memories name it:")  # ... unless memories name it
    if as_json:
        print_json([r.to_dict() for r in found])
        return
    if not found:
        typer.echo(f"No relations from or to {entry_id}.")
    for r in found:
        state = "" if r.open else " (archived)" if r.target_found else " (missing: in no file)"
        typer.echo(f"{r.source} {r.kind} {r.target}{state}  ({r.path}:{r.line})")
    for r in found:
        if not r.target_found:
            warn(f"{r.path}:{r.line}: {r.source} {r.kind} {r.target}, which is in no file")


def stats(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """What the memory holds and how it is used: memories by type and file, archived counts,
    most and least returned memories, search latency, the last consolidation."""
    report = open_workspace(ctx).lifecycle.stats()
    if as_json:
        print_json(report.to_dict())
        return
    average = "-" if report.average_importance is None else f"{report.average_importance:.2f}"
    typer.echo(f"memories     {report.memories} (average importance {average})")
    typer.echo("by type      " + _counts(report.by_type))
    typer.echo("by file      " + _counts(report.by_file))
    typer.echo("archived     " + (_counts(report.archived) or "none"))
    tiers = [f"{t['name']} {t['tokens']:,}/{t['budget']:,}" for t in report.tiers]
    typer.echo("tier tokens  " + (", ".join(tiers) or "-"))
    for title, items in (("most", report.most_accessed), ("least", report.least_accessed)):
        for a in items:
            count = "no count" if a.count is None else f"{a.count}×"
            typer.echo(f"{title:5} used   {count:>8}  {a.id}  {a.text[:60]}")
    if report.searches:
        typer.echo(
            f"searches     {report.searches} recent: p50 {report.latency_p50_ms:.1f} ms, "
            f"p99 {report.latency_p99_ms:.1f} ms"
        )
    last = report.last_consolidation
    typer.echo(f"consolidated {last['when']}: {last['summary']}" if last else "consolidated never")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def tiers(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The memory tiers L1-L4: tokens, budget, items, and what the next promotion would do."""
    found = open_workspace(ctx).lifecycle.tiers()
    if as_json:
        print_json([t.to_dict() for t in found])
        return
    _print_tiers(found)


def promote(ctx: typer.Context, dry_run: DryRunOpt = False, as_json: JsonOpt = False) -> None:
    """Run the tier promotions that are due: L2 events into the session's summary, the oldest
    summaries' facts into memory.md / learnings.md, consolidation past its threshold, and old
    compacted sessions into .sessions/archive/."""
    log_to_stderr()
    report = open_workspace(ctx).lifecycle.promote(dry_run=dry_run)
    if as_json:
        print_json(report.to_dict())
        return
    if dry_run:
        typer.echo(report.diff or "(no change)\n", nl=False)
    _print_tiers(report.after or report.tiers)
    for problem in report.problems:
        warn(problem)
    typer.echo(report.summary(), err=True)


def _print_tiers(found: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Memory tiers", title_justify="left")
    for column in ("tier", "tokens", "budget", "used", "items", "next promotion"):
        table.add_column(column, justify="left" if column == "next promotion" else "right")
    for t in found:
        table.add_row(
            t.name, f"{t.tokens:,}", f"{t.budget:,}", f"{t.share:.0%}", str(t.items), t.next
        )
    Console(width=110).print(table)
