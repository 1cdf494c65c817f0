"""Claude's memory tool over a workspace: the same strings as the SDK's reference backend,
the workspace's safe writes, archive instead of delete, paths that cannot escape, and the
SDK's own tool runner against a local fake Messages API (no network)."""

from __future__ import annotations

import json
import os
import shutil
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
    assert ws.files.versions("log.txt")  # the safe writes kept what the edit replaced


def test_a_file_the_index_would_skip_is_refused_with_the_way_out(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")  # default files.include: Markdown only
    tool = MdmemMemoryTool(ws)
    with pytest.raises(ToolError, match=r'would not be searchable.*"\*\*/\*\.txt"'):
        tool.call({"command": "create", "path": "/memories/log.txt", "file_text": "x\n"})
    assert not (ws.root / "log.txt").exists()
    with pytest.raises(ToolError, match="configuration"):  # mdmem.toml stays the person's
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
    assert not [f for f in ws.files._scan().files if f.path.startswith(".trash/")]
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
        first = command.get("path") or command["old_path"]  # the reference's words
        assert str(caught.value) == f"Path {first} would escape /memories directory", command
    listing = tool.call({"command": "view", "path": "/memories"})
    assert "out" not in listing and "leak.md" not in listing
    # a link to a file elsewhere in the workspace but outside /memories leads out of it too
    with pytest.raises(ToolError, match=r"^Path /memories/inside\.md would escape"):
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


# ---- the differential run: every generated command on a fresh copy of the same folder ---------

PATHS = [
    "/memories", "/memories/", "/memories/notes.md", "/memories/crlf.txt", "/memories/nonl.md",
    "/memories/empty.md", "/memories/dir", "/memories/dir/", "/memories/dir/a.md",
    "/memories/dir/sub/deep.md", "/memories/.hidden.md", "/memories/ünï code.md",
    "/memories/link.md", "/memories/dirlink", "/memories/dirlink/a.md", "/memories/out.md",
    "/memories/outdir", "/memories/outdir/secret.md", "/memories/dangling.md",
    "/memories/missing.md", "/memories/new/deeper/file.md", "/memories//notes.md",
    "/memories/./notes.md", "/memories/notes.md/", "/memories/notes.md/x.md", "/etc/passwd",
    "/memories/../x.md", "/memories/back\\slash.md", "/memoriesX/notes.md",
]  # fmt: skip


def _generated() -> list[dict[str, Any]]:
    """Each command kind on each kind of path (files, folders, CRLF, no final newline, hidden,
    Unicode, links inside, leading out and dangling, odd spellings), then the edge cases of
    view ranges, insert lines, replacements and moves."""
    commands: list[dict[str, Any]] = []
    for path in PATHS:
        commands += [
            {"command": "view", "path": path},
            {"command": "create", "path": path, "file_text": "- new\n"},
            {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
            {"command": "insert", "path": path, "insert_line": 1, "insert_text": "- added"},
            {"command": "delete", "path": path},
            {"command": "rename", "old_path": path, "new_path": "/memories/moved.md"},
        ]
    for view_range in ([1, 2], [2, -1], [0, 99], [3, 3], [5, 2], [-1, -1], [1], [1, 2, 3]):
        commands.append({"command": "view", "path": "/memories/notes.md", "view_range": view_range})
    commands.append({"command": "view", "path": "/memories/crlf.txt", "view_range": [2, 2]})
    for line in (0, -1, 4, 5, 99):
        commands.append(
            {"command": "insert", "path": "/memories/notes.md", "insert_line": line,
             "insert_text": f"- at {line}\n"}
        )  # fmt: skip
    for old, new in (("likes tea", "x"), ("5433", "6543"), ("", "x"), ("- likes tea\n- likes", "-"),
                     ("two\r\n", "2\r\n"), ("no newline", "a newline\n")):  # fmt: skip
        for path in ("/memories/notes.md", "/memories/crlf.txt", "/memories/nonl.md"):
            commands.append(
                {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            )
    for old, new in [
        ("/memories/notes.md", "/memories/dir"), ("/memories/notes.md", "/memories/dir/n.md"),
        ("/memories/notes.md", "/memories/new/deeper/n.md"), ("/memories/notes.md", "/memories/notes.md"),
        ("/memories/notes.md", "/memories/out.md"), ("/memories/notes.md", "/memories/outdir/n.md"),
        ("/memories/notes.md", "/memories/dangling.md"), ("/memories/dir", "/memories/dir/sub/x"),
        ("/memories/dir", "/memories/folder"), ("/memories/dir/sub", "/memories/sub"),
        ("/memories/link.md", "/memories/l2.md"), ("/memories/dirlink", "/memories/dl2"),
        ("/memories/dangling.md", "/memories/d2.md"), ("/memories/notes.md", "/memories/nonl.md/x.md"),
        ("/memories/empty.md", "/memories/.hidden2.md"),
    ]:  # fmt: skip
        commands.append({"command": "rename", "old_path": old, "new_path": new})
    return commands


GENERATED = _generated()


def _seed(root: Path, outside: Path) -> None:
    """What each generated command starts from (links are relative: the same in both trees)."""
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "notes.md").write_text("# Notes\n- likes tea\n- likes tea\n- db port 5433\n")
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "nonl.md").write_text("no newline")
    (root / "empty.md").write_text("")
    (root / "dir" / "a.md").write_text("- a\n")
    (root / "dir" / "sub" / "deep.md").write_text("- deep\n")
    (root / ".hidden.md").write_text("- hidden\n")
    (root / "ünï code.md").write_text("- ü\n")
    (root / "link.md").symlink_to("notes.md")
    (root / "dirlink").symlink_to("dir")
    (root / "out.md").symlink_to(outside / "secret.md")
    (root / "outdir").symlink_to(outside)
    (root / "dangling.md").symlink_to("nothing.md")


def _snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: a file's bytes, a link's target, a folder."""
    found: dict[str, Any] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = ("folder",)
            else:
                found[rel] = ("file", path.read_bytes())
    return found


def _different(*, rule: str, ours: tuple[str, str] | None = None) -> dict[str, Any]:
    """An intended difference: which rule of the README's list it follows, and what ours says
    (None: the same words as the reference; the files differ)."""
    return {"rule": rule, "ours": ours}


def _key(command: dict[str, Any]) -> str:
    return json.dumps(command, sort_keys=True, ensure_ascii=False)


_NO_PREFIX = ("error", "Path must start with /memories, got: /memoriesX/notes.md")
# Each command of GENERATED whose answer or resulting files differ from the reference's, with
# the rule (README, "Claude's memory tool": what differs on purpose) it follows.
INTENDED = {
    _key(command): why
    for command, why in [
        ({"command": "delete", "path": "/memories/link.md"}, _different(rule="links")),
        ({"command": "delete", "path": "/memories/dirlink"}, _different(rule="links")),
        (
            {"command": "rename", "old_path": "/memories/link.md", "new_path": "/memories/moved.md"},
            _different(rule="links"),
        ),
        (
            {"command": "rename", "old_path": "/memories/dirlink", "new_path": "/memories/moved.md"},
            _different(rule="links"),
        ),
        (
            {"command": "rename", "old_path": "/memories/link.md", "new_path": "/memories/l2.md"},
            _different(rule="links"),
        ),
        (
            {"command": "rename", "old_path": "/memories/dirlink", "new_path": "/memories/dl2"},
            _different(rule="links"),
        ),
        (
            {"command": "create", "path": "/memories/dangling.md", "file_text": "- new\n"},
            _different(rule="links", ours=("error", "File /memories/dangling.md already exists")),
        ),
        (
            {"command": "rename", "old_path": "/memories/notes.md",
             "new_path": "/memories/dangling.md"},
            _different(
                rule="links", ours=("error", "The destination /memories/dangling.md already exists")
            ),
        ),
        (
            {"command": "rename", "old_path": "/memories/dangling.md",
             "new_path": "/memories/moved.md"},
            _different(rule="links", ours=(
                "ok", "Successfully renamed /memories/dangling.md to /memories/moved.md")),
        ),
        (
            {"command": "rename", "old_path": "/memories/dangling.md", "new_path": "/memories/d2.md"},
            _different(rule="links", ours=(
                "ok", "Successfully renamed /memories/dangling.md to /memories/d2.md")),
        ),
        (
            {"command": "create", "path": "/memories/back\\slash.md", "file_text": "- new\n"},
            _different(rule="backslash"),
        ),
        (
            {"command": "create", "path": "/memories/notes.md/x.md", "file_text": "- new\n"},
            _different(rule="crash", ours=("error", "Cannot create /memories/notes.md/x.md: "
                                           "/memories/notes.md is a file, not a directory")),
        ),
        (
            {"command": "rename", "old_path": "/memories/notes.md/x.md",
             "new_path": "/memories/moved.md"},
            _different(rule="crash", ours=(
                "error", "The path /memories/notes.md/x.md does not exist")),
        ),
        (
            {"command": "rename", "old_path": "/memories/notes.md",
             "new_path": "/memories/nonl.md/x.md"},
            _different(rule="crash", ours=("error", "Cannot move to /memories/nonl.md/x.md: "
                                           "/memories/nonl.md is a file, not a directory")),
        ),
        (
            {"command": "rename", "old_path": "/memories/dir", "new_path": "/memories/dir/sub/x"},
            _different(rule="crash", ours=(
                "error", "Cannot move /memories/dir into itself (/memories/dir/sub/x)")),
        ),
        ({"command": "view", "path": "/memoriesX/notes.md"}, _different(rule="prefix", ours=_NO_PREFIX)),
        (
            {"command": "create", "path": "/memoriesX/notes.md", "file_text": "- new\n"},
            _different(rule="prefix", ours=_NO_PREFIX),
        ),
        (
            {"command": "str_replace", "path": "/memoriesX/notes.md", "old_str": "a", "new_str": "b"},
            _different(rule="prefix", ours=_NO_PREFIX),
        ),
        (
            {"command": "insert", "path": "/memoriesX/notes.md", "insert_line": 1,
             "insert_text": "- added"},
            _different(rule="prefix", ours=_NO_PREFIX),
        ),
        ({"command": "delete", "path": "/memoriesX/notes.md"}, _different(rule="prefix", ours=_NO_PREFIX)),
        (
            {"command": "rename", "old_path": "/memoriesX/notes.md", "new_path": "/memories/moved.md"},
            _different(rule="prefix", ours=_NO_PREFIX),
        ),
    ]
}  # fmt: skip


def _outcome(tool: Any, command: dict[str, Any]) -> tuple[str, str]:
    """The answer, an error's words, or the exception the reference lets out (a crash)."""
    try:
        return _run(tool, command)
    except Exception as exc:
        return "crash", type(exc).__name__


def test_generated_commands_differ_from_the_reference_only_as_documented(tmp_path: Path) -> None:
    """Each of 221 generated commands runs on a fresh copy of the same folder, against the
    SDK's BetaLocalFilesystemMemoryTool and against ours: the answers and the files left must
    be the same, except for the commands listed in INTENDED (each one a rule the README
    documents), where they must differ, and ours must say what the list says."""
    assert len(GENERATED) >= 200
    ws = _workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("- a secret\n")
    seen: set[str] = set()
    for n, command in enumerate(GENERATED):
        reference = BetaLocalFilesystemMemoryTool(str(tmp_path / f"ref{n}"))
        ours = MdmemMemoryTool(ws, folder=f"m{n}")
        theirs_root, ours_root = tmp_path / f"ref{n}" / "memories", ws.root / f"m{n}"
        _seed(theirs_root, outside)
        _seed(ours_root, outside)
        expected, got = _outcome(reference, command), _outcome(ours, command)
        same = (expected, _snapshot(theirs_root)) == (got, _snapshot(ours_root))
        why = INTENDED.get(_key(command))
        if why is None:
            assert same, (command, expected, got)
            continue
        seen.add(_key(command))
        assert not same, f"no longer a difference: {command}"
        assert got == (why["ours"] or expected), command
        assert got[0] != "crash"
    assert seen == set(INTENDED)


def test_a_link_is_moved_or_archived_itself_never_its_target(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    tool = MdmemMemoryTool(ws, folder="memories")
    tool.call({"command": "create", "path": "/memories/real.md", "file_text": "- real\n"})
    (ws.root / "memories" / "link.md").symlink_to("real.md")
    tool.call({"command": "rename", "old_path": "/memories/link.md", "new_path": "/memories/l.md"})
    assert os.readlink(ws.root / "memories" / "l.md") == "real.md"
    tool.call({"command": "str_replace", "path": "/memories/l.md", "old_str": "real",
               "new_str": "edited"})  # fmt: skip
    assert (ws.root / "memories" / "real.md").read_text() == "- edited\n"  # written through it
    tool.call({"command": "delete", "path": "/memories/l.md"})
    assert not os.path.lexists(ws.root / "memories" / "l.md")
    assert (ws.root / "memories" / "real.md").read_text() == "- edited\n"
    [archived] = [
        Path(d) / "l.md" for d, _, names in os.walk(ws.root / ".trash") if "l.md" in names
    ]
    assert os.readlink(archived) == "real.md"  # the link itself, as it was


ROOT_COMMANDS: list[tuple[dict[str, Any], tuple[str, str] | None]] = [
    ({"command": "view", "path": "/memories"}, None),
    ({"command": "view", "path": "/memories/mdmem.toml"}, None),
    ({"command": "create", "path": "/memories/mdmem.toml", "file_text": "x"}, None),
    ({"command": "delete", "path": "/memories/memory.md"}, None),
    ({"command": "rename", "old_path": "/memories/memory.md", "new_path": "/memories/old/m.md"}, None),
    ({"command": "str_replace", "path": "/memories/memory.md", "old_str": "# Memory",
      "new_str": "# Mem"}, None),
    ({"command": "create", "path": "/memories/notes/today.md", "file_text": "- today\n"}, None),
    ({"command": "rename", "old_path": "/memories/learnings.md", "new_path": "/memories/mdmem.toml"},
     None),
    ({"command": "delete", "path": "/memories/mdmem.toml"}, ("error", (
        "Cannot delete /memories/mdmem.toml: it is this workspace's configuration (mdmem.toml), "
        "which only a person changes"))),
    ({"command": "rename", "old_path": "/memories/mdmem.toml", "new_path": "/memories/config.md"},
     ("error", "Cannot rename /memories/mdmem.toml: it is this workspace's configuration "
               "(mdmem.toml), which only a person changes")),
    ({"command": "str_replace", "path": "/memories/mdmem.toml", "old_str": "full",
      "new_str": "minimal"}, ("error", "Cannot edit /memories/mdmem.toml: it is this workspace's "
                                       "configuration (mdmem.toml), which only a person changes")),
    ({"command": "insert", "path": "/memories/mdmem.toml", "insert_line": 0, "insert_text": "#"},
     ("error", "Cannot edit /memories/mdmem.toml: it is this workspace's configuration "
               "(mdmem.toml), which only a person changes")),
    ({"command": "view", "path": "/memories/.mdmem"}, ("error", (
        "Path /memories/.mdmem cannot be used: inside .mdmem/, which mdmem "
        "never reads or indexes (its own state and other tools' folders); use a path outside it"))),
]  # fmt: skip


@pytest.mark.parametrize(("command", "ours"), ROOT_COMMANDS)
def test_at_the_workspace_root_the_config_stays_the_persons(
    tmp_path: Path, command: dict[str, Any], ours: tuple[str, str] | None
) -> None:
    """/memories as the workspace root, the reference given a copy of the same files: the
    same answers, but mdmem.toml is never deleted, moved or edited (the reference moved the
    workspace's configuration to .trash/ on `delete /memories/mdmem.toml`)."""
    ws = Workspace.init(tmp_path / "ws", mode="full", agent="claude")
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "ref"))
    for file in ws.root.iterdir():
        if file.is_file():
            shutil.copy2(file, tmp_path / "ref" / "memories" / file.name)
    config = (ws.root / "mdmem.toml").read_text()
    expected, got = _outcome(reference, command), _outcome(MdmemMemoryTool(ws), command)
    assert got == (ours or expected)
    if ours is not None:
        assert expected != got
    assert (ws.root / "mdmem.toml").read_text() == config or command["command"] == "rename"
    assert (ws.root / "mdmem.toml").exists()
