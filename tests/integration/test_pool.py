"""The shared pool (issue 13 §2): real files, real locks, real processes."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from stress import size

from mdmem import FileProblem, PoolEntry, VersionConflict, Workspace
from mdmem.memory import pool_format as fmt

INCREMENTER = textwrap.dedent(
    """
    import sys
    from mdmem import VersionConflict, Workspace
    ws = Workspace(sys.argv[1])
    pool = ws.sharing.pool()
    name, count = sys.argv[2], int(sys.argv[3])
    conflicts = 0
    for _ in range(count):
        while True:
            entry = pool.read("counter")  # None before the first write: version 0
            value, version = (entry.content, entry.version) if entry else (0, 0)
            try:
                pool.write("counter", value + 1, writer=name, expected_version=version)
                break
            except VersionConflict as exc:
                assert isinstance(exc.actual, int) and exc.actual > exc.expected, exc
                conflicts += 1
    print(conflicts)
    """
)


def _no_redaction(ws: Workspace) -> Workspace:
    (ws.root / "mdmem.toml").write_text(
        (ws.root / "mdmem.toml").read_text() + "\n[redact]\nenabled = false\n"
    )
    return Workspace.open(ws.root)


# ---- values read back exactly ------------------------------------------------------------------

_texts = st.text(st.characters(codec="utf-8"), max_size=60) | st.sampled_from(
    [
        "",
        "\n",
        "  indented",
        "## a heading",
        "```json\n1\n```",
        "````text\nx\n````",
        "a <!-- mdmem id=m-0123456789 --> b",
        "<!-- open comment",
        "```\nunclosed fence",
        "line\r\nwith CRLF\r",
        "title\n===",
        "- item\n\n    code",
        "no",
        "\ufeffbom",
        "\ud800 lone surrogate",
    ]
)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=12,
)


@given(_json)
@example(-0.0)
@example({"b": 1, "a": [True, 1, 1.0]})
def test_every_json_value_encodes_to_a_body_that_reads_back_as_itself(value: object) -> None:
    body = fmt.encode(value)
    assert fmt.same(fmt.decode(body), value)
    block = fmt.render_section("k", {"version": 1}, body, "\n", fmt.SECTION_LEVEL)
    text = fmt.header("p") + block + "\n## next\n<!-- mdmem version=1 -->\n\nafter\n"
    pool = fmt.parse_pool("shared/p.md", text)
    assert [s.key for s in pool.live] == ["k", "next"]  # the value did not swallow a section
    assert fmt.same(fmt.decode(pool.live[0].body), value)
    assert pool.live[1].body == "after"


_TRICKY_LINES = ["```", "~~~", "<!--", "-->", "<div>", "## x", "### y", "---", "===", "", "> q"]


@given(
    st.lists(_json, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 200), st.sampled_from(_TRICKY_LINES) | _texts), max_size=3),
    st.booleans(),
)
def test_the_line_reader_finds_what_markdown_it_finds_or_steps_aside(
    values: list[object], edits: list[tuple[int, str]], archive: bool
) -> None:
    """Files the program wrote are read line by line; after any hand edit, either that still
    gives markdown-it's headings or markdown-it reads the file."""
    from mdmem.markdown.parse import split_lines

    text = fmt.header("p")
    for n, value in enumerate(values):
        body = fmt.encode(value)
        level = fmt.ARCHIVED_LEVEL if archive and n == len(values) - 1 else fmt.SECTION_LEVEL
        if level == fmt.ARCHIVED_LEVEL:
            text += "## Archive\n\n"
        text += fmt.render_section(f"k{n}", {"hash": fmt.body_hash(body)}, body, "\n", level)
    written = split_lines(text)
    assert fmt._program_headings(written) == fmt._headings(written)  # the fast path is taken
    rows = text.split("\n")
    for at, line in edits:
        rows.insert(at % (len(rows) + 1), line)
    edited = split_lines("\n".join(rows))
    fast = fmt._program_headings(edited)
    assert fast is None or fast == fmt._headings(edited)


def test_values_round_trip_through_the_pool_file_exactly(ws: Workspace) -> None:
    pool = _no_redaction(ws).sharing.pool("roundtrip")
    written: dict[str, object] = {}

    @given(_json)
    def write(value: object) -> None:
        key = f"k{len(written) % 7}"
        entry = pool.write(key, value)
        written[key] = value
        assert fmt.same(entry.content, value)
        assert fmt.same(pool.read(key).content, value)  # type: ignore[union-attr]

    write()
    fresh = Workspace.open(ws.root).sharing.pool("roundtrip")
    for key, value in written.items():
        assert fmt.same(fresh.read(key).content, value)  # type: ignore[union-attr]


def test_text_stays_readable_in_the_file(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    pool.write("note", "Paris is the capital of France.")
    pool.write("numbers", {"count": 3, "ok": True})
    pool.write(
        "long", {"sources": ["https://example.org/a/long", "https://example.org/b/long"], "n": 2}
    )
    pool.write("shout", "## not a heading of the file")
    text = (ws.root / "shared/default.md").read_text()
    assert "\n## note\n<!-- mdmem " in text
    assert "\nParis is the capital of France.\n" in text
    assert '```json\n{"count": 3, "ok": true}\n```' in text  # short: one line
    assert '```json\n{\n  "sources": [\n    "https://example.org/a/long",' in text  # long: indented
    assert "```text\n## not a heading of the file\n```" in text
    assert ws.sharing.pool().read("shout").content == "## not a heading of the file"  # type: ignore[union-attr]


# ---- versions, conflicts, hand edits ---------------------------------------------------------


def test_versions_and_a_conflict_carries_expected_and_actual(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    first = pool.write("plan", "draft", writer="researcher", metadata={"topic": "x"})
    assert (first.version, first.created_by, first.updated_by) == (1, "researcher", "researcher")
    second = pool.write("plan", "final", writer="writer", metadata={"stage": 2})
    assert second.version == 2 and second.created_by == "researcher"
    assert second.updated_by == "writer" and second.created_at == first.created_at
    assert dict(second.metadata) == {"topic": "x", "stage": 2}  # merged
    with pytest.raises(VersionConflict) as caught:
        pool.write("plan", "stale", expected_version=1)
    assert (caught.value.key, caught.value.expected, caught.value.actual) == ("plan", 1, 2)
    assert "expected version 1, found version 2" in str(caught.value)
    assert pool.read("plan").content == "final"  # type: ignore[union-attr]
    with pytest.raises(VersionConflict) as absent:
        pool.write("other", "x", expected_version=3)
    assert absent.value.actual == 0
    created = pool.write("only-once", "x", expected_version=0)  # 0: create only
    assert created.version == 1
    with pytest.raises(VersionConflict):
        pool.write("only-once", "y", expected_version=0)


def test_a_hand_edit_between_read_and_write_is_never_overwritten(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    pool.write("goal", "ship on Friday")
    read = pool.read("goal")
    assert read is not None and not read.edited
    path = ws.root / "shared/default.md"
    path.write_text(path.read_text().replace("ship on Friday", "ship on Monday (per Ana)"))
    for expected in (read.version, read):
        with pytest.raises(VersionConflict) as caught:
            pool.write("goal", "ship on Saturday", expected_version=expected)
        assert caught.value.actual == "edited by hand"
        assert "found edited by hand" in str(caught.value)
    assert "ship on Monday (per Ana)" in path.read_text()
    seen = pool.read("goal")
    assert seen is not None and seen.edited and seen.content == "ship on Monday (per Ana)"
    with pytest.raises(VersionConflict):  # a version alone cannot say the writer saw the edit
        pool.write("goal", "ship on Tuesday", expected_version=seen.version)
    after = pool.write("goal", "ship on Tuesday", expected_version=seen)  # the entry can
    assert after.version == seen.version + 1 and not after.edited


def test_delete_archives_and_the_key_goes_on_from_its_version(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    pool.write("draft", {"words": 120})
    pool.write("draft", {"words": 300})
    pool.write("keep", "me")
    gone = pool.delete("draft", writer="writer")
    assert gone.archived and gone.deleted_by == "writer" and gone.content == {"words": 300}
    assert pool.read("draft") is None and [e.key for e in pool.list()] == ["keep"]
    text = (ws.root / "shared/default.md").read_text()
    assert "\n## Archive\n\n### draft\n" in text and '"words": 300' in text
    again = pool.write("draft", {"words": 10})
    assert again.version == 3  # never reused: a stale reader of version 1 or 2 conflicts
    pool.delete("draft")
    assert [e.content for e in pool.history("draft")] == [{"words": 10}, {"words": 300}]
    with pytest.raises(KeyError, match="no key 'draft'"):
        pool.delete("draft")
    with pytest.raises(KeyError):
        ws.sharing.pool("empty").delete("x")
    assert not (ws.root / "shared/empty.md").exists()


def test_list_is_newest_first_with_prefix_and_limit(ws: Workspace) -> None:
    pool = ws.sharing.pool("research")
    for key in ("a/1", "b/1", "a/2", "a/3"):
        pool.write(key, key)
    pool.write("a/1", "touched")
    assert [e.key for e in pool.list()] == ["a/1", "a/3", "a/2", "b/1"]
    assert [e.key for e in pool.list(prefix="a/", limit=2)] == ["a/1", "a/3"]
    assert ws.sharing.pools() == ["research"]


def test_bad_input_is_a_clear_error_and_nothing_is_lost(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    pool = ws.sharing.pool()
    for key, why in [
        ("", "1 to 200"),
        (" x", "no space"),
        ("a\nb", "one line"),
        ("Archive", "archive"),
        ("x #", "read back"),
        ("a <!-- b", "metadata"),
    ]:
        with pytest.raises(ValueError, match=why):
            pool.write(key, "v")
    with pytest.raises(ValueError, match="tuple, which JSON does not have"):
        pool.write("k", (1, 2))
    with pytest.raises(ValueError, match="NaN"):
        pool.write("k", {"x": float("nan")})
    with pytest.raises(ValueError, match="keys are strings"):
        pool.write("k", {1: "one"})
    with pytest.raises(ValueError, match="expected_version"):
        pool.write("k", 1, expected_version=True)
    with pytest.raises(ValueError, match="invalid pool name"):
        ws.sharing.pool("../escape")
    pool.write("good", 1)
    pool.write("broken", {"a": 1})
    path = ws.root / "shared/default.md"
    path.write_text(path.read_text().replace('"a": 1', '"a": 1,,'))
    with pytest.raises(FileProblem) as caught:
        pool.read("broken")
    line = path.read_text().splitlines().index('{"a": 1,,}') + 1
    assert caught.value.path == "shared/default.md" and caught.value.line == line
    with caplog.at_level(logging.WARNING, "mdmem"):
        assert [e.key for e in pool.list()] == ["good"]
    assert f"shared/default.md:{line}" in caplog.text


def test_secrets_are_masked_before_they_reach_the_file(ws: Workspace) -> None:
    secret = "sk-ant-api03-" + "Qx7vT2mP9kR4wZ8nB3cF6hJ1" * 2
    entry = ws.sharing.pool().write("creds", {"note": f"the key is {secret}"})
    assert entry.redacted == 1 and "[REDACTED:" in entry.content["note"]
    assert secret not in (ws.root / "shared/default.md").read_text()
    # a secret only the JSON shows (a key and its value): masked there, and the entry says so
    pair = ws.sharing.pool().write(
        "db", {"password": "hunter2xyz"}, metadata={"password": "hunter2xyz"}
    )
    assert pair.content == {"password": "[REDACTED:password]"} and pair.redacted == 1
    assert pair.metadata == {"password": "[REDACTED:password]"}
    assert not pair.edited and ws.sharing.pool().read("db") == pair
    assert "hunter2xyz" not in (ws.root / "shared/default.md").read_text()


# ---- callbacks, watch, async -----------------------------------------------------------------


def test_callbacks_fire_on_write_and_delete(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    assert ws.sharing.pool() is pool  # one object per name: its callbacks see every write
    seen: list[tuple[str, str, int]] = []
    pool.on_write(lambda e: seen.append(("write", e.key, e.version)))
    pool.on_delete(lambda e: seen.append(("delete", e.key, e.version)))
    pool.on_write(lambda e: 1 / 0)  # a failing callback is logged, the write stands
    pool.write("k", 1)
    pool.write("k", 2)
    pool.delete("k")
    assert seen == [("write", "k", 1), ("write", "k", 2), ("delete", "k", 2)]


@pytest.mark.slow
def test_a_watch_reports_writes_of_other_processes_and_hand_edits(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    pool.write("mine", "before the watch")
    seen: list[tuple[str, str, object]] = []
    changed = threading.Event()

    def note(kind: str, entry: PoolEntry) -> None:
        seen.append((kind, entry.key, entry.content))
        changed.set()

    pool.on_write(lambda e: note("write", e))
    pool.on_delete(lambda e: note("delete", e))
    script = "import sys; from mdmem import Workspace; Workspace(sys.argv[1]).sharing.pool().write('theirs', 7)"
    with pool.watch():
        subprocess.run([sys.executable, "-c", script, str(ws.root)], check=True, timeout=60)
        assert changed.wait(10)
        assert seen == [("write", "theirs", 7)]
        changed.clear()
        pool.write("mine", "after")  # reported once, by the write itself
        path = ws.root / "shared/default.md"
        path.write_text(path.read_text().replace("\n7\n", "\n8\n"))  # a hand edit
        assert changed.wait(10)
        deadline = time.monotonic() + 10
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # nothing more comes
    assert seen[1:] == [("write", "mine", "after"), ("write", "theirs", 8)]


@pytest.mark.slow
def test_a_watch_accounts_for_every_version_another_process_writes(ws: Workspace) -> None:
    """Issue 32 §3: 5 writes by another process came as 2 events, 3 versions unaccounted for.
    Events coalesce (the file holds the latest version only); each names the versions it
    stands for, so every one is reported or named skipped, exactly once."""
    pool = ws.sharing.pool()
    events: list[PoolEntry] = []
    last = threading.Event()

    def note(entry: PoolEntry) -> None:
        events.append(entry)
        if entry.version == 5:
            last.set()

    pool.on_write(note)
    script = (
        "import sys; from mdmem import Workspace; pool = Workspace(sys.argv[1]).sharing.pool()\n"
        "for n in range(5): pool.write('theirs', n)"
    )
    with pool.watch():
        subprocess.run([sys.executable, "-c", script, str(ws.root)], check=True, timeout=60)
        assert last.wait(10)
        theirs = list(events)
        mine = pool.write("theirs", "mine")  # after the watch saw 5: nothing skipped
    accounted = [v for e in theirs for v in (*e.skipped, e.version)]
    assert accounted == [1, 2, 3, 4, 5]
    assert theirs[-1].content == 4
    assert (mine.version, mine.skipped) == (6, ())


def test_async_twins(ws: Workspace) -> None:
    pool = ws.sharing.pool()

    async def main() -> tuple[PoolEntry | None, list[PoolEntry], PoolEntry]:
        await pool.awrite("a", {"n": 1}, writer="bot")
        got = await pool.aread("a")
        listed = await pool.alist()
        gone = await pool.adelete("a")
        return got, listed, gone

    got, listed, gone = asyncio.run(main())
    assert got is not None and got.content == {"n": 1} and got.updated_by == "bot"
    assert [e.key for e in listed] == ["a"] and gone.archived


# ---- many processes, one key -----------------------------------------------------------------


@pytest.mark.slow
def test_processes_racing_optimistic_increments_lose_none(ws: Workspace) -> None:
    """4 x 50 compare-and-set increments in `make test`, 8 x 100 with MDMEM_STRESS=full."""
    processes, increments = size(4, 8), size(50, 100)
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", INCREMENTER, str(ws.root), f"p{n}", str(increments)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    elapsed = time.monotonic() - started
    assert [p.returncode for p in procs] == [0] * processes
    final = Workspace.open(ws.root).sharing.pool().read("counter")
    assert final is not None
    total = processes * increments
    assert (final.content, final.version) == (total, total)
    conflicts = sum(int(out) for out in outputs)
    print(f"\n{processes} x {increments} increments: {elapsed:.1f} s, {conflicts} retried")
    text = (ws.root / "shared/default.md").read_text()
    assert (
        text.count("## counter") == 1
        and json.loads(text.split("```json\n")[1].split("\n")[0]) == total
    )


# ---- indexed and searchable ------------------------------------------------------------------


def test_pool_files_are_indexed_and_searchable(ws: Workspace, embedder) -> None:
    ws = Workspace.open(ws.root, embedder=embedder)
    pool = ws.sharing.pool("research")
    pool.write("findings/volcano", "Mount Etna erupted twice in March")
    pool.write("findings/stats", {"eruptions": 2, "volcano": "Etna"})
    hits = ws.search("which volcano erupted", k=5)
    assert hits[0].path == "shared/research.md"
    assert "Etna" in hits[0].text
    keyword = ws.search("eruptions", mode="keyword", k=5)
    assert any(h.path == "shared/research.md" and "eruptions" in h.text for h in keyword)


# ---- context ---------------------------------------------------------------------------------


def test_build_context_injects_shared_entries_newest_first_within_the_budget(
    example: Workspace,
) -> None:
    pool = example.sharing.pool()
    pool.write("plan", "outline first, then draft")
    pool.write("stats", {"sources": 12, "verified": True})
    example.sharing.pool("research").write("paris", "Paris is the capital of France")
    pool.write("plan", "draft, then review")  # updated last: newest
    pool.write("huge", "word " * 2000)
    ctx = example.build_context(budget_tokens=4000)
    lines = [line for line in ctx.text.splitlines() if "[SHARED:" in line]
    assert lines[:4] == [
        "- [SHARED:huge] " + ("word " * 2000)[:599].rstrip() + "…",
        "- [SHARED:plan] draft, then review",
        "- [SHARED:research:paris] Paris is the capital of France",
        '- [SHARED:stats] {"sources": 12, "verified": true}',
    ]
    assert "## Shared Pool" in ctx.text
    by = {s.name: s for s in ctx.sources}
    assert by["shared"].files == ("shared/",) and by["shared"].omitted_units == 0
    for budget in (60, 150, 400, 900):
        small = example.build_context(budget_tokens=budget)
        assert small.tokens <= budget
    cut = {s.name: s for s in example.build_context(budget_tokens=900).sources}["shared"]
    assert cut.omitted_units > 0  # its share is 0.15 of 900 tokens: the oldest ones go
    assert "[... " in example.build_context(budget_tokens=900).text


# ---- CLI -------------------------------------------------------------------------------------

BIN = Path(sys.executable).parent / "mdmem"


def _mdmem(
    ws: Workspace, capsys: pytest.CaptureFixture[str], *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    """``mdmem pool ARGS`` through the console entry point, in this process (a process each
    costs a second on a busy machine; one real process is checked below)."""
    from mdmem.cli import main

    argv = ["mdmem", "-w", str(ws.root), "pool", *args]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", argv)
        patch.setattr(sys, "stdin", io.StringIO(stdin))
        with pytest.raises(SystemExit) as ended:
            main()
    out = capsys.readouterr()
    return int(ended.value.code or 0), out.out, out.err


def test_cli_set_get_list_rm_with_exit_codes(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _mdmem(ws, capsys, "set", "plan", "draft first", "--writer", "writer")
    assert code == 0 and out.startswith("shared/default.md:3  plan  v1")
    assert _mdmem(ws, capsys, "get", "plan")[1] == "draft first\n"
    code, _, _ = _mdmem(
        ws, capsys, "set", "stats", "-", "--json-value", "--pool", "research", stdin='{"n": 2}'
    )
    assert code == 0
    got = json.loads(_mdmem(ws, capsys, "get", "stats", "--pool", "research", "--json")[1])
    assert got["content"] == {"n": 2} and got["version"] == 1 and got["updated_by"] == "coder"
    conflict = subprocess.run(  # the real command, once
        [str(BIN), "-w", str(ws.root), "pool", "write", "plan", "late", "--expect-version", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert conflict.returncode == 3
    assert conflict.stderr == (
        "mdmem: error: shared/default.md: pool key 'plan': expected version 0, found version "
        "1; nothing was written (read it again and retry)\n"
    )
    assert _mdmem(ws, capsys, "set", "plan", "next", "--expect-version", "1")[0] == 0
    listed = json.loads(_mdmem(ws, capsys, "list", "--json")[1])
    assert [(e["key"], e["version"]) for e in listed] == [("plan", 2)]
    assert "plan  v2" in _mdmem(ws, capsys, "list")[1]
    assert _mdmem(ws, capsys, "rm", "plan")[1] == "archived plan (v2) in shared/default.md\n"
    code, _, err = _mdmem(ws, capsys, "get", "plan")
    assert code == 4 and "no key 'plan'" in err
    assert _mdmem(ws, capsys, "rm", "plan")[0] == 4
    code, _, err = _mdmem(ws, capsys, "set", "x", "{nope", "--json-value")
    assert code == 2 and "not JSON" in err and "Traceback" not in err
    code, _, err = _mdmem(ws, capsys, "set", "bad #", "x")
    assert code == 1 and "invalid pool key" in err


# ---- MCP -------------------------------------------------------------------------------------


def test_mcp_pool_read_and_pool_write_with_the_sdk_client(ws: Workspace) -> None:
    import anyio
    from mcp import Client

    from mdmem.integrations.mcp_server import build_server

    server = build_server(Workspace.open(ws.root), agent="writer", warm_up=False)

    async def main() -> dict[str, object]:
        out: dict[str, object] = {}
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            out["read_only"] = tools["pool_read"].annotations.read_only_hint
            out["set_schema"] = tools["pool_write"].input_schema
            first = await client.call_tool(
                "pool_write", {"key": "draft", "value": "v1 text", "metadata": {"stage": "a"}}
            )
            out["first"] = first.structured_content
            second = await client.call_tool(
                "pool_write", {"key": "draft", "value": {"words": 300}, "expected_version": 1}
            )
            out["second"] = second.structured_content
            stale = await client.call_tool(
                "pool_write", {"key": "draft", "value": "stale", "expected_version": 1}
            )
            out["stale"] = (stale.is_error, stale.content[0].text)
            out["got"] = (await client.call_tool("pool_read", {"key": "draft"})).structured_content
            listed = await client.call_tool("pool_read", {})
            out["listed"] = listed.structured_content
            missing = await client.call_tool("pool_read", {"key": "nope"})
            out["missing"] = (missing.is_error, missing.content[0].text)
        return out

    out = anyio.run(main)
    assert out["read_only"] is True
    assert out["set_schema"]["required"] == ["key", "value"]  # type: ignore[index]
    assert out["first"]["version"] == 1 and out["first"]["updated_by"] == "writer"  # type: ignore[index]
    assert out["second"]["content"] == {"words": 300}  # type: ignore[index]
    assert out["second"]["metadata"] == {"stage": "a"}  # type: ignore[index]
    assert out["stale"] == (
        True,
        "Error executing tool pool_write: shared/default.md: pool key 'draft': expected version 1, "
        "found version 2; nothing was written (read it again and retry)",
    )
    assert out["got"]["version"] == 2 and out["got"]["citation"] == "shared/default.md:3"  # type: ignore[index]
    assert [e["key"] for e in out["listed"]["entries"]] == ["draft"]  # type: ignore[index]
    assert out["missing"] == (
        True,
        "Error executing tool pool_read: no key 'nope' in shared/default.md",
    )


def test_an_open_fence_left_by_hand_never_swallows_a_write(ws: Workspace) -> None:
    pool = ws.sharing.pool()
    pool.write("first", "one")
    path = ws.root / "shared/default.md"
    broken = path.read_text() + "\n```\nnotes a person never closed\n"
    path.write_text(broken)
    with pytest.raises(FileProblem, match="would not read back") as caught:
        pool.write("second", "two")
    assert caught.value.path == "shared/default.md" and caught.value.line
    assert path.read_text() == broken  # nothing written
    assert pool.write("first", "still fine").version == 2  # in place, above the open fence


def test_two_writers_in_each_others_late_save_windows_duplicate_nothing(ws: Workspace) -> None:
    """Two agents, each with its own Workspace, writing within 250 ms of each other: the
    late-save guard of one took the other's write for an editor's save of an old copy, and its
    line merge (blank lines and fences repeat in a pool file) put back sections that were
    there: duplicated keys. A program write is no late save."""
    researcher, writer = ws.sharing.pool(), Workspace.open(ws.root).sharing.pool()
    keys = [f"k{n:02d}" for n in range(12)]
    for key in keys:
        researcher.write(key, f"value {key}")
    writer.write("k01", {"n": 1})  # within the researcher's window
    writer.write("k02", {"n": 2})
    researcher.write("k03", {"n": 3})  # on the writer's version, within its window
    time.sleep(0.6)  # past every window: a merge would have landed by now
    text = (ws.root / "shared/default.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [f"## {key}" for key in keys]
    assert [e.version for e in researcher.list() if e.key in ("k01", "k02", "k03")] == [2, 2, 2]
