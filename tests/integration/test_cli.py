"""The CLI as a user runs it: real files, exit codes, --json. In this process through typer's
CliRunner (`tests/in_process.py`); the round trip below also as a real `mdmem` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from in_process import mdmem as run

BIN = Path(sys.executable).parent / "mdmem"


def real(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    """The console script itself, in a process of its own."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("MDMEM_WORKSPACE", None) if env is None else None
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=60
    )


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['mdmem', '--help']\n"
        "from mdmem.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'torch', 'sentence_transformers', 'litellm', 'numpy', 'markdown_it', 'yaml'}\n"
        "print(sorted(heavy & set(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "Usage: mdmem" in result.stdout
    assert result.stderr.strip() == "[]"


@pytest.mark.parametrize("run", [run, real], ids=["in-process", "real-process"])
def test_init_remember_entries_round_trip(tmp_path: Path, run) -> None:
    ws = tmp_path / "agent"
    result = run("init", str(ws), "--mode", "full", "--agent", "coder")
    assert result.returncode == 0, result.stderr
    assert "created  memory.md" in result.stdout
    assert "kept" in run("init", str(ws)).stdout  # twice is safe

    added = run("-w", str(ws), "remember", "User prefers dark mode", "--type", "preference",
                "--importance", "0.8", "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    entry = json.loads(added.stdout)
    assert entry["type"] == "preference" and entry["importance"] == 0.8
    assert entry["path"] == "memory.md" and entry["id"].startswith("m-")

    # A person edits the file by hand; `show` sees both.
    memory = ws / "memory.md"
    memory.write_text(memory.read_text() + "- Hand-written: the CI runs on GitHub Actions\n")
    shown = run("entries", "--json", cwd=ws)  # discovered from the current folder
    assert shown.returncode == 0, shown.stderr
    texts = {e["text"] for e in json.loads(shown.stdout)["entries"]}
    assert {"User prefers dark mode", "Hand-written: the CI runs on GitHub Actions"} <= texts
    human = run("entries", "memory.md", cwd=ws)
    assert "User prefers dark mode" in human.stdout and "preference" in human.stdout


def test_add_to_a_named_file_and_skill_routing(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    run("init", str(ws))
    out = run("-w", str(ws), "remember", "Use uv for installs", "-t", "skill")
    assert out.returncode == 0 and out.stdout.startswith("learnings.md:")
    out = run("-w", str(ws), "remember", "Meeting moved to Friday", "--file", "notes/team.md")
    assert out.returncode == 0, out.stderr
    assert "Meeting moved to Friday" in (ws / "notes" / "team.md").read_text()


def test_exit_codes_and_clear_errors(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    out = run("entries", cwd=bare)
    assert out.returncode == 1 and "no mdmem workspace" in out.stderr
    assert "Traceback" not in out.stderr
    ws = tmp_path / "w"
    run("init", str(ws))
    out = run("-w", str(ws), "remember", "x", "--type", "opinion")
    assert out.returncode == 2 and "--type must be one of" in out.stderr
    out = run("-w", str(ws), "remember", "x", "--file", "../escape.md")
    assert out.returncode == 1 and "inside the workspace" in out.stderr
    out = run("-w", str(ws), "entries", "--nope")
    assert out.returncode == 2


def test_bad_files_warn_and_the_rest_still_shows(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    run("init", str(ws))
    (ws / "broken.md").write_bytes(b"# ok\n- fine\n- \xff\xfe bad\n")
    (ws / "memory.md").write_text("## Facts\n- still works\n")
    out = run("-w", str(ws), "show")
    assert out.returncode == 0
    assert "still works" in out.stdout
    assert "broken.md:3: not valid UTF-8" in out.stderr
    single = run("-w", str(ws), "entries", "broken.md")
    assert single.returncode == 1 and "broken.md:3" in single.stderr
    data = json.loads(run("-w", str(ws), "entries", "--json").stdout)
    assert data["problems"][0]["path"] == "broken.md" and data["problems"][0]["line"] == 3


def test_workspace_from_environment(tmp_path: Path) -> None:
    ws = tmp_path / "envws"
    run("init", str(ws))
    out = run("remember", "From the env var", env={"MDMEM_WORKSPACE": str(ws)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "From the env var" in (ws / "memory.md").read_text()


def test_search_sees_a_hand_edit_at_once(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    run("init", str(ws))
    (ws / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')  # keyword only: fast
    (ws / "memory.md").write_text("## Facts\n- The deploy target is Heroku\n")
    first = json.loads(run("-w", str(ws), "search", "deploy target", "--json").stdout)
    assert first["hits"][0]["text"] == "The deploy target is Heroku"
    (ws / "memory.md").write_text("## Facts\n- The deploy target is Fly.io\n")
    out = run("-w", str(ws), "search", "deploy target", "--json")
    hits = json.loads(out.stdout)["hits"]
    assert [h["text"] for h in hits] == ["The deploy target is Fly.io"]
    assert hits[0]["path"] == "memory.md" and hits[0]["start_line"] == 2
    human = run("-w", str(ws), "search", "deploy", "--explain")
    assert "memory.md:2" in human.stdout and "keyword(bm25)=" in human.stdout
    status = json.loads(run("-w", str(ws), "status", "--json").stdout)
    assert status["files"] >= 1 and status["stale"] == [] and status["watcher"] is None
    bad = run("-w", str(ws), "search", "x", "--mode", "fuzzy")
    assert bad.returncode == 2


def test_sessions_task_world_mode_commands(tmp_path: Path) -> None:
    import shutil

    ws = tmp_path / "ex"
    shutil.copytree(Path(__file__).parents[2] / "example_workspace", ws)
    w = ("-w", str(ws))
    out = run(*w, "sessions", "--agent", "coder", "--json")
    assert out.returncode == 0, out.stderr
    assert [s["agent"] for s in json.loads(out.stdout)] == ["coder"] * 3
    out = run(*w, "sessions", "record", "enum-ci")
    assert "[error] psycopg.errors.UndefinedObject" in out.stdout
    assert run(*w, "sessions", "record", "nope").returncode == 1
    assert run(*w, "sessions", "--since", "yesterday").returncode == 2

    out = run(*w, "task")
    assert "-> [ ] 4. tests/test_numbering_concurrency.py" in out.stdout
    out = run(*w, "task", "complete", "4")
    assert out.returncode == 0 and "now: 5." in out.stdout
    out = run(*w, "task", "complete", "99")
    assert out.returncode == 1 and "no TODO item 99" in out.stderr  # a data error, not usage
    assert json.loads(run(*w, "task", "add", "x", "--json").stdout)["text"] == "x"
    assert run(*w, "task", "add", "Write the changelog").stdout.startswith("added 8.")
    done = json.loads(run(*w, "task", "complete", "7", "--json").stdout)
    assert done["item"]["done"] is True and done["current"]["n"] == 5
    assert run(*w, "task", "phase", "verify").stdout.strip() == "verify"
    state = json.loads(run(*w, "task", "list", "--json").stdout)
    assert (state["pointer"], state["phase"]) == (5, "verify")
    assert json.loads(run(*w, "task", "phase", "--json").stdout) == {"phase": "verify"}

    assert "5433" in run(*w, "world", "get", "db").stdout
    out = run(*w, "world", "set", "db", "PostgreSQL 16.4 on 6543")
    assert out.returncode == 0 and out.stdout.startswith("world_state.md:")
    assert run(*w, "world", "get", "db").stdout.strip() == "PostgreSQL 16.4 on 6543"
    assert run(*w, "world", "get", "no such key").returncode == 1
    removed = run(*w, "world", "remove", "heroku", "--json")
    assert json.loads(removed.stdout) == {"archived": "heroku"}

    assert run(*w, "mode").stdout.strip() == "full"
    out = run(*w, "mode", "minimal", "--json")
    assert json.loads(out.stdout) == {"mode": "minimal", "previous": "full", "created": []}
    out = run(*w, "task", "add", "x")
    assert out.returncode == 1 and "full mode only" in out.stderr
    assert run(*w, "mode", "maximal").returncode == 2
    data = json.loads(run(*w, "context", "--budget-tokens", "300", "--json").stdout)
    assert data["tokens"] <= 300 and [s["name"] for s in data["sources"]] == [
        "knowledge",
        "compact",
    ]


def test_the_old_command_names_still_work(tmp_path: Path) -> None:
    """`mdmem add` and `mdmem show` (before the one vocabulary: `remember`, `entries`) are in
    scripts and agents' instructions: they run the same commands, unlisted in --help."""
    ws = tmp_path / "w"
    run("init", str(ws))
    added = run("-w", str(ws), "add", "Old scripts still remember", "--json")
    assert added.returncode == 0, added.stderr
    shown = json.loads(run("-w", str(ws), "show", "--json").stdout)
    assert json.loads(added.stdout)["id"] in {e["id"] for e in shown["entries"]}
    listed = run("--help").stdout
    assert " remember " in listed and " entries " in listed
    assert " add " not in listed and " show " not in listed
