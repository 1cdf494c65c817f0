"""The index on PostgreSQL + pgvector, on a real throwaway cluster (tests/postgres_cluster.py):
the same scores as SQLite, many machines on one server, one indexer, whole batches, and a
clear line for each fault. The search tests of tests/integration/test_search.py marked ``both_backends``
run on both backends as well."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest
from postgres_cluster import PASSWORD, Cluster
from typer.testing import CliRunner

from mdmem import Workspace
from mdmem.cli import app
from mdmem.config import IndexConfig, load_config
from mdmem.index.embed import normalize
from mdmem.index.postgres import db
from mdmem.index.postgres.db import IndexServerError

pytestmark = pytest.mark.slow


def on_postgres(root: Path, url: str, embedder, name: str = "") -> Workspace:
    config = load_config(root)
    index = IndexConfig(backend="postgres", url=url, workspace=name)
    return Workspace(root, replace(config, index=index), embedder=embedder)


class HashEmbedder:
    """Another model (feature hashing of words): a model change."""

    model_id = "test/hash-64"

    def embed(self, texts, progress=None):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hash(word) % 64] += 1.0
        return normalize(out + 1e-6)


@pytest.fixture
def pair(tmp_path: Path, indexed_template: Path, embedder, postgres: Cluster):
    """The example workspace indexed on both backends (the SQLite index copied over)."""
    root = tmp_path / "ws"
    shutil.copytree(indexed_template, root)
    lite = Workspace.open(root, embedder=embedder)
    pg = on_postgres(root, postgres.url, embedder)
    pg.index.copy_to_postgres()
    yield lite, pg
    lite.close()
    pg.close()


QUERIES = [
    "which port does the compose postgres use",
    "deploying",  # stemmed: deploy, deploys, deployed
    "数据库 备份",  # CJK, segmented as on the SQLite side
    "Café naïve",  # diacritics removed
    "o'brien's review",  # one word that is two tokens: a phrase
    "the",  # nothing but a stopword
    "alembic enum migration",
]


def _by_place(index, scored) -> dict[tuple[str, int, int], float]:
    layout = index.layout()
    n = len(layout.rowids)
    dense, found = scored.dense(n), scored.found(n)
    rows = index.chunk_rows([int(layout.rowids[i]) for i in np.flatnonzero(found)])
    place = {r.rowid: (r.path, r.start_line, r.end_line) for r in rows.values()}
    return {place[int(layout.rowids[i])]: float(dense[i]) for i in np.flatnonzero(found)}


def test_bm25_scores_equal_fts5s_and_searches_agree(pair) -> None:
    """ts_rank is not BM25: the PostgreSQL side computes FTS5's BM25 itself, from the
    document frequencies sync keeps, and gives every candidate the same score."""
    lite, pg = pair
    (lite.root / "notes" / "extra.md").write_text(
        "- 生产数据库每天凌晨三点备份\n- Café naïve O'Brien's review of deploys\n"
    )
    lite.index.update()
    pg.index.update()
    for query in QUERIES:
        with lite.index._backend.reading(), pg.index._backend.reading():
            want = _by_place(
                lite.index._backend, lite.index._backend.keyword_candidates(query, 1000)
            )
            got = _by_place(pg.index._backend, pg.index._backend.keyword_candidates(query, 1000))
        assert want, query
        assert got.keys() == want.keys(), query
        for place, score in want.items():
            assert got[place] == pytest.approx(score, rel=1e-9), (query, place)
    for query, mode in [(q, "hybrid") for q in QUERIES[:4]] + [(QUERIES[0], "vector")]:
        a = lite.search(query, k=5, mode=mode, track_access=False)
        b = pg.search(query, k=5, mode=mode, track_access=False)
        assert [h.citation for h in a] == [h.citation for h in b], (query, mode)
        assert [h.score for h in b] == pytest.approx([h.score for h in a], rel=1e-6)


def test_any_query_is_safe_in_sql(pair) -> None:
    _, pg = pair
    for query in ['"unbalanced', "AND", "a*", "'; DROP TABLE chunks; --", "(((", "x <-> y",
                  "a & !b", "\\", "'", "🎉", "", "NEAR(a b)"]:  # fmt: skip
        results = pg.search(query, k=3, mode="keyword")
        assert results.problems == [], query
    assert pg.search("alembic", k=1, mode="keyword")


def test_text_copy_keeps_backslashes_tabs_and_null_markers(pair) -> None:
    """Chunks go in as COPY text formatted by mdmem (not psycopg): what COPY would read as an
    escape, a column break or NULL arrives as written, by sync and by a copy from SQLite."""
    lite, pg = pair
    note = lite.root / "notes" / "escapes.md"
    note.write_text(
        "# C:\\new\\table\tpaths\n\n"
        "- regedit path C:\\new\\table, then \\N and \\\\N\tand a tab\n"
        "- regedit keeps o'brien's \\t literally\r\n"
    )
    lite.index.update()
    pg.index.update()
    want = [(h.heading, h.text) for h in lite.search("regedit", k=5, mode="keyword")]
    assert len(want) == 2 and any("\\N" in text and "\t" in text for _, text in want)
    assert [(h.heading, h.text) for h in pg.search("regedit", k=5, mode="keyword")] == want
    pg.index.copy_to_postgres()
    assert [(h.heading, h.text) for h in pg.search("regedit", k=5, mode="keyword")] == want


def test_copy_from_sqlite_through_the_cli_embeds_nothing(
    tmp_path: Path, indexed_template: Path, embedder, postgres: Cluster
) -> None:
    root = tmp_path / "ws"
    shutil.copytree(indexed_template, root)
    out = CliRunner().invoke(
        app, ["-w", str(root), "index", "--backend", "postgres", "--url", postgres.url]
    )
    assert out.exit_code == 0, out.output
    assert "Copied 10 files" in out.output and "nothing embedded again" in out.output
    toml = tomllib.loads(out.stdout.split("\n\n", 1)[1])  # the mdmem.toml lines it says to set
    assert toml["index"]["backend"] == "postgres"
    assert toml["index"]["workspace"].startswith("ws_") and PASSWORD not in out.stdout
    pg = on_postgres(root, postgres.url, embedder)
    status = pg.index.status()
    assert status.files == 10 and status.embedded == status.chunks > 100
    report = pg.index.update()
    assert (report.changed, report.embedded) == (0, 0)  # fresh, and nothing to embed
    assert "schema mdmem_" in status.db_path and "password" not in status.db_path
    pg.close()


def test_the_indexer_lock_makes_a_second_writer_wait_then_answer_stale(
    pair, postgres: Cluster
) -> None:
    _, pg = pair
    key = db.lock_key("indexer", pg.index._backend.schema)
    with psycopg.connect(postgres.url, autocommit=True) as other:  # another machine's indexer
        other.execute("SELECT pg_advisory_lock(%s)", (key,))
        (pg.root / "notes" / "late.md").write_text("- Quarterly audit is in March\n")
        report = pg.index._backend.sync(lock_timeout=0.2)
        assert report.busy and report.stale == ["notes/late.md"]
        other.execute("SELECT pg_advisory_unlock(%s)", (key,))
    results = pg.search("quarterly audit", k=3)
    assert results.fresh and results[0].path == "notes/late.md"


WRITER = """
import sys, time
from dataclasses import replace
from pathlib import Path
from mdmem import Workspace
from mdmem.config import IndexConfig, load_config
root, url = Path(sys.argv[1]), sys.argv[2]
config = replace(load_config(root), index=IndexConfig(backend="postgres", url=url))
ws = Workspace(root, config)
for version in range(1, int(sys.argv[3]) + 1):
    for n in range(0, 30, 3):  # ten files per sync batch, every line with the same version
        lines = [f"- alpha item {n} {i} v{version}" for i in range(version % 7 + 3)]
        (root / f"f{n}.md").write_text("# F\\n" + "\\n".join(lines) + "\\n")
    ws.index.update(embed=False)
print(version)
"""


def test_a_reader_never_sees_half_a_sync(tmp_path: Path, postgres: Cluster) -> None:
    """Each sync batch is one transaction: every search sees all the files of a batch at one
    version (the writer writes them all with the same version word)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    for n in range(30):
        (root / f"f{n}.md").write_text("# F\n- alpha item v0\n")
    ws = on_postgres(root, postgres.url, None)
    ws.index.update()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), postgres.url, "6"],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen: set[int] = set()
    while writer.poll() is None:  # (the writer stops by itself)
        with ws.index._backend.searching(), ws.index._backend.reading():
            rows = ws.index._backend.chunk_rows([int(r) for r in ws.index._backend.layout().rowids])
        versions = {
            int(r.text.rsplit("v", 1)[1]) for r in rows.values() if r.path[1:-3].isdigit()
            and int(r.path[1:-3]) % 3 == 0 and "alpha" in r.text
        }  # fmt: skip
        assert len(versions) == 1, versions  # never two versions in one view
        seen |= versions
        time.sleep(0.01)  # (two cores: leave the writer and the server some)
    out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0 and int(out) == 6 and len(seen) >= 2
    ws.close()


def test_a_reader_on_another_machine_searches_and_never_writes(
    pair, tmp_path: Path, embedder
) -> None:
    """Another folder (as on another machine) naming the same workspace reads its index;
    only the folder it was indexed from writes."""
    _, pg = pair
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(pg.root, elsewhere, ignore=shutil.ignore_patterns(".mdmem"))
    (elsewhere / "notes" / "only-here.md").write_text("- Zanzibar is the codename\n")
    reader = on_postgres(elsewhere, pg.index._backend.url, embedder, name=pg.index._backend.name)
    results = reader.search("which port does the compose postgres use", k=3)
    mine = pg.search("which port does the compose postgres use", k=3)
    assert [h.citation for h in results] == [h.citation for h in mine]
    assert "only reads it" in results.problems[0] and "notes/only-here.md" in results.stale
    assert not reader.search("Zanzibar", k=3, mode="keyword")  # it wrote nothing
    reader.close()


def test_a_reader_with_another_model_gets_one_clear_line(pair, tmp_path: Path) -> None:
    _, pg = pair
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(pg.root, elsewhere, ignore=shutil.ignore_patterns(".mdmem"))
    reader = on_postgres(
        elsewhere, pg.index._backend.url, HashEmbedder(), name=pg.index._backend.name
    )
    with pytest.raises(IndexServerError, match=r"holds vectors of sentence-transformers/.*set"):
        reader.search("alembic", k=3)
    assert reader.search("alembic", k=3, mode="keyword")  # keyword search needs no vectors

    class SameNameOtherSize(HashEmbedder):
        model_id = pg.index.embedder().model_id

    reader = on_postgres(
        elsewhere, pg.index._backend.url, SameNameOtherSize(), name=pg.index._backend.name
    )
    with pytest.raises(IndexServerError, match=r"holds 384-d vectors .* gives 64-d ones: run"):
        reader.search("alembic", k=3)


def test_a_model_change_re_embeds_into_a_table_of_its_own(pair) -> None:
    _, pg = pair
    ws = on_postgres(pg.root, pg.index._backend.url, HashEmbedder())
    report = ws.index.update()
    assert report.embedded == ws.index.status().chunks  # everything, with the new model
    tables = dict(ws.index._backend.conn.execute("SELECT model, dim FROM vector_tables").fetchall())
    assert tables == {"test/hash-64": 64, pg.index.embedder().model_id: 384}
    assert ws.search("alembic enum type", k=3, mode="vector")
    assert pg.index.update().embedded == 0  # switching back costs nothing: both are kept
    ws.close()


def test_filters_fill_the_vector_candidates_by_iterative_scan(pair) -> None:
    """The nearest chunks by HNSW that pass a filter: when the nearest ones fail it, the
    iterative scan goes on to the next (without it, the filter empties the list)."""
    from mdmem.index.filters import Filters
    from mdmem.index.postgres import read

    _, pg = pair
    index = pg.index._backend
    conn = index.conn
    conn.execute("SET enable_seqscan = off")  # the HNSW index, even on a small table
    conn.execute("SET enable_sort = off")
    conn.execute("SET hnsw.ef_search = 5")
    table = db.vector_table(conn, pg.index.embedder().model_id, 384)
    query = pg.index.embedder().embed(["database migrations"])[0]
    reviewer = Filters(agent="reviewer")
    plan = "\n".join(
        r[0]
        for r in conn.execute(
            f"EXPLAIN SELECT 1 FROM {table} v JOIN chunks c ON c.text_hash = v.text_hash "
            "WHERE c.agent = 'reviewer' ORDER BY v.embedding <=> %s LIMIT 10",
            (query,),
        )
    )
    assert f"{table}_hnsw" in plan
    found = read.nearest(conn, index.layout(), table, query, 10, reviewer)
    assert len(found.scores) == 10
    conn.execute("SET hnsw.iterative_scan = off")
    assert len(read.nearest(conn, index.layout(), table, query, 10, reviewer).scores) < 10
    index.close()


def test_each_fault_is_one_line_that_says_what_to_do(pair, postgres: Cluster, tmp_path) -> None:
    _, pg = pair
    cases = [
        (f"postgresql://postgres@/mdmem?host={tmp_path}/nothing-here", "cannot reach PostgreSQL"),
        (postgres.url_for(password="wrong"), "refused the credentials"),
        (postgres.url_for(db="no_such_db"), "has no such database"),
        ("", "no server is named: set index.url"),
    ]
    with psycopg.connect(postgres.url_for(db="postgres"), autocommit=True) as conn:
        conn.execute("CREATE ROLE reader LOGIN PASSWORD 'pw'")
        conn.execute("CREATE DATABASE bare")  # no vector extension, and reader may not add it
    cases.append((postgres.url_for(user="reader", password="pw", db="bare"), "CREATE EXTENSION"))
    for url, what in cases:
        ws = on_postgres(pg.root, url, pg.index.embedder())
        with pytest.raises(IndexServerError, match=what) as caught:
            ws.search("alembic", k=1)
        assert "\n" not in str(caught.value) and "wrong" not in str(caught.value)
    mdmem = Path(sys.executable).parent / "mdmem"
    args = ["-w", str(pg.root), "index", "--backend", "postgres", "--url", cases[1][0]]
    out = subprocess.run([mdmem, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("mdmem: error: PostgreSQL at postgresql://postgres@/mdmem")
    assert "refused the credentials" in out.stderr and out.stderr.count("\n") == 1


def test_a_schema_from_a_newer_mdmem_is_refused(pair) -> None:
    _, pg = pair
    pg.index._backend.conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    pg.close()
    with pytest.raises(IndexServerError, match="newer mdmem"):
        pg.search("alembic", k=1)


def _rels(found) -> list[tuple[str, str, str, bool]] | None:
    return None if found is None else sorted((r.source, r.kind, r.target, r.open) for r in found)


def _keyword_only(tmp_path: Path, postgres: Cluster) -> Workspace:
    root = tmp_path / "ws"
    Workspace.init(root, mode="full")
    (root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    return on_postgres(root, postgres.url, None)


def test_the_relations_table_follows_the_files_in_the_syncs_transaction(
    tmp_path: Path, postgres: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on SQLite: the relations the entries declare, filled with each file's chunks,
    dropped with a removed file, read only while the index is in step with the files."""
    ws = _keyword_only(tmp_path, postgres)
    old = ws.remember("The staging port is 5432")
    new = ws.remember("The staging port is 6543")
    ws.index._backend.sync(embed=False)
    assert _rels(ws.index._backend.relations(old.id)) == []  # type: ignore[attr-defined]
    path = ws.root / "memory.md"
    text = path.read_text()
    path.write_text(text.replace(f"id={new.id}", f"id={new.id} contradicts={old.id}"))  # by hand
    assert ws.index._backend.relations(old.id) is None  # type: ignore[attr-defined]  # a file changed
    ws.index._backend.sync(embed=False)
    expected = [(new.id, "contradicts", old.id, True)]
    assert _rels(ws.index._backend.relations(old.id)) == expected  # type: ignore[attr-defined]
    monkeypatch.setattr(ws._w.documents, "all", lambda: pytest.fail("parsed the files"))
    monkeypatch.setattr(ws._w.documents, "entries", lambda *a: pytest.fail("parsed the files"))
    assert _rels(ws.lifecycle.related(old.id)) == expected
    assert ws.lifecycle.contradicted() == {old.id: [new.id]}
    monkeypatch.undo()
    (ws.root / "notes.md").write_text(f"- A note <!-- mdmem id=m-0000000001 refines={old.id} -->\n")
    ws.index._backend.sync(embed=False)
    assert len(ws.index._backend.relations(old.id)) == 2  # type: ignore[arg-type, attr-defined]
    (ws.root / "notes.md").unlink()  # removed with its file
    ws.index._backend.sync(embed=False)
    assert _rels(ws.index._backend.relations(old.id)) == expected  # type: ignore[attr-defined]
    ws.close()


def test_a_schema_3_index_fills_its_relations_at_the_next_sync_and_a_copy_brings_them(
    tmp_path: Path, postgres: Cluster
) -> None:
    ws = _keyword_only(tmp_path, postgres)
    old = ws.remember("Deploys go to Heroku")
    new = ws.remember("Deploys go to Fly.io")
    ws.lifecycle.relate(new, old.id, "contradicts")
    ws.index._backend.sync(embed=False)
    conn = ws.index._backend.conn  # type: ignore[attr-defined]
    conn.execute("DROP TABLE relations")  # as an index of schema 3 has it
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    ws.close()
    again = on_postgres(ws.root, postgres.url, None)
    assert again.index._backend.relations(old.id) is None  # type: ignore[attr-defined]
    assert again.index._backend.sync(embed=False).updated >= 1  # every file read once
    expected = [(new.id, "contradicts", old.id, True)]
    assert _rels(again.index._backend.relations(old.id)) == expected  # type: ignore[attr-defined]
    again.close()
    lite = Workspace(ws.root)  # the SQLite index of the same files
    lite.index._backend.sync(embed=False)
    lite.close()
    copied = on_postgres(ws.root, postgres.url, None, name="copied")
    copied.index.copy_to_postgres()
    assert _rels(copied.index._backend.relations(old.id)) == expected  # type: ignore[attr-defined]
    copied.close()


def test_reads_count_and_the_access_history_is_kept_on_postgres(
    tmp_path: Path, postgres: Cluster
) -> None:
    """ws.get counts a read through the connection the workspace has; the index says when it
    began counting (set when its schema is made, or at the first connection of an older one)."""
    ws = _keyword_only(tmp_path, postgres)
    a = ws.remember("The office is in Lyon")
    ws.index._backend.sync(embed=False)
    since = ws.index._backend.access_since()
    assert since is not None
    ws.get(a.id)
    ws.get(a.id)
    assert ws.index._backend.access_counts([a.id]) == {a.id: 2}
    ws.index._backend.conn.execute("DELETE FROM meta WHERE key = 'access_since'")  # type: ignore[attr-defined]
    ws.close()
    again = on_postgres(ws.root, postgres.url, None)
    assert again.index._backend.access_since() is not None  # its history starts now
    again.close()


def test_a_connection_never_waits_long_to_start_the_access_history(
    tmp_path: Path, postgres: Cluster
) -> None:
    """Another connection writing the same meta row holds it: a new connection leaves the key
    for later instead of waiting for that transaction (here it would wait forever)."""
    ws = _keyword_only(tmp_path, postgres)
    holder = ws.index._backend.conn  # type: ignore[attr-defined]
    holder.execute("DELETE FROM meta WHERE key = 'access_since'")
    opened: list[str | None] = []
    with holder.transaction():
        holder.execute("INSERT INTO meta(key, value) VALUES ('access_since', 'held')")
        other = on_postgres(ws.root, postgres.url, None)
        connecting = threading.Thread(
            target=lambda: opened.append(other.index._backend.access_since())
        )
        connecting.start()
        connecting.join(timeout=20)
        finished = not connecting.is_alive()
        raise psycopg.Rollback()  # lets a waiting connection go on
    connecting.join()
    other.close()
    ws.close()
    assert finished and opened == [None]


# ---- issue 32 §4: a copy never moves the server backwards; status counts unembedded chunks ----


class DyingServer:
    """The real model, and the server's end of the indexer's connection terminated (a real
    backend killed by pg_terminate_backend) before each embedding batch after the first: the
    server dies mid-sync, as far as the indexer can tell, and again on its one retry."""

    def __init__(self, model, admin_url: str) -> None:
        self.model, self.admin_url, self.calls = model, admin_url, 0
        self.model_id = model.model_id

    def embed(self, texts, progress=None):
        self.calls += 1
        if self.calls > 1:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "application_name = 'mdmem' AND pid <> pg_backend_pid()"
                )
        return self.model.embed(texts, progress)


def _status(root: Path) -> str:
    out = CliRunner().invoke(app, ["-w", str(root), "status"])
    assert out.exit_code == 0, out.output
    return out.stdout


def test_a_workspace_on_postgres_never_moves_back_and_says_when_it_is_not_embedded(
    tmp_path: Path, indexed_template: Path, embedder, postgres: Cluster, monkeypatch
) -> None:
    """The issue's scenario: the documented copy, a user who sets the lines it prints, work on
    the server, the copy run again (it used to lay the stale local index over the server's:
    chunks without vectors, generation back to 1, status "fresh"), then the server dying
    mid-sync (status said "fresh" with chunks not embedded)."""
    root = tmp_path / "ws"
    shutil.copytree(indexed_template, root)
    monkeypatch.setenv("MDMEM_INDEX_URL", postgres.url)
    runner = CliRunner()
    first = runner.invoke(app, ["-w", str(root), "index", "--backend", "postgres"])
    assert first.exit_code == 0, first.output
    lines = first.stdout.split("\n\n", 1)[1]
    (root / "mdmem.toml").write_text((root / "mdmem.toml").read_text() + "\n" + lines)
    ws = Workspace.open(root, embedder=embedder)
    assert ws.index._backend.__class__.__name__ == "PostgresIndex"
    for n in range(3):
        ws.remember(f"The canary deploy of release {n} goes to the Lisbon region first")
    ws.index.update()
    before = ws.index.status()
    assert before.embedded == before.chunks and "fresh" in _status(root)
    again = runner.invoke(app, ["-w", str(root), "index", "--backend", "postgres"])
    assert again.exit_code == 0, again.output
    assert "already holds this workspace's index" in again.stdout
    assert "mdmem.toml has these lines already" in again.stdout
    after = Workspace.open(root, embedder=embedder)
    status = after.index.status()
    assert status.generation is not None and before.generation is not None
    assert status.generation >= before.generation  # never back to 1
    assert (status.chunks, status.embedded) == (before.chunks, before.chunks)
    hit = after.search("which region gets the canary deploy first", k=1)[0]
    assert "Lisbon region" in hit.text
    after.close()

    # the server dies mid-sync: the chunks are in, some vectors are not
    for n in range(150):
        ws.remember(f"Runbook step {n}: rotate the credentials of service s{n} after paging")
    dying = Workspace.open(root, embedder=DyingServer(embedder, postgres.url_for(db="postgres")))
    with pytest.raises((IndexServerError, psycopg.Error)):
        dying.index.update()
    dying.close()
    half = Workspace.open(root, embedder=embedder).index.status()
    assert half.chunks - half.embedded > 0
    shown = _status(root)
    assert f"{half.chunks - half.embedded} chunk(s) not embedded yet" in shown
    assert "fresh" not in shown.split("freshness", 1)[1].splitlines()[0]
    redo = runner.invoke(app, ["-w", str(root), "index"])
    assert redo.exit_code == 0, redo.output
    assert "  fresh" in _status(root)
    ws.close()


def test_a_copy_of_an_index_not_all_embedded_is_embedded_by_the_next_sync(
    tmp_path: Path, embedder, postgres: Cluster
) -> None:
    """The copy used to mark every chunk embedded (`mdmem index` then embedded nothing)."""
    ws = Workspace.init(tmp_path / "ws", mode="full", agent="coder")
    for n in range(3):
        ws.remember(f"Backups of shard {n} run at 0{n}:30 UTC")
    with Workspace.open(ws.root, embedder=embedder) as lite:
        lite.index.update(embed=False)  # chunks, and no vector yet
    pg = on_postgres(ws.root, postgres.url, embedder)
    copied = pg.index.copy_to_postgres()
    assert (copied.vectors, copied.synced) == (0, False) and copied.generation >= 1
    before = pg.index.status()
    assert before.embedded == 0 < before.chunks
    assert pg.index.update().embedded > 0
    after = pg.index.status()
    assert after.embedded == after.chunks and after.generation > before.generation
    pg.close()
