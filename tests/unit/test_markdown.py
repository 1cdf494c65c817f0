"""The Markdown model: entries with exact line ranges, heading paths, types and metadata."""

from __future__ import annotations

from mdmem.markdown.parse import parse_document

DOC = """\
---
title: Memory
tags: [a, b]
---
# Memory

## Preferences
- Dark mode everywhere <!-- mdmem id=m-0000000001 type=preference importance=0.8 created=2026-11-20 source=20261120_101010_x -->
- Tabs\tnot spaces
  in Makefiles only
- Parent item
  - nested child
    - grandchild

## Facts

The API runs on port 8000.
It is behind nginx.

```python
- not an entry
```

| a | b |
|---|---|
| - no | entry |

<div>
- html is content
</div>

### Deep
* 数据库是 PostgreSQL 16 🐘

## Archive
- Old fact <!-- mdmem id=m-0000000002 type=fact superseded_by=m-0000000001 -->
"""


def _by_text(doc):
    return {e.text.split("\n")[0]: e for e in doc.entries}


def test_entries_have_exact_line_ranges_and_heading_paths():
    doc = parse_document("memory.md", DOC)
    assert doc.frontmatter == {"title": "Memory", "tags": ["a", "b"]}
    entries = _by_text(doc)
    assert set(entries) == {
        "Dark mode everywhere",
        "Tabs\tnot spaces",
        "Parent item",
        "The API runs on port 8000.",
        "数据库是 PostgreSQL 16 🐘",
        "Old fact",
    }
    assert entries["Dark mode everywhere"].lines == (8, 8)
    assert entries["Tabs\tnot spaces"].lines == (9, 10)
    assert entries["Tabs\tnot spaces"].text == "Tabs\tnot spaces\nin Makefiles only"
    assert entries["Parent item"].lines == (11, 13)
    assert "nested child" in entries["Parent item"].text
    assert entries["The API runs on port 8000."].lines == (17, 18)
    assert entries["The API runs on port 8000."].kind == "paragraph"
    assert entries["数据库是 PostgreSQL 16 🐘"].heading_path == ("Memory", "Facts", "Deep")
    assert entries["Dark mode everywhere"].heading_path == ("Memory", "Preferences")


def test_types_come_from_metadata_then_heading_then_file():
    doc = parse_document("memory.md", DOC)
    entries = _by_text(doc)
    assert entries["Dark mode everywhere"].type == "preference"
    assert entries["Tabs\tnot spaces"].type == "preference"  # from "## Preferences"
    assert entries["数据库是 PostgreSQL 16 🐘"].type == "fact"  # "### Deep" under "## Facts"
    assert parse_document("learnings.md", "- use uv\n").entries[0].type == "skill"
    assert parse_document("notes/x.md", "- a thought\n").entries[0].type == "note"
    assert parse_document("learnings.md", "## Patterns\n- retry\n").entries[0].type == "pattern"


def test_metadata_is_parsed_and_hand_written_entries_get_defaults():
    doc = parse_document("memory.md", DOC)
    entries = _by_text(doc)
    program = entries["Dark mode everywhere"]
    assert program.id == "m-0000000001"
    assert program.importance == 0.8
    assert program.created == "2026-11-20"
    assert program.source == "20261120_101010_x"
    assert program.written_by_program
    hand = entries["Tabs\tnot spaces"]
    assert hand.importance == 0.5 and hand.created is None and hand.meta == {}
    assert hand.id.startswith("h-")
    assert not hand.written_by_program


def test_archive_section_and_superseded_marker_archive_entries():
    entries = _by_text(parse_document("memory.md", DOC))
    assert entries["Old fact"].archived
    assert entries["Old fact"].type == "fact"
    assert not entries["Dark mode everywhere"].archived


def test_crlf_and_lf_give_the_same_entries_and_lines():
    lf = parse_document("memory.md", DOC)
    crlf = parse_document("memory.md", DOC.replace("\n", "\r\n"))
    assert [(e.lines, e.text, e.type, e.id) for e in lf.entries] == [
        (e.lines, e.text, e.type, e.id) for e in crlf.entries
    ]
    assert crlf.newline == "\r\n" and lf.newline == "\n"


def test_files_without_frontmatter_and_thematic_breaks():
    doc = parse_document("n.md", "---\n\n- not frontmatter, a rule above\n")
    assert doc.frontmatter == {}
    assert [e.lines for e in doc.entries] == [(3, 3)]
    assert parse_document("e.md", "").entries == ()


def test_hand_edit_of_text_keeps_the_metadata():
    before = "- Uses Postgres 15 <!-- mdmem id=m-00000000aa importance=0.9 -->\n"
    after = "- Uses Postgres 16, upgraded by hand <!-- mdmem id=m-00000000aa importance=0.9 -->\n"
    one = parse_document("memory.md", before).entries[0]
    two = parse_document("memory.md", after).entries[0]
    assert one.id == two.id == "m-00000000aa"
    assert two.text == "Uses Postgres 16, upgraded by hand"
    assert two.importance == 0.9


def test_checkboxes_and_ordered_lists():
    doc = parse_document("task_process.md", "## TODO\n- [x] done\n- [ ] open\n1. first\n")
    assert [(e.text, e.checked) for e in doc.entries] == [
        ("done", True),
        ("open", False),
        ("first", None),
    ]


def test_malformed_frontmatter_is_a_problem_with_a_line_and_the_body_still_parses():
    text = "---\ntitle: ok\ntags: [unclosed\n---\n# H\n- still here\n"
    doc = parse_document("bad.md", text)
    assert doc.frontmatter == {}
    assert len(doc.problems) == 1
    problem = doc.problems[0]
    assert problem.path == "bad.md" and problem.line in (3, 4)
    assert "frontmatter" in problem.message
    assert [e.text for e in doc.entries] == ["still here"]
    assert doc.entries[0].lines == (6, 6)


def test_metadata_values_with_spaces_round_trip():
    from mdmem.markdown.entries import format_meta, parse_meta

    meta = {"id": "m-1", "note": 'said "hi" there', "importance": 0.75}
    comment = format_meta(meta)
    assert comment.startswith("<!-- mdmem ") and comment.endswith(" -->")
    body = comment[len("<!-- mdmem") : -len("-->")]
    assert parse_meta(body) == {"id": "m-1", "importance": "0.75", "note": 'said "hi" there'}
