"""`mdmem import` holds to the bad-input rule for bytes that are not UTF-8: the record holding
them is named (file:line, which byte, what to do) and skipped, as other bad records are, never
imported with U+FFFD in place of the bytes and no word; and json's messages read as English
("Unterminated string starting at column 29", not "… starting at at column 29")."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.integrations.importers import import_path, read_conversations


def _events(ws: Workspace, path: str) -> list[tuple[str, str]]:
    return [(e.action, e.text) for e in ws.sessions.record(Path(path).stem).events]


def _all_text(root: Path) -> str:
    return "".join(
        p.read_text(encoding="utf-8") for p in root.rglob("*.md") if ".mdmem" not in p.parts
    )


def test_a_jsonl_line_that_is_not_utf8_is_named_and_skipped(ws: Workspace, tmp_path: Path) -> None:
    export = tmp_path / "chat.jsonl"
    lines = [
        json.dumps({"role": "user", "content": "Where is the invoice archive?"}).encode(),
        b'{"role": "assistant", "content": "In the caf\xe9 folder"}',  # Latin-1, not UTF-8
        json.dumps({"role": "user", "content": "Thanks"}).encode(),
    ]
    export.write_bytes(b"\n".join(lines) + b"\n")
    report = import_path(ws, export, source="jsonl")
    assert [str(p) for p in report.problems] == [
        f"{export}:2: not UTF-8 text (byte 0xe9 at column 45): save the file as UTF-8 and "
        "import it again; skipped"
    ]
    [outcome] = report.outcomes
    assert _events(ws, outcome.path) == [
        ("user", "Where is the invoice archive?"),
        ("user", "Thanks"),
    ]
    assert "\ufffd" not in _all_text(ws.root)


def test_a_conversation_with_bytes_that_are_not_utf8_is_named_and_skipped(
    ws: Workspace, tmp_path: Path
) -> None:
    """A ChatGPT export is one JSON array: the conversation holding the bad line is skipped,
    named by that line; the others come in."""

    def conversation(n: int, text: str) -> str:
        node = {
            "id": "m1",
            "parent": None,
            "children": [],
            "message": {
                "id": "m1",
                "author": {"role": "user"},
                "create_time": 1767261600 + n,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
        body = {
            "title": f"Chat {n}",
            "id": f"conv-{n}",
            "create_time": 1767261600 + n,
            "mapping": {"m1": node},
            "current_node": "m1",
        }
        return json.dumps(body, indent=1)

    first, second = conversation(1, "Deploys go to staging first"), conversation(2, "BAD")
    data = ("[\n" + first + ",\n" + second + "\n]\n").encode()
    data = data.replace(b'"BAD"', b'"r\xc3sum\xe9"')
    export = tmp_path / "conversations.json"
    export.write_bytes(data)
    at = data.index(b"\xc3")
    line, column = data[:at].count(b"\n") + 1, at - data.rfind(b"\n", 0, at)
    report = import_path(ws, export, source="chatgpt")
    assert [str(p) for p in report.problems] == [
        f"{export}:{line}: conversation 2: not UTF-8 text (byte 0xc3 at column {column}): save "
        "the "
        "file as UTF-8 and import it again; skipped"
    ]
    assert [o.title for o in report.outcomes] == ["Chat 1"]
    assert "\ufffd" not in _all_text(ws.root)


def test_json_messages_do_not_double_a_word(ws: Workspace, tmp_path: Path) -> None:
    export = tmp_path / "chat.jsonl"
    export.write_text(
        '{"role": "user", "content": "fine"}\n'
        '{"role": "user", "content": "a\ttab"}\n'  # a raw tab inside a string
        '{"role": "user", "content": "cut off'  # the file ends inside the string
    )
    report = import_path(ws, export, source="jsonl")
    assert [str(p) for p in report.problems] == [
        f"{export}:2: not JSON (Invalid control character at column 31); skipped",
        f"{export}:3: not JSON (Unterminated string starting at column 29); skipped",
    ]
    broken = tmp_path / "conversations.json"
    broken.write_text('[\n{"title": "x", "mapping": {}}, \n{"title": "unterminated\n')
    report = import_path(ws, broken, source="chatgpt")
    assert all(" at at " not in str(p) and not str(p).endswith(" at") for p in report.problems)
    assert [str(p) for p in report.problems][-1] == (
        f"{broken}:3: broken JSON: Invalid control character at column 24; skipped"
    )
    broken.write_text('[\n{"title": "x", "mapping": {}}, \n{"title": "unterminated')
    report = import_path(ws, broken, source="chatgpt")
    assert [str(p) for p in report.problems][-1] == (
        f"{broken}:3: broken JSON: Unterminated string starting at column 11; skipped"
    )


# ---- over generated files ------------------------------------------------------------------

BAD_BYTES = st.sampled_from([b"\xff", b"\xe9", b"\xc3(", b"\xed\xa0\x80", b"\xf0\x9f\x98"])
TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1
).filter(lambda t: t.strip())


@given(
    texts=st.lists(TEXT, min_size=1, max_size=8),
    bad=st.dictionaries(st.integers(0, 7), st.tuples(BAD_BYTES, st.integers(0, 40)), max_size=3),
)
@example(texts=["a", "b"], bad={1: (b"\xff", 0)})
def test_every_bad_line_is_named_and_every_good_one_read_exactly(
    tmp_path_factory, texts: list[str], bad: dict[int, tuple[bytes, int]]
) -> None:
    """Each line with bytes that are not UTF-8 is reported by its number and skipped; every
    other line's text comes through exactly (a U+FFFD in the source stays; none is added)."""
    folder = tmp_path_factory.mktemp("export")
    lines: list[bytes] = []
    broken: set[int] = set()
    for n, text in enumerate(texts):
        line = json.dumps({"role": "user", "content": text}, ensure_ascii=False).encode()
        if n in bad:
            junk, at = bad[n]
            cut = len(line) - 2 - min(at, len(line) - 30 if len(line) > 30 else 0)
            line = line[:cut] + junk + line[cut:]  # inside the content string
            broken.add(n + 1)
        lines.append(line)
    export = folder / "chat.jsonl"
    export.write_bytes(b"\n".join(lines) + b"\n")
    problems: list = []
    conversations = list(read_conversations(export, "jsonl", problems.append))
    assert {p.line for p in problems} == broken
    assert all("not UTF-8 text" in p.reason for p in problems)
    read = [t.text for c in conversations for t in c.turns]
    assert read == [t for n, t in enumerate(texts, 1) if n not in broken and t.strip()]


def test_an_export_with_no_conversations_is_a_known_format(ws: Workspace, tmp_path: Path) -> None:
    """``conversations.json`` holding ``[]`` (an account with no chats) is an export of 0
    conversations, not "not a known format"; ``[[]]`` or ``[1]`` still is none."""
    for n, text in enumerate(["[]", "[]\n", " [ \n ] ", "\ufeff[]"]):
        export = tmp_path / f"e{n}" / "conversations.json"
        export.parent.mkdir()
        export.write_text(text, encoding="utf-8")
        report = import_path(ws, export)
        assert (report.outcomes, report.problems) == ((), ()), text
        assert report.summary().startswith("import: 0 conversations")
    for text in ("[[]]", "[1]", "[]]"):
        bad = tmp_path / "bad" / text.replace("[", "a").replace("]", "b") / "conversations.json"
        bad.parent.mkdir(parents=True)
        bad.write_text(text, encoding="utf-8")
        (problem,) = import_path(ws, bad).problems
        assert "not a known format" in str(problem), text
