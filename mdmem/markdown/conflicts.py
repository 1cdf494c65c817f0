"""git's conflict markers in a file: a merge a person has not finished.

Such a file is reported (a parse problem, so ``mdmem status`` and search show it) and never
written by the program: writing around half a merge would bury one side of it.
"""

from __future__ import annotations

import re

_OPEN = re.compile(r"^<{7}(?:[ \t].*)?\r?$", re.M)
_MIDDLE = re.compile(r"^={7}\r?$", re.M)
_CLOSE = re.compile(r"^>{7}(?:[ \t].*)?\r?$", re.M)


def conflict_line(text: str) -> int | None:
    """The 1-based line of the first ``<<<<<<<`` that a ``=======`` and then a ``>>>>>>>``
    follow, or None. All three are needed: a lone ``=======`` underlines a heading."""
    if "<<<<<<<" not in text:
        return None
    for opening in _OPEN.finditer(text):
        middle = _MIDDLE.search(text, opening.end())
        if middle is not None and _CLOSE.search(text, middle.end()) is not None:
            return text.count("\n", 0, opening.start()) + 1
    return None


def conflict_message(line: int) -> str:
    return (
        f"unresolved git conflict markers (<<<<<<< at line {line}): resolve them by hand; "
        "mdmem will not write this file until then"
    )
