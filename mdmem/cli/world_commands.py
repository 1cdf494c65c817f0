"""The world state: ``world`` and its subcommands, over world_state.md."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
)
from mdmem.cli.output import fail, print_json


class _WorldGroup(TyperGroup):
    """``mdmem world`` by subcommand (``get``, ``set``, ``remove``, like ``pool`` and ``task``);
    the form before issue 42, ``world KEY [VALUE]`` / ``world --remove KEY``, which scripts may
    still run, goes to the hidden ``old-form`` command."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        words = [a for a in args if not a.startswith("-")]
        if "--remove" in args or (words and words[0] not in self.commands):
            args = ["old-form", *args]
        return super().parse_args(ctx, args)


world_app = typer.Typer(
    cls=_WorldGroup, help="The world state (world_state.md): facts by key, in sections."
)


WorldKeyArg = Annotated[str, typer.Argument(metavar="KEY", help="A fact's key.")]


SectionOpt = Annotated[str | None, typer.Option(help="Section for a new key (default: the first).")]


@world_app.callback(invoke_without_command=True)
def world_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the facts by section (`mdmem world get KEY` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    facts = open_workspace(ctx).world.facts()
    if as_json:
        print_json([f.to_dict() for f in facts])
        return
    section_now = None
    for fact in facts:
        if fact.section != section_now:
            section_now = fact.section
            typer.echo(f"{fact.section or '(no section)'}:")
        typer.echo(f"  {fact.key}: {fact.value}")
    if not facts:
        typer.echo("No world facts (set one with `mdmem world set KEY VALUE`).")


@world_app.command("get")
def world_get(ctx: typer.Context, key: WorldKeyArg, as_json: JsonOpt = False) -> None:
    """Print KEY's value (keys match whatever their case)."""
    facts = [f for f in open_workspace(ctx).world.facts() if f.key.casefold() == key.casefold()]
    if not facts:
        fail(f"no world fact {key!r} in world_state.md")
    if as_json:
        print_json(facts[0].to_dict())
        return
    typer.echo(facts[0].value)


@world_app.command("set")
def world_set(
    ctx: typer.Context,
    key: WorldKeyArg,
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The fact's text.")],
    section: SectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set KEY to VALUE (a new key goes under --section)."""
    fact = open_workspace(ctx).world.set(key, value, section=section)
    if as_json:
        print_json(fact.to_dict())
        return
    typer.echo(f"world_state.md:{fact.line}  {fact.key}: {fact.value}")


@world_app.command("remove")
def world_remove(ctx: typer.Context, key: WorldKeyArg, as_json: JsonOpt = False) -> None:
    """Archive KEY's bullet (nothing is lost: it moves to ## Archive)."""
    try:
        open_workspace(ctx).world.remove(key)
    except KeyError:
        fail(f"no world fact {key!r} in world_state.md")
    if as_json:
        print_json({"archived": key})
        return
    typer.echo(f"archived {key}")


@world_app.command("old-form", hidden=True, help="`world KEY [VALUE]`, `world --remove KEY`.")
def world_old_form(
    ctx: typer.Context,
    key: Annotated[str | None, typer.Argument()] = None,
    value: Annotated[str | None, typer.Argument()] = None,
    section: SectionOpt = None,
    remove: Annotated[bool, typer.Option()] = False,
    as_json: JsonOpt = False,
) -> None:
    if remove:
        if key is None or value is not None:
            fail("--remove takes exactly one KEY", 2)
        world_remove(ctx, key, as_json)
    elif key is not None and value is not None:
        world_set(ctx, key, value, section, as_json)
    elif key is not None:
        world_get(ctx, key, as_json)
    else:
        world_list(ctx, as_json)
