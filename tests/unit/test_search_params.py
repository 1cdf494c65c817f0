"""The options of a search are declared once (mdmem/index/search_params.py) and every way in
takes exactly those: the typer command `mdmem search`, the console's fast path that reads it
without typer, both MCP servers' `search` tools, and `SearchRequest` (with `Filters` and the
typed keywords of `ws.search`). Each test compares one way in with the declaration, both ways,
so an option added to one of them and not to the declaration (or the other way round) fails."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Any

import pytest
import typer

from mdmem.index.filters import Filters
from mdmem.index.request import FILTER_NAMES, SearchOptions, SearchRequest
from mdmem.index.search_params import (
    MODES,
    OUTPUT,
    PARAMETER,
    REMOTE,
    SEARCH_OPTIONS,
    SEARCH_PARAMS,
)

DECLARED = {option.name: option for option in SEARCH_OPTIONS}
PARAMETERS = [o for o in SEARCH_OPTIONS if o.role == PARAMETER]
FOR_MCP = [o for o in PARAMETERS if o.mcp is not None]


def test_the_declaration_is_well_formed() -> None:
    assert len(DECLARED) == len(SEARCH_OPTIONS)
    assert {o.role for o in SEARCH_OPTIONS} == {PARAMETER, OUTPUT, REMOTE}
    assert {o.kind for o in SEARCH_OPTIONS} <= {"int", "str", "bool", "mode"}
    names = [name for o in SEARCH_OPTIONS for name in o.names()]
    assert len(names) == len(set(names)), "two options share a name"
    assert tuple(o.name for o in PARAMETERS) == SEARCH_PARAMS
    for o in SEARCH_OPTIONS:
        assert (o.default is False) == (o.kind == "bool"), o
        assert all("/" not in flag for flag in o.flags) or o.kind == "bool", o


# ---- the typer command -----------------------------------------------------------------------


def _typer_search() -> Any:
    from mdmem.cli import app

    return typer.main.get_command(app).commands["search"]  # type: ignore[attr-defined]


def test_the_typer_command_takes_exactly_the_declared_options() -> None:
    command = _typer_search()
    options = {p.name: p for p in command.params if p.param_type_name == "option"}
    assert sorted(options) == sorted(DECLARED)
    for name, param in options.items():
        declared = DECLARED[name]
        assert set(param.opts + param.secondary_opts) == set(declared.names()), name
        assert param.default == declared.default, name
        if declared.help is not None:
            assert param.help == declared.help, name
    arguments = [p.name for p in command.params if p.param_type_name == "argument"]
    assert arguments == ["query"]


def test_mdmem_entries_archived_flag_is_the_searchs() -> None:
    from mdmem.cli import app

    entries = typer.main.get_command(app).commands["entries"]  # type: ignore[attr-defined]
    (flag,) = [p for p in entries.params if p.name == "include_archived"]
    assert set(flag.opts + flag.secondary_opts) == set(DECLARED["include_archived"].names())


# ---- the console's fast path -----------------------------------------------------------------


def test_the_fast_path_reads_exactly_the_declared_options() -> None:
    from mdmem.console import FLAG_OPTIONS, REMOTE_OPTIONS, VALUE_OPTIONS, parse_search

    every = {name for o in SEARCH_OPTIONS for name in o.names()}
    assert set(VALUE_OPTIONS) | set(FLAG_OPTIONS) | set(REMOTE_OPTIONS) == every
    assert not (set(VALUE_OPTIONS) & set(FLAG_OPTIONS))
    for name, target in VALUE_OPTIONS.items():
        assert DECLARED[target].kind != "bool" and name in DECLARED[target].flags
    for name, (target, value) in FLAG_OPTIONS.items():
        assert DECLARED[target].switches()[name] is value
    assert {DECLARED[n].role for o in REMOTE_OPTIONS for n in DECLARED if o in DECLARED[n].names()} == {REMOTE}  # fmt: skip
    # each search parameter given on the command line reaches the search's parameters
    argv = ["search", "q", "-k", "3", "--mode", "keyword", "--scope", "shared", "--archived"]
    argv += [f"--{o.name}=x" for o in PARAMETERS if o.kind == "str" and o.name != "scopes"]
    args = parse_search(argv)
    assert args is not None
    assert sorted(args.params) == sorted(SEARCH_PARAMS)


# ---- both MCP servers ------------------------------------------------------------------------


def _schemas(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The `search` tool's input schema of each server, as `tools/list` gives it to clients."""
    from mdmem.integrations.mcp_remote import build_remote_server
    from mdmem.integrations.mcp_server import build_server

    (tmp_path / "memory.md").write_text("# Memory\n")
    servers = {
        "local": build_server(tmp_path, warm_up=False),
        "remote": build_remote_server(None),  # type: ignore[arg-type]  (listing opens nothing)
    }

    async def listed() -> dict[str, dict[str, Any]]:
        found = {}
        for label, server in servers.items():
            (tool,) = [t for t in await server.list_tools() if t.name == "search"]
            found[label] = tool.input_schema
        return found

    return asyncio.run(listed())


@pytest.mark.parametrize("server", ["local", "remote"])
def test_each_mcp_search_tool_takes_exactly_the_declared_parameters(
    tmp_path: Path, server: str
) -> None:
    from mdmem.integrations.mcp_server import PATH_KEY

    schema = _schemas(tmp_path)[server]
    properties = schema["properties"]
    assert list(properties) == ["query", *(o.name for o in FOR_MCP)]  # in the declared order
    assert schema["required"] == ["query"]
    for option in FOR_MCP:
        prop = properties[option.name]
        assert prop["description"] == option.mcp, option.name
        assert prop["default"] == option.default, option.name
        assert prop.get(PATH_KEY) == option.path_like, option.name
        kinds = prop.get("anyOf", [prop])
        assert [k["type"] for k in kinds] == {
            "int": ["integer", "null"], "str": ["string", "null"], "bool": ["boolean"],
            "mode": ["string", "null"],
        }[option.kind], option.name  # fmt: skip
        if option.kind == "mode":
            assert kinds[0]["enum"] == list(MODES)
        assert kinds[0].get("minimum") == option.at_least, option.name
        assert kinds[0].get("maximum") == option.mcp_at_most, option.name


def test_the_mcp_search_tools_signatures_are_the_declarations() -> None:
    """What the SDK reads (the signature) is what the tool's body hands to SearchRequest."""
    from mdmem.integrations.mcp_remote import RemoteTools
    from mdmem.integrations.mcp_server import Tools

    for tools in (Tools, RemoteTools):
        params = list(inspect.signature(tools.search).parameters)
        assert params == ["self", "query", *(o.name for o in FOR_MCP)], tools


# ---- SearchRequest, Filters and the typed keywords of ws.search ------------------------------


def test_search_request_takes_exactly_the_declared_parameters() -> None:
    fields = [f.name for f in dataclasses.fields(SearchRequest)]
    flat = [n for f in fields if f != "query" for n in (FILTER_NAMES if f == "filters" else [f])]
    assert sorted(flat) == sorted([*SEARCH_PARAMS, "track_access"])
    assert {f.name for f in dataclasses.fields(Filters)} == FILTER_NAMES
    defaults = Filters()
    for name in FILTER_NAMES:
        assert getattr(defaults, name) == DECLARED[name].default, name
    every = {o.name: ("x" if o.kind == "str" else o.default) for o in PARAMETERS}
    request = SearchRequest.of("q", **{**every, "k": 2, "mode": "keyword"})
    assert SearchRequest.from_params("q", request.params()) == request
    assert sorted(request.params()) == sorted(SEARCH_PARAMS)


def test_the_typed_keywords_of_ws_search_are_the_declared_parameters() -> None:
    hints = typing.get_type_hints(SearchOptions)
    assert sorted(hints) == sorted([*(p for p in SEARCH_PARAMS if p != "k"), "track_access"])
    mode = [a for a in typing.get_args(hints["mode"]) if a is not type(None)]
    assert typing.get_args(mode[0]) == MODES


def test_the_mcp_search_hands_each_argument_to_the_search(tmp_path: Path) -> None:
    """The tool's body takes `**options`: each argument a client sends reaches the search."""
    from mdmem import Workspace
    from mdmem.integrations.mcp_server import build_server

    ws = Workspace.init(tmp_path / "ws", mode="full", agent="coder")
    (ws.root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(ws.root)
    ws.remember("The staging database listens on port 6543", type="fact")
    ws.remember("Prefer the staging database for load tests", type="preference")
    server = build_server(ws, warm_up=False)

    async def search(**arguments: Any) -> list[dict[str, Any]]:
        result: Any = await server.call_tool("search", {"query": "staging database", **arguments})
        assert not result.is_error, result.content
        return result.structured_content["hits"]  # type: ignore[no-any-return]

    async def calls() -> dict[str, list[dict[str, Any]]]:
        return {
            "all": await search(mode="keyword"),
            "facts": await search(mode="keyword", type="fact"),
            "one": await search(mode="keyword", k=1),
            "elsewhere": await search(mode="keyword", path="notes/*.md"),
        }

    try:
        found = asyncio.run(calls())
    finally:
        server.tools.close()
    assert {h["type"] for h in found["all"]} == {"fact", "preference"}
    assert {h["type"] for h in found["facts"]} == {"fact"}
    assert len(found["one"]) == 1
    assert found["elsewhere"] == []
