"""Secret detectors measured on tests/data/secrets/: recall per kind, false positives on
look-alikes, precision, and speed.

    .venv/bin/python benchmarks/redaction.py [--candidates mdmem detect-secrets ...] [--speed-kb N]

Candidates not installed are skipped (they are not mdmem dependencies; to compare, install
``detect-secrets==1.5.0``, or ``bc-detect-secrets`` (same import name: another venv), or
``microsoft-security-utilities-secret-masker``).

A sample counts as caught when every character of each of its secrets is inside a masked span
(a key cut in half still leaks). A masked span is a true positive when it overlaps a secret,
else a false positive; precision = true / all spans over both corpora. "Real text" is this
README plus example_workspace/*.md (text written without secrets in mind; every span there is
shown so a person can judge it). Speed, best of 3, in ms per MB: that Markdown (repeated to
``--speed-kb``) in calls of one line (a context unit, an event) and of 1,500 characters (an index
chunk), and the corpora one sample per call.

``--writes``: what masking adds on the write path: two copies of benchmarks/agent_loop.py's
workspace (2,000 memories, 50 past sessions; keyword only), ``[redact]`` on in one and off in the
other, calls alternating between them: ``Session.event`` as a session file grows to 300 events,
``ws.remember``, ``ws.world.set`` and ``build_context`` (after one warm-up call, which masks every
memory once; later calls reuse the masked text).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "secrets"
Finder = Callable[[str], list[tuple[int, int]]]
_KEEP: list[object] = []


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


# ---- candidates -------------------------------------------------------------------------------


def mdmem_finder() -> tuple[str, Finder]:
    from mdmem.redact import DEFAULT

    return "mdmem.redact", lambda text: [(s.start, s.end) for s in DEFAULT.find(text)]


def detect_secrets_finder(entropy: bool = True) -> tuple[str, Finder]:
    """detect-secrets' ``scan_line`` with its default plugins and filters (``entropy=False``:
    without the two high-entropy plugins, which flag git SHAs, UUIDs and base64)."""
    import importlib.metadata as metadata

    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings, get_settings, transient_settings

    dist = next(
        (f"{d} {metadata.version(d)}" for d in ("detect-secrets", "bc-detect-secrets") if _has(d)),
        "detect-secrets",
    )
    settings = default_settings()  # every plugin on, default filters
    settings.__enter__()
    _KEEP.append(settings)  # (collected, it would switch the plugins off again)
    if not entropy:
        dist += " (no entropy plugins)"
        names = [n for n in get_settings().plugins if "HighEntropy" not in n]
        narrow = transient_settings({"plugins_used": [{"name": n} for n in names]})
        narrow.__enter__()
        _KEEP.append(narrow)

    def find(text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        offset = 0
        for line in text.split("\n"):
            for found in scan_line(line):
                value = found.secret_value or ""
                at = line.find(value) if value else -1
                while at >= 0:
                    spans.append((offset + at, offset + at + len(value)))
                    at = line.find(value, at + len(value))
            offset += len(line) + 1
        return spans

    return dist, find


def ms_masker_finder() -> tuple[str, Finder]:
    import importlib.metadata as metadata

    from microsoft_security_utilities_secret_masker import (
        SecretMasker,
        load_regex_patterns_from_json_file,
    )

    patterns = load_regex_patterns_from_json_file("PreciselyClassifiedSecurityKeys.json")
    patterns |= load_regex_patterns_from_json_file("UnclassifiedPotentialSecurityKeys.json")
    masker = SecretMasker(patterns)
    version = metadata.version("microsoft-security-utilities-secret-masker")

    def find(text: str) -> list[tuple[int, int]]:
        return [(d.start, d.end) for d in masker.detect_secrets(text)]

    return f"ms secret masker {version}", find


CANDIDATES = {
    "mdmem": mdmem_finder,
    "detect-secrets": detect_secrets_finder,
    "detect-secrets-no-entropy": lambda: detect_secrets_finder(entropy=False),
    "ms-masker": ms_masker_finder,
}


def _has(dist: str) -> bool:
    import importlib.metadata as metadata

    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


# ---- scoring ----------------------------------------------------------------------------------


def covered(text: str, secret: str, spans: list[tuple[int, int]]) -> bool:
    """Every occurrence of ``secret`` in ``text`` lies wholly inside the masked spans."""
    mask = bytearray(len(text))
    for start, end in spans:
        mask[start:end] = b"\1" * (end - start)
    at = text.find(secret)
    if at < 0:
        return False
    while at >= 0:
        if not all(mask[at : at + len(secret)]):
            return False
        at = text.find(secret, at + 1)
    return True


def overlaps(span: tuple[int, int], text: str, secrets: list[str]) -> bool:
    for secret in secrets:
        at = text.find(secret)
        while at >= 0:
            if span[0] < at + len(secret) and at < span[1]:
                return True
            at = text.find(secret, at + 1)
    return False


def real_text() -> str:
    parts = [(REPO / "README.md").read_text()]
    parts += [p.read_text() for p in sorted((REPO / "example_workspace").rglob("*.md"))]
    return "\n".join(parts)


def pieces(units: list[str], target: int = 1_000_000) -> list[str]:
    """``units`` repeated until they add up to ``target`` characters."""
    out: list[str] = []
    size = 0
    while size < target:
        for unit in units:
            out.append(unit)
            size += len(unit) + 1
            if size >= target:
                break
    return out


def speed(find: Finder, calls: list[str], repeats: int = 3) -> float:
    """Milliseconds per MB (best of ``repeats``), one detector call per item of ``calls``."""
    size = sum(len(c) + 1 for c in calls)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for text in calls:
            find(text)
        best = min(best, time.perf_counter() - start)
    return best * 1000 / (size / 1_000_000)


def evaluate(
    name: str, find: Finder, positives: list[dict], negatives: list[dict], size: int
) -> dict:
    caught: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    tp = fp = 0
    for sample in positives:
        spans = find(sample["text"])
        ok = all(covered(sample["text"], s, spans) for s in sample["secrets"])
        caught[sample["kind"]][0] += ok
        caught[sample["kind"]][1] += 1
        for span in spans:
            if overlaps(span, sample["text"], sample["secrets"]):
                tp += 1
            else:
                fp += 1
    flagged: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sample in negatives:
        spans = find(sample["text"])
        flagged[sample["kind"]][0] += bool(spans)
        flagged[sample["kind"]][1] += 1
        fp += len(spans)
    real = real_text()
    real_spans = find(real)
    fp_real = len(real_spans)
    lines = pieces(real.split("\n"), size)
    chunks = pieces([real[i : i + 1500] for i in range(0, len(real), 1500)], size)
    corpus = pieces([s["text"] for s in positives + negatives], size)
    return {
        "name": name,
        "caught": dict(caught),
        "flagged": dict(flagged),
        "recall": sum(c[0] for c in caught.values()) / sum(c[1] for c in caught.values()),
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "real_fp": fp_real,
        "real_examples": [real[s:e][:40] for s, e in real_spans[:8]],
        "ms_per_mb_lines": speed(find, lines),
        "ms_per_mb_chunks": speed(find, chunks),
        "ms_per_mb_corpus": speed(find, corpus),
    }


def write_costs(events: int = 300) -> Table:
    """Median ms of write-path operations with redaction on and off: two copies of the same
    workspace, calls alternating between them (so changing load hits both alike)."""
    import random
    import statistics

    from agent_loop import OUT, build, sentence

    from mdmem import Workspace

    spaces: dict[bool, Workspace] = {}
    for enabled in (False, True):
        root = OUT.parent / "redaction" / ("on" if enabled else "off")
        build(root, 2000, 50, random.Random(0))
        config = root / "mdmem.toml"
        config.write_text(config.read_text() + f"[redact]\nenabled = {str(enabled).lower()}\n")
        spaces[enabled] = Workspace.open(root)
    rng = random.Random(1)
    times: dict[str, dict[bool, list[float]]] = defaultdict(lambda: {False: [], True: []})

    def both(name: str, call: Callable[[Workspace, Any], object], n: int, arg: Any = None) -> None:
        for _ in range(n):
            for enabled in (False, True):
                target = arg[enabled] if arg is not None else spaces[enabled]
                start = time.perf_counter()
                call(spaces[enabled], target)
                times[name][enabled].append((time.perf_counter() - start) * 1000)

    for enabled in (False, True):  # warm-up: imports, parse caches, every memory masked once
        spaces[enabled].build_context(budget_tokens=4000)
    sessions = {e: spaces[e].session("benchmark") for e in (False, True)}
    both(
        "Session.event (to 300 events)",
        lambda ws, s: s.event("execute", sentence(rng)),
        events,
        sessions,
    )
    for session in sessions.values():
        session.close()
    both("ws.remember", lambda ws, _: ws.remember(sentence(rng)), 100)
    both("ws.world.set", lambda ws, _: ws.world.set("key 1", sentence(rng, 8)), 50)
    both("build_context", lambda ws, _: ws.build_context(budget_tokens=4000), 20)
    table = Table(title="Write path, median ms per call")
    for column in ("operation", "redact off", "redact on"):
        table.add_column(column, justify="left" if column == "operation" else "right")
    for name, by in times.items():
        off, on = statistics.median(by[False]), statistics.median(by[True])
        table.add_row(name, f"{off:.2f}", f"{on:.2f}")
    for ws in spaces.values():
        ws.close()
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--speed-kb", type=int, default=250, help="text per speed run (figures are per MB)"
    )
    parser.add_argument(
        "--writes", action="store_true", help="only the write-path costs, redaction on vs off"
    )
    args = parser.parse_args()
    if args.writes:
        Console().print(write_costs())
        return
    positives, negatives = load("secrets.jsonl"), load("lookalikes.jsonl")
    results = []
    console = Console()
    for key in args.candidates:
        try:
            name, find = CANDIDATES[key]()
        except ImportError as exc:
            console.print(f"[dim]{key}: not installed ({exc.name}); skipped[/dim]")
            continue
        results.append(evaluate(name, find, positives, negatives, args.speed_kb * 1000))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    kinds = list(dict.fromkeys(s["kind"] for s in positives))
    table = Table(title=f"Recall per kind (samples caught of {len(positives) // len(kinds)})")
    table.add_column("kind")
    for r in results:
        table.add_column(r["name"], justify="right")
    for kind in kinds:
        table.add_row(kind, *(f"{r['caught'].get(kind, [0])[0]}" for r in results))
    console.print(table)
    looks = list(dict.fromkeys(s["kind"] for s in negatives))
    table = Table(title="Look-alikes flagged (samples with any span; lower is better)")
    table.add_column("look-alike")
    for r in results:
        table.add_column(r["name"], justify="right")
    for kind in looks:
        table.add_row(kind, *(f"{r['flagged'].get(kind, [0])[0]}" for r in results))
    console.print(table)
    table = Table(title="Summary")
    for column in ("detector", "recall", "precision", "spans in real text", "ms/MB lines",
                   "ms/MB chunks", "ms/MB corpus"):  # fmt: skip
        table.add_column(column, justify="right" if column != "detector" else "left")
    for r in results:
        table.add_row(
            r["name"],
            f"{r['recall']:.3f}",
            f"{r['precision']:.3f}",
            str(r["real_fp"]),
            f"{r['ms_per_mb_lines']:.0f}",
            f"{r['ms_per_mb_chunks']:.0f}",
            f"{r['ms_per_mb_corpus']:.0f}",
        )
    console.print(table)
    for r in results:
        if r["real_examples"]:
            console.print(f"{r['name']}: spans in real text, e.g. {r['real_examples']}")
    for settings in reversed(_KEEP):  # detect-secrets' settings back as they were
        settings.__exit__(None, None, None)  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
