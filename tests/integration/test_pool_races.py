"""The pool against a person saving stale copies of its file (issue 39 D2): a version is
acknowledged once, a read never goes back, and 8 processes x 40 compare-and-set increments
with a person editing give exactly 320. Real files, real processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from stress import size

from mdmem import VersionConflict, Workspace

INCREMENTER = textwrap.dedent(
    """
    import sys
    from mdmem import VersionConflict, Workspace
    ws = Workspace(sys.argv[1])
    pool = ws.sharing.pool()
    name, count = sys.argv[2], int(sys.argv[3])
    conflicts = 0
    for _ in range(count):
        while True:
            entry = pool.read("counter")
            value, version = (entry.content, entry.version) if entry else (0, 0)
            try:
                pool.write("counter", value + 1, writer=name, expected_version=version)
                break
            except VersionConflict:
                conflicts += 1
    ws.close()
    print(conflicts)
    """
)


def _rename_save(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.rename(tmp, path)


@pytest.mark.parametrize("after_s", [0.05, 0.6])
def test_d2_a_stale_save_never_takes_the_pool_back(tmp_path: Path, after_s: float) -> None:
    """D2: the person's copy predates version 2; saved 50 ms later (inside the late-save
    window) or 600 ms later (after it), ``read`` returned version 1 and a compare-and-set
    against version 1 was acknowledged again."""
    ws = Workspace.init(tmp_path / "ws", agent="main")
    pool = ws.sharing.pool()
    path = ws.root / "shared/default.md"
    pool.write("n", 1)
    copy = path.read_text()
    assert pool.write("n", 2, expected_version=1).version == 2
    time.sleep(after_s)
    _rename_save(path, copy.replace("\n\n", "\n\nA note from the person\n\n", 1))
    entry = pool.read("n")
    assert entry is not None and (entry.version, entry.content) == (2, 2)
    with pytest.raises(VersionConflict):
        pool.write("n", 2, expected_version=1)
    assert pool.write("n", 3, expected_version=2).version == 3
    time.sleep(0.6)
    text = path.read_text()
    assert "A note from the person" in text and text.count("## n") == 1
    assert (pool.read("n").version, pool.read("n").content) == (3, 3)
    ws.close()


def test_a_stale_save_without_a_newer_key_gets_it_back(tmp_path: Path) -> None:
    """A key acknowledged after the person's copy was read stays in the pool: a section is
    removed through the pool (``delete``, ``mdmem pool delete``), which archives it."""
    ws = Workspace.init(tmp_path / "ws", agent="main")
    pool = ws.sharing.pool()
    path = ws.root / "shared/default.md"
    pool.write("a", "first")
    copy = path.read_text()
    pool.write("b", "second")
    time.sleep(0.6)  # after the window
    _rename_save(path, copy.replace("\n\n", "\n\nA note under the title\n\n", 1))
    assert pool.read("b") is not None and pool.read("b").content == "second"
    pool.delete("a")
    time.sleep(0.6)
    _rename_save(path, copy)  # the old copy, with "a" live again
    assert pool.read("a") is None and pool.history("a")[0].content == "first"
    ws.close()


def test_two_agents_a_new_key_and_a_stale_save_keep_one_section_per_key(tmp_path: Path) -> None:
    """Found by the write model (tests/integration/test_write_model.py): agent B creates key
    ``n``, the person's editor reads the file, agent A writes version 2, the person saves
    their copy with a note at the top, B writes version 3. The merge-back of A's version 2
    read the person's copy, which holds ``n`` too, as adding it in another place (the two
    sections end in the same lines): a second ``## n`` section, and A's next compare-and-set
    against version 3 was acknowledged as version 2 again."""
    root = tmp_path / "ws"
    Workspace.init(root, agent="a", mode="full")
    config = root / "mdmem.toml"
    config.write_text(
        config.read_text() + '\n[embedding]\nmodel = ""\n[write]\nlate_save_ms = 150\n'
    )
    a, b = Workspace.open(root), Workspace.open(root)
    pools = {"a": a.sharing.pool(), "b": b.sharing.pool()}
    path = root / "shared/default.md"
    acknowledged: list[int] = []

    def increment(agent: str, key: str) -> None:
        entry = pools[agent].read(key)
        version, value = (entry.version, entry.content) if entry else (0, 0)
        written = pools[agent].write(key, value + 1, writer=agent, expected_version=version)
        assert written.version == version + 1
        if key == "n":
            acknowledged.append(written.version)

    increment("a", "m")
    increment("b", "n")
    copy = path.read_text()
    increment("a", "n")
    rows = copy.split("\n")
    rows[1:1] = ["", "A note from the person"]
    _rename_save(path, "\n".join(rows))
    increment("b", "n")
    b.world.set("host", "value2")
    increment("a", "n")
    for ws in (a, b):
        assert ws._w.writer.guard.wait(timeout=10.0)
    text = path.read_text()
    assert acknowledged == [1, 2, 3, 4]
    assert text.count("## n") == 1 and "A note from the person" in text
    entry = pools["b"].read("n")
    assert entry is not None and (entry.version, entry.content) == (4, 4)
    a.close()
    b.close()


def _person_saving_stale_copies(path: Path, stop: threading.Event, saves: list[int]) -> None:
    """An editor that reads the pool file, waits 0-150 ms (the agents write meanwhile), and
    saves its copy with a note added, by rename: a stale save each time, two or three a
    second (a person typing and saving often)."""
    rng = random.Random(39)
    n = 0
    while not stop.is_set():
        try:
            copy = path.read_text()
        except FileNotFoundError:
            time.sleep(0.01)
            continue
        time.sleep(rng.uniform(0.0, 0.15))
        n += 1
        _rename_save(path, copy.replace("\n\n", f"\n\nA note from the person {n}\n\n", 1))
        time.sleep(rng.uniform(0.2, 0.5))
    saves.append(n)


@pytest.mark.slow
def test_processes_racing_increments_with_a_person_editing_lose_none(tmp_path: Path) -> None:
    """Processes each incrementing one pool key by compare-and-set while a person saves stale
    copies of the pool file by rename: the final value is exactly the number of increments.
    4 x 20 in `make test`; 8 x 40 (the figure in docs/writes.md) with MDMEM_STRESS=full."""
    processes, increments = size(4, 8), size(20, 40)
    ws = Workspace.init(tmp_path / "ws", agent="main")
    path = ws.root / "shared/default.md"
    ws.sharing.pool().write("counter", 0)
    stop, saves = threading.Event(), []
    person = threading.Thread(target=_person_saving_stale_copies, args=(path, stop, saves))
    person.start()
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", INCREMENTER, str(ws.root), f"p{n}", str(increments)],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )
            for n in range(processes)
        ]
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    finally:
        stop.set()
        person.join()
    assert [p.returncode for p in procs] == [0] * processes
    time.sleep(0.6)
    final = Workspace.open(ws.root).sharing.pool().read("counter")
    assert final is not None
    conflicts = sum(int(out) for out in outputs)
    print(
        f"\n{processes} x {increments} increments, {saves[0]} stale saves: value {final.content}, "
        f"{conflicts} retried"
    )
    total = processes * increments
    assert (final.content, final.version) == (total, total + 1)
    text = path.read_text()
    assert text.count("## counter") == 1
    assert all(f"A note from the person {n}\n" in text for n in range(1, saves[0] + 1))
    ws.close()
