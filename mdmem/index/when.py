"""The days a query's time expressions name: "in May 2023", "the last week of October 2023",
"summer 2022", "last week", "3 days ago", "on Monday". Ranking lifts the candidates dated in
those days (``search.when_weight``): a chunk's dates are its own (the entry's, the file's
frontmatter ``started``/``date``/``created``, a session's start) and a date in its file's name.

Pure and small by design: a regular-expression grammar over the phrasings people use, no
dependency (``dateparser`` finds single dates, not the ranges "May 2023" or "last week" stand
for). Relative expressions count back from ``today`` (the day searched); a month or day named
without its year matches it in any year. An event is talked about after it happens, so a
chunk still matches ``search.when_days`` days after a span ends. What it cannot resolve
("before the trip", "when did ...") names no span and lifts nothing.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mdmem.index.chunks import _name_date

_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH = (
    r"(?P<{g}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_YEAR = r"(?P<{g}>(?:19|20)\d\d)"
_DAY = r"(?P<{g}>[0-3]?\d)(?:st|nd|rd|th)?"
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": 5}
_NUMBERS = {w: n for n, w in enumerate("zero one two three four five six seven eight".split())}
_NUMBERS |= {"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a": 1, "an": 1}
_COUNT = "|".join(sorted(_NUMBERS, key=len, reverse=True))
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_SEASONS = {
    "spring": (3, 5),
    "summer": (6, 8),
    "fall": (9, 11),
    "autumn": (9, 11),
    "winter": (12, 2),
}
ANY_YEAR = 2000
"""The year of a span named without one (a leap year: "29 February" exists)."""


def _g(pattern: str, name: str) -> str:
    return pattern.format(g=name)


@dataclass(frozen=True)
class Span:
    """Days named by a query, inclusive; ``yearly``: in whichever year (stored in
    :data:`ANY_YEAR`; a winter runs into the next one)."""

    first: dt.date
    last: dt.date
    yearly: bool = False

    def holds(self, day: dt.date, slack_days: int = 0) -> bool:
        """Whether ``day`` falls in the span or up to ``slack_days`` after it."""
        if not self.yearly:
            return self.first <= day <= self.last + dt.timedelta(days=slack_days)
        for year in (day.year, day.year - 1):
            first, last = _in_year(self.first, year), _in_year(self.last, year)
            if last < first:
                last = _in_year(self.last, year + 1)
            if first <= day <= last + dt.timedelta(days=slack_days):
                return True
        return False


def _in_year(day: dt.date, year: int) -> dt.date:
    return day.replace(year=year, day=min(day.day, calendar.monthrange(year, day.month)[1]))


def _month(word: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(word.lower().rstrip(".")[:3]))


def _month_span(
    year: int, month: int, first_day: int = 1, last_day: int = 31
) -> tuple[dt.date, dt.date]:
    end = calendar.monthrange(year, month)[1]
    return dt.date(year, month, min(first_day, end)), dt.date(year, month, min(last_day, end))


# parts of a month: "the second week of", "the first half of", "mid-", "early", "late"
_PART = (
    r"(?:(?:the\s+)?(?P<ord>first|second|third|fourth|last)\s+(?P<unit>week(?:end)?|half)\s+of"
    r"|(?P<edge>early|mid|late)(?:\s*-\s*|\s+))\s*"
)
_ABSOLUTE = [
    # 2023-05-08
    ("iso", r"\b(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)\b"),
    # July 12, 2022 · July 12th · 12 July 2022 · 9 February, 2023
    ("date", rf"\b{_g(_MONTH, 'm')}\s+{_g(_DAY, 'd')}\b(?:,?\s+{_g(_YEAR, 'y')})?"),
    ("date", rf"\b{_g(_DAY, 'd')}\s+(?:of\s+)?{_g(_MONTH, 'm')}\b(?:,?\s+{_g(_YEAR, 'y')})?"),
    # between August and November 2023 · from May to July 2022
    (
        "range",
        rf"\b(?:between|from)\s+{_g(_MONTH, 'm')}(?:\s+{_g(_YEAR, 'y1')})?\s+(?:and|to|until)\s+"
        rf"{_g(_MONTH, 'm2')}\b(?:,?\s+{_g(_YEAR, 'y')})?",
    ),
    # the last week of October 2023 · mid-August 2023 · the first half of September 2022 · May 2023
    ("month", rf"(?:{_PART})?\b{_g(_MONTH, 'm')}\b(?:,?\s+(?:of\s+)?{_g(_YEAR, 'y')})?"),
    # summer 2022 · the summer of 2022 · during the summer
    ("season", rf"\b(?P<s>spring|summer|fall|autumn|winter)\b(?:\s+(?:of\s+)?{_g(_YEAR, 'y')})?"),
    ("year", rf"\b{_g(_YEAR, 'y')}\b"),
]
_RELATIVE = [
    ("today", r"\b(?:today|tonight|this\s+morning|this\s+evening)\b"),
    ("yesterday", r"\byesterday\b"),
    ("ago", rf"\b(?P<n>\d{{1,3}}|{_COUNT})\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
    ("this", r"\b(?P<which>this|last|past)\s+(?P<unit>week(?:end)?|month|year)\b"),
    ("weekday", rf"\b(?:(?P<last>last)\s+|on\s+)?(?P<wd>{'|'.join(_WEEKDAYS)})\b"),
]
_PATTERNS = [(kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _ABSOLUTE + _RELATIVE]


def spans(query: str, today: dt.date) -> tuple[Span, ...]:
    """The spans of days the time expressions in ``query`` name, in order; none when it names
    no time (or only what needs an event to anchor it, "before the trip"). The patterns are
    tried longest-phrase first; a phrase one of them read is not read again. Relative
    expressions count back from the one day the query names, if it names one ("last week, as
    mentioned on 6 November 2023", "the Monday before July 24, 2023"), else from ``today``."""
    taken: list[tuple[int, int]] = []
    read: list[tuple[int, str, dict[str, str], Span, re.Match[str] | None]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            parts = {k: v for k, v in match.groupdict().items() if v is not None}
            span = _span(kind, parts, match, today)
            if span is not None:
                taken.append((start, end))
                read.append((start, kind, parts, span, _BOUND.search(query[:start])))
    days = [span for _, kind, _, span, _ in read if kind in _DAYS and not span.yearly]
    anchor = (
        days[0].first if len(days) == 1 and any(r[1] in _RELATIVE_KINDS for r in read) else None
    )
    found: list[tuple[int, Span]] = []
    for start, kind, parts, span, bound in sorted(read, key=lambda r: r[0]):
        if anchor is not None and kind in _RELATIVE_KINDS:
            span = _relative(kind, parts, anchor) or span
        elif anchor is None or kind not in _DAYS:
            span = _bounded(bound, span, today)  # type: ignore[assignment]
        if span is not None:
            found.append((start, span))
    return tuple(span for _, span in found)


_DAYS = ("iso", "date")
_RELATIVE_KINDS = tuple(kind for kind, _ in _RELATIVE)
_BOUND = re.compile(
    r"\b(?P<b>as\s+of|before|prior\s+to|until|till|by|after|since)\s+(?:the\s+)?$", re.IGNORECASE
)
_START = dt.date(1900, 1, 1)


def _bounded(bound: re.Match[str] | None, span: Span, today: dt.date) -> Span | None:
    """ "before May 2023" names the days before the span, "since 2022" the days from it to
    today; "as of November 2023" names no time of an event (the question's own date)."""
    if bound is None:
        return span
    word = " ".join(bound.group("b").lower().split())
    if word == "as of" or span.yearly:
        return None
    day = dt.timedelta(days=1)
    if word in ("after", "since"):
        first = span.last + day if word == "after" else span.first
        return Span(first, max(first, today))
    return Span(_START, span.first - day)


def _span(kind: str, parts: dict[str, str], match: re.Match[str], today: dt.date) -> Span | None:
    """One matched expression as a span; None when it is no time after all ("may" the verb,
    "February 31")."""
    if kind != "iso" and "m" in parts and not _a_month(parts["m"], match, parts):
        return None
    year = int(parts["y"]) if "y" in parts else None
    try:
        if kind in ("iso", "date"):
            month = int(parts["m"]) if kind == "iso" else _month(parts["m"])
            day = dt.date(year or ANY_YEAR, month, int(parts["d"]))
            return Span(day, day, yearly=year is None)
        if kind == "range":
            first = _month_span(int(parts.get("y1", year or ANY_YEAR)), _month(parts["m"]))[0]
            last = _month_span(year or ANY_YEAR, _month(parts["m2"]))[1]
            return Span(first, last, yearly=year is None) if first <= last or not year else None
        if kind == "month":
            return _month_part(year, _month(parts["m"]), parts)
        if kind == "season":
            start, end = _SEASONS[parts["s"].lower()]
            y = year or ANY_YEAR
            last_year = y + 1 if end < start else y
            return Span(
                _month_span(y, start)[0], _month_span(last_year, end)[1], yearly=year is None
            )
        if kind == "year":
            return Span(dt.date(year or ANY_YEAR, 1, 1), dt.date(year or ANY_YEAR, 12, 31))
    except ValueError:
        return None
    return _relative(kind, parts, today)


def _a_month(word: str, match: re.Match[str], parts: dict[str, str]) -> bool:
    """Month names are words and names too ("we may march", "Jan said"): "may" and "march" are
    months capitalised, an abbreviation only next to a day or a year."""
    dated = "d" in parts or "y" in parts
    bare = word.lower().rstrip(".")
    if bare not in _MONTHS:
        return dated
    if bare in ("may", "march") and not word[0].isupper():
        return dated or match.group(0).lower() != word.lower()
    return True


def _month_part(year: int | None, month: int, parts: dict[str, str]) -> Span:
    y = year or ANY_YEAR
    end = calendar.monthrange(y, month)[1]
    first, last = 1, end
    if (edge := parts.get("edge", "").lower()) == "early":
        first, last = 1, 10
    elif edge == "mid":
        first, last = 11, 20
    elif edge == "late":
        first, last = 21, end
    elif ordinal := parts.get("ord"):
        n, unit = _ORDINALS[ordinal.lower()], parts["unit"].lower()
        if unit == "half":
            first, last = (16, end) if n > 1 else (1, 15)
        elif n == 5:  # the last week of a month
            first, last = end - 6, end
        elif unit == "weekend" and year:
            saturday = 1 + (5 - dt.date(y, month, 1).weekday()) % 7 + 7 * (n - 1)
            first, last = saturday, saturday + 1
        else:
            first, last = 7 * (n - 1) + 1, 7 * n
    span = _month_span(y, month, first, last)
    return Span(span[0], span[1], yearly=year is None)


def _relative(kind: str, parts: dict[str, str], today: dt.date) -> Span | None:
    day = dt.timedelta(days=1)
    if kind == "today":
        return Span(today, today)
    if kind == "yesterday":
        return Span(today - day, today - day)
    if kind == "ago":
        raw = parts["n"].lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[raw]
        width = _UNIT_DAYS[parts["unit"].lower()]
        centre = today - dt.timedelta(days=n * width)
        half = dt.timedelta(days=0 if width == 1 else width // 2)
        return Span(centre - half, min(today, centre + half))
    if kind == "this":
        return _this_or_last(parts["which"].lower(), parts["unit"].lower(), today)
    if kind == "weekday":
        back = (today.weekday() - _WEEKDAYS.index(parts["wd"].lower())) % 7
        if back == 0 and parts.get("last"):
            back = 7
        return Span(today - dt.timedelta(days=back), today - dt.timedelta(days=back))
    return None


def _this_or_last(which: str, unit: str, today: dt.date) -> Span:
    """this/last/past week, weekend, month or year: calendar periods ("past": the last N days)."""
    if which == "past":
        width = {"week": 7, "weekend": 7, "month": 30, "year": 365}[unit]
        return Span(today - dt.timedelta(days=width), today)
    back = 1 if which == "last" else 0
    if unit == "year":
        y = today.year - back
        return Span(dt.date(y, 1, 1), min(today, dt.date(y, 12, 31)))
    if unit == "month":
        y, m = divmod(today.year * 12 + today.month - 1 - back, 12)
        first, last = _month_span(y, m + 1)
        return Span(first, min(today, last))
    monday = today - dt.timedelta(days=today.weekday() + 7 * back)
    if unit == "weekend":
        saturday = monday + dt.timedelta(days=5)
        return Span(saturday, saturday + dt.timedelta(days=1))
    return Span(monday, min(today, monday + dt.timedelta(days=6)))


def lifted(named: Sequence[Span], days: Sequence[Sequence[str]], slack_days: int) -> list[bool]:
    """Which candidates, given the ISO dates of each (:func:`chunk_days`), have one in a span
    of ``named`` (:func:`spans`) or up to ``slack_days`` after it."""
    return [any(_holds(named, day, slack_days) for day in dates) for dates in days]


def _holds(found: Sequence[Span], day: str, slack_days: int) -> bool:
    try:
        date = dt.date.fromisoformat(day[:10])
    except ValueError:
        return False
    return any(s.holds(date, slack_days) for s in found)


def chunk_days(created: str | None, path: str) -> tuple[str, ...]:
    """A chunk's dates: its own (entry, frontmatter, a session's start; else the day the index
    first saw it) and a date in its file's name (``journal/2023-05-08.md``), which the index
    keeps as context only."""
    return tuple(d for d in dict.fromkeys((created, _file_day(path))) if d)


@functools.lru_cache(maxsize=4096)
def _file_day(path: str) -> str | None:
    return _name_date(path.rsplit("/", 1)[-1].removesuffix(".md"))
