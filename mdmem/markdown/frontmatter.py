"""A file's YAML frontmatter, edited line by line: setting a key rewrites its line (and a
block-style value under it), every other line stays as it was. Values are written so YAML
reads them back as they were given; :func:`head_frontmatter` reads a frontmatter back with
every value the string written."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping

from mdmem.errors import EditNotApplicable
from mdmem.markdown.parse import split_lines
from mdmem.markdown.plain_yaml import PLAIN_LINE, PLAIN_PAIR

_FRONT_RE = re.compile(r"\A---[ \t]*\r?\n(?P<yaml>.*?)^(?:---|\.\.\.)[ \t]*\r?$", re.S | re.M)
_SAFE_SCALAR = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:+-]*$")


def set_frontmatter(text: str, values: Mapping[str, object]) -> str:
    """Set top-level frontmatter keys, one line each; every other line stays as it was."""
    lines = split_lines(text)
    newline = (lines[0][len(lines[0].rstrip("\r\n")) :] if lines else "") or "\n"
    if not lines or lines[0].rstrip("\r\n").strip() != "---":
        block = ["---", *(f"{k}: {yaml_value(v)}" for k, v in values.items()), "---"]
        return newline.join(block) + newline + text
    end = next(
        (n for n in range(1, len(lines)) if lines[n].rstrip("\r\n").strip() in ("---", "...")),
        None,
    )
    if end is None:
        raise EditNotApplicable("the frontmatter has no closing '---'")
    pending = dict(values)
    out = [lines[0]]
    n = 1
    while n < end:
        key = lines[n].split(":", 1)[0]
        if key in pending and not lines[n][:1].isspace():
            out.append(f"{key}: {yaml_value(pending.pop(key))}{newline}")
            n += 1
            # a block-style value (indented lines below the key, as Obsidian writes) goes too
            while n < end and (lines[n][:1] in (" ", "\t") or lines[n].lstrip().startswith("- ")):
                n += 1
            continue
        out.append(lines[n])
        n += 1
    extra = [f"{k}: {yaml_value(v)}{newline}" for k, v in pending.items()]
    return "".join(out + extra + lines[end:])


def frontmatter_end(text: str) -> int | None:
    """The offset just past the frontmatter's closing line, as :func:`set_frontmatter` finds
    it (0 when the text has no frontmatter; None when it is not closed): what that function
    changes lies before it, and everything from it on stays as it was."""
    lines = split_lines(text)
    if not lines or lines[0].rstrip("\r\n").strip() != "---":
        return 0
    end = next(
        (n for n in range(1, len(lines)) if lines[n].rstrip("\r\n").strip() in ("---", "...")),
        None,
    )
    return None if end is None else sum(map(len, lines[: end + 1]))


def head_frontmatter(text: str) -> dict[str, object] | None:
    """The frontmatter at the start of ``text``, every value a string as written (so a host
    named ``1234`` or ``yes`` compares as written), or None."""
    match = _FRONT_RE.match(text.removeprefix("\ufeff"))
    if match is None:
        return None
    plain = _plain_frontmatter(match.group("yaml"))
    if plain is not None:
        return plain
    import yaml

    try:
        data = yaml.load(match.group("yaml"), Loader=yaml.BaseLoader)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _plain_frontmatter(block: str) -> dict[str, object] | None:
    """``block`` as YAML's BaseLoader reads it, when every line is ``key: value`` with a bare
    value or a flow mapping of bare keys and values (what mdmem writes of a session's head),
    each key once; else None (YAML reads it). Spares a hook PyYAML's import (~25 ms)."""
    out: dict[str, object] = {}
    for line in block.splitlines():
        match = PLAIN_LINE.fullmatch(line)
        if match is None or match.group(1) in out:
            return None
        key, value = match.groups()
        if value.startswith("{"):
            pairs = PLAIN_PAIR.findall(value)
            if len({k for k, _ in pairs}) != len(pairs):
                return None
            out[key] = dict(pairs)
        else:
            out[key] = value
    return out or None


def yaml_value(value: object) -> str:
    """``value`` as one line of YAML that reads back as it was given (a flow mapping for a
    mapping; a string that YAML would read as another type, or not hold raw, quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(round(value, 3)) if isinstance(value, float) else str(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{yaml_value(str(k))}: {yaml_value(v)}" for k, v in value.items())
        return "{" + items + "}"
    text = str(value)
    if _SAFE_SCALAR.match(text) and not text.endswith(":") and not _reads_as_other_scalar(text):
        return text
    # JSON's string is YAML's double-quoted one, but for characters YAML may not hold raw
    return _yaml_unprintable().sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False)
    )


def _reads_as_other_scalar(text: str) -> bool:
    """Whether YAML reads ``text`` written bare as a number, a boolean or null (an id such as
    ``0000`` or ``1e5`` would come back as 0 or 100000.0). Timestamps are meant to read as
    dates, so they stay bare."""
    if not (text[0].isdigit() or text[0] in "+-." or text.lower() in _YAML_WORDS):
        return False
    if text.lower() not in _YAML_WORDS and _not_a_number(text):
        return False
    import yaml  # python-frontmatter's own YAML library, loaded only for such values

    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return True
    return isinstance(loaded, bool | int | float) or loaded is None


@functools.cache
def _yaml_unprintable() -> re.Pattern[str]:
    """What YAML does not read back unescaped: outside its printable set, or a line break of its
    own (NEL, U+2028, U+2029), which it would fold into a space. Compiled when first needed
    (a class over most of Unicode takes a reader that writes nothing ~10-25 ms to build)."""
    return re.compile(
        "[^\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
    )


def _not_a_number(text: str) -> bool:
    """Whether ``text`` (bare, in mdmem's safe characters) surely reads as no YAML 1.1 int or
    float, so PyYAML need not be loaded to ask (a digest such as ``05c4d5f0``: a letter, and
    no ``0x``, ``0b``, point or colon). A date's ``T`` reads as a date, not a number: also
    True. A test holds it to PyYAML's answer."""
    if not _NUMBER_CHARS.issuperset(text):
        return True
    body = text.lstrip("+-")
    return (
        "." not in text
        and ":" not in text
        and body[:2].lower() not in ("0x", "0b")
        and any(c.isalpha() for c in text)
    )


_NUMBER_CHARS = frozenset("0123456789+-._:xXoObBaAcCdDeEfFiInN")
"""Every character a YAML 1.1 int or float can hold (hex digits, 0x, 0o, 0b, .inf, .nan)."""
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
