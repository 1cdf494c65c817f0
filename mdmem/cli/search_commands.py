"""Finding what the memory holds: ``search`` and ``context`` (the memory part of a prompt)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace, remote_index
from mdmem.cli.options import (
    IncludeArchivedOpt,
    IndexUrlOpt,
    IndexWorkspaceOpt,
    JsonOpt,
    OldBudgetOpt,
)
from mdmem.cli.output import fail, log_to_stderr, print_json


def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int | None, typer.Option("-k", help="How many hits (default: search.k).")] = None,
    mode: Annotated[
        str | None, typer.Option(help="hybrid, keyword or vector (default: search.mode).")
    ] = None,
    type_: Annotated[str | None, typer.Option("--type", "-t", help="Only this type.")] = None,
    path: Annotated[str | None, typer.Option(help="Only files matching this glob.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's files.")] = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    since: Annotated[str | None, typer.Option(help="Created on or after (YYYY-MM-DD).")] = None,
    until: Annotated[str | None, typer.Option(help="Created on or before (YYYY-MM-DD).")] = None,
    include_archived: IncludeArchivedOpt = False,
    scopes: Annotated[
        str | None,
        typer.Option("--scope", help="Only these scopes: local,shared,inherited,global."),
    ] = None,
    explain: Annotated[bool, typer.Option(help="Show every part of each score.")] = False,
    no_server: Annotated[
        bool, typer.Option("--no-server", help="Search in-process even if a server runs.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Say who answered and how fast.")
    ] = False,
    as_json: JsonOpt = False,
    url: IndexUrlOpt = None,
    index_workspace: IndexWorkspaceOpt = None,
) -> None:
    """Search the workspace: ranked passages cited as path:start-end.

    Asks the workspace's warm server, starting one in the background when none runs (see
    server.auto), else works in-process.
    """
    from mdmem.index.filters import SEARCH_PARAMS
    from mdmem.live.search_output import print_results

    if mode is not None and mode not in ("hybrid", "keyword", "vector"):
        fail(f"--mode must be hybrid, keyword or vector, got {mode!r}", 2)
    if k is not None and k < 1:
        fail("-k must be at least 1", 2)
    values = dict(k=k, mode=mode, type=type_, path=path, agent=agent, session=session,
                  since=since, until=until, include_archived=include_archived,
                  scopes=scopes)  # fmt: skip
    params = {name: values[name] for name in SEARCH_PARAMS}
    remote = remote_index(url, index_workspace)
    if remote is not None:
        with remote:
            data = remote.search(query, **params).to_dict()  # type: ignore[arg-type]
        print_results(data, query, explain=explain, as_json=as_json)
        if data["hits"] and not as_json:
            index = data["hits"][0]["index"]
            typer.echo(f"(index generation {index['generation']}, synced {index['synced']})")
        return
    data = None if no_server else _ask_server(ctx, query, params, verbose)
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
