"""task_process.md and world_state.md: state machines a person can edit by hand, and modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.errors import ModeError


def test_task_loop_on_the_example(example: Workspace) -> None:
    task = example.task
    state = task.state()
    assert state.title.startswith("Gap-free invoice numbering")
    assert state.phase == "implement"
    assert [i.done for i in state.items] == [True, True, True, False, False, False]
    assert task.current().n == 4
    rule = task.instructions[0]
    assert (rule.condition, rule.then, rule.otherwise) == (
        "tests fail",
        "fix the failing test before the next TODO",
        "continue",
    )
    before = (example.root / "task_process.md").read_text()
    item = task.complete(4)
    assert item.done and item.n == 4
    assert task.current().n == 5
    after = (example.root / "task_process.md").read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    # exactly two lines change: the box and the derived pointer
    assert changed == [
        ("- Pointer: 4", "- Pointer: 5"),
        (
            "- [ ] tests/test_numbering_concurrency.py: 20 parallel POST /invoices → 20 unique, "
            "consecutive numbers",
            "- [x] tests/test_numbering_concurrency.py: 20 parallel POST /invoices → 20 unique, "
            "consecutive numbers",
        ),
    ]
    task.set_phase("verify")
    assert task.phase == "verify"
    added = task.add("Write the changelog entry")
    assert (added.n, added.done) == (7, False)
    assert task.complete(4).done  # ticking twice is harmless
    with pytest.raises(IndexError, match="no TODO item 9"):
        task.complete(9)


def test_a_box_ticked_by_hand_is_the_same_as_done(example: Workspace) -> None:
    path = example.root / "task_process.md"
    path.write_text(
        path.read_text().replace("- [ ] tests/test_numbering", "- [X] tests/test_numbering")
    )
    assert example.task.current().n == 5  # even though "Pointer: 4" is still written
    example.task.complete(5)
    text = path.read_text()
    assert "- Pointer: 6" in text and "- [X] tests/test_numbering" in text


def test_new_task_keeps_the_old_one(example: Workspace) -> None:
    old = (example.root / "task_process.md").read_text()
    state = example.task.new("Deploy to Fly.io staging", ["fly launch", "fly deploy"])
    assert (state.title, state.phase, state.pointer) == ("Deploy to Fly.io staging", "plan", 1)
    kept = list((example.root / ".tasks").glob("*_gap-free-invoice-numbering*.md"))
    assert len(kept) == 1 and kept[0].read_text() == old
    example.task.instruct("fly deploy fails", "read `fly logs`", "continue")
    assert example.task.instructions[-1].text == (
        "IF fly deploy fails THEN read `fly logs` ELSE continue"
    )


def test_task_on_a_fresh_workspace(ws: Workspace) -> None:
    assert ws.task.current() is None
    assert ws.task.state().title == ""
    ws.task.add("first thing")
    assert ws.task.current().text == "first thing"
    assert "- Pointer: 1" in (ws.root / "task_process.md").read_text()
    with pytest.raises(ValueError, match="one line"):
        ws.task.add("two\nlines")


def test_world_get_set_keep_everything_else(example: Workspace) -> None:
    world = example.world
    assert world.get("DB") == (
        "PostgreSQL 16.4 in docker compose (service `db`), host port 5433, databases `invoice` "
        "and `invoice_test`"
    )
    assert world.get("nothing here") is None
    path = example.root / "world_state.md"
    before = path.read_text().splitlines()
    fact = world.set("tests", "28 passed locally, last run 2026-11-22 10:00")
    after = path.read_text().splitlines()
    diff = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert diff == [
        (
            "- **tests**: 27 passed locally, last run 2026-11-21 09:48",
            "- **tests**: 28 passed locally, last run 2026-11-22 10:00",
        )
    ]
    assert (fact.section, fact.line) == ("Repository", after.index(diff[0][1]) + 1)
    new = world.set("redis", "none yet", section="Services")
    assert new.section == "Services"
    assert world.set("sentry", "not set up", section="Monitoring").section == "Monitoring"
    assert path.read_text().rstrip().endswith("## Monitoring\n\n- **sentry**: not set up")
    world.remove("heroku")
    assert world.get("heroku") is None
    assert "## Archive" in path.read_text() and "**heroku**" in path.read_text()
    with pytest.raises(KeyError):
        world.remove("heroku")
    with pytest.raises(ValueError, match="invalid world key"):
        world.set("a: b", "x")


def test_hand_written_plain_keys_count(ws: Workspace) -> None:
    (ws.root / "world_state.md").write_text("# World\n\n## Infra\n- region: fra\n")
    assert ws.world.get("Region") == "fra"
    ws.world.set("region", "ams")
    assert (ws.root / "world_state.md").read_text() == "# World\n\n## Infra\n- **region**: ams\n"


def test_minimal_mode_reads_but_never_writes_task_or_world(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "m", mode="minimal")
    names = sorted(p.name for p in ws.root.iterdir())
    assert "task_process.md" not in names and "world_state.md" not in names
    assert ".compact_memory.md" in names
    with pytest.raises(ModeError, match="mdmem mode full"):
        ws.task.add("x")
    with pytest.raises(ModeError):
        ws.world.set("k", "v")
    assert ws.world.facts() == [] and ws.task.current() is None
    assert not (ws.root / "task_process.md").exists()


def test_switching_modes_edits_one_line_and_deletes_nothing(example: Workspace) -> None:
    toml = example.root / "mdmem.toml"
    toml.write_text('# my settings\nmode = "full"   # keep\nagent = "coder"\n\n[search]\nk = 5\n')
    files = [*(p.name for p in example.root.iterdir()), ".mdmem"]  # + its lock folder
    assert example.set_mode("minimal") == []  # .compact_memory.md exists already
    assert example.mode == "minimal"
    assert toml.read_text() == (
        '# my settings\nmode = "minimal"   # keep\nagent = "coder"\n\n[search]\nk = 5\n'
    )
    assert sorted(p.name for p in example.root.iterdir()) == sorted(files)
    assert Workspace.open(example.root).mode == "minimal"
    with pytest.raises(ValueError):
        example.set_mode("maximal")  # type: ignore[arg-type]


def test_switching_to_full_creates_missing_files(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "m", mode="minimal")
    (ws.root / "mdmem.toml").write_text('agent = "bot"\n[search]\nk = 3\n')
    created = ws.set_mode("full")
    assert created == ["task_process.md", "world_state.md"]
    assert (ws.root / "mdmem.toml").read_text() == 'agent = "bot"\nmode = "full"\n[search]\nk = 3\n'
    assert (ws.root / ".sessions").is_dir()
    ws.task.add("now possible")
