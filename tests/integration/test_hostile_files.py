"""Hostile files: symlink loops, pathological nesting, lone CR line endings, internal folders.

Each is a reproduction of a reported defect (issue 10, "Hostile files") kept as a test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from test_safe_writes_property import PHRASE, PROPERTY, _insertion, markdown_file

from mdmem import FileProblem, UnsafePathError, Workspace
from mdmem.markdown.parse import NESTING_LIMIT, _parse, parse_document, split_lines
from mdmem.memory.scan import ALWAYS_SKIPPED
from mdmem.paths import name_problem, shown
from mdmem.workspace.wiring import SEARCH_SYNC_MAX_BYTES

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

    problems = {p.path: str(p) for p in ws.files._scan().problems}
    for name in ("loop.md", "a.md", "b.md"):
        assert problems[name] == f"{name}: symlink loop; skipped"
    assert "dirloop" not in problems  # not a Markdown name: skipped silently, like a dangling link

    snap = ws.files.all()
    assert "memory.md" in {d.path for d in snap.documents}
    report = ws.index.update()
    assert "loop.md: symlink loop; skipped" in {str(p) for p in report.problems}
    results = ws.search("Fly.io staging")
    assert results and results[0].path == "memory.md"
    assert "loop.md: symlink loop; skipped" in results.problems
    assert "loop.md: symlink loop; skipped" in ws.index.status().problems
    assert "Fly.io" in ws.build_context("where do deploys go").text

    for name in ("loop.md", "a.md", "dirloop/x.md"):
        with pytest.raises(FileProblem, match="symlink loop"):
            ws.files.read(name)
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
            ws.files._resolve(f"{folder}/x.md")


def test_cli_add_into_mdmem_folder_is_one_clear_line(ws: Workspace) -> None:
    result = cli(ws.root, "remember", "hidden", "--file", ".mdmem/x.md")
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
        ws.files.read("mac.md")
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


LINES = 40_000  # 2.1 MB


@pytest.mark.slow
def test_search_answers_while_a_big_file_waits_for_the_indexer(ws: Workspace) -> None:
    ws = keyword_only(ws)
    ws.remember("Deploys go to Fly.io staging")
    ws.index.update()
    big = ws.root / "notes" / "big.md"
    big.parent.mkdir()
    # twice the size a search indexes itself (SEARCH_SYNC_MAX_BYTES), so it waits whatever a
    # line's length: a bigger file takes the same path, only longer (6 MB, 120,000 lines, made
    # this the clean-clone run's third-longest test, 70 s, mostly SQLite inserts of its chunks)
    lines = [f"- imported note {i} about the quarterly zebra audit\n" for i in range(LINES)]
    big.write_text("# Import\n\n" + "".join(lines))
    assert big.stat().st_size > 2 * SEARCH_SYNC_MAX_BYTES

    started = time.perf_counter()
    results = ws.search("Fly.io staging", k=3)
    took = time.perf_counter() - started
    assert results[0].path == "memory.md"
    assert results.stale == ["notes/big.md"] and not results.fresh
    assert any("notes/big.md" in p and "mdmem index" in p for p in results.problems)
    print(f"search with a {big.stat().st_size / 1e6:.1f} MB file pending: {took:.2f} s")

    report = ws.index.update()  # what `mdmem index` or the watcher does
    assert "notes/big.md" in report.paths
    zebra = ws.search(f"zebra audit {LINES - 1}", k=1)
    assert zebra.fresh and zebra[0].path == "notes/big.md"
    assert zebra[0].citation == f"notes/big.md:{LINES + 2}"  # (the heading, a blank line)

    cli_run = cli(ws.root, "search", "zebra", "--json")
    assert cli_run.returncode == 0 and json.loads(cli_run.stdout)["fresh"]


# ---- file names that are not text: bytes that are not UTF-8, control characters, long names ---

BAD_NAMES = {  # the name on disk -> how every message shows it
    b"caf\xe9.md": "caf\\xe9.md",
    b"a\nb.md": "a\\nb.md",
    b"\x1b[31mred.md": "\\x1b[31mred.md",
    b"back\\slash\xff.md": "back\\\\slash\\xff.md",
}
LONG_NAME = "é" * 125 + ".md"  # 253 bytes: valid, long, and indexed


def _hostile_workspace(root: Path) -> Workspace:
    ws = keyword_only(Workspace.init(root, mode="full"))
    ws.remember("Deploys go to Fly.io staging")
    for name in BAD_NAMES:
        with open(os.path.join(os.fsencode(root), name), "wb") as handle:
            handle.write(b"- plain valid text about the quokka\n")
    (root / LONG_NAME).write_text("- the long-named note about the wombat\n")
    return ws


def _utf8_lines(text: str) -> list[str]:
    text.encode("utf-8")  # a message that cannot be printed is no message
    return text.splitlines()


@pytest.mark.slow
def test_cli_skips_names_that_are_not_text_and_names_them(tmp_path: Path) -> None:
    ws = _hostile_workspace(tmp_path / "ws")
    out = {}
    for command in (["index"], ["search", "wombat", "--json"], ["context", "deploy"], ["status"]):
        result = cli(ws.root, *command)
        assert result.returncode == 0, (command, result.stderr)
        assert "Traceback" not in result.stderr
        lines = _utf8_lines(result.stderr)
        for shown_name in BAD_NAMES.values():
            assert any(line.endswith(f"{shown_name}: file name is not valid UTF-8; skipped "
                                     "(rename it to index it)") or
                       line.endswith(f"{shown_name}: file name holds a control character or "
                                     "line break; skipped (rename it to index it)")
                       for line in lines), (command, shown_name, result.stderr)  # fmt: skip
        out[command[0]] = result.stdout
    assert [hit["path"] for hit in json.loads(out["search"])["hits"]] == [LONG_NAME]
    assert "Fly.io" in out["context"]
    assert not ws.search("quokka")  # the files with those names were never indexed


@pytest.mark.parametrize("name", [os.fsdecode(b"caf\xe9.md"), "a\nb.md", "x\x1b.md", "a\u2028.md"])
def test_a_name_that_is_not_text_is_never_written(ws: Workspace, name: str) -> None:
    with pytest.raises(FileProblem, match="use a name that is UTF-8 text on one line") as info:
        ws.remember("a memory no search would find", file=name)
    _utf8_lines(str(info.value))
    assert len(str(info.value).splitlines()) == 1
    assert not os.path.lexists(os.path.join(os.fsencode(ws.root), os.fsencode(name)))


def _unshown(text: str) -> bytes:
    """The bytes of a name from how messages show it (the inverse of ``paths.shown``)."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] != "\\":
            out += text[i].encode("utf-8")
            i += 1
            continue
        kind = text[i + 1]
        if kind in "\\ntr":
            out += {"\\": b"\\", "n": b"\n", "t": b"\t", "r": b"\r"}[kind]
            i += 2
        elif kind == "x":
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            assert kind == "u", text
            out += chr(int(text[i + 2 : i + 6], 16)).encode("utf-8", "surrogatepass")
            i += 6
    return bytes(out)


def _stem_ok(stem: bytes) -> bool:
    return b"/" not in stem and b"\0" not in stem and stem not in (b"", b".", b"..")


NAME_STEMS = st.one_of(
    st.binary(min_size=1, max_size=40),  # mostly not UTF-8
    st.text(st.characters(exclude_characters="/\0", codec="utf-8"), min_size=1, max_size=40).map(
        lambda text: text.encode("utf-8")
    ),  # control characters, line separators, combining marks, emoji...
    st.sampled_from(["é", "x", "数", "\u2028", "\x85", "\\"]).flatmap(
        lambda char: st.integers(1, 252 // len(char.encode())).map(lambda n: (char * n).encode())
    ),  # as long as a name can be (255 bytes with ".md")
).filter(_stem_ok)


@PROPERTY
@given(
    stems=st.lists(NAME_STEMS, min_size=1, max_size=4, unique=True),
    as_folder=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_every_file_name_is_indexed_or_named_and_the_rest_keeps_working(
    hostile_ws: Workspace, stems: list[bytes], as_folder: list[bool]
) -> None:
    """Each name a file's (``ex/<name>.md``) or a folder's (``ex/<name>/note.md``)."""
    ws = hostile_ws
    folder = os.path.join(os.fsencode(ws.root), b"ex")
    os.mkdir(folder)
    try:
        words = {}
        for i, (stem, in_folder) in enumerate(zip(stems, as_folder, strict=False)):
            name = stem[:252] + b".md"
            if in_folder and os.fsdecode(stem) not in ALWAYS_SKIPPED:  # (never read: by design)
                os.mkdir(os.path.join(folder, stem))
                name = stem + b"/note.md"
            words[name] = f"quokka{i}"
            with open(os.path.join(folder, name), "wb") as handle:
                handle.write(f"- the hostile note {words[name]}\n".encode())
        report = ws.index.update(embed=False)
        messages = [str(p) for p in report.problems]
        for name, word in words.items():
            rel = "ex/" + os.fsdecode(name)
            results = ws.search(word, mode="keyword")
            messages += list(results.problems)
            event("skipped" if name_problem(rel) else "indexed")
            if name_problem(rel) is None:  # a name that is text: indexed and cited by it
                assert [hit.path for hit in results] == [rel]
                assert rel in report.paths
            else:  # any other: named, losslessly, in one line; never in the index
                assert not results
                said = [m for m in messages if m.startswith(shown(rel) + ": file name ")]
                assert said, (rel, messages)
                assert _unshown(shown(rel)) == b"ex/" + name
                with pytest.raises(FileProblem, match="UTF-8 text on one line"):
                    ws.remember("never written", file=rel)
        context = ws.build_context("where do deploys go", budget_tokens=400)
        assert "Fly.io" in context.text
        messages += list(ws.index.status().problems)
        for message in messages:
            assert len(_utf8_lines(message)) == 1, message
    finally:
        shutil.rmtree(folder)
        ws.index.update(embed=False)


@pytest.fixture(scope="module")
def hostile_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """One workspace for every example (each makes and removes its own ``ex/`` folder)."""
    ws = keyword_only(Workspace.init(tmp_path_factory.mktemp("names") / "ws", mode="full"))
    ws.remember("Deploys go to Fly.io staging")
    yield ws
    ws.close()


def _wait(check, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.slow
def test_a_watcher_indexes_every_edit_past_a_name_that_is_not_text(tmp_path: Path) -> None:
    """It used to log `sync failed … will retry` forever and index no edit anywhere."""
    root = tmp_path / "ws"
    ws = _hostile_workspace(root)
    with open(root / "mdmem.toml", "a", encoding="utf-8") as handle:
        handle.write("\n[watch]\ndebounce_ms = 300\nheartbeat_seconds = 0.5\n")
    log = tmp_path / "watch.log"
    with log.open("w") as err:
        watcher = subprocess.Popen([str(BIN), "-w", str(root), "watch"], stderr=err)
    try:
        _wait(lambda: cli(root, "search", "Fly.io").returncode == 0, "the watcher never served")
        ws = Workspace.open(root)
        with open(os.path.join(os.fsencode(root), b"new\xe9.md"), "wb") as handle:
            handle.write(b"- a new note with a name that is not UTF-8\n")
        (root / "zebra.md").write_text("- The zebra crossing is on Elm Street\n")

        def answered() -> bool:  # searched while the watcher has heard of both changes
            results = ws.search("zebra crossing", mode="keyword")
            for line in [*results.stale, *results.problems]:
                assert len(_utf8_lines(line)) == 1, line
            return bool(results) and results[0].path == "zebra.md"

        _wait(answered, "the edit was never indexed")
        result = cli(root, "search", "zebra crossing")
        assert result.returncode == 0 and "zebra.md" in result.stdout, result.stderr
        assert "new\\xe9.md: file name is not valid UTF-8" in result.stderr
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
    said = log.read_text()
    assert "sync failed" not in said and "Traceback" not in said, said
    assert "caf\\xe9.md: file name is not valid UTF-8; skipped" in said


def test_the_memory_tool_lists_a_name_that_is_not_text_escaped(tmp_path: Path) -> None:
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand as View

    from mdmem.integrations.memory_tool import MdmemMemoryTool

    ws = _hostile_workspace(tmp_path / "ws")
    listing = MdmemMemoryTool(ws).view(View(command="view", path="/memories"))
    listing.encode("utf-8")  # what goes back to the model is text
    listed = {line.split("\t", 1)[1] for line in listing.splitlines()[1:]}
    assert {f"/memories/{name}" for name in [*BAD_NAMES.values(), LONG_NAME]} <= listed, listing
