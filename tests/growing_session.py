"""A Claude Code session that grows by one turn per Stop, as a long real one does: the input of
the tests that hold mdmem's stores under their caps (import logs, journal) over 200 stops."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

SESSION = "7a1b2c3d-0000-4000-8000-0000000000cc"
WORDS = "the login test fails because a cookie race in the session fixture retries".split()


def turn(n: int, rng: random.Random) -> str:
    """The ``n``-th record of the session's JSONL log (200-500 words of text)."""
    kind = "user" if n % 2 else "assistant"
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(200, 500)))
    record = {
        "sessionId": SESSION,
        "isSidechain": False,
        "type": kind,
        "uuid": f"u-{n}",
        "parentUuid": f"u-{n - 1}",
        "timestamp": f"2026-03-01T{8 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "message": {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]},
    }  # fmt: skip
    return json.dumps(record) + "\n"


def stop_payload(log: Path) -> dict[str, str]:
    """What Claude Code passes its Stop hook for this session."""
    return {"hook_event_name": "Stop", "session_id": SESSION, "transcript_path": str(log)}


def disk_bytes(folder: Path) -> int:
    """What a folder takes on disk: each file once, however many names it has (as du)."""
    inodes = {}
    for dirpath, _, names in os.walk(folder):
        for name in names:
            info = os.stat(Path(dirpath) / name)
            inodes[info.st_ino] = info.st_size
    return sum(inodes.values())
