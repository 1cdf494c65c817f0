"""mdmem.writes.file_lock: the flock mdmem's writes, imports and passes hold. Real processes:
a lock held in another process (by this module, or by the filelock package an older mdmem
used: the same system call on the same file) keeps this one out until it is released."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mdmem.writes.file_lock import FileLock, Timeout

HOLD = (
    "import sys\nfrom {module} import FileLock\n"
    "with FileLock(sys.argv[1]):\n    print('held', flush=True)\n    sys.stdin.readline()\n"
)


def holder(path: Path, module: str) -> subprocess.Popen[str]:
    """Another process holding the lock on ``path`` until its stdin gets a line."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(module=module), str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


@pytest.mark.parametrize("module", ["mdmem.writes.file_lock", "filelock"])
def test_a_lock_held_elsewhere_keeps_this_one_out_until_released(
    tmp_path: Path, module: str
) -> None:
    path = tmp_path / "state" / "x.lock"
    path.parent.mkdir()
    other = holder(path, module)
    try:
        with pytest.raises(Timeout):
            FileLock(path, timeout=0).acquire()
        with pytest.raises(Timeout):
            FileLock(path, timeout=0.2, poll_interval=0.01).acquire()
        with pytest.raises(Timeout):  # this call's timeout, not the lock's
            FileLock(path, timeout=-1).acquire(timeout=0)
        waiting = FileLock(path, timeout=60, poll_interval=0.01)
        got = threading.Event()
        thread = threading.Thread(target=lambda: (waiting.acquire(), got.set()))
        thread.start()
        assert not got.wait(0.3)  # still held by the other process
        assert other.stdin is not None
        other.stdin.write("go\n")
        other.stdin.flush()
        thread.join(60)
        assert got.is_set() and waiting.is_locked
    finally:
        other.communicate(timeout=60)
    waiting.release()
    assert not waiting.is_locked
    with FileLock(path, timeout=0) as again:  # released: free to take
        assert again.is_locked


def test_two_holds_in_one_process_exclude_each_other_and_a_missing_folder_is_made(
    tmp_path: Path,
) -> None:
    path = tmp_path / "made" / "here" / "y.lock"
    first = FileLock(path, timeout=0, mode=0o600).acquire()
    assert (path.stat().st_mode & 0o777) == 0o600
    with pytest.raises(Timeout, match=r"y\.lock"):
        FileLock(path, timeout=0).acquire()
    with pytest.raises(RuntimeError):
        first.acquire()
    first.release()
    FileLock(path, timeout=0).acquire().release()
