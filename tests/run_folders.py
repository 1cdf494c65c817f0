"""Where a test run's temporary files go, and that they go away (tests/conftest.py).

A RAM disk where the machine has one: each of mdmem's writes is fsynced, file and folder
(mdmem/writes/safe_writer.py), and on a disk shared by several engineers' test runs every fsync
waited on everyone's I/O: a test of 110 session writes took 40 s there and 22 s on /dev/shm.
The files, renames, locks and inotify events are the same on a RAM disk; what it cannot show (a
power cut right after an fsync) no test here shows on a disk either.

A RAM disk holds memory, so what a run makes outside pytest's tmp_path (which keeps the last
three runs' and removes older ones) is removed when the process that made it exits: the model
cache alone (its ONNX export) is 170 MB a run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

RAM_DISK = "/dev/shm"
ROOM = 2_000_000_000
"""The room it must have: a full run's tmp_path folders come to about 200 MB."""


def tmpdir_for_tests() -> dict[str, str]:
    """``{"TMPDIR": "/dev/shm"}`` when TMPDIR names no place and /dev/shm is a writable RAM
    disk with room; otherwise nothing. Set in ``os.environ``, it holds for pytest's tmp_path,
    tempfile's folders and every process the tests start."""
    if "TMPDIR" in os.environ:
        return {}
    try:
        disk = os.statvfs(RAM_DISK)
    except OSError:
        return {}
    if disk.f_bavail * disk.f_frsize < ROOM or not os.access(RAM_DISK, os.W_OK | os.X_OK):
        return {}
    tempfile.tempdir = None  # found again from TMPDIR, had anything asked for it already
    return {"TMPDIR": RAM_DISK}


def folder_of_this_process(prefix: str) -> str:
    """A new temporary folder, removed with what it holds when this process exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def unless_set(name: str, prefix: str) -> dict[str, str]:
    """``{name: a new folder of this process}``, unless the environment sets ``name`` (to a
    folder the run's first process made, which its xdist workers share, or one of the user's
    choosing): then nothing, and no folder is made."""
    return {} if name in os.environ else {name: folder_of_this_process(prefix)}
