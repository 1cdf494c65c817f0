"""Consolidation on the memories offline extraction writes from LoCoMo (ACL 2024).

Each of the 10 conversations becomes one workspace (minimal mode, the default embedding model):
``ws.extract(messages, offline=True)`` writes its memories to memory.md (deduplicated as a
user's would be), they are dated 200 days back and returned once each (old, rarely used: the
default candidate rule), then ``ws.lifecycle.consolidate(offline=True)`` runs with the default
config.

Metrics:
  entries, tokens   active memories and their tokens (ceil(words * 1.3)) before and after
  covered           evidence turns of questions in categories 1-4 that "survive" in the active
                    memories (benchmarks/compaction.py's rule: at least half of the turn's
                    content words in ONE memory)
  kept              share of the turns covered before that are still covered after
  fidelity          composite score of the merges written and of the merges refused
  ceiling           the cut one run would make if every cluster (>= min_cluster memories) became
                    ONE memory: the most the clustering allows, whatever the merge
  runs              one run, then more until a run merges nothing (at most 5): a cluster gives
                    at most 3 merged memories a run, and what a big one leaves the next run takes
  time              consolidation only, all runs (extraction and indexing excluded)
  hidden            the oracle of issue 31 (benchmarks/hidden_facts.py, written apart from
                    mdmem/distill/fidelity.py): archived memories with a distinguishing token
                    (a digit, a capital letter, an inner - _ .) that no live memory they point
                    to holds (a superseded one may lose its one changed value), archived by
                    consolidation; must be 0 (what extraction's rules archived before it is
                    counted apart)
  superseded        memories archived as superseded by a newer value; each pair is listed
Goals: distinct facts hidden 0; >= 95% of covered evidence still covered; no merge written
below consolidate.fidelity_threshold. The cut is whatever keeps every fact (issue 12's
">= 40% fewer entries" is dropped: issue 31).

Usage:  .venv/bin/python benchmarks/consolidate.py [--similarity X] [--limit N] [--json PATH]
The data (CC BY-NC 4.0) is read from ../shared/bench/locomo/locomo10.json, not redistributed;
workspaces are written under .bench/consolidate/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from compaction import (  # noqa: E402
    conversation_messages,
    evidence_by_category,
    line_words,
    survives,
    tokens,
)
from hidden_facts import hidden_facts  # noqa: E402
from locomo import DATA  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402

WORK = ROOT / ".bench" / "consolidate"
AGE_DAYS = 200
MAX_RUNS = 5
"""A cluster yields at most 3 merged memories a run; what it leaves, the next run takes."""


def covered(sample: dict, turns: dict[str, str], texts: list[str]) -> set[str]:
    lines = line_words(texts)
    ids = {i for group in evidence_by_category(sample, turns).values() for i in group}
    return {i for i in ids if survives(turns[i], lines)}


def prepare(sample: dict, embedder: SentenceTransformerEmbedder, similarity: float) -> Workspace:
    root = WORK / sample["sample_id"]
    shutil.rmtree(root, ignore_errors=True)
    Workspace.init(root, mode="minimal")
    config = root / "mdmem.toml"
    config.write_text(config.read_text() + f"\n[consolidate]\nsimilarity = {similarity}\n")
    ws = Workspace(root, embedder=embedder)
    messages, _ = conversation_messages(sample)
    ws.extract(messages, offline=True)
    path = root / "memory.md"
    old = (dt.date.today() - dt.timedelta(days=AGE_DAYS)).isoformat()
    path.write_text(re.sub(r"created=\S+", f"created={old}", path.read_text()), encoding="utf-8")
    ws.index._backend.bump_access([e.id for e in ws.entries("memory.md")])
    return ws


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--similarity", type=float, default=0.75, help="consolidate.similarity (default 0.75)"
    )
    args = parser.parse_args()
    console = Console(width=130)
    samples = json.loads(args.data.read_text())[: args.limit or None]
    embedder = SentenceTransformerEmbedder()
    rows = []
    pairs: list[str] = []
    hiding: list[str] = []
    written: list[float] = []
    refused: list[float] = []
    for sample in samples:
        ws = prepare(sample, embedder, args.similarity)
        _, turns = conversation_messages(sample)
        before = [e.text for e in ws.entries("memory.md")]
        by_extraction = {h.id for h in hidden_facts(ws.root)}  # its own rules (reversals)
        started = time.perf_counter()
        report = ws.lifecycle.consolidate(offline=True)
        seconds = time.perf_counter() - started
        first = len(ws.entries("memory.md"))
        smallest = ws.config.consolidate.min_cluster
        big = [c for c in report.clusters if len(c.members) >= smallest]
        ceiling = sum(len(c.members) - 1 for c in big)
        reports = [report]
        while reports[-1].merged and len(reports) < MAX_RUNS:  # what big clusters left over
            started = time.perf_counter()
            reports.append(ws.lifecycle.consolidate(offline=True))
            seconds += time.perf_counter() - started
        after = [e.text for e in ws.entries("memory.md")]
        oracle = hidden_facts(ws.root)
        hidden = [h for h in oracle if h.id not in by_extraction]
        for r in reports:
            pairs += [f"{sample['sample_id']}: {c.describe()}" for c in r.changes]
        hiding += [
            f"{sample['sample_id']}: {h.id} {h.text[:60]!r} hides {h.tokens}" for h in hidden
        ]
        cov_before = covered(sample, turns, before)
        cov_after = covered(sample, turns, after)
        for r in reports:
            written += [m.fidelity.composite for c in r.clusters for m in c.written]
            refused += [m.fidelity.composite for m in r.refused]
        rows.append(
            {
                "conversation": sample["sample_id"],
                "entries_before": len(before),
                "entries_first_run": first,
                "ceiling_first_run": ceiling,
                "alone": len(before) - sum(len(c.members) for c in report.clusters),
                "small_clusters": sum(len(c.members) < smallest for c in report.clusters),
                "big_clusters": len(big),
                "in_big_clusters": sum(len(c.members) for c in big),
                "written_first_run": report.written,
                "entries_after": len(after),
                "tokens_before": sum(tokens(t) for t in before),
                "tokens_after": sum(tokens(t) for t in after),
                "covered_before": len(cov_before),
                "covered_after": len(cov_after),
                "still_covered": len(cov_before & cov_after),
                "runs": len(reports),
                "clusters": sum(len(r.clusters) for r in reports),
                "merged": sum(r.count("merged") for r in reports),
                "refused": sum(r.count("refused") for r in reports),
                "seconds": seconds,
                "hidden": len(hidden),
                "hidden_by_extraction": len(oracle) - len(hidden),
                "hidden_tokens": sum(len(h.tokens) for h in hidden),
                "superseded": sum(r.superseded for r in reports),
            }
        )
        console.log(f"{sample['sample_id']}: {len(before)} → {len(after)} memories")
        ws.close()
    report_table(console, rows, written, refused, args.json, args.similarity, pairs, hiding)
    for line in pairs:
        console.print(f"superseded {line}", markup=False, highlight=False)
    for line in hiding:
        console.print(f"HIDDEN {line}", markup=False, highlight=False)


def report_table(
    console: Console,
    rows: list[dict],
    written: list[float],
    refused: list[float],
    json_path: Path | None,
    similarity: float,
    pairs: list[str] = (),  # type: ignore[assignment]
    hiding: list[str] = (),  # type: ignore[assignment]
) -> None:
    title = f"Consolidation of offline-extracted LoCoMo memories ({len(rows)} conv.)"
    table = Table(title=f"{title}, similarity {similarity}")
    for column in (
        "conversation",
        "entries: 1 run",
        "until settled",
        "tokens",
        "covered",
        "still covered",
        "clusters: merged / refused",
        "hidden",
        "time",
    ):
        table.add_column(column, justify="right")
    for r in [*rows, _total(rows)]:
        kept = r["still_covered"] / r["covered_before"] if r["covered_before"] else 1.0
        table.add_row(
            r["conversation"],
            f"{r['entries_before']} → {r['entries_first_run']}",
            f"→ {r['entries_after']} ({r['runs']} runs)",
            f"{r['tokens_before']:,} → {r['tokens_after']:,}",
            f"{r['covered_before']} → {r['covered_after']}",
            f"{kept:.1%}",
            f"{r['clusters']}: {r['merged']} / {r['refused']}",
            f"{r['hidden']}",
            f"{r['seconds']:.1f} s",
        )
    console.print(table)
    total = _total(rows)
    cut = 1 - total["entries_after"] / total["entries_before"]
    one = 1 - total["entries_first_run"] / total["entries_before"]
    kept = total["still_covered"] / total["covered_before"] if total["covered_before"] else 1.0
    below = sum(f < 0.5 for f in written)
    ceiling = total["ceiling_first_run"] / total["entries_before"]
    console.print(
        f"First run: {total['alone']} memories with no neighbour, {total['small_clusters']} "
        f"clusters under min_cluster (left as they are), {total['big_clusters']} clusters "
        f"holding {total['in_big_clusters']} memories, merged into "
        f"{total['written_first_run']} memories. Ceiling of one run: {ceiling:.1%} (every "
        f"cluster of at least min_cluster memories merged into one memory; the clusters are "
        f"fixed by the similarity, {similarity})."
    )
    console.print(
        f"Entries cut by {one:.1%} in one run, {cut:.1%} until settled; distinct facts hidden: "
        f"{total['hidden']} memories, {total['hidden_tokens']} tokens (must be 0; by extraction "
        f"before it: {total['hidden_by_extraction']}); superseded "
        f"by a newer value: {total['superseded']}; "
        f"covered evidence kept {kept:.1%} (goal ≥ 95%: {'met' if kept >= 0.95 else 'NOT met'}); "
        f"merges written below the threshold: {below} (goal 0)."
    )
    for name, values in (("written", written), ("refused", refused)):
        if values:
            q = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
            console.print(
                f"Fidelity of merges {name} ({len(values)}): min {min(values):.3f}, "
                f"p10 {q[0]:.3f}, median {statistics.median(values):.3f}, p90 {q[-1]:.3f}, "
                f"max {max(values):.3f}"
            )
    if json_path:
        data = {
            "rows": rows,
            "fidelity_written": written,
            "fidelity_refused": refused,
            "superseded": list(pairs),
            "hidden": list(hiding),
        }
        json_path.write_text(json.dumps(data, indent=2))


def _total(rows: list[dict]) -> dict:
    total: dict = {"conversation": "all"}
    for key in rows[0]:
        if key != "conversation":
            total[key] = sum(r[key] for r in rows)
    return total


if __name__ == "__main__":
    main()
