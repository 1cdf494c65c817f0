"""A conversation's digest of its first turns (``source_digest``), asked for several prefixes in
one import, is computed in one pass (issue 41): it must equal the chain of those turns'
fingerprints, whatever the order and the counts asked for; a conversation read on from a
remembered chain state (the turns before it skipped) gives the digest the whole one gives; and
the single hash imports wrote before the chain is still recognized."""

from __future__ import annotations

import dataclasses
import hashlib

from hypothesis import given
from hypothesis import strategies as st

from mdmem.integrations.importers.common import Conversation, Turn
from mdmem.integrations.importers.write import Known, plan, same_start


def chained(conv: Conversation, count: int) -> str:
    state = b""
    for turn in conv.turns[:count]:
        state = hashlib.sha256(state + turn.fingerprint() + b"\0").digest()
    return hashlib.sha256(state).hexdigest()[:16]


def single(conv: Conversation, count: int) -> str:
    hasher = hashlib.sha256()
    for turn in conv.turns[:count]:
        hasher.update(turn.fingerprint())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def conversation(texts: list[str]) -> Conversation:
    return Conversation("jsonl", "c", "t", tuple(Turn("user", t) for t in texts), None, "f:1")


@given(
    st.lists(st.text(max_size=5), max_size=10),
    st.lists(st.integers(min_value=-12, max_value=12), min_size=1, max_size=6),
)
def test_every_prefix_digest_is_the_chain_of_those_turns(
    texts: list[str], counts: list[int]
) -> None:
    conv = conversation(texts)
    for count in counts:
        assert conv.digest(count) == chained(conv, count)
        assert conv.legacy_digest(count) == single(conv, count)
    grown = dataclasses.replace(conv, turns=(*conv.turns, Turn("assistant", "more")))
    for count in counts:  # a copy with other turns has none of the first one's state
        assert grown.digest(count) == chained(grown, count)


@given(st.lists(st.text(max_size=5), max_size=10), st.data())
def test_a_conversation_read_on_from_a_chain_state_digests_as_the_whole(
    texts: list[str], data: st.DataObject
) -> None:
    whole = conversation(texts)
    skip = data.draw(st.integers(0, len(texts)))
    state = whole.chain(skip)
    assert state is not None
    rest = dataclasses.replace(whole, turns=whole.turns[skip:], skipped=skip, chain_before=state)
    assert rest.count == whole.count
    for count in data.draw(st.lists(st.integers(skip, len(texts)), max_size=4)):
        assert rest.digest(count) == whole.digest(count)
    assert rest.chain(whole.count) == whole.chain(whole.count)
    if skip:
        assert rest.digest(skip - 1) is None  # (a skipped turn's digest is not known)
        assert rest.legacy_digest(skip) is None
    known = Known("s.md", skip, whole.digest(skip) or "")
    assert plan(rest, known) == plan(whole, known)


@given(st.lists(st.text(max_size=5), min_size=1, max_size=10), st.data())
def test_a_session_stamped_with_the_single_hash_still_goes_on(
    texts: list[str], data: st.DataObject
) -> None:
    """A session an older mdmem imported (its ``source_digest`` the single hash) gets the new
    turns appended, not 'changed'."""
    conv = conversation(texts)
    n = data.draw(st.integers(0, len(texts)))
    assert same_start(conv, n, single(conv, n))
    status, turns = plan(conv, Known("s.md", n, single(conv, n)))
    assert status == ("unchanged" if n == len(texts) else "appended")
    assert turns == conv.turns[n:]
    assert not same_start(conv, n, "0" * 16)
