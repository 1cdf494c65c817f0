"""The docs site: its references are generated from the code and never stale, every option and
config key is documented, the site builds with no warning, and no internal link is broken."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import click
import pytest
import typer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import docs_references  # noqa: E402


def test_the_committed_references_match_the_code() -> None:
    """`make docs` regenerates them; a change to a command, option or config key that was not
    followed by it fails here."""
    done = subprocess.run(
        [sys.executable, "scripts/docs_references.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_command_and_option_has_help() -> None:
    from mdmem.cli import app

    missing = []

    def walk(command: click.Command, path: str) -> None:
        if not (command.help or command.short_help):
            missing.append(path)
        missing.extend(
            f"{path} {p.name}"
            for p in command.params
            if not getattr(p, "help", None) and p.name != "help"
        )
        # typer bundles its own click (its groups are no click.Group): walk what has commands
        for name, sub in getattr(command, "commands", {}).items():
            if not sub.hidden:  # (an old name, kept for scripts)
                walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "mdmem")
    assert missing == []


def test_every_config_key_says_what_it_means() -> None:
    missing = [
        f"[{section}] {key}" if section else key
        for section, cls in docs_references.config_sections()
        for key, _, _, meaning in docs_references.config_fields(cls)
        if not meaning
    ]
    assert missing == []
    sections = [name for name, _ in docs_references.config_sections()]
    from mdmem.config import Config

    nested = [f.name for f in dataclasses.fields(Config) if f.name in sections]
    assert nested == sections[1:]  # every section is in the reference


HTML_TAGS = frozenset(
    """a abbr address article aside audio b blockquote body br button canvas caption cite code
    col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption
    figure footer form h1 h2 h3 h4 h5 h6 head header hr html i iframe img input ins kbd label
    legend li link main mark meta meter nav noscript object ol optgroup option output p param
    picture pre progress q rp rt ruby s samp script section select small source span strong
    style sub summary sup table tbody td template textarea tfoot th thead time title tr track u
    ul var video wbr svg path g circle rect line polyline polygon defs use symbol""".split()
)
"""What a browser renders. Any other tag in a page is prose that Markdown took for HTML
(``When <error>: <fix>`` shows as "When : ")."""
LIST_IN_PARAGRAPH = re.compile(r"(?:^|\n)[ \t]*(?:[-*+]|\d+\.) \S")
"""A line of a paragraph that starts like a list item: a list with no blank line before it,
run together with the text above."""


class _Links(HTMLParser):
    """A built page's links and anchors, and what it renders wrongly."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.unknown_tags: list[str] = []
        self.paragraphs: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag in ("a", "link") and values.get("href"):
            self.links.append(values["href"] or "")
        if tag not in HTML_TAGS:
            self.unknown_tags.append(f"<{tag}>")
        if tag == "p":
            self.paragraphs.append("")
        if tag not in ("br", "img", "input", "link", "meta", "hr", "wbr", "source", "col"):
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            while self._open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if "p" in self._open and not {"code", "pre"} & set(self._open):
            self.paragraphs[-1] += data

    def run_on_lists(self) -> list[str]:
        """Paragraphs that hold a list Markdown did not see."""
        return [p.strip()[:80] for p in self.paragraphs if LIST_IN_PARAGRAPH.search(p.strip())]


@pytest.mark.slow
def test_the_site_builds_with_no_warning_and_no_broken_internal_link(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr

    pages = {p: _parsed(p) for p in site.rglob("*.html")}
    roles = re.compile(r":(meth|class|func|data|attr|mod|exc|obj|const):<code>")
    assert [p.name for p in pages if roles.search(p.read_text())] == []  # shown as code
    raw_roles = re.compile(r":(meth|class|func|data|attr|mod|exc|obj|const):`")
    assert [p.name for p in pages if raw_roles.search(p.read_text())] == []
    swallowed = {
        f"{p.relative_to(site)}: {tag}"
        for p, parsed in pages.items()
        for tag in parsed.unknown_tags
    }
    assert sorted(swallowed) == []  # prose that Markdown read as an HTML tag
    run_on = [
        f"{p.relative_to(site)}: {text!r}"
        for p, parsed in pages.items()
        for text in parsed.run_on_lists()
    ]
    assert run_on == []  # a list with no blank line above it renders as one paragraph
    broken = []
    for page, parsed in pages.items():
        for href in parsed.links:
            url = urlsplit(href)
            if url.scheme or url.netloc or href.startswith("mailto:"):
                continue  # external: not this site's to check (and no network in tests)
            base = site if url.path.startswith("/") else page.parent  # 404.html: from the root
            target = (base / unquote(url.path).lstrip("/")).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {href}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parsed(target).ids
                if url.fragment not in ids:
                    broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    assert broken == []
    assert len(pages) >= 15
    start = (site / "index.html").read_text(encoding="utf-8")
    assert re.search(r"Getting started", start)


def _parsed(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


RUNS_THE_COMMAND = {"extract"}
"""Flags named as a command because they run it (`import --extract`, `hooks install --extract`
extract memories as `mdmem extract` does); any other such flag names another operation."""


def _resolve(name: str, ws: Any) -> Any:
    """A name of the table's Python column: ``ws.…``/``Workspace.…`` walked from the open
    workspace, else the longest importable module of a dotted name, then its attributes."""
    import importlib

    if name.startswith(("ws.", "Workspace.")):
        found: Any = ws
        for part in name.split(".")[1:]:
            assert hasattr(found, part), name
            found = getattr(found, part)
        return found
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            assert hasattr(found, part), name
            found = getattr(found, part)
        return found
    raise AssertionError(f"{name}: no such module")


def _options(command: Any) -> list[Any]:
    """The options a user sees on a command (typer's hidden ones are old names, kept)."""
    return [
        p
        for p in command.params
        if getattr(p, "opts", None) and not getattr(p, "hidden", False)
        and any(o.startswith("--") for o in p.opts)
    ]  # fmt: skip


def _long(option: Any) -> str:
    return next(o for o in option.opts if o.startswith("--"))[2:].replace("-", "_")


def test_the_vocabulary_table_matches_the_code(tmp_path: Path) -> None:
    """docs/cli.md's table of each command, its library call and its MCP tool names every
    command the program has, and only names that exist: the commands, `Workspace`'s members,
    parts and modules, and the MCP server's tools. Each operation has one name, all the way
    down (issue 42 §5):

    - a command is named as its method, or as the part of the workspace its method is on;
    - so is each subcommand (`task complete` ↔ `ws.task.complete`, `pool read` ↔ `Pool.read`),
      but a group's `list`;
    - an MCP tool is named by words of its row's library calls (`pool_read`, `sessions`,
      `session_event` ↔ `Session.event`);
    - an option that gives a library parameter is named as that parameter, not a part of it
      (`--budget-tokens` ↔ `budget_tokens`), and so is an MCP tool's argument;
    - no flag is named as another command (`recover --restore` beside `mdmem restore`);
    - an action of a part is a subcommand, not a flag (`world remove KEY`, not `--remove`).
    """
    import asyncio
    import inspect

    from mdmem import Workspace
    from mdmem.cli import app
    from mdmem.integrations.mcp_server import build_server

    text = (ROOT / "docs" / "cli.md").read_text()
    table = text.split("| operation | command | Python | MCP tool |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.strip().splitlines()[1:]]
    assert rows and all(len(row) == 4 for row in rows), table

    def names(cell: str) -> list[str]:
        return re.findall(r"`([^`]+)`", cell)

    commands: Any = typer.main.get_command(app)
    listed = [n for row in rows for n in names(row[1])]
    shown = {n: c for n, c in commands.commands.items() if not c.hidden}
    assert sorted(listed) == sorted(shown)  # each command once, none missing
    for old, new in (("add", "remember"), ("show", "entries")):  # the names scripts still use
        assert commands.commands[old].hidden
        was, now = commands.commands[old], commands.commands[new]
        assert was.callback.__name__ == now.callback.__name__ == new
        assert [p.name for p in was.params] == [p.name for p in now.params]

    root = Workspace.init(tmp_path / "ws").root
    (root / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    with Workspace.open(root) as ws:
        calls = [[(n, _resolve(n, ws)) for n in names(row[2])] for row in rows]
        owners = [  # the parts a row works on (`ws.world`, `ws.files` of `ws.files.recover`)
            [
                _resolve(n.rsplit(".", 1)[0], ws) if callable(found) else found
                for n, found in row_calls
                if n.startswith("ws.") and n.count(".") >= 1 + callable(found)
            ]
            for row_calls in calls
        ]
        server = build_server(ws, warm_up=False)
        tools = {tool.name: tool for tool in asyncio.run(server.list_tools())}
    assert sorted(n for row in rows for n in names(row[3])) == sorted(tools)

    def words(row_calls: list[tuple[str, Any]]) -> set[str]:
        """The names a row's library calls are reached by: parts, methods, and a method's
        last word (`build_context` → `context`, `set_mode` → `mode`); of a class's method
        (`mdmem.sharing.pool.Pool.read`), the method."""
        found: set[str] = set()
        for name, _ in row_calls:
            parts = name.split(".")
            if name.startswith(("ws.", "Workspace.")):
                found |= set(parts[1:]) | {parts[-1].rsplit("_", 1)[-1]}
            elif len(parts) > 1 and parts[-2][:1].isupper():
                found.add(parts[-1])
        return found

    def parameters(row_calls: list[tuple[str, Any]]) -> set[str]:
        found: set[str] = set()
        for _, call in row_calls:
            if callable(call) and not isinstance(call, type):
                try:
                    found |= set(inspect.signature(call).parameters) - {"self"}
                except (TypeError, ValueError):
                    continue
        return found

    def shortened(name: str, params: set[str]) -> list[str]:
        """The parameters ``name`` is a shortening of (`budget` of `budget_tokens`)."""
        return [
            p for p in params if p != name and (p.startswith(name + "_") or p.endswith("_" + name))
        ]

    for row, row_calls, row_owners in zip(rows, calls, owners, strict=True):
        known = words(row_calls)
        params = parameters(row_calls)
        actions = {m for owner in row_owners for m in dir(owner) if not m.startswith("_")}
        for tool in names(row[3]):
            assert set(tool.split("_")) <= known, (tool, row)
            schema = tools[tool].input_schema.get("properties", {})
            for arg in schema:
                assert not shortened(arg, params), (tool, arg, shortened(arg, params))
        for name in names(row[1]):
            command = shown[name]
            if known:
                assert name.replace("-", "_") in known, (name, row)
            subcommands = {
                sub: c for sub, c in getattr(command, "commands", {}).items() if not c.hidden
            }
            for sub in subcommands:
                if known:
                    assert sub in known | {"list"}, (name, sub, row)
            for each in [command, *subcommands.values()]:
                for option in _options(each):
                    long = _long(option)
                    assert not shortened(long, params), (name, long, shortened(long, params))
                    if option.is_flag:  # an action, not a value (`init --mode full` is one)
                        named = long in shown and long not in RUNS_THE_COMMAND
                        assert not named, (name, f"--{long}: the name of another command")
                        assert long not in actions, (name, f"--{long}: a subcommand")


def test_the_architecture_page_names_every_module_and_only_those() -> None:
    """docs/architecture.md's "One line per module" is the map: each module of `mdmem` is named
    in its package's part of it (top-level modules under Leaves or Top), and each name there
    is a module of that package."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## One line per module", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, str] = {}
    for block in re.split(r"\n(?=\*\*)", section):
        head = re.match(r"\*\*([\w/]+?)/?\*\*", block)
        if head:
            key = head.group(1) if block.startswith(f"**{head.group(1)}/**") else ""
            blocks[key] = blocks.get(key, "") + block
    package = ROOT / "mdmem"
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if path.name == "__init__.py" and len(rel.parts) > 1:
            continue  # a package is named by its folder
        where = rel.parts[0] if len(rel.parts) > 1 else ""
        block = blocks.get(where, blocks[""])  # (a small package is listed under Top)
        named = f"`{path.name}`" in block or f"`{rel.parent.name}/{path.name}`" in block
        assert named, f"docs/architecture.md does not name mdmem/{rel}"
    for where, block in blocks.items():
        root = package / where if where else package
        for name in re.findall(r"`([\w/]*\w+\.py)`", block):
            found = list(root.rglob(name.rsplit("/", 1)[-1]))
            assert found, f"docs/architecture.md names {where}/{name}, which is no module"


PIP_FROM_PYPI = re.compile(r"pip install (?:-\S+ )*['\"]?mdmem\b")
"""An install of mdmem from PyPI, where it is not published yet: pip answers "No matching
distribution found"."""
PUBLISHED = re.compile(r"[Oo]nce (?:mdmem is )?published[*,]*\s*$")


def test_no_page_or_message_installs_mdmem_from_pypi_before_it_is_published() -> None:
    """Every install a page or a message of the program tells a person to run works today
    (from the clone: ``pip install '.[extra]'``); ``pip install 'mdmem…'`` only under "once
    mdmem is published" (the README's and Getting started's last word on it)."""
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    sources += sorted((ROOT / "mdmem").rglob("*.py"))
    wrong = []
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for match in PIP_FROM_PYPI.finditer(text):
            before = text[max(0, match.start() - 60) : match.start()].rstrip("`* ")
            if not PUBLISHED.search(before):
                line = text.count("\n", 0, match.start()) + 1
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)}")
    assert not wrong, "installs from PyPI, where mdmem is not published:\n" + "\n".join(wrong)
