"""Months of use: LoCoMo conversations (ACL 2024) lived as sessions over 180 days, with tier
promotion and consolidation on, against the same facts indexed without them.

Each conversation is one workspace (full mode, the default embedding model). Its sessions are
spread evenly over 180 simulated days; each becomes a session file, written turn by turn
through the safe writes while it is ``running`` (a turn is an event of importance 0.7 when it
holds a number or a name past its first word, else 0.5), with the automatic L2 → L3 step
after every turn. Before a session ends its lasting memories are extracted (offline, the memory
flush), then:

  lifecycle   the session's end starts the automatic promotion (``AutoPromote``, as
              ``ws.session`` does; its clock is the simulated day): L3 → L4 extraction,
              consolidation past its threshold, sessions older than 30 days to
              .sessions/archive/
  baseline    nothing more: the same session files and the same extraction, no promotion, no
              consolidation, no archive

Changed values: for every two LoCoMo questions (cat 1-4, a fixed seeded sample) the first
speaker also states one attribute ("My gym is ...") early and a new value later; a third of
the questions ask for it, and only the newest value counts.

Quality at day 30, 90 and 180, over the questions whose evidence (or new value) was said by then:
  LoCoMo      evidence recall of the top 10 hits (a turn is found when half its content words
              are in one hit: benchmarks/compaction.py's rule)
  changed     1 when the first hit naming either value names the new one, else 0
  overall     the mean over all questions asked

The tier budgets are scaled down (``BUDGETS``) so that a conversation of ~20 sessions crosses
them as months of agent work would cross the defaults.

Usage:  .venv/bin/python benchmarks/lifecycle.py [--limit N] [--json PATH]
Workspaces are written under .bench/lifecycle/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from compaction import CATEGORIES, content_words, evidence_ids, survives  # noqa: E402
from locomo import DATA, sessions, turn_text  # noqa: E402

from mdmem import Workspace  # noqa: E402
from mdmem.distill.promote import AutoPromote  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.markdown.frontmatter import set_frontmatter  # noqa: E402
from mdmem.markdown.sections import append_to_section  # noqa: E402
from mdmem.memory.session_format import render_event  # noqa: E402

WORK = ROOT / ".bench" / "lifecycle"
DAYS = 180
START = dt.date(2026, 1, 1)
CHECKPOINTS = (30, 90, 180)
K = 10
SEED = 7
BUDGETS = """
[tiers]
l1_tokens = 400
l2_tokens = 600
l3_tokens = 2500
l4_tokens = 1500
[consolidate]
threshold = 30
[sessions]
archive_days = 30
"""
ATTRIBUTES = [
    ("gym", ["Iron Works", "Peak Fitness"]),
    ("dentist", ["Dr. Alvarez", "Dr. Okafor"]),
    ("car", ["a Honda Civic", "a Subaru Outback"]),
    ("phone", ["a Pixel 7", "an iPhone 15"]),
    ("bank", ["Harbor Credit Union", "Summit Bank"]),
    ("yoga studio", ["Lotus Loft", "Sun Salutation House"]),
    ("barber", ["Nick at Sharp Lines", "Omar at Fade Street"]),
    ("landlord", ["Mrs. Patel", "Mr. Lindqvist"]),
    ("book club", ["the Tuesday Readers", "the Riverside Circle"]),
    ("favourite bakery", ["Crumb & Co", "Golden Crust"]),
    ("favourite band", ["The Lumineers", "Fleet Foxes"]),
    ("streaming service", ["Netflix", "Criterion Channel"]),
    ("laptop", ["a ThinkPad X1", "a MacBook Air"]),
    ("bike", ["a Trek FX 3", "a Cannondale Quick"]),
    ("piano teacher", ["Ms. Moreau", "Mr. Haddad"]),
    ("pharmacy", ["Walgreens on 5th", "CVS on Main"]),
    ("running route", ["the river loop", "the ridge trail"]),
    ("coffee shop", ["Blue Bottle", "Ritual Coffee"]),
    ("insurance company", ["Geico", "Lemonade"]),
    ("favourite restaurant", ["Osteria Mozza", "Nopa"]),
]


# ---- the simulated timeline ------------------------------------------------------------------


def timeline(sample: dict, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """Sessions with their simulated day and turns (changed values woven in), and the
    questions: LoCoMo ones (a sample) and changed-value ones, each with the day it is asked
    from."""
    found = sessions(sample)
    speaker = sample["conversation"]["speaker_a"]
    days = [round(n * (DAYS - 1) / max(1, len(found) - 1)) for n in range(len(found))]
    plan = []
    dia_day: dict[str, int] = {}
    for (number, _, _, turns), day in zip(found, days, strict=True):
        items = []
        for turn in turns:
            items.append((turn["speaker"], turn_text(turn)))
            dia_day[turn["dia_id"]] = day
        plan.append({"n": number, "day": day, "turns": items})
    qa = [
        q for q in sample["qa"] if q.get("category") in CATEGORIES and evidence_ids(q, set(dia_day))
    ]
    changed = []
    for name, (old, new) in ATTRIBUTES:
        first = rng.randrange(0, len(plan) // 2)
        second = rng.randrange(first + 1, len(plan))
        plan[first]["turns"].append((speaker, f"My {name} is {old}."))
        plan[second]["turns"].append((speaker, f"My {name} is {new} now."))
        changed.append(
            {
                "question": f"What is {speaker}'s {name}?",
                "old": old,
                "new": new,
                "day": plan[second]["day"],
            }
        )
    picked = rng.sample(qa, min(len(qa), 2 * len(changed)))
    turns_by_id = {t["dia_id"]: turn_text(t) for _, _, _, ts in found for t in ts}
    locomo = []
    for q in picked:
        ids = evidence_ids(q, set(dia_day))
        locomo.append(
            {
                "question": q["question"],
                "evidence": [turns_by_id[i] for i in ids],
                "day": max(dia_day[i] for i in ids),
            }
        )
    return plan, locomo + changed


def importance(text: str) -> float:
    words = text.split()
    named = any(w[:1].isupper() for w in words[1:])
    return 0.7 if named or re.search(r"\d", text) else 0.5


def write_session(ws: Workspace, session: dict, auto: AutoPromote | None) -> str:
    """The session file, written turn by turn while ``running``, each write told to the
    automatic promotion (as ``ws.session`` does); returns its id."""
    day = START + dt.timedelta(days=session["day"])
    stem = f"{day:%Y%m%d}_100000_conv-{session['n']:02}"
    rel = f".sessions/{stem}.md"
    front = (
        f"---\nagent: default\nstarted: {day.isoformat()}T10:00:00\nstatus: running\n---\n"
        f"# Session: conversation {session['n']}\n\n## Events\n"
    )
    (ws.root / ".sessions").mkdir(exist_ok=True)
    (ws.root / rel).write_text(front)
    for n, (speaker, text) in enumerate(session["turns"]):
        clock = f"{10 + n // 60:02}:{n % 60:02}:00"
        block = render_event(clock, "user", f"{speaker}: {text}", importance(text), "\n")
        text = ws._w.files.write(rel, lambda t, b=block: append_to_section(t, rel, "Events", b))
        if auto is not None:
            auto.after_write(rel, text)  # L2 → L3 when past its trigger
    return stem


def close_session(ws: Workspace, rel: str, auto: AutoPromote | None) -> None:
    """The session ends: the automatic promotion's worker runs what is due (L3 → L4,
    consolidation, the archive); the simulation waits for it before the next session."""
    text = ws._w.files.write(rel, lambda t: set_frontmatter(t, {"status": "completed"}))
    if auto is not None:
        auto.after_write(rel, text)
        auto.wait()


# ---- scoring ---------------------------------------------------------------------------------


def ask(
    ws: Workspace, questions: list[dict], day: int, detail: list[dict] | None = None
) -> dict[str, float]:
    """Scores at ``day``; ``detail`` (if given) gets each question's score and hits."""
    locomo: list[float] = []
    changed: list[float] = []
    scores: list[float] = []
    for q in questions:
        if q["day"] > day:
            continue
        found_hits = ws.search(q["question"], k=K)
        hits = [h.text for h in found_hits]
        if "new" in q:
            first = next((h for h in hits if q["new"] in h or q["old"] in h), "")
            changed.append(1.0 if q["new"] in first else 0.0)
        else:
            lines = [content_words(h) for h in hits]
            found = [survives(turn, lines) for turn in q["evidence"]]
            locomo.append(sum(found) / len(found))
        scores.append((changed if "new" in q else locomo)[-1])
        if detail is not None:
            where = [f"{h.path}:{h.start_line}" for h in found_hits]
            detail.append(
                {"day": day, "question": q["question"], "score": scores[-1]}
                | {"hits": [f"{w} {t[:160]}" for w, t in zip(where, hits, strict=True)]}
            )
    both = locomo + changed
    return {
        "locomo": _mean(locomo),
        "changed": _mean(changed),
        "overall": _mean(both),
        "asked": len(both),
        "asked_locomo": len(locomo),
        "asked_changed": len(changed),
    }


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")


# ---- one run ---------------------------------------------------------------------------------


def run(sample: dict, embedder: SentenceTransformerEmbedder, lifecycle: bool) -> dict:
    rng = random.Random(SEED)
    plan, questions = timeline(sample, rng)
    name = f"{sample['sample_id']}-{'lifecycle' if lifecycle else 'baseline'}"
    root = WORK / name
    shutil.rmtree(root, ignore_errors=True)
    Workspace.init(root, mode="full")
    auto_line = "" if lifecycle else "auto = false\n"
    (root / "mdmem.toml").write_text(
        'mode = "full"\n' + BUDGETS.replace("[tiers]\n", f"[tiers]\n{auto_line}")
    )
    ws = Workspace(root, embedder=embedder)
    clock = [START]  # the simulated day, which the session archive is measured against
    auto = (
        AutoPromote(ws.config, lambda: replace(ws._w.promoter, today=lambda: clock[0]))
        if lifecycle
        else None
    )
    quality: dict[int, dict[str, float]] = {}
    tiers_over_time: list[dict] = []
    detail: list[dict] = []
    checkpoints = list(CHECKPOINTS)
    started = time.perf_counter()
    for session in plan:
        while checkpoints and session["day"] > checkpoints[0]:
            quality[checkpoints[0]] = ask(ws, questions, checkpoints[0], detail)
            checkpoints.pop(0)
        clock[0] = START + dt.timedelta(days=session["day"])
        stem = write_session(ws, session, auto)
        live = {t.name: t.tokens for t in ws.lifecycle.tiers()}
        ws.extract(stem, offline=True)  # the memory flush, in both runs
        close_session(ws, f".sessions/{stem}.md", auto)
        after = {t.name: t.tokens for t in ws.lifecycle.tiers()}
        tiers_over_time.append(
            {
                "day": session["day"],
                "L1": live["L1"],
                "L2": live["L2"],
                "L3": after["L3"],
                "L4": after["L4"],
                "memories": len(_memories(ws)),
            }
        )
    for day in checkpoints:
        quality[day] = ask(ws, questions, day, detail)
    seconds = time.perf_counter() - started
    archived = len(list((root / ".sessions" / "archive").glob("*/*.md")))
    ws.close()
    return {
        "conversation": sample["sample_id"],
        "lifecycle": lifecycle,
        "quality": quality,
        "tiers": tiers_over_time,
        "memories": tiers_over_time[-1]["memories"],
        "archived_sessions": archived,
        "sessions": len(plan),
        "seconds": round(seconds, 1),
        "questions": detail,
    }


def _memories(ws: Workspace) -> list:
    return [
        e for f in ("memory.md", "learnings.md") if (ws.root / f).exists() for e in ws.entries(f)
    ]


# ---- report ----------------------------------------------------------------------------------


def report(console: Console, results: list[dict]) -> None:
    quality = Table(title=f"Retrieval quality (top {K} hits), lifecycle vs baseline")
    for column in ("day", "questions", "LoCoMo recall", "changed: newest first", "overall", "Δ"):
        quality.add_column(column, justify="right")
    for day in CHECKPOINTS:
        rows = {}
        for lifecycle in (False, True):
            runs = [r for r in results if r["lifecycle"] == lifecycle]
            asked = sum(r["quality"][day]["asked"] for r in runs)
            rows[lifecycle] = {
                key: _weighted(runs, day, key) for key in ("locomo", "changed", "overall")
            } | {"asked": asked}
        base, life = rows[False], rows[True]
        quality.add_row(
            str(day),
            str(base["asked"]),
            f"{base['locomo']:.3f} → {life['locomo']:.3f}",
            f"{base['changed']:.3f} → {life['changed']:.3f}",
            f"{base['overall']:.3f} → {life['overall']:.3f}",
            f"{life['overall'] - base['overall']:+.3f}",
        )
    console.print(quality)
    tiers = Table(title="Tokens per tier over time (lifecycle; mean over conversations)")
    for column in ("day ≤", "L1 (live)", "L2 (live)", "L3", "L4", "memories", "baseline memories"):
        tiers.add_column(column, justify="right")
    for limit in (30, 60, 90, 120, 150, 180):
        row = []
        for lifecycle in (True, False):
            points = [
                max((p for p in r["tiers"] if p["day"] <= limit), key=lambda p: p["day"])
                for r in results
                if r["lifecycle"] == lifecycle
            ]
            row.append({k: sum(p[k] for p in points) / len(points) for k in points[0]})
        life, base = row
        tiers.add_row(
            str(limit),
            *(f"{life[k]:,.0f}" for k in ("L1", "L2", "L3", "L4", "memories")),
            f"{base['memories']:,.0f}",
        )
    console.print(tiers)
    for lifecycle in (False, True):
        runs = [r for r in results if r["lifecycle"] == lifecycle]
        console.print(
            f"{'lifecycle' if lifecycle else 'baseline '}: {sum(r['sessions'] for r in runs)} "
            f"sessions, {sum(r['archived_sessions'] for r in runs)} archived, "
            f"{sum(r['seconds'] for r in runs):.0f} s"
        )


def _weighted(runs: list[dict], day: int, key: str) -> float:
    """The mean over all questions of all conversations (not a mean of means)."""
    total = count = 0.0
    for r in runs:
        q = r["quality"][day]
        n = q["asked"] if key == "overall" else q[f"asked_{key}"]
        if n:
            total += q[key] * n
            count += n
    return total / count if count else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=3, help="the first N conversations")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    console = Console(width=130)
    samples = json.loads(args.data.read_text())[: args.limit or None]
    embedder = SentenceTransformerEmbedder()
    results = []
    for sample in samples:
        for lifecycle in (False, True):
            results.append(run(sample, embedder, lifecycle))
            r = results[-1]
            console.log(
                f"{r['conversation']} {'lifecycle' if lifecycle else 'baseline'}: "
                f"{r['memories']} memories, {r['seconds']} s, "
                + ", ".join(f"day {d}: {q['overall']:.3f}" for d, q in r["quality"].items())
            )
    report(console, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
