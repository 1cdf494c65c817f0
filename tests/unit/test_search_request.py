"""One search as a value (`SearchRequest`): what the library, the warm server's wire form, the
CLI and the MCP tools hand down is the same request."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import SearchRequest, Workspace
from mdmem.index.search_params import SEARCH_PARAMS

text = st.none() | st.text(min_size=1, max_size=12)
requests = st.builds(
    SearchRequest.of,
    st.text(min_size=1, max_size=40),
    st.none() | st.integers(1, 50),
    mode=st.none() | st.sampled_from(["hybrid", "keyword", "vector"]),
    scopes=st.none()
    | st.sampled_from(["local", "shared,inherited"])
    | st.lists(st.sampled_from(["LOCAL", "SHARED", "INHERITED", "GLOBAL"]), min_size=1),
    type=text,
    path=text,
    agent=text,
    session=text,
    since=text,
    until=text,
    include_archived=st.booleans(),
)


@given(requests)
def test_a_request_survives_the_wire(request: SearchRequest) -> None:
    """The warm server gets `params()` as JSON and builds the same request from it."""
    wire = json.loads(json.dumps(request.params()))
    assert sorted(wire) == sorted(SEARCH_PARAMS)
    assert SearchRequest.from_params(request.query, wire) == request


def test_keywords_and_a_request_are_one_search(ws: Workspace) -> None:
    (ws.root / "mdmem.toml").write_text('[embedding]\nmodel = ""\n')
    ws = Workspace(ws.root)
    ws.remember("The staging database listens on port 6543", type="fact")
    by_keywords = ws.search("staging port", 3, type="fact", mode="keyword")
    by_request = ws.search(SearchRequest.of("staging port", 3, type="fact", mode="keyword"))
    assert [h.citation for h in by_keywords] == [h.citation for h in by_request]
    assert by_keywords


def test_an_unknown_parameter_is_named() -> None:
    with pytest.raises(TypeError, match="'tpye'"):
        SearchRequest.of("x", tpye="fact")
    with pytest.raises(TypeError, match="not both"):
        SearchRequest.of(SearchRequest("x"), k=3)


def test_the_typed_keywords_are_the_search_parameters() -> None:
    """`ws.search(query, k, **options: Unpack[SearchOptions])`: what IDEs and mypy see is what
    `SearchRequest.of` takes, no more and no less."""
    from mdmem.index.request import SearchOptions

    assert sorted(SearchOptions.__annotations__) == sorted(
        [*(p for p in SEARCH_PARAMS if p != "k"), "track_access"]
    )
