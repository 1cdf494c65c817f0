"""A file's level-2 sections (``## title``) as whole blocks of text: read one, replace
what one holds, append to one; every line outside the section stays as it was."""

from __future__ import annotations

from mdmem.markdown import edits
from mdmem.markdown.parse import Document, parse_document


def section_texts(doc: Document) -> dict[str, str]:
    """Level-2 section title → its raw text (up to the next heading of level ≤ 2)."""
    lines = doc.lines
    out: dict[str, str] = {}
    tops = [h for h in doc.headings if h.level <= 2]
    for n, heading in enumerate(tops):
        if heading.level != 2:
            continue
        end = tops[n + 1].line - 1 if n + 1 < len(tops) else len(lines)
        text = "".join(lines[heading.line : end]).replace("\r\n", "\n").replace("\r", "\n")
        out.setdefault(heading.title.strip(), text)
    return out


def section_text(text: str, path: str, title: str) -> str:
    """The raw text of ``## title`` (empty when there is none)."""
    return section_texts(parse_document(path, text)).get(title, "")


def set_section(text: str, path: str, title: str, body: str) -> str:
    """Make ``## title`` hold exactly ``body`` (replacing what it held), adding it at the end
    of the file when missing. Everything outside the section stays as it was."""
    doc = parse_document(path, text)
    newline = doc.newline
    block = body.strip("\n").replace("\n", newline) + newline
    heading = next((h for h in doc.headings if h.level == 2 and h.title.strip() == title), None)
    lines = doc.lines
    if heading is None:
        lead = "" if not lines or lines[-1].strip() == "" else newline
        if lines and not lines[-1].endswith(("\n", "\r")):
            lead = newline + newline
        return text + lead + f"## {title}{newline}{newline}" + block
    end = next((h.line - 1 for h in doc.headings if h.line > heading.line and h.level <= 2), None)
    end = len(lines) if end is None else end
    trail = newline if end < len(lines) else ""
    return "".join(lines[: heading.line]) + newline + block + trail + "".join(lines[end:])


def append_to_section(text: str, path: str, title: str, block: str) -> str:
    """Append ``block`` (whole lines) at the end of ``## title``, creating it if missing."""
    doc = parse_document(path, text)
    return edits.insert_entry(doc, "event", title, block)
