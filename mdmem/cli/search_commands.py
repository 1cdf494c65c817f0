"""Search and context: ``search``, ``context`` (the memory part of a prompt)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace, remote_index
from mdmem.cli.options import (
    IndexUrlOpt,
    IndexWorkspaceOpt,
    JsonOpt,
    OldBudgetOpt,
)
from mdmem.cli.output import fail, log_to_stderr, print_json
from mdmem.index.search_params import MODES, SEARCH_OPTIONS, SEARCH_PARAMS


def _takes_search_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command``'s parameters, then, for its ``**options``, one typer option for each of
    :data:`~mdmem.index.search_params.SEARCH_OPTIONS` (what typer reads: its signature)."""
    shared = {"as_json": JsonOpt, "url": IndexUrlOpt, "index_workspace": IndexWorkspaceOpt}
    types: dict[str, Any] = {"int": int | None, "str": str | None, "mode": str | None}
    added = []
    for option in SEARCH_OPTIONS:
        if option.help is None:  # an option every command of its kind has: declared with them
            annotation = shared[option.name]
        else:
            kind = bool if option.kind == "bool" else types[option.kind]
            annotation = Annotated[kind, typer.Option(*option.flags, help=option.help)]
        added.append(
            inspect.Parameter(
                option.name, inspect.Parameter.KEYWORD_ONLY, default=option.default,
                annotation=annotation,
            )
        )  # fmt: skip
    own = inspect.signature(command, eval_str=True).parameters.values()
    fixed = [p for p in own if p.kind is not inspect.Parameter.VAR_KEYWORD]
    typed: Any = command
    typed.__signature__ = inspect.Signature([*fixed, *added], return_annotation=None)
    return command


@_takes_search_options
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    **options: Any,
) -> None:
    """Search the workspace: ranked passages cited as path:start-end.

    Asks the workspace's warm server, starting one in the background when none runs (see
    server.auto), else works in-process.
    """
    from mdmem.live.search_output import print_results

    mode, k = options["mode"], options["k"]
    if mode is not None and mode not in MODES:
        fail(f"--mode must be hybrid, keyword or vector, got {mode!r}", 2)
    if k is not None and k < 1:
        fail("-k must be at least 1", 2)
    params = {name: options[name] for name in SEARCH_PARAMS}
    explain, verbose, as_json = options["explain"], options["verbose"], options["as_json"]
    remote = remote_index(options["url"], options["index_workspace"])
    if remote is not None:
        with remote:
            data = remote.search(query, **params).to_dict()  # type: ignore[arg-type]
        print_results(data, query, explain=explain, as_json=as_json)
        if data["hits"] and not as_json:
            index = data["hits"][0]["index"]
            typer.echo(f"(index generation {index['generation']}, synced {index['synced']})")
        return
    data = None if options["no_server"] else _ask_server(ctx, query, params, verbose)
    if data is None:
        log_to_stderr()
        ws = open_workspace(ctx)
        data = ws.search(query, **params).to_dict()  # type: ignore[arg-type]
    against = _contradicted(ctx) if explain and data["hits"] else None
    if against is not None and as_json:  # the same "contradicted by" the text shows
        for hit in data["hits"]:
            hit["contradicted_by"] = against.get(hit["id"], [])
    print_results(data, query, explain=explain, as_json=as_json, against=against)


def _ask_server(
    ctx: typer.Context, query: str, params: dict[str, Any], verbose: bool
) -> dict[str, Any] | None:
    """The fast path: the workspace's warm server answers with its loaded model and index."""
    from mdmem.layout import find_root
    from mdmem.live.client import ServerError, server_search

    try:
        return server_search(find_root(ctx.obj.get("workspace")), query, params, verbose=verbose)
    except ServerError as exc:
        fail(str(exc), 2 if exc.kind == "ValueError" else 1)


def _contradicted(ctx: typer.Context) -> dict[str, list[str]]:
    """Open contradictions across the workspace: id → the active memories contradicting it."""
    return open_workspace(ctx).lifecycle.contradicted()


def context(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="What the next turn is about.")] = None,
    budget_tokens: Annotated[
        int | None,
        typer.Option(
            "--budget-tokens", "-b", help="Token budget (default: context.budget_tokens)."
        ),
    ] = None,
    old_budget: OldBudgetOpt = None,
    model: Annotated[
        str | None, typer.Option(help="Count tokens with this model's tokenizer (litellm).")
    ] = None,
    agent: Annotated[
        str | None, typer.Option(help="Whose sessions (default: the workspace's agent).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the memory section of a system prompt, within a token budget.

    What each source used and left out goes to stderr (the text itself to stdout).
    """
    budget = budget_tokens if budget_tokens is not None else old_budget
    if budget is not None and budget < 0:
        fail("--budget-tokens must be >= 0", 2)
    log_to_stderr()
    ws = open_workspace(ctx)
    result = ws.build_context(query, budget, model, agent=agent)
    if as_json:
        print_json(result.to_dict())
        return
    typer.echo(result.text)
    counted = result.model or "estimate"
    typer.echo(
        f"mdmem: {result.tokens:,} of {result.budget:,} tokens ({counted}); mode {result.mode}",
        err=True,
    )
    for s in result.sources:
        lost = f", {s.omitted:,} omitted ({s.omitted_units} items)" if s.omitted else ""
        typer.echo(f"mdmem:   {s.name:10} {s.used:6,} used of {s.share:6,}{lost}", err=True)
