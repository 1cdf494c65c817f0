"""What Claude Code's Stop hook leaves in `.mdmem/` over one long session: the import logs and
the write journal, after each stop.

    .venv/bin/python benchmarks/import_growth.py [--stops 200] [--turns 4] [--every 50]

A synthetic Claude Code log (in .bench/import_growth/) grows by ``--turns`` messages (about
1.3 KB each) before each of ``--stops`` stops; each stop runs what the installed Stop hook runs
(``hooks.import_transcript`` on a newly opened workspace, as a new hook process would). Every
``--every`` stops a row gives the log's size, the session file's, and the bytes and files in
``.mdmem/imports/`` and ``.mdmem/journal/`` (the journal's bytes as on disk: a version linked
to another counts once, as ``du`` counts it). Nothing is asserted (the caps are held by
tests/integration/test_import_growth.py and tests/integration/test_journal_growth.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mdmem import Workspace
from mdmem.integrations import hooks
from mdmem.integrations.importers.logs import IMPORTS_DIR, folder_bytes
from mdmem.writes.journal import Journal

OUT = Path(__file__).resolve().parent.parent / ".bench" / "import_growth"
SESSION = "7a1b2c3d-0000-4000-8000-0000000000cc"
WORDS = "the login test fails because a cookie race in the session fixture retries".split()


def _record(n: int, rng: random.Random) -> str:
    kind = "user" if n % 2 else "assistant"
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 90)))
    content = text if kind == "user" else [{"type": "text", "text": text}]
    return json.dumps({
        "sessionId": SESSION, "isSidechain": False, "type": kind, "uuid": f"u-{n}",
        "parentUuid": f"u-{n - 1}", "timestamp": f"2026-03-01T08:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "message": {"role": kind, "content": content},
    }) + "\n"  # fmt: skip


def _files(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stops", type=int, default=200)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--every", type=int, default=50)
    args = parser.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    root = Workspace.init(OUT / "ws", mode="full", agent="bench").root
    # where Claude Code keeps transcripts (the hook reads them from there only)
    os.environ["CLAUDE_CONFIG_DIR"] = str(OUT / "claude")
    log = OUT / "claude" / "projects" / "bench" / f"{SESSION}.jsonl"
    log.parent.mkdir(parents=True)
    rng = random.Random(1)
    table = Table(title="after each stop: sizes in MB (files)")
    for column in ("stop", "session log", "session file", "import logs", "journal"):
        table.add_column(column, justify="right")
    n = 0
    for stop in range(1, args.stops + 1):
        with log.open("a", encoding="utf-8") as handle:
            for _ in range(args.turns):
                n += 1
                handle.write(_record(n, rng))
        ws = Workspace.open(root)
        hooks.import_transcript(ws, {"hook_event_name": "Stop", "transcript_path": str(log)})
        ws.close()
        if stop % args.every == 0 or stop == args.stops:
            state = root / ".mdmem"
            imports, journal = state / IMPORTS_DIR, state / "journal"
            table.add_row(
                str(stop),
                f"{log.stat().st_size / 1e6:.2f}",
                f"{folder_bytes(root / '.sessions') / 1e6:.2f}",
                f"{folder_bytes(imports) / 1e6:.3f} ({_files(imports)})",
                f"{Journal(state).size() / 1e6:.2f} ({_files(journal)})",
            )
    Console().print(table)


if __name__ == "__main__":
    main()
