"""The task: ``task`` and its subcommands, over task_process.md."""

from __future__ import annotations

from typing import Annotated

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
)
from mdmem.cli.output import fail, print_json

task_app = typer.Typer(help="The current task in task_process.md: TODO, phase, instructions.")


@task_app.callback(invoke_without_command=True)
def task_main(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Show the task (same as `mdmem task list`)."""
    if ctx.invoked_subcommand is None:
        _show_task(ctx, as_json)


@task_app.command("list")
def task_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Show the task: phase, TODO items (the current one marked), instructions."""
    _show_task(ctx, as_json)


@task_app.command("add")
def task_add(
    ctx: typer.Context,
    item: Annotated[str, typer.Argument(help="The TODO item, one line.")],
    as_json: JsonOpt = False,
) -> None:
    """Append an open item to the TODO list."""
    added = open_workspace(ctx).task.add(item)
    if as_json:
        print_json(vars(added))
        return
    typer.echo(f"added {added.n}. {added.text}")


@task_app.command("complete")
def task_complete(
    ctx: typer.Context,
    n: Annotated[int, typer.Argument(help="Item number (as `mdmem task` shows it).")],
    undo: Annotated[bool, typer.Option(help="Untick it instead.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Tick TODO item N (the same as ticking its box by hand)."""
    ws = open_workspace(ctx)
    try:
        item = ws.task.complete(n, done=not undo)
    except IndexError as exc:
        fail(str(exc))
    current = ws.task.current()
    if as_json:
        print_json({"item": vars(item), "current": vars(current) if current else None})
        return
    typer.echo(f"{'[x]' if item.done else '[ ]'} {item.n}. {item.text}")
    typer.echo(f"now: {current.n}. {current.text}" if current else "all items done")


task_app.command("done", hidden=True, help="Old name of `complete`.")(task_complete)


@task_app.command("phase")
def task_phase(
    ctx: typer.Context,
    phase: Annotated[str | None, typer.Argument(help="New phase (omit to show it).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show or set the task's phase (plan, implement, verify, … any word you use)."""
    ws = open_workspace(ctx)
    if phase is not None:
        ws.task.set_phase(phase)
    if as_json:
        print_json({"phase": ws.task.phase})
        return
    typer.echo(ws.task.phase)


@task_app.command("new")
def task_new(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(help="What the task is.")],
    items: Annotated[list[str] | None, typer.Argument(help="Initial TODO items.")] = None,
    phase: Annotated[str, typer.Option(help="Starting phase.")] = "plan",
    as_json: JsonOpt = False,
) -> None:
    """Start a new task; the previous one is kept in .tasks/ (never deleted)."""
    state = open_workspace(ctx).task.new(title, items or [], phase=phase)
    if as_json:
        print_json(state.to_dict())
        return
    typer.echo(f"new task: {state.title} ({len(state.items)} items, phase {state.phase})")


def _show_task(ctx: typer.Context, as_json: bool) -> None:
    state = open_workspace(ctx).task.state()
    if as_json:
        print_json(state.to_dict())
        return
    if not (state.title or state.items):
        typer.echo("No task (start one with `mdmem task new TITLE`).")
        return
    typer.echo(f"{state.title}  (phase {state.phase}; {state.done} of {len(state.items)} done)")
    current = state.current
    for item in state.items:
        mark = "->" if current is not None and item.n == current.n else "  "
        typer.echo(f"{mark} [{'x' if item.done else ' '}] {item.n}. {item.text}")
        for text, done in item.subitems:
            box = "" if done is None else "[x] " if done else "[ ] "
            typer.echo(f"         {box}{text}")
    if state.instructions:
        typer.echo("instructions:")
        for rule in state.instructions:
            typer.echo(f"   {rule.text}")
