"""Sharing a workspace through real git: a bare remote, two clones, concurrent writes on both,
``sync`` both ways with the real merge driver (the installed ``mdmem`` command, run by git)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem.config import load_config, set_local_agent
from mdmem.errors import ConfigError, FileProblem
from mdmem.markdown.parse import parse_document
from mdmem.sharing.git_sync import (
    CONFLICTS,
    DRIVER,
    LEGACY_DRIVER,
    LOST,
    REFUSED,
    SyncError,
    configure_driver,
    driver_command,
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
    configure_driver(target)
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
    seed.sharing.pool("team").write("plan", "draft", writer="lead")
    git(a, "add", "--all")
    git(a, "commit", "--quiet", "-m", "seed")
    git(a, "push", "--quiet", "-u", "origin", "main")
    b = clone(remote, tmp_path / "bob")
    return Workspace.open(a, embedder=embedder), Workspace.open(b, embedder=embedder), ids


def index_rows(ws: Workspace) -> list[tuple]:
    with sqlite3.connect(ws.index.status().db_path) as conn:
        return conn.execute(
            "SELECT path, start_line, end_line, heading, text, type, entry_id, archived "
            "FROM chunks ORDER BY path, start_line, text"
        ).fetchall()


def full_reindex_rows(ws: Workspace, embedder, where: Path) -> list[tuple]:
    shutil.copytree(ws.root, where, ignore=shutil.ignore_patterns(".mdmem", ".git"))
    with Workspace.open(where, embedder=embedder) as fresh:
        fresh.index.update(full=True)
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
    alice.sharing.pool("team").write("findings/alice", {"latency_ms": 12}, writer="alice")
    alice.sharing.pool("team").write("plan", "alice's plan", writer="alice")
    bob.remember("Bob: the cache is Redis 7")
    bob.supersede(ids["ci"], "CI runs on GitHub Actions")
    bob.world.set("queue", "sqs")
    bob.task.complete(3)
    bob.sharing.pool("team").write("findings/bob", "p95 is 40 ms", writer="bob")
    bob.sharing.pool("team").write("plan", "bob's plan", writer="bob")  # the newer write

    first = alice.sharing.sync()
    assert first.commit and first.ahead == 1 and first.behind == 0
    second = bob.sharing.sync()  # pulls alice's commit: every file merged by the driver
    assert second.behind == 1 and second.ahead == 1
    third = alice.sharing.sync()
    assert third.behind == 1 and third.committed == ()

    # round two, the other way: bob pushes first, alice merges
    bob.remember("Bob: staging is eu-west-1")
    bob.sharing.sync()
    # a write, then at once a sync whose rebase rewrites that file: within the write's
    # late-save window, so git's rewrite must not look like a person's old-copy save
    alice.remember("Alice: prod is us-east-1")
    alice.sharing.sync()
    bob.sharing.sync()

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
        pool = ws.sharing.pool("team")
        assert pool.read("plan").content == "bob's plan"
        assert [e.content for e in pool.history("plan")] == ["alice's plan"]
        assert pool.read("findings/alice").content == {"latency_ms": 12}
        assert pool.read("findings/bob").content == "p95 is 40 ms"
        assert not ws.index.status().problems
        assert index_rows(ws) == full_reindex_rows(ws, embedder, tmp_path / f"fresh-{ws.root.name}")


def test_a_true_conflict_stops_the_sync_and_the_file_is_never_written(clones) -> None:
    """A world fact set differently on both sides: sync undoes the pull (never leaves a
    rebase half done) and says how to settle it; following that advice leaves both values
    between conflict markers, which no program write touches until a person resolves them."""
    alice, bob, _ = clones
    alice.world.set("db", "postgres 16")
    bob.world.set("db", "mysql 8")
    alice.sharing.sync()
    with pytest.raises(SyncError) as caught:
        bob.sharing.sync()
    assert caught.value.code == CONFLICTS and "world_state.md" in str(caught.value)
    assert "the pull was undone" in str(caught.value)
    assert not (bob.root / ".git" / "rebase-merge").exists()
    assert "mysql 8" in (bob.root / "world_state.md").read_text()
    assert git(bob.root, "status", "--porcelain") == ""  # its work committed, nothing lost
    # the advice, followed
    assert "git pull --no-rebase" in str(caught.value)
    subprocess.run(["git", "pull", "--no-rebase"], cwd=bob.root, capture_output=True)
    text = (bob.root / "world_state.md").read_text()
    assert "<<<<<<< ours" in text and "mysql 8" in text and "postgres 16" in text
    with pytest.raises(FileProblem, match=r"world_state\.md:\d+: unresolved git conflict"):
        bob.world.set("cache", "redis")
    assert (bob.root / "world_state.md").read_text() == text
    assert any("world_state.md:" in p and "conflict" in p for p in bob.search("db").problems)
    with pytest.raises(SyncError) as again:  # a merge the person is in: refused, not guessed
        bob.sharing.sync()
    assert again.value.code == REFUSED


def test_sync_refuses_dirty_files_outside_the_workspace(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    repo = clone(remote, tmp_path / "repo")
    (repo / "README.txt").write_text("project\n")
    ws = Workspace.init(repo / "memory", mode="minimal")
    install_gitattributes(ws.root)
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
    # the interpreter by absolute path: git finds it whatever its PATH holds
    assert git(repo, "config", "merge.mdmem.driver").strip() == (
        f"{sys.executable} -m mdmem merge-driver %O %A %B %P"
    )
    checked = git(repo, "check-attr", "merge", "mem/shared/team.md", "mem/.notes/x/a.md")
    assert checked.count("merge: mdmem") == 2
    again = subprocess.run([MDMEM, "init", str(repo / "mem")], capture_output=True, text=True)
    assert (repo / "mem" / ".gitattributes").read_text() == attributes  # added once
    assert "kept" in again.stdout


# ---- issue 32: a driver git cannot run, duplicates, rival replacements, the agent per clone ----


def off_path_env() -> dict[str, str]:
    """The environment of a shell where the virtual environment is not activated: no
    ``mdmem`` on PATH (the venv's bin, and any other folder holding one, left out)."""
    venv_bin = Path(sys.executable).parent
    dirs = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and Path(d) != venv_bin and not (Path(d) / "mdmem").exists()
    ]
    env = {**os.environ, "PATH": os.pathsep.join(dirs)}
    for name in ("VIRTUAL_ENV", "MDMEM_AGENT", "MDMEM_WORKSPACE"):
        env.pop(name, None)
    return env


def mdmem(env: dict[str, str], where: Path, *args: str, code: int = 0) -> str:
    done = subprocess.run(
        [MDMEM, "-w", str(where), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done.stdout + done.stderr


def plain_clone(remote: Path, target: Path) -> Path:
    """A clone as git makes it: no merge driver in its config."""
    git(remote.parent, "clone", "--quiet", str(remote), str(target))
    git(target, "config", "user.name", target.name)
    git(target, "config", "user.email", f"{target.name}@example.invalid")
    git(target, "config", "commit.gpgsign", "false")
    return target


def entries(root: Path, rel: str = "memory.md") -> list:
    return parse_document(rel, (root / rel).read_text(encoding="utf-8")).entries


def test_two_clones_with_mdmem_off_gits_path_lose_and_duplicate_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's reproduction, run as a user would: ``.venv/bin/mdmem`` by path, the venv
    not activated (alice syncs from Python, with the same PATH). Before: exit 4, a false
    "conflict markers" message, an entry lost."""
    env = off_path_env()
    assert shutil.which("mdmem", path=env["PATH"]) is None
    monkeypatch.setenv("PATH", env["PATH"])  # what git, and so the driver, inherit
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    a = plain_clone(remote, tmp_path / "alice")
    Workspace.init(a, mode="minimal", agent="alice")
    install_gitattributes(a)
    configure_driver(a)
    with (a / "mdmem.toml").open("a") as config:  # keyword only: no model to load
        config.write('[embedding]\nmodel = ""\n')
    with Workspace.open(a) as seeding:
        seed = seeding.remember("Deploys go to Heroku").id
    git(a, "add", "--all")
    git(a, "commit", "--quiet", "-m", "seed")
    git(a, "push", "--quiet", "-u", "origin", "main")
    b = plain_clone(remote, tmp_path / "bob")
    assert "mdmem.local.toml" in mdmem(env, b, "init", str(b), "--agent", "bob")

    with Workspace.open(a) as alice:
        assert alice.config.agent == "alice"
        alice.remember("Alice: the API uses JWT")
        alice.remember("Both: staging is eu-west-1")
        alice.supersede(seed, "Deploys go to Fly.io")
    with Workspace.open(b) as bob:
        assert bob.config.agent == "bob"  # mdmem.local.toml, this clone only
        bob.remember("Bob: the cache is Redis 7")
        twin = bob.remember("Both: staging is eu-west-1").id
        render = bob.supersede(seed, "Deploys go to Render").id
        bob.lifecycle.relate(render, twin, "supports")

    with Workspace.open(a) as alice:
        alice.sharing.sync()
    said = mdmem(env, b, "sync")
    assert "to settle:" in said and "contradicts" in said and "conflict markers" not in said
    with Workspace.open(a) as alice:
        assert alice.sharing.sync().behind == 1

    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    for root in (a, b):
        assert git(root, "status", "--porcelain") == ""
        assert "mdmem.local.toml" not in git(root, "ls-files")
        found = entries(root)
        live = sorted(e.text for e in found if not e.archived)
        assert live == [
            "Alice: the API uses JWT",
            "Bob: the cache is Redis 7",
            "Both: staging is eu-west-1",
            "Deploys go to Fly.io",
            "Deploys go to Render",
        ]
        assert [e.id for e in found if e.archived] == [seed]  # archived once
        kept = next(e for e in found if e.text.startswith("Both:"))
        by_id = {e.id: e for e in found}
        assert by_id[render].meta["supports"] == kept.id  # the link follows the one kept
        contradiction = [e for e in found if "contradicts" in e.meta]
        assert len(contradiction) == 1 and by_id[contradiction[0].meta["contradicts"]]
    with Workspace.open(a) as alice:  # what `mdmem related` prints
        assert [(r.source, r.kind) for r in alice.lifecycle.related(kept.id)] == [
            (render, "supports")
        ]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Workspace, Workspace, Path]:
    """A remote and two keyword-only clones that ran ``mdmem init``'s git set-up."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "-b", "main", str(remote)], check=True)
    a = clone(remote, tmp_path / "a")
    Workspace.init(a, mode="minimal", agent="a")
    install_gitattributes(a)
    with (a / "mdmem.toml").open("a") as config:
        config.write('[embedding]\nmodel = ""\n')
    git(a, "add", "--all")
    git(a, "commit", "--quiet", "-m", "seed")
    git(a, "push", "--quiet", "-u", "origin", "main")
    b = clone(remote, tmp_path / "b")
    return Workspace.open(a), Workspace.open(b), remote


def test_sync_refuses_a_driver_git_cannot_run_and_migrates_the_bare_name(pair) -> None:
    alice, bob, _ = pair
    alice.remember("Alice's fact")
    alice.sharing.sync()
    bob.remember("Bob's fact")
    before = git(bob.root, "rev-parse", "HEAD")
    git(bob.root, "config", "--unset", "merge.mdmem.driver")  # a clone that never ran init
    with pytest.raises(SyncError, match=r"no merge\.mdmem\.driver.*mdmem init") as caught:
        bob.sharing.sync()
    assert caught.value.code == REFUSED
    stale = f"/gone/venv/bin/python -m mdmem {DRIVER}"  # a virtual environment rebuilt
    git(bob.root, "config", "merge.mdmem.driver", stale)
    with pytest.raises(SyncError, match=r"does not exist any more.*mdmem init") as caught:
        bob.sharing.sync()
    assert caught.value.code == REFUSED
    assert git(bob.root, "rev-parse", "HEAD") == before  # nothing committed or pulled
    git(bob.root, "config", "merge.mdmem.driver", LEGACY_DRIVER)  # what older versions set
    report = bob.sharing.sync()
    assert report.migrated == driver_command() and report.behind == 1
    assert git(bob.root, "config", "merge.mdmem.driver").strip() == driver_command()
    assert sorted(e.text for e in entries(bob.root)) == ["Alice's fact", "Bob's fact"]


def test_a_failed_or_lossy_merge_is_undone_and_never_pushed(pair) -> None:
    alice, bob, remote = pair
    alice.remember("Alice's fact")
    alice.sharing.sync()
    bob.remember("Bob's fact")
    # a driver that fails: git leaves the file unmerged with no markers in it
    git(bob.root, "config", "merge.mdmem.driver", f"false {DRIVER}")
    with pytest.raises(SyncError) as caught:
        bob.sharing.sync()
    assert caught.value.code == CONFLICTS
    assert "no conflict markers" in str(caught.value) and "undone" in str(caught.value)
    assert not (bob.root / ".git" / "rebase-merge").exists()
    assert [e.text for e in entries(bob.root)] == ["Bob's fact"]
    mine = git(bob.root, "rev-parse", "HEAD")
    # a driver that says it merged but kept one side only: the check after the pull sees it
    git(bob.root, "config", "merge.mdmem.driver", f"true {DRIVER}")
    remote_head = git(remote, "rev-parse", "main")
    with pytest.raises(SyncError, match=r"would have lost 1 entry.*Bob's fact") as caught:
        bob.sharing.sync()
    assert caught.value.code == LOST
    assert git(bob.root, "rev-parse", "HEAD") == mine  # back at its own work
    assert git(remote, "rev-parse", "main") == remote_head  # nothing pushed
    configure_driver(bob.root)
    bob.sharing.sync()
    assert sorted(e.text for e in entries(bob.root)) == ["Alice's fact", "Bob's fact"]


def test_the_agent_of_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace.init(tmp_path / "ws", mode="minimal", agent="shared")
    assert load_config(ws.root).agent == "shared"
    set_local_agent(ws.root, "laptop")
    assert load_config(ws.root).agent == "laptop"
    monkeypatch.setenv("MDMEM_AGENT", "ci-runner")
    assert load_config(ws.root).agent == "ci-runner"
    monkeypatch.setenv("MDMEM_AGENT", "../x")
    with pytest.raises(ConfigError, match=r"\$MDMEM_AGENT"):
        load_config(ws.root)
    monkeypatch.delenv("MDMEM_AGENT")
    (ws.root / "mdmem.local.toml").write_text('agent = "laptop"\nmode = "full"\n')
    with pytest.raises(ConfigError, match=r"mdmem\.local\.toml: unknown key 'mode'"):
        load_config(ws.root)
