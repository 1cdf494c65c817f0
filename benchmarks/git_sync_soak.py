"""Three clones of one workspace (real git, a bare remote, the real merge driver) doing random
work for 30 rounds, per seed and sync mode: each round every clone makes one or two changes
(remember, update, supersede, forget, a pool write, a person's paragraph or reordering) and
then syncs, in a random order. At the end every clone syncs twice, and the run counts:

- lost: acknowledged memories (not replaced since) that no clone holds;
- duplicated: memories live more than once, or held more than once;
- resurrected: forgotten texts found anywhere in a clone (files and archive);
- stuck: syncs that failed and did not succeed on the clone's next try;
- identical: whether every clone holds the same files.

    .venv/bin/python benchmarks/git_sync_soak.py [--seeds 5] [--rounds 30] [--mode rebase]

Texts carry unique tokens (``xq12z``) so one never holds another. A run of 30 rounds takes
3-7 minutes on the 2-core machine (each sync runs git, and the driver as a process).

Issue 39's figures (before its fixes): lost 23, resurrected 11, stuck 17 in one run.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from git_world import SEED, GitWorld, count


def run(seed: int, rebase: bool, rounds: int) -> dict[str, object]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="mdmem-soak-") as tmp:
        w = GitWorld(Path(tmp), 3)
        required, forgotten, lineage = set(SEED), set(), {}
        n = 0
        failed: dict[int, bool] = {}
        stuck = 0

        def live(i: int) -> list[str]:
            return [e.text for e in w.entries(i) if not e.archived and e.text in required]

        for _ in range(rounds):
            for i in rng.sample(range(3), 3):
                for _ in range(rng.randint(1, 2)):
                    n += 1
                    op = rng.choice(["remember"] * 4 + ["update", "supersede", "forget", "pool"])
                    mine = live(i)
                    if op == "remember" or not mine:
                        text = f"c{i} fact xq{n}z"
                        lineage[text] = w.remember(i, text)
                        required.add(text)
                        continue
                    old = rng.choice(mine)
                    if op == "update":
                        new = f"c{i} update xq{n}z"
                        lineage[new] = w.update(i, old, new)
                    elif op == "supersede":
                        new = f"c{i} replaces xq{n}z"
                        lineage[new] = w.supersede(i, old, new)
                    elif op == "forget":
                        w.forget(i, old)
                        forgotten.add(old)
                        family = {t for t, e in lineage.items() if e == lineage.get(old)}
                        required -= family | {old}
                        continue
                    else:
                        w.pool_write(i, "plan", f"plan {n}")
                        continue
                    required.discard(old)
                    required.add(new)
                done = w.sync(i, rebase=rebase)
                if failed.get(i) and done.code not in (0, 5):
                    stuck += 1
                failed[i] = done.code not in (0, 5)
        for _ in range(2):
            for i in range(3):
                done = w.sync(i, rebase=rebase)
                stuck += done.code != 0
        entries = w.entries(0)
        lost = sum(1 for t in required if sum(count(entries, t)) == 0)
        duplicated = sum(1 for t in required if sum(count(entries, t)) > 1)
        resurrected = sum(1 for t in forgotten for i in range(3) if w.everywhere(i, t))
        identical = all(w.files(i) == w.files(0) for i in range(1, 3))
        return {
            "lost": lost,
            "duplicated": duplicated,
            "resurrected": resurrected,
            "stuck": stuck,
            "identical": identical,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--mode", choices=["both", "rebase", "merge"], default="both")
    args = parser.parse_args()
    modes = {"both": (True, False), "rebase": (True,), "merge": (False,)}[args.mode]
    print("| seed | mode | lost | duplicated | resurrected | stuck | identical | time |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in range(args.seeds):
        for rebase in modes:
            start = time.monotonic()
            got = run(seed, rebase, args.rounds)
            took = time.monotonic() - start
            print(
                f"| {seed} | {'rebase' if rebase else 'merge'} | {got['lost']} | "
                f"{got['duplicated']} | {got['resurrected']} | {got['stuck']} | "
                f"{'yes' if got['identical'] else 'NO'} | {took:.0f} s |",
                flush=True,
            )


if __name__ == "__main__":
    main()
