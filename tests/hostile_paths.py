"""Generated names for the path resolver's property tests (tests/integration/test_mcp_paths.py,
tests/unit/test_memory_tool_paths.py): hostile ones, each holding at least one thing
mdmem/paths.py refuses, and benign ones it must accept."""

from __future__ import annotations

from hypothesis import strategies as st

SEPARATORS = ["/", "\\"]
SEGMENT = st.text(
    alphabet=st.sampled_from("abcxyz019-_éüß日本語メモ"), min_size=1, max_size=8
).filter(lambda s: s not in ("out",))
LOOKALIKES = ["\uff0f", "\uff3c", "\u2024", "\uff0e", "\ufe52", "\uff5e", "\u2025", "\ufe55"]
INVISIBLE = ["\u202e", "\u200f", "\u200e", "\u200b", "\u2066", "\ufeff", "\u061c"]
CONTROL = ["\0", "\n", "\r", "\x1b", "\t", "\x7f", "\u2028"]
HOSTILE_PARTS = [
    "..",
    "..\\..",
    "%2e%2e",
    "%2E%2E%2F",
    "..%2f",
    "%c0%ae%c0%ae",
    "%00",
    "...",
    ". ",
    "x.",
    "x ",
    "\u3002\u3002",
    "\u30fb",
    "\udcff",
    "\udcc0\udcae",
    ".mdmem",
    ".git",
    ".trash",
]


@st.composite
def benign_names(draw: st.DrawFn, suffix: str = "", glob: bool = False) -> str:
    parts = draw(st.lists(SEGMENT, min_size=1, max_size=4))
    if glob and draw(st.booleans()):
        parts[draw(st.integers(0, len(parts) - 1))] = draw(st.sampled_from(["*", "**", "?x"]))
    name = draw(st.sampled_from(SEPARATORS[:1])).join(parts) + suffix
    return ("./" if draw(st.booleans()) else "") + name


@st.composite
def hostile_names(draw: st.DrawFn, links: tuple[str, ...] = ("link",)) -> str:
    """A name with at least one thing the resolver refuses, somewhere in it (``links``: also
    a name through the workspace's symlink that points out; not for a glob, which opens
    nothing and matches only indexed files, which never lie through such a link)."""
    parts = draw(st.lists(SEGMENT, min_size=1, max_size=3))
    how = draw(st.sampled_from(["absolute", "home", "drive", "part", "char", *links]))
    sep = draw(st.sampled_from(SEPARATORS))
    at = draw(st.integers(0, len(parts)))
    if how == "absolute":
        return draw(st.sampled_from(["/", "\\", "//", "\uff0f"])) + sep.join(parts)
    if how == "home":
        return draw(st.sampled_from(["~", "~root", "\uff5e"])) + "/" + "/".join(parts)
    if how == "drive":
        return draw(st.sampled_from(["C:", "c:\\", "Z:/"])) + sep.join(parts)
    if how == "link":  # the symlink inside the workspace that points out
        return "out" + sep + sep.join(parts)
    if how == "part":
        parts.insert(at, draw(st.sampled_from(HOSTILE_PARTS)))
        return sep.join(parts)
    char = draw(st.sampled_from(LOOKALIKES + INVISIBLE + CONTROL))
    word = parts[at % len(parts)]
    cut = draw(st.integers(0, len(word)))
    parts[at % len(parts)] = word[:cut] + char + word[cut:]
    return sep.join(parts)
