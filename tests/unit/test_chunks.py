"""Chunks: every line findable, long units split with overlap, context in the embedded text."""

from __future__ import annotations

import itertools

from mdmem.index.chunks import MAX_CHARS, chunk_document
from mdmem.index.fts import fts_query, segment
from mdmem.markdown.parse import parse_document


def test_entries_and_non_entry_blocks_cover_the_file() -> None:
    text = (
        "# Runbook\n\n## Deploy\n- Build the image\n\n```bash\nfly deploy --remote-only\n```\n\n"
        "| env | url |\n|---|---|\n| staging | s.example |\n"
    )
    chunks = chunk_document(parse_document("notes/runbook.md", text))
    kinds = [(c.kind, c.start_line, c.end_line) for c in chunks]
    assert kinds == [("item", 4, 4), ("block", 6, 12)]
    block = chunks[1]
    assert "fly deploy" in block.text and "staging" in block.text
    assert block.heading == "Runbook > Deploy"
    assert block.embed_text.startswith("Runbook > Deploy\n")  # the file's title, not its name


def test_long_entries_split_at_lines_with_overlap_and_true_line_numbers() -> None:
    lines = [f"  line {i} " + "word " * 30 for i in range(40)]
    text = "## Facts\n- start of a very long entry\n" + "\n".join(lines) + "\n"
    chunks = chunk_document(parse_document("memory.md", text))
    assert len(chunks) > 2
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    assert chunks[0].start_line == 2 and chunks[-1].end_line == 42
    for one, two in itertools.pairwise(chunks):
        assert two.start_line == one.end_line  # one line of overlap
    assert {c.type for c in chunks} == {"fact"}


def test_session_chunks_carry_date_session_and_agent() -> None:
    text = "---\nagent: coder\nstarted: 2026-11-17T10:15:02\n---\n# Session: PDF\n\n## Events\n- yes, on Tuesday\n"
    chunk = chunk_document(parse_document(".sessions/20261117_101502_pdf.md", text))[0]
    assert chunk.session == "20261117_101502_pdf" and chunk.agent == "coder"
    assert chunk.created == "2026-11-17"
    assert chunk.embed_text == "Session: PDF > Events · 17 November 2026\nyes, on Tuesday"


def test_japanese_words_stay_whole() -> None:
    assert "バックアップ" in segment("データベースのバックアップ").split()
    assert "会議" in segment("明日の会議は東京で").split()
    assert fts_query("バックアップ") == '"バックアップ"'


def test_html_comments_alone_are_not_chunks() -> None:
    from mdmem.index.chunks import chunk_document
    from mdmem.markdown.parse import parse_document

    doc = parse_document(
        "world_state.md",
        "# World\n\n<!-- a note for people -->\n\n## Env\n- **db**: 5433\n\n<div>kept</div>\n",
    )
    texts = [c.text for c in chunk_document(doc)]
    assert texts == ["**db**: 5433", "<div>kept</div>"]
