"""A shared pool's file, ``shared/<pool>.md``: one ``## key`` section per entry, pure text in
and text out.

::

    # Shared pool: default

    ## findings/paris
    <!-- mdmem created_at=2026-11-19T14:22:10.123456Z created_by=researcher ... version=3 -->

    Paris is the capital of France.

    ## counter
    <!-- mdmem ... version=800 -->

    ```json
    800
    ```

    ## Archive

    ### old-key
    <!-- mdmem deleted_at=... deleted_by=writer ... version=2 -->

    the value it had

The section's metadata is the mdmem comment on the line under its heading (the project's
metadata convention; the heading stays the bare key, so search shows the key). A value is
text, written as it is when it reads back exactly and leaves the file's headings alone, else in
a ```` ```text ```` fence; or a structured value in a ```` ```json ```` fence. Every value is
checked to read back exactly before it is written. ``hash`` is the hash of the body the program
wrote: a body that no longer matches it was edited by hand.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from mdmem.errors import FileProblem
from mdmem.markdown.entries import ARCHIVE_TITLE, find_meta, format_meta, parse_meta
from mdmem.markdown.parse import Heading, block_tokens, newline_of, parse_document, split_lines

MAX_KEY_CHARS = 200
ONE_LINE_JSON = 80
"""A structured value whose JSON is at most this long is written on one line."""
SECTION_LEVEL = 2
ARCHIVED_LEVEL = 3
_OPEN = re.compile(r"(`{3,})(json|text)[ \t]*")
_UNSAFE_IN_FILE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ufeff\ud800-\udfff]")
"""Characters a value may hold but the file may not show raw (JSON escapes them)."""
_PROBE = "## mdmem-probe"

JSON = Any
"""A JSON value: dict (str keys), list, str, int, float (finite), bool or None."""


@dataclass(frozen=True)
class Section:
    """One entry as the file holds it."""

    key: str
    line: int
    """1-based line of its heading."""
    end: int
    """1-based line after its last line."""
    meta: Mapping[str, str]
    """Its mdmem comment's keys (empty for a section a person wrote without one)."""
    body: str
    """The lines after the comment, blank lines around them dropped, joined with ``\\n``."""
    body_line: int
    """1-based line where the body starts."""
    archived: bool

    @property
    def version(self) -> int:
        try:
            return max(0, int(self.meta.get("version", "0")))
        except ValueError:
            return 0

    @property
    def hash(self) -> str:
        return body_hash(self.body)

    @property
    def edited(self) -> bool:
        """The body is not what the program last wrote (or the program never wrote it)."""
        return self.meta.get("hash") != self.hash


@dataclass(frozen=True)
class PoolFile:
    """A shared pool's file read: its lines, headings, and the sections of live and archived
    keys."""

    path: str
    text: str
    lines: list[str]
    """The file's lines, with their endings."""
    headings: tuple[Heading, ...]
    live: tuple[Section, ...]
    archived: tuple[Section, ...]

    @property
    def newline(self) -> str:
        return newline_of(self.text)


@lru_cache(maxsize=4096)
def body_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@lru_cache(maxsize=4096)
def _meta_line(row: str) -> Mapping[str, str] | None:
    """The mdmem comment that is the whole of ``row``, or None. Cached: the sections a write
    did not touch come back with the same lines every time the file is read."""
    match = find_meta(row)
    if match is None or not _whole_line(row, match):
        return None
    return MappingProxyType(parse_meta(match.group("body")))


# ---- reading ---------------------------------------------------------------------------------


def parse_pool(path: str, text: str) -> PoolFile:
    """The sections of a pool file: ``## key`` ones, and ``### key`` ones under ``## Archive``.

    Only the headings matter here. A file exactly as the program writes it is read line by
    line (:func:`_program_headings`); any other is read by markdown-it's block parser (a
    pool file is parsed on every read and every write: markdown-it takes 20-50 ms on a pool
    of 100 keys)."""
    lines = split_lines(text)
    heads = _program_headings(lines)
    if heads is None:
        heads = _headings(lines)
    live: list[Section] = []
    archived: list[Section] = []
    in_archive = False
    for n, heading in enumerate(heads):
        if heading.level <= SECTION_LEVEL:
            in_archive = _is_archive(heading)
        level = ARCHIVED_LEVEL if in_archive else SECTION_LEVEL
        if heading.level != level or (not in_archive and _is_archive(heading)):
            continue
        end = next((h.line for h in heads[n + 1 :] if h.level <= level), len(lines) + 1)
        section = _section(heading, lines, end, in_archive)
        (archived if in_archive else live).append(section)
    return PoolFile(path, text, lines, tuple(heads), tuple(live), tuple(archived))


def _headings(lines: list[str]) -> list[Heading]:
    # one line ending for markdown-it, so its line numbers are the file's (a lone CR too)
    tokens = block_tokens("\n".join(line.rstrip("\r\n") for line in lines) + "\n")
    return [
        Heading(int(tok.tag[1]), tokens[i + 1].content.strip(), tok.map[0] + 1)
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.map
    ]


def _program_headings(lines: list[str]) -> list[Heading] | None:
    """The headings of a file in the shape the program writes, or None for any other file.

    The shape: a ``# title`` line, then sections, each a heading (``## key``, or ``### key``
    under ``## Archive``), its mdmem comment with ``hash=``, and a body whose hash is that
    hash, blank lines between. Such a body is one the program wrote, and every body it
    writes was checked by markdown-it (:func:`_headings_alone`) to hold no heading and to
    end where it ends, in exactly this place; so markdown-it finds these headings and no
    others. A body edited by hand no longer matches its hash: then markdown-it reads the
    file."""
    rows = [line.rstrip("\r\n") for line in lines]
    heads: list[Heading] = []
    n = _skip_blank(rows, 0)
    if n < len(rows) and rows[n].startswith("# ") and rows[n][2:].strip():
        heads.append(Heading(1, rows[n][2:].strip(), n + 1))
        n += 1
    in_archive = False
    while (n := _skip_blank(rows, n)) < len(rows):
        row = rows[n]
        if row == f"## {ARCHIVE_TITLE}" and not in_archive:
            heads.append(Heading(SECTION_LEVEL, ARCHIVE_TITLE, n + 1))
            in_archive, n = True, n + 1
            continue
        level = ARCHIVED_LEVEL if in_archive else SECTION_LEVEL
        key = row[level + 1 :]
        if row[: level + 1] != "#" * level + " " or _key_problem(key) is not None:
            return None
        end = _program_section_end(rows, n)
        if end is None:
            return None
        heads.append(Heading(level, key, n + 1))
        n = end
    return heads


def _program_section_end(rows: list[str], at: int) -> int | None:
    """Where the section whose heading is at row ``at`` ends, if its body is the program's."""
    meta = _meta_line(rows[at + 1]) if at + 1 < len(rows) else None
    recorded = meta.get("hash") if meta is not None else None
    start = _skip_blank(rows, at + 2)
    if recorded is None or start >= len(rows):
        return None
    end = start + 1
    while True:
        while end < len(rows) and not rows[end].startswith(("## ", "### ")):
            end += 1
        stop = end
        while stop > start and not rows[stop - 1].strip():
            stop -= 1
        if body_hash("\n".join(rows[start:stop])) == recorded:
            return end
        if end >= len(rows):
            return None
        end += 1


def _skip_blank(rows: list[str], n: int) -> int:
    while n < len(rows) and not rows[n].strip():
        n += 1
    return n


def _is_archive(heading: Heading) -> bool:
    return heading.level == SECTION_LEVEL and heading.title.strip().lower() == ARCHIVE_TITLE.lower()


def _section(heading: Heading, lines: list[str], end: int, archived: bool) -> Section:
    rows = [line.rstrip("\r\n") for line in lines[heading.line : end - 1]]
    first = heading.line + 1  # 1-based line of rows[0]
    start = 0
    while start < len(rows) and not rows[start].strip():
        start += 1
    meta: Mapping[str, str] = MappingProxyType({})
    if start < len(rows) and (found := _meta_line(rows[start])) is not None:
        meta = found
        start += 1
        while start < len(rows) and not rows[start].strip():
            start += 1
    stop = len(rows)
    while stop > start and not rows[stop - 1].strip():
        stop -= 1
    body = "\n".join(rows[start:stop])
    return Section(heading.title, heading.line, end, meta, body, first + start, archived)


def _whole_line(line: str, match: re.Match[str]) -> bool:
    return not line[: match.start()].strip() and not line[match.end() :].strip()


def decode(body: str, path: str = "", line: int | None = None) -> JSON:
    """A section's body → its value: a ```` ```json ```` or ```` ```text ```` fence that is the
    whole body is unwrapped (JSON parsed); anything else is text, as written."""
    rows = body.split("\n")
    opened = _OPEN.fullmatch(rows[0]) if len(rows) >= 2 else None
    if opened is None or rows[-1].rstrip(" \t") != opened.group(1):
        return body
    inner = "\n".join(rows[1:-1])
    if opened.group(2) == "text":
        return inner
    try:
        return json.loads(inner, parse_constant=_no_constant)
    except ValueError as exc:
        where = (line or 0) + getattr(exc, "lineno", 1)
        reason = getattr(exc, "msg", str(exc))
        raise FileProblem(path, f"the ```json block is not valid JSON: {reason}", where) from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# ---- writing ---------------------------------------------------------------------------------


def check_key(key: object) -> str:
    """A key is one line of printable text that reads back as its own ``## heading``."""
    if not isinstance(key, str):
        raise ValueError(f"a pool key is text, not {type(key).__name__}")
    problem = _key_problem(key)
    if problem:
        raise ValueError(f"invalid pool key {key!r}: {problem}")
    return key


@lru_cache(maxsize=1024)
def _key_problem(key: str) -> str | None:
    problem = None
    if not key or key != key.strip() or len(key) > MAX_KEY_CHARS:
        problem = f"1 to {MAX_KEY_CHARS} characters, no space around them"
    elif "\n" in key or "\t" in key or _UNSAFE_IN_FILE.search(key):
        problem = "one line, no control characters"
    elif "<!--" in key or "-->" in key:
        problem = "no '<!--' or '-->' (they hold mdmem metadata)"
    elif key.strip().lower() == ARCHIVE_TITLE.lower():
        problem = f"{ARCHIVE_TITLE!r} is the archive's heading"
    elif [h.title for h in parse_document("", f"## {key}\n").headings] != [key]:
        problem = "it must read back as a '## ' heading (no trailing '#', no backslash escape)"
    return problem


def check_json(value: object, where: str = "value") -> None:
    """A value that reads back as itself from JSON: the types JSON has, nothing else."""
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where} is {value}: JSON has no NaN or infinity")
        return
    if isinstance(value, list):
        for n, item in enumerate(value):
            check_json(item, f"{where}[{n}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the key {key!r}: JSON object keys are strings")
            check_json(item, f"{where}[{key!r}]")
        return
    hint = " (use a list)" if isinstance(value, tuple) else ""
    raise ValueError(f"{where} is a {type(value).__name__}, which JSON does not have{hint}")


def same(a: object, b: object) -> bool:
    """Equal and of the same types all the way down (``1``, ``1.0`` and ``True`` differ), dict
    keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


def encode(value: JSON) -> str:
    """The body that reads back as exactly ``value``: plain text when that is safe, else a
    ``text`` fence, else (text with characters a file cannot show, structured values) a
    ``json`` fence. ValueError for a value JSON cannot hold."""
    check_json(value)
    candidates = []
    if isinstance(value, str):
        candidates += [value, _fence(value, "text")]
    candidates += [_fence(_dump(value, ascii=False), "json"), _fence(_dump(value), "json")]
    for body in candidates:
        if _safe(body) and same(decode(body), value):
            return body
    raise ValueError(f"this value cannot be written so that it reads back exactly: {value!r:.80}")


def _dump(value: JSON, *, ascii: bool = True) -> str:
    """On one line when it is short, else indented: readable either way."""
    line = json.dumps(value, ensure_ascii=ascii, allow_nan=False, separators=(", ", ": "))
    if len(line) <= ONE_LINE_JSON:
        return line
    return json.dumps(value, ensure_ascii=ascii, indent=2, allow_nan=False)


def _fence(text: str, info: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _safe(body: str) -> bool:
    """Whether ``body`` can stand in a section as it is: no character a file cannot show, no
    blank line at its ends, no mdmem comment outside a fence, and no heading of its own nor a
    block that runs past its end."""
    if _UNSAFE_IN_FILE.search(body):
        return False
    rows = body.split("\n")
    if not rows[0].strip() or not rows[-1].strip():
        return False
    fenced = _OPEN.fullmatch(rows[0]) is not None
    if not fenced and ("<!--" in body or "-->" in body):
        return False
    return _headings_alone(body)


def _headings_alone(body: str) -> bool:
    """In a section, ``body`` leaves exactly the section's heading and the next one."""
    probe = f"## k\n{format_meta({'version': 1})}\n\n{body}\n\n{_PROBE}\n"
    heads = [t.map[0] for t in block_tokens(probe) if t.type == "heading_open" and t.map]
    return heads == [0, probe.count("\n") - 1]


def render_section(
    key: str, meta: Mapping[str, object], body: str, newline: str, level: int
) -> str:
    """``## key``, its comment, a blank line, the body, a blank line."""
    lines = ["#" * level + " " + key, format_meta(meta), "", *body.split("\n"), ""]
    return newline.join(lines) + newline


def header(name: str) -> str:
    return f"# Shared pool: {name}\n\n"


def put_section(pool: PoolFile, key: str, block: str) -> tuple[str, int]:
    """The file with ``key``'s live section replaced by ``block`` (or ``block`` added after the
    last live section, before ``## Archive``), and the line ``block`` starts at."""
    lines = pool.lines
    found = find(pool, key)
    if found is not None:
        return _splice(lines, found.line - 1, found.end - 1, block, pool.newline)
    archive = next((h for h in pool.headings if _is_archive(h)), None)
    at = archive.line - 1 if archive is not None else len(lines)
    return _splice(lines, at, at, block, pool.newline)


def archive_section(pool: PoolFile, section: Section, block: str) -> str:
    """The file with ``section`` removed and ``block`` added at the end of ``## Archive``
    (which is created at the end of the file if missing)."""
    lines = pool.lines
    newline = pool.newline
    rest = lines[: section.line - 1] + lines[section.end - 1 :]
    after = parse_pool(pool.path, "".join(rest))
    archive = next((h for h in after.headings if _is_archive(h)), None)
    if archive is None:
        block = f"## {ARCHIVE_TITLE}{newline}{newline}" + block
        return _splice(rest, len(rest), len(rest), block, newline)[0]
    end = next(
        (h.line - 1 for h in after.headings if h.line > archive.line and h.level <= SECTION_LEVEL),
        len(rest),
    )
    return _splice(rest, end, end, block, newline)[0]


def drop_section(pool: PoolFile, section: Section) -> str:
    """The file without ``section`` (a stale copy's live section of a key whose delete was
    acknowledged, and whose archived copy is there)."""
    return "".join(pool.lines[: section.line - 1] + pool.lines[section.end - 1 :])


def find(pool: PoolFile, key: str) -> Section | None:
    return next((s for s in pool.live if s.key == key), None)


def _splice(lines: list[str], start: int, end: int, block: str, newline: str) -> tuple[str, int]:
    """``lines[start:end]`` replaced by ``block``, with one blank line before it; and the
    1-based line ``block`` starts at."""
    head = lines[:start]
    if head and not head[-1].endswith(("\n", "\r")):
        head[-1] += newline  # the file had no final newline
    line = len(head) + 1
    if head and head[-1].strip():
        block = newline + block
        line += 1
    return "".join(head) + block + "".join(lines[end:]), line
