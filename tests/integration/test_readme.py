"""The docs run: every ``python`` and ``console`` block of the README and of each page of the
docs site, in the order of its navigation (mkdocs.yml; the generated references aside), and
what they show printed is what the program printed, so no page can drift from the code.

The first pages a newcomer follows (the README, which is also the site's start page, and
Getting started) each run in an empty folder, as a newcomer's is. The guide pages run after
them in one folder holding a copy of example_workspace/ named ``my-agent``, the workspace their
blocks call ``ws`` (opened before the first one), their commands run inside it.

**Shown output is compared.** In a ``console`` block, the lines under a ``$ command`` are what
it prints (stdout, then stderr); in a ``python`` block followed by an ``output`` block, that
block is what the code printed. A shown ``…`` stands for any text within its line (an id, a
path, a score's later digits: what differs between machines or runs); a line that is ``…``
alone stands for any number of lines. A command shown with no output is not compared. Commands
are ``mdmem`` and the few tools a page uses to show a person's side (``TOOLS``). ``make demo``
runs too.

**One process, one model.** The blocks run in the test's process: a python block as it is; an
``mdmem`` command through the console script's entry point (``mdmem.console.main``, what
``python -m mdmem`` runs) with typer's runner capturing what it prints, then what the command's
process would wait for at its exit (its threads, the late-save windows); ``mdmem watch``, which
runs until stopped, as a real process. Every workspace they open (the blocks' own, each
command's) uses the suite's loaded model (``embedder`` in tests/conftest.py) when its
configuration names that model, as ``Workspace(root, embedder=...)`` lets a library user share
one. A console start-up, an import of the model's libraries and a model load per command was
most of this test's time."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

import pytest
import yaml
from typer.testing import CliRunner

if TYPE_CHECKING:
    from mdmem.config import Config
    from mdmem.index.embed import Embedder

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(python|console|output)\n(.*?)^```", re.M | re.S)
SKIP = re.compile(r"<!-- not run by tests/integration/test_readme\.py: (.+?) -->\s*$")
"""Put right above a block that cannot run offline (it needs a model provider, or a user's own
framework objects), with the reason; the test lists them so none hides."""
LONG_RUNNING = {"mdmem watch"}
"""Commands that run until stopped: started, given a moment, stopped with Ctrl-C (exit 0)."""
TOOLS = {"git", "sed", "cat"}
"""Commands other than mdmem a page may show: a person's side (a hand edit, a git repository)."""
ANY = "…"
"""In shown output: any text within the line; alone on a line, any number of lines."""
FIRST_PAGES = ("README.md", "docs/getting-started.md")
"""A newcomer's first five minutes: each page runs alone, in an empty folder."""

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Block:
    where: str  # page:line of the block's fence
    kind: str  # python or console
    code: str
    output: str | None = None  # a python block's ``output`` block, right below it


def pages() -> list[Path]:
    """The README, then the site's pages in the order its navigation lists them (the start
    page is generated from the README)."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def walk(items: list[object]) -> list[str]:
        found: list[str] = []
        for item in items:
            for value in item.values() if isinstance(item, dict) else [item]:
                found.extend(walk(value) if isinstance(value, list) else [str(value)])
        return found

    listed = [p for p in walk(nav) if not p.startswith("reference/") and p != "index.md"]
    return [ROOT / "README.md", *(ROOT / "docs" / p for p in listed)]


def blocks(only: list[Path] | None = None) -> list[Block]:
    found: list[Block] = []
    for page in only or pages():
        text = page.read_text(encoding="utf-8")
        last_end = -1
        for match in FENCE.finditer(text):
            kind, code = match.group(1), match.group(2)
            line = text.count("\n", 0, match.start()) + 1
            where = f"{page.relative_to(ROOT)}:{line}"
            if kind == "output":
                follows = text[last_end : match.start()].strip() == ""
                assert follows and found and found[-1].kind == "python", (
                    f"{where}: an output block goes right below the python block it shows"
                )
                found[-1] = Block(found[-1].where, "python", found[-1].code, code)
                continue
            last_end = match.end()
            if SKIP.search(text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]):
                last_end = -1
                continue
            found.append(Block(where, kind, code))
    return found


def guide_pages() -> list[Path]:
    return [p for p in pages() if str(p.relative_to(ROOT)) not in FIRST_PAGES]


def test_blocks_left_out_say_why() -> None:
    reasons = [r for page in pages() for r in SKIP.findall(page.read_text(encoding="utf-8"))]
    assert all(len(reason) > 10 for reason in reasons)
    assert len(reasons) <= 4, "most blocks must run"


def test_the_docs_have_the_blocks_this_test_runs() -> None:
    kinds = [block.kind for block in blocks()]
    assert kinds.count("python") >= 8 and kinds.count("console") >= 6
    for page in FIRST_PAGES:
        shown = [b for b in blocks([ROOT / page]) if b.output or _shown(b)]
        assert len(shown) >= 2, f"{page}: the quick starts show what they print"


INSTALL = re.compile(r"^```bash\n(git clone .*?)^```", re.M | re.S)


@pytest.mark.parametrize("page", FIRST_PAGES)
def test_the_install_leaves_the_newcomer_outside_the_clone(page: str) -> None:
    """The install (not run here: it needs the network) ends where it began, outside mdmem's
    clone: the quick start that follows runs ``mdmem init`` in the folder it is in, and inside
    the clone's git repository init prints another line (it sets up the clone's .git/config)."""
    found = INSTALL.search((ROOT / page).read_text(encoding="utf-8"))
    assert found, f"{page}: no install block (```bash, from `git clone`)"
    depth = 0
    for folder in re.findall(r"(?:^|&&)\s*cd\s+([^\s#]+)", found.group(1), re.M):
        depth += sum(-1 if part == ".." else 1 for part in folder.split("/") if part != ".")
    assert depth == 0, f"{page}: the install ends inside the clone (`cd` {depth} folder(s) down)"


def _shown(block: Block) -> bool:
    return block.kind == "console" and any(
        line and not line.startswith("$ ") for line in block.code.splitlines()
    )


def test_shown_output_is_matched_line_by_line() -> None:
    """The comparison itself: a changed line number fails, ``…`` spans only what it says."""
    printed = "memory.md:10  [fact] Deploys go to Fly.io staging  (m-0ea070ee41)\n"
    assert _matches("memory.md:10  [fact] Deploys go to Fly.io staging  (m-…)", printed)
    assert not _matches("memory.md:12  [fact] Deploys go to Fly.io staging  (m-…)", printed)
    assert not _matches("memory.md:1…", "memory.md:10\nmemory.md:11\n")
    assert _matches("memory.md:1…\n…", "memory.md:10\nmemory.md:11\n")
    assert _matches("a\n…\nd", "a\nb\nc\nd\n") and _matches("a\n…\nb", "a\nb\n")
    assert not _matches("a\n…\nd", "a\nb\nc\n")
    assert not _matches("a", "a\nb\n")  # every line printed is shown, or covered by a lone …


def test_logs_and_warnings_print_as_in_a_process_of_their_own() -> None:
    """What a command prints through logging and warnings is what it would print alone (so the
    comparison of its stderr is as strict in this process), whatever the handlers an earlier
    command or pytest left behind."""
    code = (
        "import logging, warnings\n"
        "logging.getLogger('mdmem.index').info('an info line')\n"
        "logging.getLogger('mdmem.index').warning('a warning line')\n"
        "warnings.warn('a user warning', UserWarning)\n"
        "warnings.warn('a deprecation', DeprecationWarning)\n"
    )
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    ours = logging.getLogger("mdmem")
    left = logging.StreamHandler(sys.stderr)  # as an earlier command (or a test) leaves it
    ours.addHandler(left)
    ours.setLevel(logging.INFO)
    try:
        with CliRunner().isolation() as (_out, err, _mixed), _as_a_new_process():
            exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
            sys.stderr.flush()
            here = err.getvalue().decode()
    finally:
        ours.removeHandler(left)
        ours.setLevel(logging.NOTSET)
    assert "a warning line" in here and "UserWarning: a user warning" in here
    assert here == alone.stderr


def _pattern(shown: str) -> re.Pattern[str]:
    parts = []
    for line in _lines(shown):
        if line.strip() == ANY:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(r"[^\n]*".join(re.escape(p) for p in line.split(ANY)) + r"\n")
    return re.compile("".join(parts))


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _matches(shown: str, printed: str) -> bool:
    body = "".join(line + "\n" for line in _lines(printed))
    return _pattern(shown).fullmatch(body) is not None


def _compare(shown: str, printed: str, where: str, what: str) -> None:
    assert _matches(shown, printed), (
        f"{where}: {what} printed what the page does not show "
        f"(`{ANY}` stands for any text, alone on a line for any lines).\n"
        f"--- shown:\n{shown.rstrip()}\n--- printed:\n{printed.rstrip()}"
    )


def _env() -> dict[str, str]:
    env = {**os.environ, "MDMEM_SERVER_AUTO": "0"}
    env.pop("MDMEM_WORKSPACE", None)
    return env


@pytest.fixture()
def one_model(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every workspace opened in this process while a page runs gets the suite's loaded model
    when its configuration names that model (any other configuration, its own)."""
    from mdmem.config import EmbeddingConfig
    from mdmem.workspace import wiring

    configured = wiring.make_embedder

    def loaded(config: Config) -> Embedder:
        return embedder if config.embedding == EmbeddingConfig() else configured(config)

    monkeypatch.setattr(wiring, "make_embedder", loaded)
    monkeypatch.setenv("MDMEM_SERVER_AUTO", "0")  # no server left behind (its output is the same)
    monkeypatch.delenv("MDMEM_WORKSPACE", raising=False)
    yield


@pytest.mark.parametrize("page", FIRST_PAGES)
def test_a_newcomer_gets_what_the_first_pages_show(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_model: None
) -> None:
    """Run in order in an empty folder, as a newcomer would: python blocks in the folder the
    console blocks' ``cd`` reached (one terminal), every shown output compared. With the warm
    server a newcomer has: the first ``mdmem search`` starts it, and it runs (ready, watching
    the workspace) before the next command, as it does for a person typing; the blocks after
    it must work beside it (a second watcher is refused). Stopped at the end."""
    monkeypatch.delenv("MDMEM_SERVER_AUTO")  # (conftest turns it off for every other test)
    namespace: dict[str, object] = {"__name__": "readme"}
    cwd = tmp_path
    servers: set[Path] = set()
    try:
        for block in blocks([ROOT / page]):
            if block.kind == "python":
                monkeypatch.chdir(cwd)
                _run_python(block, namespace)
            else:
                cwd = _run_console(block, cwd, servers)
    finally:
        _close(namespace)
        for root in servers:
            code, out, err = _mdmem_here(["server", "stop"], root)
            assert code == 0, out + err


@pytest.fixture()
def folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indexed_template: Path, one_model: None
) -> Path:
    """A copy of example_workspace/ as ``my-agent``: the suite's indexed copy of it (its index is
    derived from the same files and fresh: nothing embedded again)."""
    shutil.copytree(indexed_template, tmp_path / "my-agent")
    transcript = [
        {"role": "user", "content": "CI fails: database invoice_test does not exist"},
        {"role": "assistant", "content": "Fixed: docker/initdb/01-create-test-db.sql creates it"},
    ]
    lines = "".join(json.dumps(m) + "\n" for m in transcript)
    (tmp_path / "my-agent" / "transcript.jsonl").write_text(lines)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_python_and_console_block_runs(folder: Path) -> None:
    from mdmem import Workspace

    namespace: dict[str, object] = {"__name__": "readme", "ws": Workspace.open("my-agent")}
    cwd = folder / "my-agent"
    try:
        for block in blocks(guide_pages()):
            if block.kind == "python":
                _run_python(block, namespace)
            else:
                cwd = _run_console(block, cwd)
    finally:
        _close(namespace)


def _close(namespace: dict[str, object]) -> None:
    from mdmem import Workspace

    for value in namespace.values():
        if isinstance(value, Workspace):
            value.close()


def _run_python(block: Block, namespace: dict[str, object]) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(block.code, block.where, "exec", flags=flags)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            result = eval(compiled, namespace)  # a block with top-level await returns a coroutine
            if asyncio.iscoroutine(result):
                asyncio.run(result)
    except Exception as exc:
        pytest.fail(f"{block.where}: the python block raised {type(exc).__name__}: {exc}")
    if block.output is not None:
        _compare(block.output, printed.getvalue(), block.where, "the python block")


def _commands(code: str) -> list[tuple[str, str]]:
    """Each ``$ command`` with the lines shown under it."""
    found: list[tuple[str, list[str]]] = []
    for raw in code.splitlines():
        if raw.startswith("$ "):
            found.append((raw[2:].split("  #")[0].strip(), []))
        elif found:
            found[-1][1].append(raw)
    return [(command, "\n".join(shown)) for command, shown in found]


def _run_console(block: Block, cwd: Path, servers: set[Path] | None = None) -> Path:
    """``servers``: where searches may start a warm server (the workspaces it ran in are
    added); None, where none starts (``MDMEM_SERVER_AUTO=0``)."""
    for command, shown in _commands(block.code):
        if command.startswith("cd "):
            cwd = (cwd / command[3:].strip()).resolve()
            continue
        words = shlex.split(command)
        if command in LONG_RUNNING:
            _run_until_stopped([sys.executable, "-m", "mdmem", *words[1:]], cwd, block.where)
            continue
        if words[0] == "mdmem":
            code, out, err = _mdmem_here(words[1:], cwd)
            err = ERASED.sub("", err)
            if servers is not None and words[1:2] == ["search"] and code == 0:
                _wait_for_the_server(cwd, block.where)
                servers.add(cwd)
        else:
            assert words[0] in TOOLS, f"{block.where}: {command!r} is not an mdmem command"
            done = subprocess.run(
                words, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env()
            )
            code, out, err = done.returncode, done.stdout, done.stderr
        assert code == 0, f"{block.where}: `{command}` exited {code}:\n{err}"
        if _lines(shown):
            _compare(shown, out + err, block.where, f"`{command}`")
    return cwd


ERASED = re.compile(
    r"^mdmem: (starting a search server for this workspace"
    r"|the search server \(pid \d+\) is (loading the model|indexing changes))…\n",
    re.M,
)
"""What a first search says while it waits for the server it started: on a terminal, one
line rewritten in place and erased once the answer comes (``live/client.py``'s ``Status``),
so a page shows none of it; printed line by line here (stderr is no terminal)."""


def _wait_for_the_server(root: Path, where: str) -> None:
    """The warm server the search in ``root`` started (or asked) runs, watches and answers."""
    from mdmem.layout import running_watcher
    from mdmem.live.client import START_TIMEOUT_S, Status, wait_ready

    deadline = time.monotonic() + START_TIMEOUT_S
    while running_watcher(root) is None:
        assert time.monotonic() < deadline, f"{where}: `mdmem search` started no server"
        time.sleep(0.05)
    problem = wait_ready(root, None, Status(quiet=True))
    assert problem is None, f"{where}: {problem}"


def _mdmem_here(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """``mdmem ARGS`` run in ``cwd`` by the console script's entry point, in this process: the
    exit code, stdout and stderr. Before its output is taken, what the command's own process
    would do at its exit: wait for the threads it started that are not daemons, and for the
    late-save windows of its writes (``late_saves``' exit hook)."""
    from mdmem.console import main
    from mdmem.writes import late_saves

    before = set(threading.enumerate())
    code = 0
    runner = CliRunner().isolation(env={"MDMEM_WORKSPACE": None})
    with runner as (out, err, _mixed), _as_a_new_process():
        argv, here = sys.argv, os.getcwd()
        sys.argv = ["mdmem", *args]
        try:
            os.chdir(cwd)
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            for thread in threading.enumerate():
                if thread not in before and not thread.daemon:
                    thread.join()
            late_saves._wait_for_windows()
            sys.argv = argv
            os.chdir(here)
            sys.stdout.flush()
            sys.stderr.flush()
        printed = out.getvalue().decode("utf-8", "replace")
        said = err.getvalue().decode("utf-8", "replace")
    return code, printed, said


FRESH_FILTERS: tuple[tuple[Literal["default", "ignore"], type[Warning], str], ...] = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)
"""Python's warning filters in a new process (no ``-W``, no ``$PYTHONWARNINGS``)."""


@contextlib.contextmanager
def _as_a_new_process() -> Iterator[None]:
    """What a command prints through logging and warnings, as in a process of its own: no
    logging handler anywhere (Python's last-resort handler prints WARNING and up on stderr; a
    command that sets up the ``mdmem`` logger does it for itself), Python's default warning
    filters, warnings printed on stderr. pytest's capture of both is put back after."""
    root, ours = logging.getLogger(), logging.getLogger("mdmem")
    saved = [(log, log.handlers[:], log.level, log.propagate) for log in (root, ours)]
    root.handlers[:], ours.handlers[:] = [], []
    root.setLevel(logging.WARNING)
    ours.setLevel(logging.NOTSET)
    ours.propagate = True

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        (file or sys.stderr).write(text)

    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(FRESH_FILTERS):
                warnings.filterwarnings(action, category=category, module=module)
            warnings.showwarning = show
            yield
    finally:
        for log, handlers, level, propagate in saved:
            log.handlers[:] = handlers
            log.setLevel(level)
            log.propagate = propagate


STARTED = re.compile(r"^mdmem: watching ")
"""What a long-running command says on stderr once it runs (then it is stopped)."""
START_WAIT_S = 120.0


def _run_until_stopped(argv: list[str], cwd: Path, where: str) -> None:
    """Started, then stopped with Ctrl-C once it says it runs: exit 0."""
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()
    )
    said: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + START_WAIT_S
    while not any(STARTED.match(line) for line in said) and time.monotonic() < deadline:
        assert proc.poll() is None, f"{where}: `mdmem watch` stopped on its own:\n{''.join(said)}"
        time.sleep(0.05)
    assert proc.poll() is None, f"{where}: `mdmem watch` stopped on its own:\n{''.join(said)}"
    assert any(STARTED.match(line) for line in said), f"{where}: no `mdmem: watching` line"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    assert proc.returncode == 0, (
        f"{where}: Ctrl-C ended it with {proc.returncode}:\n{''.join(said)}"
    )


STAMP = ".venv/.installed-stamp"
"""The Makefile's install stamp: taken as made (``make -o``), so make never reinstalls the venv
the suite runs in."""


def test_make_demo_runs(indexed_template: Path) -> None:
    """`make demo`, every step of it, with the suite's venv and model: the interpreter running
    the suite (``BIN``; never reinstalled), the model's export in the suite's cache
    (``$MDMEM_CACHE_DIR``), and the demo's copy of example_workspace/ taken from the suite's
    indexed one (``DEMO_FROM``): its ``mdmem index`` embeds only the memories the demo added."""
    bin_dir = Path(sys.executable).parent
    argv = ["make", "-s", "-o", STAMP, "demo", f"BIN={bin_dir}", f"DEMO_FROM={indexed_template}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
