"""The warm server a search starts by itself: real `mdmem` processes, a real detached server,
its real lock, socket and idle timer; and the light `mdmem search` path, option for option."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mdmem.console import FLAG_OPTIONS, REMOTE_OPTIONS, VALUE_OPTIONS, parse_search
from mdmem.index.search_params import SEARCH_OPTIONS, SEARCH_PARAMS
from mdmem.layout import running_watcher, socket_path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "example_workspace"
BIN = Path(sys.executable).parent / "mdmem"
KEYWORD_ONLY = 'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'
AUTO = {"MDMEM_SERVER_AUTO": "1"}


def mdmem(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **AUTO, **(env or {})}
    full.pop("MDMEM_WORKSPACE", None)
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=full, timeout=180, cwd="/"
    )


def alive(pid: int) -> bool:
    """Running, and not a zombie nobody has reaped yet (the server is no child of ours)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(check, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


IN_PROCESS_FIRST = "searching in-process (no torch), then starting one for the next search"


def serving(root: Path) -> int:
    """The server a first search started once it had answered (in-process): its pid, once it
    answers searches."""
    from mdmem.live.client import Status, wait_ready

    wait_until(lambda: running_watcher(root) is not None, "no server started", 60)
    assert wait_ready(root, None, Status(quiet=True)) is None
    pid = running_watcher(root)
    assert pid is not None
    return pid


def answered_by(result: subprocess.CompletedProcess[str]) -> int:
    found = re.search(r"answered by the warm server \(pid (\d+)\)", result.stderr)
    assert found, result.stderr
    return int(found.group(1))


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids of servers the test started; each still running at the end is stopped."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        wait_until(lambda pid=pid: not alive(pid), f"server {pid} never stopped", 30)


def workspace(tmp_path: Path, config: str = KEYWORD_ONLY) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(EXAMPLE, root)
    (root / "mdmem.toml").write_text(config)
    return root


# ---- the light path reads exactly the options of the typer command ---------------------------


def _typer_search():  # type: ignore[no-untyped-def]
    import typer

    from mdmem.cli import app

    return typer.main.get_command(app).commands["search"]  # type: ignore[attr-defined]


def test_the_light_path_has_exactly_the_options_of_the_typer_command() -> None:
    command = _typer_search()
    typer_flags = {
        opt
        for param in command.params
        if param.param_type_name == "option"
        for opt in [*param.opts, *param.secondary_opts]
    }
    assert typer_flags - {"--help"} == set(VALUE_OPTIONS) | set(FLAG_OPTIONS) | set(REMOTE_OPTIONS)
    # one list of search parameters: the library's, the server's and the CLI's
    from dataclasses import fields

    from mdmem.index.filters import Filters
    from mdmem.index.request import SearchRequest

    library = [
        name
        for field in fields(SearchRequest)
        if field.name != "query"
        for name in ([f.name for f in fields(Filters)] if field.name == "filters" else [field.name])
    ]
    assert sorted(library) == sorted([*SEARCH_PARAMS, "track_access"])
    flag_params = {key for key, _ in FLAG_OPTIONS.values()}
    assert set(VALUE_OPTIONS.values()) | (flag_params & set(SEARCH_PARAMS)) == set(SEARCH_PARAMS)


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "invoice numbering"],
        ["-w", "/x", "search", "q", "-k", "3", "--mode", "keyword", "--json"],
        ["--workspace=/x", "search", "--type=fact", "q", "--archived", "--explain", "-v"],
        ["search", "-t", "note", "--path", "notes/*.md", "--agent", "coder", "--", "-q-"],
        ["search", "q", "--session", "s1", "--since", "2026-01-01", "--until", "2026-12-31"],
        ["search", "q", "--archived", "--no-archived", "--no-explain", "--verbose"],
        ["search", "q", "--include-archived", "--explain"],
        ["search", "q", "--archived", "--no-include-archived"],
        ["search", "q", "--scope", "inherited,global", "--json"],
    ],
)
def test_the_light_path_reads_what_typer_reads(argv: list[str]) -> None:
    args = parse_search(argv)
    assert args is not None
    at = argv.index("search")
    ctx = _typer_search().make_context("search", argv[at + 1 :])
    theirs = dict(ctx.params)  # (typer names each parameter as the search does)
    defaults = {option.name: option.default for option in SEARCH_OPTIONS}
    ours = {**defaults, **args.params, **args.flags, "query": args.query}
    assert ours == theirs
    assert args.workspace == (None if at == 0 else "/x")


@pytest.mark.parametrize(
    "argv",
    [
        ["search"],  # no query: typer's usage error
        ["search", "a", "b"],
        ["search", "q", "-k", "0"],
        ["search", "q", "-k", "x"],
        ["search", "q", "--mode", "fuzzy"],
        ["search", "q", "--bogus"],
        ["search", "q", "-vk", "3"],
        ["search", "--help"],
        ["search", "q", "--url", "postgresql://db/m", "--index-workspace", "w"],  # a remote reader
        ["status"],
        ["-w"],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert parse_search(argv) is None


def test_a_search_through_the_server_imports_nothing_heavy(indexed, tmp_path: Path) -> None:
    code = (
        "import sys, atexit\n"
        "from mdmem.console import main\n"
        "heavy = {'typer', 'click', 'pydantic', 'torch', 'sentence_transformers', 'litellm',\n"
        "         'numpy', 'sqlite3', 'rich', 'typing', 'dataclasses'}\n"
        "atexit.register(lambda: print('loaded', sorted(heavy & set(sys.modules)),"
        " file=sys.stderr))\n"
        "sys.argv = ['mdmem', '-w', sys.argv[1], 'search', 'invoice numbering', '-v']\n"
        "main()\n"
    )
    with indexed.watch(serve=True) as watcher:
        watcher.wait_idle(timeout=60)
        result = subprocess.run(
            [sys.executable, "-c", code, str(indexed.root)], capture_output=True, text=True
        )
    assert result.returncode == 0, result.stderr
    assert answered_by(result) == os.getpid()
    assert "loaded []" in result.stderr
    assert "invoice" in result.stdout.lower()


# ---- the server a search starts ---------------------------------------------------------------


def test_first_searches_start_one_server_that_later_searches_reuse(
    tmp_path: Path, started: list[int]
) -> None:
    root = workspace(tmp_path)
    env = {**os.environ, **AUTO}
    argv = [str(BIN), "-w", str(root), "search", "invoice numbering", "-v", "--json"]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]  # two at once: the lock lets one server run
    outs = [p.communicate(timeout=180) for p in procs]
    firsts = [
        subprocess.CompletedProcess(p.args, p.returncode, *o)
        for p, o in zip(procs, outs, strict=True)
    ]
    assert [r.returncode for r in firsts] == [0, 0], [r.stderr for r in firsts]
    # keyword search needs no model: the first searches answer in-process (unless one finds
    # the server the other started), then start the server; the lock lets one run
    assert any(IN_PROCESS_FIRST in r.stderr for r in firsts), [r.stderr for r in firsts]
    pid = serving(root)
    started.append(pid)
    assert {answered_by(r) for r in firsts if IN_PROCESS_FIRST not in r.stderr} <= {pid}
    assert os.getsid(pid) != os.getsid(0)  # detached: its own session
    assert socket_path(root).stat().st_mode & 0o777 == 0o600
    again = mdmem("-w", str(root), "search", "invoice numbering", "-v", "--json")
    assert answered_by(again) == pid and "starting" not in again.stderr
    # a first search that waited longer than its bound for the other one's indexing (a loaded
    # machine) answers from the index as it is, and says which files it could not index yet
    answers = [json.loads(r.stdout) for r in firsts]
    for answer in answers:
        assert answer["fresh"] or answer["stale"], answer
    fresh = [answer["hits"] for answer in answers if answer["fresh"]]
    hits = [*fresh[:1], json.loads(again.stdout)["hits"]]
    assert json.loads(again.stdout)["fresh"]
    assert [[(h["path"], h["start_line"]) for h in found] for found in hits] == [
        [(h["path"], h["start_line"]) for h in hits[0]]
    ] * len(hits)  # (scores move: each search counts as an access)

    os.kill(pid, signal.SIGSTOP)  # frozen: it holds its lock and socket, and answers nothing
    try:
        frozen = mdmem("-w", str(root), "search", "invoice", "--json",
                       env={"MDMEM_SERVER_TIMEOUT": "1"})  # fmt: skip
    finally:
        os.kill(pid, signal.SIGCONT)
    assert frozen.returncode == 0, frozen.stderr
    assert json.loads(frozen.stdout)["hits"]  # searched in-process
    notes = [line for line in frozen.stderr.splitlines() if line.startswith("mdmem: note:")]
    assert notes == ["mdmem: note: the warm server did not answer (timed out); searched in-process"]

    # a server killed outright leaves its socket behind: the next search starts a new one
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: running_watcher(root) is None, "the lock outlived its process")
    assert socket_path(root).exists()
    third = mdmem("-w", str(root), "search", "invoice numbering", "-v")
    assert third.returncode == 0 and IN_PROCESS_FIRST in third.stderr, third.stderr
    new = serving(root)
    started.append(new)
    assert new != pid


def test_an_idle_server_exits(tmp_path: Path, started: list[int]) -> None:
    root = workspace(tmp_path, KEYWORD_ONLY + "[server]\nidle_minutes = 0.03\n")
    result = mdmem("-w", str(root), "search", "invoice", "-v")
    assert result.returncode == 0, result.stderr
    pid = serving(root)
    started.append(pid)
    wait_until(lambda: not alive(pid), "the idle server never exited", 60)
    assert running_watcher(root) is None and not socket_path(root).exists()
    assert "no search for 0.03 minutes" in (root / ".mdmem" / "server.log").read_text()


def test_server_status_and_stop(tmp_path: Path, started: list[int]) -> None:
    root = workspace(tmp_path)
    none = mdmem("-w", str(root), "server", "status", "--json")
    assert none.returncode == 3 and json.loads(none.stdout)["running"] is False
    stopped = mdmem("-w", str(root), "server", "stop")
    assert stopped.returncode == 0 and "no server runs" in stopped.stdout  # nothing to stop
    assert IN_PROCESS_FIRST in mdmem("-w", str(root), "search", "invoice", "-v").stderr
    pid = serving(root)
    started.append(pid)
    status = mdmem("-w", str(root), "server", "status", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["running"] and info["serving"] and info["pid"] == pid
    assert info["socket"] == str(socket_path(root))
    assert f"server (pid {pid})" in mdmem("-w", str(root), "server", "status").stdout
    stop = mdmem("-w", str(root), "server", "stop", "--json")
    assert stop.returncode == 0, stop.stderr
    assert json.loads(stop.stdout) | {"message": ""} == {
        "root": str(root), "was_running": True, "stopped": True, "pid": pid, "ok": True,
        "message": "",
    }  # fmt: skip
    assert not alive(pid) and running_watcher(root) is None and not socket_path(root).exists()
    assert "asked to stop (`mdmem server stop`)" in (root / ".mdmem" / "server.log").read_text()
    assert mdmem("-w", str(root), "server", "status").returncode == 3


def test_stop_never_signals_a_watcher_without_a_socket(tmp_path: Path) -> None:
    """`mdmem watch --no-serve` (or an agent's ws.watch()): no socket to ask, so no stop
    (a signal could kill the agent it runs in): exit 1 and one line saying where to stop it."""
    root = workspace(tmp_path)
    watch = subprocess.Popen([str(BIN), "-w", str(root), "watch", "--no-serve"])
    try:
        wait_until(lambda: running_watcher(root) == watch.pid, "the watcher never started")
        status = mdmem("-w", str(root), "server", "status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["serving"] is False
        stop = mdmem("-w", str(root), "server", "stop")
        assert stop.returncode == 1 and "answers on no socket" in stop.stderr
        assert watch.poll() is None
    finally:
        watch.terminate()
        watch.wait(timeout=30)


RM_RUNS = 20


@pytest.mark.slow
def test_rm_rf_of_a_workspace_whose_server_runs_succeeds(tmp_path: Path) -> None:
    """`rm -rf` while the server runs, 20 times: the deletions it hears (a file, then the
    watcher's own files in .mdmem/) make it write nothing more, so `rm` never meets a file it
    did not list ("Directory not empty"), and the server exits. Servers start together (as
    `mdmem search` starts them) to keep the run short; each workspace has a journal folder in
    .mdmem/ and 60 files, so `rm` takes a while and the server hears it at work."""
    from mdmem import Workspace
    from mdmem.live.client import Status, start_server, wait_ready

    roots = []
    for i in range(RM_RUNS):
        root = tmp_path / f"ws{i}"
        (root / "notes").mkdir(parents=True)
        (root / "mdmem.toml").write_text(KEYWORD_ONLY)
        for j in range(60):
            (root / "notes" / f"n{j}.md").write_text(f"# N{j}\n\n- fact {j} of workspace {i}\n")
        with Workspace.open(root) as ws:
            ws.remember(f"Workspace {i} deploys to Frankfurt")  # (a journal entry in .mdmem/)
        roots.append(root)
    deadline = time.monotonic() + 240
    processes = [start_server(root) for root in roots]
    try:
        for root, process in zip(roots, processes, strict=True):
            assert wait_ready(root, process, Status(quiet=True)) is None
        for root, process in zip(roots, processes, strict=True):
            removed = subprocess.run(["rm", "-rf", str(root)], capture_output=True, text=True)
            assert removed.returncode == 0, removed.stderr
            assert not root.exists()
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
            assert not root.exists()  # nor made again on its way out
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
    assert time.monotonic() < deadline


@pytest.mark.parametrize(
    ("args", "env", "config"),
    [
        (["--no-server"], {}, ""),
        ([], {"MDMEM_SERVER_AUTO": "0"}, ""),
        ([], {"MDMEM_SERVER_AUTO": "1"}, "[server]\nauto = false\n"),
    ],
)
def test_opting_out_starts_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    config: str,
) -> None:
    """`mdmem search` run in this process (the console entry point itself)."""
    from mdmem.console import main

    root = workspace(tmp_path, KEYWORD_ONLY + config)
    for name, value in {**AUTO, **env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(
        sys, "argv", ["mdmem", "-w", str(root), "search", "invoice", "--json", *args]
    )
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == 0
    assert json.loads(capsys.readouterr().out)["hits"]
    assert running_watcher(root) is None and not socket_path(root).exists()


@pytest.mark.slow
def test_the_first_search_shows_the_model_loading(indexed, started: list[int]) -> None:
    """The real model, on torch ($MDMEM_ONNX=0: no ONNX export to answer in-process without
    it): the first search says what it waits for, then answers like the rest. (The index is
    built already: the server's start-up scan has nothing to embed.)"""
    root = indexed.root
    first = mdmem(
        "-w", str(root), "search", "which port does the test database use", "-v",
        env={"MDMEM_ONNX": "0"},
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    pid = answered_by(first)
    started.append(pid)
    assert f"the search server (pid {pid}) is loading the model" in first.stderr
    assert "world_state.md" in first.stdout
