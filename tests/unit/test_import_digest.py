"""A conversation's digest of its first turns, asked for several prefixes in one import, is
computed in one pass (issue 41): it must equal the hash of those turns, whatever the order
and the counts asked for."""

from __future__ import annotations

import dataclasses
import hashlib

from hypothesis import given
from hypothesis import strategies as st

from mdmem.integrations.importers.common import Conversation, Turn


def plain(conv: Conversation, count: int) -> str:
    hasher = hashlib.sha256()
    for turn in conv.turns[:count]:
        hasher.update(turn.fingerprint())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


@given(
    st.lists(st.text(max_size=5), max_size=10),
    st.lists(st.integers(min_value=-12, max_value=12), min_size=1, max_size=6),
)
def test_every_prefix_digest_is_the_hash_of_those_turns(
    texts: list[str], counts: list[int]
) -> None:
    conv = Conversation("jsonl", "c", "t", tuple(Turn("user", t) for t in texts), None, "f:1")
    for count in counts:
        assert conv.digest(count) == plain(conv, count)
    grown = dataclasses.replace(conv, turns=(*conv.turns, Turn("assistant", "more")))
    for count in counts:  # a copy with other turns has none of the first one's state
        assert grown.digest(count) == plain(grown, count)
