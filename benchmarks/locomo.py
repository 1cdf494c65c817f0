"""Retrieval quality on LoCoMo (ACL 2024): does mdmem's search find the evidence turns?

Each of the 10 conversations becomes a workspace, in one of three renderings of the same turns:
  a  the project's own: one session file per LoCoMo session, an H1 naming the speakers, an H2
     with the session's date, each turn one entry with its dia_id in a metadata comment;
  b  another tool's plain files: YAML frontmatter (session, ISO date, speakers), then one line
     per turn, ``- **Speaker** [D1:3]: text``, with no headings and no metadata comments;
  c  the product's own session API: ``ws.session(...)`` recording each turn as an event, run
     at the session's date (time-machine), as an agent recording the chat live would have.
Every question of categories 1-4 is asked against its own conversation through the public
library API (``Workspace.search``).

Metrics, per category and overall (averaged over questions, with 95% bootstrap intervals):
  R@5, R@10      share of a question's evidence turns among the top 5 / 10 hits
  rec@1000/2000  evidence recall within a returned-context budget: hits in rank order until the
                 next one would exceed the budget; tokens = ceil(words * 1.3) of each hit's text
Splits: parameters are chosen on conversations 0-4 ("tune"), reported on 5-9 ("test") and all
ten ("all"). Latency: one ``Workspace.search`` call, freshness check included, with the query's
vector embedded beforehand (any other embedding a search made would count).

Usage:  .venv/bin/python benchmarks/locomo.py [--renderings a,b,c] [--modes hybrid]
            [--convs 0-4] [--sweep NAME] [--json PATH] [--time-lift-cost]
The data (CC BY-NC 4.0) is read from ../shared/bench/locomo/locomo10.json and not redistributed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import re
import shutil
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdmem import Workspace  # noqa: E402
from mdmem.config import SearchConfig  # noqa: E402
from mdmem.index.embed import SentenceTransformerEmbedder  # noqa: E402
from mdmem.index.search import Filters, search  # noqa: E402
from mdmem.index.sqlite.db import set_rank  # noqa: E402
from mdmem.index.when import chunk_days, lifted, spans  # noqa: E402
from mdmem.markdown.parse import parse_document  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "locomo" / "locomo10.json"
WORK = ROOT / ".bench" / "locomo"
BUILD_VERSION = "2"
"""Bumped when a rendering changes: cached workspaces of another version are rebuilt."""
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METRICS = ("R@5", "R@10", "rec@1000", "rec@2000")
SPLITS = {"tune": range(0, 5), "test": range(5, 10), "all": range(0, 10)}
DIA = re.compile(r"^D\d+:\d+$")
BOOTSTRAP = 2000
SEED = 7
Turns = dict[tuple[str, int], str]
"""(path, line) → dia_id of the turn on that line."""


# ---- the three renderings --------------------------------------------------------------------


def session_date(text: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' → datetime."""
    return dt.datetime.strptime(text.replace(" on ", " ").strip(), "%I:%M %p %d %B, %Y")


def sessions(sample: dict) -> list[tuple[int, dt.datetime, str, list[dict]]]:
    """(number, date, date as LoCoMo writes it, turns) of each session."""
    conv = sample["conversation"]
    out = []
    n = 1
    while f"session_{n}" in conv:
        raw = conv[f"session_{n}_date_time"]
        out.append((n, session_date(raw), raw, conv[f"session_{n}"]))
        n += 1
    return out


def turn_text(turn: dict) -> str:
    text = " ".join(turn["text"].split())
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def fresh_root(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / ".sessions").mkdir(parents=True)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "locomo"\n')


def render_headings(sample: dict, root: Path) -> Turns:
    """(a) The project's own rendering: headings with the speakers and the date."""
    conv = sample["conversation"]
    a, b = conv["speaker_a"], conv["speaker_b"]
    turns: Turns = {}
    for n, when, raw, session in sessions(sample):
        rel = f".sessions/{when:%Y%m%d_%H%M%S}_session-{n}.md"
        lines = [
            "---",
            f"started: {when.isoformat()}",
            f"speakers: [{a}, {b}]",
            "---",
            f"# Session {n}: {a} and {b}",
            "",
            f"## {raw}",
            "",
        ]
        for turn in session:
            lines.append(
                f"- **{turn['speaker']}**: {turn_text(turn)} <!-- mdmem id={turn['dia_id']} -->"
            )
            turns[(rel, len(lines))] = turn["dia_id"]
        (root / rel).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return turns


def render_bullets(sample: dict, root: Path) -> Turns:
    """(b) Frontmatter and bullets, no headings, no metadata comments (as issue 16 measured)."""
    conv = sample["conversation"]
    turns: Turns = {}
    for n, when, _, session in sessions(sample):
        rel = f".sessions/{when:%Y%m%d_%H%M%S}_locomo-{sample['sample_id']}-s{n}.md"
        lines = [
            "---",
            f"session: {n}",
            f"date: {when.isoformat()}",
            f"speakers: [{conv['speaker_a']}, {conv['speaker_b']}]",
            "---",
        ]
        for turn in session:
            lines.append(f"- **{turn['speaker']}** [{turn['dia_id']}]: {turn_text(turn)}")
            turns[(rel, len(lines))] = turn["dia_id"]
        (root / rel).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return turns


def render_session_api(sample: dict, root: Path) -> Turns:
    """(c) Recorded live through ``ws.session``: one event per turn, at the session's date."""
    import time_machine

    conv = sample["conversation"]
    turns: Turns = {}
    ws = Workspace.open(root)
    for _, when, _, session in sessions(sample):
        with time_machine.travel(when, tick=True):
            with ws.session(f"Chat between {conv['speaker_a']} and {conv['speaker_b']}") as s:
                for turn in session:
                    s.event("message", f"{turn['speaker']}: {turn_text(turn)}")
            rel = s.path
        assert rel is not None
        doc = parse_document(rel, (root / rel).read_text(encoding="utf-8"))
        events = [e for e in doc.entries if e.heading_path[-1:] == ("Events",)]
        assert len(events) == len(session), (rel, len(events), len(session))
        for entry, turn in zip(events, session, strict=True):
            turns[(rel, entry.start_line)] = turn["dia_id"]
    ws.close()
    return turns


RENDERINGS: dict[str, tuple[str, Callable[[dict, Path], Turns]]] = {
    "a": ("headings + metadata (project's own)", render_headings),
    "b": ("frontmatter + bullets, no headings", render_bullets),
    "c": ("session API (ws.session)", render_session_api),
}


def build(sample: dict, rendering: str, rebuild: bool) -> tuple[Path, Turns]:
    """The conversation's workspace in ``rendering``, reused when already built."""
    root = WORK / rendering / sample["sample_id"]
    cache = root.parent / f"{sample['sample_id']}.turns.json"
    if not rebuild and cache.exists():
        saved = json.loads(cache.read_text())
        if saved["version"] == BUILD_VERSION and root.exists():
            return root, {(p, int(n)): d for p, n, d in saved["turns"]}
    fresh_root(root)
    turns = RENDERINGS[rendering][1](sample, root)
    cache.write_text(
        json.dumps({"version": BUILD_VERSION, "turns": [[p, n, d] for (p, n), d in turns.items()]})
    )
    return root, turns


# ---- questions and scores --------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    conv: int
    category: str
    text: str
    gold: tuple[str, ...]


def questions(samples: list[dict]) -> list[Question]:
    out = []
    for conv, sample in enumerate(samples):
        known = {t["dia_id"] for _, _, _, session in sessions(sample) for t in session}
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            gold: list[str] = []
            for item in qa.get("evidence", []):
                for part in re.split(r"[;\s,]+", str(item)):
                    if DIA.match(part.strip()) and part.strip() in known:
                        gold.append(part.strip())
            if gold:
                category = CATEGORIES[qa["category"]]
                out.append(Question(conv, category, qa["question"], tuple(dict.fromkeys(gold))))
    return out


def tokens(text: str) -> int:
    return math.ceil(len(text.split()) * 1.3)


def covered(hit, turns: Turns) -> set[str]:
    return {
        turns[(hit.path, line)]
        for line in range(hit.start_line, hit.end_line + 1)
        if (hit.path, line) in turns
    }


def score(hits: Sequence, gold: Sequence[str], turns: Turns) -> dict[str, float]:
    gold_set = set(gold)
    out = {}
    for k in (5, 10):
        got = set().union(*(covered(h, turns) for h in hits[:k])) if hits else set()
        out[f"R@{k}"] = len(got & gold_set) / len(gold_set)
    for budget in (1000, 2000):
        used, got = 0, set()
        for hit in hits:
            cost = tokens(hit.text)
            if used + cost > budget:
                break
            used += cost
            got |= covered(hit, turns)
        out[f"rec@{budget}"] = len(got & gold_set) / len(gold_set)
    return out


def interval(values: Sequence[float], rng: np.random.Generator) -> tuple[float, float, float]:
    """Mean and 95% percentile-bootstrap interval."""
    data = np.asarray(values, dtype=np.float64)
    if not data.size:
        return math.nan, math.nan, math.nan
    means = data[rng.integers(0, data.size, (BOOTSTRAP, data.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(data.mean()), float(low), float(high)


# ---- timing ----------------------------------------------------------------------------------


class CachedEmbedder:
    """Question vectors embedded once, in batches, and kept on disk: a search then costs its
    ranking only, which is what the latency figures measure (the one query embedding left
    out, as issue 16 defines them). Chunk texts go to the real model."""

    def __init__(self, model: SentenceTransformerEmbedder, questions: Sequence[str]) -> None:
        self.model = model
        self.model_id = model.model_id
        name = re.sub(r"[^\w.-]+", "_", model.model_id)
        path = WORK / f"queries-{name}.npz"
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            saved = np.load(path)
            self.cache = dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))
        missing = [q for q in dict.fromkeys(questions) if q not in self.cache]
        if missing:
            self.cache.update(zip(missing, model.embed(missing), strict=True))
            path.parent.mkdir(parents=True, exist_ok=True)
            texts = list(self.cache)
            np.savez(path, texts=np.array(texts), vectors=np.vstack([self.cache[t] for t in texts]))

    def embed(self, texts, progress=None):  # type: ignore[no-untyped-def]
        if all(t in self.cache for t in texts):
            return np.vstack([self.cache[t] for t in texts])
        return self.model.embed(texts, progress)


# ---- runs ------------------------------------------------------------------------------------


@dataclass
class Run:
    """Per-question scores of one (rendering, mode)."""

    scores: list[tuple[Question, dict[str, float]]] = dataclasses.field(default_factory=list)
    latency_ms: list[float] = dataclasses.field(default_factory=list)


def evaluate(
    samples: list[dict],
    convs: Sequence[int],
    rendering: str,
    modes: Sequence[str],
    model: SentenceTransformerEmbedder,
    console: Console,
    rebuild: bool = False,
) -> tuple[dict[str, Run], float]:
    """Ask every question of ``convs`` through ``Workspace.search``; returns runs per mode and
    the seconds spent indexing."""
    runs = {mode: Run() for mode in modes}
    index_seconds = 0.0
    qs = questions(samples)
    cached = CachedEmbedder(model, [q.text for q in qs])
    for conv in convs:
        root, turns = build(samples[conv], rendering, rebuild)
        ws = Workspace.open(root, embedder=cached)
        started = time.perf_counter()
        ws.index.update()
        index_seconds += time.perf_counter() - started
        set_rank(
            ws.index._backend.conn
        )  # the schema's keyword weights (a sweep may have left others)
        for q in (q for q in qs if q.conv == conv):
            for mode in modes:
                started = time.perf_counter()
                hits = ws.search(q.text, k=200, mode=mode, track_access=False)
                runs[mode].latency_ms.append((time.perf_counter() - started) * 1000)
                runs[mode].scores.append((q, score(hits, q.gold, turns)))
        ws.close()
        console.log(f"{rendering}: conversation {conv} ({samples[conv]['sample_id']}) done")
    return runs, index_seconds


def summary(run: Run, split: str, category: str) -> dict[str, tuple[float, float, float]]:
    rng = np.random.default_rng(SEED)
    rows = [
        s for q, s in run.scores if q.conv in SPLITS[split] and category in ("overall", q.category)
    ]
    out = {m: interval([r[m] for r in rows], rng) for m in METRICS}
    out["n"] = (len(rows), 0.0, 0.0)
    return out


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))] if ordered else math.nan


def report(results: dict[tuple[str, str], Run], splits: Sequence[str], console: Console) -> dict:
    table = Table(title="mdmem on LoCoMo: evidence recall (mean [95% bootstrap interval])")
    for column in ("rendering", "mode", "split", "category", "n", *METRICS, "p50 / p95 ms"):
        table.add_column(column, justify="left" if column in ("rendering", "category") else "right")
    out: dict = {}
    for (rendering, mode), run in results.items():
        for split in splits:
            if not any(q.conv in SPLITS[split] for q, _ in run.scores):
                continue
            lat = [
                ms for (q, _), ms in zip(run.scores, run.latency_ms, strict=True)
                if q.conv in SPLITS[split]
            ]  # fmt: skip
            for category in ["overall", *CATEGORIES.values()]:
                s = summary(run, split, category)
                out.setdefault(rendering, {}).setdefault(mode, {}).setdefault(split, {})[
                    category
                ] = {m: s[m] for m in METRICS} | {"n": s["n"][0]}
                first = category == "overall"
                table.add_row(
                    rendering if first else "",
                    mode if first else "",
                    split if first else "",
                    category,
                    str(s["n"][0]),
                    *(f"{s[m][0]:.3f} [{s[m][1]:.3f}, {s[m][2]:.3f}]" for m in METRICS),
                    f"{statistics.median(lat):.1f} / {p95(lat):.1f}" if first else "",
                )
            table.add_section()
    console.print(table)
    return out


# ---- sweeps (tuning split only) ----------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One point of a sweep: search settings, keyword column weights, and the day searched."""

    config: SearchConfig
    bm25: tuple[float, ...] | None = None
    """FTS5 column weights (text, heading, context); None: the schema's."""
    after_last_session: bool = False
    """Search on the day after the conversation's last session (recency then varies across
    sessions, as for an agent asked right after a chat), instead of today (all alike old)."""


def sweep(
    samples: list[dict],
    renderings: Sequence[str],
    variants: dict[str, Variant],
    model: SentenceTransformerEmbedder,
    console: Console,
    convs: Sequence[int] = tuple(SPLITS["tune"]),
) -> None:
    """Rank the questions of ``convs`` (the tuning split unless a check on another) under each
    variant (hybrid), query vectors cached."""
    qs = questions(samples)
    cached = CachedEmbedder(model, [q.text for q in qs])
    table = Table(title=f"sweep on conversations {convs[0]}-{convs[-1]} (hybrid)")
    table.add_column("rendering")
    table.add_column("variant")
    for column in (
        *METRICS,
        *(f"{c} rec@2000" for c in CATEGORIES.values()),
        "timed rec@2000",
        "p95 ms",
    ):
        table.add_column(column, justify="right")
    totals: dict[str, list[tuple[Question, dict[str, float]]]] = defaultdict(list)
    for rendering in renderings:
        scores: dict[str, list[tuple[Question, dict[str, float]]]] = defaultdict(list)
        latency: dict[str, list[float]] = defaultdict(list)
        for conv in convs:
            root, turns = build(samples[conv], rendering, False)
            ws = Workspace.open(root, embedder=cached)
            ws.index.update()
            last = max(when for _, when, _, _ in sessions(samples[conv])).date()
            for name, variant in variants.items():
                set_rank(ws.index._backend.conn, *([variant.bm25] if variant.bm25 else []))
                today = last + dt.timedelta(days=1) if variant.after_last_session else None
                for q in (q for q in qs if q.conv == conv):
                    started = time.perf_counter()
                    hits = search(
                        ws.index._backend, cached, q.text, k=200, mode="hybrid",
                        config=variant.config, filters=Filters(), track_access=False, today=today,
                    )  # fmt: skip
                    latency[name].append((time.perf_counter() - started) * 1000)
                    scores[name].append((q, score(hits, q.gold, turns)))
            set_rank(ws.index._backend.conn)
            ws.close()
        for name, rows in scores.items():
            totals[name] += rows
            table.add_row(rendering, name, *_sweep_cells(rows), f"{p95(latency[name]):.1f}")
        table.add_section()
    if len(renderings) > 1:
        for name, rows in totals.items():
            table.add_row("all", name, *_sweep_cells(rows), "")
    console.print(table)
    console.print(timed_share([q for q in qs if q.conv in convs]))


def timed(question: Question) -> bool:
    """Whether the question names a time :mod:`mdmem.index.when` reads (relative ones count
    from today, so on LoCoMo only those anchored on a date the question names match)."""
    return bool(spans(question.text, dt.date.today()))


def timed_share(qs: Sequence[Question]) -> str:
    """The share of questions, overall and per category, that name a time."""
    parts = []
    for category in ("overall", *CATEGORIES.values()):
        group = [q for q in qs if category in ("overall", q.category)]
        n = sum(timed(q) for q in group)
        parts.append(f"{category} {n}/{len(group)} ({n / max(1, len(group)):.1%})")
    return "Questions naming a time (timed): " + ", ".join(parts)


def _sweep_cells(rows: list[tuple[Question, dict[str, float]]]) -> list[str]:
    cells = [f"{statistics.fmean(s[m] for _, s in rows):.3f}" for m in METRICS]
    for category in CATEGORIES.values():
        values = [s["rec@2000"] for q, s in rows if q.category == category]
        cells.append(f"{statistics.fmean(values):.3f}")
    values = [s["rec@2000"] for q, s in rows if timed(q)]
    cells.append(f"{statistics.fmean(values):.3f}" if values else "-")
    return cells


def sweep_variants(name: str) -> dict[str, Variant]:
    base = SearchConfig()

    def with_(**params: object) -> SearchConfig:
        return dataclasses.replace(base, **params)

    grids: dict[str, dict[str, Variant]] = {
        "default": {"default": Variant(base)},
        "fts": {
            f"context {w}": Variant(base, bm25=(1.0, 0.3, w)) for w in (0.0, 0.1, 0.3, 0.6, 1.0)
        },
        "gate": {
            f"{rerank} floor {floor}{' next day' if after else ''}": Variant(
                with_(rerank=rerank, min_relevance=floor), after_last_session=after
            )
            for after in (False, True)
            for rerank in ("add", "scale")
            for floor in (0.0, 0.1, 0.25, 0.4)
        },
        "gate-now": {
            f"{rerank} floor {floor}": Variant(with_(rerank=rerank, min_relevance=floor))
            for rerank in ("add", "scale")
            for floor in (0.0, 0.25, 0.4)
        },
        "context": {
            f"neighbour {n} session {s}": Variant(with_(neighbour_weight=n, session_weight=s))
            for n in (0.2, 0.3, 0.5)
            for s in (0.2, 0.4, 0.6)
        },
        "speaker": {
            f"speaker {w}": Variant(with_(speaker_weight=w)) for w in (0.0, 0.1, 0.2, 0.3, 0.5)
        },
        "when": {
            f"when {w} days {d}": Variant(with_(when_weight=w, when_days=d))
            for w, d in [(0.0, 0), *((w, d) for w in (0.2, 0.5, 1.0) for d in (0, 14, 30))]
        },
        "when-kept": {
            f"when {w} days {d}": Variant(with_(when_weight=w, when_days=d))
            for w, d in [(0.0, 0), (0.2, 14)]
        },
        "fusion": {
            f"keyword {kw}": Variant(with_(keyword_weight=kw, vector_weight=round(1 - kw, 2)))
            for kw in (0.3, 0.4, 0.5, 0.6)
        },
    }
    return grids[name]


def time_lift_cost(samples: list[dict], console: Console, repeats: int = 3) -> None:
    """What the time lift adds to a search: reading the question's time expressions, and,
    when it names one, the dates of 100 candidates (session files of its conversation)."""
    qs = questions(samples)
    timings: list[float] = []
    for _ in range(repeats):
        for q in qs:
            paths = [
                (when.date().isoformat(), f".sessions/{when:%Y%m%d_%H%M%S}_session-{n}.md")
                for n, when, _, _ in sessions(samples[q.conv])
            ]
            rows = [paths[i % len(paths)] for i in range(100)]
            started = time.perf_counter()
            named = spans(q.text, dt.date.today())
            if named:
                lifted(named, [chunk_days(c, p) for c, p in rows], 14)
            timings.append((time.perf_counter() - started) * 1000)
    console.print(
        f"time lift, {len(qs)} questions × {repeats}: median "
        f"{statistics.median(timings):.3f} ms, p95 {p95(timings):.3f} ms"
    )


def parse_convs(text: str) -> list[int]:
    if text in SPLITS:
        return list(SPLITS[text])
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(c) for c in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--renderings", default="a,b,c")
    parser.add_argument("--modes", default="hybrid")
    parser.add_argument(
        "--convs", help="tune (0-4), test (5-9), all, or 0-2 (default: all; a sweep: tune)"
    )
    parser.add_argument("--sweep", help="rank the tuning split under a named grid of configs")
    parser.add_argument("--rebuild", action="store_true", help="re-render the workspaces")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--time-lift-cost", action="store_true", help="only time the time lift's own work"
    )
    args = parser.parse_args()
    console = Console(width=200)
    samples = json.loads(args.data.read_text())
    if args.time_lift_cost:
        time_lift_cost(samples, console)
        return
    model = SentenceTransformerEmbedder()
    renderings = args.renderings.split(",")
    if args.sweep:
        convs = parse_convs(args.convs or "tune")
        sweep(samples, renderings, sweep_variants(args.sweep), model, console, convs)
        return
    convs = parse_convs(args.convs or "all")
    results: dict[tuple[str, str], Run] = {}
    for rendering in renderings:
        runs, seconds = evaluate(
            samples, convs, rendering, args.modes.split(","), model, console, args.rebuild
        )
        console.log(f"{rendering}: indexing took {seconds:.1f} s (embedding included)")
        for mode, run in runs.items():
            results[(rendering, mode)] = run
    splits = [s for s in ("tune", "test", "all") if set(SPLITS[s]) & set(convs)]
    out = report(results, splits, console)
    console.print(
        "Renderings: "
        + "; ".join(f"{k} = {RENDERINGS[k][0]}" for k in renderings)
        + ". Latency: per Workspace.search call with its freshness check; the query's "
        "vector embedded beforehand."
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
