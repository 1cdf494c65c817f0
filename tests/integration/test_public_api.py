"""The public names of ``mdmem``: one runtime list (``_EXPORTS``), the same names shown to type
checkers, imported lazily (issue 34 §2)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import mdmem
from mdmem import Hit, SearchResults, Workspace

INIT = Path(mdmem.__file__)


def _typed_imports() -> dict[str, str]:
    """Each name the ``if TYPE_CHECKING:`` block of ``mdmem/__init__.py`` re-exports (``X as X``),
    with its module."""
    tree = ast.parse(INIT.read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    found: dict[str, str] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module != "typing":
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name}: re-export it as itself"
                assert alias.name not in found, f"{alias.name} imported twice"
                found[alias.name] = str(node.module)
    return found


def test_type_checkers_see_exactly_the_runtime_exports() -> None:
    assert _typed_imports() == mdmem._EXPORTS
    assert mdmem.__all__ == list(mdmem._EXPORTS)


def test_every_export_resolves_to_the_object_its_module_defines() -> None:
    for name, module in mdmem._EXPORTS.items():
        assert getattr(mdmem, name) is getattr(importlib.import_module(module), name), name


def test_importing_mdmem_imports_nothing_else() -> None:
    """``mdmem --help`` and the search fast path import the package: it stays a few names."""
    code = (
        "import sys, mdmem; "
        "print(sorted(m for m in sys.modules if m.startswith('mdmem.') or m == 'typing'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_search_returns_the_exported_types(ws: Workspace) -> None:
    (ws.root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(ws.root)
    ws.remember("We deploy with uv on CI", type="fact")
    results = ws.search("deploy", mode="keyword")
    assert isinstance(results, SearchResults) and results
    assert all(isinstance(hit, Hit) for hit in results)
    ws.close()


def test_the_workspace_shows_the_daily_calls_and_its_parts() -> None:
    """`Workspace` keeps what an agent calls every day and groups the rest in named parts: at
    most 30 public names, async twins included (a new one is a decision, made here)."""
    public = {name for name in dir(Workspace) if not name.startswith("_")}
    daily = {
        "open", "init", "open_global", "config", "remember", "update", "supersede", "forget",
        "get", "entries", "search", "asearch", "build_context", "abuild_context", "session",
        "should_compact", "compact", "acompact", "extract", "aextract", "watch", "close",
        "set_mode",
    }  # fmt: skip
    parts = {"index", "files", "sessions", "sharing", "lifecycle", "task", "world"}
    assert public == daily | parts
    assert len(public) <= 30
