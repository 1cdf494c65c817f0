"""Search latency, recorded cheaply: one short line appended per search to
``.mdmem/latency.log`` (an O_APPEND write, atomic between processes), trimmed to the most recent
:data:`KEEP` lines once it grows past :data:`MAX_BYTES`. Read back by ``mdmem stats``."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

LOG = "latency.log"
KEEP = 1000
MAX_BYTES = 64_000


@contextlib.contextmanager
def timed(state_dir: Path) -> Iterator[None]:
    """Record how long the block took (only when it returns: a failed search is no latency)."""
    started = time.perf_counter()
    yield
    record(state_dir, time.perf_counter() - started)


def record(state_dir: Path, seconds: float) -> None:
    """Best effort: a read-only or missing state folder never fails a search."""
    path = state_dir / LOG
    line = f"{time.time():.3f} {seconds * 1000:.3f}\n".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line)
        size = os.fstat(fd).st_size
    except OSError:
        return
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        _trim(path)


def recent(state_dir: Path) -> list[float]:
    """Milliseconds of the most recent searches, oldest first."""
    try:
        text = (state_dir / LOG).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines()[-KEEP:]:
        parts = line.split()
        try:
            out.append(float(parts[1]))
        except (IndexError, ValueError):
            continue  # a torn or hand-edited line
    return out


def _trim(path: Path) -> None:
    tmp = path.with_name(f".{LOG}.{os.getpid()}.tmp")
    try:
        lines = path.read_bytes().splitlines(keepends=True)[-KEEP:]
        tmp.write_bytes(b"".join(lines))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
