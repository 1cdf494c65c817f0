"""Workspace and memories: ``init``, ``mode``, ``remember``, ``entries``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    IncludeArchivedOpt,
    JsonOpt,
)
from mdmem.cli.output import fail, print_json, warn


def init(
    ctx: typer.Context,
    path: Annotated[Path | None, typer.Argument(help="Folder to create (default: .)")] = None,
    mode: Annotated[str, typer.Option(help="minimal or full")] = "full",
    agent: Annotated[
        str | None,
        typer.Option(
            help="Agent name (default: default). Where mdmem.toml exists already (a clone), "
            "this machine's own, in the git-ignored mdmem.local.toml."
        ),
    ] = None,
) -> None:
    """Create a workspace from the templates. Never overwrites an existing file."""
    from mdmem.config import CONFIG_NAME
    from mdmem.memory.templates import TEMPLATES
    from mdmem.workspace import Workspace

    target = path or ctx.obj.get("workspace") or Path(".")
    existed = {name for name in TEMPLATES.values() if (target / name).exists()}
    if mode not in ("minimal", "full"):
        fail(f"--mode must be 'minimal' or 'full', got {mode!r}", 2)
    if agent is not None and CONFIG_NAME in existed:
        _init_local_agent(target, agent)
    ws = Workspace.init(target, mode=mode, agent=agent or "default")  # type: ignore[arg-type]
    for name in TEMPLATES.values():
        state = "kept" if name in existed else "created"
        typer.echo(f"  {state:8} {name}")
    _init_git(ws.root)
    typer.echo(f"Workspace ready at {ws.root} (mode={ws.config.mode}, agent={ws.config.agent}).")


def _init_local_agent(root: Path, agent: str) -> None:
    """``--agent`` where mdmem.toml exists (a clone of a shared workspace): this machine's
    agent, in mdmem.local.toml (git-ignored), never the shared file."""
    from mdmem.config import check_name, load_config, local_agent, set_local_agent
    from mdmem.sharing.git_sync import ignore_local_config

    check_name(agent, "agent")
    if local_agent(root) is None and load_config(root).agent == agent:
        return
    path = set_local_agent(root, agent)
    ignore_local_config(root)
    typer.echo(f"  {'set':8} {path.name} (agent={agent}: this machine only, git-ignored)")


def _init_git(root: Path) -> None:
    """.gitattributes lines for the merge driver; inside a git repository, its config too."""
    from mdmem.sharing.git_sync import (
        configure_driver,
        configured_driver,
        driver_notice,
        ignore_temp_files,
        install_gitattributes,
        repo_root,
    )

    ignore_temp_files(root)  # a write in progress is never committed
    added = install_gitattributes(root)
    repository = repo_root(root) is not None
    changed = bool(added)
    if repository:
        before = configured_driver(root)
        changed = configure_driver(root) != before or changed
    typer.echo(f"  {'updated' if changed else 'kept':8} {driver_notice(repository)}")


def mode(
    ctx: typer.Context,
    new_mode: Annotated[
        str | None, typer.Argument(metavar="[minimal|full]", help="Switch to this mode.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the workspace's mode, or switch it (no file is ever deleted)."""
    if new_mode is not None and new_mode not in ("minimal", "full"):
        fail(f"mode must be 'minimal' or 'full', got {new_mode!r}", 2)
    ws = open_workspace(ctx)
    created: list[str] = []
    before = ws.config.mode
    if new_mode is not None:
        created = ws.set_mode(new_mode)  # type: ignore[arg-type]
    if as_json:
        print_json({"mode": ws.config.mode, "previous": before, "created": created})
        return
    if new_mode is None or new_mode == before:
        typer.echo(f"{ws.config.mode}")
    else:
        typer.echo(f"mode: {before} -> {ws.config.mode}")
    for name in created:
        typer.echo(f"  created  {name}")


def remember(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The memory, in plain words.")],
    type_: Annotated[
        str, typer.Option("--type", "-t", help="preference, fact, pattern or skill")
    ] = "fact",
    importance: Annotated[float, typer.Option("--importance", "-i", help="0..1")] = 0.5,
    file: Annotated[
        str | None, typer.Option("--file", "-f", help="Workspace file to write to.")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Session id it came from.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember TEXT: append it under the right heading, touching nothing else."""
    from mdmem.markdown.entries import MEMORY_TYPES

    if type_ not in MEMORY_TYPES:
        fail(f"--type must be one of {', '.join(MEMORY_TYPES)}, got {type_!r}", 2)
    if not 0 <= importance <= 1:
        fail(f"--importance must be between 0 and 1, got {importance}", 2)
    ws = open_workspace(ctx)
    entry = ws.remember(text, type=type_, importance=importance, source=source, file=file)
    if as_json:
        print_json(entry.to_dict())
        return
    typer.echo(f"{entry.path}:{entry.start_line}  [{entry.type}] {entry.text}  ({entry.id})")


def entries(
    ctx: typer.Context,
    file: Annotated[str | None, typer.Argument(help="One file (default: all).")] = None,
    include_archived: IncludeArchivedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the parsed entries: where each stands, its type, importance and text."""
    from mdmem.markdown.parse import Problem

    ws = open_workspace(ctx)
    problems: list[Problem]
    if file is not None:
        found = ws.entries(file, include_archived=include_archived)
        problems = list(ws.files.read(file).problems)
    else:
        snap = ws.files.all()
        found = list(snap.entries(include_archived=include_archived))
        problems = list(snap.problems)
    if as_json:
        print_json(
            {
                "workspace": str(ws.root),
                "entries": [e.to_dict() for e in found],
                "problems": [
                    {"path": p.path, "line": p.line, "message": p.message} for p in problems
                ],
            }
        )
    else:
        _print_entries(found)
    for problem in problems:
        warn(str(problem))


def _print_entries(entries: list[Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    current = None
    for entry in entries:
        if entry.path != current:
            current = entry.path
            console.print(f"\n[bold]{escape(entry.path)}[/bold]")
        where = (
            f"{entry.start_line}-{entry.end_line}"
            if entry.end_line > entry.start_line
            else (f"{entry.start_line}")
        )
        flag = " [dim](archived)[/dim]" if entry.archived else ""
        box = "" if entry.checked is None else ("[x] " if entry.checked else "[ ] ")
        first = entry.text.split("\n", 1)[0]
        console.print(
            f"  [cyan]{where:>7}[/cyan] [magenta]{entry.type:10}[/magenta] "
            f"{entry.importance:.2f}  {escape(box + first)}{flag} [dim]{entry.id}[/dim]"
        )
    if not entries:
        console.print("(no entries)")
