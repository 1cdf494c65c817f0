"""The PostgreSQL side of the index: connecting, the schema and its migrations, one-line errors.

Many workspaces share one database: each has a schema of its own (``mdmem_<name>``). The
``vector`` extension is created (when missing and allowed) before pgvector's adapter is
registered: registration looks the type up on the search path. Vectors live in one table per
(model, dimension), each with an HNSW cosine index.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mdmem.errors import MdmemError
from mdmem.index.backend_base import ACCESS_SINCE
from mdmem.index.sqlite.db import BM25_WEIGHTS

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 4
CONNECT_TIMEOUT_S = 10
URL_HELP = "index.url in mdmem.toml or $MDMEM_INDEX_URL"


class IndexServerError(MdmemError):
    """The index server cannot be used as configured; the message says what to do."""


def schema_name(workspace: str) -> str:
    """The schema of a workspace name: ``mdmem_`` and the name in lower case, other
    characters as ``_`` (at most 63 bytes, PostgreSQL's limit)."""
    safe = re.sub(r"[^a-z0-9_]", "_", workspace.lower())
    return ("mdmem_" + safe)[:63]


def lock_key(*parts: str) -> int:
    """A stable 64-bit advisory lock key for these words."""
    digest = hashlib.sha256("\0".join(("mdmem", *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def where(url: str) -> str:
    """The server and database of ``url``, without the password (for messages)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:
        return "the configured server"
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    user = f"{info['user']}@" if info.get("user") else ""
    dbname = info.get("dbname") or ""
    if host.startswith("/"):  # a Unix socket folder
        return f"postgresql://{user}/{dbname}?host={host}"
    return f"postgresql://{user}{host}{port}/{dbname}"


CONNECT_KWARGS: dict[str, Any] = {
    "autocommit": True,
    "connect_timeout": CONNECT_TIMEOUT_S,
    "application_name": "mdmem",
}


URL_FORM = "postgresql://user:password@host:5432/dbname"
SCHEMES = ("postgresql://", "postgres://")


def check_url(url: str) -> None:
    """Refuse, before any connection, a URL that is not one: the message never shows the URL
    (a malformed one may put its password anywhere, and psycopg's own error quotes it)."""
    from psycopg.conninfo import conninfo_to_dict

    if not url:
        raise IndexServerError(
            f'index.backend is "postgres" but no server is named: set {URL_HELP} ({URL_FORM})'
        )
    uri = url.lower().startswith(SCHEMES)
    if not uri and ("://" in url or "=" not in url):
        raise IndexServerError(
            f"{URL_HELP} is not a PostgreSQL URL: it must start with postgresql:// ({URL_FORM}; "
            "the URL is not shown, as it may hold a password)"
        )
    if uri and url.split("://", 1)[1].split("/", 1)[0].count("@") > 1:
        raise IndexServerError(
            f"{URL_HELP}: the user or password in it holds an @: write it as %40 (the URL is not "
            "shown, as it may hold a password)"
        )
    try:
        conninfo_to_dict(url)
        failed = False
    except Exception:
        failed = True
    if failed:  # (raised here, not in the handler: psycopg's error, which quotes it, is dropped)
        raise IndexServerError(
            f"{URL_HELP} is not a PostgreSQL URL libpq can read ({URL_FORM}; the URL is not "
            "shown, as it may hold a password)"
        )


def secrets_in(url: str) -> list[str]:
    """What of ``url`` may be a password, longest first: masked in any text shown."""
    from psycopg.conninfo import conninfo_to_dict

    found: set[str] = set()
    with contextlib.suppress(Exception):
        found.add(str(conninfo_to_dict(url).get("password") or ""))
    after = url.split("://", 1)[-1]
    if "@" in after:
        auth = after.rsplit("@", 1)[0]
        secret = auth.split(":", 1)[1] if ":" in auth else auth
        found.update([secret, *secret.split("@")])
    found.update(re.findall(r"password\s*=\s*'?([^'\s]+)", url))
    return sorted((f for f in found if len(f) >= 3), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` with every part of ``url`` that may be its password masked."""
    for secret in secrets_in(url):
        text = text.replace(secret, "***")
    return text


def open_connection(url: str) -> psycopg.Connection[Any]:
    """A plain autocommit connection; a server that cannot be used is a one-line error that
    never shows the password (nor carries psycopg's exception along)."""
    import psycopg

    check_url(url)
    try:
        return psycopg.connect(url, **CONNECT_KWARGS)
    except psycopg.Error as exc:
        message = connect_error(exc, url)
    raise IndexServerError(message)


def connect(url: str, schema: str) -> psycopg.Connection[Any]:
    """An autocommit connection with the schema migrated, pgvector registered and the search
    path set to the workspace's schema (then the extension's)."""
    from pgvector.psycopg import register_vector

    conn = open_connection(url)
    try:
        extension_schema = ensure_vector(conn, url)
        migrate(conn, schema)
        conn.execute(f"SET search_path = {ident(schema)}, {ident(extension_schema)}")
        access_history(conn)
        register_vector(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_error(exc: Exception, url: str) -> str:
    """One line that says what went wrong and what to do."""
    text = scrub(str(exc).strip(), url)
    state = getattr(exc, "sqlstate", None)
    last = text.splitlines()[-1].strip() if text else type(exc).__name__
    if state in ("28P01", "28000") or "authentication failed" in text or "password" in text:
        return (
            f"PostgreSQL at {where(url)} refused the credentials ({last}): fix the user and "
            f"password in {URL_HELP} (or ~/.pgpass)"
        )
    if state == "3D000" or ("database" in text and "does not exist" in text):
        return (
            f"PostgreSQL at {where(url)} has no such database ({last}): create it "
            f"(createdb) or name another one in {URL_HELP}"
        )
    return (
        f"cannot reach PostgreSQL at {where(url)} ({last}): start the server, or set "
        f"{URL_HELP} to one that runs"
    )


def ensure_vector(conn: psycopg.Connection[Any], url: str) -> str:
    """Create the ``vector`` extension if it is missing; the schema it lives in."""
    import psycopg

    found = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    ).fetchone()
    if found:
        return str(found[0])
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if not available:
        raise IndexServerError(
            f"PostgreSQL at {where(url)} has no pgvector extension: install it on the server "
            "(https://github.com/pgvector/pgvector; the pgvector/pgvector image and managed "
            "PostgreSQL services have it), or name another server in " + URL_HELP
        )
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("extension"),))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        raise IndexServerError(
            f"the user in {URL_HELP} may not create the pgvector extension at {where(url)}: "
            "ask the database owner to run CREATE EXTENSION vector"
        ) from None
    return ensure_vector(conn, url)


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _v1(conn: psycopg.Connection[Any]) -> None:
    for statement in (
        "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
        'CREATE TABLE files (path text COLLATE "C" PRIMARY KEY, size bigint NOT NULL, '
        "mtime_ns bigint NOT NULL, hash text NOT NULL, indexed_at text NOT NULL)",
        "CREATE TABLE chunks ("
        " rowid bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        ' id text NOT NULL, path text COLLATE "C" NOT NULL,'
        " start_line integer NOT NULL, end_line integer NOT NULL, heading text NOT NULL,"
        " text text NOT NULL, embed_text text NOT NULL, text_hash text NOT NULL,"
        " kind text NOT NULL, type text NOT NULL, importance double precision NOT NULL,"
        " created text, entry_id text, agent text, session text,"
        " archived boolean NOT NULL, context text NOT NULL DEFAULT '',"
        " terms tsvector NOT NULL, length integer NOT NULL)",
        "CREATE INDEX chunks_path ON chunks (path, start_line)",
        "CREATE INDEX chunks_text_hash ON chunks (text_hash)",
        "CREATE INDEX chunks_entry ON chunks (entry_id)",
        "CREATE INDEX chunks_terms ON chunks USING gin (terms)",
        # BM25's document frequencies, kept by sync (ts_rank knows none)
        "CREATE TABLE df (term text PRIMARY KEY, n integer NOT NULL)",
        "CREATE TABLE vector_tables (model text NOT NULL, dim integer NOT NULL, "
        "name text NOT NULL UNIQUE, PRIMARY KEY (model, dim))",
        "CREATE TABLE access (key text PRIMARY KEY, count integer NOT NULL, "
        "last_access text NOT NULL)",
        "CREATE TABLE first_seen (text_hash text PRIMARY KEY, seen text NOT NULL)",
    ):
        conn.execute(statement)  # type: ignore[call-overload]


def _v2(conn: psycopg.Connection[Any]) -> None:
    """Postings: each (term, chunk) with the term's column-weighted frequency, its places
    (``position * 4 + column``, for phrases) and the chunk's length, so BM25 reads an index
    of the query's terms instead of unnesting the ``tsvector`` of every matching chunk
    (seconds at 100k chunks). Existing chunks get theirs from their ``tsvector``."""
    conn.execute(
        'CREATE TABLE postings (term text COLLATE "C" NOT NULL, rowid bigint NOT NULL, '
        "f double precision NOT NULL, length integer NOT NULL, places integer[] NOT NULL)"
    )
    text_w, heading_w, context_w = (float(w) for w in BM25_WEIGHTS)
    conn.execute(
        "INSERT INTO postings (term, rowid, f, length, places) "
        "SELECT u.lexeme, c.rowid, sum(CASE w WHEN 'A' THEN %s WHEN 'B' THEN %s "
        "WHEN 'C' THEN %s ELSE 0 END), c.length, "
        "array_agg(p * 4 + CASE w WHEN 'A' THEN 0 WHEN 'B' THEN 1 ELSE 2 END ORDER BY p) "
        "FROM chunks c CROSS JOIN LATERAL unnest(c.terms) u "
        "CROSS JOIN LATERAL unnest(u.positions, u.weights) pw(p, w) "
        "GROUP BY u.lexeme, c.rowid, c.length",
        (text_w, heading_w, context_w),
    )
    # (term, rowid): a phrase's tokens merge-join by chunk; all columns: index-only scans
    conn.execute("CREATE INDEX postings_term ON postings (term, rowid) INCLUDE (f, length, places)")
    conn.execute("CREATE INDEX postings_rowid ON postings (rowid)")


def _v3(conn: psycopg.Connection[Any]) -> None:
    """No GIN index on the ``tsvector``: searches read the postings, and keeping it up was a
    third of the server's work in a bulk load."""
    conn.execute("DROP INDEX IF EXISTS chunks_terms")


def _v4(conn: psycopg.Connection[Any]) -> None:
    """The relations the entries declare in their metadata (``refines=m-…``), one row each, as
    in the SQLite index (its schema 5). Forgetting the chunker version makes the next sync
    read every file once, which fills the table (unchanged chunks and vectors are kept)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS relations (source text NOT NULL, kind text NOT NULL, "
        'target text NOT NULL, path text COLLATE "C" NOT NULL, line integer NOT NULL, '
        "source_archived boolean NOT NULL, "
        "n bigint GENERATED ALWAYS AS IDENTITY)"  # the order they were written in
    )
    for column in ("source", "target", "path"):
        conn.execute(f"CREATE INDEX IF NOT EXISTS relations_{column} ON relations ({column})")  # type: ignore[call-overload]
    conn.execute("DELETE FROM meta WHERE key = 'chunker_version'")


MIGRATIONS: list[Callable[[psycopg.Connection[Any]], None]] = [_v1, _v2, _v3, _v4]
"""MIGRATIONS[n] takes a workspace's schema from version n to n + 1."""


def migrate(conn: psycopg.Connection[Any], schema: str) -> None:
    """Create or upgrade the workspace's schema (one process at a time)."""
    if schema_version(conn, schema) == SCHEMA_VERSION:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("migrate", schema),))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {ident(schema)}")
        conn.execute(f"SET LOCAL search_path = {ident(schema)}")
        version = schema_version(conn, schema)  # again, under the lock
        if version > SCHEMA_VERSION:
            raise IndexServerError(
                f"schema {schema} was made by a newer mdmem (version {version}): upgrade mdmem"
            )
        for step in MIGRATIONS[version:SCHEMA_VERSION]:
            step(conn)
        start_access_history(conn)  # a new schema: its history starts with it
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )


def start_access_history(conn: psycopg.Connection[Any]) -> None:
    """Record when the index began counting accesses, unless it already says."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
        (ACCESS_SINCE, dt.datetime.now().isoformat(timespec="seconds")),
    )


def access_history(conn: psycopg.Connection[Any]) -> None:
    """A schema made before :data:`ACCESS_SINCE` existed gets it at its first connection (its
    history starts then); best effort: a user who may not write, or another connection
    writing the same row for more than 100 ms, leaves it for a later connection."""
    import psycopg

    if conn.execute("SELECT 1 FROM meta WHERE key = %s", (ACCESS_SINCE,)).fetchone():
        return
    with contextlib.suppress(psycopg.Error), conn.transaction():
        conn.execute("SET LOCAL lock_timeout = '100ms'")
        start_access_history(conn)


def schema_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The version of a workspace's schema (0: there is none)."""
    exists = conn.execute("SELECT to_regclass(%s)", (f"{ident(schema)}.meta",)).fetchone()
    if not exists or exists[0] is None:
        return 0
    row = conn.execute(
        f"SELECT value FROM {ident(schema)}.meta WHERE key = 'schema_version'"
    ).fetchone()
    return int(row[0]) if row else 0


def vector_table(conn: psycopg.Connection[Any], model: str, dim: int) -> str | None:
    row = conn.execute(
        "SELECT name FROM vector_tables WHERE model = %s AND dim = %s", (model, dim)
    ).fetchone()
    return str(row[0]) if row else None


def vector_dims(conn: psycopg.Connection[Any], model: str) -> list[int]:
    rows = conn.execute("SELECT dim FROM vector_tables WHERE model = %s", (model,)).fetchall()
    return [int(r[0]) for r in rows]


def create_vector_table(
    conn: psycopg.Connection[Any], model: str, dim: int, *, with_index: bool = True
) -> str:
    """The table of (model, dim), made with its HNSW cosine index unless ``with_index`` is
    False (a bulk load builds the index after the rows: much faster)."""
    name = vector_table(conn, model, dim)
    if name is not None:
        return name
    number = conn.execute("SELECT count(*) + 1 FROM vector_tables").fetchone()
    name = f"vectors_{number[0] if number else 1}"
    conn.execute(
        "INSERT INTO vector_tables(model, dim, name) VALUES (%s, %s, %s)", (model, dim, name)
    )
    conn.execute(
        f"CREATE TABLE {name} (text_hash text PRIMARY KEY, embedding vector({int(dim)}) NOT NULL)"
    )
    if with_index:
        create_hnsw(conn, name)
    return name


def create_hnsw(conn: psycopg.Connection[Any], table: str) -> None:
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} "
        "USING hnsw (embedding vector_cosine_ops)"
    )


@contextlib.contextmanager
def deferred_indexes(conn: psycopg.Connection[Any], tables: Sequence[str]) -> Iterator[None]:
    """Drop the secondary indexes of ``tables`` (in the current schema) and build them again
    afterwards: one sort per index instead of an insert per row, several times faster for a
    bulk load. Use it inside the load's transaction: a reader waits for its end, as for the
    rows, and an error rolls the drop back with the rest. Primary keys stay."""
    found = conn.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class t ON t.oid = i.indrelid "
        "WHERE t.relnamespace = current_schema()::regnamespace AND t.relname = ANY(%s) "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) "
        "ORDER BY i.indexrelid",
        (list(tables),),
    ).fetchall()
    for name, _ in found:
        conn.execute(f"DROP INDEX {name}")  # type: ignore[call-overload]
    yield
    for _, definition in found:
        conn.execute(definition)  # type: ignore[call-overload]
