"""Search across a parent chain: latency against one workspace, and whether one scale is sane.

    .venv/bin/python benchmarks/scopes.py [--facts 300] [--queries 40]

Three workspaces (in .bench/scopes/): ``child`` → ``parent`` → ``grandparent`` (``parent =`` in
each mdmem.toml), each holding ``--facts`` lasting memories in memory.md, and a fourth,
``merged``, holding all of them in one memory.md. Each is indexed by itself (the real model).
Each query asks for one fact, a third of them from each level. Reported, for the same queries:

  latency    ``ws.search(q)`` p50 / p95 of the child alone (its parent line removed), the
             merged workspace, and the child with its chain of 3 (own index synced; the
             parents' indexes opened read-only, their files checked for staleness at every
             search); hybrid (the query embedded once for all workspaces) and keyword (no
             model: what the federation itself costs)
  one scale  against the merged workspace (one index, one ranking: the reference), the share of
             queries whose fact is the chain's top hit, and the mean overlap of the two top 10s

Medians and p95 of one run, after one warm-up search; nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mdmem import Workspace
from mdmem.index.embed import SentenceTransformerEmbedder

OUT = Path(__file__).resolve().parent.parent / ".bench" / "scopes"
SUBJECTS = ["billing", "search", "onboarding", "the mobile app", "reporting", "the API",
            "backups", "the data team", "support", "deployments", "pricing",
            "the website"]  # fmt: skip
TOOLS = ["Postgres", "Redis", "Kafka", "Grafana", "Sentry", "Terraform", "Airflow", "dbt",
         "Stripe", "Figma", "Slack", "Jira", "GitHub Actions", "Docker"]  # fmt: skip
VERBS = ["runs on", "reports errors to", "is scheduled with", "is designed in", "alerts through",
         "stores its state in", "is provisioned with", "is tracked in"]  # fmt: skip


def _facts(rng: random.Random, n: int, level: str) -> list[tuple[str, str]]:
    """(fact, a question it answers) pairs, unique within a run."""
    out = []
    for i in range(n):
        subject, verb, tool = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(TOOLS)
        code = f"{level[:2].upper()}-{i:04d}"
        fact = f"{subject.capitalize()} {verb} {tool} (ticket {code}, owner {rng.randint(1, 99)})"
        out.append((fact, f"what does {subject} use, ticket {code}"))
    return out


def _write(root: Path, facts: list[str], parent: str = "") -> Workspace:
    Workspace.init(root, mode="full")
    if parent:
        config = root / "mdmem.toml"
        config.write_text(f'parent = "{parent}"\n' + config.read_text())
    body = "".join(f"- {f}\n" for f in facts)
    (root / "memory.md").write_text(f"# Memory\n\n## Known Facts\n\n{body}")
    return Workspace.open(root)


def _times(ws: Workspace, queries: list[str], mode: str) -> list[float]:
    ws.search(queries[0], mode=mode)  # warm: layout, vectors, parents opened
    out = []
    for q in queries:
        started = time.perf_counter()
        ws.search(q, mode=mode, track_access=False)
        out.append((time.perf_counter() - started) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=300)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(13)
    shutil.rmtree(OUT, ignore_errors=True)
    levels = ["grandparent", "parent", "child"]
    facts = {level: _facts(rng, args.facts, level) for level in levels}
    model = SentenceTransformerEmbedder()
    _write(OUT / "grandparent", [f for f, _ in facts["grandparent"]])
    _write(OUT / "parent", [f for f, _ in facts["parent"]], parent="../grandparent")
    _write(OUT / "child", [f for f, _ in facts["child"]], parent="../parent")
    _write(OUT / "merged", [f for level in levels for f, _ in facts[level]])
    indexing = {}
    for name in [*levels, "merged"]:
        started = time.perf_counter()
        with Workspace.open(OUT / name, embedder=model) as ws:
            ws.index.update()
        indexing[name] = time.perf_counter() - started
    asked = [rng.choice(facts[levels[i % 3]]) for i in range(args.queries)]
    queries = [q for _, q in asked]

    chain = Workspace.open(OUT / "child", embedder=model)
    merged = Workspace.open(OUT / "merged", embedder=model)
    alone_root = OUT / "child-alone"
    shutil.copytree(OUT / "child", alone_root)  # the same index, without its parent line
    config = alone_root / "mdmem.toml"
    config.write_text(config.read_text().replace('parent = "../parent"\n', ""))
    alone = Workspace.open(alone_root, embedder=model)
    setups = [
        ("child alone", f"{args.facts}", alone),
        ("merged, one workspace", f"{3 * args.facts}", merged),
        ("child + chain of 3", f"{args.facts} × 3", chain),
    ]
    console = Console()
    table = Table(title=f"search latency, {args.queries} queries (ms)")
    for column in ("workspace", "facts", "mode", "p50", "p95"):
        table.add_column(column, justify="left" if column == "workspace" else "right")
    for mode in ("hybrid", "keyword"):
        for name, n, ws in setups:
            times = _times(ws, queries, mode)
            p50, p95 = statistics.median(times), _p(times, 0.95)
            table.add_row(name, n, mode, f"{p50:.1f}", f"{p95:.1f}")
    console.print(table)

    top1 = overlap = 0.0
    for fact, query in asked:
        ours = chain.search(query, k=10, track_access=False)
        reference = merged.search(query, k=10, track_access=False)
        top1 += bool(ours) and fact in ours[0].text
        overlap += len({h.text for h in ours} & {h.text for h in reference}) / 10
    same = Table(title="one scale: the chain against the merged workspace")
    for column in ("fact is the chain's top hit", "the merged one's top hit", "top-10 overlap"):
        same.add_column(column, justify="right")
    ref1 = sum(fact in merged.search(q, k=1, track_access=False)[0].text for fact, q in asked)
    n = len(asked)
    same.add_row(f"{top1 / n:.2f}", f"{ref1 / n:.2f}", f"{overlap / n:.2f}")
    console.print(same)
    console.print(
        "indexing (s): " + ", ".join(f"{name} {secs:.1f}" for name, secs in indexing.items())
    )


if __name__ == "__main__":
    main()
