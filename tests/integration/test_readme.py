"""The docs run: every ``python`` and ``console`` block of the README, then of each page of the
docs site in the order of its navigation (mkdocs.yml; the generated references aside), in a
temp folder holding a copy of example_workspace/ named ``my-agent`` (what the blocks call the
workspace), so no page can drift from the code. ``make demo`` runs too."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(python|console)\n(.*?)^```", re.M | re.S)
SKIP = re.compile(r"<!-- not run by tests/integration/test_readme\.py: (.+?) -->\s*$")
"""Put right above a block that cannot run offline (it needs a model provider, or a user's own
framework objects), with the reason; the test lists them so none hides."""
LONG_RUNNING = {"mdmem watch"}
"""Commands that run until stopped: started, given a moment, stopped with Ctrl-C (exit 0)."""

pytestmark = pytest.mark.slow


def pages() -> list[Path]:
    """The README, then the site's pages in the order its navigation lists them."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def walk(items: list[object]) -> list[str]:
        found: list[str] = []
        for item in items:
            for value in item.values() if isinstance(item, dict) else [item]:
                found.extend(walk(value) if isinstance(value, list) else [str(value)])
        return found

    listed = [p for p in walk(nav) if not p.startswith("reference/") and p != "index.md"]
    return [ROOT / "README.md", *(ROOT / "docs" / p for p in listed)]


def blocks() -> list[tuple[str, str, str]]:
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if SKIP.search(text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]):
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), match.group(2)))
    return found


def test_blocks_left_out_say_why() -> None:
    reasons = [r for page in pages() for r in SKIP.findall(page.read_text(encoding="utf-8"))]
    assert all(len(reason) > 10 for reason in reasons)
    assert len(reasons) <= 4, "most blocks must run"


def test_the_docs_have_the_blocks_this_test_runs() -> None:
    kinds = [kind for _, kind, _ in blocks()]
    assert kinds.count("python") >= 8 and kinds.count("console") >= 6
    readme = [where for where, _, _ in blocks() if where.startswith("README.md")]
    assert len(readme) >= 2  # the quick starts


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
    namespace: dict[str, object] = {"__name__": "readme"}
    cwd = folder
    for where, kind, code in blocks():
        if kind == "python":
            _run_python(code, namespace, where)
        else:
            cwd = _run_console(code, cwd, where)
    ws = namespace["ws"]
    ws.close()  # type: ignore[attr-defined]


def _run_python(code: str, namespace: dict[str, object], where: str) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code, where, "exec", flags=flags)
    try:
        result = eval(compiled, namespace)  # a block with top-level await returns a coroutine
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    except Exception as exc:
        pytest.fail(f"{where}: the python block raised {type(exc).__name__}: {exc}")


def _run_console(code: str, cwd: Path, where: str) -> Path:
    """Runs each ``$ command`` (output lines are what a person sees; not compared)."""
    for raw in code.splitlines():
        if not raw.startswith("$ "):
            continue
        command = raw[2:].split("  #")[0].strip()
        if command.startswith("cd "):
            cwd = (cwd / command[3:].strip()).resolve()
            continue
        argv = [str(Path(sys.executable).parent / "mdmem"), *_split(command)[1:]]
        assert _split(command)[0] == "mdmem", f"{where}: {command!r} is not an mdmem command"
        if command in LONG_RUNNING:
            _run_until_stopped(argv, cwd, where)
            continue
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (
            f"{where}: `{command}` exited {done.returncode}:\n{done.stderr}"
        )
    return cwd


def _run_until_stopped(argv: list[str], cwd: Path, where: str) -> None:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(4.0)
    assert proc.poll() is None, f"{where}: `mdmem watch` stopped on its own"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"{where}: Ctrl-C ended it with {proc.returncode}:\n{err!r}"


def _split(command: str) -> list[str]:
    import shlex

    return shlex.split(command)


def test_make_demo_runs() -> None:
    env = {**os.environ, "MDMEM_SERVER_AUTO": "0"}
    env.pop("MDMEM_WORKSPACE", None)
    done = subprocess.run(
        ["make", "-s", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
