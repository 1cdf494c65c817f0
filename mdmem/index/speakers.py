"""Who speaks in a turn, and whom a query names: the entity-aware part of ranking.

In a chat log a question about one person ("What books has Tim read?") is mostly answered by
that person's own turns ("I just finished ..."), which rarely repeat the name; a speaker's name
is in half the turns, so BM25 gives it almost no weight. Ranking therefore lifts the turns
whose speaker is the one person the query names (``search.speaker_weight``). A turn's speaker
is the name that opens it: ``**Tim**: ...``, ``**Tim** [D1:3]: ...``, or a session event's
``10:42:02 [message] Tim: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SPEAKER = re.compile(
    r"^(?:\d{1,2}:\d{2}(?::\d{2})?\s+\[[^\]\n]*\]\s+)?"  # a session event's time and kind
    r"(?:\*\*([^*\n]{1,40})\*\*|([A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?))"  # **Name** or Name
    r"(?:\s*\[[^\]\n]*\])?\s*:"  # an optional [D1:3], then the colon
)
_NAME = re.compile(r"\b[A-Z][\w'’-]+")


def speaker(text: str) -> str | None:
    """The lower-cased name opening a turn, or None."""
    match = _SPEAKER.match(text.lstrip())
    if match is None:
        return None
    return (match.group(1) or match.group(2)).strip().lower() or None


def named(query: str) -> frozenset[str]:
    """The capitalised words of a query, lower-cased: the names it may mention."""
    return frozenset(w.lower() for w in _NAME.findall(query))


def addressed(query: str, speakers: Sequence[str | None]) -> str | None:
    """The one speaker among ``speakers`` the query names (by full or first name); None when
    it names none or several (a question about two people favours neither)."""
    names = named(query)
    hits = {s for s in speakers if s and (s in names or s.split()[0] in names)}
    return next(iter(hits)) if len(hits) == 1 else None
