"""Query embedding latency and batch throughput against torch's thread count.

For each setting of `embedding.threads` (0 = torch's default, one per core, then 1, 2 ...)
and of OpenMP's wait policy (PASSIVE, mdmem's default, where idle threads sleep; ACTIVE, where
they spin, the default of torch alone), in a fresh process each (both are process-wide): p50 /
p95 of single-query embeddings (what every search pays), and texts/s embedding batches of 32
(what indexing pays). Run it on a busy machine too: under CPU contention, spinning threads wait
for each other. The load average is printed with the figures.

Usage:  .venv/bin/python benchmarks/embed_threads.py [--threads 0 1 2] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
ONE_SETTING = """
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
from mdmem.index.embed import SentenceTransformerEmbedder
threads, queries = int(sys.argv[2]), int(sys.argv[3])
model = SentenceTransformerEmbedder(threads=threads)
model.embed(["warm up"])
import torch
words = ("invoice customer payment refund ledger export postgres migration docker deploy "
         "review schema endpoint latency cache token budget session memory agent").split()
rng = random.Random(7)
single = []
for _ in range(queries):
    text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 9)))
    started = time.perf_counter()
    model.embed([text])
    single.append((time.perf_counter() - started) * 1000)
texts = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(640)]
started = time.perf_counter()
model.embed(texts)
rate = len(texts) / (time.perf_counter() - started)
single.sort()
print(json.dumps({"torch_threads": torch.get_num_threads(), "p50": single[len(single) // 2],
                  "p95": single[int(0.95 * (len(single) - 1))], "rate": rate}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    for policy in ("PASSIVE", "ACTIVE"):
        for threads in args.threads:
            out = subprocess.run(
                [sys.executable, "-c", ONE_SETTING, str(ROOT), str(threads), str(args.queries)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "OMP_WAIT_POLICY": policy},
            ).stdout
            rows.append((policy, threads, json.loads(out.strip().splitlines()[-1])))
    load_after = os.getloadavg()
    table = Table(title=f"query embedding vs embedding.threads ({os.cpu_count()} cores)")
    columns = ("OMP_WAIT_POLICY", "embedding.threads", "torch threads", "query p50 ms",
               "query p95 ms", "batches of 32: texts/s")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right")
    for policy, threads, r in rows:
        table.add_row(policy, str(threads), str(r["torch_threads"]), f"{r['p50']:.1f}",
                      f"{r['p95']:.1f}", f"{r['rate']:.0f}")  # fmt: skip
    Console(width=120).print(table)
    loads = [" / ".join(f"{x:.2f}" for x in load) for load in (load_before, load_after)]
    print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


if __name__ == "__main__":
    main()
