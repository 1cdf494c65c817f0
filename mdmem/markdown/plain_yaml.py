"""The frontmatter lines mdmem writes (``key: value``, a bare value or a flow mapping of bare
keys and values), read as YAML reads them without YAML: PyYAML's import, and its reader's first
check of printable characters, cost a hook ~40-60 ms. Anything else is left to YAML."""

from __future__ import annotations

import re
from typing import Any

_PLAIN = r"[A-Za-z0-9_][A-Za-z0-9_.:+-]*(?<!:)"
_FLOW = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
_FLOW_MAP = rf"\{{(?:{_FLOW}: {_FLOW}(?:, {_FLOW}: {_FLOW})*)?\}}"
PLAIN_LINE = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*): ({_PLAIN}|{_FLOW_MAP})")
PLAIN_PAIR = re.compile(rf"({_FLOW}): ({_FLOW})")


_BOOL_OR_NULL = frozenset(
    "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF".split()
    + "null Null NULL".split()
)
"""The words YAML 1.1 reads as a boolean or null (PyYAML's resolvers): left to YAML."""
_NUMBERISH = re.compile(r"[0-9_.:+\-eEtTzZ]*")
"""Digits and the characters YAML 1.1's int, float and timestamp forms add to them (after a
leading digit: ``0x``/``0b`` aside). A value that starts with a digit and has any other
character is none of those: a string."""
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_FLOAT = re.compile(r"[0-9]+\.[0-9]+")
_STAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2}):([0-9]{2}))?")
_UNKNOWN = object()


def typed_frontmatter(block: str) -> dict[Any, Any] | None:
    """``block`` as YAML's SafeLoader (what the Markdown reader's frontmatter goes through)
    reads it, when every line is ``key: value`` with a bare value or a flow mapping of bare
    keys and values, each key once, and each scalar one whose type is plain to see: a string
    (no boolean or null word, nothing YAML 1.1 reads as a number or time), a decimal integer,
    a decimal fraction, a date or a date and time without a zone; else None (YAML reads it).
    What mdmem writes of a session's head is such: a session start that must build its
    context is spared PyYAML's import and its reader's first check (~40-60 ms). A test holds
    it to SafeLoader over generated blocks."""
    out: dict[Any, Any] = {}
    for line in block.splitlines():
        match = PLAIN_LINE.fullmatch(line)
        if match is None:
            return None
        key, value = _scalar(match.group(1)), match.group(2)
        if key is _UNKNOWN or key in out:
            return None
        if value.startswith("{"):
            pairs = [(_scalar(k), _scalar(v)) for k, v in PLAIN_PAIR.findall(value)]
            keys = {k for k, _ in pairs}
            if _UNKNOWN in keys or any(v is _UNKNOWN for _, v in pairs):
                return None
            if len(keys) != len(pairs):
                return None
            out[key] = dict(pairs)
        else:
            typed = _scalar(value)
            if typed is _UNKNOWN:
                return None
            out[key] = typed
    return out or None


def _scalar(text: str) -> object:
    """A bare scalar as SafeLoader reads it, or ``_UNKNOWN`` (left to YAML)."""
    if text in _BOOL_OR_NULL:
        return _UNKNOWN
    if not text[:1].isdigit():
        return text  # (no YAML 1.1 form but those words starts with a letter or ``_``)
    if text[:2] in ("0x", "0b") or not _NUMBERISH.fullmatch(text):
        return text if text[:2] not in ("0x", "0b") else _UNKNOWN
    if _DECIMAL.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    stamp = _STAMP.fullmatch(text)
    if stamp is not None:
        import datetime as dt

        y, mo, d, h, mi, sec = (None if p is None else int(p) for p in stamp.groups())
        try:
            if h is None or mi is None or sec is None:
                return dt.date(y, mo, d)  # type: ignore[arg-type]
            return dt.datetime(y, mo, d, h, mi, sec)  # type: ignore[arg-type]
        except ValueError:
            return _UNKNOWN
    return _UNKNOWN
