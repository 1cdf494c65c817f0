"""Consolidation on a synthetic workspace: a coding agent's 180 days of work sessions.

The sessions come from ``benchmarks/agent_sessions.py`` (seeded, deterministic; how they are
built is in its docstring and in the README). Each is written through the product's session
API (``ws.session``: request, events, end), then extracted offline (``ws.extract(path,
offline=True)``, as the LoCoMo benchmark extracts its conversations), in a full-mode workspace
with the default embedding model and automatic promotion off (only extraction and
consolidation act). Each memory is then dated by the simulated day of the session it came from
(its ``source=``) and returned once (old, rarely used: a candidate), and
``ws.consolidate(offline=True)`` runs with the default config, then again until a run merges
nothing (at most 5 runs), as in ``benchmarks/consolidate.py``.

Metrics:
  entries, tokens   active memories of memory.md and learnings.md, and their tokens
                    (ceil(words * 1.3)), before and after
  covered           the generator's distinct lasting statements (decisions, preferences,
                    environment facts, errors and fixes) that "survive" in the active memories
                    (benchmarks/compaction.py's rule: half of the statement's content words in
                    ONE memory); kept: the share of those covered before still covered after
  newest / stale    for the 6 environment facts whose value changed: how many have their
                    newest value stated by an active memory, and how many an old value
  fidelity          composite score of the merges written and refused
  time              consolidation only, all runs
Goals (issue 12): entries cut by >= 40%, >= 95% of covered evidence still covered, no merge
written below consolidate.fidelity_threshold.

Usage:  nice -n 19 .venv/bin/python benchmarks/consolidate_agent.py [--seed N] [--days N]
        [--json PATH]
Workspaces are written under .bench/consolidate_agent/.
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

from agent_sessions import DAYS, ENVIRONMENT, SimSession, generate  # noqa: E402
from compaction import content_words, line_words, survives, tokens  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.layout import KNOWLEDGE_FILES  # noqa: E402

WORK = ROOT / ".bench" / "consolidate_agent"
MAX_RUNS = 5
TOML = """mode = "full"
agent = "coder"
[tiers]
auto = false
[sessions]
archive_days = 0
"""


def write_sessions(ws: Workspace, sessions: list[SimSession]) -> dict[str, int]:
    """Each session through ``ws.session``, extracted offline when it ends; returns each
    session id's simulated day."""
    days: dict[str, int] = {}
    for sim in sessions:
        with ws.session(sim.title) as s:
            s.request(sim.request)
            for event in sim.events:
                s.event(event.action, event.text, event.importance)
        assert s.path is not None
        days[s.id] = sim.day
        ws.extract(s.path, offline=True)
    return days


def redate(ws: Workspace, days: dict[str, int]) -> None:
    """``created=`` the simulated day of the session a memory came from (``source=``)."""
    start = dt.date.today() - dt.timedelta(days=DAYS)

    def line(match: re.Match[str]) -> str:
        text = match.group(0)
        source = re.search(r"\bsource=(\S+)", text)
        if source is None or source.group(1) not in days:
            return text
        day = (start + dt.timedelta(days=days[source.group(1)])).isoformat()
        return re.sub(r"created=\S+", f"created={day}", text)

    for name in KNOWLEDGE_FILES:
        path = ws.root / name
        if path.exists():
            path.write_text(re.sub(r"^- .*$", line, path.read_text(), flags=re.M))


def active(ws: Workspace) -> list[str]:
    return [e.text for f in KNOWLEDGE_FILES if (ws.root / f).exists() for e in ws.entries(f)]


def values(texts: list[str], day: int) -> tuple[int, int]:
    """(changed facts whose newest value an active memory states, those whose old value one
    still states), by ``day``: a memory states a value when it holds the value and half the
    content words of one of the fact's phrasings with that value."""
    lines = [content_words(t) for t in texts]
    newest = stale = 0
    for fact in ENVIRONMENT:
        if fact.changes_on is None or day < fact.changes_on:
            continue
        old, new = fact.values
        newest += _states(fact.phrasings, new, texts, lines)
        stale += _states(fact.phrasings, old, texts, lines)
    return newest, stale


def _states(phrasings: tuple[str, ...], value: str, texts: list[str], lines: list) -> bool:
    token = re.compile(rf"(?<![\w.]){re.escape(value)}(?![\w.])")
    return any(
        token.search(text) and any(survives(p.format(v=value), [words]) for p in phrasings)
        for text, words in zip(texts, lines, strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--days", type=int, default=DAYS, help="a shorter run (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    console = Console(width=130)
    sessions = generate(args.seed, args.days)
    evidence = sorted({e.text for s in sessions for e in s.events if e.fact is not None})
    root = WORK / f"seed-{args.seed}"
    shutil.rmtree(root, ignore_errors=True)
    Workspace.init(root, mode="full", agent="coder")
    (root / "mdmem.toml").write_text(TOML)
    ws = Workspace(root, embedder=SentenceTransformerEmbedder())
    started = time.perf_counter()
    days = write_sessions(ws, sessions)
    writing = time.perf_counter() - started
    redate(ws, days)
    ws.index.bump_access([e.id for f in KNOWLEDGE_FILES for e in ws.entries(f)])
    before = active(ws)
    reports, seconds, first_run = [], 0.0, 0
    while not reports or (reports[-1].merged and len(reports) < MAX_RUNS):
        started = time.perf_counter()
        reports.append(ws.consolidate(offline=True))
        seconds += time.perf_counter() - started
        first_run = first_run or len(active(ws))
    after = active(ws)
    first = reports[0]
    smallest = ws.config.consolidate.min_cluster
    big = [c for c in first.clusters if len(c.members) >= smallest]
    written = [m.fidelity.composite for r in reports for c in r.clusters for m in c.written]
    refused = [m.fidelity.composite for r in reports for m in r.refused]
    cov_before = {t for t in evidence if survives(t, line_words(before))}
    cov_after = {t for t in evidence if survives(t, line_words(after))}
    result = {
        "seed": args.seed,
        "days": args.days,
        "sessions": len(sessions),
        "events": sum(len(s.events) for s in sessions),
        "evidence": len(evidence),
        "writing_and_extraction_s": round(writing, 1),
        "entries_before": len(before),
        "entries_first_run": first_run,
        "entries_after": len(after),
        "tokens_before": sum(tokens(t) for t in before),
        "tokens_after": sum(tokens(t) for t in after),
        "covered_before": len(cov_before),
        "covered_after": len(cov_after),
        "still_covered": len(cov_before & cov_after),
        "newest_stale_before": values(before, args.days - 1),
        "newest_stale_after": values(after, args.days - 1),
        "runs": len(reports),
        "alone": len(before) - sum(len(c.members) for c in first.clusters),
        "small_clusters": sum(len(c.members) < smallest for c in first.clusters),
        "big_clusters": len(big),
        "in_big_clusters": sum(len(c.members) for c in big),
        "ceiling_first_run": sum(len(c.members) - 1 for c in big),
        "merged": sum(r.count("merged") for r in reports),
        "refused": sum(r.count("refused") for r in reports),
        "fidelity_written": written,
        "fidelity_refused": refused,
        "seconds": round(seconds, 1),
    }
    ws.close()
    show(console, result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


def show(console: Console, r: dict) -> None:
    title = f"Consolidation of a synthetic agent workspace ({r['days']} days, seed {r['seed']})"
    table = Table(title=title)
    for column in ("", "before", "after"):
        table.add_column(column, justify="right")
    kept = r["still_covered"] / r["covered_before"] if r["covered_before"] else 1.0
    cut = 1 - r["entries_after"] / r["entries_before"] if r["entries_before"] else 0.0
    nb, sb = r["newest_stale_before"]
    na, sa = r["newest_stale_after"]
    changed = sum(f.changes_on is not None and f.changes_on < r["days"] for f in ENVIRONMENT)
    table.add_row(
        "memories",
        f"{r['entries_before']:,}",
        f"{r['entries_first_run']:,} after one run, {r['entries_after']:,} settled ({cut:.1%} cut)",
    )
    table.add_row("tokens", f"{r['tokens_before']:,}", f"{r['tokens_after']:,}")
    table.add_row(
        f"evidence covered (of {r['evidence']})",
        f"{r['covered_before']}",
        f"{r['covered_after']} ({r['still_covered']} of before: {kept:.1%})",
    )
    table.add_row(f"changed values: newest stated (of {changed})", f"{nb}", f"{na}")
    table.add_row(f"changed values: an old value stated (of {changed})", f"{sb}", f"{sa}")
    table.add_row("merges written / refused", "", f"{r['merged']} / {r['refused']}")
    table.add_row("consolidation runs, time", "", f"{r['runs']}, {r['seconds']:.1f} s")
    console.print(table)
    console.print(
        f"{r['sessions']} sessions, {r['events']:,} events written and extracted in "
        f"{r['writing_and_extraction_s']:.0f} s. First run: {r['alone']} memories with no "
        f"neighbour, {r['small_clusters']} clusters under min_cluster, {r['big_clusters']} "
        f"clusters holding {r['in_big_clusters']} memories; ceiling of one run "
        f"{r['ceiling_first_run'] / max(1, r['entries_before']):.1%}."
    )
    below = sum(f < 0.5 for f in r["fidelity_written"])
    console.print(
        f"Entries cut by {cut:.1%} (goal ≥ 40%: {'met' if cut >= 0.4 else 'NOT met'}); covered "
        f"evidence kept {kept:.1%} (goal ≥ 95%: {'met' if kept >= 0.95 else 'NOT met'}); "
        f"merges written below the threshold: {below} (goal 0)."
    )
    for name in ("written", "refused"):
        v = r[f"fidelity_{name}"]
        if v:
            q = statistics.quantiles(v, n=10, method="inclusive") if len(v) > 1 else v * 9
            console.print(
                f"Fidelity of merges {name} ({len(v)}): min {min(v):.3f}, p10 {q[0]:.3f}, "
                f"median {statistics.median(v):.3f}, p90 {q[-1]:.3f}, max {max(v):.3f}"
            )


if __name__ == "__main__":
    main()
