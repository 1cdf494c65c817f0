"""File-level context on any layout: frontmatter title, date, participants and tags, and a date
in the file name, in the embedded text (as words) and in a keyword column of their own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mdmem import Workspace
from mdmem.index.chunks import chunk_document
from mdmem.index.sqlite.db import SCHEMA_VERSION
from mdmem.markdown.parse import parse_document

BULLETS = (
    "---\nsession: 1\ndate: 2023-05-08T13:56:00\nspeakers: [Caroline, Melanie]\n---\n"
    "- **Caroline** [D1:3]: I went to a LGBTQ support group yesterday\n"
    "- **Melanie** [D1:4]: That's great, how was it?\n"
)
STEM = "20230508_135600_locomo-conv-26-s1"


def test_a_file_without_headings_gets_title_date_in_words_and_speakers() -> None:
    """Before: the header was the raw stem, the date left out (the stem has the year), the
    speakers read by neither side."""
    chunks = chunk_document(parse_document(f".sessions/{STEM}.md", BULLETS))
    header = chunks[0].embed_text.split("\n")[0]
    assert header == "locomo conv 26 s1 · 8 May 2023 · Caroline, Melanie"
    assert STEM not in chunks[0].embed_text
    assert chunks[0].context == header  # the keyword side gets the same, in its own column
    assert chunks[0].created == "2023-05-08"


def test_a_date_in_the_file_name_is_context_but_not_the_creation_date() -> None:
    text = "- Standup moved to 9:30\n"
    chunk = chunk_document(parse_document("notes/2024-02-29-standup.md", text))[0]
    assert chunk.embed_text == "standup · 29 February 2024\nStandup moved to 9:30"
    assert chunk.created is None  # (first seen: the file name is not a claim about the entry)
    only_date = chunk_document(parse_document("journal/20240229.md", text))[0]
    assert only_date.embed_text.startswith("29 February 2024\n")
    not_a_date = chunk_document(parse_document("notes/20241340-x.md", text))[0]
    assert not_a_date.embed_text.startswith("20241340 x\n")


def test_participants_and_tags_as_lists_or_strings_kept_short() -> None:
    names = ", ".join(f"P{i}" for i in range(10))
    text = f"---\ntitle: Retro\nattendees: {names}\ntags: [planning, q3]\n---\n- Ship smaller\n"
    chunk = chunk_document(parse_document("notes/retro.md", text))[0]
    assert chunk.embed_text.split("\n")[0] == (
        "Retro · P0, P1, P2, P3, P4, P5 · planning, q3"  # at most six names
    )
    assert chunk.context == "Retro · P0, P1, P2, P3, P4, P5 · planning, q3"


def test_headings_that_already_say_it_are_not_repeated() -> None:
    text = (
        "---\nstarted: 2023-05-08T13:56:00\nspeakers: [Caroline, Melanie]\n---\n"
        "# Session 1: Caroline and Melanie\n\n## 1:56 pm on 8 May, 2023\n\n"
        "- **Caroline**: Hey Mel! <!-- mdmem id=D1:1 -->\n"
    )
    chunk = chunk_document(parse_document(".sessions/20230508_135600_session-1.md", text))[0]
    assert chunk.embed_text == (
        "Session 1: Caroline and Melanie > 1:56 pm on 8 May, 2023\n**Caroline**: Hey Mel!"
    )
    assert chunk.context == ""  # the title is the first heading, which has its own column


def test_task_state_lines_are_bookkeeping_not_knowledge() -> None:
    text = "# Task: (none yet)\n\n## State\n- Phase: idle\n- Pointer: 0\n\n## TODO\n- Write it\n"
    chunks = chunk_document(parse_document("task_process.md", text))
    state = [(c.text, c.type, c.importance) for c in chunks if c.heading.endswith("State")]
    assert state == [("Phase: idle", "state", 0.0), ("Pointer: 0", "state", 0.0)]
    todo = next(c for c in chunks if c.text == "Write it")
    assert todo.type != "state" and todo.importance > 0
    elsewhere = chunk_document(parse_document("notes/x.md", "## State\n- Phase: idle\n"))[0]
    assert elsewhere.type != "state"  # only the task file's State section


def _keyword_workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    (root / ".sessions").mkdir(parents=True)
    (root / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    return Workspace.open(root)


def test_the_keyword_side_finds_speakers_and_dates_in_their_own_column(tmp_path: Path) -> None:
    ws = _keyword_workspace(tmp_path)
    (ws.root / ".sessions" / f"{STEM}.md").write_text(BULLETS)
    (ws.root / "notes.md").write_text("- Melanie likes pottery\n")
    hits = ws.search("Melanie", k=5, mode="keyword")
    # the name in a chunk's own text outranks the same name only in its file's context
    assert [h.text for h in hits[:2]] == [
        "Melanie likes pottery",
        "**Melanie** [D1:4]: That's great, how was it?",
    ]
    assert BULLETS.split("\n")[5][2:] in {h.text for h in hits}  # by its context alone
    may = ws.search("support group in May 2023", k=1, mode="keyword")
    assert may[0].path == f".sessions/{STEM}.md"
    dated = {h.text for h in ws.search("may 2023", k=5, mode="keyword")}
    assert "Melanie likes pottery" not in dated and len(dated) == 2
    ws.close()


def test_an_index_of_schema_2_gains_the_context_column(tmp_path: Path) -> None:
    """As version 2 left it: a two-column keyword table, no context column, chunker 5."""
    ws = _keyword_workspace(tmp_path)
    (ws.root / ".sessions" / f"{STEM}.md").write_text(BULLETS)
    ws.index.update()
    db = ws.files._state_dir / "index.db"
    ws.close()
    conn = sqlite3.connect(db)
    conn.executescript(
        "DROP TABLE chunks_fts;"
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, heading, "
        "tokenize='porter unicode61 remove_diacritics 2');"
        "INSERT INTO chunks_fts(rowid, text, heading) SELECT rowid, text, heading FROM chunks;"
        "ALTER TABLE chunks DROP COLUMN context;"
        "UPDATE meta SET value = '5+' || substr(value, 3) WHERE key = 'chunker_version';"
        "UPDATE chunks SET id = 'v5' || id;"  # (chunk ids include the chunker version)
        "PRAGMA user_version = 2;"
    )
    conn.close()
    ws = Workspace.open(ws.root)
    assert [h.text[:14] for h in ws.search("LGBTQ", k=1, mode="keyword")] == ["**Caroline** ["]
    assert ws.index._backend.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    found = ws.search("Caroline May 2023", k=5, mode="keyword")  # re-chunked: context is back
    assert {h.text[:13] for h in found} == {"**Caroline** ", "**Melanie** ["}
    ws.close()


def test_a_session_turn_is_embedded_with_the_turn_before_it() -> None:
    """A short reply means what it answers: the vector side gets the turn before it, the
    keyword side only the turn's own words; appending a turn re-embeds no earlier one."""
    path = f".sessions/{STEM}.md"
    first, second = chunk_document(parse_document(path, BULLETS))
    header = first.embed_text.split("\n")[0]
    assert first.embed_text == f"{header}\n{first.text}"
    assert second.embed_text == f"{header}\n{first.text}\n{second.text}"
    assert second.text == "**Melanie** [D1:4]: That's great, how was it?"
    longer = chunk_document(parse_document(path, BULLETS + "- **Caroline** [D1:5]: Yes!\n"))
    assert [c.id for c in longer[:2]] == [first.id, second.id]
    assert longer[2].embed_text.endswith(f"\n{second.text}\n**Caroline** [D1:5]: Yes!")
    long = BULLETS.replace("yesterday", "yesterday " + "and talked " * 100)
    turn, reply = chunk_document(parse_document(path, long))
    cut = reply.embed_text.split("\n")[1]
    assert 300 < len(cut) <= 400 and turn.text.startswith(cut + " ")  # cut at a word
    notes = chunk_document(parse_document("notes/facts.md", "- Deploys go to eu-west\n- Db: pg\n"))
    assert notes[1].embed_text.endswith("\nDb: pg") and "eu-west" not in notes[1].embed_text
