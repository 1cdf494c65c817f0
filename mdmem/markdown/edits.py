"""Byte-keeping text edits: insert, rewrite or archive one entry, touching nothing else.

Each function takes the file's whole text and returns the new text; every line it did not
write comes back byte for byte (line endings, tabs, trailing spaces, a missing final newline).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from mdmem.errors import EditNotApplicable
from mdmem.markdown.entries import ARCHIVE_TITLE, Entry, find_meta, format_meta, type_from_heading
from mdmem.markdown.parse import Document, Heading, parse_document
from mdmem.text import printable

_BULLET = re.compile(r"^([-*+])[ \t]")
_ITEM_PREFIX = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)")


def check_text(text: str) -> str:
    """Text a program may write as an entry: non-empty, no HTML comment markers."""
    text = printable(text.replace("\r\n", "\n").replace("\r", "\n")).strip()
    if not text:
        raise ValueError("an entry needs some text")
    if "<!--" in text or "-->" in text:
        raise ValueError("entry text cannot contain '<!--' or '-->' (they hold mdmem metadata)")
    return text


def render_item(text: str, meta: Mapping[str, object], newline: str, marker: str = "-") -> str:
    """A list item: ``- first line <!-- mdmem ... -->`` plus indented continuation lines."""
    first, *rest = check_text(text).split("\n")
    out = [f"{marker} {first.rstrip()} {format_meta(meta)}"]
    out += [f"  {line.rstrip()}" if line.strip() else "" for line in rest]
    return newline.join(out) + newline


def insert_entry(doc: Document, type_: str, title: str, block_text: str) -> str:
    """Append an item under the section for ``type_`` (a heading titled ``title`` if none)."""
    exact = _section_heading(doc, lambda h: h.title.strip().lower() == title.lower())
    # A file's title (``# Learnings``) is not a section to append to; ``## Skills`` is.
    heading = exact or _section_heading(
        doc, lambda h: h.level > 1 and type_from_heading(h.title) == type_
    )
    return _insert_under(doc, heading, title, block_text, before_archive=True)


def append_point(doc: Document, title: str) -> int | None:
    """The character offset in ``doc.text`` at which :func:`insert_entry` puts a ``- ``
    item under ``## title`` as it is, nothing added around it (no blank line, no new section,
    no other bullet), and after which that item ends the section's entries: the end of the
    section's last item, when only blank lines follow it. None in any other case.

    With it a writer that appends items one after another (a session's events) finds where
    they go from a parse it already has, instead of parsing the file again after each one:
    ``text[:at] + block + text[at:]`` is then exactly ``insert_entry``'s text."""
    heading = _section_heading(doc, lambda h: h.title.strip().lower() == title.lower())
    if heading is None:
        return None
    lines = doc.lines
    nxt = next((h.line for h in doc.headings if h.line > heading.line), len(lines) + 1)
    last = nxt - 2
    while last >= heading.line and not lines[last].strip():
        last -= 1
    if last < heading.line:  # an empty section: insert_entry adds a blank line first
        return None
    item = _item_ending_at(doc, last + 1)
    marker = _BULLET.match(lines[item.start_line - 1]) if item else None
    if item is None or marker is None or marker.group(1) != "-" or item.end_line != last + 1:
        return None
    if not lines[last].endswith(("\n", "\r")):  # no final newline: one would be added
        return None
    if last + 1 < len(lines) and lines[last + 1].strip():  # (a heading right after it)
        return None
    mine = [e for e in doc.entries if e.heading_path[-1:] == (heading.title.strip(),)]
    if not mine or mine[-1] is not item:  # the section's entries end elsewhere
        return None
    return sum(map(len, lines[: last + 1]))


def archive_entry(text: str, path: str, entry_id: str, meta: Mapping[str, object]) -> str:
    """Move an entry to the file's ``## Archive`` section, adding ``meta`` to its comment."""
    doc = parse_document(path, text)
    entry = find_entry(doc, entry_id)
    lines = doc.lines
    newline = doc.newline
    block = [line.rstrip("\r\n") for line in lines[entry.start_line - 1 : entry.end_line]]
    block[0] = _with_meta(block[0], {**dict(entry.meta), "type": entry.type, **meta})
    if entry.kind == "item":
        indent = len(block[0]) - len(block[0].lstrip(" \t"))
        block = [_strip_indent(line, indent) for line in block]
    del lines[entry.start_line - 1 : entry.end_line]
    if entry.kind == "paragraph" and _blank(lines, entry.start_line - 1):
        del lines[entry.start_line - 1]  # don't leave two blank lines where a paragraph was
    rest = parse_document(path, "".join(lines))
    heading = _section_heading(rest, lambda h: h.title.strip().lower() == ARCHIVE_TITLE.lower())
    block_text = newline.join(block) + newline
    return _insert_under(rest, heading, ARCHIVE_TITLE, block_text, before_archive=False)


def rewrite_entry(
    text: str,
    path: str,
    entry_id: str,
    meta: Mapping[str, object],
    new_text: str | None = None,
) -> str:
    """Set ``meta`` on an entry, and replace its text when ``new_text`` is given."""
    doc = parse_document(path, text)
    entry = find_entry(doc, entry_id)
    lines = doc.lines
    newline = doc.newline
    first = lines[entry.start_line - 1].rstrip("\r\n")
    merged = {**dict(entry.meta), **meta}
    if new_text is None:
        lines[entry.start_line - 1] = _with_meta(first, merged) + _ending(
            lines[entry.start_line - 1]
        )
        return "".join(lines)
    prefix = _ITEM_PREFIX.match(first)
    body_lines = check_text(new_text).split("\n")
    if entry.kind == "item" and prefix:
        lead = prefix.group(1)
        pad = " " * len(lead.expandtabs(4))
        rest = [pad + line if line.strip() else "" for line in body_lines[1:]]
        out = [lead + body_lines[0], *rest]
    else:
        out = body_lines
    out[0] = _with_meta(out[0], merged)
    end_ending = _ending(lines[entry.end_line - 1]) or ""
    replacement = newline.join(out) + end_ending
    lines[entry.start_line - 1 : entry.end_line] = [replacement]
    return "".join(lines)


def find_entry(doc: Document, entry_id: str) -> Entry:
    for entry in doc.entries:
        if entry.id == entry_id:
            return entry
    raise EditNotApplicable(f"no entry {entry_id} in {doc.path}")


def _section_heading(doc: Document, wanted: Callable[[Heading], bool]) -> Heading | None:
    in_archive_level: int | None = None
    for heading in doc.headings:
        if in_archive_level is not None and heading.level > in_archive_level:
            continue
        in_archive_level = None
        if heading.title.strip().lower() == ARCHIVE_TITLE.lower() and not wanted(heading):
            in_archive_level = heading.level
            continue
        if wanted(heading):
            return heading
    return None


def _insert_under(
    doc: Document, heading: Heading | None, title: str, block: str, *, before_archive: bool
) -> str:
    lines = doc.lines
    newline = doc.newline
    if heading is None:
        return _append_section(doc, lines, title, block, newline, before_archive)
    # The section's own content ends at the next heading of any level.
    nxt = next((h.line for h in doc.headings if h.line > heading.line), len(lines) + 1)
    last = nxt - 2  # 0-based index of the line before the next heading
    while last >= heading.line and not lines[last].strip():
        last -= 1
    if last < heading.line:  # empty section: the item goes right under the heading
        insert_at = heading.line
        lead = newline
    else:
        insert_at = last + 1
        item = _item_ending_at(doc, last + 1)
        marker = _BULLET.match(lines[item.start_line - 1]) if item else None
        if marker:
            block = marker.group(1) + block[1:] if block.startswith("-") else block
            lead = ""
        else:
            lead = newline
    trail = newline if insert_at < len(lines) and lines[insert_at].strip() else ""
    return _splice(lines, insert_at, lead + block + trail, newline)


def _append_section(
    doc: Document, lines: list[str], title: str, block: str, newline: str, before_archive: bool
) -> str:
    archive = None
    if before_archive:
        archive = next(
            (h for h in doc.headings if h.title.strip().lower() == ARCHIVE_TITLE.lower()), None
        )
    section = f"## {title}{newline}{newline}{block}"
    if archive is not None:
        insert_at = archive.line - 1
        lead = newline if insert_at > 0 and lines[insert_at - 1].strip() else ""
        return _splice(lines, insert_at, lead + section + newline, newline)
    insert_at = len(lines)
    while insert_at > 0 and not lines[insert_at - 1].strip():
        insert_at -= 1
    if insert_at == 0:
        return _splice(lines, len(lines), section, newline)
    lead = newline if insert_at == len(lines) or lines[insert_at].strip() else ""
    return _splice(lines, len(lines), lead + section, newline)


def _splice(lines: list[str], at: int, chunk: str, newline: str) -> str:
    if at > 0 and not lines[at - 1].endswith(("\n", "\r")):
        chunk = newline + chunk  # the file had no final newline
    return "".join(lines[:at]) + chunk + "".join(lines[at:])


def _item_ending_at(doc: Document, line: int) -> Entry | None:
    for entry in doc.entries:
        if entry.kind == "item" and entry.start_line <= line <= entry.end_line:
            return entry
    return None


def _with_meta(line: str, meta: Mapping[str, object]) -> str:
    comment = format_meta(meta)
    match = find_meta(line)
    if match:
        return line[: match.start()] + " " + comment + line[match.end() :]
    return line.rstrip() + " " + comment


def _ending(line: str) -> str:
    """The line's own ending: ``\\r\\n``, ``\\n``, a lone ``\\r`` (old Mac files), or none."""
    return line[len(line.rstrip("\r\n")) :]


def _blank(lines: list[str], index: int) -> bool:
    if not 0 <= index < len(lines) or lines[index].strip():
        return False
    return index == 0 or not lines[index - 1].strip()


def _strip_indent(line: str, width: int) -> str:
    lead = len(line) - len(line.lstrip(" \t"))
    return line[min(lead, width) :]
