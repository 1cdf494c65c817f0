"""Claude's memory tool: paths go through the one resolver (mdmem/paths.py), refusals name the
``/memories/…`` path Claude sent (never the workspace's), and the answers the reference
backend (``BetaLocalFilesystemMemoryTool``) gives as crashes are clear errors here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.tools import ToolError
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool
from hostile_paths import benign_names, hostile_names
from hypothesis import HealthCheck, given, settings

from mdmem import Workspace
from mdmem.integrations.memory_tool import MdmemMemoryTool

KEY = "sk-ant-api03-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789" * 2
OUTSIDE = "CANARY-OUTSIDE-5512"


def _tool(tmp_path: Path) -> tuple[MdmemMemoryTool, Workspace]:
    ws = Workspace.init(tmp_path / "ws", mode="full", agent="claude")
    return MdmemMemoryTool(ws, folder="notes"), ws


def _error(tool: Any, command: dict[str, Any]) -> str:
    with pytest.raises(ToolError) as caught:
        tool.call(command)
    return str(caught.value)


def test_a_nul_byte_answers_embedded_null_byte_like_the_reference(tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "ref"))
    with pytest.raises(ValueError, match="embedded null byte"):
        reference.call({"command": "view", "path": "/memories/a\0b.md"})
    tool, _ = _tool(tmp_path)
    for command in (
        {"command": "view", "path": "/memories/a\0b.md"},
        {"command": "create", "path": "/memories/a\0b.md", "file_text": "x"},
        {"command": "delete", "path": "/memories/a\0b.md"},
    ):
        assert _error(tool, command) == "Path /memories/a\\x00b.md: embedded null byte"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/memories/b\udcff.md", "file name is not valid UTF-8"),
        ("/memories/.mdmem/x.md", "inside .mdmem/"),
        ("/memories/.trash/x.md", "inside .trash/"),
        ("/memories/sub/.git/config", "inside .git/"),
    ],
)
def test_refusals_name_the_memories_path_not_the_workspace_path(
    tmp_path: Path, path: str, why: str
) -> None:
    tool, _ = _tool(tmp_path)
    said = _error(tool, {"command": "create", "path": path, "file_text": "x"})
    shown = path.replace("\udcff", "\\xff")
    assert said.startswith(f"Path {shown} cannot be used: ") and why in said, said
    assert "notes/" not in said  # the workspace's folder behind /memories is never shown


@pytest.mark.parametrize(
    ("command", "argument"),
    [
        ({"command": "create", "path": "/memories/a.md", "file_text": None}, "file_text"),
        ({"command": "str_replace", "path": "/memories/k.md", "old_str": None, "new_str": "x"}, "old_str"),
        ({"command": "str_replace", "path": "/memories/k.md", "old_str": "x", "new_str": None}, "new_str"),
        ({"command": "insert", "path": "/memories/k.md", "insert_line": 0, "insert_text": None}, "insert_text"),
    ],
)  # fmt: skip
def test_a_missing_text_argument_is_a_clear_error(
    tmp_path: Path, command: dict[str, Any], argument: str
) -> None:
    tool, ws = _tool(tmp_path)
    tool.call({"command": "create", "path": "/memories/k.md", "file_text": "x\n"})
    said = _error(tool, command)  # (the reference: AttributeError; ours was a raw TypeError)
    assert (
        said
        == f"Parameter `{argument}` of {command['command']} {command['path']} is missing (null); give text"
    )
    assert not (ws.root / "notes" / "a.md").exists()
    assert (ws.root / "notes" / "k.md").read_text() == "x\n"


def test_a_masked_secret_is_said_so_the_next_edit_can_use_the_masked_text(
    tmp_path: Path,
) -> None:
    tool, ws = _tool(tmp_path)
    made = tool.call(
        {"command": "create", "path": "/memories/k.md", "file_text": f"- api key {KEY}\n"}
    )
    assert made.startswith("File created successfully at: /memories/k.md\nNote: ")
    assert "[REDACTED:anthropic]" in made and KEY not in made
    assert (ws.root / "notes" / "k.md").read_text() == "- api key [REDACTED:anthropic]\n"
    # the model now edits with the masked text it was told about, and that works
    edited = tool.call({
        "command": "str_replace", "path": "/memories/k.md",
        "old_str": "api key [REDACTED:anthropic]", "new_str": "api key rotated",
    })  # fmt: skip
    assert edited.startswith("The memory file has been edited.") and "Note:" not in edited
    again = tool.call({
        "command": "insert", "path": "/memories/k.md", "insert_line": 1,
        "insert_text": f"- new key {KEY}",
    })  # fmt: skip
    assert again.startswith("The file /memories/k.md has been edited.\nNote: a secret")
    plain = tool.call({"command": "create", "path": "/memories/p.md", "file_text": "- tea\n"})
    assert plain == "File created successfully at: /memories/p.md"  # the reference's words


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[MdmemMemoryTool, Path, Path]:
    base = tmp_path_factory.mktemp("memtool")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"- {OUTSIDE}\n")
    tool, ws = _tool(base)
    (ws.root / "notes" / "out").symlink_to(outside, target_is_directory=True)
    return tool, ws.root, outside


COMMANDS = [
    lambda p: {"command": "view", "path": p},
    lambda p: {"command": "create", "path": p, "file_text": "- x\n"},
    lambda p: {"command": "str_replace", "path": p, "old_str": "x", "new_str": "y"},
    lambda p: {"command": "insert", "path": p, "insert_line": 0, "insert_text": "- y"},
    lambda p: {"command": "delete", "path": p},
    lambda p: {"command": "rename", "old_path": p, "new_path": "/memories/moved.md"},
    lambda p: {"command": "rename", "old_path": "/memories/keep.md", "new_path": p},
]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=hostile_names().filter(lambda n: n[0] not in "/\\"))
def test_hostile_names_are_refused_by_every_command(shared: Any, name: str) -> None:
    """(A name starting with a separator is no escape here: ``/memories//x`` is
    ``/memories/x``, for the reference too.)"""
    tool, root, outside = shared
    (root / "notes" / "keep.md").write_text("- keep\n")
    path = f"/memories/{name}"
    for make in COMMANDS:
        said = _error(tool, make(path))
        assert OUTSIDE not in said
        assert str(root) not in said, said  # never the machine's path
        assert len(said.splitlines()) == 1, said
    assert (root / "notes" / "keep.md").read_text() == "- keep\n"
    assert sorted(os.listdir(outside)) == ["secret.md"]
    assert (outside / "secret.md").read_text() == f"- {OUTSIDE}\n"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=benign_names(suffix=".md"))
def test_benign_names_are_created_where_they_say(shared: Any, name: str) -> None:
    tool, root, _ = shared
    path = f"/memories/{name.removeprefix('./')}"
    target = root / "notes" / name
    if target.exists() or any(p.is_file() for p in target.parents if p != root):
        return  # (drawn before, or a file where a folder would go)
    said = tool.call({"command": "create", "path": path, "file_text": "- benign\n"})
    assert said == f"File created successfully at: {path}"
    assert target.read_text() == "- benign\n"


def test_clear_all_moves_what_it_can_and_names_what_it_leaves(tmp_path: Path) -> None:
    tool, ws = _tool(tmp_path)
    tool.call({"command": "create", "path": "/memories/a.md", "file_text": "- a\n"})
    (ws.root / "notes" / "by hand.").write_text("- a person's file\n")  # refused as a name
    said = tool.call({"command": "view", "path": "/memories"})
    assert "by hand." in said
    cleared = tool.clear_all_memory()
    assert cleared.startswith("All memory cleared but /memories/by hand. (")
    assert sorted(os.listdir(ws.root / "notes")) == ["by hand."]
