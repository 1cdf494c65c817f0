"""Sharing a workspace through real git: a bare remote, two clones, concurrent writes on both,
``sync`` both ways with the real merge driver (the installed ``mdmem`` command, run by git)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem.errors import FileProblem
from mdmem.markdown.parse import parse_document
from mdmem.memory.git_sync import (
    CONFLICTS,
    REFUSED,
    SyncError,
    configure_driver,
    install_gitattributes,
)
from mdmem.workspace import Workspace

MDMEM = str(Path(sys.executable).with_name("mdmem"))
pytestmark = pytest.mark.slow


def git(where: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True)
    return done.stdout


def clone(remote: Path, target: Path) -> Path:
    git(remote.parent, "clone", "--quiet", str(remote), str(target))
    git(target, "config", "user.name", target.name)
    git(target, "config", "user.email", f"{target.name}@example.invalid")
    git(target, "config", "commit.gpgsign", "false")
    configure_driver(target, program=MDMEM)
    return target


@pytest.fixture
def clones(tmp_path: Path, embedder) -> tuple[Workspace, Workspace, dict[str, str]]:
    """Two clones of one workspace, seeded with an entry to supersede, a task, a world fact
    and a pool key; and the ids of the seeded entries."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    a = clone(remote, tmp_path / "alice")
    seed = Workspace.init(a, mode="full", agent="alice")
    install_gitattributes(a)
    ids = {
        "deploy": seed.remember("Deploys go to Heroku").id,
        "ci": seed.remember("CI runs on Jenkins").id,
    }
    seed.task.new("Launch", ["migrate the db", "write the docs", "tag the release"])
    seed.world.set("db", "postgres 15")
    seed.pool("team").write("plan", "draft", writer="lead")
    git(a, "add", "--all")
    git(a, "commit", "--quiet", "-m", "seed")
    git(a, "push", "--quiet", "-u", "origin", "main")
    b = clone(remote, tmp_path / "bob")
    return Workspace.open(a, embedder=embedder), Workspace.open(b, embedder=embedder), ids


def index_rows(ws: Workspace) -> list[tuple]:
    with sqlite3.connect(ws.status().db_path) as conn:
        return conn.execute(
            "SELECT path, start_line, end_line, heading, text, type, entry_id, archived "
            "FROM chunks ORDER BY path, start_line, text"
        ).fetchall()


def full_reindex_rows(ws: Workspace, embedder, where: Path) -> list[tuple]:
    shutil.copytree(ws.root, where, ignore=shutil.ignore_patterns(".mdmem", ".git"))
    with Workspace.open(where, embedder=embedder) as fresh:
        fresh.sync(full=True)
        return index_rows(fresh)


def live(ws: Workspace, rel: str) -> list[str]:
    doc = parse_document(rel, (ws.root / rel).read_text(encoding="utf-8"))
    return [e.text for e in doc.entries if not e.archived]


def archived(ws: Workspace, rel: str) -> list[str]:
    doc = parse_document(rel, (ws.root / rel).read_text(encoding="utf-8"))
    return [e.text for e in doc.entries if e.archived]


def test_two_clones_write_at_once_and_sync_both_ways(clones, embedder, tmp_path: Path) -> None:
    alice, bob, ids = clones
    # both machines write before either syncs
    alice.remember("Alice: the API uses JWT")
    alice.supersede(ids["deploy"], "Deploys go to Fly.io")
    alice.world.set("db", "postgres 16")
    alice.task.complete(1)
    alice.pool("team").write("findings/alice", {"latency_ms": 12}, writer="alice")
    alice.pool("team").write("plan", "alice's plan", writer="alice")
    bob.remember("Bob: the cache is Redis 7")
    bob.supersede(ids["ci"], "CI runs on GitHub Actions")
    bob.world.set("queue", "sqs")
    bob.task.complete(3)
    bob.pool("team").write("findings/bob", "p95 is 40 ms", writer="bob")
    bob.pool("team").write("plan", "bob's plan", writer="bob")  # the newer write

    first = alice.git_sync()
    assert first.commit and first.ahead == 1 and first.behind == 0
    second = bob.git_sync()  # pulls alice's commit: every file merged by the driver
    assert second.behind == 1 and second.ahead == 1
    third = alice.git_sync()
    assert third.behind == 1 and third.committed == ()

    # round two, the other way: bob pushes first, alice merges
    bob.remember("Bob: staging is eu-west-1")
    bob.git_sync()
    # a write, then at once a sync whose rebase rewrites that file: within the write's
    # late-save window, so git's rewrite must not look like a person's old-copy save
    alice.remember("Alice: prod is us-east-1")
    alice.git_sync()
    bob.git_sync()

    assert git(alice.root, "rev-parse", "HEAD") == git(bob.root, "rev-parse", "HEAD")
    assert git(alice.root, "status", "--porcelain") == ""
    for ws in (alice, bob):
        memory = live(ws, "memory.md")
        for text in (
            "Alice: the API uses JWT",
            "Bob: the cache is Redis 7",
            "Deploys go to Fly.io",
            "CI runs on GitHub Actions",
            "Bob: staging is eu-west-1",
            "Alice: prod is us-east-1",
        ):
            assert memory.count(text) == 1, (text, memory)
        assert len(memory) == 6
        assert sorted(archived(ws, "memory.md")) == ["CI runs on Jenkins", "Deploys go to Heroku"]
        assert ws.world.as_dict() == {"db": "postgres 16", "queue": "sqs"}
        state = ws.task.state()
        assert [i.done for i in state.items] == [True, False, True] and state.pointer == 2
        pool = ws.pool("team")
        assert pool.read("plan").content == "bob's plan"
        assert [e.content for e in pool.history("plan")] == ["alice's plan"]
        assert pool.read("findings/alice").content == {"latency_ms": 12}
        assert pool.read("findings/bob").content == "p95 is 40 ms"
        assert not ws.status().problems
        assert index_rows(ws) == full_reindex_rows(ws, embedder, tmp_path / f"fresh-{ws.root.name}")


def test_a_true_conflict_stops_the_sync_and_the_file_is_never_written(clones) -> None:
    alice, bob, _ = clones
    alice.world.set("db", "postgres 16")
    bob.world.set("db", "mysql 8")
    alice.git_sync()
    with pytest.raises(SyncError) as caught:
        bob.git_sync()
    assert caught.value.code == CONFLICTS and "world_state.md" in str(caught.value)
    text = (bob.root / "world_state.md").read_text()
    assert "<<<<<<< ours" in text and "mysql 8" in text and "postgres 16" in text
    with pytest.raises(FileProblem, match=r"world_state\.md:\d+: unresolved git conflict"):
        bob.world.set("cache", "redis")
    assert (bob.root / "world_state.md").read_text() == text
    assert any("world_state.md:" in p and "conflict" in p for p in bob.search("db").problems)
    with pytest.raises(SyncError) as again:  # a rebase in progress: refused, not guessed
        bob.git_sync()
    assert again.value.code == REFUSED


def test_sync_refuses_dirty_files_outside_the_workspace(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    repo = clone(remote, tmp_path / "repo")
    (repo / "README.txt").write_text("project\n")
    ws = Workspace.init(repo / "memory", mode="minimal")
    with (ws.root / "mdmem.toml").open("a") as config:  # keyword only: no model to load
        config.write('[embedding]\nmodel = ""\n')
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "seed")
    git(repo, "push", "--quiet", "-u", "origin", "main")
    ws.remember("A fact to share")
    (repo / "README.txt").write_text("project, edited\n")
    cli = [MDMEM, "-w", str(ws.root), "sync", "--json"]
    done = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert done.returncode == REFUSED, done.stderr
    assert "README.txt" in json.loads(done.stdout)["error"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"  # nothing committed
    git(repo, "checkout", "README.txt")
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, check=False)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["committed"] == ["memory/memory.md"]
    assert git(repo, "status", "--porcelain").strip() == "M memory/memory.md"
    done = subprocess.run(cli, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ahead"] == 1
    assert git(remote, "log", "-1", "--format=%s", "main").startswith("mdmem sync: 1 file(s)")


def test_init_installs_the_driver_in_a_git_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    done = subprocess.run([MDMEM, "init", str(repo / "mem")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "merge.mdmem.driver" in done.stdout
    attributes = (repo / "mem" / ".gitattributes").read_text()
    assert "memory.md merge=mdmem" in attributes and "shared/*.md merge=mdmem" in attributes
    assert git(repo, "config", "merge.mdmem.driver").strip() == "mdmem merge-driver %O %A %B %P"
    checked = git(repo, "check-attr", "merge", "mem/shared/team.md", "mem/.notes/x/a.md")
    assert checked.count("merge: mdmem") == 2
    again = subprocess.run([MDMEM, "init", str(repo / "mem")], capture_output=True, text=True)
    assert (repo / "mem" / ".gitattributes").read_text() == attributes  # added once
    assert "kept" in again.stdout
