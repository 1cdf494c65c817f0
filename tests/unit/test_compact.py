"""Compaction: the offline engine on real-looking sessions and chat, the format, merging, and
the LLM engine through litellm's mock responses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdmem.config import LLMConfig
from mdmem.distill.compact import compact, compact_llm, compact_offline, merge, should_compact
from mdmem.distill.llm import LLMError
from mdmem.distill.transcript import load_messages
from mdmem.errors import FileProblem
from mdmem.memory.compact_memory import CompactMemory, KeyEvent, read_memory

EXAMPLE = Path(__file__).resolve().parents[2] / "example_workspace"
SESSIONS = sorted((EXAMPLE / ".sessions").glob("*.md"))


@pytest.fixture(scope="module")
def session_messages() -> list[dict[str, str]]:
    return [m for path in SESSIONS for m in load_messages(path)]


@pytest.fixture(scope="module")
def memory(session_messages) -> CompactMemory:
    return compact_offline(session_messages)


def event_with(memory: CompactMemory, *needles: str) -> KeyEvent:
    hits = [e for e in memory.events if all(n in e.text for n in needles)]
    assert hits, f"no event with {needles}:\n{memory.render()}"
    return hits[0]


# ---- offline engine on the example sessions ---------------------------------------------------


def test_errors_keep_their_fix_and_result(memory: CompactMemory) -> None:
    enum = event_with(memory, 'type "invoice_status" does not exist')
    assert enum.tag == "error→fix" and "checkfirst=True" in enum.text
    assert enum.date == "2026-11-19"
    testdb = event_with(memory, 'database "invoice_test" does not exist', "01-create-test-db.sql")
    assert testdb.text.index("does not exist") < testdb.text.index("01-create-test-db.sql")
    assert "6 passed" in testdb.text  # cause → fix → result
    event_with(memory, "libgobject-2.0-0", "libpango")
    event_with(memory, "□□□□", "fonts-noto-cjk")


def test_files_decisions_and_open_problems_survive(memory: CompactMemory) -> None:
    event_with(memory, "app/services/numbering.py")
    event_with(memory, "Fly.io instead of Heroku")
    assert any(e.tag == "error" and "PGPASSWORD" in e.text for e in memory.events)


def test_thinking_and_tool_chatter_dropped(memory: CompactMemory) -> None:
    text = memory.render()
    assert "gh pr diff 9 --name-only" not in text  # a tool call
    assert "0003 is safe" not in text  # ordinary thinking
    assert "uv add fastapi" not in text
    assert "Resolved 31 packages" not in text  # an uneventful tool result


def test_repeated_content_keeps_only_the_latest(memory: CompactMemory) -> None:
    passed = [e for e in memory.events if e.tag == "test" and "passed in" in e.text]
    assert [e.text for e in passed] == ["19 passed in 5.40s"]


def test_time_order_and_much_smaller(session_messages, memory: CompactMemory) -> None:
    dates = [e.date for e in memory.events if e.date]
    assert dates == sorted(dates) and dates[0] == "2026-11-16" and dates[-1] == "2026-11-20"
    before = sum(len(m["content"]) for m in session_messages)
    assert len(memory.render()) < 0.75 * before


def test_state_is_the_latest_word(memory: CompactMemory) -> None:
    state = "\n".join(memory.state)
    assert state.startswith("Task: Review PR #9")
    assert "Changes requested on PR #9" in state
    assert "Next step" not in state  # from 2026-11-19: CI was fixed on 2026-11-20
    assert "Unresolved: With 20 concurrent POST /invoices, 7 failed" in state


def test_deterministic(session_messages) -> None:
    assert compact_offline(session_messages).render() == compact_offline(session_messages).render()


def test_previous_memory_is_merged_not_thrown_away(session_messages) -> None:
    previous = read_memory((EXAMPLE / ".compact_memory.md").read_text(encoding="utf-8"))
    newer = [
        {"role": "tool", "content": "2026-11-22 10:00:01 [tool_result] 31 passed in 6.02s"},
        {"role": "assistant", "content": "2026-11-22 10:05:00 [complete] Merged PR #9 to main"},
    ]
    merged = compact_offline(newer, previous=previous)
    texts = [e.text for e in merged.events]
    assert any("fonts-noto-cjk" in t for t in texts)  # an old event is kept
    assert merged.events[-1].date == "2026-11-22" and "31 passed" in merged.events[-1].text
    assert len(merged.events) == len(previous.events) + 1
    state = "\n".join(merged.state)
    assert "Merged PR #9 to main" in state and "31 passed" in state
    assert "27 tests pass locally" not in state  # the newer test result replaced it
    assert "Deploy target is Fly.io staging" in state  # untouched old state stays


# ---- offline engine on plain chat -------------------------------------------------------------

CHAT = [
    {"role": "user", "content": "Hi! How are you today?"},
    {"role": "assistant", "content": "Great, thanks! What shall we work on?"},
    {
        "role": "user",
        "content": "Let's build the CSV importer. We decided to use polars instead of pandas.",
    },
    {"role": "assistant", "content": "Hmm, let me think about the structure first. Maybe a class?"},
    {"role": "tool", "content": "ImportError: cannot import name 'read_csv_batched' from 'polars'"},
    {"role": "assistant", "content": "Fixed by pinning polars>=1.0 in pyproject.toml."},
    {"role": "tool", "content": "3 passed in 0.41s"},
    {"role": "assistant", "content": "Wrote importer/csv_reader.py with a streaming reader."},
    {"role": "tool", "content": "5 passed in 0.52s"},
    {"role": "user", "content": "Cool, thanks!"},
]


def test_chat_keeps_the_chain_and_drops_chatter() -> None:
    memory = compact_offline(CHAT, now="2026-03-02")
    text = memory.render()
    chain = event_with(memory, "ImportError", "polars>=1.0")
    assert chain.tag == "error→fix" and "3 passed" in chain.text
    assert chain.date == "2026-03-02"
    event_with(memory, "polars instead of pandas")
    event_with(memory, "importer/csv_reader.py")
    assert "How are you" not in text and "Cool, thanks" not in text and "Maybe a class" not in text
    assert [e.text for e in memory.events if e.tag == "test"] == ["5 passed in 0.52s"]


def test_chat_about_people_keeps_dated_facts() -> None:
    chat = [
        {
            "role": "user",
            "name": "Ana",
            "timestamp": "2023-05-08T13:56:00",
            "content": "Hey Ben! I went to a pottery workshop yesterday and made my first bowl.",
        },
        {
            "role": "assistant",
            "name": "Ben",
            "timestamp": "2023-05-08T13:56:00",
            "content": "Wow, that's awesome! How did it feel?",
        },
        {
            "role": "user",
            "name": "Ana",
            "timestamp": "2023-05-08T13:56:00",
            "content": "So good. I'm moving to Lisbon in June for my new job.",
        },
    ]
    memory = compact_offline(chat)
    pottery = event_with(memory, "Ana:", "pottery workshop yesterday (2023-05-07)")
    assert pottery.date == "2023-05-08"
    event_with(memory, "Lisbon in June")
    assert "How did it feel" not in memory.render()


def test_budget_keeps_the_most_important() -> None:
    full = compact_offline(CHAT)
    memory = compact_offline(CHAT, budget_tokens=70)
    assert len(memory.events) < len(full.events)
    assert memory.events[0].tag == "error→fix"  # the highest score goes in first
    assert "polars instead of pandas" not in memory.render()  # the lowest (6) does not fit


# ---- the format -------------------------------------------------------------------------------


def test_render_parse_round_trip() -> None:
    memory = CompactMemory(
        state=("Branch main; 5 tests pass",),
        events=(KeyEvent("2026-11-16", "error→fix", "X failed; fixed: Y"), KeyEvent(None, "", "z")),
    )
    text = memory.render()
    assert text.startswith("# Compact Memory\n\n## State\n- Branch main; 5 tests pass\n")
    assert "\n## Key Events\n- 2026-11-16 [error→fix] X failed; fixed: Y\n- z\n" in text
    assert read_memory(text, level=None) == memory
    example = (EXAMPLE / ".compact_memory.md").read_text(encoding="utf-8")
    assert read_memory(example, level=None).render() == example


def test_parse_tolerates_hand_edits() -> None:
    text = """# Compact memory

Some intro a person wrote.

## Current state
* Deploys go to Fly.io
  (staging only, for now)

Plain line under the state (a paragraph: read as a line in a model's reply)

## Key events
1. 2026-11-16 [decision] Use Postgres 16
- no date, no tag, written by hand
"""
    memory = read_memory(text, level=None)
    assert memory.state == (
        "Deploys go to Fly.io (staging only, for now)",
        "Plain line under the state (a paragraph: read as a line in a model's reply)",
    )
    assert memory.events == (
        KeyEvent("2026-11-16", "decision", "Use Postgres 16"),
        KeyEvent(None, "", "no date, no tag, written by hand"),
    )


def test_merge_drops_superseded_events_and_state() -> None:
    old = CompactMemory(
        state=("CI red: run 11 fails on Create test DB", "Owner: Chen Jing"),
        events=(KeyEvent("2026-11-19", "error", "CI run fails: no password supplied"),),
    )
    new = CompactMemory(
        state=("CI green since run 12",),
        events=(
            KeyEvent(
                "2026-11-20", "error→fix", "CI run fails: no password supplied; fixed: PGPASSWORD"
            ),
        ),
    )
    merged = merge(old, new)
    assert merged.state == ("CI green since run 12", "Owner: Chen Jing")
    assert [e.tag for e in merged.events] == ["error→fix"]


# ---- LLM engine and dispatcher ----------------------------------------------------------------

LLM_REPLY = """Here is the compact memory:

```markdown
# Compact Memory

## State
- CSV importer done; 5 tests pass

## Key Events
- 2026-03-02 [error→fix] ImportError on polars; fixed by pinning polars>=1.0
```
"""


def test_compact_llm_parses_fenced_markdown_and_merges_previous() -> None:
    previous = CompactMemory(events=(KeyEvent("2026-03-01", "decision", "Use polars"),))
    memory, reply = compact_llm(
        CHAT, LLMConfig(model="gpt-4o-mini"), previous=previous, mock_response=LLM_REPLY
    )
    assert memory.state == ("CSV importer done; 5 tests pass",)
    assert [e.date for e in memory.events] == ["2026-03-01", "2026-03-02"]
    assert reply.cost is not None


def test_compact_llm_rejects_an_unusable_reply() -> None:
    with pytest.raises(LLMError, match="not a compact memory: 'Sorry, I cannot help"):
        compact_llm(CHAT, LLMConfig(model="gpt-4o-mini"), mock_response="Sorry, I cannot help.")


def test_compact_dispatches_and_reports(session_messages) -> None:
    offline = compact(session_messages, llm=LLMConfig())
    assert offline.engine == "offline" and offline.cost is None
    assert offline.tokens_before > offline.tokens_after > 0
    assert offline.ratio == pytest.approx(offline.tokens_after / offline.tokens_before, abs=1e-3)
    forced = compact(CHAT, llm=LLMConfig(model="gpt-4o-mini"), offline=True)
    assert forced.engine == "offline"
    online = compact(CHAT, llm=LLMConfig(model="gpt-4o-mini"), mock_response=LLM_REPLY)
    assert online.engine == "llm" and online.cost and online.cost > 0
    assert online.memory.state == ("CSV importer done; 5 tests pass",)


def test_should_compact() -> None:
    long = [{"role": "user", "content": "word " * 2000}]
    assert should_compact(long, threshold=1000)
    assert not should_compact(long, threshold=100_000)
    assert should_compact(long, threshold=1000, model="gpt-4o-mini")  # litellm's tokenizer


# ---- transcripts -------------------------------------------------------------------------------


def test_load_messages_normalizes_parts_and_tool_calls(tmp_path: Path) -> None:
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Run the tests"}, {"type": "image_url"}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"cmd": "pytest"}'},
                }
            ],
        },
        {"role": "tool", "content": "3 passed"},
        {"role": "assistant", "content": ""},
    ]
    assert load_messages(messages) == [
        {"role": "user", "content": "Run the tests\n[image]"},
        {"role": "assistant", "content": '[tool_call] shell({"cmd": "pytest"})'},
        {"role": "tool", "content": "3 passed"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n\n")
    assert load_messages(path) == load_messages(messages)


def test_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": \n')
    with pytest.raises(FileProblem, match=r"chat\.jsonl:2: invalid JSON"):
        load_messages(path)


def test_session_file_dates_its_request() -> None:
    messages = load_messages(SESSIONS[0])
    assert messages[0]["role"] == "user" and messages[0]["timestamp"] == "2026-11-16T09:12:04"
    assert messages[1]["content"].startswith("2026-11-16 09:12:31 [planning]")


# ---- fixes found on the example sessions ------------------------------------------------------


def undated(path: Path) -> list[dict[str, str]]:
    """A session's messages as an agent holds them: the request carries no timestamp."""
    return [{k: v for k, v in m.items() if k != "timestamp"} for m in load_messages(path)]


def session(name: str) -> Path:
    return next(p for p in SESSIONS if name in p.name)


def test_request_is_the_task_not_a_tagged_undated_event() -> None:
    memory = compact_offline(undated(session("invoice-status-enum-ci")))
    assert memory.state[0].startswith("Task: Add a status column to invoices")
    assert not any("Add a status column" in e.text for e in memory.events)
    assert not any("Push to" in s for s in memory.state)  # a request is no state
    assert all(e.date == "2026-11-19" for e in memory.events)  # the request's day, too
    decision = event_with(memory, "Fly.io")
    assert decision.tag == "decision"
    assert decision.text == (
        "The team decided in this morning's (2026-11-19) meeting to deploy to Fly.io instead "
        "of Heroku."
    )  # the instruction tacked on ("so drop the Heroku deploy job ...") is not kept


def test_closing_summary_is_no_fix_for_an_earlier_error() -> None:
    memory = compact_offline(undated(session("invoice-status-enum-ci")))
    bogus = [e for e in memory.events if "could not get CI green" in e.text]
    assert bogus and all(e.tag == "error" and "fixed:" not in e.text for e in bogus)


def test_state_has_no_near_duplicates_and_user_words_are_neutral_and_dated() -> None:
    state = compact_offline(undated(session("invoice-status-enum-ci"))).state
    assert not any(s.startswith("19 passed") for s in state)  # "19 pass locally" came later
    assert any("19 pass locally" in s for s in state)
    review = compact_offline(undated(session("review-pr-9")))
    ci = [s for s in review.state if s.startswith("CI is green")]
    assert ci == [
        "CI is green since this morning (2026-11-20), User fixed the psql password in the "
        "workflow by hand."
    ]
    assert all(e.date for e in review.events)


def test_problems_reported_as_fixed_are_not_unresolved() -> None:
    state = compact_offline(undated(session("add-pdf-export"))).state
    assert not any(s.startswith("Unresolved:") for s in state)  # "needed two fixes: ..."
    review = compact_offline(undated(session("review-pr-9"))).state
    assert any(s.startswith("Unresolved: With 20 concurrent POST /invoices") for s in review)


def test_strip_volatile_and_possessive_relative_dates() -> None:
    from mdmem.distill.rules import resolve_relative_dates, strip_volatile

    assert (
        strip_volatile('Run 11873320451, "Run migrations": localhost:5433 Connection refused')
        == '"Run migrations": localhost:5433 Connection refused'
    )
    assert strip_volatile("19 passed in 5.12s") == "19 passed"
    assert strip_volatile("2026-11-19 14:55:09 built abc1234f (took 3.2s)") == "built"
    assert (
        resolve_relative_dates("in this morning's meeting", "2026-11-19")
        == "in this morning's (2026-11-19) meeting"
    )


def test_llm_reply_with_a_code_block_inside_is_kept() -> None:
    reply = (
        "# Compact Memory\n\n## State\n- run the tests with:\n```\nuv run pytest\n```\n\n"
        "## Key Events\n- 2026-11-20 [test] 28 passed\n"
    )
    memory, _ = compact_llm(
        [{"role": "user", "content": "run the tests"}],
        LLMConfig(model="gpt-4o-mini"),
        mock_response=reply,
    )
    assert memory.events[-1].text == "28 passed"
    fenced = "```markdown\n" + reply + "```"
    again, _ = compact_llm(
        [{"role": "user", "content": "run the tests"}],
        LLMConfig(model="gpt-4o-mini"),
        mock_response=fenced,
    )
    assert again.events == memory.events


def test_transcripts_with_a_bom_load(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"role": "user", "content": "hi"}).encode())
    assert load_messages(path) == [{"role": "user", "content": "hi"}]
