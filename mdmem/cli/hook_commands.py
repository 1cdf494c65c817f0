"""Claude Code's hooks: ``hooks install|uninstall|run``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    OldBudgetOpt,
)
from mdmem.cli.output import fail, warn

hooks_app = typer.Typer(help="Hooks that give Claude Code mdmem's memory with no code.")


TargetArg = Annotated[str, typer.Argument(metavar="TARGET", help="claude-code")]


ScopeOpt = Annotated[
    str,
    typer.Option(
        help="project (.claude/settings.json), local (.claude/settings.local.json) or user "
        "(~/.claude/settings.json)."
    ),
]


SettingsOpt = Annotated[
    Path | None, typer.Option("--settings", help="This settings file instead of the scope's.")
]


ProjectOpt = Annotated[
    Path | None, typer.Option("--project", help="The project folder (default: the current one).")
]


BudgetOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", "-b", help="Token budget of the context at start."),
]


def _hooks_target(target: str) -> None:
    if target != "claude-code":
        fail(f"hooks are available for claude-code, not {target!r}", 2)


def _hooks_settings(scope: str, settings: Path | None, project: Path | None) -> Path:
    from mdmem.integrations import hooks

    if settings is not None:
        return settings
    if scope not in hooks.SCOPES:
        fail(f"--scope must be one of {', '.join(hooks.SCOPES)}, got {scope!r}", 2)
    return hooks.settings_path(scope, (project or Path.cwd()).absolute())


@hooks_app.command("install")
def hooks_install(
    ctx: typer.Context,
    target: TargetArg,
    scope: ScopeOpt = "project",
    settings: SettingsOpt = None,
    project: ProjectOpt = None,
    extract_: Annotated[
        bool, typer.Option("--extract", help="Also extract lasting memories at each import.")
    ] = False,
    budget: BudgetOpt = None,
    old_budget: OldBudgetOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; print the settings file.")
    ] = False,
) -> None:
    """Add mdmem's hooks to Claude Code's settings: the memory context at session start; the
    session imported (new messages only) before compaction, at each stop and at the end.

    --scope project writes commands that work in any clone (the workspace under
    $CLAUDE_PROJECT_DIR, mdmem as found on PATH); local and user, absolute paths."""
    from mdmem.errors import ModeError
    from mdmem.integrations import hooks

    _hooks_target(target)
    ws = open_workspace(ctx)
    if ws.config.mode != "full":
        raise ModeError("the hooks import sessions, which only full mode keeps (`mdmem mode full`)")
    path = _hooks_settings(scope, settings, project)
    shared = scope == "project" and settings is None  # the team's file: no path of this machine
    where = (project or Path.cwd()).absolute() if shared else None
    budget = budget if budget is not None else old_budget
    wanted = hooks.commands(ws.root, extract=extract_, budget=budget, project=where)
    if shared and not hooks.portable_command().startswith("mdmem"):
        warn(
            "mdmem is not on PATH here: the hooks run `python3 -m mdmem`, so each teammate "
            "needs mdmem installed for that Python (or on PATH)"
        )
    report = hooks.install(path, wanted, dry_run=dry_run)
    if dry_run:
        typer.echo(report.text, nl=False)
    typer.echo(report.summary(), err=dry_run)


@hooks_app.command("uninstall")
def hooks_uninstall(
    target: TargetArg,
    scope: ScopeOpt = "project",
    settings: SettingsOpt = None,
    project: ProjectOpt = None,
) -> None:
    """Remove mdmem's hooks from Claude Code's settings; every other setting stays."""
    from mdmem.integrations import hooks

    _hooks_target(target)
    report = hooks.uninstall(_hooks_settings(scope, settings, project))
    typer.echo(report.summary())


@hooks_app.command("run")
def hooks_run(
    ctx: typer.Context,
    target: TargetArg,
    action: Annotated[str, typer.Argument(help="session-start or import")],
    extract_: Annotated[bool, typer.Option("--extract", help="Extract after importing.")] = False,
    budget: BudgetOpt = None,
    old_budget: OldBudgetOpt = None,
) -> None:
    """What a hook runs (Claude Code sends the hook's JSON on stdin). Errors exit with 1, which
    Claude Code shows without stopping the session."""
    from mdmem.integrations import hooks

    _hooks_target(target)
    if action not in ("session-start", "import"):
        fail(f"ACTION must be session-start or import, got {action!r}", 1)
    payload = hooks.read_input("" if sys.stdin.isatty() else sys.stdin.read())
    ws = open_workspace(ctx)
    if action == "session-start":
        typer.echo(hooks.session_start(ws, budget if budget is not None else old_budget))
        return
    try:
        report = hooks.import_transcript(ws, payload, extract=extract_)
    except OSError as exc:
        fail(str(exc))
    if report is not None:
        for problem in report.problems:
            warn(str(problem))
        typer.echo(report.summary())
