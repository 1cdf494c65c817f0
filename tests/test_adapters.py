"""Framework adapters, each driven by a small agent loop of the real framework with a scripted
model (no network): the OpenAI Agents SDK's Runner with an MdmemSession, and a LangGraph graph
whose node uses MdmemStore."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mdmem import Workspace

agents = pytest.importorskip("agents")
langgraph = pytest.importorskip("langgraph")

SECRET = "ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


# ---- OpenAI Agents SDK ---------------------------------------------------------------------


def _scripted_model(replies: list[list[Any]], seen: list[list[Any]]) -> Any:
    """A Model of the SDK that answers from a script and keeps what it was sent."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage

    class Scripted(Model):
        async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(json.loads(json.dumps(input, default=str)))
            return ModelResponse(output=replies.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    return Scripted()


def _message(text: str, msg_id: str) -> Any:
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id=msg_id, type="message", role="assistant", status="completed", content=[part]
    )


def _call(name: str, arguments: str, call_id: str) -> Any:
    from openai.types.responses import ResponseFunctionToolCall

    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=arguments, call_id=call_id, id=f"fc_{call_id}"
    )


def _reasoning(text: str) -> Any:
    from openai.types.responses import ResponseReasoningItem
    from openai.types.responses.response_reasoning_item import Summary

    return ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text=text)]
    )


def test_agents_sdk_runner_keeps_history_in_a_session_file(ws: Workspace) -> None:
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled

    from mdmem.integrations.openai_agents import MdmemSession

    set_tracing_disabled(True)

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}, 21 C"

    seen: list[list[Any]] = []
    model = _scripted_model(
        [
            [
                _reasoning("The user asks for weather: call the tool."),
                _call("weather", '{"city": "Paris"}', "call_1"),
            ],
            [_message("It is sunny in Paris, 21 C.", "msg_1")],
            [_message("You asked about Paris.", "msg_2")],
        ],
        seen,
    )
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[weather])
    session = MdmemSession("user-42", ws, title="Weather chat")
    config = RunConfig(tracing_disabled=True)

    async def loop() -> tuple[str, str]:
        first = await Runner.run(agent, "Weather in Paris?", session=session, run_config=config)
        second = await Runner.run(
            agent, f"Which city did I ask about? My token is {SECRET}", session=session,
            run_config=config,
        )  # fmt: skip
        return first.final_output, second.final_output

    first, second = asyncio.run(loop())
    assert (first, second) == ("It is sunny in Paris, 21 C.", "You asked about Paris.")
    # the third model call got the whole first run back from the session file, exactly
    history = seen[2]
    assert history[0] == {"content": "Weather in Paris?", "role": "user"}
    kinds = [item.get("type", item.get("role")) for item in history]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output", "message",
                     "user"]  # fmt: skip
    assert history[:4] == seen[1]  # what the second model call saw, item for item
    # this turn's input goes to the model as typed; what is stored has its secret masked
    stored = asyncio.run(session.get_items())
    assert stored[5] == {"role": "user", "content": history[-1]["content"].replace(
        SECRET, "[REDACTED:github]")}  # fmt: skip

    # a native session file a person can read
    path = session.path
    assert path is not None and path.startswith(".sessions/") and path.endswith("_weather-chat.md")
    record = ws.session_record(Path(path).stem)
    assert [(e.action, e.text) for e in record.events] == [
        ("user", "Weather in Paris?"),
        ("thinking", "The user asks for weather: call the tool."),
        ("tool_call", 'weather({"city": "Paris"})'),
        ("tool_result", "weather → Sunny in Paris, 21 C"),
        ("assistant", "It is sunny in Paris, 21 C."),
        ("user", "Which city did I ask about? My token is [REDACTED:github]"),
        ("assistant", "You asked about Paris."),
    ]
    front = ws.read(path).frontmatter
    assert front["source"] == "openai-agents" and front["conversation"] == "user-42"
    assert SECRET not in (ws.root / path).read_text()

    # the same session id in another process (a new object) finds the same file
    again = MdmemSession("user-42", ws.root)
    items = asyncio.run(again.get_items())
    assert len(items) == 7 and asyncio.run(again.get_items(limit=2)) == items[-2:]

    # pop and clear archive: nothing is deleted
    last = asyncio.run(again.pop_item())
    assert last["content"][0]["text"] == "You asked about Paris."
    assert len(asyncio.run(again.get_items())) == 6
    asyncio.run(again.clear_session())
    assert asyncio.run(again.get_items()) == []
    text = (ws.root / path).read_text()
    assert "## Archive" in text and text.count("archived=") == 7
    assert "You asked about Paris." in text.split("## Archive")[1]
    assert asyncio.run(again.pop_item()) is None


def test_agents_session_items_round_trip_exactly(ws: Workspace) -> None:
    from mdmem.integrations.openai_agents import MdmemSession

    image = (
        "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4" * 800
    )
    items = [
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture? <!-- not a comment -->"},
            {"type": "input_image", "image_url": image, "detail": "auto"}]},
        {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "gAAAA" + "x" * 30_000},
        {"role": "assistant", "content": "A red pixel.\n\n## Not a heading\n\n```\ncode\n```"},
        {"type": "function_call_output", "call_id": "c1", "output": "y" * 25_000},
    ]  # fmt: skip
    session = MdmemSession("exact", ws)
    asyncio.run(session.add_items(items))
    assert asyncio.run(MdmemSession("exact", ws).get_items()) == items
    record = ws.session_record(Path(session.path).stem)
    assert [e.action for e in record.events] == ["user", "thinking", "assistant", "tool_result"]
    assert record.events[0].text.endswith("[image]")  # the file shows what it is, not the data
    assert "characters omitted" in record.events[3].text  # the readable text is cut; the item not


def test_agents_session_honours_a_persons_edit(ws: Workspace) -> None:
    from mdmem.integrations.openai_agents import MdmemSession

    session = MdmemSession("edited", ws)
    asyncio.run(session.add_items([
        {"role": "user", "content": "My name is Ana."},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Hello Ana.",
                                           "annotations": []}]},
    ]))  # fmt: skip
    path = ws.root / session.path
    path.write_text(path.read_text().replace("My name is Ana.", "My name is Anna."))
    items = asyncio.run(session.get_items())
    assert items[0] == {"role": "user", "content": "My name is Anna."}
    assert items[1]["content"][0]["text"] == "Hello Ana."  # untouched: exactly as added
