"""The fault-injection suite: each fault tried many times, and what it cost.

For every fault: how many times it was tried, how many confirmed lines (a person's or the
program's) were lost, how many files were left corrupted (not parseable, or holding bytes no
side wrote), and how many failures were not a clear one-line error naming the file. The slow
test module tests/integration/test_faults.py runs the same functions and fails on any non-zero
count.

    .venv/bin/python benchmarks/faults.py            # the table for the README (~3 minutes)
    .venv/bin/python benchmarks/faults.py --json

Needs root for the tmpfs faults (a full disk, a read-only mount); without it they are skipped
and say so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

KEYWORD_ONLY = 'mode = "full"\n\n[embedding]\nmodel = ""\n'


@dataclass
class Result:
    fault: str
    tried: int
    lost: int = 0
    """Confirmed lines (a person's save, a write the program reported done) missing after."""
    corrupted: int = 0
    """Files left unparseable, or holding bytes neither side wrote."""
    unclear: int = 0
    """Failures that were a traceback or a message not naming the file."""
    note: str = ""
    seconds: float = 0.0
    """Wall-clock time of the whole fault's run (shared by the results one run gives)."""

    @property
    def ok(self) -> bool:
        return not (self.lost or self.corrupted or self.unclear)


def _workspace(tmp: Path, name: str = "ws") -> Path:
    from mdmem import Workspace

    ws = Workspace.init(tmp / name, mode="full")
    (ws.root / "mdmem.toml").write_text(KEYWORD_ONLY)
    return ws.root


def _parses(path: Path) -> bool:
    from mdmem.markdown.parse import parse_document

    try:
        doc = parse_document(path.name, path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return False
    return not doc.problems


def _holds(text: str, entry_text: str) -> bool:
    return any(line.split("<!--", 1)[0].strip() == f"- {entry_text}" for line in text.splitlines())


# ---- writers racing writers -------------------------------------------------------------------

MIXED = textwrap.dedent(
    """
    import json, random, sys
    from mdmem import Workspace
    from mdmem.errors import ConflictError
    ws = Workspace(sys.argv[1]); name = sys.argv[2]; rng = random.Random(name)
    mine = []
    for i in range(int(sys.argv[3])):
        try:
            if not mine or rng.random() < 0.7:
                e = ws.remember(f"{name} memory {i}", type="fact"); mine.append(e)
                print(json.dumps([e.text]), flush=True)
            elif rng.random() < 0.5:
                e = rng.choice(mine); ws.update(e.id, importance=rng.choice([0.2, 0.8]))
            else:
                old = mine.pop(rng.randrange(len(mine)))
                e = ws.supersede(old.id, by=f"{name} memory {i} (newer)"); mine.append(e)
                print(json.dumps([e.text, old.text]), flush=True)
        except ConflictError:
            pass
    ws.close()
    """
)


def concurrent_writers(tmp: Path, processes: int = 8, ops: int = 100) -> Result:
    """8 processes × 100 remember/update/supersede calls on one file."""
    root = _workspace(tmp)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MIXED, str(root), f"p{n}", str(ops)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    outs = [p.communicate()[0] for p in procs]
    text = (root / "memory.md").read_text()
    confirmed = [t for out in outs for line in out.splitlines() for t in json.loads(line)]
    lost = sum(1 for t in set(confirmed) if not _holds(text, t))
    unclear = sum(1 for p in procs if p.returncode != 0)
    return Result(
        f"{processes} processes × {ops} mixed writes on one file",
        processes * ops,
        lost=lost,
        corrupted=0 if _parses(root / "memory.md") else 1,
        unclear=unclear,
    )


KILLED = textwrap.dedent(
    """
    import sys
    from mdmem import Workspace
    ws = Workspace(sys.argv[1])
    for i in range(100000):
        e = ws.remember(f"kill {i} " + "x" * (i % 200), type="fact")
        print(e.text, flush=True)
    """
)


def sigkill_mid_write(tmp: Path, n: int = 30, seed: int = 1) -> Result:
    """A writer killed with SIGKILL at a random moment of a remember loop."""
    from mdmem import Workspace

    rng = random.Random(seed)
    root = _workspace(tmp)
    lost = corrupted = 0
    for _ in range(n):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED, str(root)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # it is writing
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        out = proc.communicate()[0]
        text = (root / "memory.md").read_text()
        lost += sum(1 for t in out.splitlines() if t and not _holds(text, t))
        corrupted += not _parses(root / "memory.md")
    with Workspace(root) as ws:
        ws.remember("after the kills", type="fact")  # removes the dead writers' temp files
    left = [p for p in root.iterdir() if p.name.endswith(".mdmem-tmp")]
    return Result(
        "SIGKILL at a random moment of a remember loop",
        n,
        lost=lost,
        corrupted=corrupted + len(left),
        note=f"{len(left)} temp files left" if left else "",
    )


# ---- a person's editor racing the program -------------------------------------------------------


def editor_races(tmp: Path, saves: int = 1000) -> list[Result]:
    """The four ways editors save, 1,000 saves each, against a writing agent (editor_race.py)."""
    import editor_race

    out = []
    for pattern in editor_race.PATTERNS:
        r = editor_race.race(pattern, saves, seed=1, late_ms=250)
        out.append(
            Result(
                f"editor saves racing the agent: {pattern}",
                int(r["person_saves"]) + int(r["program_writes"]),
                lost=int(r["person_lost"]) + int(r["program_lost"]),
                corrupted=int(r["template_lines_lost"]),
                unclear=sum(1 for c in r["exit_codes"] if c),
                note=f"{r['person_saves']} saves, {r['program_writes']} writes, "
                f"{r['conflicts']} ConflictError",
            )
        )
    return out


def late_saves(tmp: Path, n: int = 50) -> list[Result]:
    """A save landing just after a write: in place into the replaced file, and a stale copy
    renamed over the file."""
    from mdmem import Workspace

    results = []
    for kind in ("in place, into the file the write replaced", "a copy read before the write"):
        lost = corrupted = 0
        for i in range(n):
            root = _workspace(tmp, f"late-{len(results)}-{i}")
            path = root / "memory.md"
            with Workspace(root) as ws:
                if kind.startswith("in place"):
                    # the person opened a file last changed a while ago (one changed under 2 s
                    # ago and held open for writing may be mid-save: a write waits for it)
                    os.utime(path, (time.time() - 10, time.time() - 10))
                    with open(path, "r+b") as editor:
                        seen = editor.read()
                        ws.remember(f"program {i}", type="fact")
                        editor.seek(0)
                        editor.truncate()
                        editor.write(seen + f"- person {i}\n".encode())
                else:
                    seen = path.read_bytes()
                    ws.remember(f"program {i}", type="fact")
                    copy = path.with_name(".memory.md.copy")
                    copy.write_bytes(seen + f"- person {i}\n".encode())
                    os.replace(copy, path)
            text = path.read_text()
            lost += (not _holds(text, f"program {i}")) + (not _holds(text, f"person {i}"))
            corrupted += not _parses(path)
        results.append(Result(f"a late save: {kind}", n, lost=lost, corrupted=corrupted))
    return results


# ---- the file system failing -------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path | None]:
    """A small real file system (needs root); None when it cannot be mounted."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def disk_full(tmp: Path, n: int = 20) -> Result:
    """Writes on a 2 MB tmpfs filled to the brim: a clear error, the file unchanged."""
    from mdmem import Workspace
    from mdmem.errors import MdmemError

    with tmpfs(tmp / "full", "2m") as mnt:
        if mnt is None:
            return Result("disk full (2 MB tmpfs)", 0, note="skipped: cannot mount (needs root)")
        root = _workspace(mnt)
        path = root / "memory.md"
        ws = Workspace(root)
        ws.remember("written before the disk filled", type="fact")
        filler = mnt / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        with contextlib.suppress(OSError):  # write until the disk is full
            while True:
                os.write(fd, b"x" * 4096)
        os.close(fd)
        lost = corrupted = unclear = failed = 0
        for i in range(n):
            before = path.read_bytes()
            try:
                ws.remember(f"memory {i} " + "y" * 2000, type="fact")
            except MdmemError as exc:
                failed += 1
                unclear += "memory.md" not in str(exc) or "\n" in str(exc)
                corrupted += path.read_bytes() != before
            except Exception:
                unclear += 1
            lost += not _holds(path.read_text(), "written before the disk filled")
            corrupted += not _parses(path)
        left = [p for p in root.iterdir() if p.name.endswith(".mdmem-tmp")]
        filler.unlink()
        ws.close()
        return Result(
            "a write on a full disk (2 MB tmpfs)",
            n,
            lost=lost,
            corrupted=corrupted + len(left),
            unclear=unclear,
            note=f"{failed} refused with a clear error",
        )


def read_only_search(tmp: Path) -> Result:
    """Search on a read-only mount: answers from the index, names the stale file."""
    from mdmem import Workspace

    with tmpfs(tmp / "ro", "8m") as mnt:
        if mnt is None:
            return Result("search on a read-only mount", 0, note="skipped: needs root")
        root = _workspace(mnt)
        with Workspace(root) as ws:
            ws.remember("The zebra crossing is on Elm St", type="fact")
            ws.index.update(embed=False)
        (root / "notes").mkdir()
        (root / "notes" / "new.md").write_text("- written after the last sync\n")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        unclear = lost = 0
        try:
            with Workspace(root) as ws:
                results = ws.search("zebra crossing", mode="keyword")
                lost += not results or "zebra" not in results[0].text
                unclear += results.stale != ["notes/new.md"]
        except Exception:
            unclear += 1
        return Result("search on a read-only mount", 1, lost=lost, unclear=unclear)


# ---- hostile input ------------------------------------------------------------------------------

TRAVERSAL = [
    "../outside.md",
    "/etc/passwd.md",
    "~/x.md",
    "notes/../../x.md",
    "..\\x.md",
    ".mdmem/x.md",
    ".git/x.md",
    "a/.git/x.md",
    "node_modules/x.md",
    "link-out/x.md",
]


def path_traversal(tmp: Path) -> Result:
    from mdmem import Workspace
    from mdmem.errors import MdmemError

    root = _workspace(tmp)
    outside = tmp / "outside"
    outside.mkdir()
    (root / "link-out").symlink_to(outside)
    before = sorted(p.name for p in tmp.iterdir())
    unclear = 0
    with Workspace(root) as ws:
        for name in TRAVERSAL:
            try:
                ws.remember("should not be written", file=name)
                unclear += 1  # accepted: a failure of this fault
            except MdmemError as exc:
                unclear += "\n" in str(exc)
    written = list(outside.iterdir()) or sorted(p.name for p in tmp.iterdir()) != before
    return Result(
        "names leading outside the workspace or into its internal folders",
        len(TRAVERSAL),
        corrupted=int(bool(written)),
        unclear=unclear,
    )


def hostile_queries(tmp: Path, n: int = 300, seed: int = 2) -> Result:
    from mdmem import Workspace

    rng = random.Random(seed)
    alphabet = [
        *"\"*-^():ANDORNOTNEAR\\/'%_;{}[]<>!?~ \t\n\x00€数据库データ😀",
        *(" AND ", " OR ", " NOT ", "NEAR(", "' OR 1=1 --", "*", '"'),
    ]
    root = _workspace(tmp)
    unclear = 0
    with Workspace(root) as ws:
        ws.remember("The test database listens on port 5433", type="fact")
        for _ in range(n):
            query = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            try:
                ws.search(query, mode="keyword")
            except Exception:
                unclear += 1
        ok = ws.search("which port does the test database use", mode="keyword")
    return Result(
        "hostile search queries (FTS5 syntax, quotes, NUL, emoji, CJK)",
        n,
        lost=0 if ok else 1,
        unclear=unclear,
    )


def hostile_files(tmp: Path) -> Result:
    """Files that must be reported and skipped, never crash a search or change a byte."""
    from mdmem import Workspace

    root = _workspace(tmp)
    notes = root / "notes"
    notes.mkdir()
    outside = tmp / "secret.md"
    outside.write_text("- outside the workspace\n")
    made: dict[str, Callable[[], None]] = {
        "fifo.md": lambda: os.mkfifo(notes / "fifo.md"),
        "loop.md": lambda: (notes / "loop.md").symlink_to("loop.md"),
        "out.md": lambda: (notes / "out.md").symlink_to(outside),
        "binary.md": lambda: (notes / "binary.md").write_bytes(b"\x00\x01\x02ELF"),
        "latin1.md": lambda: (notes / "latin1.md").write_bytes(b"- caf\xe9\n"),
        "yaml.md": lambda: (notes / "yaml.md").write_text("---\ntitle: [oops\n---\n- body\n"),
        "huge.md": lambda: (notes / "huge.md").write_bytes(b"- x\n" * 3_000_000),
        "deep.md": lambda: (notes / "deep.md").write_text(
            "".join("  " * d + "- level\n" for d in range(3000))
        ),
        "cr.md": lambda: (notes / "cr.md").write_bytes(b"## Facts\r- lone CR line\r"),
    }
    for make in made.values():
        make()
    before = {
        p.name: p.read_bytes()
        for p in notes.iterdir()
        if p.is_file() and not p.is_symlink() and p.name != "fifo.md"
    }
    unclear = lost = 0
    with Workspace(root) as ws:
        ws.remember("The zebra crossing is on Elm St", type="fact")
        try:
            report = ws.index.update(embed=False)
            results = ws.search("zebra crossing", mode="keyword")
            lost += not results
            lost += not ws.search("lone CR line", mode="keyword")
            problems = [*map(str, report.problems), *results.problems, *ws.index.status().problems]
            named = {p.split(":", 1)[0] for p in problems}
            for name in ("fifo.md", "loop.md", "out.md", "binary.md", "latin1.md", "yaml.md"):
                unclear += not any(n.endswith(name) for n in named)
            ws.build_context("zebra", budget_tokens=500)
        except Exception:
            unclear += 1
    after = {name: (notes / name).read_bytes() for name in before}
    return Result(
        "hostile files: FIFO, symlink loop, symlink out, binary, non-UTF-8, bad YAML, 12 MB, "
        "3,000-deep list, lone CR",
        len(made),
        lost=lost,
        corrupted=sum(after[k] != before[k] for k in before),
        unclear=unclear,
    )


# ---- the index --------------------------------------------------------------------------------


def damaged_index(tmp: Path, rounds: int = 2) -> Result:
    """The index truncated, garbled, deleted or made a folder under a live watcher."""
    from mdmem import Workspace
    from mdmem.errors import MdmemError

    root = _workspace(tmp)
    shutil.copytree(
        REPO / "example_workspace",
        root,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(".mdmem"),
    )  # the example, not an index a demo left in it
    (root / "mdmem.toml").write_text(KEYWORD_ONLY)
    db = root / ".mdmem" / "index.db"
    lost = unclear = tried = 0
    queries = ["which port does the test database use", "invoice status enum", "PDF export"]
    with Workspace(root) as reference:
        reference.index.update(embed=False)
        expected = [[h.citation for h in reference.search(q, mode="keyword")] for q in queries]
    damage = {
        "truncated": lambda: db.write_bytes(b""),
        "garbled": lambda: db.write_bytes(b"\x00garbage" * 4096),
        "deleted": lambda: [
            Path(str(db) + s).unlink(missing_ok=True) for s in ("", "-wal", "-shm")
        ],
    }
    with Workspace(root) as ws, ws.watch():
        for _ in range(rounds):
            for hurt in damage.values():
                tried += 1
                hurt()
                try:
                    got = [[h.citation for h in ws.search(q, mode="keyword")] for q in queries]
                    lost += got != expected
                except MdmemError:
                    unclear += 1
    folder = root / "other" / ".mdmem"
    folder.mkdir(parents=True)
    (folder / "index.db").mkdir()
    shutil.copy(root / "memory.md", root / "other" / "memory.md")
    tried += 1
    try:
        Workspace(root / "other").search("x", mode="keyword")
        unclear += 1
    except MdmemError as exc:
        unclear += "\n" in str(exc) or "index.db" not in str(exc)
    return Result(
        "index.db truncated, garbled or deleted under a live watcher; a folder in its place",
        tried,
        lost=lost,
        unclear=unclear,
    )


# ---- sessions and secrets --------------------------------------------------------------------

CRASHER = textwrap.dedent(
    """
    import sys, time
    from mdmem import Workspace
    ws = Workspace(sys.argv[1])
    s = ws.session("doomed")
    s.event("execute", "started")
    print(s.path, flush=True)
    time.sleep(60)
    """
)


def killed_sessions(tmp: Path, n: int = 5) -> Result:
    from mdmem import Workspace

    root = _workspace(tmp)
    paths = []
    for _ in range(n):
        proc = subprocess.Popen(
            [sys.executable, "-c", CRASHER, str(root)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        paths.append(proc.stdout.readline().strip())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with Workspace(root) as ws:
        ws.index.status()
        records = {r.path: r for r in ws.sessions.list()}
    unclear = sum(records[p].status != "interrupted" for p in paths)
    lost = sum(not records[p].events for p in paths)
    return Result("a session's process killed mid-run", n, lost=lost, unclear=unclear)


def secrets(tmp: Path) -> Result:
    """Every fake secret of the corpora through remember and a session event: none in the
    files, the index (db and WAL bytes), search results or the context."""
    from mdmem import Workspace

    corpus = [
        json.loads(line)
        for line in (REPO / "tests/data/secrets/secrets.jsonl").read_text().splitlines()
    ]
    root = _workspace(tmp)
    leaked = 0
    with Workspace(root) as ws:
        with ws.session("leaky tools") as s:
            for n, item in enumerate(corpus):
                if n % 2:
                    ws.remember(item["text"], type="fact")
                else:
                    s.event("tool_result", item["text"])
        ws.index.update(embed=False)
        found = " ".join(h.text for h in ws.search("key token password secret", k=50))
        context = ws.build_context("api key", budget_tokens=4000).text
        state = b"".join(p.read_bytes() for p in (root / ".mdmem").glob("index.db*"))
        files = b"".join(
            p.read_bytes() for p in root.rglob("*.md") if ".mdmem" not in p.parts and p.is_file()
        )
        for item in corpus:
            for secret in item["secrets"]:
                raw = secret.encode()
                leaked += raw in files or raw in state or secret in found or secret in context
    return Result(
        "fake secrets (20 kinds) written through remember and session events",
        len(corpus),
        lost=0,
        corrupted=0,
        unclear=leaked,
        note=f"{leaked} leaked into a file, the index, a result or the context",
    )


FAULTS: dict[str, Callable[[Path], Result | list[Result]]] = {
    "concurrent_writers": concurrent_writers,
    "sigkill_mid_write": sigkill_mid_write,
    "late_saves": late_saves,
    "disk_full": disk_full,
    "read_only_search": read_only_search,
    "path_traversal": path_traversal,
    "hostile_queries": hostile_queries,
    "hostile_files": hostile_files,
    "damaged_index": damaged_index,
    "killed_sessions": killed_sessions,
    "secrets": secrets,
}


def run(names: list[str], with_races: bool) -> list[Result]:
    results: list[Result] = []
    jobs: dict[str, Callable[[Path], Result | list[Result]]] = dict(FAULTS)
    if with_races:
        jobs["editor_races"] = editor_races
    for name in names or jobs:
        with tempfile.TemporaryDirectory(prefix=f"fault-{name}-") as tmp:
            started = time.perf_counter()
            out = jobs[name](Path(tmp))
            took = round(time.perf_counter() - started, 1)
            results += [replace(r, seconds=took) for r in (out if isinstance(out, list) else [out])]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("faults", nargs="*", help=f"some of: {', '.join(FAULTS)}, editor_races")
    parser.add_argument("--no-races", action="store_true", help="skip the editor races (~2 min)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run(args.faults, not args.no_races)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
        return
    print("| fault | tried | lost | corrupted | unclear errors | | s |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r.fault} | {r.tried:,} | {r.lost} | {r.corrupted} | {r.unclear} | {r.note} "
            f"| {r.seconds} |"
        )


if __name__ == "__main__":
    main()
