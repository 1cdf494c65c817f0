"""When a newer statement changes the value of an older one, and when it is another fact.

"The staging database port is 5432" / "… is 6543" is one fact whose value changed: the older
may be superseded. "The ledger job number 7 runs at 00:15" / "… number 27 runs at 02:15" are two
jobs: numbers that name the subject (``job 27``, ``module m3``, ``API v2.4 returns …``) are part
of the subject, and two slots differ besides. The rule, shared by consolidation and by
extraction's conflict check: the two token sequences (case, articles and edge punctuation
ignored) differ in exactly one span of at most :data:`MAX_SLOT` tokens on each side, the rest
matches, and that span is a value, not a name of the subject. When unsure, both stay: an old
value served beside its new one is visible and fixable; a distinct fact hidden is not.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from mdmem.distill.rules import STOPWORDS

MAX_SLOT = 3
"""A value slot spans at most this many tokens ("Google Cloud Run")."""
_TOKEN = re.compile(r"[^\s,;]+|[,;]")
_EDGE = "\"'“”‘’()[]{}<>*`!?.:"
ARTICLES = frozenset({"the", "a", "an"})
PREDICATES = frozenset(
    """is are was were be been = : uses use used runs run goes go listens lives prefers prefer
    wants want likes like needs need takes take has have works work points returns starts
    stays sits lasts costs holds stores sends deploys deploy writes reads keeps means equals
    becomes became listen""".split()
)
"""Words that end the subject of a short statement ("<subject> runs on <value>")."""
RELATIONS = PREDICATES | frozenset(
    """to at on in of for with by from into onto via per under over than about as after
    before until within every each around near behind and or not no never now still""".split()
)
"""Words after which a token is a value, not a name ("port is 5432", "region to eu-west-1")."""
NAMING = frozenset(
    """job jobs number no # module modules version release issue ticket pr task step phase
    build node shard service team room case item chapter page line section part level stage
    sprint epic milestone batch lane queue worker test suite table row column account
    customer user id pipeline project repo branch""".split()
)
"""Nouns whose following number names the thing ("job 27", "module m3"), never its value."""


@dataclass(frozen=True)
class Slot:
    """The one value that differs between an older and a newer statement."""

    old: str
    new: str


def tokens(text: str) -> list[str]:
    """The comparable tokens of ``text``: lowercased, edge punctuation and articles out; ``,``
    and ``;`` kept (a value slot never spans a list)."""
    out = []
    for raw in _TOKEN.findall(text):
        word = raw if raw in ",;" else raw.strip(_EDGE).lower()
        if word and word not in ARTICLES:
            out.append(word)
    return out


def changed_slot(new: str, old: str) -> Slot | None:
    """The value slot ``new`` changes in ``old``, or None when they differ otherwise (another
    subject, more than one slot, added or removed words, a name of the subject)."""
    a, b = tokens(old), tokens(new)
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()]
    changed = [op for op in ops if op[0] != "equal"]
    if len(changed) != 1 or changed[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = changed[0]
    if i2 - i1 > MAX_SLOT or j2 - j1 > MAX_SLOT:
        return None
    if not (_is_value(a, i1, i2) and _is_value(b, j1, j2)):
        return None
    if not (_specific(a) or any(c.isdigit() for c in " ".join(a[i1:i2] + b[j1:j2]))):
        return None  # "Jon is a dancer" / "Jon is tired": both hold
    return Slot(" ".join(a[i1:i2]), " ".join(b[j1:j2]))


def _is_value(words: list[str], start: int, end: int) -> bool:
    """Whether ``words[start:end]`` is a value: after the subject (the words before the first
    predicate), no list, and no token that names the subject."""
    span = words[start:end]
    if any(w in (",", ";", "and", "or") for w in span):
        return False
    verb = _predicate(words)
    if verb is None or start <= verb:
        return False  # no predicate to tell subject from value, or the subject itself
    return not any(_names(words, n) for n in range(start, end))


def _specific(words: list[str]) -> bool:
    """A subject of two or more content words ("the staging port"), not a bare name ("Jon")."""
    verb = _predicate(words) or 0
    return sum(w not in STOPWORDS for w in words[:verb]) >= 2


def _predicate(words: list[str]) -> int | None:
    """Index of the first predicate word after the first word (a subject has one word or more)."""
    return next((n for n in range(1, len(words)) if words[n] in PREDICATES), None)


def _names(words: list[str], n: int) -> bool:
    """Whether ``words[n]`` names a thing rather than giving a value: a number or identifier
    after a naming noun ("job 27", "number 27"), an identifier of letters and digits after any
    plain noun ("module m3", "API v2.4"), or a ``#27``."""
    word = words[n]
    has_digit = any(c.isdigit() for c in word)
    if not has_digit:
        return False
    if word.startswith("#"):
        return True
    before = words[n - 1] if n else ""
    if before in NAMING:
        return True
    has_letter = any(c.isalpha() for c in word)
    return has_letter and before.isalpha() and before not in RELATIONS


def slot_keys(text: str) -> frozenset[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(words before, words after) each possible value slot: two statements
    :func:`changed_slot` pairs always share one. Finds the pairs among thousands of memories
    by lookup, not by comparing every pair."""
    words = tokens(text)
    keys = set()
    for start in range(len(words)):
        for size in range(1, MAX_SLOT + 1):
            if start + size > len(words):
                break
            keys.add((tuple(words[:start]), tuple(words[start + size :])))
    return frozenset(keys)
