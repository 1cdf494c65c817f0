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
are ``mdmem`` (run as ``python -m mdmem``, the console script's entry point) and the few tools a
page uses to show a person's side (``TOOLS``). ``make demo`` runs too."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

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


@pytest.mark.parametrize("page", FIRST_PAGES)
def test_a_newcomer_gets_what_the_first_pages_show(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run in order in an empty folder, as a newcomer would: python blocks in the folder the
    console blocks' ``cd`` reached (one terminal), every shown output compared."""
    monkeypatch.setenv("MDMEM_SERVER_AUTO", "0")  # no server left behind (its output is the same)
    monkeypatch.delenv("MDMEM_WORKSPACE", raising=False)
    namespace: dict[str, object] = {"__name__": "readme"}
    cwd = tmp_path
    try:
        for block in blocks([ROOT / page]):
            if block.kind == "python":
                monkeypatch.chdir(cwd)
                _run_python(block, namespace)
            else:
                cwd = _run_console(block, cwd)
    finally:
        _close(namespace)


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(ROOT / "example_workspace", tmp_path / "my-agent")
    transcript = [
        {"role": "user", "content": "CI fails: database invoice_test does not exist"},
        {"role": "assistant", "content": "Fixed: docker/initdb/01-create-test-db.sql creates it"},
    ]
    lines = "".join(json.dumps(m) + "\n" for m in transcript)
    (tmp_path / "my-agent" / "transcript.jsonl").write_text(lines)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MDMEM_SERVER_AUTO", "0")
    monkeypatch.delenv("MDMEM_WORKSPACE", raising=False)
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


def _run_console(block: Block, cwd: Path) -> Path:
    for command, shown in _commands(block.code):
        if command.startswith("cd "):
            cwd = (cwd / command[3:].strip()).resolve()
            continue
        words = shlex.split(command)
        if words[0] == "mdmem":
            argv = [sys.executable, "-m", "mdmem", *words[1:]]
        else:
            assert words[0] in TOOLS, f"{block.where}: {command!r} is not an mdmem command"
            argv = words
        if command in LONG_RUNNING:
            _run_until_stopped(argv, cwd, block.where)
            continue
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=_env()
        )
        assert done.returncode == 0, (
            f"{block.where}: `{command}` exited {done.returncode}:\n{done.stderr}"
        )
        if _lines(shown):
            _compare(shown, done.stdout + done.stderr, block.where, f"`{command}`")
    return cwd


def _run_until_stopped(argv: list[str], cwd: Path, where: str) -> None:
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    )
    time.sleep(4.0)
    assert proc.poll() is None, f"{where}: `mdmem watch` stopped on its own"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"{where}: Ctrl-C ended it with {proc.returncode}:\n{err!r}"


def test_make_demo_runs() -> None:
    done = subprocess.run(
        ["make", "-s", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=900, env=_env()
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
