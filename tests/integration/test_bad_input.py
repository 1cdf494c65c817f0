"""Bad input gets a clear error naming the file (and line); the rest keeps working."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem import FileProblem, InvalidNameError, UnsafePathError, Workspace
from mdmem.errors import QueryTooLongError, StateDirError
from mdmem.index.search import MAX_QUERY_CHARS


def _problems(ws: Workspace) -> dict[str, str]:
    return {p.path: str(p) for p in ws.files.all().problems}


def _paths(ws: Workspace) -> set[str]:
    return {d.path for d in ws.files.all().documents}


def test_malformed_frontmatter_names_file_and_line(ws: Workspace) -> None:
    (ws.root / "note.md").write_text("---\ntitle: x\nbad: [1, 2\n---\n- body survives\n")
    problems = _problems(ws)
    assert problems["note.md"].startswith("note.md:")
    assert "malformed YAML frontmatter" in problems["note.md"]
    line = int(problems["note.md"].split(":")[1])
    assert line in (3, 4)
    assert "body survives" in {e.text for e in ws.entries("note.md")}


def test_non_utf8_bytes_name_the_line(ws: Workspace) -> None:
    (ws.root / "latin1.md").write_bytes(b"# Notes\n- ok\n- caf\xe9 au lait\n")
    with pytest.raises(FileProblem) as info:
        ws.files.read("latin1.md")
    assert info.value.line == 3 and "latin1.md:3: not valid UTF-8" in str(info.value)
    assert "latin1.md" in _problems(ws)
    assert "memory.md" in _paths(ws)  # the rest of the workspace still reads
    with pytest.raises(FileProblem):  # and mdmem refuses to write into it
        ws.remember("x", file="latin1.md")
    assert (ws.root / "latin1.md").read_bytes() == b"# Notes\n- ok\n- caf\xe9 au lait\n"


def test_binary_file_named_md(ws: Workspace) -> None:
    (ws.root / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    assert "binary" in _problems(ws)["image.md"]
    assert "image.md" not in _paths(ws)


BYTES_READ = """
import json, sys
from mdmem import Workspace

def read_so_far() -> int:  # every byte this process got from read(2), whatever file
    with open("/proc/self/io") as io:
        return int(next(line for line in io if line.startswith("rchar:")).split()[1])

ws = Workspace.open(sys.argv[1])
before = read_so_far()
problems = {p.path: str(p) for p in ws.files.all().problems}
report = ws.index.update(embed=False)
print(json.dumps({"read": read_so_far() - before, "problems": problems, "paths": report.paths,
                  "sync_problems": [str(p) for p in report.problems]}))
"""


def test_huge_file_is_skipped_without_reading_it(ws: Workspace) -> None:
    with open(ws.root / "huge.md", "wb") as handle:
        handle.truncate(50_000_000)  # 50 MB
    message = _problems(ws)["huge.md"]
    assert "too large (50.0 MB > 10.0 MB)" in message and "max_file_mb" in message
    assert "memory.md" in _paths(ws)
    # neither the scan nor the index reads it: the whole process reads less than half its 50 MB
    # (the rest is lazy imports and the index: about 6 MB)
    run = subprocess.run(
        [sys.executable, "-c", BYTES_READ, str(ws.root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["read"] < 25_000_000, seen["read"]
    assert "too large" in seen["problems"]["huge.md"]
    assert "huge.md" not in seen["paths"] and any("huge.md" in p for p in seen["sync_problems"])


def test_symlink_out_of_the_workspace_is_neither_read_nor_written(
    ws: Workspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text("- a secret outside the workspace\n")
    os.symlink(secret, ws.root / "link.md")
    os.symlink(outside, ws.root / "linkdir")
    problems = _problems(ws)
    assert "outside the workspace" in problems["link.md"]
    assert "outside the workspace" in problems["linkdir"]
    assert all("secret" not in e.text for e in ws.entries())
    with pytest.raises(UnsafePathError):
        ws.files.read("link.md")
    with pytest.raises(UnsafePathError):
        ws.remember("leak", file="linkdir/secret.md")
    assert secret.read_text() == "- a secret outside the workspace\n"


def test_symlink_inside_the_workspace_is_fine(ws: Workspace) -> None:
    (ws.root / "notes").mkdir()
    (ws.root / "notes" / "real.md").write_text("- linked note\n")
    os.symlink(ws.root / "notes" / "real.md", ws.root / "alias.md")
    assert "linked note" in {e.text for e in ws.entries("alias.md")}


@pytest.mark.parametrize("name", ["../escape.md", "/etc/passwd.md", "a/../../b.md", "~/x.md"])
def test_paths_outside_are_refused(ws: Workspace, tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafePathError, match="inside the workspace"):
        ws.remember("x", file=name)
    with pytest.raises(UnsafePathError):
        ws.files.read(name)
    assert not (tmp_path / "escape.md").exists()


@pytest.mark.parametrize("name", ["../x", "a/b", "/abs", "", "..", "x y"])
def test_agent_and_session_names_must_be_plain(tmp_path: Path, ws: Workspace, name: str) -> None:
    with pytest.raises(InvalidNameError):
        Workspace.init(tmp_path / "n", agent=name)
    with pytest.raises(InvalidNameError):
        ws.remember("x", source=name)


def test_gitignore_and_internal_folders_are_respected(ws: Workspace) -> None:
    (ws.root / ".gitignore").write_text(".mdmem/\nprivate/\n*.draft.md\n")
    for rel in ["private/a.md", "x.draft.md", ".git/y.md", ".mdmem/z.md", "sub/keep.md"]:
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / rel).write_text("- " + rel + "\n")
    (ws.root / "sub" / ".gitignore").write_text("skip.md\n")
    (ws.root / "sub" / "skip.md").write_text("- nested ignore\n")
    paths = _paths(ws)
    assert "sub/keep.md" in paths
    assert not {"private/a.md", "x.draft.md", ".git/y.md", ".mdmem/z.md", "sub/skip.md"} & paths
    assert {".compact_memory.md", "memory.md"} <= paths  # dot-files are memory too


# ---- .mdmem is not a folder ---------------------------------------------------------------------

BIN = Path(sys.executable).parent / "mdmem"


@pytest.mark.parametrize("kind", ["file", "broken symlink"])
def test_a_state_folder_that_is_not_a_folder_is_one_clear_line(ws: Workspace, kind: str) -> None:
    ws = Workspace.open(_keyword_only(ws.root))
    ws.remember("Deploys go to Fly.io staging")
    state = ws.root / ".mdmem"
    shutil.rmtree(state)
    if kind == "file":
        state.write_text("not a folder\n")
    else:
        state.symlink_to(ws.root / "gone")
    with pytest.raises(StateDirError, match=rf"^\.mdmem in {ws.root} is a {kind}, not a folder"):
        Workspace.open(ws.root)
    commands = [
        ["index"],
        ["status"],
        ["search", "Fly.io"],
        ["context", "deploy"],
        ["remember", "x"],
    ]
    env = {k: v for k, v in os.environ.items() if k != "MDMEM_WORKSPACE"}
    runs = [  # at once: each is a process start and nothing else
        subprocess.Popen([str(BIN), "-w", str(ws.root), *command], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for command in (commands if kind == "file" else commands[2:3])
    ]  # fmt: skip
    for run in runs:
        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 1, (run.args, stderr)
        assert stderr.startswith(f"mdmem: error: .mdmem in {ws.root} is a {kind}"), stderr
        assert stderr.count("\n") == 1 and "mv .mdmem .mdmem.bak" in stderr
    assert (ws.root / "memory.md").read_text().count("Fly.io") == 1  # nothing written
    state.unlink()  # what the message says to do
    assert Workspace.open(ws.root).search("Fly.io")[0].path == "memory.md"


# ---- a query too long to search -----------------------------------------------------------------


def test_a_huge_query_is_refused_before_any_work(ws: Workspace) -> None:
    keyword_only = Workspace.open(_keyword_only(ws.root))
    keyword_only.remember("Deploys go to Fly.io staging")
    keyword_only.index.update(embed=False)
    (ws.root / "learnings.md").write_text("- a hand edit no search has indexed yet\n")
    huge = "deploy " * 150_000  # about 1 MB
    for mode in ("hybrid", "keyword"):
        with pytest.raises(QueryTooLongError, match=r"the query is 1,050,000 characters, over"):
            keyword_only.search(huge, mode=mode)
    context = keyword_only.build_context(huge)  # built from the files; the search part says why
    assert any("the query is 1,050,000 characters" in p for p in context.problems)
    assert keyword_only.index.status().stale == ["learnings.md"]  # refused before any sync
    longest = ("where do deploys go " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]
    assert keyword_only.search(longest, mode="keyword")[0].path == "memory.md"
    with pytest.raises(QueryTooLongError):
        keyword_only.search(longest + "x")


def _keyword_only(root: Path) -> Path:
    with open(root / "mdmem.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[embedding]\nmodel = ""\n')
    return root
