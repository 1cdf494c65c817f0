"""A person's editor saving memory.md while an agent writes to it: is anything lost?

Two real processes race on one file. The "editor" saves N times (every 5-40 ms), each save
adding the line ``- PERSON <n>`` the way a real editor saves:

- ``inplace``: open, read, truncate, write (VS Code and many editors), with a pause between
  truncate and write;
- ``rename``: write a temp file, rename it over the file (save-as-copy editors);
- ``vim``: the ``4913`` probe, rename the file to ``memory.md~``, write a new file, delete the
  backup (vim's default ``writebackup``), with a ``.memory.md.swp`` swap file present;
- ``jetbrains``: write ``memory.md___jb_tmp___``, rename the file to ``___jb_old___``, rename the
  temp file into place, delete the old one.
- ``stale-inplace`` / ``stale-rename``: read the file, wait 0-200 ms (program writes land
  meanwhile), then save that copy in place or by rename, with the person's new line added at the
  end of ``## Facts`` (where the program adds its facts) and the line the person added before
  edited (`` (edited)``): a stale copy, saved inside the late-save window, that changed only
  lines next to the program's.

The "agent" meanwhile calls ``remember`` (``PROG <n>``), ``update`` and ``supersede`` through the
library as fast as it can. At the end every person line and every write the agent was told had
succeeded must be in the file. Prints a table (or JSON with ``--json``).

    .venv/bin/python benchmarks/editor_race.py --saves 1000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PATTERNS = ("inplace", "rename", "vim", "jetbrains", "stale-inplace", "stale-rename")

EDITOR = r"""
import os, random, sys, time
path, pattern, saves, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
folder, name = os.path.dirname(path), os.path.basename(path)

def read():
    for _ in range(2000):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            time.sleep(0.0005)
    raise SystemExit("the file never came back")

def write_new(target, data, mode=0o644):
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)

swap = os.path.join(folder, "." + name + ".swp")
if pattern == "vim":
    write_new(swap, b"b0VIM 9.0")
for n in range(saves):
    time.sleep(rng.uniform(0.005, 0.04))
    line = b"- PERSON %d\n" % n
    if pattern == "inplace":
        with open(path, "r+b") as f:
            d = f.read()
            f.seek(0)
            f.truncate()
            f.flush()
            time.sleep(0.0005)
            f.write(d + line)
    elif pattern == "rename":
        d = read()
        tmp = os.path.join(folder, ".%s.save-%d" % (name, n))
        write_new(tmp, d + line)
        os.replace(tmp, path)
    elif pattern == "vim":
        probe = os.path.join(folder, "4913")
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.close(fd)
        os.unlink(probe)
        d = read()
        backup = path + "~"
        os.rename(path, backup)
        write_new(path, d + line)
        os.unlink(backup)
        write_new(swap, b"b0VIM 9.0 %d" % n)
    elif pattern.startswith("stale"):
        d = read()
        time.sleep(rng.uniform(0.0, 0.2))  # the agent writes meanwhile: this copy goes stale
        if n:
            d = d.replace(b"- PERSON %d\n" % (n - 1), b"- PERSON %d (edited)\n" % (n - 1))
        end = d.index(b"\n\n## Patterns") + 1
        d = d[:end] + line + d[end:]
        if pattern == "stale-inplace":
            with open(path, "r+b") as f:
                f.truncate()
                f.write(d)
        else:
            tmp = os.path.join(folder, ".%s.save-%d" % (name, n))
            write_new(tmp, d)
            os.replace(tmp, path)
    elif pattern == "jetbrains":
        d = read()
        tmp, old = path + "___jb_tmp___", path + "___jb_old___"
        write_new(tmp, d + line)
        os.rename(path, old)
        os.rename(tmp, path)
        os.unlink(old)
    print(n, flush=True)
if pattern == "vim":
    os.unlink(swap)
"""

AGENT = r"""
import json, random, sys, time
from mdmem import Workspace
from mdmem.errors import ConflictError, EntryNotFoundError
root, stop_file, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
ws = Workspace.open(root)
active, n = [ws.remember("PROG 0", type="fact")], 0
print(json.dumps({"op": "remember", "text": "PROG 0"}), flush=True)
import os
while not os.path.exists(stop_file) or n < 5:
    n += 1
    op = rng.random()
    try:
        if op < 0.7 or len(active) < 3:
            entry = ws.remember("PROG %d" % n, type=rng.choice(["fact", "preference", "pattern"]))
            active.append(entry)
            print(json.dumps({"op": "remember", "text": entry.text}), flush=True)
        elif op < 0.85:
            entry = rng.choice(active)
            ws.update(entry.id, importance=round(rng.uniform(0.1, 0.9), 2))
            print(json.dumps({"op": "update", "text": entry.text}), flush=True)
        else:
            old = active.pop(rng.randrange(len(active)))
            new = ws.supersede(old.id, by="PROG %d supersedes" % n)
            active.append(new)
            print(json.dumps({"op": "supersede", "text": new.text, "old": old.text}), flush=True)
    except ConflictError as exc:
        print(json.dumps({"op": "conflict", "error": str(exc)}), flush=True)
    except EntryNotFoundError as exc:  # a confirmed entry is gone from the file: a loss
        print(json.dumps({"op": "missing", "error": str(exc)}), flush=True)
    time.sleep(rng.uniform(0.0, 0.004))
ws.close()
guard = ws._w.writer.guard
print(json.dumps({"merged": guard.merged, "conflicts": guard.conflicts}), flush=True)
"""


def race(pattern: str, saves: int, seed: int, late_ms: int) -> dict[str, object]:
    from mdmem import Workspace

    with tempfile.TemporaryDirectory(prefix=f"race-{pattern}-") as tmp:
        ws = Workspace.init(Path(tmp) / "ws", mode="full")
        (ws.root / "mdmem.toml").write_text(
            'mode = "full"\n\n[embedding]\nmodel = ""\n\n'
            f"[write]\nlate_save_ms = {late_ms}\njournal_versions = 100000\n"
            "journal_mb = 100000\njournal_total_mb = 100000\n"  # every version kept
        )
        memory = ws.root / "memory.md"
        template_lines = [line for line in memory.read_text().splitlines() if line.strip()]
        stop = Path(tmp) / "stop"
        started = time.perf_counter()
        agent = subprocess.Popen(
            [sys.executable, "-c", AGENT, str(ws.root), str(stop), str(seed)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert agent.stdout is not None
        first = agent.stdout.readline()  # the agent is up and has written once
        editor = subprocess.Popen(
            [sys.executable, "-c", EDITOR, str(memory), pattern, str(saves), str(seed)],
            stdout=subprocess.PIPE,
            text=True,
        )
        editor_out, _ = editor.communicate()
        stop.touch()
        agent_out, _ = agent.communicate()
        agent_out = first + agent_out
        seconds = time.perf_counter() - started
        final = memory.read_text()
        journal = [
            v.read_bytes().decode("utf-8", "replace") for v in ws.files.versions("memory.md")
        ]
    lines = final.splitlines()
    saved = [int(x) for x in editor_out.split()]
    edits = pattern.startswith("stale")
    person = {n: f"- PERSON {n}" + (" (edited)" if edits and n + 1 in saved else "") for n in saved}
    person_lost = [n for n in saved if person[n] not in lines]
    person_dup = sum(1 for n in saved if lines.count(person[n]) > 1)
    records = [json.loads(x) for x in agent_out.splitlines() if x.strip()]
    summary = records.pop() if records and "merged" in records[-1] else {}
    confirmed = [r for r in records if r["op"] not in ("conflict", "missing")]
    missing = [r for r in records if r["op"] == "missing"]
    texts = [t for r in confirmed for t in (r.get("text"), r.get("old")) if t]
    program_lost = sorted({t for t in texts if not any(_holds(line, t) for line in lines)})
    unrecoverable = [t for t in program_lost if not any(t in version for version in journal)]
    program_dup = sum(1 for t in set(texts) if sum(_holds(line, t) for line in lines) > 1)
    structure_lost = [t for t in template_lines if t not in lines]
    return {
        "pattern": pattern,
        "person_saves": len(saved),
        "person_lost": len(person_lost),
        "person_duplicated": person_dup,
        "program_writes": len(confirmed),
        "program_lost": len(program_lost),
        "program_duplicated": program_dup,
        "program_lost_not_in_journal": len(unrecoverable),
        "conflicts": sum(r["op"] == "conflict" for r in records),
        "program_missing_midway": len(missing),
        "late_saves_merged": summary.get("merged", 0),
        "template_lines_lost": len(structure_lost),
        "exit_codes": [editor.returncode, agent.returncode],
        "seconds": round(seconds, 1),
        "lost_examples": [*map(str, person_lost[:3]), *program_lost[:3], *structure_lost[:3]],
    }


def _holds(line: str, text: str) -> bool:
    body = line.split("<!--", 1)[0].strip()
    return body in (f"- {text}", f"* {text}", f"+ {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=1000)
    parser.add_argument("--patterns", default=",".join(PATTERNS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--late-ms", type=int, default=250)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [race(p, args.saves, args.seed, args.late_ms) for p in args.patterns.split(",") if p]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    cols = [
        ("pattern", "pattern"),
        ("person_saves", "person saves"),
        ("person_lost", "lost"),
        ("program_writes", "program writes"),
        ("program_lost", "lost"),
        ("program_lost_not_in_journal", "lost, not in the journal"),
        ("conflicts", "ConflictError"),
        ("late_saves_merged", "late saves merged"),
        ("template_lines_lost", "template lines lost"),
        ("seconds", "s"),
    ]
    print("| " + " | ".join(title for _, title in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        print("| " + " | ".join(str(r[key]) for key, _ in cols) + " |")
    if any(r["lost_examples"] for r in results):
        print("lost:", {r["pattern"]: r["lost_examples"] for r in results})


if __name__ == "__main__":
    main()
