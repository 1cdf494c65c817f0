"""Small text rules used everywhere, defined once: flattening, control characters, indents, and
what "the same text" means."""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""Control characters (not tab or newline): a NUL would make the file read as binary."""
_FINAL_STOP = " .!?;:,"


def printable(text: str) -> str:
    """``text`` with control characters shown as U+FFFD, so the file stays text."""
    return CONTROL.sub("\ufffd", text)


def one_line(text: str) -> str:
    """Text on one line: runs of whitespace (newlines included) become one space."""
    return " ".join(text.split())


def same_text(text: str) -> str:
    """The key under which two texts are the same memory: case, spacing and a final full stop
    (or other closing punctuation) do not count; everything else does ("C" is not "C++")."""
    return one_line(text).casefold().rstrip(_FINAL_STOP)


def dedent(line: str, width: int) -> str:
    """``line`` without up to ``width`` columns of leading indent (a tab counts to the next
    multiple of 4), keeping tabs inside the text as written."""
    if line[:width] == " " * width:
        return line[width:]
    expanded = line.expandtabs(4)
    strip = min(width, len(expanded) - len(expanded.lstrip(" ")))
    return expanded[strip:]
