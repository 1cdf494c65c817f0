"""Issue 39's git sync defects (D3-D11), each as the interleaving that broke it, with real git:
a bare remote, clones as workspaces, ``mdmem sync`` (rebase and merge) and plain pulls.

Each ends the way every sync must: after every clone syncs twice, the clones hold the same
files; every memory acknowledged is live once or archived once; forgotten text is nowhere.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from git_world import SEED, GitWorld, count, git, without_meta

from mdmem.sharing.git_merge_driver import run_driver

pytestmark = pytest.mark.slow
X, Y = SEED


@pytest.fixture
def world(tmp_path: Path) -> GitWorld:
    return GitWorld(tmp_path, 2)


def settle(w: GitWorld, rebase: bool = True) -> None:
    """Every clone syncs twice, in turn; each must succeed; then all hold the same files."""
    for _ in range(2):
        for i in range(len(w.roots)):
            done = w.sync(i, rebase=rebase)
            assert done.code == 0, (i, done)
    first = w.files(0)
    for i in range(1, len(w.roots)):
        assert w.files(i) == first, f"c{i} differs from c0"
    for i in range(len(w.roots)):
        assert not w.in_progress(i)


def once(w: GitWorld, text: str, *, live: bool | None = None) -> None:
    for i in range(len(w.roots)):
        found = count(w.entries(i), text)
        assert sum(found) == 1, (i, text, found)
        if live is not None:
            assert found == ((1, 0) if live else (0, 1)), (i, text, found)


@pytest.mark.parametrize("rebase", [True, False], ids=["rebase", "merge"])
def test_d3_update_then_supersede_against_an_update_converges(world, rebase) -> None:
    """C updates X then supersedes it while A updates X and syncs first. Before: C's sync
    exited 6 on every retry (and the advice it printed, git pull --no-rebase, dropped C's
    text). Now both versions stay: A's edit live, C's edit archived under its replacement."""
    w = world
    w.update(1, X, "X as C saw it")
    w.supersede(1, "X as C saw it", "Y from C replaces X")
    w.update(0, X, "X as A saw it")
    assert w.sync(0, rebase=rebase).code == 0
    with w.ws(1) as ws:  # the user is told that both stay
        report = ws.sharing.sync(rebase=rebase)
    assert any("both versions kept" in note for note in report.kept_both), report
    settle(w, rebase)
    once(w, "X as A saw it", live=True)
    once(w, "X as C saw it", live=False)
    once(w, "Y from C replaces X", live=True)


@pytest.mark.parametrize("rebase", [True, False], ids=["rebase", "merge"])
def test_d4_a_persons_paragraph_between_entries_stays_its_own_paragraph(world, rebase) -> None:
    """A person writes a paragraph between two entries; B remembers and syncs first. Before:
    A's sync exited 6 every time, and a plain git pull --rebase glued the paragraph onto B's
    entry (no blank line)."""
    w = world
    note = "A note the person wrote between the two entries."
    w.edit(0, lambda t: t.replace(f"- {Y}", f"\n{note}\n\n- {Y}", 1))
    w.remember(1, "B: the cache is Redis 7")
    assert w.sync(1, rebase=rebase).code == 0
    settle(w, rebase)
    text = w.text(0)
    assert f"\n\n{note}\n\n" in text
    once(w, "B: the cache is Redis 7", live=True)
    assert [e.text for e in w.entries(0) if e.text == note] == [note]


def test_d4_plain_git_pull_keeps_the_paragraph_apart(world) -> None:
    w = world
    note = "A note the person wrote between the two entries."
    w.edit(0, lambda t: t.replace(f"- {Y}", f"\n{note}\n\n- {Y}", 1))
    w.remember(1, "B: the cache is Redis 7")
    assert w.sync(1).code == 0
    assert w.pull(0, rebase=True).code == 0
    assert f"\n\n{note}\n\n" in w.text(0)
    entries = {e.text: e for e in w.entries(0)}
    assert note in entries and "B: the cache is Redis 7" in entries


@pytest.mark.parametrize("rebase", [True, False], ids=["rebase", "merge"])
def test_d5_a_persons_reordering_is_kept(world, rebase) -> None:
    """A moves "Fact three" to the top of its section; B remembers and syncs first. Before: A's
    sync succeeded with the original order back and A's commit dropped as empty."""
    w = world
    w.remember(0, "Fact three")
    settle(w, rebase)

    def to_top(text: str) -> str:
        lines = text.splitlines(keepends=True)
        three = next(n for n, line in enumerate(lines) if line.startswith("- Fact three"))
        first = next(n for n, line in enumerate(lines) if line.startswith(f"- {X}"))
        line = lines.pop(three)
        lines.insert(first, line)
        return "".join(lines)

    w.edit(0, to_top)
    w.remember(1, "B: staging is eu-west-1")
    assert w.sync(1, rebase=rebase).code == 0
    settle(w, rebase)
    live = [e.text for e in w.entries(1) if not e.archived]
    assert live.index("Fact three") < live.index(X) < live.index(Y)
    assert "B: staging is eu-west-1" in live


def test_d6_sync_and_remember_at_once_lose_nothing_and_never_stick(world) -> None:
    """``mdmem sync`` runs while the agent remembers in the same clone. Before (5 of 10): sync
    exited 1 leaving .git/rebase-merge, the memory sat uncommitted, every later sync exited 3,
    and the advice ("abort it") deleted the memory."""
    w = world
    written: list[str] = []
    for n in range(2):
        w.remember(1, f"B's fact {n}")
        assert w.sync(1).code == 0
        w.remember(0, f"A's first fact {n}")
        sync = subprocess.Popen(
            [*_cli(w, 0)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        k = 0
        while sync.poll() is None or k < 2:  # the agent keeps writing while sync runs
            w.remember(0, f"A's racing fact {n}.{k}")
            written.append(f"A's racing fact {n}.{k}")
            k += 1
        said = sync.communicate()[0]
        assert sync.returncode == 0, said
        assert not w.in_progress(0)
    settle(w)
    for n in range(2):
        once(w, f"A's first fact {n}", live=True)
    for text in written:
        once(w, text, live=True)


def test_d6_two_syncs_at_once_are_serialised(world) -> None:
    w = world
    w.remember(1, "B's fact")
    assert w.sync(1).code == 0
    w.remember(0, "A's fact")
    results: list[int] = []

    def run() -> None:
        done = subprocess.run(_cli(w, 0), capture_output=True, text=True, check=False)
        results.append(done.returncode)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [0, 0]
    assert not w.in_progress(0)
    settle(w)
    once(w, "A's fact", live=True)
    once(w, "B's fact", live=True)


def _cli(w: GitWorld, i: int) -> list[str]:
    from git_world import MDMEM

    return [MDMEM, "-w", str(w.roots[i]), "sync"]


@pytest.mark.parametrize("rebase", [True, False], ids=["rebase", "merge"])
@pytest.mark.parametrize("change", ["supersede", "update"])
def test_d7_forget_wins_over_a_concurrent_change(world, rebase, change) -> None:
    """A forgets X (a leaked secret) while B supersedes (or updates) it. Before: both synced
    rc 0 and X's text was back in ## Archive in both clones, silently."""
    w = world
    w.forget(0, X)
    if change == "supersede":
        w.supersede(1, X, "Deploys go to Fly.io now")
    else:
        w.update(1, X, X + " (and eu-west-1)")
    order = (0, 1) if rebase else (1, 0)
    for i in order:
        assert w.sync(i, rebase=rebase).code == 0
    settle(w, rebase)
    for i in range(2):
        assert w.everywhere(i, "deploys go to Heroku") == []
    if change == "supersede":
        once(w, "Deploys go to Fly.io now", live=True)


def test_d7_forget_wins_under_plain_git_pulls(world) -> None:
    w = world
    w.forget(0, X)
    w.supersede(1, X, "Deploys go to Fly.io now")
    assert w.pull(1, rebase=False).code == 0
    assert w.pull(0, rebase=True).code == 0
    assert w.pull(1, rebase=False).code == 0
    for i in range(2):
        assert w.everywhere(i, "deploys go to Heroku") == []


@pytest.mark.parametrize("rebase", [True, False], ids=["rebase", "merge"])
@pytest.mark.parametrize("first", [0, 1], ids=["updater-first", "twin-first"])
def test_d8_the_same_fact_remembered_twice_then_updated_leaves_no_old_text(
    world, first, rebase
) -> None:
    """The same fact remembered in two clones, then updated in one before they meet. Before:
    the old text stayed live beside the new. (The update records the sum the entry was
    remembered with, ``first_sum=``: by it the driver knows the twin.)"""
    w = world
    fact = "The API rate limit is 100 requests per minute"
    w.remember(0, fact)
    w.remember(1, fact)
    w.update(0, fact, "The API rate limit is 500 requests per minute")
    assert w.sync(first, rebase=rebase).code == 0
    settle(w, rebase)
    once(w, "The API rate limit is 500 requests per minute", live=True)
    for i in range(2):
        assert count(w.entries(i), fact)[0] == 0, w.text(i)


def test_d8_the_same_fact_superseded_on_both_sides_is_marked_contradicts(world) -> None:
    w = world
    fact = "The staging database is MySQL 8"
    w.remember(0, fact)
    w.remember(1, fact)
    a = w.supersede(0, fact, "The staging database is PostgreSQL 16")
    b = w.supersede(1, fact, "The staging database is SQLite")
    assert w.sync(0).code == 0
    settle(w)
    once(w, fact, live=False)
    for i in range(2):
        by_id = {e.id: e for e in w.entries(i)}
        low, high = sorted((a, b))
        assert low in by_id[high].meta.get("contradicts", "").split(","), w.text(i)


def test_d9_the_drivers_message_for_a_pool_key_names_it_plainly(world, tmp_path: Path) -> None:
    """Before: ``shared/team.md: live\\0plan changed on both sides`` (a NUL byte)."""
    w = world
    w.pool_write(0, "plan", "first")
    settle(w)
    base = w.text(0, "shared/team.md")
    w.pool_write(0, "plan", "A's plan")
    w.pool_write(1, "plan", "B's plan")
    files = []
    for name, text in (
        ("O", base),
        ("A", w.text(0, "shared/team.md")),
        ("B", w.text(1, "shared/team.md")),
    ):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        files.append(path)
    outcome = run_driver(*files, "shared/team.md")
    assert outcome.messages
    for message in outcome.messages:
        assert "\0" not in message and "plan" in message, message


def test_d10_d11_temp_files_are_ignored_and_never_committed(world) -> None:
    w = world
    temp = w.roots[0] / ".memory.md.abc123.mdmem-tmp"
    temp.write_text("half a file", encoding="utf-8")
    assert git(w.roots[0], "check-ignore", "-q", temp.name, check=False).returncode == 0
    w.remember(0, "A's fact")
    assert w.sync(0).code == 0
    assert temp.name not in w.committed(0)
    # an older workspace whose .gitignore lacks the line: sync adds it, commits no temp file
    ignore = w.roots[1] / ".gitignore"
    ignore.write_text(ignore.read_text().replace("*.mdmem-tmp\n", ""), encoding="utf-8")
    git(w.roots[1], "commit", "--quiet", "-am", "an old .gitignore")
    (w.roots[1] / ".memory.md.xyz.mdmem-tmp").write_text("half", encoding="utf-8")
    w.remember(1, "B's fact")
    assert w.sync(1).code == 0
    assert not [p for p in w.committed(1) if p.endswith(".mdmem-tmp")]
    assert "*.mdmem-tmp" in (w.roots[1] / ".gitignore").read_text()


def test_person_prose_edit_on_one_side_and_a_remember_on_the_other_both_stay(world) -> None:
    w = world
    w.edit(0, lambda t: t.replace("## Facts\n", "## Facts\n\nWhat we know about the stack.\n", 1))
    w.remember(1, "B: queue is SQS")
    assert w.sync(1).code == 0
    settle(w)
    assert "What we know about the stack." in without_meta(w.text(0))
    once(w, "B: queue is SQS", live=True)


def test_sync_takes_the_very_locks_program_writes_take(tmp_path: Path) -> None:
    from mdmem.sharing.git_sync import write_lock_path
    from mdmem.writes.safe_writer import SafeWriter

    writer = SafeWriter(tmp_path / ".mdmem")
    for rel in ("memory.md", "shared/team.md", ".notes/a/b.md"):
        assert write_lock_path(tmp_path, rel) == writer.lock_path(rel)


@pytest.mark.parametrize("rebase", [True, False], ids=["rebase", "merge"])
def test_a_persons_new_heading_survives_a_paragraph_written_on_the_other_side(
    world, rebase
) -> None:
    """Found by the model (tests/integration/test_git_model.py) on the code before issue 39:
    a person adds an empty ``## Topic`` section in one clone, a person writes a paragraph in
    another; the driver took one side's text between entries whole, and the heading was gone
    (no entry under it to bring it back)."""
    w = world
    w.edit(0, lambda t: t.replace("## Patterns", "## Topic for later\n\n## Patterns", 1))
    assert w.sync(0, rebase=rebase).code == 0
    w.edit(1, lambda t: t.replace(f"- {Y}", f"- {Y}\n\nA paragraph about the seeds.\n", 1))
    assert w.sync(1, rebase=rebase).code == 0
    settle(w, rebase)
    text = w.text(0)
    assert text.count("## Topic for later\n") == 1
    assert text.count("\n\nA paragraph about the seeds.\n") == 1
