"""The keyword terms of a chunk and of a query, exactly as the SQLite index makes them.

Both backends must score the same words the same way, so the terms are taken from SQLite's own
FTS5 tokenizer (``porter unicode61 remove_diacritics 2``, after the same CJK segmentation), run
on an in-memory contentless table and read back through ``fts5vocab``: stemming, diacritics
and Unicode rules cannot drift between the two sides. PostgreSQL gets them as a ready
``tsvector`` (no text search configuration touches them, like ``simple``), one weight label per
column (A text, B heading, C context) so BM25 can weight the columns as FTS5 does.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from mdmem.index.fts import query_terms, segment
from mdmem.index.sqlite.db import BM25_WEIGHTS, FTS_TOKENIZER

LABELS = ("A", "B", "C")
"""tsvector weight label of each keyword column: text, heading, context."""
MAX_POSITION = 16383
MAX_POSITIONS = 256
"""PostgreSQL keeps at most 256 positions of a lexeme per tsvector (more count as 256)."""

_local = threading.local()


@dataclass(frozen=True)
class Terms:
    """One chunk's keyword terms."""

    tsvector: str
    """A tsvector literal: each lexeme with its positions and column labels."""
    length: int
    """Tokens in all columns (BM25's document length)."""
    frequencies: dict[str, float]
    """Each distinct lexeme's frequency, every occurrence weighted by its column as FTS5's
    BM25 weights it (what the postings table keeps, so a search never reads the tsvector)."""
    places: dict[str, list[int]]
    """Each lexeme's occurrences as ``position * 4 + column`` (positions as in the tsvector,
    uncapped): a phrase's next token stands at ``+ 4``."""

    @property
    def lexemes(self) -> frozenset[str]:
        """Distinct lexemes (what the document-frequency table counts)."""
        return frozenset(self.frequencies)


def _tokenizer() -> sqlite3.Connection:
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(text, heading, context, content='', "
            f"tokenize='{FTS_TOKENIZER}')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        _local.conn = conn
    return conn


def _tokens(docs: Sequence[tuple[str, str, str]]) -> list[list[list[tuple[int, str]]]]:
    """For each (text, heading, context): per column, its (offset, token) pairs in order."""
    conn = _tokenizer()
    out: list[list[list[tuple[int, str]]]] = [[[], [], []] for _ in docs]
    columns = {"text": 0, "heading": 1, "context": 2}
    conn.execute("BEGIN")
    try:
        conn.executemany(
            "INSERT INTO t(rowid, text, heading, context) VALUES (?, ?, ?, ?)",
            [(i, segment(a), segment(b), segment(c)) for i, (a, b, c) in enumerate(docs)],
        )
        for doc, col, term, offset in conn.execute("SELECT doc, col, term, offset FROM v"):
            out[doc][columns[col]].append((offset, term))
        conn.execute("INSERT INTO t(t) VALUES('delete-all')")
    finally:
        conn.execute("COMMIT")
    for columns_of_doc in out:
        for tokens in columns_of_doc:
            tokens.sort()
    return out


def chunk_terms(docs: Sequence[tuple[str, str, str]]) -> list[Terms]:
    """The terms of each (text, heading, context)."""
    return [_terms(columns) for columns in _tokens(docs)]


def _terms(columns: list[list[tuple[int, str]]]) -> Terms:
    frequencies: dict[str, float] = {}
    places: dict[str, list[int]] = {}
    start = 1
    for column, (weight, tokens) in enumerate(zip(BM25_WEIGHTS, columns, strict=True)):
        for offset, token in tokens:
            place = (start + offset) * 4 + column
            found = places.get(token)
            if found is None:
                places[token] = [place]
                frequencies[token] = weight
            else:
                found.append(place)
                frequencies[token] += weight
        # a gap of one between columns: a phrase never matches across them
        start += (tokens[-1][0] + 2) if tokens else 0
    literal = " ".join(f"{quote(lex)}:{_positions(at)}" for lex, at in places.items())
    return Terms(literal, sum(len(t) for t in columns), frequencies, places)


def _positions(places: list[int]) -> str:
    """A lexeme's places as tsvector positions with their column labels (at most 256)."""
    return ",".join(
        f"{min(place >> 2, MAX_POSITION)}{LABELS[place & 3]}" for place in places[:MAX_POSITIONS]
    )


def query_phrases(query: str) -> list[tuple[str, ...]]:
    """The query's terms (those FTS5 would search for), each as the tokens it becomes."""
    terms = query_terms(query)
    if not terms:
        return []
    phrases = [tuple(tok for _, tok in cols[0]) for cols in _tokens([(t, "", "") for t in terms])]
    return list(dict.fromkeys(p for p in phrases if p))


def tsquery(phrases: Sequence[tuple[str, ...]]) -> str:
    """A tsquery literal: any of the phrases (a phrase's tokens next to each other)."""
    return " | ".join("(" + " <-> ".join(quote(tok) for tok in p) + ")" for p in phrases)


def quote(lexeme: str) -> str:
    """A lexeme in tsvector/tsquery literal syntax."""
    if "'" in lexeme or "\\" in lexeme:
        lexeme = lexeme.replace("\\", "\\\\").replace("'", "''")
    return f"'{lexeme}'"
