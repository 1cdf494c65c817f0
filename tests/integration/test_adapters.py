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
    record = ws.sessions.record(Path(path).stem)
    assert [(e.action, e.text) for e in record.events] == [
        ("user", "Weather in Paris?"),
        ("thinking", "The user asks for weather: call the tool."),
        ("tool_call", 'weather({"city": "Paris"})'),
        ("tool_result", "weather → Sunny in Paris, 21 C"),
        ("assistant", "It is sunny in Paris, 21 C."),
        ("user", "Which city did I ask about? My token is [REDACTED:github]"),
        ("assistant", "You asked about Paris."),
    ]
    front = ws.files.read(path).frontmatter
    assert front["source"] == "openai-agents" and front["conversation"] == "user-42"
    assert SECRET not in (ws.root / path).read_text()

    # the same session id in another process (a new object) finds the same file
    ws.close()  # (this process ends: its late-save windows close)
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
    record = ws.sessions.record(Path(session.path).stem)
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


# ---- LangGraph -----------------------------------------------------------------------------


def _keyword_only(ws: Workspace) -> Workspace:
    (ws.root / "mdmem.toml").write_text('mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n')
    return Workspace.open(ws.root)


def test_langgraph_graph_remembers_through_the_store(ws: Workspace) -> None:
    from typing import TypedDict

    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import HumanMessage, SystemMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    from mdmem.integrations.langgraph_store import MdmemStore

    ws = _keyword_only(ws)
    model = FakeListChatModel(
        responses=[
            "REMEMBER: The user's dog is called Pixel.",
            "Your dog is called Pixel.",
        ]
    )
    prompts: list[str] = []

    class State(TypedDict):
        user: str
        question: str
        memories: list[str]
        answer: str

    def recall(state: State, runtime: Runtime) -> dict:
        found = runtime.store.search(("memories", state["user"]), query=state["question"], limit=3)
        return {"memories": [item.value["text"] for item in found]}

    def respond(state: State, runtime: Runtime) -> dict:
        system = "Known about the user:\n" + "\n".join(state["memories"])
        prompts.append(system)
        reply = model.invoke([SystemMessage(system), HumanMessage(state["question"])]).content
        if reply.startswith("REMEMBER: "):
            text = reply.removeprefix("REMEMBER: ")
            runtime.store.put(("memories", state["user"]), "dog", {"text": text, "source": "chat"})
            reply = "Noted."
        return {"answer": reply}

    graph = StateGraph(State)
    graph.add_node("recall", recall)
    graph.add_node("respond", respond)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "respond")
    graph.add_edge("respond", END)
    store = MdmemStore(ws)
    app = graph.compile(store=store)

    first = app.invoke({"user": "u1", "question": "My dog is called Pixel.", "memories": []})
    assert first["answer"] == "Noted." and first["memories"] == []
    second = app.invoke({"user": "u1", "question": "What is my dog called?", "memories": []})
    assert second["memories"] == ["The user's dog is called Pixel."]  # found by mdmem's search
    assert "Pixel" in prompts[1] and second["answer"] == "Your dog is called Pixel."

    # the memory is a Markdown file a person can read, and search finds a person's edit
    path = ws.root / "store" / "memories" / "u1" / "dog.md"
    text = path.read_text()
    assert 'value: {"text": "The user\'s dog is called Pixel.", "source": "chat"}' in text
    assert "text: The user's dog is called Pixel." in text
    item = store.get(("memories", "u1"), "dog")
    assert item.value == {"text": "The user's dog is called Pixel.", "source": "chat"}
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    hits = ws.search("Pixel", path="store/**")
    assert hits and hits[0].path == "store/memories/u1/dog.md"


def test_langgraph_store_operations(ws: Workspace) -> None:
    from langgraph.store.base import ListNamespacesOp, MatchCondition

    from mdmem.integrations.langgraph_store import MdmemStore

    ws = _keyword_only(ws)
    store = MdmemStore(ws)
    ns = ("docs", "team/a")  # a label with a slash is still one folder
    store.put(ns, "plan", {"text": "Ship the invoice export in March", "priority": 2})
    store.put(ns, "risk", {"text": "The invoice export may slip", "priority": 5})
    store.put(ns, "secret-ish", {"text": "invoice numbering internals", "priority": 9}, index=False)
    store.put(("docs", "team-b"), "plan", {"text": "Hire a designer", "priority": 1})
    store.put(("users", "u1", "prefs"), "theme", {"text": "dark"})

    # index=False: kept and listed, but no query finds it (and nothing of it is embedded)
    assert store.get(ns, "secret-ish").value["priority"] == 9
    found = store.search(("docs",), query="invoice")
    assert {i.key for i in found} == {"plan", "risk"}
    assert all(i.score is not None for i in found)
    assert len(store.search(("docs",))) == 4
    # filters: exact values and operators, with and without a query
    assert [i.key for i in store.search(("docs",), query="invoice", filter={"priority": 5})] == [
        "risk"
    ]
    gte = store.search(("docs",), filter={"priority": {"$gte": 2, "$lt": 9}})
    assert sorted(i.key for i in gte) == ["plan", "risk"]
    assert {i.namespace for i in store.search(("docs", "team/a"))} == {ns}
    # namespaces, with match conditions, depth, limit
    assert store.list_namespaces() == [
        ("docs", "team-b"),
        ("docs", "team/a"),
        ("users", "u1", "prefs"),
    ]
    assert store.list_namespaces(prefix=("docs",)) == [("docs", "team-b"), ("docs", "team/a")]
    assert store.list_namespaces(suffix=("prefs",)) == [("users", "u1", "prefs")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("users",)]
    conditions = (MatchCondition("prefix", ("*", "team-b")),)
    assert store.batch([ListNamespacesOp(match_conditions=conditions)])[0] == [("docs", "team-b")]
    # an update keeps `created`; delete archives the file
    created = store.get(ns, "plan").created_at
    store.put(ns, "plan", {"text": "Ship the invoice export in April", "priority": 2})
    assert store.get(ns, "plan").created_at == created
    assert store.get(ns, "plan").value["text"].endswith("April")
    store.delete(ns, "plan")
    assert store.get(ns, "plan") is None
    trashed = list((ws.root / ".trash" / "store").rglob("plan.md"))
    assert len(trashed) == 1 and "April" in trashed[0].read_text()
    assert {i.key for i in store.search(("docs",), query="invoice")} == {"risk"}
    # async, through the same batch
    assert asyncio.run(store.aget(ns, "risk")).value["priority"] == 5
    # a person's bad edit is named by file and line
    bad = ws.root / "store" / "users" / "u1" / "prefs" / "theme.md"
    bad.write_text(bad.read_text().replace('"dark"}', '"dark"'))
    from mdmem.errors import FileProblem

    with pytest.raises(FileProblem, match=r"store/users/u1/prefs/theme.md:6: value: not JSON"):
        store.get(("users", "u1", "prefs"), "theme")


@pytest.mark.slow
def test_langgraph_search_is_semantic_with_the_embedding_model(ws: Workspace, embedder) -> None:
    from mdmem.integrations.langgraph_store import MdmemStore

    store = MdmemStore(Workspace.open(ws.root, embedder=embedder))
    store.put(("m", "u1"), "pet", {"text": "Has a golden retriever named Pixel"})
    store.put(("m", "u1"), "job", {"text": "Works as a tax accountant in Porto"})
    store.put(("m", "u1"), "food", {"text": "Allergic to peanuts"})
    found = store.search(("m", "u1"), query="which animal lives with them", limit=1)
    assert [i.key for i in found] == ["pet"]  # no word in common: the vector side found it
