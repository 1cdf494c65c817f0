"""Moving a workspace's SQLite index into PostgreSQL without embedding anything again.

Only into a schema that holds no index yet: where the server already holds this workspace's
index, it is synced with the files instead (a local copy could only move it backwards: fewer
vectors, a lower generation), and another machine's is refused.

Files, chunks (their keyword terms computed on the way), vectors, access counts and first-seen
dates are copied in one transaction under the indexer lock: a reader sees the old index or the
new one. Vectors go in by binary COPY, and each vector table's HNSW index is built after its
rows (much faster than growing it row by row), as are the chunks' and postings' indexes.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mdmem.config import FilesConfig, IndexConfig
from mdmem.errors import MdmemError
from mdmem.index.chunks import Chunk
from mdmem.index.embed import Embedder
from mdmem.index.postgres import db, postgres_writes
from mdmem.index.postgres.index import PostgresIndex, origin
from mdmem.redact import Redactor

BATCH = 5000
COPIED_META = ("chunker_version", "embed_model", "last_sync", "access_since")
"""(access_since: the access counts copied keep the history they were counted over.)"""
CHUNK_SELECT = (
    "SELECT path, id, start_line, end_line, heading, text, embed_text, text_hash, kind, type, "
    "importance, created, entry_id, agent, session, archived, context FROM chunks "
    "ORDER BY path, start_line, end_line, rowid"
)


@dataclass(frozen=True)
class Copied:
    files: int
    chunks: int
    vectors: int
    seconds: float
    where: str
    name: str
    """The workspace's name on the server (what readers elsewhere set as index.workspace)."""
    generation: int = 0
    """The server's index generation after it: never lower than before."""
    synced: bool = False
    """The server already held this workspace's index: it was synced with the files (the
    changes embedded), not replaced by the local copy."""
    embedded: int = 0


class HoldsAnIndex(MdmemError):
    """The server already holds an index for this schema: a copy would replace it."""


def copy_workspace(
    root: Path,
    state_dir: Path,
    files: FilesConfig,
    embedder: Callable[[], Embedder | None],
    *,
    redactor: Redactor,
    config: IndexConfig,
    url: str | None = None,
) -> Copied:
    """Bring the workspace's SQLite index up to date with the files (chunks only: the next
    sync embeds what has no vector yet), then copy it into PostgreSQL (``url``, else
    ``index.url``, else ``$MDMEM_INDEX_URL``)."""
    from mdmem.index.sqlite.index import SqliteIndex

    target = PostgresIndex(
        root,
        files,
        embedder,
        url=url or config.url or os.environ.get("MDMEM_INDEX_URL", ""),
        name=config.workspace,
        candidates=config.candidates,
        redactor=redactor,
    )
    try:
        target.conn  # noqa: B018  (a server that cannot be used says so before any work)
        if _holds_index(target):
            return _sync_instead(target)
        source = state_dir / "index.db"
        lite = SqliteIndex(root, source, files, embedder, redactor=redactor)
        try:
            lite.sync(embed=False)
        finally:
            lite.close()
        try:
            return copy_sqlite(source, target)
        except HoldsAnIndex:  # another process filled it meanwhile
            return _sync_instead(target)
    finally:
        target.close()


def _holds_index(target: PostgresIndex) -> bool:
    """Whether the server already holds an index in this workspace's schema. Another
    machine's is refused (copying over it would move it back to this copy's files)."""
    if not target.conn.execute("SELECT 1 FROM files LIMIT 1").fetchone():
        return False
    owner = target.meta("origin")
    if owner is not None and owner != origin(target.root):
        raise MdmemError(
            f"{target.where} already holds the index of {owner}; nothing was copied (give "
            "this workspace an index.workspace of its own to copy it)"
        )
    return True


def _sync_instead(target: PostgresIndex) -> Copied:
    """The server's index of this workspace is brought up to date with the files, as `mdmem
    index` would: a copy of the local index could only be older (its vectors fewer, its
    generation lower) and is never laid over it."""
    started = time.perf_counter()
    report = target.sync()
    status = target.status(None)
    return Copied(
        status.files,
        status.chunks,
        0,
        time.perf_counter() - started,
        target.where,
        target.name,
        generation=target.generation(),
        synced=True,
        embedded=report.embedded,
    )


def copy_sqlite(source: Path, target: PostgresIndex, lock_timeout: float = 60.0) -> Copied:
    """Replace what ``target`` holds with the SQLite index at ``source``."""
    if not source.is_file():
        raise MdmemError(f"{source}: no SQLite index to copy; run `mdmem index` first")
    started = time.perf_counter()
    lite = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        conn = target.conn
        with target.indexer(lock_timeout) as held:
            if not held:
                raise MdmemError(f"{target.where}: another indexer holds it; try again later")
            with conn.transaction():
                if conn.execute("SELECT 1 FROM files LIMIT 1").fetchone():
                    raise HoldsAnIndex(f"{target.where} already holds an index")
                _clear(conn)
                counts = _copy(lite, conn, target)
                generation = postgres_writes.generation(conn)
    finally:
        lite.close()
    target.close()  # cached layout and settings start anew
    seconds = time.perf_counter() - started
    return Copied(*counts, seconds, target.where, target.name, generation=generation)


def _clear(conn: Any) -> None:
    """What is left of an index that holds no file (its generation stays: it only grows)."""
    for (name,) in conn.execute("SELECT name FROM vector_tables").fetchall():
        conn.execute(f"DROP TABLE {db.ident(name)}")
    conn.execute(
        "TRUNCATE chunks, files, df, postings, vector_tables, access, first_seen, relations"
    )
    conn.execute("DELETE FROM meta WHERE key NOT IN ('schema_version', 'generation')")


def _copy(lite: sqlite3.Connection, conn: Any, target: PostgresIndex) -> tuple[int, int, int]:
    files = lite.execute("SELECT path, size, mtime_ns, hash, indexed_at FROM files").fetchall()
    postgres_writes.copy_rows(
        conn, "COPY files (path, size, mtime_ns, hash, indexed_at) FROM STDIN", files
    )
    postgres_writes.copy_rows(
        conn,
        "COPY first_seen (text_hash, seen) FROM STDIN",
        lite.execute("SELECT text_hash, seen FROM first_seen"),
    )
    postgres_writes.copy_rows(
        conn,
        "COPY access (key, count, last_access) FROM STDIN",
        lite.execute("SELECT key, count, last_access FROM access"),
    )
    postgres_writes.copy_rows(
        conn,
        "COPY relations (source, kind, target, path, line, source_archived) FROM STDIN",
        (
            (s, k, t, p, n, bool(a))
            for s, k, t, p, n, a in lite.execute(
                "SELECT source, kind, target, path, line, source_archived FROM relations"
            )
        ),
    )
    chunks = 0
    with db.deferred_indexes(conn, ("chunks", "postings")):
        for batch in _batches(lite.execute(CHUNK_SELECT)):
            postgres_writes.insert_chunks(conn, [(row[0], _chunk(row)) for row in batch])
            chunks += len(batch)
    vectors = _copy_vectors(lite, conn)
    for key in COPIED_META:
        value = lite.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if value is not None:
            postgres_writes.set_meta(conn, key, value[0])
    model = postgres_writes.meta(conn, "embed_model")
    tables = {str(m): str(n) for m, n in conn.execute("SELECT model, name FROM vector_tables")}
    if model in tables:
        postgres_writes.set_meta(conn, "embed_table", tables[model])
    postgres_writes.bump_generation(
        conn
    )  # (no embedded_generation: the next sync looks for chunks the
    # local index had not embedded, and embeds them)
    postgres_writes.set_meta(conn, "origin", origin(target.root))
    return len(files), chunks, vectors


def _chunk(row: tuple[Any, ...]) -> Chunk:
    path, *rest = row
    cid, start, end, heading, text, embed_text, text_hash, kind, type_, importance = rest[:10]
    created, entry_id, agent, session, archived, context = rest[10:]
    return Chunk(
        cid,
        path,
        start,
        end,
        heading,
        text,
        embed_text,
        text_hash,
        kind,
        type_,
        importance,
        created,
        entry_id,
        agent,
        session,
        bool(archived),
        context,
    )


def _batches(rows: sqlite3.Cursor) -> Iterator[list[Any]]:
    while batch := rows.fetchmany(BATCH):
        yield batch


def _copy_vectors(lite: sqlite3.Connection, conn: Any) -> int:
    """Every cached vector, by binary COPY into its (model, dimension) table; then the HNSW
    index of each table."""
    copied = 0
    for model, dim in lite.execute("SELECT DISTINCT model, dim FROM embeddings").fetchall():
        table = db.create_vector_table(conn, model, dim, with_index=False)
        rows = lite.execute(
            "SELECT text_hash, vector FROM embeddings WHERE model = ? AND dim = ?", (model, dim)
        )
        with conn.cursor() as cur:
            statement = f"COPY {table} (text_hash, embedding) FROM STDIN WITH (FORMAT BINARY)"
            with cur.copy(statement) as copy:
                copy.set_types(["text", "vector"])
                for text_hash, blob in rows:
                    copy.write_row((text_hash, np.frombuffer(blob, dtype=np.float32)))
                    copied += 1
        db.create_hnsw(conn, table)
    return copied
