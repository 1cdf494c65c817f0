"""A Claude Code hook imports only what its one call needs (issue 41: hooks that cost what
Python costs). Real processes: `python -m mdmem` (the console entry point, as the `mdmem`
script runs it) on a copy of example_workspace/, Claude Code's JSON on stdin, each process
listing the modules it imported at exit ($MDMEM_DEBUG_MODULES). No timing is asserted: a
module that creeps back onto the path (the typer CLI, asyncio, the parser of every chat
format, the index, a model) fails here by name; benchmarks/cli_latency.py measures the time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "example_workspace"
LOG = ROOT / "tests" / "data" / "imports" / "claude-code" / "7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"  # fmt: skip

NEVER = {
    # the typer CLI (the hook path reads its own arguments: mdmem/console.py)
    "typer", "click", "rich", "mdmem.cli",
    # models, LLMs, MCP, the index and its stores: no hook searches
    "torch", "sentence_transformers", "onnxruntime", "numpy", "litellm", "mcp", "httpx",
    "sqlite3", "sqlite_utils", "mdmem.index.sync", "mdmem.index.search", "mdmem.index.sqlite",
    "mdmem.live.watch", "mdmem.live.client", "mdmem.sharing.git_sync",
    # a pattern library the default config never needs, the typed-dict backport
    "pathspec",
    # what distilling and the workspace's other parts pull in
    "mdmem.distill.consolidate", "mdmem.distill.workflow", "mdmem.distill.extract",
    # the reports of distilling and of a dry run's diff
    "mdmem.reports",
}  # fmt: skip
"""Modules no hook imports."""
READ_ONLY_NEVER = {
    # SessionStart writes nothing: no locks (filelock imports asyncio), no knowledge store, no
    # promotion, no renameat2 through ctypes
    "asyncio", "filelock", "mdmem.memory.knowledge_store", "ctypes",
    "mdmem.distill.promote", "mdmem.workspace.parts", "mdmem.integrations.importers",
    # the host's name is asked only when a session is started or swept
    "socket",
}  # fmt: skip
"""Modules SessionStart (which only reads) does not import either."""
IMPORT_NEVER = {
    # the Claude Code log's reader only: not the other chat formats'
    "mdmem.integrations.importers.chatgpt", "mdmem.integrations.importers.claude",
    "mdmem.integrations.importers.codex",
    # the task's, world.md's and the pools' parsers (what a session's structure check does
    # not need), and the host's name (no session started)
    "mdmem.memory.task", "mdmem.memory.world", "mdmem.memory.pool_format", "socket",
}  # fmt: skip
"""Modules PreCompact / Stop (importing a Claude Code log) do not import."""
NOTHING_NEW_NEVER = {
    # a log, session file and workspace as the last run left them: answered from its record
    # (mdmem/integrations/hook_state.py), without the import's machinery
    "mdmem.workspace", "mdmem.config", "mdmem.integrations.hooks", "mdmem.integrations.importers",
    "mdmem.markdown.parse", "markdown_it", "yaml", "dataclasses",
}  # fmt: skip
"""Modules a PreCompact / Stop that finds nothing new does not import."""


def undocumented_dataclasses(modules: set[str]) -> list[str]:
    """The dataclasses without a docstring of their own in mdmem's ``modules``: for such a
    class ``dataclasses`` writes one from ``inspect.signature`` as the class is made, ~1 ms
    each on every hook (the configuration's 16 sections alone cost a hook ~20 ms that way)."""
    import ast

    out = []
    for name in sorted(m for m in modules if m == "mdmem" or m.startswith("mdmem.")):
        base = ROOT.joinpath(*name.split("."))
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            named = {getattr(d, "id", None) or getattr(d, "attr", None) for d in decorators}
            if "dataclass" in named and ast.get_docstring(node) is None:
                out.append(f"{name}.{node.name}")
    return out


def hook(ws: Path, action: str, debug: Path, home: Path, payload: str = "") -> set[str]:
    """Run one hook as Claude Code runs it; the modules its process imported."""
    env = {
        **os.environ,
        "MDMEM_DEBUG_MODULES": str(debug),
        "CLAUDE_CONFIG_DIR": str(home),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MDMEM_SERVER_AUTO": "0",
    }
    env.pop("MDMEM_WORKSPACE", None)
    before = set(debug.iterdir())
    argv = [sys.executable, "-m", "mdmem", "-w", str(ws), "hooks", "run", "claude-code", action]
    done = subprocess.run(
        argv, input=payload, capture_output=True, text=True, env=env, cwd=ws.parent, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (written,) = set(debug.iterdir()) - before
    return set(written.read_text().splitlines()[1:])


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the example workspace, a Claude Code home with one session log, a folder
    for the module lists."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    home = tmp_path / "claude"
    (home / "projects" / "p").mkdir(parents=True)
    shutil.copy(LOG, home / "projects" / "p" / "session.jsonl")
    debug = tmp_path / "modules"
    debug.mkdir()
    return ws, home, debug


def test_session_start_imports_no_writer_no_lock_no_cli(
    workspace: tuple[Path, Path, Path],
) -> None:
    ws, home, debug = workspace
    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "s"})
    modules = hook(ws, "session-start", debug, home, payload)
    assert "mdmem.context.build" in modules  # it did build the context, on the fast path
    assert modules & (NEVER | READ_ONLY_NEVER) == set()
    assert undocumented_dataclasses(modules) == []
    # the sessions' frontmatter (all the example's files it reads have) read without PyYAML:
    # its import and its reader's first check cost ~40-60 ms (mdmem/markdown/plain_yaml.py)
    assert modules & {"yaml", "frontmatter"} == set()


def test_stop_and_precompact_import_only_the_claude_code_reader(
    workspace: tuple[Path, Path, Path],
) -> None:
    """The first run writes the session (locks, the safe writer), the second finds nothing
    new; neither loads another chat format's reader, the CLI, the index or a model. Then a
    session start with that session in the workspace still reads without writing."""
    ws, home, debug = workspace
    transcript = home / "projects" / "p" / "session.jsonl"
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    first = hook(ws, "import", debug, home, payload)
    assert "mdmem.integrations.importers.claude_code" in first
    assert "mdmem.writes.safe_writer" in first  # (it wrote the session)
    assert list((ws / ".sessions").glob("*.md"))
    again = hook(ws, "import", debug, home, payload.replace("Stop", "PreCompact"))
    for modules in (first, again):
        assert modules & (NEVER | IMPORT_NEVER) == set()
    assert again & NOTHING_NEW_NEVER == set()
    assert undocumented_dataclasses(first) == []
    start = hook(ws, "session-start", debug, home)
    assert start & (NEVER | READ_ONLY_NEVER) == set()
    assert undocumented_dataclasses(start) == []


def _record(n: int) -> str:
    kind = "user" if n % 2 else "assistant"
    content: object = f"step {n} of the fix" if n % 2 else [{"type": "text", "text": f"done {n}"}]
    return json.dumps({
        "sessionId": "7a1b2c3d-0000-4000-8000-0000000000cc", "type": kind, "uuid": f"x-{n}",
        "timestamp": f"2026-03-01T09:00:{n:02d}Z", "message": {"role": kind, "content": content},
    }) + "\n"  # fmt: skip


def test_a_stop_with_new_records_loads_neither_markdown_it_nor_yaml(
    workspace: tuple[Path, Path, Path],
) -> None:
    """A Stop that appends to a session an import wrote before takes where the turns go from
    what that import remembered (mdmem/integrations/importers/append_points.py): it parses
    no Markdown (markdown-it ~45 ms), and the session's plain frontmatter and one-line
    events need no YAML parser (~25 ms). The first append parses the file, as always."""
    ws, home, debug = workspace
    transcript = home / "projects" / "p" / "session.jsonl"
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    hook(ws, "import", debug, home, payload)  # (creates the session)
    runs = []
    for n in (1, 3):
        with transcript.open("a", encoding="utf-8") as handle:
            handle.write(_record(n) + _record(n + 1))
        runs.append(hook(ws, "import", debug, home, payload))
    texts = [p.read_text(encoding="utf-8") for p in (ws / ".sessions").glob("*.md")]
    assert any("done 4" in text for text in texts)  # (it appended)
    assert "mdmem.writes.safe_writer" in runs[1]
    assert runs[1] & ({"markdown_it", "yaml"} | NEVER | IMPORT_NEVER) == set()
    assert undocumented_dataclasses(runs[1]) == []


def test_a_session_start_replayed_imports_neither_workspace_nor_configuration(
    workspace: tuple[Path, Path, Path],
) -> None:
    """A SessionStart whose inputs are as the last one found them prints its answer
    (mdmem/integrations/hook_context.py) without the context's machinery."""
    import time

    from mdmem.integrations.hook_context import RACY_SECONDS

    ws, home, debug = workspace
    (ws / ".mdmem").mkdir()  # (a workspace used before has it)
    time.sleep(RACY_SECONDS + 0.1)  # (files changed under a second ago are not trusted)
    first = hook(ws, "session-start", debug, home)
    assert "mdmem.context.build" in first
    again = hook(ws, "session-start", debug, home)
    assert again & (NEVER | READ_ONLY_NEVER | NOTHING_NEW_NEVER | {"mdmem.context.build"}) == set()


def test_a_session_end_that_prepares_the_next_start_imports_nothing_more(
    workspace: tuple[Path, Path, Path],
) -> None:
    """SessionEnd with nothing new, its workspace's remembered SessionStart answer made stale
    by the Stop before it: it starts the process that prepares that answer
    (mdmem/integrations/hook_context.py) with what it had imported already, nothing more; the
    next SessionStart is replayed."""
    import time

    from mdmem.integrations.hook_context import RACY_SECONDS

    ws, home, debug = workspace
    (ws / ".mdmem").mkdir()
    time.sleep(RACY_SECONDS + 0.1)
    hook(ws, "session-start", debug, home)  # (an answer remembered: the budget asked for)
    transcript = home / "projects" / "p" / "session.jsonl"
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    hook(ws, "import", debug, home, payload)  # (a session written: that answer is stale)
    end = hook(ws, "import", debug, home, payload.replace("Stop", "SessionEnd"))
    assert end & (NEVER | IMPORT_NEVER | NOTHING_NEW_NEVER) == set()
    assert "mdmem.integrations.hook_context" in end
    answers = ws / ".mdmem" / "hook-context" / "answers.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _all_hold(answers):
        time.sleep(0.2)
    start = hook(ws, "session-start", debug, home)  # replayed: prepared by the SessionEnd
    assert start & (NEVER | READ_ONLY_NEVER | NOTHING_NEW_NEVER | {"mdmem.context.build"}) == set()


def _all_hold(answers: Path) -> bool:
    from mdmem.integrations.hook_context import stat_of

    entries = json.loads(answers.read_text(encoding="utf-8"))["answers"].values()
    return all(
        e["inputs"] is not None and all(stat_of(p) == seen for p, seen in e["inputs"])
        for e in entries
    )
