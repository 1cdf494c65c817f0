"""`mdmem search` from outside, as an agent shelling out to it sees it.

On a synthetic workspace (Markdown files of 3 entries each, indexed first with the real model):
  cold        the first `mdmem search` of the day: no server runs (each run stops the one the
              run before started, and waits until it is gone); the search answers in-process,
              its query embedded by the default model's ONNX export (no torch), and then starts
              the server in the background; median of --cold-runs
  cold, torch the same with $MDMEM_ONNX=0: no ONNX export, so the search starts the server and
              waits while it imports torch and loads the model (what every first search did
              before); median of 3
  warm        later `mdmem search` calls, answered by that server: p50 / p95 wall time
  after edit  a file rewritten in place (a new word in it), then at once `mdmem search` for
              that word: the server's watcher has not indexed it yet, so the search checks
              every file itself; every answer must hold the new word (stale answers counted)
  baseline    `python -c pass` with the same interpreter, run alternately with the warm
              calls (a loaded machine slows both alike): the ratio is what mdmem adds
  in-process  `mdmem search --no-server` (imports torch, loads the model), median of 3
  server      the automatic server's RSS
  mcp         `mdmem mcp` over stdio as a client starts it (no server running): start →
              `initialize` answered, start → `tools/list` answered, start → the first default
              (hybrid) `search` answered (sent right after `tools/list`; the table says how
              many of those answered hybrid and how many keyword-only while vectors loaded),
              then warm searches in the same process; the same start → `initialize` for the
              SDK's bare `MCPServer` with one tool (benchmarks/mcp_bare_server.py), the anchor;
              median of --mcp-runs
  hooks       each Claude Code hook as Claude Code runs it (`bash -c` with the event's JSON on
              stdin) on a copy of example_workspace/, no server: SessionStart prints the memory
              context; PreCompact and Stop import the session's log (tests/data/imports, kept
              where Claude Code keeps logs: $CLAUDE_CONFIG_DIR/projects; the first run imports
              its 12 messages, the rest find nothing new); median of --hook-runs. Then the same
              on a long session: a generated log of --session-records records (default 2,400),
              imported once (timed alone), then rounds of: two new records appended and Stop
              (imports those), SessionStart right after it (its answer built: an input
              changed), PreCompact (nothing new; it starts the detached process that prepares
              the next SessionStart's answer, waited for untimed), SessionStart again (that
              prepared answer: it only stats files). Bytecode is written and used as an
              installed package's would be ($PYTHONDONTWRITEBYTECODE is dropped for these
              runs; one round is not counted)
Each figure is also a ratio to `python -c pass` (the median of the baseline runs, which are run
alternately with the others), and MCP's start-up also to the bare SDK server's.
The load average is printed with the figures: the machine may be shared.

Usage:  .venv/bin/python benchmarks/cli_latency.py [--files 1000] [--runs 30] [--cold-runs 7]
            [--hook-runs 10] [--session-records 2400] [--mcp-runs 7] [--only mcp|hooks]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdmem import Workspace  # noqa: E402
from mdmem.integrations import hooks  # noqa: E402
from mdmem.layout import running_watcher, socket_path  # noqa: E402
from mdmem.live.client import request  # noqa: E402

WORK = ROOT / ".bench" / "cli_latency"
MDMEM = Path(sys.executable).parent / "mdmem"
WORDS = (
    "invoice customer payment refund ledger export postgres migration docker deploy review "
    "schema endpoint latency cache token budget session memory agent search index vector "
    "keyword editor backup rollback queue worker retry timeout config secret rotate staging "
    "release branch commit test fixture mock coverage lint format build image port network"
).split()
QUERIES = ("invoice payment", "which port does postgres use", "rollback a deploy", "token budget")
EXAMPLE = ROOT / "example_workspace"
TRANSCRIPT = ROOT / "tests/data/imports/claude-code/7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"


def make_workspace(root: Path, files: int, rng: random.Random) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "notes").mkdir(parents=True)
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "bench"\n')
    for i in range(files):
        entries = "\n".join(
            "- " + " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() for _ in range(3)
        )
        (root / "notes" / f"note{i:04}.md").write_text(f"# Note {i}\n\n## Facts\n{entries}\n")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return (time.perf_counter() - started) * 1000, done.stderr


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def edit_then_search(
    root: Path, search: list[str], env: dict[str, str], runs: int
) -> tuple[list[float], int]:
    """Rewrite one file in place with a new word, then search for it at once: wall times, and
    how many answers did not hold the new word."""
    note = root / "notes" / "note0000.md"
    original = note.read_text()
    times, stale = [], 0
    for i in range(runs):
        word = f"zqxedit{i}"
        with note.open("r+") as f:
            f.truncate()
            f.write(original + f"- The newest word is {word}\n")
        started = time.perf_counter()
        done = subprocess.run([*search, "--json", word], capture_output=True, text=True, env=env)
        times.append((time.perf_counter() - started) * 1000)
        hits = json.loads(done.stdout)["hits"] if done.returncode == 0 else []
        stale += not any(word in hit["text"] for hit in hits)
    note.write_text(original)
    return times, stale


def stop_server(root: Path) -> None:
    """Stop the workspace's server, if one runs, and wait until it is gone."""
    if running_watcher(root) is None:
        return
    with contextlib.suppress(OSError, ValueError):
        request(socket_path(root), {"op": "stop"}, timeout=10)
    deadline = time.monotonic() + 60
    while (pid := running_watcher(root)) is not None:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGTERM)
        time.sleep(0.05)


def cold_searches(
    root: Path, search: list[str], env: dict[str, str], runs: int, bare: list[float]
) -> tuple[list[float], str]:
    """``runs`` first searches of the day, each with no server running; a `python -c pass`
    after each (into ``bare``). The stderr of the first run too (what it said it did)."""
    times, said = [], ""
    for i in range(runs):
        stop_server(root)
        ms, stderr = timed([*search, "-v", QUERIES[i % len(QUERIES)]], env)
        times.append(ms)
        said = said or stderr
        bare.append(timed([sys.executable, "-c", "pass"], env)[0])
    stop_server(root)
    return times, said


def mdmem_program() -> str:
    """The `mdmem` script beside this interpreter when it can start (its first line names an
    interpreter that exists), else this interpreter with ``-m mdmem``: the same entry point."""
    try:
        first = MDMEM.read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        first = ""
    if first.startswith("#!") and Path(first[2:].split()[0]).exists():
        return str(MDMEM)
    return f"{sys.executable} -m mdmem"


def claude_record(i: int, session: str) -> str:
    """One line of a Claude Code log: a user message or an assistant's answer."""
    role = "user" if i % 2 == 0 else "assistant"
    words = " ".join(random.Random(i).choice(WORDS) for _ in range(40))
    content: object = words if role == "user" else [{"type": "text", "text": words}]
    return json.dumps({
        "parentUuid": f"u-{i - 1}" if i else None, "isSidechain": False, "type": role,
        "sessionId": session, "uuid": f"u-{i}", "cwd": "/home/dev/shop",
        "timestamp": f"2026-03-01T{8 + i // 3600 % 12:02}:{i // 60 % 60:02}:{i % 60:02}.000Z",
        "message": {"role": role, "content": content},
    })  # fmt: skip


def hook_runs(
    runs: int, records: int, env: dict[str, str], bare: list[float]
) -> dict[str, list[float]]:
    """Each Claude Code hook as Claude Code runs it, ``runs`` times, on a copy of the example
    workspace with no server; then on a long session (``records`` records); a `python -c
    pass` after each round (into ``bare``). One round of each is run first, not counted."""
    root = WORK / "hooks"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(EXAMPLE, root / "ws")
    logs = root / "claude" / "projects" / "bench"
    logs.mkdir(parents=True)
    transcript = logs / "session.jsonl"
    shutil.copy(TRANSCRIPT, transcript)
    env = {**env, "CLAUDE_CONFIG_DIR": str(root / "claude")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    program = mdmem_program()
    where = shlex.quote(str(root / "ws"))
    wanted = {e: f"{program} -w {where} {hooks.MARKER} {a}" for e, a in hooks.EVENTS.items()}
    payload = {"session_id": "7a1b2c3d", "transcript_path": str(transcript), "cwd": str(root)}

    def run(event: str, data: dict[str, object]) -> float:
        text = json.dumps({**data, "hook_event_name": event})
        started = time.perf_counter()
        subprocess.run(["bash", "-c", wanted[event]], input=text, capture_output=True,
                       text=True, env=env, check=True)  # fmt: skip
        return (time.perf_counter() - started) * 1000

    events = ("SessionStart", "PreCompact", "Stop")
    times: dict[str, list[float]] = {event: [] for event in events}
    for i in range(runs + 1):
        for event in events:
            ms = run(event, payload)
            if i:
                times[event].append(ms)
        timed([sys.executable, "-c", "pass"], env)
        if i:
            bare.append(timed([sys.executable, "-c", "pass"], env)[0])
    if records:
        long_log = logs / "long.jsonl"
        long_log.write_text("".join(claude_record(i, "long") + "\n" for i in range(records)))
        data = {"session_id": "long", "transcript_path": str(long_log), "cwd": str(root)}
        times[f"Stop, first import of {records:,} records"] = [run("Stop", data)]
        grown: dict[str, list[float]] = {k: [] for k in (
            "Stop, 2 new records", "SessionStart, built (right after that Stop)",
            "PreCompact, nothing new", "SessionStart, prepared by that PreCompact",
        )}  # fmt: skip
        answers = root / "ws" / ".mdmem" / "hook-context" / "answers.json"
        for i in range(runs + 1):
            with long_log.open("a") as log:
                log.write(claude_record(records + 2 * i, "long") + "\n")
                log.write(claude_record(records + 2 * i + 1, "long") + "\n")
            for key in grown:
                if key.startswith("SessionStart, prepared"):
                    wait_until_prepared(answers)  # (not timed: what the detached process does)
                ms = run(key.split(",")[0], data)
                if i:
                    grown[key].append(ms)
            if i:
                bare.append(timed([sys.executable, "-c", "pass"], env)[0])
        for key, values in grown.items():
            times[f"{key} (session of {records:,}+ records)"] = values
    return times


def wait_until_prepared(answers: Path, seconds: float = 30.0) -> None:
    """Until every answer remembered in ``answers`` (SessionStart's, in .mdmem/hook-context/)
    holds again: the PreCompact before it started a detached process that builds it (see
    mdmem/integrations/hook_context.py); at most ``seconds``."""
    from mdmem.integrations.hook_context import stat_of

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            entries = json.loads(answers.read_text(encoding="utf-8"))["answers"].values()
            if entries and all(
                e["inputs"] is not None and all(stat_of(p) == seen for p, seen in e["inputs"])
                for e in entries
            ):
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)


BARE_SERVER = ROOT / "benchmarks" / "mcp_bare_server.py"
MCP_HELLO = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "cli_latency", "version": "0"},
}


class McpWire:
    """One MCP server process over stdio, spoken to as a client does (JSON-RPC lines)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env)  # fmt: skip
        self.next_id = 0

    def ask(self, method: str, params: dict[str, object] | None = None) -> dict[str, object]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit(f"the MCP server closed stdout before answering {method}")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise SystemExit(f"{method}: {reply['error']}")
                return reply["result"]

    def send(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def since_start(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def mcp_runs(
    root: Path, env: dict[str, str], runs: int, warm_runs: int, bare: list[float]
) -> dict[str, list[float]]:
    """``runs`` starts of `mdmem mcp` (no warm server) and of the bare SDK server, alternately,
    with a `python -c pass` after each pair (into ``bare``): milliseconds per measure, and how
    the first searches answered (their ``mode`` values, as "mode:<name>" keys)."""
    out: dict[str, list[float]] = {key: [] for key in (
        "bare initialize", "bare tools/list", "initialize", "tools/list", "first search",
        "warm search")}  # fmt: skip
    argv = [str(MDMEM), "-w", str(root), "mcp"]
    for i in range(runs):
        stop_server(root)
        wire = McpWire([sys.executable, str(BARE_SERVER)], env)
        wire.ask("initialize", MCP_HELLO)
        out["bare initialize"].append(wire.since_start())
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        wire.ask("tools/list")
        out["bare tools/list"].append(wire.since_start())
        wire.close()
        wire = McpWire(argv, env)
        try:
            wire.ask("initialize", MCP_HELLO)
            out["initialize"].append(wire.since_start())
            wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            wire.ask("tools/list")
            out["tools/list"].append(wire.since_start())
            call = {"name": "search", "arguments": {"query": QUERIES[i % len(QUERIES)], "k": 5}}
            found = wire.ask("tools/call", call)
            out["first search"].append(wire.since_start())
            content = found.get("structuredContent") or {}
            mode = str(content.get("mode") if isinstance(content, dict) else None)
            out.setdefault(f"mode:{mode}", []).append(1.0)
            if i == 0:  # the warm searches: once, in the first server (vectors ready)
                time.sleep(5)
                for j in range(warm_runs):
                    asked = time.perf_counter()
                    query = QUERIES[j % len(QUERIES)]
                    wire.ask(
                        "tools/call", {"name": "search", "arguments": {"query": query, "k": 5}}
                    )
                    out["warm search"].append((time.perf_counter() - asked) * 1000)
        finally:
            wire.close()
        bare.append(timed([sys.executable, "-c", "pass"], env)[0])
    return out


def mcp_rows(table: Table, mcp: dict[str, list[float]], base: float) -> None:
    """The MCP rows: median, max and the ratios to `python -c pass` and to the bare server."""
    anchor = statistics.median(mcp["bare initialize"])
    modes = ", ".join(f"{len(v)} {k[5:]}" for k, v in mcp.items() if k.startswith("mode:"))
    labels = {
        "bare initialize": "MCP: bare SDK `MCPServer`, 1 tool: start → initialize",
        "bare tools/list": "MCP: bare SDK `MCPServer`, 1 tool: start → tools/list",
        "initialize": "MCP: `mdmem mcp` start → initialize",
        "tools/list": "MCP: `mdmem mcp` start → tools/list",
        "first search": f"MCP: `mdmem mcp` start → first default search ({modes})",
        "warm search": "MCP: `mdmem mcp` warm search (tools/call → answer)",
    }
    for key, label in labels.items():
        values = mcp[key]
        median = statistics.median(values)
        ratio = f"{median / base:.1f}"
        if key != "warm search":
            ratio += f" ({median / anchor:.2f}× bare server)"
        table.add_row(f"{label}, {len(values)} runs", f"{median:.0f}", f"{max(values):.0f} (max)",
                      ratio)  # fmt: skip


def wait_served(root: Path, search: list[str], env: dict[str, str]) -> None:
    """Until the server the last search started answers searches."""
    deadline = time.monotonic() + 120
    while "answered by the warm server" not in timed([*search, "-v", QUERIES[0]], env)[1]:
        if time.monotonic() > deadline:
            raise SystemExit("the server the first search started never answered")
        time.sleep(0.2)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cold-runs", type=int, default=7)
    parser.add_argument("--hook-runs", type=int, default=10)
    parser.add_argument("--session-records", type=int, default=2400)
    parser.add_argument("--mcp-runs", type=int, default=7)
    parser.add_argument(
        "--only",
        choices=["mcp", "hooks"],
        help="only these rows (and the `python -c pass` baseline)",
    )
    args = parser.parse_args()
    console = Console(width=130)
    if args.only == "hooks":
        hooks_table(console, args)
        return
    root = WORK / "ws"
    make_workspace(root, args.files, random.Random(15))
    started = time.perf_counter()
    with Workspace.open(root) as ws:
        report = ws.index.update()
    console.print(
        f"indexed {report.chunks_written} chunks in {time.perf_counter() - started:.0f} s "
        f"(load average {load()})"
    )
    env = {**os.environ, "MDMEM_SERVER_AUTO": "1"}
    env.pop("MDMEM_WORKSPACE", None)
    search = [str(MDMEM), "-w", str(root), "search", "-k", "5"]
    loads = [load()]
    bare: list[float] = []
    mcp = mcp_runs(root, {**env, "MDMEM_SERVER_AUTO": "0"}, args.mcp_runs, args.runs, bare)
    if args.only == "mcp":
        mcp_table(console, mcp, bare, loads)
        return
    cold, said = cold_searches(root, search, env, args.cold_runs, bare)
    cold_torch, stages = cold_searches(root, search, {**env, "MDMEM_ONNX": "0"}, 3, bare)
    hook_ms = hook_runs(
        args.hook_runs, args.session_records, {**env, "MDMEM_SERVER_AUTO": "0"}, bare
    )
    try:
        timed([*search, QUERIES[0]], env)  # starts the server the warm runs ask
        wait_served(root, search, env)
        pid = running_watcher(root)
        warm = []
        for i in range(args.runs):
            warm.append(timed([*search, QUERIES[i % len(QUERIES)]], env)[0])
            bare.append(timed([sys.executable, "-c", "pass"], env)[0])
        edited, stale = edit_then_search(root, search, env, args.runs)
        rss = rss_mb(pid) if pid else float("nan")
    finally:
        if pid := running_watcher(root):
            os.kill(pid, signal.SIGTERM)
    in_process = [timed([*search, "--no-server", QUERIES[1]], env)[0] for _ in range(3)]
    loads.append(load())
    base = statistics.median(bare)

    table = Table(
        title=f"`mdmem search` from outside: {args.files} files, {report.chunks_written} chunks"
    )
    table.add_column("measure")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    table.add_column("× python -c pass (p50 / p95)", justify="right")
    table.add_row(f"`python -c pass`, {len(bare)} runs", f"{pct(bare, 0.5):.0f}",
                  f"{pct(bare, 0.95):.0f}", "1.0 / 1.0")  # fmt: skip
    table.add_row(
        f"`mdmem search`, warm server started by the first call, {args.runs} runs",
        f"{pct(warm, 0.5):.0f}",
        f"{pct(warm, 0.95):.0f}",
        f"{pct(warm, 0.5) / pct(bare, 0.5):.1f} / {pct(warm, 0.95) / pct(bare, 0.95):.1f}",
    )
    table.add_row(
        f"`mdmem search` at once after an edit, {args.runs} runs ({stale} stale answers)",
        f"{pct(edited, 0.5):.0f}",
        f"{pct(edited, 0.95):.0f}",
        f"{pct(edited, 0.5) / pct(bare, 0.5):.1f} / {pct(edited, 0.95) / pct(bare, 0.95):.1f}",
    )
    for label, values in (
        (f"cold: no server; in-process (ONNX query), then starts it; {len(cold)} runs", cold),
        ("cold, $MDMEM_ONNX=0: starts the server, waits for torch; 3 runs", cold_torch),
        ("`mdmem search --no-server` (in-process, through typer), 3 runs", in_process),
        *((f"hook {event} (`bash -c`, payload on stdin), {len(ms)} runs", ms)
          for event, ms in hook_ms.items()),
    ):  # fmt: skip
        median = statistics.median(values)
        table.add_row(label, f"{median:.0f}", f"{max(values):.0f} (max)", f"{median / base:.1f}")
    mcp_rows(table, mcp, base)
    console.print(table)
    console.print(f"automatic server RSS: {rss:.0f} MB")
    console.print("a cold call said:\n  " + "\n  ".join(said.strip().splitlines()))
    console.print("a cold call on torch said:\n  " + "\n  ".join(stages.strip().splitlines()))
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


def mcp_table(
    console: Console, mcp: dict[str, list[float]], bare: list[float], loads: list[str]
) -> None:
    """``--only mcp``: the MCP rows and the baseline alone."""
    loads.append(load())
    base = statistics.median(bare)
    table = Table(title="`mdmem mcp` over stdio, as a client starts it")
    table.add_column("measure")
    table.add_column("p50 ms", justify="right")
    table.add_column("max ms", justify="right")
    table.add_column("× python -c pass", justify="right")
    table.add_row(f"`python -c pass`, {len(bare)} runs", f"{base:.0f}", f"{max(bare):.0f}", "1.0")
    mcp_rows(table, mcp, base)
    console.print(table)
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


def hooks_table(console: Console, args: argparse.Namespace) -> None:
    """``--only hooks``: the hook rows and the baseline alone (no index, no server)."""
    loads = [load()]
    env = {**os.environ, "MDMEM_SERVER_AUTO": "0"}
    env.pop("MDMEM_WORKSPACE", None)
    bare: list[float] = []
    hook_ms = hook_runs(args.hook_runs, args.session_records, env, bare)
    loads.append(load())
    base = statistics.median(bare)
    table = Table(title="Claude Code hooks, as Claude Code runs them (no server)")
    table.add_column("measure")
    table.add_column("p50 ms", justify="right")
    table.add_column("max ms", justify="right")
    table.add_column("× python -c pass", justify="right")
    table.add_row(f"`python -c pass`, {len(bare)} runs", f"{base:.0f}", f"{max(bare):.0f}", "1.0")
    for event, values in hook_ms.items():
        median = statistics.median(values)
        table.add_row(f"hook {event}, {len(values)} runs", f"{median:.0f}",
                      f"{max(values):.0f}", f"{median / base:.1f}")  # fmt: skip
    console.print(table)
    console.print(f"hooks run as: {mdmem_program()}")
    console.print(f"load average (1 / 5 / 15 min) before and after: {loads[0]}; {loads[1]}")


if __name__ == "__main__":
    main()
