"""Names that live outside the repository keep working after a rename (issue 42 §5): a key in
a user's mdmem.toml, a command in a script or a hook setting, an MCP tool a client was
configured with. The old name is accepted and does what the new one does; only the new one is
shown."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from in_process import Ran, mdmem

from mdmem import Workspace
from mdmem.config import load_config


def test_the_float16_store_key_keeps_its_old_name(tmp_path: Path) -> None:
    """`index.compact_vectors_from` became `index.float16_vectors_from` ("compact" is
    conversation compaction only); a file written with the old key loads as the new one."""
    (tmp_path / "mdmem.toml").write_text("[index]\ncompact_vectors_from = 1234\n")
    assert load_config(tmp_path).index.float16_vectors_from == 1234
    (tmp_path / "mdmem.toml").write_text("[index]\nfloat16_vectors_from = 99\n")
    assert load_config(tmp_path).index.float16_vectors_from == 99


def _cli(root: Path, *args: str) -> Ran:
    return mdmem("-w", str(root), *args)


def test_old_subcommand_names_still_run_and_are_hidden(tmp_path: Path) -> None:
    """Scripts written before the subcommands were named as their library calls keep working:
    `task done`, `pool get|set|rm`, `sessions show`, `world KEY [VALUE]`, `world --remove`,
    `context --budget`, `recover --restore`, `entries --archived`; none is in the help."""
    root = Workspace.init(tmp_path / "ws", mode="full", agent="coder").root
    (root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    assert _cli(root, "task", "new", "ship it", "write", "test").returncode == 0
    done = _cli(root, "task", "done", "1", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["item"]["done"] is True

    written = _cli(root, "pool", "set", "plan", "draft", "--json")
    assert json.loads(written.stdout)["version"] == 1
    assert _cli(root, "pool", "get", "plan").stdout.strip() == "draft"
    assert _cli(root, "pool", "read", "plan").stdout.strip() == "draft"
    assert _cli(root, "pool", "rm", "plan").returncode == 0
    assert _cli(root, "pool", "read", "plan").returncode == 4

    assert _cli(root, "world", "db", "pg 16").stdout.startswith("world_state.md:")
    assert _cli(root, "world", "db").stdout.strip() == "pg 16"
    assert _cli(root, "world", "get", "db").stdout.strip() == "pg 16"
    assert json.loads(_cli(root, "world", "--remove", "db", "--json").stdout) == {"archived": "db"}
    assert _cli(root, "world", "get", "db").returncode == 1

    with Workspace.open(root) as ws, ws.session("old names") as session:
        session.event("execute", "checked the old names")
        sid = session.id
    shown, recorded = _cli(root, "sessions", "show", sid), _cli(root, "sessions", "record", sid)
    assert shown.returncode == 0 and shown.stdout == recorded.stdout

    old = _cli(root, "context", "--budget", "300", "--json")
    new = _cli(root, "context", "--budget-tokens", "300", "--json")
    assert json.loads(old.stdout)["budget"] == json.loads(new.stdout)["budget"] == 300

    (root / "memory.md").write_text((root / "memory.md").read_text() + "\n- one more line\n")
    with Workspace.open(root) as ws:
        ws.remember("a fact written by the program")
    versions = json.loads(_cli(root, "recover", "memory.md", "--json").stdout)
    for version in (v["id"] for v in versions):  # each back, by the old flag and the new
        shown = _cli(root, "recover", "memory.md", version, "--show").stdout
        for flag in ("--restore", "--put-back"):
            (root / "memory.md").write_text("- changed by hand\n")
            assert _cli(root, "recover", "memory.md", version, flag).returncode == 0
            assert (root / "memory.md").read_text() == shown, (version, flag)

    archived = _cli(root, "entries", "--archived", "--json").stdout
    assert archived == _cli(root, "entries", "--include-archived", "--json").stdout

    helps = {
        ("task", "--help"): ["done"], ("pool", "--help"): [" get ", " set ", " rm "],
        ("sessions", "--help"): ["show"], ("world", "--help"): ["old-form", "--remove"],
        ("context", "--help"): ["--budget "], ("recover", "--help"): ["--restore"],
    }  # fmt: skip
    for args, hidden in helps.items():
        text = _cli(root, *args).stdout
        assert text and not [h for h in hidden if h in text], (args, text)


def test_old_mcp_tool_names_run_the_new_tools_and_are_not_listed(ws: Workspace) -> None:
    """An MCP client configured with `recent`, `pool_get` or `pool_set` keeps working: the old
    name runs the tool it became, with the same arguments; `tools/list` shows each tool once,
    by its new name."""
    from mdmem.integrations.mcp_server import OLD_TOOL_NAMES, build_server

    (ws.root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    opened = Workspace.open(ws.root)
    server = build_server(opened, warm_up=False)

    async def calls() -> dict[str, object]:
        listed = {tool.name for tool in await server.list_tools()}
        wrote = await server.call_tool("pool_set", {"key": "plan", "value": "draft"})
        read = await server.call_tool("pool_get", {"key": "plan"})
        recent = await server.call_tool("recent", {"limit": 2})
        return {"listed": listed, "wrote": wrote, "read": read, "recent": recent}

    out = asyncio.run(calls())
    server.tools.close()
    listed = out["listed"]
    assert isinstance(listed, set)
    assert not set(OLD_TOOL_NAMES) & listed and set(OLD_TOOL_NAMES.values()) <= listed
    for name in ("wrote", "read", "recent"):
        result: Any = out[name]
        assert not result.is_error, result.content
    assert out["read"].structured_content["content"] == "draft"  # type: ignore[attr-defined]
    assert "sessions" in out["recent"].structured_content  # type: ignore[attr-defined]
    assert opened.sharing.pool().read("plan") is not None


def test_the_renames_are_finished() -> None:
    """One word per concept: the watcher's word is "caught up" everywhere (no trace of the name
    before it); "compact" is conversation compaction only (no module of the index, no key
    outside `[compact]`); no two modules share a file name but the two index backends'
    parallel ones."""
    root = Path(__file__).resolve().parents[2]
    old = "vo" + "uch"  # (spelled so this file does not hold it)
    holding = subprocess.run(
        ["git", "grep", "-il", old, "--", "mdmem", "docs", "tests", "benchmarks", "scripts"],
        cwd=root, capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    assert holding == []
    tracked = subprocess.run(
        ["git", "ls-files", "mdmem/index"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()  # the tree as committed: not a stale __pycache__ of the old names
    assert [p for p in tracked if "compact" in Path(p).name] == []
    from mdmem.config import Config

    for section in dataclasses.fields(Config):
        if dataclasses.is_dataclass(section.default_factory) or section.name == "compact":
            continue
        value = getattr(Config(), section.name)
        if dataclasses.is_dataclass(value):
            assert not [f.name for f in dataclasses.fields(value) if "compact" in f.name], (
                section.name
            )
    names = Counter(p.name for p in (root / "mdmem").rglob("*.py") if p.name != "__init__.py")
    assert sorted(n for n, count in names.items() if count > 1) == ["db.py", "index.py", "read.py"]
