"""A child's search of a parent with no index yet: its files searched directly (issue 32 §3).

    .venv/bin/python benchmarks/parent_files.py [--entries 1000]

A parent workspace holding ``--entries`` facts in memory.md and no index, and a child (``parent =
"../parent"``, no embedding model) whose own index is built first. Reported: the child's keyword
search time the first time (its mirror of the parent's files built in the child's .mdmem/), then
again (the mirror's files only stat-ed), and after the parent adds one fact (one file re-read).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from mdmem import Workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="mdmem-parent-files-"))
    try:
        Workspace.init(base / "parent", mode="full", agent="lead")
        facts = [
            f"- Fact {n}: codename {n} serves port {8000 + n} on host h{n % 37}"
            for n in range(args.entries)
        ]
        (base / "parent" / "memory.md").write_text("# Memory\n\n## Facts\n\n" + "\n".join(facts))
        Workspace.init(base / "child", mode="full", agent="kid")
        config = base / "child" / "mdmem.toml"
        text = config.read_text().replace('model = "all-MiniLM-L6-v2"', 'model = ""')
        config.write_text('parent = "../parent"\n' + text)
        with Workspace.open(base / "child") as child:
            child.search("warm up", mode="keyword", scopes=["shared"])  # the child's own index
            for label in ("first search", "second search", "after the parent adds a fact"):
                if label.startswith("after"):
                    Workspace.open(base / "parent").remember("Codename 9999 is retired")
                started = time.perf_counter()
                hits = child.search("which port does codename 512 serve", mode="keyword", k=5)
                ms = 1000 * (time.perf_counter() - started)
                print(f"{label}: {ms:.0f} ms (top: {hits[0].scope} {hits[0].text[:40]!r})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
