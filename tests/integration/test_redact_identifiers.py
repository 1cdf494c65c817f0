"""Identifiers are structure: the redactor never rewrites them (issue 33 §1).

Before the fix the assignment rules fired on mdmem's own labels (``key: "item_user1"``,
``conversation: conv-01H8…``, ``# Session: thread_…``): LangGraph keys came back as
``[REDACTED:secret]``, a re-import made a second session file, a reopened Agents SDK session saw
no items, and world and pool keys were masked and then raised. Each test goes through the
adapter a user calls, never a bare string; identifiers come from a generator of the shapes
agents and frameworks use (UUIDs, ULIDs, git SHAs, ``thread_…``, ``conv-…``, ``call_…``,
``resp_…``, ``msg_…``, ``item_user1``, CamelCase names).
"""

from __future__ import annotations

import asyncio
import json
import string
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mdmem import Workspace
from mdmem.integrations.importers import import_path
from mdmem.markdown.frontmatter import head_frontmatter
from mdmem.redact import DEFAULT, SecretInField

ALNUM = string.ascii_letters + string.digits
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
GITHUB_TOKEN = "ghp_" + "R2d2C3po" * 4 + "Bb8K"  # a made-up token in GitHub's format


def _text(alphabet: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=low, max_size=high)


IDENTIFIERS = st.one_of(
    st.uuids(version=4).map(str),
    st.uuids().map(lambda u: u.hex),
    _text(CROCKFORD, 26, 26),  # ULID
    _text("0123456789abcdef", 7, 40),  # git SHAs, short and long
    st.tuples(
        st.sampled_from(["thread_", "conv-", "call_", "resp_", "msg_", "run_", "toolu_", "fc_"]),
        _text(ALNUM, 12, 48),
    ).map("".join),
    st.integers(0, 10**6).map(lambda n: f"item_user{n}"),
    st.lists(
        st.tuples(_text(string.ascii_uppercase, 1, 1), _text(string.ascii_lowercase, 1, 8)),
        min_size=1,
        max_size=5,
    ).map(lambda parts: "".join(a + b for a, b in parts) + "Handler"),
    st.from_regex(r"\A[A-Za-z][A-Za-z0-9_\-]{0,60}\Z"),
)
SHAPES = [
    "item_user1",
    "a1b2c3d4e5f6",
    "0b5f3c1e-8d2a-4f7b-9c6e-1a2b3c4d5e6f",
    "01H8X7Z2K3M4N5P6Q7R8S9T0AB",
    "conv-01H8X7Z2K3M4N5P6Q7R8S9T0",
    "thread_abc123XYZ789def456",
    "call_Qw3rTy8UiOp2AsDf6GhJkL9z",
    "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452fe3abc",
    "msg_01XFDUDYJgAACzvnptvVoYEL",
    "9fceb02d0ae598e95dc970b74767f19372d61af8",
    "AbstractSingletonProxyFactoryBean",
]
_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
_CHEAPER = settings(_SETTINGS, max_examples=30)
"""For the tests whose every example opens a workspace and imports or reopens a session twice
(~0.2 s each): 30 generated identifiers, plus the pinned shapes, keep the file's run near 15 s."""


def _workspace(root: Path) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    (root / "mdmem.toml").write_text('mode = "full"\n[embedding]\nmodel = ""\n')
    return Workspace.open(root)


def _front(ws: Workspace, rel: str) -> dict:
    """A session's frontmatter as mdmem reads it (every value a string as written)."""
    return head_frontmatter((ws.root / rel).read_text()) or {}


def _refused(identifier: str) -> bool:
    """An identifier that holds a provider-format secret is refused, never stored masked."""
    return bool(DEFAULT.provider_spans(identifier))


# ---- LangGraph store ----------------------------------------------------------------------------


@_SETTINGS
@given(key=IDENTIFIERS)
@example(key=SHAPES[0])
@example(key=SHAPES[1])
@example(key=SHAPES[2])
@example(key="CamelCaseName")
def test_langgraph_keys_round_trip(tmp_path: Path, key: str) -> None:
    from mdmem.integrations.langgraph_store import MdmemStore

    ws = _workspace(tmp_path / uuid.uuid4().hex)
    store = MdmemStore(ws)
    value = {"text": f"notes filed under {key}", "password": "hunter2-Blue99"}
    if _refused(key):
        with pytest.raises(SecretInField):
            store.put(("docs", key), key, value)
        return
    store.put(("docs", key), key, value)
    item = store.get(("docs", key), key)
    assert item is not None and item.key == key and item.namespace == ("docs", key)
    assert item.value["password"] == "[REDACTED:password]"  # the value is content: masked
    listed = store.search(("docs", key))
    assert [(i.namespace, i.key) for i in listed] == [(("docs", key), key)]
    assert ("docs", key) in store.list_namespaces(prefix=("docs",))


def test_langgraph_many_uuid_keys_stay_distinct(tmp_path: Path) -> None:
    """LangGraph's documented pattern: ``str(uuid4())`` keys. They once all became one key."""
    from mdmem.integrations.langgraph_store import MdmemStore

    store = MdmemStore(_workspace(tmp_path / "ws"))
    keys = [str(uuid.uuid4()) for _ in range(5)] + SHAPES
    for n, key in enumerate(keys):
        store.put(("memories", "user-1"), key, {"text": f"memory {n}"})
    found = store.search(("memories", "user-1"), limit=50)
    assert sorted(i.key for i in found) == sorted(keys)
    ranked = store.search(("memories", "user-1"), query="memory", limit=50)  # mdmem's search
    assert sorted(i.key for i in ranked) == sorted(keys)
    assert all(
        store.get(("memories", "user-1"), k).value == {"text": f"memory {n}"}
        for n, k in enumerate(keys)
    )


def test_langgraph_key_holding_a_provider_secret_is_refused(tmp_path: Path) -> None:
    from mdmem.integrations.langgraph_store import MdmemStore

    ws = _workspace(tmp_path / "ws")
    store = MdmemStore(ws)
    with pytest.raises(SecretInField) as raised:
        store.put(("docs",), f"token:{GITHUB_TOKEN}", {"text": "x"})
    assert GITHUB_TOKEN not in str(raised.value) and "key" in str(raised.value)
    store_folder = ws.root / "store"
    assert not store_folder.exists() or not any(store_folder.rglob("*.md"))  # nothing written


# ---- mdmem import ---------------------------------------------------------------------------------


def _claude_export(path: Path, conv_ids: list[str]) -> Path:
    conversations = [
        {
            "uuid": conv_id,
            "name": f"Chat {n}",
            "created_at": "2026-02-03T10:00:00Z",
            "chat_messages": [
                {"sender": "human", "text": f"question {n}", "created_at": "2026-02-03T10:00:01Z"},
                {
                    "sender": "assistant",
                    "text": f"answer {n}",
                    "created_at": "2026-02-03T10:00:02Z",
                },
            ],
        }
        for n, conv_id in enumerate(conv_ids)
    ]
    path.write_text(json.dumps(conversations))
    return path


@_CHEAPER
@given(conv_ids=st.lists(IDENTIFIERS, min_size=1, max_size=3, unique=True))
@example(conv_ids=["conv-01H8X7Z2K3M4N5P6Q7R8S9T0", "thread_abc123XYZ789def456"])
def test_importing_the_same_export_twice_writes_nothing_new(
    tmp_path: Path, conv_ids: list[str]
) -> None:
    conv_ids = [c for c in conv_ids if not _refused(c)]
    if not conv_ids:
        return
    root = tmp_path / uuid.uuid4().hex
    ws = _workspace(root)
    export = _claude_export(root.with_suffix(".json"), conv_ids)
    first = import_path(ws, export, "claude")
    assert [o.status for o in first.outcomes] == ["created"] * len(conv_ids)
    written = sorted(p.name for p in (root / ".sessions").iterdir())
    for outcome in first.outcomes:
        assert _front(ws, outcome.path)["conversation"] == outcome.conversation
    second = import_path(ws, export, "claude")
    assert [o.status for o in second.outcomes] == ["unchanged"] * len(conv_ids)
    assert sorted(p.name for p in (root / ".sessions").iterdir()) == written


def test_a_claude_export_imported_twice_keeps_one_file(tmp_path: Path) -> None:
    """The report: a Claude.ai export got ``…-2.md`` on its second import."""
    ws = _workspace(tmp_path / "ws")
    export = _claude_export(tmp_path / "conversations.json", SHAPES)
    import_path(ws, export)
    import_path(ws, export)
    assert len(list((ws.root / ".sessions").iterdir())) == len(SHAPES)


# ---- OpenAI Agents SDK session ----------------------------------------------------------------------


@_CHEAPER
@given(session_id=IDENTIFIERS)
@example(session_id="thread_abc123XYZ789def456")
@example(session_id="conv-01H8X7Z2K3M4N5P6Q7R8S9T0")
def test_a_reopened_agents_session_sees_its_items(tmp_path: Path, session_id: str) -> None:
    from mdmem.integrations.openai_agents import MdmemSession

    ws = _workspace(tmp_path / uuid.uuid4().hex)
    items = [
        {"role": "user", "content": f"hello from {session_id}"},
        {"type": "function_call", "call_id": "call_Qw3rTy8UiOp2AsDf6GhJkL9z", "name": "f",
         "arguments": "{}", "id": "fc_67ccd2bed1ec8190b14f964abc05426"},
    ]  # fmt: skip
    if _refused(session_id):
        with pytest.raises(SecretInField):
            asyncio.run(MdmemSession(session_id, ws).add_items(items))
        return
    asyncio.run(MdmemSession(session_id, ws).add_items(items))
    again = MdmemSession(session_id, Workspace.open(ws.root))
    assert asyncio.run(again.get_items()) == items
    assert _front(ws, again.path)["conversation"] == session_id


# ---- world and pool keys --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["db password=hunter2-Blue99", "api_token abc123XYZ789def456", *SHAPES[:4]]
)
def test_world_keys_are_never_rewritten(tmp_path: Path, key: str) -> None:
    ws = _workspace(tmp_path / "ws")
    fact = ws.world.set(key, "set by the deploy job")
    assert fact.key == key and ws.world.get(key) == "set by the deploy job"
    assert f"- **{key}**: set by the deploy job" in (ws.root / "world_state.md").read_text()


def test_two_secretish_world_and_pool_keys_stay_two(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    keys = ["password=Tr0ub4dor&3xq", "password=Corr3ct-Horse!"]
    for n, key in enumerate(keys):
        ws.world.set(key, f"v{n}")
        assert ws.sharing.pool("default").write(key, f"v{n}").key == key
    assert [f.key for f in ws.world.facts()] == keys
    assert sorted(e.key for e in ws.sharing.pool("default").list()) == sorted(keys)


def test_a_world_or_pool_key_holding_a_provider_secret_is_refused(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    for write in (ws.world.set, ws.sharing.pool("default").write):
        with pytest.raises(SecretInField) as raised:
            write(f"token {GITHUB_TOKEN}", "value")
        message = str(raised.value)
        assert GITHUB_TOKEN not in message and "[REDACTED:github]" in message
    assert (
        not (ws.root / "shared" / "default.md").exists()
        or GITHUB_TOKEN not in (ws.root / "shared" / "default.md").read_text()
    )
    world = ws.root / "world_state.md"
    assert not world.exists() or GITHUB_TOKEN not in world.read_text()


def test_values_next_to_structure_are_still_masked(tmp_path: Path) -> None:
    """Structure is kept; the content beside it is not let through."""
    ws = _workspace(tmp_path / "ws")
    ws.world.set("db_password", "hunter2-Blue99")
    ws.world.set("deploy key", GITHUB_TOKEN)
    text = (ws.root / "world_state.md").read_text()
    assert "hunter2-Blue99" not in text and GITHUB_TOKEN not in text
    assert "- **db_password**: [REDACTED:password]" in text


SECRETISH_KEYS = st.tuples(
    st.sampled_from(["db password", "api_token", "secret", "client_secret", "auth", "key"]),
    st.sampled_from(["=", " ", "_"]),
    _text(ALNUM + "-!&", 6, 24),
).map("".join)


@_CHEAPER
@given(key=st.one_of(IDENTIFIERS, SECRETISH_KEYS))
@example(key="db password=hunter2-Blue99")
def test_world_and_pool_keys_round_trip(tmp_path: Path, key: str) -> None:
    """Whatever a key looks like, it is written, found and listed as given; one holding a
    provider-format secret is refused with nothing written."""
    ws = _workspace(tmp_path / uuid.uuid4().hex)
    pool = ws.sharing.pool("default")
    if _refused(key):
        with pytest.raises(SecretInField):
            ws.world.set(key, "value")
        with pytest.raises(SecretInField):
            pool.write(key, "value")
        return
    assert ws.world.set(key, "value").key == key and ws.world.get(key) == "value"
    assert pool.write(key, {"n": 1}).key == key and pool.read(key).content == {"n": 1}
    assert pool.delete(key).key == key and pool.read(key) is None


def test_frontmatter_of_other_files_is_content(tmp_path: Path) -> None:
    """Only the frontmatter mdmem writes (sessions, LangGraph items) is structure: an agent's
    own note with ``source: postgres://user:pass@…`` gets the password masked."""
    ws = _workspace(tmp_path / "ws")
    ws.files.edit("notes/db.md", lambda _: "---\nsource: postgres://app:Hunter2pw@db/x\n---\nhi\n")
    text = (ws.root / "notes" / "db.md").read_text()
    assert "Hunter2pw" not in text and "postgres://app:[REDACTED:url_credentials]@db/x" in text
