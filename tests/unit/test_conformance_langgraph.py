"""MdmemStore against LangGraph's ``BaseStore`` as documented: a batch's results in the order of
its operations (mixed puts, deletes, gets, searches and namespace listings), namespaces and
``list_namespaces`` (prefix, suffix, max_depth, limit, offset), TTLs refused (the store declares
``supports_ttl = False``), and many async calls at once, as a graph's parallel nodes make them.

The oracle is LangGraph's own ``InMemoryStore``, driven one operation at a time (for gets and
searches), and the docstring of ``list_namespaces`` (for namespaces)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from mdmem import Workspace
from mdmem.integrations.langgraph_store import MdmemStore

_folders = itertools.count()


@pytest.fixture(scope="module")
def keyword_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """One keyword-only workspace for the module: each test and each generated example keeps to
    a store folder of its own in it."""
    root = tmp_path_factory.mktemp("langgraph") / "ws"
    Workspace.init(root, mode="full", agent="graph")
    (root / "mdmem.toml").write_text('mode = "full"\nagent = "graph"\n[embedding]\nmodel = ""\n')
    return Workspace.open(root)


def _fresh(ws: Workspace) -> MdmemStore:
    """A store of its own in ``ws`` (each generated example starts empty)."""
    return MdmemStore(ws, folder=f"store{next(_folders)}")


def _plain(result: Any) -> Any:
    """What a result says, without the times (each store stamps its own)."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return sorted((_plain(r) for r in result), key=repr)
    return result


# ---- a batch -----------------------------------------------------------------------------------


def test_a_mixed_batch_answers_each_operation_in_order(keyword_ws: Workspace) -> None:
    store = _fresh(keyword_ws)
    store.put(("docs", "a"), "one", {"text": "first", "n": 1})
    store.put(("docs", "b"), "two", {"text": "second", "n": 2})
    ops = [
        GetOp(("docs", "a"), "one"),
        PutOp(("docs", "a"), "three", {"text": "third", "n": 3}),
        GetOp(("docs", "a"), "three"),  # runs after the put before it
        PutOp(("docs", "b"), "two", None),  # a delete
        SearchOp(("docs",), filter={"n": {"$gte": 2}}),
        ListNamespacesOp(max_depth=None, limit=10),
        GetOp(("docs", "b"), "two"),
        GetOp(("docs",), "missing"),
    ]
    results = store.batch(ops)
    assert len(results) == len(ops)
    assert _plain(results[0]) == (("docs", "a"), "one", {"text": "first", "n": 1})
    assert results[1] is None and results[3] is None
    assert _plain(results[2]) == (("docs", "a"), "three", {"text": "third", "n": 3})
    assert _plain(results[4]) == [(("docs", "a"), "three", {"text": "third", "n": 3})]
    assert results[5] == [("docs", "a")]  # ("docs", "b") lost its only item
    assert results[6] is None and results[7] is None
    again = asyncio.run(store.abatch([GetOp(("docs", "a"), "three"), ListNamespacesOp()]))
    assert _plain(again[0]) == (("docs", "a"), "three", {"text": "third", "n": 3})
    assert again[1] == [("docs", "a")]


def test_ttl_is_refused_before_anything_is_written(keyword_ws: Workspace) -> None:
    store = _fresh(keyword_ws)
    assert store.supports_ttl is False
    with pytest.raises(NotImplementedError, match="TTL is not supported"):
        store.put(("docs",), "a", {"text": "x"}, ttl=5)
    with pytest.raises(NotImplementedError, match="TTL is not supported"):
        asyncio.run(store.aput(("docs",), "a", {"text": "x"}, ttl=1.5))
    batch = [PutOp(("docs",), "b", {"text": "y"}), PutOp(("docs",), "c", {"text": "z"}, ttl=5)]
    with pytest.raises(NotImplementedError, match="supports_ttl is False"):
        store.batch(batch)
    with pytest.raises(NotImplementedError, match="supports_ttl is False"):
        asyncio.run(store.abatch(batch))
    assert store.search(("docs",)) == []  # not even the first put of the refused batch
    store.put(("docs",), "a", {"text": "x"}, ttl=None)  # no TTL: stored
    assert store.get(("docs",), "a").value == {"text": "x"}


@pytest.mark.parametrize(
    "op",
    [
        PutOp(("docs", ""), "k", {"a": 1}),
        GetOp(("a.b",), "k"),
        SearchOp(("ok", "bad\0label")),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("x.y",)),)),
    ],
)
def test_a_bad_namespace_given_to_batch_is_refused(keyword_ws: Workspace, op: Any) -> None:
    store = _fresh(keyword_ws)
    with pytest.raises(InvalidNamespaceError):
        store.batch([op])
    with pytest.raises(InvalidNamespaceError):  # the methods check it themselves as well
        store.put(("langgraph",), "k", {"a": 1})


def test_a_list_prefix_finds_what_a_tuple_prefix_finds(keyword_ws: Workspace) -> None:
    """``search(["test"])`` found nothing while ``search(["test"], query="Doc")`` found the item
    (SqliteStore finds both with either): one answer for one prefix, however it is written."""
    store = _fresh(keyword_ws)
    store.put(("test",), "a", {"text": "Doc one"})
    store.put(("test", "deeper"), "b", {"text": "Doc two"})
    store.put(("other",), "c", {"text": "Doc three"})
    keys = {i.key for i in store.search(("test",))}
    assert keys == {"a", "b"}
    assert {i.key for i in store.search(["test"])} == keys
    assert {i.key for i in store.search(["test"], query="Doc")} == keys
    assert {i.key for i in store.search(("test",), query="Doc")} == keys
    assert store.get(["test"], "a") is not None


def test_the_empty_key_is_a_key_as_in_in_memory_store(keyword_ws: Workspace) -> None:
    store, reference = _fresh(keyword_ws), InMemoryStore()
    for each in (store, reference):
        each.put(("docs",), "", {"text": "no name"})
        each.put(("docs",), "%", {"text": "a percent sign"})
    for key in ("", "%"):
        got, expected = store.get(("docs",), key), reference.get(("docs",), key)
        assert got is not None and expected is not None
        assert _plain(got) == (expected.namespace, expected.key, expected.value)
    assert _plain(store.search(("docs",))) == _plain(reference.search(("docs",)))
    store.put(("docs",), "", None)
    assert store.get(("docs",), "") is None and store.get(("docs",), "%") is not None


# ---- against LangGraph's InMemoryStore, over generated operations ------------------------------

LABELS = st.sampled_from(["users", "u1", "u2", "prefs", "docs"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
KEYS = st.sampled_from(
    ["a", "b", "item_user1", str(uuid.UUID(int=7)), "Ünïcode key", "k/with/slashes", "", "%"]
)
VALUES = st.fixed_dictionaries({"n": st.integers(0, 3)}, optional={"text": st.text(max_size=8)})
PUT = st.builds(lambda ns, k, v: PutOp(ns, k, v), NAMESPACES, KEYS, VALUES)
DELETE = st.builds(lambda ns, k: PutOp(ns, k, None), NAMESPACES, KEYS)
GET = st.builds(GetOp, NAMESPACES, KEYS)
SEARCH = st.builds(
    lambda prefix, wanted: SearchOp(prefix, filter=wanted, limit=1000),
    st.lists(LABELS, max_size=2).flatmap(lambda labels: st.sampled_from([tuple(labels), labels])),
    st.one_of(st.none(), st.fixed_dictionaries({"n": st.integers(0, 3)})),
)


def _as_tuples(op: Any) -> Any:
    """``op`` as InMemoryStore needs it: a list prefix finds nothing there (it compares a list
    with tuples); SqliteStore, and MdmemStore, take a list as the tuple it lists."""
    if isinstance(op, SearchOp) and isinstance(op.namespace_prefix, list):
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    return op


@dataclasses.dataclass(frozen=True)
class ListCall:
    """A ``list_namespaces`` call (through the method, which builds the match conditions)."""

    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    depth: int | None
    limit: int
    offset: int


LIST = st.builds(
    ListCall,
    st.lists(LABELS, max_size=2).map(tuple),
    st.lists(LABELS, max_size=1).map(tuple),
    st.one_of(st.none(), st.integers(1, 3)),
    st.integers(1, 5),
    st.integers(0, 2),
)
OPS = st.lists(st.one_of(PUT, PUT, DELETE, GET, SEARCH, LIST), min_size=1, max_size=12)


def _expected_namespaces(
    live: set[tuple[str, ...]], prefix: tuple[str, ...], suffix: tuple[str, ...], depth: Any
) -> list[tuple[str, ...]]:
    """``list_namespaces`` as its docstring says: the namespaces that hold items, filtered by
    prefix and suffix, cut to ``max_depth``, sorted, without duplicates."""
    chosen = {
        ns[:depth] if depth else ns
        for ns in live
        if ns[: len(prefix)] == prefix and (not suffix or ns[-len(suffix) :] == suffix)
    }
    return sorted(chosen)


@settings(max_examples=30)  # each operation is a real locked, fsynced file write: kept cheaper
@given(
    ops=OPS, batches=st.lists(st.integers(1, 4), min_size=1, max_size=6), use_async=st.booleans()
)
@example(  # a list call between a delete and a put of one batch: it sees the delete only
    ops=[
        PutOp(("users",), "a", {"n": 0}),
        PutOp(("users",), "a", None),
        ListCall((), (), None, 1, 0),
        PutOp(("users",), "a", {"n": 0}),
    ],
    batches=[4],
    use_async=False,
)
def test_operations_match_langgraphs_in_memory_store(
    keyword_ws: Workspace, ops: list[Any], batches: list[int], use_async: bool
) -> None:
    """Batches of puts, gets and searches, with ``list_namespaces`` calls between them, give
    what LangGraph's InMemoryStore gives for the same operations in the same order."""
    store, reference = _fresh(keyword_ws), InMemoryStore()
    live: set[tuple[str, ...]] = set()

    def run(batch: list[Any]) -> set[tuple[str, ...]]:
        """One batch through mdmem's store, compared op by op with the reference; returns the
        namespaces that hold an item afterwards."""
        ours = asyncio.run(store.abatch(batch)) if use_async else store.batch(batch)
        for op, got in zip(batch, ours, strict=True):
            [expected] = reference.batch([_as_tuples(op)])
            assert _plain(got) == _plain(expected), op
        return {item.namespace for item in reference.search((), limit=10_000)}

    sizes = itertools.cycle(batches)
    at = 0
    while at < len(ops):
        chunk = ops[at : at + next(sizes)]
        at += len(chunk)
        pending: list[Any] = []
        for op in chunk:  # a list call is no batch operation: what came before it runs first
            if not isinstance(op, ListCall):
                pending.append(op)
                continue
            if pending:
                live, pending = run(pending), []
            got = store.list_namespaces(
                prefix=op.prefix or None,
                suffix=op.suffix or None,
                max_depth=op.depth,
                limit=op.limit,
                offset=op.offset,
            )
            wanted = _expected_namespaces(live, op.prefix, op.suffix, op.depth)
            assert got == wanted[op.offset : op.offset + op.limit], op
        if pending:
            live = run(pending)


# ---- many async calls at once -------------------------------------------------------------------


def test_concurrent_async_puts_gets_searches_and_deletes_never_fail(
    keyword_ws: Workspace,
) -> None:
    """LangGraph's own stress shape (``test_large_batches_async``): the same keys put, got,
    listed, searched and deleted by hundreds of coroutines at once. A delete used to move a file
    away while a put of the same item was writing it (`cannot write: No such file or
    directory`), and a search could read a file just deleted (`cannot be read: [Errno 2]`)."""
    store = _fresh(keyword_ws)

    async def storm() -> list[Any]:
        calls = []
        for m in range(3):
            for i in range(20):
                ns = ("test", "foo", "bar", str(m % 2))
                calls += [
                    store.aput(ns, f"key{i}", value={"foo": f"bar{i}"}),
                    store.aget(ns, f"key{i}"),
                    store.alist_namespaces(max_depth=m + 1),
                    store.asearch(("test",)),
                    store.aput(ns, f"key{i}", value={"foo": f"bar{i}"}),
                    store.adelete(ns, f"key{i}"),
                ]
                if i % 5 == 0:  # mdmem's search too, over files being deleted as it reads
                    calls.append(store.asearch(("test",), query=f"bar{i}"))
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(storm())
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == []
    # whatever the interleaving, each item is either there whole or gone
    for item in store.search(("test",), limit=1000):
        assert item.value == {"foo": f"bar{item.key.removeprefix('key')}"}


# ---- a caller's embeddings (index=) -----------------------------------------------------------


def _letters(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding for the tests: how often each letter a–z occurs (and a count
    of everything else), so similar spellings score close and nothing is downloaded."""
    out = []
    for text in texts:
        vector = [0.0] * 27
        for char in text.lower():
            vector[ord(char) - 97 if "a" <= char <= "z" else 26] += 1.0
        out.append(vector)
    return out


_DOCS = [
    (("docs", "fruit"), "apple", {"text": "red apple pie", "color": "red", "n": 1}, None),
    (("docs", "fruit"), "pear", {"text": "green pear", "color": "green", "n": 2}, None),
    (("docs", "cars"), "car", {"text": "fast red car", "color": "red", "n": 3}, None),
    (("docs", "cars"), "van", {"text": "slow blue van", "color": "blue", "n": 4}, None),
    (("docs", "cars"), "bus", {"text": "yellow bus", "title": "school run", "n": 5}, ["title"]),
    (("docs", "notes"), "hidden", {"text": "red apple pie too", "n": 6}, False),
    (("docs", "notes"), "many", {"parts": ["kiwi tart", "plum jam"], "n": 7}, ["parts[*]"]),
    (("other",), "apple", {"text": "apple outside the prefix", "n": 8}, None),
]


@pytest.mark.parametrize(
    ("prefix", "query", "filters", "limit", "offset"),
    [
        (("docs",), "red apple", None, 10, 0),
        (("docs",), "blue van", {"color": "red"}, 10, 0),
        (("docs",), "plum", None, 3, 0),
        (("docs",), "plum", None, 3, 3),
        (("docs",), "school", {"n": {"$gte": 3}}, 10, 0),
        (("docs", "cars"), "kiwi", None, 2, 1),
        (("docs",), "pie", None, 20, 0),  # the unembedded item fills the page, unscored
        ((), "apple", None, 4, 0),
    ],
)
def test_a_query_is_ranked_by_the_callers_embeddings_as_in_memory_store_ranks_it(
    keyword_ws: Workspace,
    prefix: tuple[str, ...],
    query: str,
    filters: dict[str, Any] | None,
    limit: int,
    offset: int,
) -> None:
    """``MdmemStore(ws, index={"dims": …, "embed": …, "fields": …})`` as LangGraph's stores take
    it: a search with a query is ranked by the cosine of the caller's embeddings (an item by
    its best field; ``index=False`` items last, unscored), exactly as ``InMemoryStore`` with the
    same embeddings ranks it, scores included; an update is embedded anew, a delete is gone."""
    for default_fields in (["text"], None):  # None: the whole value ("$")
        index: Any = {"dims": 27, "embed": _letters, "fields": default_fields}
        store = MdmemStore(keyword_ws, folder=f"store{next(_folders)}", index=index)
        reference = InMemoryStore(index=index)
        for each in (store, reference):
            for namespace, key, value, fields in _DOCS:
                each.put(namespace, key, value, index=fields)
            each.put(("docs", "fruit"), "pear", {"text": "ripe pear", "color": "green", "n": 2})
            each.delete(("docs", "cars"), "car")
        got, want = (
            [
                (r.namespace, r.key, None if r.score is None else round(r.score, 9))
                for r in each.search(
                    prefix, query=query, filter=filters, limit=limit, offset=offset
                )
            ]
            for each in (store, reference)
        )
        assert got == want
        assert store.index_config is not None and store.index_config["dims"] == 27


def test_an_item_edited_by_hand_is_embedded_anew(keyword_ws: Workspace) -> None:
    """The vectors are kept per item file while its texts stay the same: a person's edit of the
    file (or another process's put) is what the next query ranks."""
    index: Any = {"dims": 27, "embed": _letters, "fields": ["text"]}
    store = MdmemStore(keyword_ws, folder=f"store{next(_folders)}", index=index)
    store.put(("n",), "a", {"text": "zebra zoo"})
    store.put(("n",), "b", {"text": "quiet queen"})
    before = {r.key: r.score for r in store.search(("n",), query="zzz")}
    assert before["a"] > 0.5 and before["b"] == 0.0
    path = keyword_ws.root / store.folder / "n" / "a.md"
    path.write_text(path.read_text().replace("zebra zoo", "plain text"))  # value and body
    after = {r.key: r.score for r in store.search(("n",), query="zzz")}
    assert after == {"a": 0.0, "b": 0.0}


def test_async_calls_use_the_callers_async_embeddings(keyword_ws: Workspace) -> None:
    """An ``async def`` embed function serves the store's calls, as LangGraph's
    ``ensure_embeddings`` makes it."""

    async def embed(texts: list[str]) -> list[list[float]]:
        return _letters(texts)

    index: Any = {"dims": 27, "embed": embed}
    store = MdmemStore(keyword_ws, folder=f"store{next(_folders)}", index=index)

    async def calls() -> list[str]:
        await store.aput(("n",), "a", {"text": "zebra zoo"})
        await store.aput(("n",), "b", {"text": "quiet queen"})
        return [r.key for r in await store.asearch(("n",), query="qqq")]

    assert asyncio.run(calls()) == ["b", "a"]


def test_sqlite_stores_text_fields_name_the_fields_too(keyword_ws: Workspace) -> None:
    """``SqliteStore`` reads the fields to embed from ``text_fields`` (its config's name) where
    ``InMemoryStore`` reads ``fields``: either names them here, so a config written for either
    ranks alike (a bare string is one field, as SqliteStore takes it)."""
    docs = [("a", {"k1": "xxx", "k2": "yyy"}), ("b", {"k1": "uuu", "k2": "xxx"})]
    reference = InMemoryStore(index={"dims": 27, "embed": _letters, "fields": ["k1"]})
    for config in ({"text_fields": ["k1"]}, {"text_fields": "k1"}):
        index: Any = {"dims": 27, "embed": _letters, **config}
        store = MdmemStore(keyword_ws, folder=f"store{next(_folders)}", index=index)
        for each in (store, reference):
            for key, value in docs:
                each.put(("t",), key, value)
        got, want = (
            [(r.key, round(r.score or 0, 9)) for r in each.search(("t",), query="xxx")]
            for each in (store, reference)
        )
        assert got == want and got[0] == ("a", 1.0)


def test_queries_and_puts_at_once_share_the_vectors_safely(keyword_ws: Workspace) -> None:
    """A graph's parallel nodes search and put at once (``abatch`` runs each in a thread): the
    vectors kept between queries are read and replaced under a lock, so no call fails, and the
    store ends ranking as ``InMemoryStore`` given the same puts."""
    index: Any = {"dims": 27, "embed": _letters, "fields": ["text"]}
    store = MdmemStore(keyword_ws, folder=f"store{next(_folders)}", index=index)
    words = ["apple", "pear", "plum", "kiwi", "fig", "lime", "date", "yuzu"]

    async def together() -> None:
        calls = []
        for n in range(40):
            word = words[n % len(words)]
            value = {"text": f"{word} {n}"}
            calls.append(store.aput(("fruit", str(n % 3)), f"k{n}", value))
            calls.append(store.asearch(("fruit",), query=words[(n * 3) % len(words)]))
        await asyncio.gather(*calls)

    asyncio.run(together())
    reference = InMemoryStore(index=index)
    for n in range(40):
        reference.put(("fruit", str(n % 3)), f"k{n}", {"text": f"{words[n % len(words)]} {n}"})
    for query in words:
        got, want = (
            [
                (r.key, round(r.score or 0, 9))
                for r in each.search(("fruit",), query=query, limit=50)
            ]
            for each in (store, reference)
        )
        assert sorted(got, key=lambda kv: (-kv[1], kv[0])) == sorted(
            want, key=lambda kv: (-kv[1], kv[0])
        )
