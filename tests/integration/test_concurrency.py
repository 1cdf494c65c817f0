"""Real processes racing for real locks, and a writer killed mid-write."""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from stress import size

from mdmem import Workspace
from mdmem.markdown.parse import parse_document

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent(
    """
    import sys
    from mdmem import Workspace
    ws = Workspace(sys.argv[1])
    name, count = sys.argv[2], int(sys.argv[3])
    for i in range(count):
        ws.remember(f"process {name} memory {i}", type="fact", importance=0.5)
    """
)
ID = re.compile(r"^m-[0-9a-f]{10}$")


def _check_well_formed(text: str) -> int:
    doc = parse_document("memory.md", text)
    assert doc.problems == ()
    facts = [e for e in doc.entries if e.heading_path[-1:] == ("Facts",)]
    for entry in facts:
        assert ID.match(entry.id), entry
        assert re.fullmatch(r"process \w+ memory \d+", entry.text), entry.text
    assert text.endswith("\n")
    return len(facts)


def test_processes_racing_remembers_lose_none(ws: Workspace) -> None:
    """4 x 50 remembers in `make test`, 8 x 100 with MDMEM_STRESS=full."""
    processes, remembers = size(4, 8), size(50, 100)
    path = ws.root / "memory.md"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(ws.root), f"p{n}", str(remembers)])
        for n in range(processes)
    ]
    seen = 0
    reads = 0
    while any(p.poll() is None for p in procs):
        count = _check_well_formed(path.read_text(encoding="utf-8"))  # after every write
        assert count >= seen  # entries are never lost
        seen = count
        reads += 1
        time.sleep(0.05)
    assert [p.returncode for p in procs] == [0] * processes
    final = path.read_text(encoding="utf-8")
    assert _check_well_formed(final) == processes * remembers
    texts = {e.text for e in parse_document("memory.md", final).entries}
    assert texts >= {f"process p{n} memory {i}" for n in range(processes) for i in range(remembers)}
    assert reads > 10


def test_sigkill_during_the_write_leaves_the_old_file(tmp_path: Path) -> None:
    """Kill a writer while it is provably inside the write (its temp file is growing)."""
    target = tmp_path / "memory.md"
    old = b"# Memory\n- the old content\n"
    target.write_bytes(old)
    child = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from mdmem.writes.safe_writer import atomic_write
        atomic_write(Path(sys.argv[1]), b"- new line\\n" * 20_000_000)  # ~220 MB
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child, str(target)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        temps = list(tmp_path.glob(".memory.md.*.mdmem-tmp"))
        if temps and temps[0].stat().st_size > 1_000_000:
            break
        time.sleep(0.005)
    else:
        pytest.fail("the writer never started writing")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert target.read_bytes() == old  # not torn, not empty: the old file
    ws = Workspace(tmp_path)
    assert ws.entries("memory.md")[0].text == "the old content"
    ws.remember("written after the crash")  # ...which also clears the dead writer's temp file
    assert list(tmp_path.glob(".memory.md.*")) == []


def test_sigkill_at_random_moments_of_a_remember_loop(ws: Workspace) -> None:
    """Each writer is killed at a random moment of its loop: after its first write showed up,
    somewhere in the next 2 s (tens of writes, each a read, an edit and a swap: often mid-write).
    The seed is in every failure message."""
    path = ws.root / "memory.md"
    padding = "".join(f"- hand-written filler line {i} {'x' * 80}\n" for i in range(3000))
    base = "# Memory\n\n## Notes\n" + padding + "\n## Facts\n"
    path.write_text(base, encoding="utf-8")
    previous = _check_well_formed(base)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for round_ in range(8):
        name = f"k{round_}"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(ws.root), name, "500"])
        deadline = time.monotonic() + 60
        while f"process {name} memory 0" not in path.read_text(encoding="utf-8"):
            assert proc.poll() is None and time.monotonic() < deadline, f"seed {seed}"
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 2.0))
        assert proc.poll() is None, f"seed {seed}: the writer finished before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = path.read_text(encoding="utf-8")
        count = _check_well_formed(text)
        assert count >= previous + 1, f"seed {seed}"  # its confirmed writes are all there
        assert text.startswith(base[:-1]), f"seed {seed}"  # the person's lines are intact
        previous = count
    # the workspace keeps working after the kills, and temp files are never indexed
    assert Workspace(ws.root).remember("process after memory 0", type="fact")
    assert all(not d.path.endswith(".mdmem-tmp") for d in Workspace(ws.root).files.all().documents)
