"""Hostile files: symlink loops, pathological nesting, lone CR line endings, internal folders.

Each is a reproduction of a reported defect (issue 10, "Hostile files") kept as a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_safe_writes_property import PHRASE, PROPERTY, _insertion, markdown_file

from mdmem import FileProblem, UnsafePathError, Workspace
from mdmem.markdown.parse import NESTING_LIMIT, _parse, parse_document, split_lines
from mdmem.memory.scan import ALWAYS_SKIPPED

BIN = Path(sys.executable).parent / "mdmem"


def keyword_only(ws: Workspace) -> Workspace:
    """The same workspace with embeddings off: keyword search, no model load."""
    with open(ws.root / "mdmem.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nmodel = ""\n')
    return Workspace.open(ws.root)


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MDMEM_WORKSPACE"}
    return subprocess.run(
        [str(BIN), "-w", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


# ---- symlink loops ---------------------------------------------------------------------------


def _make_loops(root: Path) -> None:
    os.symlink("loop.md", root / "loop.md")  # ln -s loop.md loop.md
    os.symlink("b.md", root / "a.md")  # a.md -> b.md -> a.md
    os.symlink("a.md", root / "b.md")
    os.symlink("dirloop", root / "dirloop")  # a "folder" that is a loop


def test_symlink_loops_are_reported_and_skipped(ws: Workspace) -> None:
    ws = keyword_only(ws)
    _make_loops(ws.root)
    ws.remember("Deploys go to Fly.io staging")

    problems = {p.path: str(p) for p in ws.scan().problems}
    for name in ("loop.md", "a.md", "b.md"):
        assert problems[name] == f"{name}: symlink loop; skipped"
    assert "dirloop" not in problems  # not a Markdown name: skipped silently, like a dangling link

    snap = ws.all_documents()
    assert "memory.md" in {d.path for d in snap.documents}
    report = ws.sync()
    assert "loop.md: symlink loop; skipped" in {str(p) for p in report.problems}
    results = ws.search("Fly.io staging")
    assert results and results[0].path == "memory.md"
    assert "loop.md: symlink loop; skipped" in results.problems
    assert "loop.md: symlink loop; skipped" in ws.status().problems
    assert "Fly.io" in ws.build_context("where do deploys go").text

    for name in ("loop.md", "a.md", "dirloop/x.md"):
        with pytest.raises(FileProblem, match="symlink loop"):
            ws.read(name)
        with pytest.raises(FileProblem, match="symlink loop"):
            ws.remember("never written", file=name)
    assert os.readlink(ws.root / "loop.md") == "loop.md"  # the link itself is left alone


@pytest.mark.parametrize("command", [["status"], ["search", "Fly.io"], ["context", "deploy"],
                                     ["index"]])  # fmt: skip
def test_cli_reports_symlink_loops_without_a_traceback(ws: Workspace, command: list[str]) -> None:
    ws = keyword_only(ws)
    ws.remember("Deploys go to Fly.io staging")
    _make_loops(ws.root)
    result = cli(ws.root, *command)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "loop.md: symlink loop; skipped" in result.stderr
    assert "warning: loop.md" in result.stderr or "context: loop.md" in result.stderr


# ---- .mdmem/, .git/ and the other internal folders -------------------------------------------


@pytest.mark.parametrize(
    "name", [".mdmem/x.md", ".git/x.md", "notes/.git/x.md", "node_modules/pkg/x.md", ".hg/x.md"]
)
def test_internal_folders_are_refused_as_write_targets(ws: Workspace, name: str) -> None:
    with pytest.raises(UnsafePathError, match="never reads or indexes") as info:
        ws.remember("a memory nobody would find", file=name)
    assert name in str(info.value)
    assert not (ws.root / name).exists()


def test_every_always_skipped_folder_is_refused(ws: Workspace) -> None:
    for folder in sorted(ALWAYS_SKIPPED):
        with pytest.raises(UnsafePathError):
            ws.resolve(f"{folder}/x.md")


def test_cli_add_into_mdmem_folder_is_one_clear_line(ws: Workspace) -> None:
    result = cli(ws.root, "add", "hidden", "--file", ".mdmem/x.md")
    assert result.returncode == 1
    assert result.stderr.startswith("mdmem: error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


# ---- lone CR line endings (old Mac) ----------------------------------------------------------

LONE_CR = "# Memory\r\r## Facts\r\r- Deploys go to Fly.io\r- The CI runs\r  on GitHub Actions\r"


def test_lone_cr_parses_like_lf() -> None:
    cr = parse_document("memory.md", LONE_CR)
    lf = parse_document("memory.md", LONE_CR.replace("\r", "\n"))
    assert [(e.lines, e.text, e.type, e.heading_path) for e in cr.entries] == [
        ((5, 5), "Deploys go to Fly.io", "fact", ("Memory", "Facts")),
        ((6, 7), "The CI runs\non GitHub Actions", "fact", ("Memory", "Facts")),
    ]
    assert [(e.lines, e.text, e.id) for e in cr.entries] == [
        (e.lines, e.text, e.id) for e in lf.entries
    ]
    assert cr.headings == lf.headings
    assert cr.newline == "\r"
    assert "".join(split_lines(LONE_CR)) == LONE_CR
    assert split_lines("a\rb\r\nc\nd") == ["a\r", "b\r\n", "c\n", "d"]


def test_remember_into_a_lone_cr_file_keeps_its_endings(ws: Workspace) -> None:
    ws = keyword_only(ws)
    path = ws.root / "memory.md"
    path.write_bytes(LONE_CR.encode())
    entry = ws.remember("Staging database is on port 5433")
    data = path.read_bytes()
    assert b"\n" not in data
    assert data.count(b"## Facts") == 1
    assert data.startswith(LONE_CR.encode())  # appended under the last Facts item
    assert entry.lines == (8, 8) and entry.text == "Staging database is on port 5433"
    results = ws.search("staging database port", k=3)
    assert results[0].citation == "memory.md:8"
    ci = ws.search("GitHub Actions", k=3)
    assert ci[0].citation == "memory.md:6-7"


def test_invalid_utf8_in_a_lone_cr_file_names_its_line(ws: Workspace) -> None:
    (ws.root / "mac.md").write_bytes(b"# Notes\r- ok\r- caf\xe9 au lait\r")
    with pytest.raises(FileProblem) as info:
        ws.read("mac.md")
    assert info.value.line == 3 and "column 6" in str(info.value)


def _to_lone_cr(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r")


@PROPERTY
@given(content=markdown_file())
def test_lone_cr_files_parse_like_their_lf_twin(content: str) -> None:
    lf = content.replace("\r\n", "\n")
    cr = _to_lone_cr(content)
    a, b = parse_document("memory.md", lf), parse_document("memory.md", cr)
    assert [(e.lines, e.text, e.id, e.heading_path, e.kind) for e in a.entries] == [
        (e.lines, e.text, e.id, e.heading_path, e.kind) for e in b.entries
    ]
    assert a.headings == b.headings and dict(a.frontmatter) == dict(b.frontmatter)
    assert "".join(b.lines) == cr


@PROPERTY
@given(content=markdown_file(), memory=PHRASE)
def test_remember_into_lone_cr_files_only_inserts(
    tmp_path: Path, content: str, memory: str
) -> None:
    # one folder per example: a write's late-save window must not meet the next example's file
    root = Path(tempfile.mkdtemp(prefix="cr", dir=tmp_path))
    path = root / "memory.md"
    cr = _to_lone_cr(content)
    path.write_bytes(cr.encode())
    ws = Workspace(root)
    before = Counter(e.text for e in parse_document("memory.md", cr).entries)

    entry = ws.remember(f"{memory} remembered", type="fact", file="memory.md")

    new = path.read_bytes()
    chunk = _insertion(cr.encode(), new).decode()
    assert entry.id in chunk
    assert "\n" not in chunk or "\r" not in cr  # a file with no line ending yet gets LF
    doc = parse_document("memory.md", new.decode())
    assert Counter(e.text for e in doc.entries) - before == Counter({entry.text: 1})
    found = next(e for e in doc.entries if e.id == entry.id)
    assert found.lines == entry.lines
    assert split_lines(new.decode())[entry.start_line - 1][:2] in ("- ", "* ", "+ ")

    updated = ws.update(entry.id, importance=0.9)
    after = path.read_bytes().decode()
    assert ("\n" not in after or "\r" not in cr) and updated.lines == entry.lines
    old_lines, new_lines = split_lines(new.decode()), split_lines(after)
    changed = [i for i, (x, y) in enumerate(zip(old_lines, new_lines, strict=True)) if x != y]
    assert changed == [entry.start_line - 1]


# ---- parsing in linear time: the cut view parses like the whole file -------------------------

MARK = st.sampled_from(["-", "*", "+", "1.", "2.", "10.", "1)"])
ITEM_TEXT = st.sampled_from(
    ["alpha", "beta gamma", "**bold** x", "`code`", "[ ] task", "[x] done", "2026-11 note",
     "3.5 GB", "1. nested", "# h", "> q", "- x", "```", "<div>", "| a | b |", "[a]: /url 'ti",
     "tle'", "_x_", "数据库", "x <!-- mdmem id=m-1 type=fact -->", "===", "---", "", "a -> b"]
)  # fmt: skip
INDENT = st.sampled_from(["", "", "", "  ", "   ", "    ", "\t", "        "])


@st.composite
def runs_of_lines(draw) -> str:
    """Markdown full of runs: repeated items, nested items, text lines, fences, HTML."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["item", "item", "item", "text", "blank", "other"]))
        if kind == "item":
            line = f"{draw(INDENT)}{draw(MARK)} {draw(ITEM_TEXT)}"
        elif kind == "text":
            line = f"{draw(INDENT)}{draw(ITEM_TEXT)}"
        elif kind == "blank":
            line = ""
        else:
            line = draw(st.sampled_from(["# Facts", "## Archive", "```", "~~~", "<div>", "</div>",
                                         "> quote", "|---|---|", "Setext", "===", "***"]))  # fmt: skip
        lines += [line] * draw(st.integers(1, 5))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@PROPERTY
@given(text=st.one_of(runs_of_lines(), markdown_file()))
def test_cutting_runs_parses_exactly_like_the_whole_file(text: str) -> None:
    cut, whole = parse_document("memory.md", text), _parse("memory.md", text, cut=False)
    assert [
        (e.lines, e.text, e.id, e.heading_path, e.kind, e.type, e.checked) for e in cut.entries
    ] == [(e.lines, e.text, e.id, e.heading_path, e.kind, e.type, e.checked) for e in whole.entries]
    assert cut.headings == whole.headings and cut.problems == whole.problems


# ---- pathological nesting --------------------------------------------------------------------


def nested(levels: int) -> str:
    return "".join("  " * d + f"- level {d}\n" for d in range(levels))


TAIL = "\n# After\n\n- after item\n"


def test_a_list_nested_a_dozen_levels_no_longer_swallows_the_rest_of_the_file() -> None:
    doc = parse_document("deep.md", nested(12) + TAIL)  # markdown-it's default limit was 10
    assert [h.title for h in doc.headings] == ["After"]
    assert [(e.lines, e.text) for e in doc.entries][1:] == [((16, 16), "after item")]
    assert doc.problems == ()


@pytest.mark.parametrize("levels", [NESTING_LIMIT + 2, 3000])
def test_deep_lists_are_capped_with_a_warning_and_lose_nothing(levels: int) -> None:
    doc = parse_document("deep.md", nested(levels) + TAIL)
    first, after = doc.entries
    assert first.lines == (1, levels)  # every deeper line is text of the top item
    assert f"level {levels - 1}" in first.text
    assert after.text == "after item" and after.heading_path == ("After",)
    assert after.lines == (levels + 4, levels + 4)
    assert [h.title for h in doc.headings] == ["After"]
    (problem,) = doc.problems
    assert problem.path == "deep.md" and problem.line is not None
    assert problem.line == NESTING_LIMIT + 2  # the first line indented deeper than the cap
    assert "nested deeper than" in problem.message


def test_deep_blockquotes_are_capped_with_a_warning() -> None:
    text = "".join("> " * d + f"quote {d}\n" for d in range(1, 60)) + TAIL
    doc = parse_document("q.md", text)
    assert [h.title for h in doc.headings] == ["After"]
    assert doc.entries[-1].text == "after item"
    assert any("nested deeper than" in p.message for p in doc.problems)


def test_ordinary_nesting_gives_no_warning() -> None:
    text = "- a\n  - b\n    - c\n      - d\n        - e\n          - f\n> > > quote\n"
    assert parse_document("ok.md", text).problems == ()


# ---- a big file does not hold up searches of the rest ------------------------------------------


@pytest.mark.slow
def test_search_answers_while_a_big_file_waits_for_the_indexer(ws: Workspace) -> None:
    ws = keyword_only(ws)
    ws.remember("Deploys go to Fly.io staging")
    ws.sync()
    big = ws.root / "notes" / "big.md"
    big.parent.mkdir()
    lines = [f"- imported note {i} about the quarterly zebra audit\n" for i in range(120_000)]
    big.write_text("# Import\n\n" + "".join(lines))
    assert big.stat().st_size > 5_000_000

    started = time.perf_counter()
    results = ws.search("Fly.io staging", k=3)
    took = time.perf_counter() - started
    assert results[0].path == "memory.md"
    assert results.stale == ["notes/big.md"] and not results.fresh
    assert any("notes/big.md" in p and "mdmem index" in p for p in results.problems)
    print(f"search with a {big.stat().st_size / 1e6:.1f} MB file pending: {took:.2f} s")

    report = ws.sync()  # what `mdmem index` or the watcher does
    assert "notes/big.md" in report.paths
    zebra = ws.search("zebra audit 119999", k=1)
    assert zebra.fresh and zebra[0].path == "notes/big.md"
    assert zebra[0].citation == "notes/big.md:120002"

    cli_run = cli(ws.root, "search", "zebra", "--json")
    assert cli_run.returncode == 0 and json.loads(cli_run.stdout)["fresh"]
