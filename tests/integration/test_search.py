"""Index and hybrid search on real files with the real embedding model."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from postgres_cluster import both_backends

from mdmem import Workspace
from mdmem.index.embed import normalize

pytestmark = pytest.mark.slow


class HashEmbedder:
    """A second, different embedding model (feature hashing of words), to test model changes."""

    model_id = "test/hash-64"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts, progress=None):
        self.calls += len(texts)
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hash(word) % 64] += 1.0
        return normalize(out + 1e-6)


def _texts(results) -> list[str]:
    return [h.text for h in results]


@both_backends
def test_sync_is_incremental_and_a_noop_when_nothing_changed(indexed: Workspace) -> None:
    assert indexed.index.update().changed == 0  # a copied workspace with its index is still fresh
    status = indexed.index.status()
    assert status.files == 10 and status.chunks > 100 and status.embedded == status.chunks
    assert status.stale == [] and status.removed == []
    again = indexed.index.update()
    assert (again.added, again.updated, again.removed, again.embedded) == (0, 0, 0, 0)


@both_backends
def test_search_cites_file_and_lines_with_every_score_part(indexed: Workspace) -> None:
    results = indexed.search("which port does the compose postgres use", k=5)
    assert results.fresh and len(results) == 5
    top = results[0]
    lines = (indexed.root / top.path).read_text().splitlines()[top.start_line - 1 : top.end_line]
    assert top.text.split("\n")[0][:40] in "\n".join(lines)  # the citation points at the text
    assert any("5433" in h.text for h in results[:3])
    assert top.citation.startswith(top.path + ":")
    data = top.to_dict()
    assert set(data) >= {"path", "start_line", "end_line", "heading", "text", "score", "scores",
                         "type", "importance", "created", "id"}  # fmt: skip
    assert set(data["scores"]) >= {"keyword", "vector", "recency", "importance", "frequency"}
    assert [h.score for h in results] == sorted((h.score for h in results), reverse=True)


@both_backends
def test_a_hand_edit_is_found_by_the_next_search_and_the_old_text_is_not(
    indexed: Workspace,
) -> None:
    memory = indexed.root / "memory.md"
    text = memory.read_text()
    assert "Fly.io" in text
    memory.write_text(text.replace("Fly.io", "Hetzner Cloud"))
    results = indexed.search("where do deploys go", k=10, type="fact")
    joined = " ".join(_texts(results))
    assert "Hetzner Cloud" in joined
    assert not [h for h in results if h.path == "memory.md" and "Fly.io" in h.text]


@both_backends
def test_new_and_deleted_files_and_renames_reuse_embeddings(indexed: Workspace) -> None:
    notes = indexed.root / "notes"
    (notes / "new.md").write_text("# Runbook\n- Rotate the Stripe webhook secret every quarter\n")
    report = indexed.index.update()
    assert report.added == 1 and report.embedded >= 1
    assert indexed.search("stripe webhook secret rotation", k=1)[0].path == "notes/new.md"
    # a rename: same text, same headings → no text is embedded again
    (notes / "new.md").rename(notes / "renamed.md")
    report = indexed.index.update()
    assert report.added == 1 and report.removed == 1 and report.embedded == 0
    assert indexed.search("stripe webhook secret rotation", k=1)[0].path == "notes/renamed.md"
    (notes / "renamed.md").unlink()
    indexed.index.update()
    assert all(h.path != "notes/renamed.md" for h in indexed.search("stripe webhook", k=20))


def test_deleting_the_index_loses_nothing(indexed: Workspace, embedder) -> None:
    before = [(h.path, h.start_line) for h in indexed.search("WeasyPrint fonts", k=5)]
    indexed.close()
    shutil.rmtree(indexed.root / ".mdmem")
    fresh = Workspace.open(indexed.root, embedder=embedder)
    assert [(h.path, h.start_line) for h in fresh.search("WeasyPrint fonts", k=5)] == before


def test_a_corrupt_or_foreign_index_is_rebuilt_with_a_message(
    indexed: Workspace, embedder, caplog: pytest.LogCaptureFixture
) -> None:
    indexed.close()
    db = indexed.root / ".mdmem" / "index.db"
    for junk in (b"this is not a database" * 100, None):
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        if junk is None:  # a real SQLite file, but someone else's
            db.unlink()
            other = sqlite3.connect(db)
            other.execute("CREATE TABLE people(name TEXT)")
            other.commit()
            other.close()
        else:
            db.write_bytes(junk)
        ws = Workspace.open(indexed.root, embedder=embedder)
        with caplog.at_level("WARNING", logger="mdmem"):
            results = ws.search("alembic enum", k=3, mode="keyword")
        assert results and "rebuilding" in caplog.text
        caplog.clear()
        ws.close()


def test_model_change_re_embeds_and_never_mixes_vectors(indexed: Workspace) -> None:
    other = HashEmbedder()
    ws = Workspace.open(indexed.root, embedder=other)
    report = ws.index.update()
    assert report.embedded == ws.index.status().chunks  # everything re-embedded with the new model
    results = ws.search("alembic enum type", k=3, mode="vector")
    assert results and all(h.scores.vector is not None for h in results)
    conn = ws.index._backend.conn
    models = {m for (m,) in conn.execute("SELECT DISTINCT model FROM embeddings")}
    assert models == {"test/hash-64", indexed.index.embedder().model_id}
    vectors = ws.index._backend.vectors("test/hash-64")
    assert vectors.shape == (ws.index.status().chunks, 64)  # only the new model's vectors
    # and switching back costs nothing: the cache is keyed by (model, text)
    assert indexed.index.update().embedded == 0


@both_backends
def test_chinese_two_character_words_match(indexed: Workspace) -> None:
    (indexed.root / "notes" / "ops.md").write_text("- 生产数据库每天凌晨三点备份到对象存储\n")
    results = indexed.search("数据库", k=3, mode="keyword")
    assert results and "生产数据库" in results[0].text
    assert indexed.search("备份", k=3, mode="keyword")[0].text.startswith("生产数据库")


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "AND", "OR NOT", "a*", "-x", "NEAR(a b)", "🎉", "", "   ", "col:val",
     "(((", "'; DROP TABLE chunks; --", "^start", "x AND \"y\" OR -z*"],
)  # fmt: skip
def test_any_query_is_safe(indexed: Workspace, query: str) -> None:
    (indexed.root / "notes" / "syntax.md").write_text(
        "- unbalanced quotes, NEAR misses and a col val pair 🎉 party\n"
        "- DROP TABLE chunks is the start of trouble; x and y and z\n"
    )
    words = set(re.findall(r"\w+", query.lower()))
    keyword = indexed.search(query, k=3, mode="keyword")
    assert keyword.fresh and keyword.problems == []
    if not words:  # nothing to look for: no hits, and no error
        assert list(keyword) == []
    else:  # the query's words are searched as (stemmed) words: every hit has one of them
        assert keyword, query
        stems = {w[:4] for w in words}  # 'DROP' finds 'dropped', 'chunks' finds 'chunk'
        assert keyword[0].scores.keyword is not None
        for hit in (h for h in keyword if h.scores.keyword is not None):  # (not a neighbour's)
            found = {w[: len(s)] for w in re.findall(r"\w+", hit.text.lower()) for s in stems}
            assert stems & found, (query, hit.text)
    hybrid = indexed.search(query, k=3, mode="hybrid")
    assert hybrid.fresh and (len(hybrid) == 3 if query.strip() else list(hybrid) == [])


@both_backends
def test_english_stemming(indexed: Workspace) -> None:
    results = indexed.search("deploying", k=5, mode="keyword")
    assert any("deploy" in h.text.lower() for h in results)


@both_backends
def test_filters(indexed: Workspace) -> None:
    assert {h.type for h in indexed.search("tests", k=20, type="skill")} == {"skill"}
    assert {h.path for h in indexed.search("tests", k=20, path=".sessions/")} <= {
        p.relative_to(indexed.root).as_posix() for p in (indexed.root / ".sessions").iterdir()
    }
    by_session = indexed.search("error", k=20, session="20261119_142210_invoice-status-enum-ci")
    assert by_session and all(
        h.path == ".sessions/20261119_142210_invoice-status-enum-ci.md" or
        h.session == "20261119_142210_invoice-status-enum-ci" for h in by_session
    )  # fmt: skip
    reviewer = indexed.search("review", k=20, agent="reviewer")
    assert reviewer and {h.agent for h in reviewer} == {"reviewer"}
    since = indexed.search("invoice", k=50, since="2026-11-20")
    assert since and all(h.created >= "2026-11-20" for h in since)
    until = indexed.search("invoice", k=50, until="2026-11-17")
    assert until and all(h.created[:10] <= "2026-11-17" for h in until)
    with pytest.raises(ValueError, match="date"):
        indexed.search("x", since="last tuesday")


@both_backends
def test_archived_entries_are_left_out_unless_asked(indexed: Workspace) -> None:
    assert all(
        not h.text.startswith("Deploys go to Heroku") for h in indexed.search("Heroku", k=20)
    )
    archived = indexed.search("Heroku", k=20, include_archived=True)
    assert any(h.text.startswith("Deploys go to Heroku") for h in archived)


def test_access_counts_bump_and_survive_reindexing(indexed: Workspace) -> None:
    first = indexed.search("gh run watch", k=1)[0]
    for _ in range(4):
        indexed.search("gh run watch", k=1)
    again = indexed.search("gh run watch", k=1, track_access=False)[0]
    assert again.id == first.id and again.scores.frequency > first.scores.frequency
    indexed.close()
    shutil.rmtree(indexed.root / ".mdmem" / "index.db", ignore_errors=True)
    indexed.index.update(full=True)
    assert indexed.search("gh run watch", k=1)[0].scores.frequency == again.scores.frequency


@both_backends
def test_recency_decays_except_for_evergreen_files(indexed: Workspace) -> None:
    old = (dt.date.today() - dt.timedelta(days=60)).isoformat()
    note = indexed.root / "notes" / "old.md"
    note.write_text(
        f"- Kafka consumer lag alert fired <!-- mdmem id=m-00000000ff created={old} -->\n"
    )
    memory = indexed.root / "memory.md"
    memory.write_text(
        memory.read_text().replace(
            "## Facts\n",
            f"## Facts\n- Kafka topic retention is 7 days <!-- mdmem id=m-00000000fe created={old} -->\n",
            1,
        )
    )
    hits = {h.id: h for h in indexed.search("kafka", k=5, mode="keyword")}
    assert hits["m-00000000ff"].scores.recency == pytest.approx(np.exp(-2), rel=1e-3)
    assert hits["m-00000000fe"].scores.recency == 1.0


def test_unreadable_changed_file_is_reported_stale_and_its_last_version_served(
    indexed: Workspace,
) -> None:
    world = indexed.root / "world_state.md"
    world.write_bytes(world.read_bytes() + b"\n- broken \xff save\n")
    results = indexed.search("Homebrew PostgreSQL 14", k=5)
    assert results.stale == ["world_state.md"] and not results.fresh
    assert any(h.path == "world_state.md" for h in results)


def test_asearch_for_async_agents(indexed: Workspace) -> None:
    async def main():
        return await asyncio.gather(
            indexed.asearch("pdf export", k=2), indexed.asearch("ci postgres", k=2)
        )

    one, two = asyncio.run(main())
    assert len(one) == 2 and len(two) == 2


def test_keyword_mode_needs_no_model(tmp_path: Path) -> None:
    (tmp_path / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    (tmp_path / "memory.md").write_text("## Facts\n- The staging database is on port 6543\n")
    ws = Workspace.open(tmp_path)
    results = ws.search("staging database port")
    assert results.mode == "hybrid" and results[0].scores.vector is None
    assert ws.index.status().model is None and ws.index.status().embedded == 0


def test_session_neighbours_share_relevance_but_knowledge_files_do_not(tmp_path: Path) -> None:
    (tmp_path / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    (tmp_path / ".sessions").mkdir()
    (tmp_path / ".sessions" / "20260101_100000_trip.md").write_text(
        "# Session\n\n## Talk\n- Ana: where did you travel over the holidays?\n"
        "- Ben: Lisbon, and the tram rides were the best part\n- Ana: nice\n"
    )
    (tmp_path / "memory.md").write_text(
        "## Facts\n- Ana asked about holidays travel plans\n- Ben owns a bicycle\n"
    )
    ws = Workspace.open(tmp_path)
    hits = {h.text: h for h in ws.search("holidays travel", k=10, mode="keyword")}
    answer = hits["Ben: Lisbon, and the tram rides were the best part"]
    assert answer.scores.keyword is None and answer.scores.relevance > 0  # found via its neighbour
    assert "Ben owns a bicycle" not in hits  # knowledge entries don't borrow relevance
    config = ws.config.search.__class__(neighbour_weight=0, session_weight=0)
    plain = Workspace(tmp_path, ws.config.__class__(search=config, embedding=ws.config.embedding))
    assert "Ben: Lisbon, and the tram rides were the best part" not in {
        h.text for h in plain.search("holidays travel", k=10, mode="keyword")
    }


def test_chunker_version_change_rechunks_without_re_embedding(indexed: Workspace) -> None:
    conn = indexed.index._backend.conn
    conn.execute("UPDATE meta SET value = '0' WHERE key = 'chunker_version'")
    report = indexed.index.update()
    assert report.updated == indexed.index.status().files  # every file re-read and re-chunked
    assert report.embedded == 0  # same embedded text: the cache answers


@both_backends
def test_japanese_keyword_search(indexed: Workspace) -> None:
    (indexed.root / "notes" / "jp.md").write_text("- 毎晩データベースのバックアップを取る\n")
    assert indexed.search("バックアップ", k=1, mode="keyword")[0].path == "notes/jp.md"


def test_a_search_never_waits_long_for_another_writer(indexed: Workspace) -> None:
    """Another process holds the index (a watcher embedding a big change): the search answers
    from the index as it is, while the lock is still held, and names the files it could not
    index yet. The holder lets go only when told (or after 120 s): a search that waited for it
    would find it gone."""
    import subprocess
    import sys

    lock = indexed.index._backend.lock_path
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, select\nfrom filelock import FileLock\n"
            "with FileLock(sys.argv[1]):\n    print('held', flush=True)\n"
            "    select.select([sys.stdin], [], [], 120)\n"
        ), str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        (indexed.root / "notes" / "late.md").write_text("- Quarterly audit is in March\n")
        report = indexed.index._backend.sync(lock_timeout=0.2)
        assert report.busy and report.stale == ["notes/late.md"]
        results = indexed.search("quarterly audit", k=3)
        assert holder.poll() is None  # answered while the other process still held the index
        assert results.stale == ["notes/late.md"] and not results.fresh
    finally:
        holder.kill()
        holder.wait()
    results = indexed.search("quarterly audit", k=3)
    assert results.fresh and results[0].path == "notes/late.md"


@both_backends
def test_chunks_indexed_without_embedding_are_embedded_by_the_next_search(
    indexed: Workspace,
) -> None:
    (indexed.root / "notes" / "k.md").write_text("- The VPN config lives in 1Password\n")
    report = indexed.index.update(embed=False)
    assert report.added == 1 and report.embedded == 0
    assert indexed.index.status().embedded == indexed.index.status().chunks - 1
    hits = indexed.search("where is the vpn configuration", k=3, mode="vector")
    assert hits[0].path == "notes/k.md"
    assert indexed.index.status().embedded == indexed.index.status().chunks
    assert indexed.index.update().embedded == 0  # and a no-op sync does not look again


def test_an_index_of_an_older_schema_is_migrated_in_place(indexed: Workspace, embedder) -> None:
    from mdmem.index.sqlite.db import SCHEMA_VERSION

    conn = indexed.index._backend.conn
    conn.execute("PRAGMA user_version=1")  # as the first release left it
    indexed.close()
    ws = Workspace.open(indexed.root, embedder=embedder)
    assert ws.index._backend.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert ws.index.update().embedded == 0  # migrated, not rebuilt: every vector is still there
    assert ws.search("alembic enum", k=1, mode="keyword")


WRITER_LOOP = """
import random, sys, time
from pathlib import Path
from mdmem import Workspace
root = Path(sys.argv[1])
ws = Workspace.open(root)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    n = random.randrange(30)
    lines = [f"- alpha item {n} {i} {random.random()}" for i in range(random.randrange(5, 40))]
    (root / f"f{n}.md").write_text("# F\\n" + "\\n".join(lines) + "\\n")
    ws.index.update(embed=False)
"""


@pytest.mark.slow
def test_searches_see_one_consistent_index_while_another_process_writes(tmp_path: Path) -> None:
    """Layout, rows and caches come from one snapshot: no search sees half a sync."""
    import subprocess
    import sys
    import time

    from mdmem.index.search import Filters, search

    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    for n in range(30):
        (root / f"f{n}.md").write_text("# F\n" + "\n".join(f"- alpha {n} {i}" for i in range(20)))
    ws = Workspace.open(root)
    ws.index.update(embed=False)
    # the writer syncs for up to 120 s; the reader searches for at least 6 s and 100 searches
    # (on a loaded machine a search can take 100 ms), then stops it
    writer = subprocess.Popen([sys.executable, "-c", WRITER_LOOP, str(root), "120"])
    errors: list[str] = []
    runs = 0
    end = time.time() + 6
    while writer.poll() is None and (time.time() < end or runs < 100):
        try:
            search(
                ws.index._backend,
                None,
                "alpha item",
                k=10,
                mode="keyword",
                config=ws.config.search,
                filters=Filters(),
            )
        except Exception as exc:  # any error here is a torn read
            errors.append(f"{type(exc).__name__}: {exc}")
        runs += 1
    assert writer.poll() is None, "the writer stopped before the searches were done"
    writer.terminate()
    writer.wait(30)
    assert runs >= 100 and errors == []
