"""Readers without the files: a URL and a workspace name (library, CLI, MCP), hits stamped with
the index generation and last sync, many threads on one pool, the schema migration to
postings, and the faults a reader meets. On a real throwaway cluster (tests/postgres_cluster.py)."""

from __future__ import annotations

import json
import shutil
import threading
from dataclasses import replace
from pathlib import Path

import anyio
import psycopg
import pytest
from mcp import Client
from postgres_cluster import Cluster
from typer.testing import CliRunner

from mdmem import MdmemError, RemoteIndex, Workspace
from mdmem.cli import app
from mdmem.config import IndexConfig, load_config
from mdmem.index.postgres import db
from mdmem.index.postgres.db import IndexServerError
from mdmem.integrations.mcp_remote import build_remote_server

pytestmark = pytest.mark.slow
QUERY = "which port does the compose postgres use"


@pytest.fixture(scope="module")
def shared(tmp_path_factory, indexed_template: Path, embedder, postgres: Cluster):
    """The example workspace indexed on the server once (name ``shared``), its writer open."""
    root = tmp_path_factory.mktemp("remote") / "ws"
    shutil.copytree(indexed_template, root)
    config = replace(load_config(root), index=IndexConfig("postgres", postgres.url, "shared"))
    ws = Workspace(root, config, embedder=embedder)
    ws.index.copy_to_postgres()
    yield ws
    ws.close()


@pytest.fixture
def remote(shared: Workspace, postgres: Cluster, embedder):
    index = RemoteIndex(postgres.url, "shared", embedder=embedder)
    yield index
    index.close()


def test_a_remote_reader_searches_as_the_workspace_does_and_says_how_fresh(
    shared: Workspace, remote: RemoteIndex
) -> None:
    mine = shared.search(QUERY, k=5, track_access=False)
    theirs = remote.search(QUERY, k=5, track_access=False)
    assert [h.citation for h in theirs] == [h.citation for h in mine]
    assert [h.score for h in theirs] == pytest.approx([h.score for h in mine])
    status = remote.status()
    assert status.chunks > 100 and status.embedded == status.chunks
    assert status.model == shared.index.embedder().model_id and status.indexed_from
    for hit in (*theirs, *mine):  # the writer's own hits carry them too
        assert (hit.generation, hit.synced) == (status.generation, status.last_sync)
        assert hit.to_dict()["index"] == {"generation": hit.generation, "synced": hit.synced}
    assert shared.index.status().generation == status.generation
    assert {h.scope for h in theirs} == {h.scope for h in mine} and theirs[0].workspace == "shared"
    local = remote.search("session", k=5, scopes="local", track_access=False)
    assert local and all(h.path.startswith(".sessions/") for h in local)
    assert remote.search(QUERY, k=5, scopes=["inherited"], track_access=False) == []
    (shared.root / "notes" / "zanzibar.md").write_text("- Zanzibar is the codename\n")
    shared.index.update()
    after = remote.search("Zanzibar codename", k=1)
    assert after[0].path == "notes/zanzibar.md" and after[0].generation > status.generation
    assert remote.status().last_sync >= status.last_sync


def test_what_needs_the_files_says_so_in_one_line(remote: RemoteIndex) -> None:
    for name in ("context", "remember", "sync", "forget"):
        with pytest.raises(MdmemError, match=rf"^{name} needs the workspace's files; .* only"):
            getattr(remote, name)
    with pytest.raises(AttributeError):
        remote.no_such_thing  # noqa: B018


def test_many_threads_search_through_one_pool(remote: RemoteIndex) -> None:
    want = [h.citation for h in remote.search(QUERY, k=3, track_access=False)]
    got: list[list[str]] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            for _ in range(3):
                got.append([h.citation for h in remote.search(QUERY, k=3, track_access=False)])
        except BaseException as exc:  # (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == [want] * 18
    assert remote.pool.get_stats()["pool_max"] == 4


def test_the_cli_with_a_url_and_a_name_and_no_folder(
    shared: Workspace, postgres: Cluster, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no workspace here or above
    monkeypatch.delenv("MDMEM_WORKSPACE", raising=False)
    monkeypatch.setenv("MDMEM_SERVER_AUTO", "0")
    runner = CliRunner()
    args = ["search", "--url", postgres.url, "--index-workspace", "shared", QUERY, "-k", "2"]
    out = runner.invoke(app, [*args, "--json", "--mode", "keyword"])
    assert out.exit_code == 0, out.output
    hits = json.loads(out.output)["hits"]
    assert hits[0]["path"] == shared.search(QUERY, k=1, mode="keyword")[0].path
    assert set(hits[0]["index"]) == {"generation", "synced"}
    monkeypatch.setenv("MDMEM_INDEX_URL", postgres.url)
    monkeypatch.setenv("MDMEM_INDEX_WORKSPACE", "shared")
    out = runner.invoke(app, ["status"])
    assert out.exit_code == 0, out.output
    assert "generation" in out.output and "last sync" in out.output and "search only" in out.output
    out = runner.invoke(app, ["context", "the database"])
    assert out.exit_code == 1
    assert out.output.startswith("mdmem: error: mdmem context needs the workspace's files")
    monkeypatch.setenv("MDMEM_INDEX_WORKSPACE", "no_such_workspace")
    out = runner.invoke(app, ["search", "anything"])
    assert "has no workspace 'no_such_workspace'" in str(out.exception)  # (main() prints it)


def test_mcp_serves_search_and_status_only(remote: RemoteIndex) -> None:
    async def run() -> None:
        async with Client(build_remote_server(remote)) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == {"search", "status"}
            found = await client.call_tool("search", {"query": QUERY, "k": 2})
            data = found.structured_content
            want = remote.search(QUERY, k=2, track_access=False)
            assert [h["citation"] for h in data["hits"]] == [h.citation for h in want]
            assert data["hits"][0]["generation"] == remote.stamp().generation
            status = await client.call_tool("status", {})
            assert status.structured_content["generation"] == remote.stamp().generation

    anyio.run(run)


def test_a_version_1_schema_gains_postings_with_the_same_scores(
    shared: Workspace, postgres: Cluster, embedder
) -> None:
    """An index made before postings existed (schema 1) is migrated on first use: its
    postings are rebuilt from the tsvectors, and the keyword scores do not change."""
    index = shared.index._backend
    want = {h.citation: h.scores.keyword for h in shared.search("alembic enum migration", k=8)}
    conn = index.conn
    conn.execute("DROP TABLE postings")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    shared.close()
    reader = RemoteIndex(postgres.url, "shared", embedder=embedder)
    got = {h.citation: h.scores.keyword for h in reader.search("alembic enum migration", k=8)}
    reader.close()
    assert got == pytest.approx(want, rel=1e-9)
    with psycopg.connect(postgres.url) as check:
        version = db.schema_version(check, db.schema_name("shared"))
    assert version == db.SCHEMA_VERSION


def test_remote_faults_are_one_line(postgres: Cluster, tmp_path: Path) -> None:
    cases = [
        (f"postgresql://postgres@/mdmem?host={tmp_path}/nothing", "cannot reach PostgreSQL"),
        (postgres.url_for(password="wrong"), "refused the credentials"),
    ]
    for url, what in cases:
        with pytest.raises(IndexServerError, match=what) as caught:
            RemoteIndex(url, "shared").search("anything")
        assert "\n" not in str(caught.value)
    with pytest.raises(IndexServerError, match=r"needs the workspace's name"):
        RemoteIndex(postgres.url, "")


def test_a_server_without_pgvector_says_to_install_it(shared: Workspace, embedder) -> None:
    """A real server to which pgvector was never installed (the local PostgreSQL relocated
    without it: tests/postgres_cluster.py), for the writer and for a remote reader."""
    from postgres_cluster import cluster

    with cluster(pgvector=False) as bare:
        config = replace(shared.config, index=IndexConfig("postgres", bare.url, "shared"))
        writer = Workspace(shared.root, config, embedder=embedder)
        for attempt in (lambda: writer.search("alembic", k=1), RemoteIndex(bare.url, "x").status):
            with pytest.raises(IndexServerError, match="has no pgvector extension: install it"):
                attempt()
        writer.close()
