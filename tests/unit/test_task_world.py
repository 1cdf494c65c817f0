"""task_process.md and world_state.md: state machines a person can edit by hand, and modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.errors import FileProblem, ModeError
from mdmem.markdown.parse import Document, parse_document
from mdmem.memory.task import Task
from mdmem.writes.safe_writer import Target


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
    ws.world.set("region", "ams")  # the person's key stays as they wrote it
    assert (ws.root / "world_state.md").read_text() == "# World\n\n## Infra\n- region: ams\n"


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
    assert example.config.mode == "minimal"
    assert toml.read_text() == (
        '# my settings\nmode = "minimal"   # keep\nagent = "coder"\n\n[search]\nk = 5\n'
    )
    assert sorted(p.name for p in example.root.iterdir()) == sorted(files)
    assert Workspace.open(example.root).config.mode == "minimal"
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


def test_world_set_keeps_a_persons_nested_bullets(ws: Workspace) -> None:
    path = ws.root / "world_state.md"
    path.write_text(
        "## Env\n- **db**: postgres 16\n  - note by human: do not upgrade\n  - port 5433\n"
        "- **os**: linux\n"
    )
    assert ws.world.get("db") == "postgres 16"  # the value only, not the notes under it
    fact = ws.world.set("db", "postgres 17")
    assert fact.value == "postgres 17"
    assert path.read_text() == (
        "## Env\n- **db**: postgres 17\n  - note by human: do not upgrade\n  - port 5433\n"
        "- **os**: linux\n"
    )
    # a continuation line written by hand is part of the value
    path.write_text(path.read_text().replace("postgres 17\n", "postgres 17\n  upgraded by hand\n"))
    assert ws.world.get("db") == "postgres 17\nupgraded by hand"
    ws.world.set("db", "postgres 18")
    assert path.read_text() == (
        "## Env\n- **db**: postgres 18\n  - note by human: do not upgrade\n  - port 5433\n"
        "- **os**: linux\n"
    )


def test_world_set_keeps_the_key_as_written(ws: Workspace) -> None:
    path = ws.root / "world_state.md"
    path.write_text(
        "# World\n\n## Infra\n- **Region** :  fra <!-- mdmem id=m-0123456789 -->\n"
        "* Cloud Provider: hetzner\n"
    )
    ws.world.set("region", "ams")
    ws.world.set("cloud provider", "fly.io")
    assert path.read_text() == (
        "# World\n\n## Infra\n- **Region** :  ams <!-- mdmem id=m-0123456789 -->\n"
        "* Cloud Provider: fly.io\n"
    )
    assert ws.world.as_dict() == {"Region": "ams", "Cloud Provider": "fly.io"}


def test_task_add_after_the_last_item_under_sub_headings(ws: Workspace) -> None:
    path = ws.root / "task_process.md"
    path.write_text("## TODO\n### Backend\n- [ ] one\n### Frontend\n- [ ] two\n")
    added = ws.task.add("new item")
    assert (added.n, added.text, added.done) == (3, "new item", False)
    assert [i.text for i in ws.task.items()] == ["one", "two", "new item"]
    assert path.read_text().startswith(
        "## TODO\n### Backend\n- [ ] one\n### Frontend\n- [ ] two\n- [ ] new item\n"
    )
    # an ordered, indented list with nested items: the next number, after the children
    path.write_text("## TODO\n\n  1) [x] one\n  2) [ ] two\n     - [ ] detail\n\n## Instructions\n")
    added = ws.task.add("three")
    assert (added.n, added.text, added.line) == (3, "three", 6)
    assert path.read_text().startswith(
        "## TODO\n\n  1) [x] one\n  2) [ ] two\n     - [ ] detail\n  3) [ ] three\n\n"
        "## Instructions\n"
    )
    # no items yet: right under the TODO heading
    path.write_text("# Task: t\n\n## TODO\n### Later\n")
    added = ws.task.add("first")
    assert (added.n, added.text) == (1, "first")
    assert path.read_text().startswith("# Task: t\n\n## TODO\n\n- [ ] first\n\n### Later\n")


def test_new_task_keeps_the_old_one_before_replacing_it(ws: Workspace) -> None:
    """A person saves task_process.md while the program replaces the task: the real safe write
    sees it, redoes the edit on their version, and the archive keeps their save too."""
    first = "# Task: Old\n\n## TODO\n- [ ] a\n"
    saved = "# Task: Old\n\n## TODO\n- [ ] a\n- [ ] b, saved by a person meanwhile\n"
    path = ws.root / "task_process.md"
    path.write_text(first)
    archived: list[tuple[str, str]] = []

    def read() -> Document | None:
        return parse_document("task_process.md", path.read_text())

    def write(edit) -> str:  # what ws.task writes through: the workspace's safe writer
        return ws._w.writer.edit(Target(path, "task_process.md", 10_000_000), edit).text

    def archive_while_a_person_saves(title: str, text: str) -> None:
        archived.append((title, text))
        if len(archived) == 1:  # between the program's read and its swap: a real save
            path.write_text(saved)

    state = Task(read, write, archive_while_a_person_saves).new("New", ["x"])
    assert state.title == "New" and [i.text for i in state.items] == ["x"]
    assert archived == [("Old", first), ("Old", saved)]  # the person's save is kept too
    assert path.read_text().startswith("# Task: New\n")

    def archive_fails(title: str, text: str) -> None:
        raise OSError("disk full")

    before = path.read_bytes()
    with pytest.raises(FileProblem, match="disk full; the file is unchanged"):
        Task(read, write, archive_fails).new("Newer")
    assert path.read_bytes() == before  # the old task could not be kept, so it was not replaced


def test_new_task_keeps_notes_of_an_untitled_task_and_same_second_archives(
    ws: Workspace,
) -> None:
    path = ws.root / "task_process.md"
    path.write_text(
        "# Task: (none yet)\n\n## State\n- Phase: idle\n- Pointer: 0\n\n## Instructions\n"
        "- IF x THEN y\n\n## Notes\nA person's note.\n"
    )
    for n in range(3):
        ws.task.new("Same", [f"item {n}"])
    kept = sorted(p.read_text() for p in (ws.root / ".tasks").glob("*.md"))
    assert len(kept) == 3
    assert any("A person's note." in text for text in kept)
    assert (
        sum("item 0" in text for text in kept) == 1 and sum("item 1" in text for text in kept) == 1
    )
    fresh = Workspace.init(ws.root.parent / "fresh", mode="full")
    fresh.task.new("First")
    assert not (fresh.root / ".tasks").exists()  # the empty template is not worth keeping


def test_phase_and_pointer_updates_keep_notes_below_them(example: Workspace) -> None:
    path = example.root / "task_process.md"
    text = path.read_text().replace(
        "- Phase: implement\n", "- Phase: implement\n  - waiting on Chen Jing for the year rule\n"
    )
    text = text.replace("- Pointer: 4\n", "- Pointer: 4\n  - a note on the pointer\n")
    path.write_text(text)
    example.task.set_phase("verify")
    example.task.complete(4)
    after = path.read_text()
    assert "- Phase: verify\n  - waiting on Chen Jing for the year rule\n" in after
    assert "- Pointer: 5\n  - a note on the pointer\n" in after
    assert example.task.phase == "verify"


def test_nested_checkboxes_belong_to_their_parent(ws: Workspace) -> None:
    path = ws.root / "task_process.md"
    text = (
        "# Task: t\n\n## State\n- Phase: implement\n- Pointer: 1\n\n## TODO\n"
        "- [ ] parent\n  still the parent\n  - [ ] child a\n  - [x] child b\n  - a plain note\n"
        "- [ ] second\n"
    )
    path.write_text(text)
    items = ws.task.items()
    assert [(i.n, i.text, i.done) for i in items] == [
        (1, "parent\nstill the parent", False),
        (2, "second", False),
    ]
    assert items[0].subitems == (("child a", False), ("child b", True), ("a plain note", None))
    assert ws.task.current().n == 1
    path.write_text(text.replace("- [ ] child a", "- [x] child a"))  # ticked by hand
    assert ws.task.items()[0].subitems[0] == ("child a", True)
    assert ws.task.current().n == 1  # a child doesn't tick its parent
    assert ws.task.complete(1).subitems[0] == ("child a", True)
    assert ws.task.current().text == "second"
    assert ws.task.state().to_dict()["items"][0]["subitems"][1] == ("child b", True)


def _only_crlf(text: str) -> bool:
    return text.count("\n") == text.count("\r\n") > 0


def test_crlf_files_stay_crlf(ws: Workspace) -> None:
    task_path = ws.root / "task_process.md"
    world_path = ws.root / "world_state.md"
    task_path.write_bytes(
        b"# Task: t\r\n\r\n## State\r\n- Phase: plan\r\n\r\n## TODO\r\n- [ ] one\r\n"
        b"  - [ ] sub\r\n\r\n## Instructions\r\n"
    )
    world_path.write_bytes(b"# World\r\n\r\n## Env\r\n- **db**: pg\r\n  - keep\r\n")
    steps = [
        lambda: ws.task.add("two"),
        lambda: ws.task.complete(1),
        lambda: ws.task.set_phase("implement"),
        lambda: ws.task.instruct("tests fail", "fix them"),
        lambda: ws.task.new("next", ["a"]),
        lambda: ws.task.add("b"),
    ]
    for step in steps:
        step()
        assert _only_crlf(task_path.read_bytes().decode()), step
    assert [i.text for i in ws.task.items()] == ["a", "b"]
    for step in [
        lambda: ws.world.set("db", "pg 17"),
        lambda: ws.world.set("cache", "redis"),
        lambda: ws.world.set("cdn", "none", section="Edge"),
        lambda: ws.world.remove("cache"),
    ]:
        step()
        assert _only_crlf(world_path.read_bytes().decode()), step
    assert ws.world.get("db") == "pg 17"
    assert b"  - keep\r\n" in world_path.read_bytes()


def test_a_bom_is_kept_and_does_not_get_in_the_way(ws: Workspace) -> None:
    bom = "\ufeff".encode()
    task_path = ws.root / "task_process.md"
    world_path = ws.root / "world_state.md"
    task_path.write_bytes(bom + b"# Task: t\n\n## TODO\n- [ ] one\n")
    world_path.write_bytes(bom + b"- **db**: pg\n")
    assert ws.task.state().title == "t" and ws.world.get("db") == "pg"
    assert ws.task.add("two").n == 2
    ws.task.complete(1)
    assert ws.world.set("db", "pg 17").value == "pg 17"
    task = task_path.read_bytes()
    assert task.startswith(bom + b"# Task: t\n") and task.count(bom) == 1
    assert b"- [x] one\n- [ ] two\n" in task
    assert world_path.read_bytes() == bom + b"- **db**: pg 17\n"
    assert [(i.text, i.done) for i in ws.task.items()] == [("one", True), ("two", False)]


def test_sections_without_a_file_title_and_subitems_in_context(ws: Workspace) -> None:
    (ws.root / "world_state.md").write_text("## Infra\n- **region**: fra\n")
    assert [(f.key, f.section) for f in ws.world.facts()] == [("region", "Infra")]
    (ws.root / "task_process.md").write_text(
        "# Task: ship\n\n## TODO\n- [ ] Deploy\n  - [ ] staging\n  - [x] production\n"
    )
    text = ws.build_context(budget_tokens=2000).text
    assert "Now: 1. Deploy ([ ] staging; [x] production)" in text


def test_world_values_are_one_line(example: Workspace) -> None:
    before = (example.root / "world_state.md").read_text()
    with pytest.raises(ValueError, match="one line"):
        example.world.set("db", "PostgreSQL\n## Oops")
    assert (example.root / "world_state.md").read_text() == before
