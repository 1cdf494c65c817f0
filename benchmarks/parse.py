"""Parse time of big and hostile Markdown files: linear in size, goal <= 1 s per MB.

Usage:  .venv/bin/python benchmarks/parse.py [--sizes 1,3,10] [--no-sync]

For each size (MB) it generates, with a fixed seed, one file of each shape and times
``parse_document`` (the Markdown model: frontmatter, headings, entries with line ranges) and
``chunk_document`` (what indexing adds before SQLite), best of two runs, CPU time of this
process (``time.process_time``: other work on a shared machine inflates wall time):

- ordinary: memory Markdown as mdmem and people write it: ``##`` sections, one-line items of
  8-25 words (a third with an ``<!-- mdmem ... -->`` comment), items with sub-items or a
  continuation line, now and then a paragraph, a fenced code block or a table;
- nested chain: one list nested as deep as the size allows (1,000 levels at 1 MB, 3,160 at
  10 MB; issue 10's shape: 1,500 levels took 8.6 s, 3,000 levels more than 30 s);
- nested outline: outline trees up to 12 levels deep, 0-4 children per item, two spaces a
  level;
- zigzag outline: the worst case for markdown-it: 12 levels deep and back, one item a level
  (no two neighbours are siblings);
- deep quotes: e-mail style replies quoted 1 to 20 levels deep;
- short items: ``- note 123456`` lines, about 14 bytes each (770,000 at 10 MB);
- short lines: lines of text about 14 bytes long, in paragraphs of 40 lines.

Then, unless ``--no-sync``: a keyword-only workspace whose ``notes/big.md`` (ordinary, of each
size) has just changed; the time of ``Workspace.search`` (a changed file over
``SEARCH_SYNC_MAX_BYTES`` is left to the indexer and listed as stale) and of ``Workspace.sync``
(what ``mdmem index`` or the watcher pays to index it, without embeddings), wall clock.
The files are written under ``.bench/parse/`` (git-ignored, recreated on every run).
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from mdmem import Workspace
from mdmem.index.chunks import chunk_document
from mdmem.markdown.parse import parse_document
from mdmem.workspace import SEARCH_SYNC_MAX_BYTES

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench" / "parse"
SEED = 20261122
WORDS = (
    "deploy staging database migration invoice customer token cache queue worker retry "
    "timeout docker compose postgres index search memory session agent prompt budget "
    "review commit branch release config secret backup restore metric alert latency "
    "user prefers short answers tests lint format port service region schema enum"
).split()
TYPES = ("fact", "preference", "pattern", "skill")


def ordinary(size: int, rng: random.Random) -> str:
    out = ["# Memory\n\n"]
    total = 0
    n = 0
    while total < size:
        block = _section(rng, n)
        out.append(block)
        total += len(block.encode())
        n += 1
    return "".join(out)


def _section(rng: random.Random, n: int) -> str:
    lines = [f"## {rng.choice(['Facts', 'Preferences', 'Patterns', 'Notes'])} {n}\n\n"]
    for i in range(rng.randint(8, 30)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 25)))
        if rng.random() < 0.33:
            text += (
                f" <!-- mdmem id=m-{rng.getrandbits(40):010x} type={rng.choice(TYPES)} "
                f"importance=0.{rng.randint(1, 9)} created=2026-11-{rng.randint(10, 28)} -->"
            )
        lines.append(f"- {text}\n")
        roll = rng.random()
        if roll < 0.1:
            lines += [f"  - {rng.choice(WORDS)} {rng.choice(WORDS)} {i}\n" for _ in range(2)]
        elif roll < 0.15:
            lines.append(f"  {' '.join(rng.choice(WORDS) for _ in range(10))}\n")
    roll = rng.random()
    if roll < 0.2:
        lines.append("\n" + " ".join(rng.choice(WORDS) for _ in range(40)) + "\n")
    elif roll < 0.3:
        lines.append("\n```bash\ndocker compose up -d db\nuv run pytest -x\n```\n")
    elif roll < 0.35:
        lines.append("\n| service | port |\n|---|---|\n| db | 5433 |\n| api | 8000 |\n")
    return "".join(lines) + "\n"


def nested_chain(size: int, rng: random.Random) -> str:
    levels = int(size**0.5)  # a chain of d levels is about d * d bytes
    return "".join("  " * d + f"- level {d}\n" for d in range(levels))


def nested_outline(size: int, rng: random.Random) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        tree = "".join(_outline(rng, 0))
        out.append(tree)
        total += len(tree)
    return "".join(out)


def _outline(rng: random.Random, depth: int) -> list[str]:
    lines = ["  " * depth + f"- {' '.join(rng.choice(WORDS) for _ in range(3))}\n"]
    if depth < 11:
        for _ in range(rng.choice((0, 1, 1, 2, 3, 4)) if depth else 4):
            lines += _outline(rng, depth + 1)
    return lines


def zigzag_outline(size: int, rng: random.Random) -> str:
    depths = [*range(12), *range(11, 0, -1)]
    out, total, n = [], 0, 0
    while total < size:
        line = "  " * depths[n % len(depths)] + f"- {rng.choice(WORDS)} {rng.choice(WORDS)}\n"
        out.append(line)
        total += len(line)
        n += 1
    return "".join(out)


def deep_quotes(size: int, rng: random.Random) -> str:
    out, total, n = [], 0, 0
    while total < size:
        line = "> " * (1 + n % 20) + " ".join(rng.choice(WORDS) for _ in range(6)) + "\n"
        out.append(line)
        total += len(line)
        n += 1
    return "".join(out)


def short_items(size: int, rng: random.Random) -> str:
    return "".join(f"- note {n:06d}\n" for n in range(size // 14))


def short_lines(size: int, rng: random.Random) -> str:
    return "".join(f"line {n:06d} x\n" + ("\n" if n % 40 == 39 else "") for n in range(size // 14))


SHAPES: dict[str, Callable[[int, random.Random], str]] = {
    "ordinary": ordinary,
    "nested chain": nested_chain,
    "nested outline": nested_outline,
    "zigzag outline": zigzag_outline,
    "deep quotes": deep_quotes,
    "short items": short_items,
    "short lines": short_lines,
}


def best_cpu(fn: Callable[[], object], runs: int = 2) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.process_time()
        result = fn()
        best = min(best, time.process_time() - started)
    return best, result


def parse_table(sizes: list[int]) -> None:
    print("| shape | size | lines | parse | s/MB | MB/s | + chunk | entries | warnings |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, make in SHAPES.items():
        for mb in sizes:
            text = make(mb * 1_000_000, random.Random(SEED))
            size_mb = len(text.encode()) / 1e6
            seconds, doc = best_cpu(lambda text=text: parse_document("big.md", text))
            chunk_s, _ = best_cpu(lambda doc=doc: chunk_document(doc), runs=1)
            print(
                f"| {name} | {size_mb:.1f} MB | {text.count(chr(10)):,} | {seconds:.2f} s "
                f"| {seconds / size_mb:.2f} | {size_mb / seconds:.1f} | {chunk_s:.2f} s "
                f"| {len(doc.entries):,} | {len(doc.problems)} |",
                flush=True,
            )


def sync_table(sizes: list[int]) -> None:
    print()
    print(f"A search while notes/big.md has just changed (SEARCH_SYNC_MAX_BYTES = "
          f"{SEARCH_SYNC_MAX_BYTES / 1e6:.0f} MB), keyword only, wall clock:")  # fmt: skip
    print()
    print("| big.md | search | stale | sync (what `mdmem index` pays) | chunks |")
    print("|---|---|---|---|---|")
    # just under each size: the largest file indexed is files.max_file_mb (10 MB by default)
    for mb in sorted({0.5, 0.98, 2, *(size * 0.98 for size in sizes)}):
        root = WORK / f"ws-{mb}"
        shutil.rmtree(root, ignore_errors=True)
        ws = Workspace.init(root, mode="full")
        with open(root / "mdmem.toml", "a", encoding="utf-8") as handle:
            handle.write('\n[embedding]\nmodel = ""\n')
        ws = Workspace.open(root)
        ws.remember("Deploys go to Fly.io staging")
        ws.index.update()
        (root / "notes").mkdir()
        text = ordinary(int(mb * 1_000_000), random.Random(SEED))
        (root / "notes" / "big.md").write_text(text, encoding="utf-8")
        started = time.perf_counter()
        results = ws.search("deploys staging", k=3)
        search_s = time.perf_counter() - started
        started = time.perf_counter()
        ws.index.update()
        sync_s = time.perf_counter() - started
        chunks = ws.index.status().chunks
        print(
            f"| {len(text.encode()) / 1e6:.1f} MB | {search_s:.2f} s | "
            f"{'yes' if results.stale else 'no'} | {sync_s:.2f} s | {chunks:,} |",
            flush=True,
        )
        ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1,3,10", help="sizes in MB (default: 1,3,10)")
    parser.add_argument("--no-sync", action="store_true", help="parse and chunk only")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    parse_table(sizes)
    if not args.no_sync:
        sync_table(sizes)


if __name__ == "__main__":
    main()
