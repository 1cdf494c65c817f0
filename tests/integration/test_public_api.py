"""The public names of ``mdmem``: one runtime list (``_EXPORTS``), the same names shown to type
checkers, imported lazily (issue 34 §2)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import re
import subprocess
import sys
import typing
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


def _rendered() -> set[object]:
    """What the API reference renders: each ``::: module.Name`` (a module with ``members:``
    renders those members only), as the objects they name."""
    text = (INIT.parents[1] / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    found: set[object] = set()
    for match in re.finditer(r"^::: (\S+)\n((?:    .*\n)*)", text, re.M):
        target, options = match.groups()
        members = re.search(r"members:\s*\[([^\]]*)\]", options)
        module_name, _, name = target.rpartition(".")
        if name:
            found.add(getattr(importlib.import_module(module_name), name, None))
        if members and target in sys.modules:  # a module: only the members listed
            module = importlib.import_module(target)
            found.update(getattr(module, m.strip()) for m in members.group(1).split(","))
    return found


def _checking_names(module: object) -> dict[str, object]:
    """The names a module imports under ``if TYPE_CHECKING:`` (its annotations use them)."""
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for sub in node.body:
                if isinstance(sub, ast.ImportFrom) and sub.module:
                    imported = importlib.import_module(sub.module)
                    for alias in sub.names:
                        names[alias.asname or alias.name] = getattr(imported, alias.name)
    return names


def _returned_types(cls: type) -> set[type]:
    """The mdmem classes ``cls``'s public methods and properties return."""
    found: set[type] = set()
    for name, member in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            function = member.fget
        elif isinstance(member, functools.cached_property):
            function = member.func
        else:
            function = member
        if not callable(function) or not getattr(function, "__module__", "").startswith("mdmem"):
            continue  # not a function of mdmem's (a dataclass's or a builtin's)
        module = sys.modules[function.__module__]
        hints = typing.get_type_hints(function, {**vars(module), **_checking_names(module)})
        pending = [hints.get("return")]
        while pending:
            hint = pending.pop()
            pending.extend(typing.get_args(hint))
            if isinstance(hint, type) and hint.__module__.startswith("mdmem."):
                found.add(hint)
    return found


def test_the_reference_renders_every_export_and_every_returned_type() -> None:
    """docs/reference/api.md: every name ``mdmem`` exports has its section, and so has every
    type a user can hold: what a public call of ``Workspace`` returns (its parts among them),
    and what the values among those return in turn."""
    rendered = _rendered()
    exported = {name: getattr(mdmem, name) for name in mdmem.__all__ if name != "MEMORY_TYPES"}
    assert sorted(name for name, value in exported.items() if value not in rendered) == []
    held: set[type] = set()
    pending: list[type] = [Workspace]
    while pending:
        holder = pending.pop()
        for found in _returned_types(holder) - held:
            held.add(found)
            if dataclasses.is_dataclass(found):  # a value: what its calls return is held too
                pending.append(found)
    assert sorted(t.__qualname__ for t in held if t not in rendered) == []


PARTS = {
    "index": {"update", "status", "copy_to_postgres", "embedder"},
    "files": {"read", "all", "edit", "versions", "recover"},
    "sessions": {"list", "record", "mark_interrupted"},
    "sharing": {"pool", "pools", "parent", "publish", "sync", "sync_from_parent"},
    "lifecycle": {
        "auto_promote", "consolidate", "restore", "relate", "related", "contradicted", "stats",
        "tiers", "promote",
    },
    "task": {
        "new", "add", "complete", "current", "instruct", "instructions", "items", "phase",
        "set_phase", "state",
    },
    "world": {"get", "set", "remove", "facts", "as_dict"},
}  # fmt: skip
"""What a user calls on each part of a workspace. What integrations inside the package need
(the index backend, the state folder, the redactor, the write lock …) is under a leading
underscore: a new public name on a part is a decision, made here and in docs/reference/api.md."""

POOL = {
    "name", "path", "read", "write", "delete", "list", "history", "watch", "on_write",
    "on_delete", "aread", "awrite", "adelete", "alist",
}  # fmt: skip


def _public(value: object) -> set[str]:
    """The names a user sees on an object: its class's and its own (instance attributes)."""
    return {name for name in dir(value) if not name.startswith("_")}


def _rendered_members() -> dict[str, list[str] | None]:
    """Each ``::: target`` of docs/reference/api.md → the members it is limited to (None: all
    its public names)."""
    text = (INIT.parents[1] / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    found: dict[str, list[str] | None] = {}
    for match in re.finditer(r"^::: (\S+)\n((?:    .*\n)*)", text, re.M):
        target, options = match.groups()
        members = re.search(r"members:\s*\[([^\]]*)\]", options)
        found[target] = [m.strip() for m in members.group(1).split(",")] if members else None
    return found


def test_each_part_shows_only_what_a_user_calls(ws: Workspace) -> None:
    """`ws.index`, `ws.files`, `ws.sessions` … and a pool: their public names, instance
    attributes included, are exactly the documented ones; each part's page in the API
    reference renders all of them (so none of it is plumbing, and nothing is missing)."""
    rendered = _rendered_members()
    parts = {name: getattr(ws, name) for name in PARTS} | {"pool": ws.sharing.pool("notes")}
    expected = PARTS | {"pool": POOL}
    for name, part in parts.items():
        assert _public(part) == expected[name], name
        cls = type(part)
        target = f"{cls.__module__}.{cls.__qualname__}"
        assert target in rendered and rendered[target] is None, f"{target}: no page of its own"
    ws.close()


def test_the_errors_module_shows_only_the_errors() -> None:
    """`mdmem.errors` holds the errors a user catches, each on the reference page; the helpers
    that build them from an OSError live in `mdmem.writes.os_failures`, not here."""
    import mdmem.errors

    public = {
        name
        for name, value in vars(mdmem.errors).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == "mdmem.errors"
    }
    assert public == set(_rendered_members()["mdmem.errors"] or [])
