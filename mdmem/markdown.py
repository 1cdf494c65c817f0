"""Parse one Markdown file's text into a Document: frontmatter, headings, entries with lines.

Pure: text in, values out. markdown-it-py's token line maps give exact 1-based line ranges;
python-frontmatter's YAML handler reads the frontmatter. Code blocks, tables and HTML are
content, not entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler
from markdown_it import MarkdownIt
from markdown_it.token import Token

from mdmem.entries import (
    ARCHIVE_TITLE,
    Entry,
    default_type_for_file,
    derived_id,
    find_meta,
    parse_importance,
    parse_meta,
    type_from_heading,
)

_FM_OPEN = re.compile(r"\A---[ \t]*\r?\n")
_FM_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$")
_MARKER = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_LONE_CR = re.compile(r"\r(?!\n)")
_CHECKBOX = re.compile(r"^\[([ xX])\](?:[ \t]+|$)")


@dataclass(frozen=True)
class Heading:
    level: int
    title: str
    line: int
    """1-based line of the heading."""


@dataclass(frozen=True)
class Problem:
    """Something wrong in a file that did not stop the rest of it from being read."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Document:
    path: str
    text: str
    frontmatter: Mapping[str, Any] = field(compare=False)
    headings: tuple[Heading, ...]
    entries: tuple[Entry, ...]
    problems: tuple[Problem, ...] = ()
    body_start: int = 1
    """First line after the frontmatter (1 when there is none)."""

    @property
    def newline(self) -> str:
        return newline_of(self.text)

    @property
    def lines(self) -> list[str]:
        return split_lines(self.text)


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split only at ``\\n`` (as Markdown does)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def newline_of(text: str) -> str:
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Block structure is all we need: skipping inline parsing halves the cost on big files.
    return MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])


def block_tokens(text: str) -> list[Token]:
    """markdown-it's block tokens for ``text`` (line maps are 0-based, end exclusive)."""
    return _parser().parse(text)


def parse_document(path: str, text: str) -> Document:
    """Parse ``text`` (the whole file) of the workspace file ``path``."""
    lines = split_lines(text)
    problems: list[Problem] = []
    frontmatter, fm_end = _frontmatter(path, text, lines, problems)
    # Blank the frontmatter lines so markdown-it's line maps are file line numbers.
    body = "\n" * fm_end + "".join(lines[fm_end:])
    # markdown-it also breaks lines at a lone CR; we don't: keep both line counts the same
    tokens = _parser().parse(_LONE_CR.sub(" ", body))

    headings: list[Heading] = []
    entries: list[Entry] = []
    stack: list[Heading] = []
    list_depth = 0
    file_type = default_type_for_file(path)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open" and tok.map:
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            heading = Heading(int(tok.tag[1]), title, tok.map[0] + 1)
            headings.append(heading)
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
        elif tok.type in ("bullet_list_open", "ordered_list_open"):
            list_depth += 1
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            list_depth -= 1
        elif tok.map and (
            (tok.type == "list_item_open" and list_depth == 1)
            or (tok.type == "paragraph_open" and list_depth == 0 and not tok.hidden)
        ):
            kind = "item" if tok.type == "list_item_open" else "paragraph"
            entry = _entry(path, lines, tok.map[0], tok.map[1], kind, stack, file_type)
            if entry is not None:
                entries.append(entry)
        i += 1
    return Document(
        path=path,
        text=text,
        frontmatter=frontmatter,
        headings=tuple(headings),
        entries=tuple(entries),
        problems=tuple(problems),
        body_start=fm_end + 1,
    )


def _frontmatter(
    path: str, text: str, lines: list[str], problems: list[Problem]
) -> tuple[dict[str, Any], int]:
    """Return (metadata, number of lines the frontmatter block takes)."""
    if not _FM_OPEN.match(text):
        return {}, 0
    for n in range(1, len(lines)):
        if _FM_CLOSE.match(lines[n].rstrip("\n")):
            break
    else:
        return {}, 0  # an opening --- alone is a thematic break, not frontmatter
    yaml_text = "".join(lines[1:n])
    try:
        data = YAMLHandler().load(yaml_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 2 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problems.append(Problem(path, f"malformed YAML frontmatter: {reason}", line))
        return {}, n + 1
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.append(
            Problem(path, f"frontmatter must be a mapping, not {type(data).__name__}", 2)
        )
        data = {}
    return data, n + 1


def _entry(
    path: str,
    lines: list[str],
    start: int,
    end: int,
    kind: str,
    stack: list[Heading],
    file_type: str,
) -> Entry | None:
    while end > start and not lines[end - 1].strip():
        end -= 1
    if end <= start:
        return None
    raw = [line.rstrip("\r\n") for line in lines[start:end]]
    meta: dict[str, str] = {}
    text_lines: list[str] = []
    for line in raw:
        match = find_meta(line)
        if match and not meta:
            meta = parse_meta(match.group("body"))
            line = line[: match.start()] + line[match.end() :]
        text_lines.append(line)
    checked: bool | None = None
    first = text_lines[0]
    if kind == "item":
        marker = _MARKER.match(first)
        indent = marker.end() if marker else 0
        first = first[indent:]
        box = _CHECKBOX.match(first)
        if box:
            checked = box.group(1) != " "
            first = first[box.end() :]
        rest = [_dedent(line, indent) for line in text_lines[1:]]
    else:
        first = first.strip()
        rest = [line.strip() for line in text_lines[1:]]
    text = "\n".join([first.strip(), *(line.rstrip() for line in rest)]).strip()

    heading_path = tuple(h.title for h in stack)
    archived = any(h.title.strip().lower() == ARCHIVE_TITLE.lower() for h in stack)
    type_ = meta.get("type") or _type_from_headings(stack) or file_type
    return Entry(
        path=path,
        start_line=start + 1,
        end_line=end,
        text=text,
        heading_path=heading_path,
        kind=kind,
        type=type_,
        importance=parse_importance(meta.get("importance")),
        id=meta.get("id") or derived_id(path, text),
        created=meta.get("created"),
        source=meta.get("source"),
        archived=archived or "superseded_by" in meta,
        checked=checked,
        meta=meta,
    )


def _type_from_headings(stack: list[Heading]) -> str | None:
    for heading in reversed(stack):
        found = type_from_heading(heading.title)
        if found:
            return found
    return None


def _dedent(line: str, width: int) -> str:
    if line[:width] == " " * width:
        return line[width:]  # the common case: keeps tabs inside the text as written
    expanded = line.expandtabs(4)
    strip = min(width, len(expanded) - len(expanded.lstrip(" ")))
    return expanded[strip:]
