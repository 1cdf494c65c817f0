"""Retrieval quality on LoCoMo (ACL 2024): does mdmem's search find the evidence turns?

Each of the 10 conversations becomes a workspace: one session file per LoCoMo session, each turn
one list entry carrying its dia_id in its metadata, under a heading with the session's date.
Every question of categories 1-4 is asked against its own conversation through the public
library API (`Workspace.search`), in hybrid, keyword and vector mode.

Metrics, per category and overall (averaged over questions):
  R@5, R@10      share of a question's evidence turns among the top 5 / 10 hits
  rec@1000/2000  evidence recall within a returned-context budget: hits in rank order until the
                 next one would exceed the budget; tokens = ceil(words * 1.3) of each hit's text

Usage:  .venv/bin/python benchmarks/locomo.py [--data PATH] [--modes hybrid,keyword,vector]
The data (CC BY-NC 4.0) is read from ../shared/bench/locomo/locomo10.json and not redistributed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "locomo" / "locomo10.json"
WORK = ROOT / ".bench" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DIA = re.compile(r"^D\d+:\d+$")


def session_date(text: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' → datetime."""
    return dt.datetime.strptime(text.replace(" on ", " ").strip(), "%I:%M %p %d %B, %Y")


def build_workspace(sample: dict, root: Path) -> set[str]:
    """Write one conversation as a workspace; return the dia_ids it holds."""
    if root.exists():
        shutil.rmtree(root)
    (root / ".sessions").mkdir(parents=True)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "locomo"\n')
    conv = sample["conversation"]
    ids: set[str] = set()
    n = 1
    while f"session_{n}" in conv:
        when = session_date(conv[f"session_{n}_date_time"])
        lines = [
            "---",
            f"started: {when.isoformat()}",
            f"speakers: [{conv['speaker_a']}, {conv['speaker_b']}]",
            "---",
            f"# Session {n}: {conv['speaker_a']} and {conv['speaker_b']}",
            "",
            f"## {conv[f'session_{n}_date_time']}",
            "",
        ]
        for turn in conv[f"session_{n}"]:
            text = " ".join(turn["text"].split())
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            dia = turn["dia_id"]
            ids.add(dia)
            lines.append(f"- **{turn['speaker']}**: {text} <!-- mdmem id={dia} -->")
        name = f"{when:%Y%m%d_%H%M%S}_session-{n}.md"
        (root / ".sessions" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        n += 1
    return ids


def evidence_ids(qa: dict, known: set[str]) -> list[str]:
    ids: list[str] = []
    for item in qa.get("evidence", []):
        for part in re.split(r"[;\s,]+", str(item)):
            part = part.strip()
            if DIA.match(part) and part in known and part not in ids:
                ids.append(part)
    return ids


def tokens(text: str) -> int:
    return math.ceil(len(text.split()) * 1.3)


def covered_ids(hit) -> set[str]:
    return {hit.id} if DIA.match(hit.id) else set()


def score(hits, gold: list[str]) -> dict[str, float]:
    gold_set = set(gold)
    out = {}
    for k in (5, 10):
        got = set().union(*(covered_ids(h) for h in hits[:k])) if hits else set()
        out[f"R@{k}"] = len(got & gold_set) / len(gold_set)
    for budget in (1000, 2000):
        used, got = 0, set()
        for hit in hits:
            cost = tokens(hit.text)
            if used + cost > budget:
                break
            used += cost
            got |= covered_ids(hit)
        out[f"rec@{budget}"] = len(got & gold_set) / len(gold_set)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--modes", default="hybrid,keyword,vector")
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    console = Console(width=130)
    samples = json.loads(args.data.read_text())
    if args.limit:
        samples = samples[: args.limit]
    embedder = SentenceTransformerEmbedder()
    modes = args.modes.split(",")
    per_mode: dict[str, dict[str, list[dict[str, float]]]] = {m: defaultdict(list) for m in modes}
    latency: dict[str, list[float]] = defaultdict(list)
    questions = 0
    index_seconds = 0.0
    for sample in samples:
        root = WORK / sample["sample_id"]
        known = build_workspace(sample, root)
        ws = Workspace.open(root, embedder=embedder)
        started = time.perf_counter()
        ws.sync()
        index_seconds += time.perf_counter() - started
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            gold = evidence_ids(qa, known)
            if not gold:
                continue
            questions += 1
            for mode in modes:
                started = time.perf_counter()
                hits = ws.search(qa["question"], k=200, mode=mode, track_access=False)
                latency[mode].append((time.perf_counter() - started) * 1000)
                result = score(hits, gold)
                per_mode[mode][CATEGORIES[qa["category"]]].append(result)
                per_mode[mode]["overall"].append(result)
        ws.close()
        console.log(f"{sample['sample_id']}: {len(known)} turns, {questions} questions so far")

    metrics = ["R@5", "R@10", "rec@1000", "rec@2000"]
    table = Table(title=f"mdmem on LoCoMo: {questions} questions (categories 1-4)")
    table.add_column("mode")
    table.add_column("category")
    table.add_column("n", justify="right")
    for metric in metrics:
        table.add_column(metric, justify="right")
    table.add_column("p50 / p95 ms", justify="right")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        times = sorted(latency[mode])
        p50 = statistics.median(times)
        p95 = times[int(0.95 * (len(times) - 1))]
        for category in ["overall", *CATEGORIES.values()]:
            rows = per_mode[mode][category]
            means = {m: statistics.fmean(r[m] for r in rows) for m in metrics}
            results.setdefault(mode, {})[category] = {**means, "n": len(rows)}
            table.add_row(
                mode if category == "overall" else "",
                category,
                str(len(rows)),
                *(f"{means[m]:.3f}" for m in metrics),
                f"{p50:.1f} / {p95:.1f}" if category == "overall" else "",
            )
        table.add_section()
    console.print(table)
    console.print(
        f"Indexing all 10 workspaces (embedding included): {index_seconds:.1f} s. "
        "Latency is per `Workspace.search` call, including its freshness check and the "
        "query embedding."
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
