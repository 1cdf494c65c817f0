"""The options and arguments several commands share (``-w``, ``--json``, ``--dry-run`` …),
declared once so each reads and is documented the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mdmem.cli.output import fail
from mdmem.index.search_params import SEARCH_OPTIONS

WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace folder (default: $MDMEM_WORKSPACE, else the nearest folder upwards "
        "with mdmem.toml or memory.md).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for programs.")]
IndexUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="A remote reader's PostgreSQL server (default: $MDMEM_INDEX_URL); "
        "goes with --index-workspace.",
        show_default=False,
    ),
]
IndexWorkspaceOpt = Annotated[
    str | None,
    typer.Option(
        "--index-workspace",
        help="Read this workspace's index on PostgreSQL, without its files "
        "(default: $MDMEM_INDEX_WORKSPACE).",
        show_default=False,
    ),
]
_ARCHIVED = next(o for o in SEARCH_OPTIONS if o.name == "include_archived")
IncludeArchivedOpt = Annotated[bool, typer.Option(*_ARCHIVED.flags, help=_ARCHIVED.help)]
"""``--include-archived`` (``--archived``, its name before issue 42, in scripts), as ``mdmem
search`` declares it (mdmem/index/search_params.py)."""
OldBudgetOpt = Annotated[
    int | None, typer.Option("--budget", hidden=True, help="Old name of --budget-tokens.")
]
"""``--budget``, the name before issue 42 (in users' hook settings and scripts): hidden."""
SourceArg = Annotated[
    str | None,
    typer.Argument(
        metavar="[SOURCE]",
        help="A session id (or part of it), a session file, or a .jsonl/.json transcript "
        "(default: this agent's latest session).",
    ),
]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="Use the offline engine even if llm.model is set.")
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Change no file; print what would change as a diff.")
]


def check_date(value: str, option: str) -> None:
    """A date option (``--since``) that is no ISO date is bad usage (exit 2)."""
    import datetime as dt

    try:
        dt.date.fromisoformat(value)
    except ValueError:
        fail(f"{option} must be a date (YYYY-MM-DD), got {value!r}", 2)
