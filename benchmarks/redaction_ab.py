"""The redactor now against the redactor of another commit, in one process, alternating.

    .venv/bin/python benchmarks/redaction_ab.py [REV] [--repeats N]

``REV`` (default ``HEAD~1``) is any git revision whose ``mdmem/redact.py`` imports nothing but
the standard library and ``mdmem.errors``. Both find secrets in this README plus
example_workspace/*.md, in calls of one line and of 1,500 characters; each is timed ``N`` times,
turn about, and the best time of each is kept (on a shared machine the best is the least
disturbed). Prints ms per MB and the spans each finds that the other does not.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redaction import REPO, real_text


def load_at(rev: str, folder: Path) -> ModuleType:
    source = subprocess.run(
        ["git", "show", f"{rev}:mdmem/redact.py"], cwd=REPO, check=True, capture_output=True
    ).stdout
    path = folder / "redact_at_rev.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("redact_at_rev", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", nargs="?", default="HEAD~1")
    parser.add_argument("--repeats", type=int, default=12)
    args = parser.parse_args()
    from mdmem.redact import DEFAULT

    text = real_text()
    megabytes = len(text.encode()) / 1e6
    units = {
        "lines": [line for line in text.splitlines() if line.strip()],
        "1,500-char chunks": [text[i : i + 1500] for i in range(0, len(text), 1500)],
    }
    with tempfile.TemporaryDirectory() as tmp:
        other = load_at(args.rev, Path(tmp)).DEFAULT
        finders = {args.rev: other, "now": DEFAULT}
        for name, calls in units.items():
            best = dict.fromkeys(finders, float("inf"))
            for _ in range(args.repeats):
                for label, finder in finders.items():
                    started = time.perf_counter()
                    for call in calls:
                        finder.find(call)
                    best[label] = min(best[label], time.perf_counter() - started)
            shown = ", ".join(f"{k} {v * 1000 / megabytes:,.0f}" for k, v in best.items())
            print(f"{name}: {shown} ms/MB (best of {args.repeats}, alternating)")
        spans = {k: {text[s.start : s.end] for s in f.find(text)} for k, f in finders.items()}
        print(f"only {args.rev}: {sorted(spans[args.rev] - spans['now'])}")
        print(f"only now: {sorted(spans['now'] - spans[args.rev])}")


if __name__ == "__main__":
    main()
