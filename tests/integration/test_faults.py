"""The fault-injection suite (benchmarks/faults.py), run in CI: every fault, many times, and
nothing lost, nothing corrupted, every failure a clear error.

The editor races (4 patterns × 300 saves; 1,000 with MDMEM_STRESS=full) run in tests/integration/test_editor_races.py; the README's table comes
from `.venv/bin/python benchmarks/faults.py`, which runs them all.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from stress import FULL

from mdmem import Workspace
from mdmem.errors import MdmemError
from mdmem.memory.session_writer import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import faults

pytestmark = pytest.mark.slow

NEEDS_ROOT = {"disk_full", "read_only_search"}
SMALLER = {"concurrent_writers": {"processes": 4, "ops": 50}, "sigkill_mid_write": {"n": 12}}
"""What `make test` runs of the longest faults (the benchmark's sizes with MDMEM_STRESS=full)."""


@pytest.mark.parametrize("name", sorted(faults.FAULTS))
def test_fault(name: str, tmp_path: Path) -> None:
    if name in NEEDS_ROOT and os.geteuid() != 0:
        pytest.skip("mounts a tmpfs: needs root")
    out = faults.FAULTS[name](tmp_path, **({} if FULL else SMALLER.get(name, {})))
    for result in out if isinstance(out, list) else [out]:
        assert result.tried > 0, result
        assert result.ok, result


# ---- a full disk: every call a clear line naming the file; healed once space is freed ----------

BIN = Path(sys.executable).parent / "mdmem"


def _fill(mnt: Path) -> Path:
    """Write a filler file until the file system has no space left."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    with contextlib.suppress(OSError):
        while True:
            os.write(fd, b"x" * 4096)
    os.close(fd)
    return filler


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MDMEM_WORKSPACE"}
    return subprocess.run(
        [str(BIN), "-w", str(root), *args], capture_output=True, text=True, env=env, timeout=120
    )


def _full_disk_calls(ws: Workspace, session: Session) -> dict[str, Callable[[], object]]:
    """Every kind of write the library makes, each big enough to need new space."""
    big = "y" * 3000
    first = ws.entries("memory.md")[0].id
    return {
        "remember": lambda: ws.remember(f"remembered {big}", type="fact"),
        "update": lambda: ws.update(first, f"updated {big}"),
        "forget": lambda: ws.forget(first),
        "session": lambda: ws.session("started on a full disk"),
        "event": lambda: session.event("note", f"an event {big}"),
        "close": lambda: session.close(),
        "task": lambda: ws.task.add(f"a todo {big}"),
        "world": lambda: ws.world.set("region", big),
        "pool": lambda: ws.sharing.pool().write("findings/x", big),
    }


def test_a_state_file_write_on_a_full_disk_names_the_file(tmp_path: Path) -> None:
    """mdmem's own state files (promotion state, heartbeats, caches) are written whole or not
    at all; on a full disk the error (logged by a background pass) says which file."""
    from mdmem.writes.safe_writer import atomic_write

    with faults.tmpfs(tmp_path / "small", "1m") as mnt:
        if mnt is None:
            pytest.skip("cannot mount a 1 MB tmpfs (needs root)")
        state = mnt / "promote.json"
        state.write_bytes(b"{}")
        filler = _fill(mnt)
        with pytest.raises(OSError) as info:
            atomic_write(state, b"{" + b" " * 200_000 + b"}")
        assert str(state) in str(info.value) and "No space left" in str(info.value)
        assert state.read_bytes() == b"{}"
        assert sorted(p.name for p in mnt.iterdir()) == sorted([state.name, filler.name])
        filler.unlink()


def test_a_full_disk_is_one_clear_line_naming_the_file_and_heals(tmp_path: Path) -> None:
    with faults.tmpfs(tmp_path / "small", "4m") as mnt:
        if mnt is None:
            pytest.skip("cannot mount a 4 MB tmpfs (needs root)")
        root = faults._workspace(mnt)
        ws = Workspace(root)
        ws.remember("written before the disk filled", type="fact")
        session = ws.session("begun before the disk filled")
        ws.index.update(embed=False)
        with open(root / "memory.md", "a", encoding="utf-8") as handle:
            handle.write("- The zebra crossing is on Elm Street\n")  # a hand edit, not indexed
        filler = _fill(mnt)

        index = _cli(root, "index")  # it used to say "0 added, 0 updated" and exit 0
        assert index.returncode == 1 and "Traceback" not in index.stderr, index.stderr
        (line,) = [x for x in index.stderr.splitlines() if x.startswith("mdmem: error: ")]
        assert f"{root}/.mdmem/index.db cannot be written: the disk is full" in line
        assert "(1 changed file(s) not indexed)" in line
        search = _cli(root, "search", "zebra crossing")  # answers from the index as it is
        assert search.returncode == 0 and "the disk is full" in search.stderr, search.stderr
        assert "memory.md changed but is not re-indexed yet" in search.stderr

        files = {p: p.read_bytes() for p in root.rglob("*.md") if ".mdmem" not in p.parts}
        for name, call in _full_disk_calls(ws, session).items():
            with pytest.raises(MdmemError) as info:  # never a bare OSError
                call()
            message = str(info.value)
            assert len(message.splitlines()) == 1, (name, message)
            assert "No space left on device" in message or "the disk is full" in message, message
            assert message.split(":", 1)[0].endswith(".md"), (name, message)  # names the file
        assert {p: p.read_bytes() for p in files} == files  # nothing half-written

        filler.unlink()  # space freed: the same calls work, the index catches up
        for call in _full_disk_calls(ws, session).values():
            call()
        healed = _cli(root, "index")
        assert healed.returncode == 0, healed.stderr
        assert ws.search("zebra crossing", mode="keyword")[0].path == "memory.md"
        ws.close()
