"""Whether a merged memory still says what its sources said, checked before anything is replaced.

``composite = 0.6 × mean cosine(merged, each source) + 0.4 × keyword retention``. Keywords are
bilingual: capitalised phrases and words (stopwords out), snake_case identifiers, dotted paths,
ALL_CAPS constants, and CJK words (jieba). A cosine alone passes paraphrases that lost every
name, so a merge that drops any number, date, proper name or identifier of its sources is
refused whatever its score; so is one that drops a distinguishing token of a source (one holding
a digit, a capital letter or an inner ``-``, ``_`` or ``.``: ``m3``, ``eu-west-1``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mdmem.distill.rules import STOPWORDS

EMB_WEIGHT = 0.6
KW_WEIGHT = 0.4

_MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_WEEKDAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun".split()
)
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:1[89]|2\d)\d\d)"
_DATES = [
    re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I),
]
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[^\W\d_][\w'’-]*")
_SNAKE = re.compile(r"\b\w+(?:_\w+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][\w-]*(?:[./][A-Za-z_][\w-]*)+\b")
_ALL_CAPS = re.compile(r"\b[A-Z][A-Z0-9_]+\b")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)$")
GENERIC = frozenset(
    """user users assistant agent always never every each when whenever use uses prefer
    prefers remember note today yesterday tomorrow also however yes please thanks""".split()
)
"""Capitalised only because they start a sentence: not names."""


@dataclass(frozen=True)
class Fidelity:
    """How well one merged memory keeps its sources."""

    composite: float
    emb_sim: float
    """Mean cosine between the merged text and each source."""
    kw_retention: float
    """Share of the sources' keywords found in the merged text (1.0 when they have none)."""
    lost_keywords: tuple[str, ...]
    lost_facts: tuple[str, ...]
    """Numbers, dates, proper names and identifiers of the sources missing from the merge."""
    threshold: float

    @property
    def passed(self) -> bool:
        return not self.lost_facts and self.composite >= self.threshold

    @property
    def reason(self) -> str:
        if self.lost_facts:
            return "loses " + ", ".join(self.lost_facts[:8])
        if self.composite < self.threshold:
            return f"fidelity {self.composite:.3f} below {self.threshold:g}"
        return "kept"

    def to_dict(self) -> dict[str, object]:
        return {
            "composite": round(self.composite, 4),
            "emb_sim": round(self.emb_sim, 4),
            "kw_retention": round(self.kw_retention, 4),
            "lost_keywords": list(self.lost_keywords),
            "lost_facts": list(self.lost_facts),
            "threshold": self.threshold,
            "passed": self.passed,
            "reason": self.reason,
        }


def check(
    merged: str, sources: Sequence[str], similarities: Sequence[float], threshold: float
) -> Fidelity:
    """Score ``merged`` against ``sources``; ``similarities`` are its cosines to each source."""
    emb = sum(similarities) / len(similarities) if similarities else 0.0
    common = lower_words([merged, *sources])
    wanted = sorted({k for s in sources for k in keywords(s, common)})
    missing = [k for k in wanted if not contains(merged, k)]
    retention = 1.0 - len(missing) / len(wanted) if wanted else 1.0
    lost_facts = lost(merged, {f for s in sources for f in facts(s, common)})
    return Fidelity(
        composite=EMB_WEIGHT * emb + KW_WEIGHT * retention,
        emb_sim=emb,
        kw_retention=retention,
        lost_keywords=tuple(missing),
        lost_facts=tuple(sorted(lost_facts)),
        threshold=threshold,
    )


def keywords(text: str, common: frozenset[str] = frozenset()) -> set[str]:
    """The keywords of ``text``, lowercased: capitalised phrases and words, identifiers, CJK
    words. A capitalised word in ``common`` (used in lower case nearby) is no name."""
    found = {name.lower() for name in _names(text, common, phrases=True)}
    found |= {m.group(0).lower() for m in _SNAKE.finditer(text)}
    found |= {m.group(0).lower() for m in _DOTTED.finditer(text) if not _is_number(m.group(0))}
    found |= {m.group(0).lower() for m in _ALL_CAPS.finditer(text) if len(m.group(0)) > 1}
    found |= _cjk_words(text)
    return found


def facts(text: str, common: frozenset[str] = frozenset()) -> set[str]:
    """What a merge must never lose: dates (as ISO), numbers, proper names, identifiers."""
    out: set[str] = set()
    rest = text
    for pattern in _DATES:
        for m in pattern.finditer(rest):
            out.add("date " + _iso(m))
        rest = pattern.sub(" ", rest)
    out |= {"number " + _number(m.group(0)) for m in _NUMBER.finditer(rest)}
    out |= {"name " + n.lower() for n in _names(text, common, phrases=False)}
    out |= {"id " + m.group(0).lower() for m in _SNAKE.finditer(text)}
    out |= {
        "id " + m.group(0).lower() for m in _DOTTED.finditer(text) if not _is_number(m.group(0))
    }
    out |= {"id " + m.group(0).lower() for m in _ALL_CAPS.finditer(text) if len(m.group(0)) > 1}
    out |= {"token " + t for t in distinguishing(text)}
    return out


_EDGE = "\"'“”‘’()[]{}<>*`,;:!?."


def distinguishing(text: str) -> set[str]:
    """The tokens that tell this memory from its neighbours, lowercased: any holding a digit,
    a capital letter, or an inner ``-``, ``_`` or ``.`` (``27``, ``m3``, ``eu-west-1``,
    ``v2.4``, ``Kafka``). A merge must keep each as a token, whatever the other rules say:
    ``module m3`` has no number, name or keyword they see."""
    out = set()
    for raw in text.split():
        word = raw.strip(_EDGE)
        inner = any(c in word[1:-1] for c in "-_.")
        if word and (inner or any(c.isdigit() or c.isupper() for c in word)):
            out.add(word.lower())
    return out - PRONOUNS


PRONOUNS = frozenset(
    "the a an i we you he she it they my our your his her its their this that these those".split()
)
"""Capitalised only to start a sentence, they tell no memory from another: a merge that says
"Production deploys go …" for "The deploy target is …" loses no fact."""


def token_set(text: str) -> set[str]:
    """Every word of ``text`` as :func:`distinguishing` compares it (lowercased)."""
    return {raw.strip(_EDGE).lower() for raw in text.split()}


def lost(merged: str, wanted: set[str]) -> set[str]:
    """The facts of ``wanted`` that ``merged`` does not keep. A name or identifier is kept in
    any case; a number also inside a date; a date also as a more precise one."""
    dates = {f[5:] for f in facts(merged) if f.startswith("date ")}
    numbers = {_number(m.group(0)) for m in _NUMBER.finditer(merged)}
    present = token_set(merged)
    out = set()
    for fact in wanted:
        kind, _, value = fact.partition(" ")
        if kind == "date":
            ok = any(d.startswith(value) for d in dates)
        elif kind == "number":
            ok = value in numbers
        elif kind == "token":
            ok = value in present
        else:
            ok = contains(merged, value)
        if not ok:
            out.add(fact)
    return out


def contains(text: str, keyword: str) -> bool:
    """Whether ``keyword`` (lowercased) occurs in ``text`` as whole words (CJK: as text)."""
    lowered = text.lower()
    if _CJK.search(keyword):
        return keyword in lowered
    return re.search(r"(?<!\w)" + re.escape(keyword) + r"(?!\w)", lowered) is not None


def lower_words(texts: Sequence[str]) -> frozenset[str]:
    """Words the texts use in lower case: the same word capitalised is no proper name."""
    return frozenset(w for t in texts for w in re.findall(r"\b[a-z][\w'’-]*", t))


def _names(text: str, common: frozenset[str], *, phrases: bool) -> list[str]:
    """Capitalised words that are not stopwords, generic sentence starters or words used in
    lower case (in the text or ``common``); with ``phrases``, runs of two or more as well."""
    lowered = lower_words([text]) | common
    out: list[str] = []
    run: list[str] = []
    last_end = -1
    for m in _CAPITALISED.finditer(text):
        word = m.group(0).rstrip("'’-")
        if word.endswith(("'s", "’s")):
            word = word[:-2]
        key = word.lower()
        ok = (
            word[:1].isupper()
            and not word.isupper()
            and key not in STOPWORDS
            and key not in GENERIC
            and key.rstrip(".") not in _MONTHS
            and key not in _WEEKDAYS
            and key not in lowered
            and len(word) > 1
        )
        if ok and run and text[last_end : m.start()].strip() == "":
            run.append(word)
        else:
            if phrases and len(run) > 1:
                out.append(" ".join(run))
            run = [word] if ok else []
        if ok:
            out.append(word)
            last_end = m.end() - (len(m.group(0)) - len(word))
    if phrases and len(run) > 1:
        out.append(" ".join(run))
    return out


def _cjk_words(text: str) -> set[str]:
    runs = _CJK.findall(text)
    if not runs:
        return set()
    from mdmem.index.fts import segment

    return {w for run in runs for w in segment(run).split() if len(w) > 1}


def _iso(m: re.Match[str]) -> str:
    groups = m.groupdict()
    month = groups["month"]
    number = int(month) if month.isdigit() else _MONTHS[month.lower().rstrip(".")]
    day = groups.get("day")
    year = groups["year"]
    return f"{year}-{number:02d}" + (f"-{int(day):02d}" if day else "")


def _number(text: str) -> str:
    plain = text.replace(",", "")
    return plain.lstrip("0") or "0" if plain.isdigit() else plain


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"[\d.,]+", text))
