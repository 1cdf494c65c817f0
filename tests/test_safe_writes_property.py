"""Property: a program write changes only what it writes. Every other byte stays as it was."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.markdown.parse import parse_document

WORDS = st.sampled_from(
    ["alpha", "beta", "数据库", "用户", "emoji 🎉", "*bold*", "`code`", "tab\there", "x_y", "a#b",
     "1.5", "naïve", "trailing ", "UPPER", "[link](x)"]
)  # fmt: skip
PHRASE = st.lists(WORDS, min_size=1, max_size=5).map(" ".join)
HEADINGS = st.sampled_from(
    ["Preferences", "Facts", "Patterns", "Skills", "Notes", "Archive", "Misc ✨", "Known facts"]
)


@st.composite
def block(draw) -> list[str]:
    kind = draw(
        st.sampled_from(
            ["heading", "item", "item", "nested", "check", "para", "code", "table", "html",
             "quote", "blank", "ordered"]
        )
    )  # fmt: skip
    if kind == "heading":
        return [f"{'#' * draw(st.integers(1, 4))} {draw(HEADINGS)}"]
    if kind == "item":
        return [f"{draw(st.sampled_from('-*+'))} {draw(PHRASE)}"]
    if kind == "nested":
        return [f"- {draw(PHRASE)}", f"  - {draw(PHRASE)}", f"\t- {draw(PHRASE)}"]
    if kind == "check":
        return [f"- [{draw(st.sampled_from(' x'))}] {draw(PHRASE)}"]
    if kind == "ordered":
        return [f"1. {draw(PHRASE)}", f"2. {draw(PHRASE)}"]
    if kind == "para":
        return [draw(PHRASE), draw(PHRASE)] if draw(st.booleans()) else [draw(PHRASE)]
    if kind == "code":
        return ["```", f"- {draw(PHRASE)}", "```"]
    if kind == "table":
        return ["| a | b |", "|---|---|", f"| {draw(PHRASE)} | x |"]
    if kind == "html":
        return ["<div>", draw(PHRASE), "</div>"]
    if kind == "quote":
        return [f"> {draw(PHRASE)}"]
    return [""]


@st.composite
def markdown_file(draw) -> str:
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["---", f"title: {draw(st.sampled_from(['x', 'Memory']))}", "---"]
    for b in draw(st.lists(block(), max_size=14)):
        lines += b
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(lines)
    if lines and draw(st.booleans()):
        text += newline
    return text


def _insertion(old: bytes, new: bytes) -> bytes:
    """The one contiguous chunk ``new`` adds to ``old``; fails if anything else changed."""
    prefix = 0
    while prefix < len(old) and prefix < len(new) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < len(old) - prefix
        and suffix < len(new) - prefix
        and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]
    ):
        suffix += 1
    assert prefix + suffix == len(old), "bytes outside the inserted entry changed"
    return new[prefix : len(new) - suffix]


def _texts(text: str, path: str = "memory.md") -> Counter[str]:
    return Counter(e.text for e in parse_document(path, text).entries)


PROPERTY = settings(  # how many examples: the profile (tests/conftest.py)
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(
    content=markdown_file(),
    memory=PHRASE,
    type_=st.sampled_from(["preference", "fact", "pattern", "skill"]),
)
def test_remember_only_inserts(tmp_path: Path, content: str, memory: str, type_: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="p", dir=tmp_path))  # one per example (late-save windows)
    path = root / "memory.md"
    path.write_bytes(content.encode())
    ws = Workspace(root)
    old_texts = _texts(content)

    entry = ws.remember(f"{memory} remembered", type=type_, file="memory.md")

    new = path.read_bytes()
    chunk = _insertion(content.encode(), new).decode()
    assert entry.id in chunk and memory in chunk
    assert entry.text == f"{memory} remembered".strip()
    assert entry.type == type_ and not entry.archived
    # Nothing the person wrote was absorbed into, or split by, the new entry.
    new_texts = _texts(new.decode())
    assert new_texts - old_texts == Counter({entry.text: 1})
    assert old_texts - new_texts == Counter()
    again = parse_document("memory.md", new.decode())
    assert next(e for e in again.entries if e.id == entry.id).type == type_


@PROPERTY
@given(content=markdown_file(), importance=st.sampled_from([0.1, 0.55, 1.0]))
def test_update_metadata_changes_only_that_line(
    tmp_path: Path, content: str, importance: float
) -> None:
    root = Path(tempfile.mkdtemp(prefix="u", dir=tmp_path))  # one per example
    path = root / "memory.md"
    path.write_bytes(content.encode())
    ws = Workspace(root)
    entry = ws.remember("target entry", type="fact", file="memory.md")
    before = path.read_bytes().decode()

    updated = ws.update(entry.id, importance=importance)

    after = path.read_bytes().decode()
    old_lines, new_lines = before.split("\n"), after.split("\n")
    assert len(old_lines) == len(new_lines)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert changed == [entry.start_line - 1]
    assert updated.importance == importance and updated.text == "target entry"


@PROPERTY
@given(content=markdown_file(), replacement=PHRASE)
def test_supersede_archives_and_keeps_everything_else(
    tmp_path: Path, content: str, replacement: str
) -> None:
    root = Path(tempfile.mkdtemp(prefix="s", dir=tmp_path))  # one per example
    path = root / "memory.md"
    path.write_bytes(content.encode())
    ws = Workspace(root)
    old = ws.remember("the old truth", type="fact", file="memory.md")
    before = _texts(path.read_bytes().decode())

    new = ws.supersede(old.id, by=f"{replacement} new truth")

    doc = parse_document("memory.md", path.read_bytes().decode())
    after = Counter(e.text for e in doc.entries)
    assert after - before == Counter({new.text: 1})
    assert before - after == Counter()  # the old entry is still there, archived
    archived = [e for e in doc.entries if e.id == old.id]
    assert len(archived) == 1 and archived[0].archived
    assert archived[0].meta["superseded_by"] == new.id
    assert not new.archived and new.meta["supersedes"] == old.id
