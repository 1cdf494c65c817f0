"""Parse one Markdown file's text into a Document: frontmatter, headings, entries with lines.

Pure: text in, values out. markdown-it-py's token line maps give exact 1-based line ranges;
python-frontmatter's YAML handler reads the frontmatter. Code blocks, tables and HTML are
content, not entries.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from mdmem.markdown.conflicts import conflict_line, conflict_message
from mdmem.markdown.entries import (
    ARCHIVE_TITLE,
    DEFAULT_IMPORTANCE,
    Entry,
    default_type_for_file,
    derived_id,
    find_meta,
    parse_importance,
    parse_meta,
    type_from_heading,
)
from mdmem.text import dedent

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

NESTING_LIMIT = 32
"""List levels markdown-it is shown (``2 * NESTING_LIMIT`` columns of indentation): a line
indented deeper is read as text of the item above, with a warning naming it."""
MARKERS_LIMIT = 10
"""Nested quotes and list markers on one line that markdown-it is shown; the rest is text."""
_MAX_INDENT = 2 * NESTING_LIMIT
_MAX_NESTING = 100
"""markdown-it's own guard (20 by default: a list nested 10 deep swallowed the rest of the
file). The caps above keep real lists below it; only absurd mixes of quotes reach it."""
_MIN_RUN = 3

_FM_OPEN = re.compile(r"\A---[ \t]*(?:\r\n?|\n)")
_FM_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$")
_MARKER = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_LONE_CR = re.compile(r"\r(?!\n)")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_CHECKBOX = re.compile(r"^\[([ xX])\](?:[ \t]+|$)")
_CONTAINERS = re.compile(r"(?:(?:>|[-*+](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))[ \t]*)+")
_ONE_CONTAINER = re.compile(r"(>|[-*+](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))([ \t]*)")
_FENCE = re.compile(r"[ \t]*(?:>[ \t]?)*[ \t]*(`{3,}|~{3,})")
# A list item whose one-line content cannot start a block of its own (heading, quote, code,
# HTML, table, rule, nested list or reference definition): runs of them parse the same
# whatever their number, so markdown-it is shown the first and the last of each run only.
_SIMPLE_ITEM = re.compile(
    r"([ \t]*)(?:([-*+])|\d{1,9}([.)])) "
    r"(?:[^\s#>\-+*=_~`<|\[\\\d]|\\[^\s]|\*\*?[^\s*]|_+[^\s_]|`(?!``)|~(?!~~)"
    r"|\[[ xX]\][ \t]|\d+(?![\d.)]))"
)
# A line of text that cannot start or end a block: inside a paragraph, runs of them continue it.
_PLAIN = re.compile(r"[ \t]*(?:[^\s#>\-+*=_~`<|\[:\d]|\d+(?![\d.)]))")


@dataclass(frozen=True)
class Heading:
    """A Markdown heading and the line it is on."""

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
    """One file parsed: its frontmatter, headings, entries and what is wrong in it."""

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
    """Lines with their endings: ``\\n``, ``\\r\\n`` or a lone ``\\r`` (as CommonMark has it)."""
    if "\r" in text and _LONE_CR.search(text):
        return _LINE.findall(text)
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def newline_of(text: str) -> str:
    """The file's line ending: the most common one (LF on a tie, or when there is none)."""
    # One scan, not three, for most files: a Stop's write asks it of the session file (a MB on
    # a long session) at each event.
    if "\r" not in text:
        return "\n"
    lf = text.count("\n")
    crlf = text.count("\r\n")
    cr = text.count("\r") - crlf
    if cr and cr >= crlf and cr > lf - crlf:
        return "\r"
    return "\r\n" if crlf and crlf * 2 >= lf else "\n"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Imported at the first parse (~50 ms): a search whose files have not changed needs none.
    from markdown_it import MarkdownIt

    # Block structure is all we need: skipping inline parsing halves the cost on big files.
    md = MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])
    md.options["maxNesting"] = _MAX_NESTING
    return md


def block_tokens(text: str) -> list[Token]:
    """markdown-it's block tokens for ``text`` (line maps are 0-based, end exclusive)."""
    return _parser().parse(text)


def parse_document(path: str, text: str) -> Document:
    """Parse ``text`` (the whole file) of the workspace file ``path``.

    Time is linear in the size of the file: markdown-it is shown a view of it in which runs
    of one-line list items are cut to their first and last item (the items between are read
    directly) and pathological nesting is capped (see NESTING_LIMIT).
    """
    if len(text) < _NO_GC_CHARS:
        return _parse(path, text)
    with _no_gc():  # a big file allocates a million small acyclic objects: no cycles to find
        return _parse(path, text)


_NO_GC_CHARS = 1_000_000


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(path: str, text: str, *, cut: bool = True) -> Document:
    """parse_document; ``cut=False`` shows markdown-it every line (what cutting must equal)."""
    lines = split_lines(text)
    problems: list[Problem] = []
    frontmatter, fm_end = _frontmatter(path, text, lines, problems)
    view, tokens = _view_tokens(lines, fm_end, cut)
    at = view.line_of

    headings: list[Heading] = []
    entries: list[Entry] = []
    stack: list[Heading] = []
    section = _Section.of(stack, default_type_for_file(path))
    list_depth = 0
    for i, tok in enumerate(tokens):
        kind = tok.type
        if kind == "heading_open" and tok.map:
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            heading = Heading(int(tok.tag[1]), title, at(tok.map[0]) + 1)
            headings.append(heading)
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            section = _Section.of(stack, section.file_type)
        elif kind == "bullet_list_open" or kind == "ordered_list_open":
            list_depth += 1
        elif kind == "bullet_list_close" or kind == "ordered_list_close":
            list_depth -= 1
        elif tok.map and (
            (kind == "list_item_open" and list_depth == 1)
            or (kind == "paragraph_open" and list_depth == 0 and not tok.hidden)
        ):
            if kind == "list_item_open":
                for a, b in view.middle.get(tok.map[0], ()):
                    if (piece := _entry(path, lines, a, b, "item", section)) is not None:
                        entries.append(piece)
            start, end = at(tok.map[0]), at(tok.map[1] - 1) + 1
            end = view.item_end.get(tok.map[0], end)
            entry = _entry(path, lines, start, end, _KINDS[kind], section)
            if entry is not None:
                entries.append(entry)
    problem = view.nesting_problem(path, tokens)
    if problem is not None:
        problems.append(problem)
    if (marked := conflict_line(text)) is not None:
        problems.append(Problem(path, conflict_message(marked), marked))
    return Document(
        path=path,
        text=text,
        frontmatter=frontmatter,
        headings=tuple(headings),
        entries=tuple(entries),
        problems=tuple(problems),
        body_start=fm_end + 1,
    )


_KINDS = {"list_item_open": "item", "paragraph_open": "paragraph"}


@dataclass(frozen=True)
class _Section:
    """What entries under one heading path share: computed once per heading, not per entry."""

    heading_path: tuple[str, ...]
    archived: bool
    type: str
    file_type: str

    @classmethod
    def of(cls, stack: list[Heading], file_type: str) -> _Section:
        archived = any(h.title.strip().lower() == ARCHIVE_TITLE.lower() for h in stack)
        type_ = _type_from_headings(stack) or file_type
        return cls(tuple(h.title for h in stack), archived, type_, file_type)


@dataclass
class _View:
    """The text markdown-it parses, and how its lines map back to the file's."""

    text: str
    orig: list[int] | None
    """File line (0-based) of each view line; None when the view keeps every line."""
    lines: list[str]
    middle: dict[int, list[tuple[int, int]]]
    """View line of the last item of a cut run -> file lines (start, end) of the items cut."""
    item_end: dict[int, int]
    """View line of the first item of a cut run -> file line its item ends before (its
    sub-items were cut from the view)."""
    runs: list[tuple[str, int, int]]
    """("items" or "text", view line of the first line, of the last line) of each cut run."""
    run_starts: list[int]
    """File line of the first line of each cut run (to leave it uncut if it does not check)."""
    capped: dict[int, str]
    """File line -> why markdown-it was shown it changed ("indent" or "markers")."""

    def line_of(self, view_line: int) -> int:
        return view_line if self.orig is None else self.orig[view_line]

    def unchecked_runs(self, tokens: list[Token]) -> set[int]:
        """Runs that did not come out as they must (first and last line sibling items, or
        lines of one paragraph): cut wrongly, e.g. a Markdown list inside a fenced code block.
        Returns their file lines."""
        if not self.runs:
            return set()
        items = {
            t.map[0]: (t.level, t.map[1]) for t in tokens if t.type == "list_item_open" and t.map
        }
        paragraphs = [t.map for t in tokens if t.type == "paragraph_open" and t.map]
        starts = [m[0] for m in paragraphs]
        bad = set()
        for n, (kind, first, last) in enumerate(self.runs):
            if kind == "items":
                a, b = items.get(first), items.get(last)
                ok = a is not None and b is not None and a[0] == b[0] and a[1] == last
            else:
                k = bisect.bisect_right(starts, first) - 1
                ok = k >= 0 and last < paragraphs[k][1] and not self._reference(starts[k], first)
            if not ok:
                bad.add(self.run_starts[n])
        return bad

    def _reference(self, start: int, end: int) -> bool:
        """Whether a line of the paragraph up to ``end`` may start a link reference definition
        (its title can span lines: the cut lines could end it)."""
        return any(
            line.lstrip(" \t>-*+0123456789.)")[:1] == "[" for line in self.lines[start : end + 1]
        )

    def nesting_problem(self, path: str, tokens: list[Token]) -> Problem | None:
        """A warning at the first line where nesting was capped, if the cap changed anything:
        markers were escaped, or a clamped line opens a block (not a line of code)."""
        if not self.capped and not any(t.level >= _MAX_NESTING - 2 for t in tokens):
            return None
        opens = {self.line_of(t.map[0]) for t in tokens if t.map and t.type in _STRUCTURE}
        shown = set(self.orig) if self.orig is not None else None
        lines = [
            n
            for n, why in self.capped.items()
            # a line cut from a run of items is an item
            if why == "markers" or n in opens or (shown is not None and n not in shown)
        ]
        lines += [self.line_of(t.map[0]) for t in tokens if t.map and t.level >= _MAX_NESTING - 2]
        if not lines:
            return None
        message = (
            f"nested deeper than {NESTING_LIMIT} list levels or {MARKERS_LIMIT} quotes on a "
            "line; deeper lines are read as text of the item above"
        )
        return Problem(path, message, min(lines) + 1)


_STRUCTURE = frozenset({"list_item_open", "blockquote_open", "paragraph_open", "heading_open"})


def _view_tokens(lines: list[str], fm_end: int, cut: bool) -> tuple[_View, list[Token]]:
    """Parse the view; if a cut run does not check out, parse again without cutting it."""
    keep: set[int] = set()
    for attempt in range(3):
        view = _view(lines, fm_end, cut=cut and attempt < 2, keep=keep)
        tokens = _parser().parse(view.text)
        bad = view.unchecked_runs(tokens)
        if not bad:
            return view, tokens
        keep |= bad
    raise AssertionError("unreachable: the last attempt cuts nothing")


def _view(lines: list[str], fm_end: int, *, cut: bool, keep: set[int]) -> _View:
    """Frontmatter blanked (so line maps are file lines), nesting capped, item runs cut."""
    contents = [""] * fm_end
    capped: dict[int, str] = {}
    for n in range(fm_end, len(lines)):
        content = lines[n].rstrip("\r\n")
        lead = content[:1]
        # _may_cap inlined for unindented lines (most of them): a third character that is
        # text means no prefix of markers long enough to cap
        if lead in _CAP_STARTS and (
            _may_cap(content) if lead in " \t" else content[2:3] in _PREFIX_CHARS
        ):
            content, why = _cap(content)
            if why:
                capped[n] = why
        contents.append(content)
    ends_with_newline = bool(lines) and lines[-1][-1:] in ("\n", "\r")
    runs = _runs(contents, fm_end, keep) if cut else []
    if not runs:
        text = "\n".join(contents) + ("\n" if ends_with_newline else "")
        return _View(text, None, contents, {}, {}, [], [], capped)
    out: list[str] = []
    orig: list[int] = []
    middle: dict[int, list[tuple[int, int]]] = {}
    item_end: dict[int, int] = {}
    view_runs: list[tuple[str, int, int]] = []
    n = 0
    for kind, run in runs:
        (first, first_end), (last, _) = run[0], run[-1]
        out.extend(contents[n : first + 1])
        orig.extend(range(n, first + 1))
        view_runs.append((kind, len(out) - 1, len(out)))
        if kind == "items":
            middle[len(out)] = run[1:-1]
            if first_end > first + 1:
                item_end[len(out) - 1] = first_end
        n = last
    out.extend(contents[n:])
    orig.extend(range(n, len(contents)))
    text = "\n".join(out) + ("\n" if ends_with_newline else "")
    starts = [run[0][0] for _, run in runs]
    return _View(text, orig, out, middle, item_end, view_runs, starts, capped)


_CAP_STARTS = frozenset(" \t>-*+0123456789")


_PREFIX_CHARS = frozenset(" \t>-*+0123456789.)")


def _may_cap(content: str) -> bool:
    """Cheap: whether ``content`` may be indented or nested past the caps (else _cap keeps it).

    16 characters of indentation are at most 64 columns; a prefix of markers longer than
    MARKERS_LIMIT has a marker character at its third position."""
    body = content.lstrip(" \t") if content[0] in " \t" else content
    return len(content) - len(body) > 16 or body[2:3] in _PREFIX_CHARS


def _cap(content: str) -> tuple[str, str | None]:
    """``content`` with its indentation and its nested container markers capped, and why
    ("indent" or "markers"; None when nothing changed)."""
    why = None
    body = content.lstrip(" \t")
    if not body:
        return ("" if len(content) > _MAX_INDENT else content), None  # blank is blank
    lead = len(content) - len(body)
    if lead > _MAX_INDENT or (lead and _columns(content[:lead]) > _MAX_INDENT):
        content, lead, why = " " * _MAX_INDENT + body, _MAX_INDENT, "indent"
    prefix = _CONTAINERS.match(content, lead) if body[:1] in _CAP_STARTS else None
    if prefix is None or prefix.end() - lead <= MARKERS_LIMIT:
        return content, why  # the common case: fewer characters than markers allowed
    out = [content[:lead]]
    pos, count = lead, 0
    has_text = bool(content[prefix.end() :].strip())  # a line of markers only is a rule
    while pos < prefix.end() and (marker := _ONE_CONTAINER.match(content, pos)) is not None:
        count += 1
        mark, space = marker.group(1), marker.group(2)
        if count > MARKERS_LIMIT and has_text:
            out.append(mark[:-1] + "\\" + mark[-1] + content[marker.end(1) :])
            return "".join(out), "markers"  # escaped: the rest is text, not containers
        if len(space) > _MAX_INDENT:
            space, why = " " * _MAX_INDENT, why or "indent"
        out.append(mark + space)
        pos = marker.end()
    out.append(content[pos:])
    return "".join(out), why


def _columns(whitespace: str) -> int:
    return len(whitespace.expandtabs(4))


Unit = tuple[int, int]
"""File lines [start, end) of one list item with the one-line items nested under it, or of
one line of text."""
_BLANK, _OTHER = ("", "blank"), ("", "other")
_TEXT = ("", "text")


def _runs(contents: list[str], fm_end: int, keep: set[int]) -> list[tuple[str, list[Unit]]]:
    """Runs of at least _MIN_RUN units that parse the same whatever their number, as
    ("items" or "text", their units), in file order. Items: one-line list items with the same
    indentation and marker, each with the one-line items nested under it (blank lines allowed
    between items); the items kept under a run's last item are searched for runs in turn.
    Text: plain lines of a paragraph."""
    kinds, indent, inner = _line_kinds(contents, fm_end)
    runs: list[tuple[str, list[Unit]]] = []
    _group(kinds, indent, inner, fm_end, len(contents), keep, runs)
    runs.sort(key=lambda run: run[1][0][0])
    return runs


def _line_kinds(
    contents: list[str], fm_end: int
) -> tuple[list[tuple[str, str]], list[int], list[int]]:
    """Each line's kind: (indentation, marker) of a one-line item, or _TEXT, _BLANK, _OTHER;
    and for items, the column of their marker and the column their text starts at (items
    nested under them start at or past it)."""
    kinds: list[tuple[str, str]] = [_OTHER] * len(contents)
    indent = [0] * len(contents)
    inner = [0] * len(contents)
    fence: str | None = None
    html = False  # an HTML block runs to the next blank line: its text is not a paragraph
    for n in range(fm_end, len(contents)):
        content = contents[n]
        if fence is not None or content.lstrip(" \t>")[:3] in ("```", "~~~"):
            opened = _FENCE.match(content)
            if opened:
                mark = opened.group(1)
                if fence is None:
                    fence = mark
                elif mark[0] == fence[0] and len(mark) >= len(fence):
                    fence = None
                continue
            if fence is not None:
                continue
        if not content.strip():
            html = False
            kinds[n] = _BLANK
        elif match := _SIMPLE_ITEM.match(content):
            ws = match.group(1)
            kinds[n] = (ws, match.group(2) or match.group(3))
            indent[n] = _columns(ws) if "\t" in ws else len(ws)
            inner[n] = indent[n] + content.index(" ", len(ws)) - len(ws) + 1
        elif not html and _PLAIN.match(content):
            kinds[n] = _TEXT
        else:
            html = html or content.lstrip(" \t>")[:1] == "<"
    return kinds, indent, inner


def _group(
    kinds: list[tuple[str, str]],
    indent: list[int],
    inner: list[int],
    lo: int,
    hi: int,
    keep: set[int],
    runs: list[tuple[str, list[Unit]]],
) -> None:
    """Find the runs among lines [lo, hi) (see _runs), adding them to ``runs``."""
    run: list[Unit] = []
    key = _OTHER
    blank = False

    def close() -> None:
        if len(run) >= _MIN_RUN and run[0][0] not in keep:
            runs.append(("text" if key == _TEXT else "items", list(run)))
            shown = run[-1:]  # the last unit stays whole in the view
        else:
            shown = run if key != _TEXT else []
        for start, end in shown:
            if end - start > _MIN_RUN:
                _group(kinds, indent, inner, start + 1, end, keep, runs)
        run.clear()

    for n in range(lo, hi):
        this = kinds[n]
        if this is _BLANK:
            blank = True
            if key is _TEXT:
                close()
                key = _OTHER
            continue  # items may have blank lines between them
        if this is _OTHER:
            close()
            key = _OTHER
            continue
        nested = this is not _TEXT and run and key is not _TEXT and this != key and not blank
        if nested and indent[n] >= inner[run[-1][0]]:  # under the unit's item: part of it
            run[-1] = (run[-1][0], n + 1)
            continue
        if this != key:
            close()
            key = this
        blank = False
        run.append((n, n + 1))
    close()


def _frontmatter(
    path: str, text: str, lines: list[str], problems: list[Problem]
) -> tuple[dict[str, Any], int]:
    """Return (metadata, number of lines the frontmatter block takes)."""
    if not _FM_OPEN.match(text):
        return {}, 0
    for n in range(1, len(lines)):
        if _FM_CLOSE.match(lines[n].rstrip("\r\n")):
            break
    else:
        return {}, 0  # an opening --- alone is a thematic break, not frontmatter
    yaml_text = "".join(lines[1:n])
    from mdmem.markdown.plain_yaml import typed_frontmatter

    plain = typed_frontmatter(yaml_text)
    if plain is not None:  # (as YAML reads it, without YAML: a session's head is such)
        return plain, n + 1
    import yaml  # only for a file with frontmatter (most memory files have none)
    from frontmatter.default_handlers import YAMLHandler

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
    path: str, lines: list[str], start: int, end: int, kind: str, section: _Section
) -> Entry | None:
    while end > start and not lines[end - 1].strip():
        end -= 1
    if end <= start:
        return None
    if end - start == 1 and kind == "item":
        return _one_line_item(path, lines[start], start, section)
    meta: dict[str, str] = {}
    text_lines: list[str] = []
    for line in lines[start:end]:
        line = line.rstrip("\r\n")
        if not meta and (match := find_meta(line)):
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
        rest = [dedent(line, indent).rstrip() for line in text_lines[1:]]
    else:
        first = first.strip()
        rest = [line.strip() for line in text_lines[1:]]
    text = ("\n".join([first.strip(), *rest]) if rest else first.strip()).strip()
    return _new_entry(
        {
            "path": path,
            "start_line": start + 1,
            "end_line": end,
            "text": text,
            "heading_path": section.heading_path,
            "kind": kind,
            "type": meta.get("type") or section.type,
            "importance": parse_importance(meta.get("importance")),
            "id": meta.get("id") or derived_id(path, text),
            "created": meta.get("created"),
            "source": meta.get("source"),
            "archived": section.archived or "superseded_by" in meta,
            "checked": checked,
            "meta": meta,
        }
    )


def _one_line_item(path: str, line: str, n: int, section: _Section) -> Entry:
    """The common case of _entry (a list item on one line; most of a memory file), inlined."""
    content = line.rstrip("\r\n")
    meta: dict[str, str] = {}
    if "<!--" in content and (match := find_meta(content)):
        meta = parse_meta(match.group("body"))
        content = content[: match.start()] + content[match.end() :]
    marker = _MARKER.match(content)
    first = content[marker.end() :] if marker else content
    checked: bool | None = None
    if first[:1] == "[" and (box := _CHECKBOX.match(first)):
        checked = box.group(1) != " "
        first = first[box.end() :]
    text = first.strip()
    if not meta:
        return _new_entry(
            {
                "path": path,
                "start_line": n + 1,
                "end_line": n + 1,
                "text": text,
                "heading_path": section.heading_path,
                "kind": "item",
                "type": section.type,
                "importance": DEFAULT_IMPORTANCE,
                "id": derived_id(path, text),
                "created": None,
                "source": None,
                "archived": section.archived,
                "checked": checked,
                "meta": meta,
            }
        )
    return _new_entry(
        {
            "path": path,
            "start_line": n + 1,
            "end_line": n + 1,
            "text": text,
            "heading_path": section.heading_path,
            "kind": "item",
            "type": meta.get("type") or section.type,
            "importance": parse_importance(meta.get("importance")),
            "id": meta.get("id") or derived_id(path, text),
            "created": meta.get("created"),
            "source": meta.get("source"),
            "archived": section.archived or "superseded_by" in meta,
            "checked": checked,
            "meta": meta,
        }
    )


def _new_entry(fields: dict[str, Any]) -> Entry:
    """``Entry(**fields)``, built the way a frozen dataclass's ``__init__`` ends up: its
    generated ``__init__`` sets each field through ``object.__setattr__`` (6 µs an entry,
    most of the parse time of a file of short items). ``fields`` names every field."""
    entry = object.__new__(Entry)
    entry.__dict__.update(fields)
    return entry


def _type_from_headings(stack: list[Heading]) -> str | None:
    for heading in reversed(stack):
        found = type_from_heading(heading.title)
        if found:
            return found
    return None
