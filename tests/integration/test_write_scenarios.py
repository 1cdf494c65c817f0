"""Stale saves between several program writes (issue 39 D1, D12, D13), and what the write-path
model (tests/integration/test_write_model.py) found, each as a plain scenario that runs every
time. Real files, real renames and in-place saves, the default late-save window."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from mdmem import ConflictError, Workspace

SETTLED_S = 1.0
"""Past every late-save window (250 ms) with room for a busy machine."""


def _save(path: Path, text: str | bytes, how: str) -> None:
    data = text.encode("utf-8") if isinstance(text, str) else text
    if how == "rename":
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.rename(tmp, path)
    else:
        with open(path, "r+b") as handle:
            handle.truncate(0)
            handle.write(data)


def _entry(ws: Workspace, prefix: str):  # type: ignore[no-untyped-def]
    return next(e for e in ws.entries("memory.md") if e.text.startswith(prefix))


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_d1_a_stale_copy_saved_between_several_writes_keeps_every_write(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """D1: the copy predates a remember and an update; the next update is made on the
    person's save before the guard looked. The update's hunk and the remember next to it were
    one region, dropped whole as a clash, and the warning blamed the person."""
    root = str(tmp_path / "ws")
    ws = Workspace.init(root, agent="main")
    ws.remember("Entry A: the first value")
    copy = Path(root, "memory.md").read_text()
    ws.remember("Fact X: acknowledged before the person's save")
    ws.update(_entry(ws, "Entry A"), text="Entry A: the value after the first update")
    time.sleep(0.05)
    new = copy.replace("## Preferences", "A line the person typed\n\n## Preferences", 1)
    _save(Path(root) / "memory.md", new, how)
    with caplog.at_level(logging.WARNING, logger="mdmem"):
        try:
            ws.update(_entry(ws, "Entry A"), text="Entry A: the second value")
            last = "Entry A: the second value"
        except ConflictError:  # the guard merged the save first: the entry read changed
            last = "Entry A: the value after the first update"
        time.sleep(SETTLED_S)
    text = Path(root, "memory.md").read_text()
    assert "Fact X: acknowledged before the person's save" in text
    assert "A line the person typed" in text
    assert last in text and text.count("Entry A") == 1
    assert "changed the same lines" not in caplog.text  # the person changed no such line
    ws.close()


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_d12_a_crlf_editors_stale_save_inside_the_window_keeps_the_write(
    tmp_path: Path, how: str
) -> None:
    """D12: an editor set to CRLF holds a copy read before a remember and saves it 30 ms after
    the acknowledgement with one added line. Every line differed from the program's (LF)
    versions: the save looked like another file put in place, and Beta was lost."""
    root = tmp_path / "ws"
    ws = Workspace.init(root, agent="main")
    ws.remember("Alpha: the first fact")
    time.sleep(0.5)
    path = root / "memory.md"
    copy = path.read_bytes().replace(b"\n", b"\r\n")
    ws.remember("Beta: acknowledged before the CRLF save")
    time.sleep(0.03)
    _save(path, copy + b"- A line typed on Windows\r\n", how)
    time.sleep(SETTLED_S)
    data = path.read_bytes()
    text = data.decode()
    assert "Beta: acknowledged before the CRLF save" in text
    assert "A line typed on Windows" in text
    assert text.count("Alpha: the first fact") == 1
    # the person's line endings are kept: every line ends CRLF
    assert data.count(b"\n") == data.count(b"\r\n")
    ws.close()


def test_d12_a_program_write_on_a_crlf_file_keeps_its_endings_and_the_persons_lines(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    ws = Workspace.init(root, agent="main")
    ws.remember("Alpha: the first fact")
    time.sleep(0.5)
    path = root / "memory.md"
    copy = path.read_bytes().replace(b"\n", b"\r\n")
    ws.remember("Beta: the second fact")
    time.sleep(0.03)
    _save(path, copy + b"- A line typed on Windows\r\n", "rename")
    ws.remember("Gamma: made on the CRLF save")
    time.sleep(SETTLED_S)
    data = path.read_bytes()
    text = data.decode()
    for line in ("Alpha", "Beta", "Gamma", "A line typed on Windows"):
        assert text.count(line) == 1, (line, text)
    assert data.count(b"\n") == data.count(b"\r\n")
    ws.close()


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_d13_a_persons_edit_does_not_come_back_in_its_old_form(tmp_path: Path, how: str) -> None:
    """D13: the person's second save descends from their first (which the program wrote Beta
    on), not from the version before it: merged against that older version, their first
    line came back beside its edited form."""
    root = tmp_path / "ws"
    ws = Workspace.init(root, agent="main")
    path = root / "memory.md"
    ws.remember("Alpha")
    time.sleep(0.5)
    v1 = path.read_text()
    _save(path, v1 + "- PERSON 0\n", how)
    ws.remember("Beta")  # made on that save
    time.sleep(0.03)
    _save(path, v1 + "- PERSON 0 (edited)\n- PERSON 1\n", how)
    time.sleep(SETTLED_S)
    lines = path.read_text().splitlines()
    assert "- PERSON 0" not in lines
    assert lines.count("- PERSON 0 (edited)") == 1 and lines.count("- PERSON 1") == 1
    assert sum(line.startswith("- Beta <!--") for line in lines) == 1
    assert sum(line.startswith("- Alpha <!--") for line in lines) == 1
    ws.close()


@pytest.mark.parametrize("round_", range(3))
def test_two_agents_a_stale_save_then_the_same_buffer_again_keeps_every_supersede(
    tmp_path: Path, round_: int, caplog: pytest.LogCaptureFixture
) -> None:
    """What the write-path model found with two agents (two guards): the person reads, one
    agent remembers and the other supersedes, the person saves the stale copy by rename, more
    supersedes follow, then the person saves the same buffer again in place with one more
    line. The second save was merged as a change of the version before the guard's latest
    write, so every write the person never saw read as a line they deleted: one agent's
    superseding entries and the ``## Archive`` heading were lost."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a")
    agents = [Workspace.open(root) for _ in range(2)]
    path = root / "memory.md"
    first = agents[0].remember("Fact A: the first value")
    second = agents[1].remember("Fact B: the second value")
    time.sleep(0.5)
    buffer = path.read_text()
    agents[0].remember("Fact C: remembered after the person's read")
    by_a = agents[1].supersede(first, by="Fact D: supersedes Fact A")
    buffer = buffer.rstrip("\n") + "\n- PERSON 1\n"
    _save(path, buffer, "rename")
    later = []
    with caplog.at_level(logging.WARNING, logger="mdmem"):
        for agent, old, text in (
            (0, second, "Fact E: supersedes Fact B"),
            (1, by_a, "Fact F: supersedes Fact D"),
        ):
            try:
                found = next(e for e in agents[agent].entries("memory.md") if e.id == old.id)
                later.append(agents[agent].supersede(found, by=text))
            except (ConflictError, StopIteration):
                pass
        buffer += "- PERSON 2\n"
        _save(path, buffer, "in place")
        time.sleep(SETTLED_S)
        for ws in agents:
            ws.close()
    text = path.read_text()
    lines = text.splitlines()
    for line in ("Fact C: remembered after the person's read", *(e.text for e in later)):
        assert sum(line in row for row in lines) == 1, (line, text)
    assert "Fact D: supersedes Fact A" in text
    assert lines.count("## Archive") == 1, text
    assert lines.count("- PERSON 1") == 1 and lines.count("- PERSON 2") == 1, text
    assert "changed the same lines" not in caplog.text


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_a_stale_buffer_saved_twice_with_its_own_line_edited_keeps_the_write_it_lacked(
    tmp_path: Path, how: str
) -> None:
    """What the editor race's stale pattern found (tests/integration/test_editor_races.py):
    the person's buffer lacks a remember, is saved (the guard merges the remember back), then
    edited — their own line changed, one more added — and saved again. Followed by evidence,
    the history showed no change the copy held after the person's line was edited, so it was
    merged against the version before the remember: the person's line and the remember were
    one clash, the person's side kept whole, and the acknowledged remember lost."""
    root = tmp_path / "ws"
    ws = Workspace.init(root, agent="main")
    path = root / "memory.md"
    ws.remember("Alpha")
    ws.remember("Beta")
    time.sleep(0.5)
    buffer = path.read_text()
    ws.remember("Delta: acknowledged after the person's read")
    _save(path, buffer + "- PERSON 1\n", how)
    # the guard merges Delta back into that save (within its window; a loaded machine may
    # run its thread late, so look until the window has surely closed)
    deadline = time.monotonic() + SETTLED_S
    while "Delta" not in path.read_text() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "Delta" in path.read_text()
    _save(path, buffer + "- PERSON 1 (edited)\n- PERSON 2\n", how)
    time.sleep(SETTLED_S)
    lines = path.read_text().splitlines()
    assert sum(line.startswith("- Delta: acknowledged") for line in lines) == 1, lines
    assert "- PERSON 1" not in lines
    assert lines.count("- PERSON 1 (edited)") == 1 and lines.count("- PERSON 2") == 1, lines
    ws.close()


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_two_agents_update_one_entry_and_a_crlf_copy_saved_after_keeps_the_second_update(
    tmp_path: Path, how: str
) -> None:
    """What the write-path model found: a CRLF editor holds a copy from before two agents'
    updates of one entry and saves it unchanged (every line ending differs) just after; the
    first agent then remembers, on that save. The second agent's update was taken as held
    by the save (merged into it, the person's side of the clash won and left it as it was),
    so its guard never put it back."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a")
    agents = [Workspace.open(root) for _ in range(2)]
    path = root / "memory.md"
    first = agents[0].remember("Fact 1: the first value")
    copy = path.read_bytes().replace(b"\n", b"\r\n")
    agents[0].update(first, text="Fact 2: an update by agent a")
    found = next(e for e in agents[1].entries("memory.md") if e.id == first.id)
    agents[1].update(found, text="Fact 3: an update by agent b")
    time.sleep(0.04)
    _save(path, copy, how)
    try:
        agents[0].remember("Fact 4: remembered on the person's save")
        remembered = True
    except ConflictError:
        remembered = False
    time.sleep(SETTLED_S)
    for ws in agents:
        ws.close()
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    assert text.count("Fact 3: an update by agent b") == 1, text
    assert "Fact 2: an update by agent a" not in text.split("## Archive")[0], text
    assert "Fact 1: the first value" not in text, text
    if remembered:
        assert text.count("Fact 4: remembered on the person's save") == 1, text


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_a_copy_of_a_merged_back_version_saved_again_keeps_the_update_after_it(
    tmp_path: Path, how: str
) -> None:
    """What the write-path model found: a CRLF editor's stale copy gets a second agent's
    remember merged back; the person reloads (their buffer is now byte for byte that
    merge-back's result), an agent updates an entry, and the person saves the reloaded buffer
    unchanged just after, before the agent's next write. The copy was read as made from a
    version before the merge-back (it was not looked for among program writes' results), so
    the update was taken as the person's deliberate undo, and lost."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a")
    agents = [Workspace.open(root) for _ in range(2)]
    path = root / "memory.md"
    first = agents[0].remember("Fact 1: the first value")
    copy = path.read_bytes().replace(b"\n", b"\r\n")
    second = agents[1].remember("Fact 2: remembered by agent b")
    _save(path, copy, how)
    time.sleep(SETTLED_S)
    assert "Fact 2: remembered by agent b" in path.read_text()
    copy = path.read_bytes()  # the person's editor reloads
    agents[0].update(first, text="Fact 3: an update by agent a")
    time.sleep(0.02)
    _save(path, copy, how)
    try:
        found = next(e for e in agents[0].entries("memory.md") if e.id == second.id)
        agents[0].update(found, text="Fact 4: the next update, on the person's save")
        updated = True
    except ConflictError:
        updated = False
    time.sleep(SETTLED_S)
    for ws in agents:
        ws.close()
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    assert text.count("Fact 3: an update by agent a") == 1, text
    assert "Fact 1: the first value" not in text, text
    if updated:
        assert text.count("Fact 4: the next update, on the person's save") == 1, text


def test_a_merge_back_that_rebuilds_an_earlier_version_still_gets_the_other_agents_write(
    tmp_path: Path,
) -> None:
    """What the write-path model found: agents a and b alternate four writes, the person saves
    a copy from before all of them, in place, inside the window; b's guard merges b's writes
    back first, and its result is byte for byte a version b wrote before a's last remember.
    a's guard read that version as the copy's base (a program write made those bytes), so
    nothing was missing: a's remember was lost."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a")
    a, b = Workspace.open(root), Workspace.open(root)
    path = root / "memory.md"
    first = b.remember("Fact 1: remembered by b")
    time.sleep(0.5)
    copy = path.read_bytes()
    a.update(first, text="Fact 2: a's update of fact 1")
    b.remember("Fact 3: remembered by b")
    a.remember("Fact 4: remembered by a, last")
    time.sleep(0.04)
    _save(path, copy, "in place")
    time.sleep(SETTLED_S)
    for ws in (a, b):
        ws.close()
    text = path.read_text()
    for line in (
        "Fact 2: a's update of fact 1",
        "Fact 3: remembered by b",
        "Fact 4: remembered by a",
    ):
        assert text.count(line) == 1, (line, text)
    assert "Fact 1: remembered by b" not in text, text


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_a_crlf_buffer_saved_again_after_three_writes_keeps_them(tmp_path: Path, how: str) -> None:
    """What the write-path model found: a person's CRLF editor saved the file (every line ending
    changed), the agent then superseded one entry and updated two, and 40 ms later the editor
    saved the same buffer again, unchanged. The copy was searched for only among versions
    before its first save, where it holds everything, so all three writes were lost."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a")
    ws = Workspace.open(root)
    path = root / "memory.md"
    one, two, three = (ws.remember(f"Fact {n}: value {n}") for n in (1, 2, 3))
    time.sleep(0.5)
    buffer = path.read_bytes().replace(b"\n", b"\r\n")
    _save(path, buffer, how)
    time.sleep(SETTLED_S)
    ws.supersede(one, by="Fact 4: supersedes fact 1")
    ws.update(two, text="Fact 5: an update of fact 2")
    ws.update(three, text="Fact 6: an update of fact 3")
    time.sleep(0.04)
    _save(path, buffer, how)
    time.sleep(SETTLED_S)
    ws.close()
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    live = text.split("## Archive")[0]
    for line in ("Fact 4: supersedes fact 1", "Fact 5: an update of fact 2", "Fact 6: an update"):
        assert live.count(line) == 1, (line, text)
    for line in ("Fact 1: value 1", "Fact 2: value 2", "Fact 3: value 3"):
        assert line not in live, (line, text)


def test_two_agents_alternating_writes_then_a_stale_copy_keep_the_last(tmp_path: Path) -> None:
    """What the write-path model found: agent a supersedes an entry, b updates another, a
    updates a third, and 40 ms later a person saves a copy from before all three (by rename).
    b's guard puts a's supersede and b's update back; a's last update is lost."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a", mode="full")
    config = root / "mdmem.toml"
    config.write_text(
        config.read_text() + '\n[embedding]\nmodel = ""\n[write]\nlate_save_ms = 150\n'
    )
    a, b = Workspace.open(root), Workspace.open(root)
    path = root / "memory.md"
    one = a.remember("Fact 1: one")
    two = b.remember("Fact 2: two")
    three = a.remember("Fact 3: three")
    time.sleep(0.5)
    copy = path.read_bytes()
    a.supersede(one, by="Fact 4: supersedes one")
    b.update(next(e for e in b.entries("memory.md") if e.id == two.id), text="Fact 5: b's update")
    a.update(next(e for e in a.entries("memory.md") if e.id == three.id), text="Fact 6: a's update")
    time.sleep(0.04)
    _save(path, copy, "rename")
    time.sleep(SETTLED_S)
    for ws in (a, b):
        ws.close()
    live = path.read_text().split("## Archive")[0]
    for line in ("Fact 4: supersedes one", "Fact 5: b's update", "Fact 6: a's update"):
        assert live.count(line) == 1, (line, live)


@pytest.mark.parametrize("how", ["rename", "in place"])
def test_the_persons_own_save_saved_again_after_another_agents_writes_gets_them_back(
    tmp_path: Path, how: str
) -> None:
    """What the write-path model found: a person's stale save was merged back; the other agent
    remembered and superseded on the result; then the person saved the same buffer again. The
    small file had changed so much since that the save kept under 80% of every version the
    other agent wrote, and its guard took it for another file put in place (a ``git
    checkout``): the remember and the supersede were lost. The save is a copy of the path's
    own history (a program write was made on these very bytes), so they are merged back."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a")
    agents = [Workspace.open(root) for _ in range(2)]
    path = root / "memory.md"
    first = agents[0].remember("Fact 1: the first value")
    time.sleep(0.5)
    buffer = path.read_text().replace("\n- Fact 1", "\nA line the person typed\n- Fact 1", 1)
    assert "A line the person typed" in buffer
    second = agents[0].supersede(first, by="Fact 2: supersedes Fact 1")
    third = agents[1].supersede(second, by="Fact 3: supersedes Fact 2")
    agents[0].update(third, text="Fact 4: an update of Fact 3")
    _save(path, buffer, how)  # stale: merged back by agent 0's guard
    time.sleep(SETTLED_S)
    kept = [agents[1].remember("Fact 6: remembered on the merge-back")]
    current = next(e for e in agents[1].entries("memory.md") if e.text.startswith("Fact 4"))
    kept.append(agents[1].supersede(current, by="Fact 7: supersedes Fact 4"))
    _save(path, buffer, "rename")  # the same buffer again, inside agent 1's window
    time.sleep(SETTLED_S)
    for ws in agents:
        ws.close()
    text = path.read_text()
    for entry in kept:
        assert text.count(entry.text) == 1, text
    assert text.count("A line the person typed") == 1, text
