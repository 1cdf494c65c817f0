"""Consolidation on a synthetic workspace: a coding agent's 180 days of work sessions.

The sessions come from ``benchmarks/agent_sessions.py`` (seeded, deterministic; how they are
built is in its docstring and in the README). Each is written through the product's session
API (``ws.session``: request, events, end), then extracted offline (``ws.extract(path,
offline=True)``, as the LoCoMo benchmark extracts its conversations), in a full-mode workspace
with the default embedding model and automatic promotion off (only extraction and
consolidation act). Each memory is then dated by the simulated day of the session it came from
(its ``source=``) and returned once (rarely used: a candidate once older than
``consolidate.min_age_days``, 90 by default, so the memories first written in the last 90
simulated days are none), and ``ws.lifecycle.consolidate(offline=True)`` runs with the default
config,
then again until a run merges nothing (at most 5 runs), as in ``benchmarks/consolidate.py``.

Metrics:
  entries, tokens   active memories of memory.md and learnings.md, and their tokens
                    (ceil(words * 1.3)), before and after
  covered           the generator's distinct lasting statements (decisions, preferences,
                    environment facts, errors and fixes) that "survive" in the active memories
                    (benchmarks/compaction.py's rule: half of the statement's content words in
                    ONE memory); kept: the share of those covered before still covered after
  newest / stale    for the 6 environment facts whose value changed: how many have their
                    newest value stated by an active memory, and how many an old value
  extraction        before consolidation: skills "When <error>: <fix>" whose fix is the planted
                    fix of that error (the generator knows it), and the planted decisions,
                    preferences and environment facts one memory states (any phrasing, the
                    "survives" rule)
  again             every 10th session extracted a second time, after consolidation: changes
                    other than "skip" and active memories added (0 expected)
  old choices       memories naming a reversed decision's old choice (wkhtmltopdf, Celery)
                    and not its replacement, before and after
  fidelity          composite score of the merges written and refused
  time              consolidation only, all runs
  hidden            the oracle of issue 31 (benchmarks/hidden_facts.py, written apart from
                    mdmem/distill/fidelity.py): archived memories with a distinguishing token
                    that no live memory they point to holds (a superseded one may lose its one
                    changed value), archived by consolidation or the re-extraction; must be 0.
                    What extraction's own rules archived before (a reversal: "switched from A
                    to B") is counted apart
  superseded        memories archived as superseded by a newer value; each pair is listed
Goals: distinct facts hidden 0; >= 95% of covered evidence still covered; no merge written
below consolidate.fidelity_threshold. The cut is whatever keeps every fact (issue 12's
">= 40% fewer entries" is dropped: issue 31).

Usage:  nice -n 19 .venv/bin/python benchmarks/consolidate_agent.py [--seed N] [--days N]
        [--min-age-days N] [--json PATH]
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

from agent_sessions import (  # noqa: E402
    DAYS,
    DECISIONS,
    ENVIRONMENT,
    ERRORS,
    PREFERENCES,
    SimSession,
    generate,
)
from compaction import content_words, line_words, survives, tokens  # noqa: E402
from hidden_facts import hidden_facts  # noqa: E402

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


_FIX_PART = re.compile(r": (?=fix with |fixed |resolved |solved |worked around )", re.I)


def reextract(ws: Workspace, ids: list[str]) -> tuple[int, int]:
    """Extract these sessions again, after consolidation: (sessions, changes other than
    skip); 0 expected."""
    changes = [c for i in ids for c in ws.extract(i, offline=True).changes]
    return len(ids), sum(c.action != "skip" for c in changes)


def pairing(ws: Workspace) -> tuple[int, int]:
    """(skills whose fix is the planted fix of their error, skills of a planted error)."""
    right = total = 0
    for entry in ws.entries("learnings.md"):
        parts = _FIX_PART.split(entry.text)
        if entry.type != "skill" or len(parts) < 2:
            continue
        error, fix = ": ".join(parts[:-1]), parts[-1]
        error_words, fix_words = content_words(error), content_words(fix)
        ports = [v for e in ENVIRONMENT if e.key == "staging-port" for v in e.values]
        matched = [
            r
            for r in ERRORS
            if any(survives(e.format(port=p), [error_words]) for e in r.errors for p in ports)
        ]
        if not matched:
            continue
        total += 1
        right += any(survives(f, [fix_words]) for f in matched[0].fixes)
    return right, total


def found(texts: list[str], sessions: list[SimSession]) -> dict[str, tuple[int, int]]:
    """Planted decisions, preferences and environment facts one memory states: (found,
    present) for each kind. Present: stated in at least one session (the generator introduces
    a decision or preference only on a workday, so one planted on a weekend day never is)."""
    lines = line_words(texts)
    said = {e.fact for s in sessions for e in s.events}
    env = [
        tuple(p.format(v=v) for p in e.phrasings for v in e.values)
        for e in ENVIRONMENT
        if e.key in said
    ]
    kinds = {
        "decisions": [d.phrasings for d in DECISIONS if d.key in said],
        "preferences": [d.phrasings for d in PREFERENCES if d.key in said],
        "environment": env,
    }
    out = {
        kind: (sum(any(survives(p, lines) for p in ps) for ps in items), len(items))
        for kind, items in kinds.items()
    }
    return out


def same_fact(texts: list[str], sessions: list[SimSession], ws: Workspace) -> dict[str, float]:
    """How far consolidation could go: the memories grouped by the one planted fact each
    states (the statement whose content words it holds most of, by the "survives" rule), the
    cut if each group became one memory, and how many pairs within a group reach
    ``consolidate.similarity`` (the clustering's edge)."""
    statements: dict[str, list[set[str]]] = {}
    for sim in sessions:
        for event in sim.events:
            if event.fact is not None:
                statements.setdefault(event.fact, []).append(content_words(event.text))
    groups: dict[str, list[int]] = {}
    for n, text in enumerate(texts):
        words = content_words(text)
        share = {k: max(len(t & words) / len(t) for t in ts if t) for k, ts in statements.items()}
        best = max(share, key=share.__getitem__)
        if share[best] >= 0.5:
            groups.setdefault(best, []).append(n)
    embedder = ws.index.embedder()
    assert embedder is not None
    vectors = embedder.embed(texts)
    edge = ws.config.consolidate.similarity
    pairs = linked = 0
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pairs += 1
                linked += float(vectors[a] @ vectors[b]) >= edge
    grouped = sum(len(m) for m in groups.values())
    return {
        "facts": len(groups),
        "memories_of_a_fact": grouped,
        "ideal_cut": round((grouped - len(groups)) / max(1, len(texts)), 3),
        "pairs": pairs,
        "pairs_at_edge": linked,
    }


REVERSED = {"wkhtml": ("wkhtmltopdf", "weasyprint"), "celery": ("celery", "dramatiq")}
"""The two reversed decisions: the choice given up, and the one taken."""


def still_current(texts: list[str]) -> int:
    """Active memories that name a choice given up and not the one that replaced it."""
    return sum(
        any(old in t.lower() and new not in t.lower() for old, new in REVERSED.values())
        for t in texts
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--days", type=int, default=DAYS, help="a shorter run (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--min-age-days",
        type=int,
        help="consolidate.min_age_days (default 90: the memories of the last 90 simulated days "
        "are no candidates; 0 makes every memory one)",
    )
    parser.add_argument(
        "--similarity", type=float, help="consolidate.similarity (default 0.75, the issue's)"
    )
    args = parser.parse_args()
    console = Console(width=130)
    sessions = generate(args.seed, args.days)
    evidence = sorted({e.text for s in sessions for e in s.events if e.fact is not None})
    root = WORK / f"seed-{args.seed}"
    shutil.rmtree(root, ignore_errors=True)
    Workspace.init(root, mode="full", agent="coder")
    settings = {"min_age_days": args.min_age_days, "similarity": args.similarity}
    extra = "".join(f"{k} = {v}\n" for k, v in settings.items() if v is not None)
    extra = f"[consolidate]\n{extra}" if extra else ""
    (root / "mdmem.toml").write_text(TOML + extra)
    ws = Workspace(root, embedder=SentenceTransformerEmbedder())
    started = time.perf_counter()
    days = write_sessions(ws, sessions)
    writing = time.perf_counter() - started
    redate(ws, days)
    ws.index._backend.bump_access([e.id for f in KNOWLEDGE_FILES for e in ws.entries(f)])
    before = active(ws)
    paired = pairing(ws)
    planted = found(before, sessions)
    groups = same_fact(before, sessions, ws)
    by_extraction = {h.id for h in hidden_facts(ws.root)}  # its rules archive too (reversals)
    reports, seconds, first_run = [], 0.0, 0
    while not reports or (reports[-1].merged and len(reports) < MAX_RUNS):
        started = time.perf_counter()
        reports.append(ws.lifecycle.consolidate(offline=True))
        seconds += time.perf_counter() - started
        first_run = first_run or len(active(ws))
    after = active(ws)
    again = reextract(ws, list(days)[::10])
    again = (*again, len(active(ws)) - len(after))
    oracle = hidden_facts(ws.root)
    hidden = [h for h in oracle if h.id not in by_extraction]
    first = reports[0]
    smallest = ws.config.consolidate.min_cluster
    big = [c for c in first.clusters if len(c.members) >= smallest]
    written = [m.fidelity.composite for r in reports for c in r.clusters for m in c.written]
    refused = [m.fidelity.composite for r in reports for m in r.refused]
    cov_before = {t for t in evidence if survives(t, line_words(before))}
    cov_after = {t for t in evidence if survives(t, line_words(after))}
    result = {
        "seed": args.seed,
        "min_age_days": ws.config.consolidate.min_age_days,
        "similarity": ws.config.consolidate.similarity,
        "days": args.days,
        "sessions": len(sessions),
        "events": sum(len(s.events) for s in sessions),
        "evidence": len(evidence),
        "writing_and_extraction_s": round(writing, 1),
        "skills_right_fix": paired,
        "reextracted": again,
        "found_before_consolidation": planted,
        "same_fact": groups,
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
        "candidates_first_run": first.candidates,
        "passed_over_first_run": dict(first.passed_over),
        "superseded": sum(r.superseded for r in reports),
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
        "hidden": [h.to_dict() for h in hidden],
        "hidden_by_extraction": [h.to_dict() for h in oracle if h.id in by_extraction],
        "changes": [c.describe() for r in reports for c in r.changes],
    }
    result["old_choice_memories"] = (still_current(before), still_current(after))
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
    table.add_row("superseded by a newer value", "", f"{r['superseded']}")
    hidden_tokens = sum(len(h["tokens"]) for h in r["hidden"])
    table.add_row(
        "distinct facts hidden (must be 0)", "", f"{len(r['hidden'])} ({hidden_tokens} tokens)"
    )
    table.add_row("consolidation runs, time", "", f"{r['runs']}, {r['seconds']:.1f} s")
    console.print(table)
    right, total = r["skills_right_fix"]
    share = f"{right / total:.0%}" if total else "-"
    console.print(
        f"Extracted before consolidation: skills with the planted fix of their error {right} of "
        f"{total} ({share}); "
        + "; ".join(f"{k} {a} of {b}" for k, (a, b) in r["found_before_consolidation"].items())
        + "."
    )
    console.print(
        f"{r['sessions']} sessions, {r['events']:,} events written and extracted in "
        f"{r['writing_and_extraction_s']:.0f} s. First run: {r['candidates_first_run']} of "
        f"{r['entries_before']} memories candidates (not: "
        + (", ".join(f"{n} {k}" for k, n in r["passed_over_first_run"].items()) or "none")
        + f"), {r['alone']} memories with no "
        f"neighbour, {r['small_clusters']} clusters under min_cluster, {r['big_clusters']} "
        f"clusters holding {r['in_big_clusters']} memories; ceiling of one run "
        f"{r['ceiling_first_run'] / max(1, r['entries_before']):.1%}."
    )
    below = sum(f < 0.5 for f in r["fidelity_written"])
    console.print(
        f"Entries cut by {cut:.1%}; distinct facts hidden: {len(r['hidden'])} (must be 0); "
        f"covered evidence kept {kept:.1%} (goal ≥ 95%: {'met' if kept >= 0.95 else 'NOT met'}); "
        f"merges written below the threshold: {below} (goal 0)."
    )
    for change in r["changes"]:
        console.print(f"superseded {change}", markup=False, highlight=False)
    for h in r["hidden"]:
        console.print(f"HIDDEN {h['id']} {h['text'][:70]!r}: {h['tokens']}", markup=False)
    for h in r["hidden_by_extraction"]:
        line = f"hidden by extraction, before consolidation: {h['id']} {h['text'][:70]!r}"
        console.print(f"{line}: {h['tokens']}", markup=False)
    console.print(
        f"Every 10th session extracted again after consolidation ({r['reextracted'][0]}): "
        f"{r['reextracted'][1]} changes other than skip, {r['reextracted'][2]:+d} memories."
    )
    g = r["same_fact"]
    console.print(
        f"Same-fact groups: {g['memories_of_a_fact']} memories state {g['facts']} planted facts "
        f"(one memory each would cut {g['ideal_cut']:.1%}); of the {g['pairs']} pairs within a "
        f"group, {g['pairs_at_edge']} reach cosine >= consolidate.similarity."
    )
    console.print(
        f"Memories naming a reversed choice (wkhtmltopdf, Celery) and not its replacement: "
        f"{r['old_choice_memories'][0]} before consolidation, {r['old_choice_memories'][1]} after."
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
