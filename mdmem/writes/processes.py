"""Whether the process that wrote something still runs: a temp file whose writer is gone is
removed (:func:`mdmem.writes.safe_writer.remove_stale_temps`, the sessions' sweep), and a
running session whose writer is gone is marked interrupted
(:mod:`mdmem.memory.interrupted_sessions`).

Process ids are reused: a pid alone says only that *some* process has it; with its start time
(:func:`process_start`, from Linux's ``/proc/<pid>/stat``) it names one process. Where the
start time is unknown (not Linux), a live pid is taken for the writer: the safe side, nothing
of a running writer is touched. Why the standard library and not psutil: docs/architecture.md.
"""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, from Linux's /proc), or None.

    With the pid it names one process: a pid the system gave to a new process after the
    first one died has another start.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name in parentheses may hold spaces
    try:
        return int(fields[19])  # field 22 of proc(5); fields[0] is field 3
    except (IndexError, ValueError):
        return None
