"""MdmemSession against the OpenAI Agents SDK's ``Session`` protocol as documented: ``get_items``
(all, or the latest ``limit`` in order; ``session_settings.limit`` when no limit is given),
``add_items``, ``pop_item`` (the latest, or None), ``clear_session``, and a session reopened by
its id. The oracle is the SDK's own ``SQLiteSession``, driven with the same calls."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, set_tracing_disabled
from agents.memory import Session, SessionSettings
from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.integrations.openai_agents import MdmemSession

_ids = itertools.count()


@pytest.fixture(scope="module")
def full_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One workspace for the module: each test and generated example uses a session id of its
    own (and so a session file of its own)."""
    root = tmp_path_factory.mktemp("agents") / "ws"
    Workspace.init(root, mode="full", agent="agent")
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "agent"\n[embedding]\nmodel = ""\n')
    return Workspace.open(root)


def _new_id() -> str:
    return f"conformance-{next(_ids)}"


def test_it_is_a_session_of_the_sdk(full_ws: Workspace) -> None:
    session = MdmemSession(_new_id(), full_ws)
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
    reference = SQLiteSession("reference")
    try:  # the SDK's defaults, as its own sessions hold them
        assert session.session_settings == reference.session_settings == SessionSettings()
        assert session.session_settings.limit is None
    finally:
        reference.close()


@pytest.mark.parametrize(
    "item",
    [
        {"role": "user", "content": object()},
        {"role": "user", "content": b"bytes"},
        {"type": "function_call_output", "call_id": "c", "output": {1, 2}},
    ],
)
def test_an_item_json_cannot_hold_is_refused_as_sqlite_session_does(
    full_ws: Workspace, item: dict[str, Any]
) -> None:
    """SQLiteSession raises TypeError (``json.dumps``); storing ``str(value)`` instead would give
    back something else than was added. Nothing of the call is written."""
    reference = SQLiteSession("reference")
    session = MdmemSession(_new_id(), full_ws)
    good = {"role": "user", "content": "fine"}
    try:
        with pytest.raises(TypeError) as expected:
            asyncio.run(reference.add_items([good, item]))
        with pytest.raises(TypeError) as got:
            asyncio.run(session.add_items([good, item]))
        assert type(got.value) is type(expected.value)
        assert asyncio.run(reference.get_items()) == asyncio.run(session.get_items()) == []
    finally:
        reference.close()


# ---- get_items, pop_item, clear_session: generated calls against SQLiteSession ----------------

WORDS = st.sampled_from(["tea", "Paris", "weather", "deploy", "port 5433", "ok", "Ünïcode", ""])
TEXT = st.lists(WORDS, min_size=1, max_size=4).map(" ".join)
MESSAGE = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant", "system", "developer"]),
    TEXT,
)
CALL = st.builds(
    lambda n, city: {
        "type": "function_call",
        "call_id": f"call_{n}",
        "name": "weather",
        "arguments": json.dumps({"city": city}),
    },
    st.integers(0, 3),
    TEXT,
)
OUTPUT = st.builds(
    lambda n, text: {"type": "function_call_output", "call_id": f"call_{n}", "output": text},
    st.integers(0, 3),
    TEXT,
)
ITEMS = st.lists(st.one_of(MESSAGE, CALL, OUTPUT), max_size=4)


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of the protocol, or ``reopen`` (a new MdmemSession object with the same id)."""

    name: str
    arg: Any = None


CALLS = st.lists(
    st.one_of(
        st.builds(Call, st.just("add_items"), ITEMS),
        st.builds(Call, st.just("get_items"), st.one_of(st.none(), st.integers(-1, 6))),
        st.builds(Call, st.just("pop_item")),
        st.builds(Call, st.just("clear_session")),
        st.builds(Call, st.just("reopen")),
    ),
    min_size=1,
    max_size=10,
)


async def _call(session: Any, call: Call) -> Any:
    if call.name == "add_items":
        return await session.add_items(call.arg)
    if call.name == "get_items":
        return await session.get_items(call.arg)
    return await getattr(session, call.name)()


@settings(max_examples=30)  # each write is a locked, fsynced file write: kept cheaper
@given(calls=CALLS, default_limit=st.one_of(st.none(), st.integers(1, 3)))
def test_calls_match_the_sdks_sqlite_session(
    full_ws: Workspace, calls: list[Call], default_limit: int | None
) -> None:
    session_id = _new_id()
    given_settings = None if default_limit is None else SessionSettings(limit=default_limit)
    ours = MdmemSession(session_id, full_ws, session_settings=given_settings)
    reference = SQLiteSession(session_id, session_settings=given_settings)

    async def run() -> None:
        nonlocal ours
        for call in calls:
            if call.name == "reopen":
                ours = MdmemSession(session_id, full_ws, session_settings=given_settings)
                continue
            expected = await _call(reference, call)
            if call.name == "get_items" and call.arg is not None and call.arg < 0:
                # SQLite's LIMIT -1 means no limit; the protocol says "maximum number of items":
                # a limit below 1 gives none here (as the SDK's MongoDB and Dapr sessions do)
                expected = []
            assert await _call(ours, call) == expected, call
        assert await ours.get_items() == await reference.get_items()
        assert await MdmemSession(session_id, full_ws).get_items() == (
            await reference.get_items(limit=10_000)
        )

    try:
        asyncio.run(run())
    finally:
        reference.close()


# ---- session_settings ------------------------------------------------------------------------


def test_session_settings_limit_is_the_default_for_get_items(full_ws: Workspace) -> None:
    items = [{"role": "user", "content": f"message {n}"} for n in range(5)]
    session_id = _new_id()
    asyncio.run(MdmemSession(session_id, full_ws).add_items(items))
    limited = MdmemSession(session_id, full_ws, session_settings=SessionSettings(limit=2))
    assert asyncio.run(limited.get_items()) == items[-2:]
    assert asyncio.run(limited.get_items(limit=4)) == items[-4:]  # an explicit limit wins
    as_dict = MdmemSession(session_id, full_ws, session_settings={"limit": 3})
    assert isinstance(as_dict.session_settings, SessionSettings)  # the Runner calls .resolve
    assert asyncio.run(as_dict.get_items()) == items[-3:]
    assert asyncio.run(MdmemSession(session_id, full_ws).get_items()) == items


def _echo_model(seen: list[list[Any]]) -> Any:
    """A Model of the SDK that answers "ok" and keeps the input it was sent."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    class Echo(Model):
        async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(json.loads(json.dumps(input, default=str)))
            part = ResponseOutputText(type="output_text", text="ok", annotations=[])
            message = ResponseOutputMessage(
                id=f"msg_{len(seen)}", type="message", role="assistant", status="completed",
                content=[part],
            )  # fmt: skip
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    return Echo()


def test_the_runner_sends_only_the_history_the_settings_allow(full_ws: Workspace) -> None:
    set_tracing_disabled(True)
    seen: list[list[Any]] = []
    agent = Agent(name="helper", instructions="Be brief.", model=_echo_model(seen))
    session = MdmemSession(_new_id(), full_ws, session_settings=SessionSettings(limit=2))
    config = RunConfig(tracing_disabled=True)

    async def turns() -> None:
        for text in ("one", "two", "three"):
            await Runner.run(agent, text, session=session, run_config=config)
        await Runner.run(
            agent, "four", session=session,
            run_config=RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=4)),
        )  # fmt: skip

    asyncio.run(turns())
    texts = [[_text(item) for item in sent] for sent in seen]
    assert texts[0] == ["one"]
    assert texts[2] == ["two", "ok", "three"]  # the latest 2 stored items, then the new input
    assert texts[3] == ["two", "ok", "three", "ok", "four"]  # the run's own limit: 4
    assert len(asyncio.run(session.get_items(limit=100))) == 8  # all of it is kept


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def test_pop_and_clear_archive_in_the_file(full_ws: Workspace) -> None:
    session = MdmemSession(_new_id(), full_ws)
    asyncio.run(session.add_items([{"role": "user", "content": "keep me"},
                                   {"role": "assistant", "content": "pop me"}]))  # fmt: skip
    assert asyncio.run(session.pop_item()) == {"role": "assistant", "content": "pop me"}
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None
    text = Path(full_ws.root / str(session.path)).read_text()
    assert "## Archive" in text and "pop me" in text and "keep me" in text  # nothing deleted


def test_what_the_sdks_own_session_tests_ask_of_a_session(full_ws: Workspace) -> None:
    """The cases of the SDK's tests/memory/test_session.py that test no SQLite internals, written
    for MdmemSession: writes from threads with their own event loops all kept, text SQL would
    choke on and non-ASCII text back as added, two sessions written together kept apart, and
    ``close()`` (which code written for SQLiteSession calls)."""
    session = MdmemSession(_new_id(), full_ws)
    items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]

    def add(item: dict[str, Any]) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(session.add_items([item]))
        finally:
            loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(add, items))
    got = asyncio.run(session.get_items())
    assert sorted(i["content"] for i in got) == sorted(i["content"] for i in items)
    odd = [
        {"role": "user", "content": "O'Reilly"},
        {"role": "assistant", "content": "Robert'); DROP TABLE students;--"},
        {"role": "user", "content": '"SELECT * FROM users WHERE name = "admin";"'},
        {"role": "assistant", "content": "こんにちは 😊👍 Привет"},
    ]
    other = MdmemSession(_new_id(), full_ws)
    asyncio.run(other.add_items(odd))
    assert asyncio.run(other.get_items()) == odd
    one, two = MdmemSession(_new_id(), full_ws), MdmemSession(_new_id(), full_ws)

    async def together() -> None:
        await asyncio.gather(
            one.add_items([{"role": "user", "content": "one"}]),
            two.add_items([{"role": "user", "content": "two"}]),
        )

    asyncio.run(together())
    assert asyncio.run(one.get_items()) == [{"role": "user", "content": "one"}]
    assert asyncio.run(two.get_items()) == [{"role": "user", "content": "two"}]
    for each in (session, other, one, two):
        each.close()
    assert asyncio.run(MdmemSession(other.session_id, full_ws).get_items()) == odd


def _after_close(session: Any) -> list[str]:
    """What each of the protocol's calls answers on ``session`` once it is closed (twice)."""
    session.close()
    session.close()  # closing twice is no error
    calls = {
        "add": lambda: session.add_items([{"role": "user", "content": "late"}]),
        "add nothing": lambda: session.add_items([]),
        "get": lambda: session.get_items(),
        "get none": lambda: session.get_items(limit=0),
        "pop": lambda: session.pop_item(),
        "clear": lambda: session.clear_session(),
    }
    answers = []
    for name, call in calls.items():
        try:
            answers.append(f"{name}: {asyncio.run(call())!r}")
        except RuntimeError as exc:
            answers.append(f"{name}: RuntimeError {str(exc).replace(type(session).__name__, 'S')}")
    return answers


def test_a_closed_session_refuses_every_call_as_sqlite_session_does(
    full_ws: Workspace, tmp_path: Path
) -> None:
    """The SDK's test_sqlite_session_closed_rejects_empty_add_items, for every call: after
    ``close()`` a session answers nothing (not even an empty add), and one opened anew with
    the same id has the history."""
    history = [{"role": "user", "content": "kept"}]
    session = MdmemSession(_new_id(), full_ws)
    reference = SQLiteSession("reference", tmp_path / "reference.db")
    for each in (session, reference):
        asyncio.run(each.add_items(history))
    assert _after_close(session) == _after_close(reference)
    assert _after_close(session)[0] == "add: RuntimeError S is closed"
    again = MdmemSession(session.session_id, full_ws)
    assert asyncio.run(again.get_items()) == history
