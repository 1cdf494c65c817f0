"""`mdmem search` from outside, as an agent shelling out to it sees it.

On a synthetic workspace (Markdown files of 3 entries each, indexed first with the real model):
  cold        the first `mdmem search`: it finds no server, starts one in the background
              (`mdmem watch --idle-exit`), waits while it loads the model, and is answered
  warm        later `mdmem search` calls, answered by that server: p50 / p95 wall time
  after edit  a file rewritten in place (a new word in it), then at once `mdmem search` for
              that word: the server's watcher has not indexed it yet, so the search checks
              every file itself; every answer must hold the new word (stale answers counted)
  baseline    `python -c pass` with the same interpreter, run alternately with the warm
              calls (a loaded machine slows both alike): the ratio is what mdmem adds
  in-process  `mdmem search --no-server` (imports torch, loads the model), median of 3
  server      the automatic server's RSS
The load average is printed with the figures: the machine may be shared.

Usage:  .venv/bin/python benchmarks/cli_latency.py [--files 1000] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
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
from mdmem.layout import running_watcher  # noqa: E402

WORK = ROOT / ".bench" / "cli_latency"
MDMEM = Path(sys.executable).parent / "mdmem"
WORDS = (
    "invoice customer payment refund ledger export postgres migration docker deploy review "
    "schema endpoint latency cache token budget session memory agent search index vector "
    "keyword editor backup rollback queue worker retry timeout config secret rotate staging "
    "release branch commit test fixture mock coverage lint format build image port network"
).split()
QUERIES = ("invoice payment", "which port does postgres use", "rollback a deploy", "token budget")


def make_workspace(root: Path, files: int, rng: random.Random) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "notes").mkdir(parents=True)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "bench"\n')
    for i in range(files):
        entries = "\n".join(
            "- " + " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() for _ in range(3)
        )
        (root / "notes" / f"note{i:04}.md").write_text(f"# Note {i}\n\n## Facts\n{entries}\n")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return (time.perf_counter() - started) * 1000, done.stderr


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def edit_then_search(
    root: Path, search: list[str], env: dict[str, str], runs: int
) -> tuple[list[float], int]:
    """Rewrite one file in place with a new word, then search for it at once: wall times, and
    how many answers did not hold the new word."""
    note = root / "notes" / "note0000.md"
    original = note.read_text()
    times, stale = [], 0
    for i in range(runs):
        word = f"zqxedit{i}"
        with note.open("r+") as f:
            f.truncate()
            f.write(original + f"- The newest word is {word}\n")
        started = time.perf_counter()
        done = subprocess.run([*search, "--json", word], capture_output=True, text=True, env=env)
        times.append((time.perf_counter() - started) * 1000)
        hits = json.loads(done.stdout)["hits"] if done.returncode == 0 else []
        stale += not any(word in hit["text"] for hit in hits)
    note.write_text(original)
    return times, stale


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    console = Console(width=130)
    root = WORK / "ws"
    make_workspace(root, args.files, random.Random(15))
    started = time.perf_counter()
    with Workspace.open(root) as ws:
        report = ws.index.update()
    console.print(
        f"indexed {report.chunks_written} chunks in {time.perf_counter() - started:.0f} s "
        f"(load average {load()})"
    )
    env = {**os.environ, "MDMEM_SERVER_AUTO": "1"}
    env.pop("MDMEM_WORKSPACE", None)
    search = [str(MDMEM), "-w", str(root), "search", "-k", "5"]
    loads = [load()]
    try:
        cold, stages = timed([*search, QUERIES[0]], env)
        pid = running_watcher(root)
        warm, bare = [], []
        for i in range(args.runs):
            warm.append(timed([*search, QUERIES[i % len(QUERIES)]], env)[0])
            bare.append(timed([sys.executable, "-c", "pass"], env)[0])
        edited, stale = edit_then_search(root, search, env, args.runs)
        rss = rss_mb(pid) if pid else float("nan")
    finally:
        if pid := running_watcher(root):
            os.kill(pid, signal.SIGTERM)
    in_process = [timed([*search, "--no-server", QUERIES[1]], env)[0] for _ in range(3)]
    loads.append(load())

    table = Table(
        title=f"`mdmem search` from outside: {args.files} files, {report.chunks_written} chunks"
    )
    table.add_column("measure")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    table.add_column("× python -c pass (p50 / p95)", justify="right")
    table.add_row(f"`python -c pass`, {args.runs} runs", f"{pct(bare, 0.5):.0f}",
                  f"{pct(bare, 0.95):.0f}", "1.0 / 1.0")  # fmt: skip
    table.add_row(
        f"`mdmem search`, warm server started by the first call, {args.runs} runs",
        f"{pct(warm, 0.5):.0f}",
        f"{pct(warm, 0.95):.0f}",
        f"{pct(warm, 0.5) / pct(bare, 0.5):.1f} / {pct(warm, 0.95) / pct(bare, 0.95):.1f}",
    )
    table.add_row(
        f"`mdmem search` at once after an edit, {args.runs} runs ({stale} stale answers)",
        f"{pct(edited, 0.5):.0f}",
        f"{pct(edited, 0.95):.0f}",
        f"{pct(edited, 0.5) / pct(bare, 0.5):.1f} / {pct(edited, 0.95) / pct(bare, 0.95):.1f}",
    )
    table.add_row("`mdmem search`, the first (cold) call: starts the server", f"{cold:.0f}", "", "")
    table.add_row("`mdmem search --no-server` (in-process), median of 3",
                  f"{statistics.median(in_process):.0f}", "", "")  # fmt: skip
    console.print(table)
    console.print(f"automatic server RSS: {rss:.0f} MB")
    console.print("the first call said:\n  " + "\n  ".join(stages.strip().splitlines()))
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


if __name__ == "__main__":
    main()
