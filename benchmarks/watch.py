"""Live memory: how fast a hand edit becomes searchable, and what the watcher costs.

Measures, on a synthetic workspace of 1,000 Markdown files (3 entries each), with the real
default embedding model:
  edit → searchable   time from a file write to its new entry being indexed *and embedded*
                      by a running watcher (polled on a separate read-only connection),
                      p50/p95 over 200 edits (goal p95 ≤ 250 ms)
  no watcher          the same edit followed by `Workspace.search`, whose freshness check
                      re-indexes the file itself (p50/p95 of the search call)
  burst               1,000 files rewritten at once (like `git checkout`) → index complete
  CLI search          wall time of `mdmem search` with a running `mdmem watch` (warm server)
                      vs without (model loaded per call), median of 7 (goal ≤ 150 ms with)
  idle watcher        CPU seconds used over 20 s idle, and its RSS

Usage:  .venv/bin/python benchmarks/watch.py [--files 1000] [--edits 200]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402

WORK = ROOT / ".bench" / "watch"
MDMEM = Path(sys.executable).parent / "mdmem"
WORDS = (
    "invoice customer payment refund ledger export postgres migration docker deploy review "
    "schema endpoint latency cache token budget session memory agent search index vector "
    "keyword editor backup rollback queue worker retry timeout config secret rotate staging "
    "release branch commit test fixture mock coverage lint format build image port network"
).split()


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize()


def make_workspace(root: Path, files: int, rng: random.Random) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "notes").mkdir(parents=True)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "bench"\n')
    for i in range(files):
        entries = "\n".join(f"- {sentence(rng)}" for _ in range(3))
        (root / "notes" / f"note{i:04}.md").write_text(f"# Note {i}\n\n## Facts\n{entries}\n")


def searchable(db: Path, token: str, model: str) -> bool:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return (
            conn.execute(
                "SELECT 1 FROM chunks c JOIN embeddings e ON e.text_hash = c.text_hash "
                "AND e.model = ? WHERE c.text LIKE ? LIMIT 1",
                (model, f"%{token}%"),
            ).fetchone()
            is not None
        )
    finally:
        conn.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime in clock ticks


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cli_search(root: Path, *extra: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [str(MDMEM), "-w", str(root), "search", "invoice payment", "-k", "5", *extra],
        check=True,
        capture_output=True,
    )
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=200)
    args = parser.parse_args()
    console = Console(width=130)
    rng = random.Random(7)
    root = WORK / "ws"
    make_workspace(root, args.files, rng)
    embedder = SentenceTransformerEmbedder()
    ws = Workspace(root, embedder=embedder)
    started = time.perf_counter()
    ws.index.update()
    console.log(f"indexed {args.files} files in {time.perf_counter() - started:.1f} s")
    db = ws.files._state_dir / "index.db"
    rows: list[tuple[str, str]] = []

    # 1. edit → searchable with a watcher running
    latencies = []
    with ws.watch() as watcher:
        watcher.wait_idle(timeout=300)
        for n in range(args.edits):
            token = f"zq{n:04}x"
            path = root / "notes" / f"note{rng.randrange(args.files):04}.md"
            text = path.read_text() + f"- Edited entry {token} {sentence(rng, 6)}\n"
            t0 = time.perf_counter()
            path.write_text(text)
            while not searchable(db, token, embedder.model_id):
                time.sleep(0.002)
            latencies.append((time.perf_counter() - t0) * 1000)
        # 3. a burst of every file changed at once
        t0 = time.perf_counter()
        for i in range(args.files):
            p = root / "notes" / f"note{i:04}.md"
            p.write_text(p.read_text() + f"- burst entry bq{i:04}y {sentence(rng, 6)}\n")
        written = time.perf_counter() - t0
        while not searchable(db, f"bq{args.files - 1:04}y", embedder.model_id):
            time.sleep(0.01)
        watcher.wait_idle(timeout=600)
        burst = time.perf_counter() - t0
        missing = [
            i for i in range(args.files) if not searchable(db, f"bq{i:04}y", embedder.model_id)
        ]
    rows.append(
        (
            f"edit → searchable, watcher running ({args.edits} edits)",
            f"p50 {statistics.median(latencies):.0f} ms, p95 {pct(latencies, 0.95):.0f} ms",
        )
    )

    # 2. no watcher: the search's own freshness check re-indexes the edited file
    no_watch = []
    for n in range(min(50, args.edits)):
        token = f"nw{n:04}x"
        path = root / "notes" / f"note{rng.randrange(args.files):04}.md"
        path.write_text(path.read_text() + f"- Unwatched entry {token}\n")
        t0 = time.perf_counter()
        hits = ws.search(f"Unwatched entry {token}", k=3, track_access=False)
        no_watch.append((time.perf_counter() - t0) * 1000)
        assert any(token in h.text for h in hits), token
    rows.append(
        (
            "edit → `Workspace.search` with no watcher (50 edits)",
            f"p50 {statistics.median(no_watch):.0f} ms, p95 {pct(no_watch, 0.95):.0f} ms",
        )
    )
    rows.append(
        (
            f"burst: {args.files} files rewritten at once → index complete",
            f"{burst:.1f} s (writing took {written:.1f} s; {len(missing)} missing)",
        )
    )
    ws.close()

    # 4. CLI with and without the warm server; idle cost of the watcher
    without = [cli_search(root, "--no-server") for _ in range(5)]
    watch = subprocess.Popen(
        [str(MDMEM), "-w", str(root), "watch"], stderr=subprocess.PIPE, text=True
    )
    try:
        while "watching" not in (watch.stderr.readline() if watch.stderr else "watching"):
            pass
        time.sleep(2)
        cli_search(root)  # first query warms the model's lazy parts
        with_server = [cli_search(root) for _ in range(7)]
        cpu0 = cpu_seconds(watch.pid)
        time.sleep(20)
        idle_cpu = cpu_seconds(watch.pid) - cpu0
        rss = rss_mb(watch.pid)
    finally:
        watch.terminate()
        watch.wait(timeout=30)
    rows.append(("`mdmem search`, no server (model loaded per call), median of 5",
                 f"{statistics.median(without):.0f} ms"))  # fmt: skip
    rows.append(("`mdmem search` with `mdmem watch` running, median of 7",
                 f"{statistics.median(with_server):.0f} ms"))  # fmt: skip
    rows.append(("watcher idle: CPU over 20 s, RSS",
                 f"{idle_cpu:.2f} s CPU ({idle_cpu / 20 * 100:.1f}%), {rss:.0f} MB"))  # fmt: skip

    table = Table(title=f"mdmem live memory: {args.files} files, {args.files * 3} entries")
    table.add_column("measure")
    table.add_column("result", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


if __name__ == "__main__":
    main()
