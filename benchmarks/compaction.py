"""Offline compaction and extraction on LoCoMo (ACL 2024): what survives, at what size?

Each of the 10 conversations becomes one list of chat messages, in order: every turn is a
message with the speaker as ``name`` and the session's date as ``timestamp`` (the first speaker
is ``user``, the second ``assistant``; image captions are appended as ``[shares ...]``). The
offline compactor (``mdmem.distill.compact.compact_offline``) and the offline extractor
(``mdmem.distill.extract.extract_offline``) run on the whole conversation.

Metrics, over the evidence turns of questions in categories 1-4 (each distinct evidence turn of
a conversation counted once per category it serves; ids that resolve to no turn skipped):
  ratio       compact memory tokens / conversation tokens (tokens = ceil(words * 1.3))
  survives    share of evidence turns whose key content survives: at least half of the turn's
              content words (lowercased, stopwords removed, at least 3 characters, plural "s"
              folded) appear in ONE line of the output (one bullet of the compact memory; one
              extracted memory), so a big output does not pass by its vocabulary alone
  baselines   the same measure for what a dumb compactor keeps in the same token budget as
              the compact memory: the latest turns (truncation) and random turns (seed 0)
  memories    number of extracted memories; covered = share of evidence turns that survive in
              the extracted memories

Usage:  .venv/bin/python benchmarks/compaction.py [--data PATH] [--limit N] [--json PATH]
The data (CC BY-NC 4.0) is read from ../shared/bench/locomo/locomo10.json, not redistributed;
nothing is written outside .bench/.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from locomo import CATEGORIES, DATA, DIA, session_date  # noqa: E402

from mdmem.distill.compact import compact_offline  # noqa: E402
from mdmem.distill.extract import extract_offline  # noqa: E402
from mdmem.distill.rules import STOPWORDS  # noqa: E402

WORK = ROOT / ".bench" / "compaction"
SURVIVES = 0.5


def evidence_ids(qa: dict, known: set[str]) -> list[str]:
    """The dia_ids a question's evidence names that are turns of its conversation."""
    ids: list[str] = []
    for item in qa.get("evidence", []):
        for part in re.split(r"[;\s,]+", str(item)):
            part = part.strip()
            if DIA.match(part) and part in known and part not in ids:
                ids.append(part)
    return ids


def tokens(text: str) -> int:
    return math.ceil(len(text.split()) * 1.3)


def conversation_messages(sample: dict) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The conversation as messages, and each dia_id's text."""
    conv = sample["conversation"]
    messages: list[dict[str, str]] = []
    turns: dict[str, str] = {}
    n = 1
    while f"session_{n}" in conv:
        when = session_date(conv[f"session_{n}_date_time"]).isoformat()
        for turn in conv[f"session_{n}"]:
            text = " ".join(turn["text"].split())
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
            messages.append(
                {"role": role, "name": turn["speaker"], "content": text, "timestamp": when}
            )
            turns[turn["dia_id"]] = text
        n += 1
    return messages, turns


def content_words(text: str) -> set[str]:
    words = set()
    for word in re.findall(r"\w+", text.lower()):
        if len(word) < 3 or word in STOPWORDS:
            continue
        words.add(word[:-1] if word.endswith("s") and len(word) > 3 else word)
    return words


def survives(turn: str, lines: list[set[str]]) -> bool:
    words = content_words(turn)
    need = SURVIVES * len(words)
    return bool(words) and any(len(words & line) >= need for line in lines)


def line_words(texts: list[str]) -> list[set[str]]:
    return [w for w in (content_words(t) for t in texts) if w]


def baselines(messages: list[dict[str, str]], budget: int) -> dict[str, list[str]]:
    """Turns a naive compactor would keep in ``budget`` tokens: the latest, or random ones."""
    latest, used = [], 0
    for message in reversed(messages):
        used += tokens(message["content"])
        if used > budget:
            break
        latest.append(message["content"])
    shuffled = [m["content"] for m in messages]
    random.Random(0).shuffle(shuffled)
    sample, used = [], 0
    for text in shuffled:
        if used + tokens(text) > budget:
            continue
        sample.append(text)
        used += tokens(text)
    return {"latest": latest, "random": sample}


def evidence_by_category(sample: dict, turns: dict[str, str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for qa in sample["qa"]:
        if qa.get("category") in CATEGORIES:
            for dia in evidence_ids(qa, set(turns)):
                out[CATEGORIES[qa["category"]]].add(dia)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument("--json", type=Path, help="also write the results here (under .bench/)")
    args = parser.parse_args()
    console = Console(width=130)
    samples = json.loads(args.data.read_text())[: args.limit or None]
    hits: dict[str, dict[str, list[bool]]] = {
        e: defaultdict(list) for e in ("compact", "extract", "latest", "random")
    }
    sizes = {"before": 0, "after": 0, "memories": 0, "memory_tokens": 0}
    seconds = {"compact": 0.0, "extract": 0.0}
    WORK.mkdir(parents=True, exist_ok=True)
    for sample in samples:
        messages, turns = conversation_messages(sample)
        started = time.perf_counter()
        memory = compact_offline(messages).render()
        seconds["compact"] += time.perf_counter() - started
        started = time.perf_counter()
        memories = extract_offline(messages, source=sample["sample_id"])
        seconds["extract"] += time.perf_counter() - started
        extracted = "\n".join(m.text for m in memories)
        (WORK / f"{sample['sample_id']}.compact_memory.md").write_text(memory, encoding="utf-8")
        (WORK / f"{sample['sample_id']}.memories.txt").write_text(extracted, encoding="utf-8")
        sizes["before"] += sum(tokens(m["content"]) for m in messages)
        sizes["after"] += tokens(memory)
        sizes["memories"] += len(memories)
        sizes["memory_tokens"] += tokens(extracted)
        naive = baselines(messages, tokens(memory))
        out_words = {
            "compact": line_words(memory.splitlines()),
            "extract": line_words([m.text for m in memories]),
            "latest": line_words(naive["latest"]),
            "random": line_words(naive["random"]),
        }
        for category, ids in evidence_by_category(sample, turns).items():
            for engine in hits:
                result = [survives(turns[i], out_words[engine]) for i in sorted(ids)]
                hits[engine][category] += result
                hits[engine]["overall"] += result
        console.log(f"{sample['sample_id']}: {len(messages)} turns, {len(memories)} memories")
    report(console, hits, sizes, seconds, len(samples), args.json)


def report(
    console: Console,
    hits: dict[str, dict[str, list[bool]]],
    sizes: dict[str, int],
    seconds: dict[str, float],
    conversations: int,
    json_path: Path | None,
) -> None:
    ratio = sizes["after"] / sizes["before"]
    ext_ratio = sizes["memory_tokens"] / sizes["before"]
    table = Table(
        title=f"Offline compaction and extraction on LoCoMo ({conversations} conversations)"
    )
    table.add_column("category")
    table.add_column("evidence turns", justify="right")
    table.add_column("compact: survives", justify="right")
    table.add_column("extract: covered", justify="right")
    table.add_column("baseline: latest turns", justify="right")
    table.add_column("baseline: random turns", justify="right")
    results: dict[str, dict[str, float]] = {}
    for category in ["overall", *CATEGORIES.values()]:
        shares = {e: sum(h[category]) / len(h[category]) for e, h in hits.items()}
        results[category] = {"n": len(hits["compact"][category]), **shares}
        table.add_row(
            category,
            str(len(hits["compact"][category])),
            *(f"{shares[e]:.3f}" for e in ("compact", "extract", "latest", "random")),
        )
    console.print(table)
    console.print(
        f"Tokens: conversations {sizes['before']:,} → compact memory {sizes['after']:,} "
        f"(ratio {ratio:.3f}); {sizes['memories']:,} extracted memories, "
        f"{sizes['memory_tokens']:,} tokens (ratio {ext_ratio:.3f}). "
        f"Time: compaction {seconds['compact']:.1f} s, extraction {seconds['extract']:.1f} s."
    )
    if json_path:
        results["sizes"] = {**sizes, "ratio": ratio, "extract_ratio": ext_ratio}
        json_path.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
