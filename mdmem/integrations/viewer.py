"""Line-numbered views of text, as Claude's memory tool shows files, with a size cap.

Both the MCP ``read`` tool and the memory tool show files this way, so an agent sees one
format whichever way it reaches the workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

LINE_NUMBER_WIDTH = 6
"""The reference memory tool right-aligns line numbers to the width of 999999."""
MAX_VIEW_CHARS = 40_000
"""At most this much text per view (about 10k tokens); the rest is paged with a line range."""


def numbered(lines: Sequence[str], first: int) -> list[str]:
    """``lines`` numbered from ``first``: the number right-aligned, a tab, the line."""
    return [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{line}" for n, line in enumerate(lines, first)]


VIEW_AGAIN = "view again with view_range [{next}, -1] for the rest"


def capped(
    rows: Sequence[str],
    first: int,
    total: int,
    limit: int = MAX_VIEW_CHARS,
    resume: str = VIEW_AGAIN,
) -> str:
    """The numbered ``rows`` (line ``first`` on), cut at ``limit`` characters on a line
    boundary, with a last line saying which lines were shown and how to ask for the next
    (``resume``, with ``{next}`` the first line not shown)."""
    size = 0
    for count, row in enumerate(rows):
        size += len(row) + 1
        if size > limit and count > 0:
            last = first + count - 1
            return "\n".join(
                [
                    *rows[:count],
                    f"[cut at {limit:,} characters: lines {first}-{last} of {total} shown; "
                    f"{resume.format(next=last + 1)}]",
                ]
            )
    return "\n".join(rows)


def masked_lines(lines: list[str], mask: Callable[[str], str]) -> list[str]:
    """``lines`` with secrets masked, line numbers kept: the text is masked as a whole (a
    secret may span lines); if that changed the number of lines, line by line."""
    joined = "\n".join(lines)
    whole = mask(joined)
    if whole is joined or whole == joined:
        return lines
    parts = whole.split("\n")
    if len(parts) == len(lines):
        return parts
    return [mask(line) for line in lines]
