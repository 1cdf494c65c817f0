"""Claude's memory tool over a workspace: the same strings as the SDK's reference backend,
the workspace's safe writes, archive instead of delete, paths that cannot escape, and the
SDK's own tool runner against a local fake Messages API (no network)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anthropic import Anthropic
from anthropic.lib.tools import ToolError
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

from mdmem import Workspace
from mdmem.integrations.memory_tool import AsyncMdmemMemoryTool, MdmemMemoryTool

TEXT_FILES = '\n[files]\ninclude = ["**/*.md", "**/*.txt", "**/*.xml"]\n'

# One command script, run against the reference backend and against ours: every string must
# be the same (results and errors).
SCRIPT: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {
        "command": "create",
        "path": "/memories/notes.md",
        "file_text": "# Notes\n- likes tea\n- likes tea\n- db port 5433\n",
    },
    {"command": "create", "path": "/memories/notes.md", "file_text": "overwrite?"},
    {
        "command": "create",
        "path": "/memories/projects/invoices/progress.xml",
        "file_text": "<task>\n  <step done='no'>gap-free numbering</step>\n</task>",
    },
    {"command": "create", "path": "/memories/todo.txt", "file_text": "one\r\ntwo\r\n"},
    {"command": "create", "path": "/memories/empty.md", "file_text": ""},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/projects"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [3, -1]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [0, 99]},
    {"command": "view", "path": "/memories/todo.txt"},
    {"command": "view", "path": "/memories/empty.md"},
    {
        "command": "str_replace",
        "path": "/memories/notes.md",
        "old_str": "likes tea",
        "new_str": "likes coffee",
    },
    {
        "command": "str_replace",
        "path": "/memories/notes.md",
        "old_str": "likes milk",
        "new_str": "x",
    },
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "5433", "new_str": "6543"},
    {
        "command": "str_replace",
        "path": "/memories/notes.md",
        "old_str": "- likes tea\n- likes",
        "new_str": "- likes",
    },
    {"command": "str_replace", "path": "/memories/projects", "old_str": "a", "new_str": "b"},
    {"command": "str_replace", "path": "/memories/missing.md", "old_str": "a", "new_str": "b"},
    {
        "command": "str_replace",
        "path": "/memories/todo.txt",
        "old_str": "two\r\n",
        "new_str": "two\r\nthree\r\n",
    },
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 99, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": -1, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "top\n"},
    {
        "command": "insert",
        "path": "/memories/notes.md",
        "insert_line": 5,
        "insert_text": "- at the end",
    },
    {
        "command": "insert",
        "path": "/memories/projects/invoices/progress.xml",
        "insert_line": 3,
        "insert_text": "<!-- no newline before -->",
    },
    {"command": "insert", "path": "/memories/empty.md", "insert_line": 1, "insert_text": "x"},
    {"command": "insert", "path": "/memories/empty.md", "insert_line": 0, "insert_text": "first"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/projects/invoices/progress.xml"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/todo.txt"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/projects"},
    {"command": "rename", "old_path": "/memories/missing.md", "new_path": "/memories/other.md"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
    {
        "command": "rename",
        "old_path": "/memories/notes.md",
        "new_path": "/memories/archive/2026/notes.md",
    },
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work"},
    {"command": "view", "path": "/memories"},
    {"command": "delete", "path": "/memories/todo.txt"},
    {"command": "delete", "path": "/memories/todo.txt"},
    {"command": "delete", "path": "/memories/work"},
    {"command": "delete", "path": "/memories"},
    {"command": "delete", "path": "/memories/"},
    {"command": "view", "path": "/memories/todo.txt"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "view", "path": "/memories/../etc/passwd"},
    {"command": "create", "path": "/memories/../escape.md", "file_text": "x"},
    {"command": "view", "path": "/memories/"},
]


def _workspace(tmp_path: Path, include: str = TEXT_FILES) -> Workspace:
    ws = Workspace.init(tmp_path / "ws", mode="full", agent="claude")
    config = ws.root / "mdmem.toml"
    config.write_text(config.read_text() + include)
    return Workspace.open(ws.root)


def _run(tool: Any, command: dict[str, Any]) -> tuple[str, str]:
    try:
        return "ok", tool.call(command)
    except ToolError as exc:
        return "error", str(exc)


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def test_same_strings_as_the_reference_backend(tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "ref"))
    ws = _workspace(tmp_path)
    ours = MdmemMemoryTool(ws, folder="memories")
    for command in SCRIPT:
        expected, got = _run(reference, command), _run(ours, command)
        assert got == expected, command
    assert _tree(ws.root / "memories") == _tree(tmp_path / "ref" / "memories")


def test_async_backend_gives_the_same_strings(tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "ref"))
    expected = [_run(reference, command) for command in SCRIPT]
    ours = AsyncMdmemMemoryTool(_workspace(tmp_path), folder="memories")

    async def run_all() -> list[tuple[str, str]]:
        results = []
        for command in SCRIPT:
            try:
                results.append(("ok", await ours.call(command)))
            except ToolError as exc:
                results.append(("error", str(exc)))
        return results

    assert anyio.run(run_all) == expected


def test_writes_are_searchable_at_once_whatever_the_text_extension(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    tool = MdmemMemoryTool(ws)  # /memories is the workspace root
    tool.call(
        {
            "command": "create",
            "path": "/memories/progress.xml",
            "file_text": "<p>okapi sighting in the archive</p>\n",
        }
    )
    tool.call(
        {"command": "create", "path": "/memories/log.txt", "file_text": "quokka count is 12\n"}
    )
    assert [h.citation for h in ws.search("okapi", mode="keyword")] == ["progress.xml:1"]
    assert [h.citation for h in ws.search("quokka", mode="keyword")] == ["log.txt:1"]
    tool.call(
        {
            "command": "str_replace",
            "path": "/memories/log.txt",
            "old_str": "quokka count is 12",
            "new_str": "wombat count is 3",
        }
    )
    assert ws.search("quokka", mode="keyword") == []
    assert [h.text for h in ws.search("wombat", mode="keyword")] == ["wombat count is 3"]
    assert ws.versions("log.txt")  # the safe writes kept what the edit replaced


def test_a_file_the_index_would_skip_is_refused_with_the_way_out(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")  # default files.include: Markdown only
    tool = MdmemMemoryTool(ws)
    with pytest.raises(ToolError, match=r'would not be searchable.*"\*\*/\*\.txt"'):
        tool.call({"command": "create", "path": "/memories/log.txt", "file_text": "x\n"})
    assert not (ws.root / "log.txt").exists()
    with pytest.raises(ToolError, match="would not be searchable"):  # mdmem.toml stays the person's
        tool.call(
            {
                "command": "str_replace",
                "path": "/memories/mdmem.toml",
                "old_str": "full",
                "new_str": "minimal",
            }
        )
    tool.call({"command": "create", "path": "/memories/log.md", "file_text": "- pangolin seen\n"})
    with pytest.raises(ToolError, match="would not be searchable"):
        tool.call(
            {"command": "rename", "old_path": "/memories/log.md", "new_path": "/memories/log.txt"}
        )
    assert [h.citation for h in ws.search("pangolin", mode="keyword")] == ["log.md:1"]


def test_delete_and_clear_archive_to_trash_which_is_never_indexed(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    tool = MdmemMemoryTool(ws, folder="memories")
    tool.call(
        {"command": "create", "path": "/memories/a/capybara.md", "file_text": "- capybara facts\n"}
    )
    tool.call({"command": "create", "path": "/memories/b.txt", "file_text": "narwhal facts\n"})
    assert ws.search("capybara", mode="keyword")
    assert (
        tool.call({"command": "delete", "path": "/memories/a"})
        == "Successfully deleted /memories/a"
    )
    assert ws.search("capybara", mode="keyword") == []
    [kept] = (ws.root / ".trash").rglob("capybara.md")
    assert kept.read_text() == "- capybara facts\n"
    assert kept.relative_to(ws.root / ".trash").parts[1:] == ("memories", "a", "capybara.md")
    assert tool.clear_all_memory() == "All memory cleared"
    assert list((ws.root / "memories").iterdir()) == []
    assert ws.search("narwhal", mode="keyword") == []
    assert len(list((ws.root / ".trash").rglob("b.txt"))) == 1
    assert (ws.root / "memory.md").exists()  # outside the memory folder: untouched
    # .trash/ is mdmem's own: never scanned, and no path into it is accepted
    assert not [f for f in ws.scan().files if f.path.startswith(".trash/")]
    with pytest.raises(ToolError, match="cannot be used"):
        MdmemMemoryTool(ws).call(
            {"command": "view", "path": f"/memories/.trash/{kept.parent.parent.parent.name}"}
        )


def test_clear_all_at_the_root_keeps_the_config_and_hidden_state(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    MdmemMemoryTool(ws).clear_all_memory()
    names = sorted(os.listdir(ws.root))
    assert "mdmem.toml" in names and ".sessions" in names and "memory.md" not in names
    assert len(list((ws.root / ".trash").rglob("memory.md"))) == 1


def test_scanner_skips_trash_at_any_depth(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    for folder in (ws.root / ".trash", ws.root / "notes" / ".trash"):
        folder.mkdir(parents=True)
        (folder / "old.md").write_text("- zebra crossing\n")
    assert ws.search("zebra", mode="keyword") == []


def test_hand_written_text_files_need_an_include_pattern(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    (ws.root / "notes.txt").write_text("giraffe notes\n")
    assert ws.search("giraffe", mode="keyword") == []  # the default stays Markdown only
    ws = _workspace(tmp_path / "b")
    (ws.root / "notes.txt").write_text("giraffe notes\n")
    assert [h.citation for h in ws.search("giraffe", mode="keyword")] == ["notes.txt:1"]
    assert [e.text for e in ws.entries("notes.txt")] == ["giraffe notes"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("/memoriesX/a.md", "Path must start with /memories, got: /memoriesX/a.md"),
        ("memories/a.md", "Path must start with /memories, got: memories/a.md"),
        ("/memories/../x.md", "Path /memories/../x.md would escape /memories directory"),
        ("/memories/a/../../x.md", "Path /memories/a/../../x.md would escape /memories directory"),
        ("/memories/..\\x.md", "Path /memories/..\\x.md would escape /memories directory"),
        ("/memories/.mdmem/index.db", "inside .mdmem/"),
        ("/memories/.git/config", "inside .git/"),
    ],
)
def test_paths_stay_under_memories(tmp_path: Path, path: str, message: str) -> None:
    ws = Workspace.init(tmp_path / "ws")
    (tmp_path / "x.md").write_text("secret outside\n")
    tool = MdmemMemoryTool(ws, folder="memories")
    for command in (
        {"command": "view", "path": path},
        {"command": "create", "path": path, "file_text": "x"},
        {"command": "str_replace", "path": path, "old_str": "secret", "new_str": "x"},
        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": path},
        {"command": "rename", "old_path": path, "new_path": "/memories/y.md"},
        {"command": "rename", "old_path": "/memories", "new_path": path},
    ):
        with pytest.raises(ToolError, match=None) as caught:
            tool.call(command)
        if command["command"] != "rename" or command["old_path"] == path:
            assert message in str(caught.value), command
    assert (tmp_path / "x.md").read_text() == "secret outside\n"
    assert not (tmp_path / "ws" / "x.md").exists()


def test_symlinks_cannot_lead_out(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("- the launch code\n")
    tool = MdmemMemoryTool(ws, folder="memories")
    memories = ws.root / "memories"
    (memories / "out").symlink_to(outside)
    (memories / "leak.md").symlink_to(outside / "secret.md")
    (memories / "inside.md").symlink_to(ws.root / "memory.md")
    escape = "Path would escape /memories directory via symlink"
    for command in (
        {"command": "view", "path": "/memories/out"},
        {"command": "view", "path": "/memories/out/secret.md"},
        {"command": "view", "path": "/memories/leak.md"},
        {"command": "create", "path": "/memories/out/new.md", "file_text": "x"},
        {
            "command": "str_replace",
            "path": "/memories/leak.md",
            "old_str": "launch",
            "new_str": "x",
        },
        {"command": "insert", "path": "/memories/leak.md", "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": "/memories/out"},
        {"command": "rename", "old_path": "/memories/leak.md", "new_path": "/memories/l.md"},
        {"command": "rename", "old_path": "/memories/inside.md", "new_path": "/memories/out/x.md"},
    ):
        with pytest.raises(ToolError) as caught:
            tool.call(command)
        assert str(caught.value) == escape, command
    listing = tool.call({"command": "view", "path": "/memories"})
    assert "out" not in listing and "leak.md" not in listing
    # a link to a file elsewhere in the workspace but outside /memories leads out of it too
    with pytest.raises(ToolError, match="via symlink"):
        tool.call({"command": "view", "path": "/memories/inside.md"})
    assert (outside / "secret.md").read_text() == "- the launch code\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]


def test_create_and_rename_never_overwrite(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    tool = MdmemMemoryTool(ws)
    before = (ws.root / "memory.md").read_text()
    with pytest.raises(ToolError, match=r"^File /memories/memory.md already exists$"):
        tool.call({"command": "create", "path": "/memories/memory.md", "file_text": "wiped"})
    tool.call({"command": "create", "path": "/memories/draft.md", "file_text": "- draft\n"})
    with pytest.raises(ToolError, match=r"^The destination /memories/memory.md already exists$"):
        tool.call(
            {
                "command": "rename",
                "old_path": "/memories/draft.md",
                "new_path": "/memories/memory.md",
            }
        )
    with pytest.raises(ToolError, match=r"^The destination /memories/.sessions already exists$"):
        tool.call(
            {
                "command": "rename",
                "old_path": "/memories/draft.md",
                "new_path": "/memories/.sessions",
            }
        )
    assert (ws.root / "memory.md").read_text() == before
    assert (ws.root / "draft.md").read_text() == "- draft\n"


def test_view_is_capped_and_paged(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    tool = MdmemMemoryTool(ws, folder="memories")
    tool.files.max_view_chars = 1_000
    lines = [f"- fact number {n} " + "x" * 40 for n in range(1, 201)]
    tool.call(
        {"command": "create", "path": "/memories/big.md", "file_text": "\n".join(lines) + "\n"}
    )
    first = tool.call({"command": "view", "path": "/memories/big.md"})
    assert len(first) < 1_200
    assert first.endswith("view again with view_range [16, -1] for the rest]")
    assert "lines 1-15 of 201 shown" in first
    second = tool.call({"command": "view", "path": "/memories/big.md", "view_range": [16, -1]})
    assert second.splitlines()[1] == f"    16\t{lines[15]}"


def test_view_masks_secrets_and_writes_add_none(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
    (ws.root / "memories").mkdir()
    (ws.root / "memories" / "hand.md").write_text(f"- the key is {key}\n- next line\n")
    tool = MdmemMemoryTool(ws, folder="memories")
    shown = tool.call({"command": "view", "path": "/memories/hand.md"})
    assert key not in shown and "[REDACTED:" in shown and "     2\t- next line" in shown
    tool.call({"command": "create", "path": "/memories/agent.md", "file_text": f"- use {key}\n"})
    assert key not in (ws.root / "memories" / "agent.md").read_text()


def test_binary_and_special_files_are_refused_clearly(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    tool = MdmemMemoryTool(ws, folder="memories")  # makes the folder
    (ws.root / "memories" / "blob.txt").write_bytes(b"ok\n\xff\xfe\n")
    os.mkfifo(ws.root / "memories" / "pipe.md")
    with pytest.raises(ToolError, match=r"^File /memories/blob.txt is not UTF-8 text \(line 2\)"):
        tool.call({"command": "view", "path": "/memories/blob.txt"})
    with pytest.raises(ToolError, match=r"^Unsupported file type for /memories/pipe.md$"):
        tool.call({"command": "view", "path": "/memories/pipe.md"})  # never waits on a FIFO


def _message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _tool_use(n: int, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": command}


def test_sdk_tool_runner_against_a_fake_messages_api(tmp_path: Path) -> None:
    """The SDK's own loop: it sends the memory tool, runs each tool_use Claude returns against
    our backend, and sends the results back; the fake API scripts the turns and records."""
    ws = _workspace(tmp_path)
    turns = [
        [_tool_use(1, command="view", path="/memories")],
        [
            _tool_use(
                2,
                command="create",
                path="/memories/user.md",
                file_text="- prefers tabs over spaces\n",
            )
        ],
        [_tool_use(3, command="create", path="/memories/user.md", file_text="- wiped\n")],
        [
            _tool_use(
                4,
                command="str_replace",
                path="/memories/user.md",
                old_str="tabs over spaces",
                new_str="spaces over tabs",
            ),
            _tool_use(5, command="view", path="/memories/../../etc/passwd"),
        ],
        [{"type": "text", "text": "Noted: spaces over tabs."}],
    ]
    requests: list[dict[str, Any]] = []

    def messages_api(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        requests.append(json.loads(request.content))
        content = turns[len(requests) - 1]
        stop = "end_turn" if content[0]["type"] == "text" else "tool_use"
        return httpx2.Response(200, json=_message(content, stop))

    client = Anthropic(
        api_key="test-key",
        base_url="http://fake-messages-api.invalid",
        http_client=httpx2.Client(transport=httpx2.MockTransport(messages_api)),
        max_retries=0,
    )
    runner = client.beta.messages.tool_runner(
        model="claude-fake",
        max_tokens=1024,
        tools=[MdmemMemoryTool(ws)],
        messages=[{"role": "user", "content": "I prefer spaces over tabs now."}],
    )
    final = runner.until_done()
    assert final.content[0].text == "Noted: spaces over tabs."
    assert len(requests) == 5
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]

    def results(n: int) -> list[dict[str, Any]]:
        return [b for b in requests[n]["messages"][-1]["content"] if b["type"] == "tool_result"]

    [listing] = results(1)
    assert listing["content"].startswith(
        "Here're the files and directories up to 2 levels deep in /memories"
    )
    assert "\t/memories/memory.md" in listing["content"] and ".sessions" not in listing["content"]
    assert results(2)[0]["content"] == "File created successfully at: /memories/user.md"
    [refused] = results(3)
    assert refused["is_error"] is True and "File /memories/user.md already exists" in json.dumps(
        refused["content"]
    )
    edited, escaped = results(4)
    assert edited["content"].startswith("The memory file has been edited.")
    assert escaped["is_error"] is True
    assert "would escape /memories directory" in json.dumps(escaped["content"])
    assert (ws.root / "user.md").read_text() == "- prefers spaces over tabs\n"
    assert [h.citation for h in ws.search("spaces over tabs", mode="keyword")][:1] == ["user.md:1"]


def test_forget_reaches_what_the_memory_tool_archived(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    entry = ws.remember("The customer's phone number is 555 0100 2233", type="fact")
    tool = MdmemMemoryTool(ws, folder="memories")
    tool.call({"command": "create", "path": "/memories/call.md", "file_text": f"- {entry.text}\n"})
    tool.call({"command": "delete", "path": "/memories/call.md"})
    [archived] = (ws.root / ".trash").rglob("call.md")
    report = ws.forget(entry.id)
    assert report.trash == (archived.relative_to(ws.root).as_posix(),)
    assert not archived.exists()
