"""Property: a program write changes only what it writes. Every other byte stays as it was."""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.errors import ConflictError
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
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
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


# ---- acknowledged writes survive a person's saves (issue 31) ------------------------------------
#
# A generated edit script: rounds of (the person copies the file; the program makes one or two
# writes; the person saves the copy, one of their own lines changed or a line added, 0-120 ms
# later, in one of the three ways). Every save lands inside the window of the round's last write
# and changes only lines the program did not, so: every program write is in the file at the end,
# every person's change too, and right after each write returns the journal holds its bytes.
# Each example lives through real late-save windows (about 1 s): 1/8 of the profile's examples
# (12 under `ci` and `dev`, 250 under `deep`), at most ~20 s here.

WAYS = ("inplace", "rename", "old_inode")
WINDOW_MS = 600  # wide enough for a loaded 2-core machine to save inside it
HAND = (
    "# Memory\n\n## Facts\n\n- keep 0 person line\n- target 0 program line\n"
    "- keep 1 person line\n- target 1 program line\n- keep 2 person line\n\n## Patterns\n"
)


@st.composite
def save_round(draw):  # type: ignore[no-untyped-def]
    ops = draw(
        st.lists(
            st.one_of(st.just(("add", 0)), st.tuples(st.just("update"), st.integers(0, 1))),
            min_size=1,
            max_size=2,
        )
    )
    edit = draw(st.one_of(st.tuples(st.just("edit"), st.integers(0, 2)), st.just(("add", 0))))
    return ops, draw(st.sampled_from(WAYS)), edit, draw(st.sampled_from([0, 20, 60, 120]))


def _save(path: Path, way: str, data: bytes, handle: object) -> None:
    if way == "rename":
        tmp = path.with_name(".memory.md.save")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return
    editor = handle if way == "old_inode" else open(path, "r+b")  # noqa: SIM115
    with editor:  # type: ignore[attr-defined]
        editor.seek(0)  # type: ignore[attr-defined]
        editor.truncate()  # type: ignore[attr-defined]
        editor.write(data)  # type: ignore[attr-defined]


def _shows(path: Path, line: str, timeout: float = 5.0) -> bool:
    """Whether ``line`` reaches the path (a save into the replaced file, merged) in time."""
    end = time.monotonic() + timeout
    while line not in path.read_text().splitlines():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


def _acknowledged_in_journal(ws: Workspace) -> bool:
    """Right after a write returns (the guard held off by the file's lock): the bytes at the
    path, a program write's, are in the journal byte for byte."""
    with ws.files._locked("memory.md", "memory.md"):
        now = (ws.root / "memory.md").read_bytes()
        return any(
            v.read_bytes() == now for v in ws.files.versions("memory.md") if v.reason == "written"
        )


@settings(
    max_examples=max(8, settings().max_examples // 8),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
@given(script=st.lists(save_round(), min_size=1, max_size=3))
@example(
    script=[
        ([("update", 1), ("update", 1)], "inplace", ("edit", 2), 20),
        ([("update", 1), ("add", 0)], "inplace", ("add", 0), 0),
    ]
)
@example(  # the next copy was read before the save into the replaced file was merged
    script=[
        ([("add", 0)], "old_inode", ("edit", 2), 0),
        ([("add", 0)], "inplace", ("edit", 2), 0),
    ]
)
def test_saves_that_change_other_lines_never_remove_a_program_write(
    tmp_path: Path, script: list
) -> None:
    root = Path(tempfile.mkdtemp(prefix="s", dir=tmp_path))
    path = root / "memory.md"
    (root / "mdmem.toml").write_text(
        f'[embedding]\nmodel = ""\n[write]\nlate_save_ms = {WINDOW_MS}\n'
    )
    path.write_text(HAND)
    an_hour_ago = time.time() - 3600  # a file last saved long ago, not a save in progress
    os.utime(path, (an_hour_ago, an_hour_ago))
    ws = Workspace(root)
    targets = [e.id for e in ws.entries("memory.md") if e.text.startswith("target")]
    keep = [f"- keep {i} person line" for i in range(3)]
    updated: dict[int, str] = {}
    remembered: list[str] = []
    added: list[str] = []
    try:
        for r, (ops, way, (kind, i), delay_ms) in enumerate(script):
            handle = open(path, "r+b") if way == "old_inode" else None  # noqa: SIM115
            copy = path.read_text()
            writing = time.monotonic()  # the handle's file is replaced by the first write
            for n, (op, k) in enumerate(ops):
                if op == "update":
                    text = f"target {k} program line v{r}.{n}"
                    try:
                        ws.update(targets[k], text)
                    except ConflictError:  # it changed since read (a save): not acknowledged
                        continue
                    updated[k] = text
                else:
                    remembered.append(f"remembered in round {r}.{n}")
                    ws.remember(remembered[-1], type="fact")
                assert _acknowledged_in_journal(ws)
            if kind == "edit":
                copy = copy.replace(f"{keep[i]}\n", f"- keep {i} person line, edit {r}\n")
                keep[i] = f"- keep {i} person line, edit {r}"
            else:
                added.append(f"- added by the person in round {r}")
                copy = copy.replace("\n\n## Patterns", f"\n{added[-1]}\n\n## Patterns")
            acknowledged = time.monotonic()
            time.sleep(delay_ms / 1000)
            _save(path, way, copy.encode(), handle)
            # the premise: the save landed inside the window (a loaded machine may miss it);
            # a save into the old file, inside the window of the write that replaced it
            since = writing if way == "old_inode" else acknowledged
            assume(time.monotonic() - since < WINDOW_MS / 1000 - 0.1)
            if way == "old_inode":  # the person's next copy is read once their save is merged
                assert _shows(path, keep[i] if kind == "edit" else added[-1]), path.read_text()
        assert ws._w.writer.guard.wait(timeout=30)
    finally:
        ws.close()
    lines = [line.split(" <!--")[0] for line in path.read_text().splitlines()]
    for line in keep + added:
        assert lines.count(line) == 1, (line, lines)
    for k, text in updated.items():
        assert [x for x in lines if x.startswith(f"- target {k} ")] == [f"- {text}"], lines
    for text in remembered:
        assert lines.count(f"- {text}") == 1, (text, lines)
