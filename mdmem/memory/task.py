"""task_process.md: the current task as a state machine a person can edit.

::

    # Task: Gap-free invoice numbering

    ## State
    - Phase: implement
    - Pointer: 4

    ## TODO
    - [x] Migration 0004
    - [ ] Concurrency test

    ## Instructions
    - IF tests fail THEN fix the failing test ELSE continue

The checkboxes are the truth: a person ticking a box by hand is the same as ``complete``.
``Pointer`` (the number of the first open item) is derived from them and rewritten on every
program write, so a stale pointer after a hand edit does no harm.

Only top-level list items under ``## TODO`` (and any sub-heading of it) are TODO items. A list
nested in an item belongs to that item: the item's ``text`` is its first line plus continuation
lines that are not list items, and the nested items are ``subitems``, ``(text, done)`` pairs in
order, ``done`` being None for a plain bullet (a note, not a box). So::

    - [ ] Deploy
      - [ ] staging
      - [x] production

is one item, ``Deploy``, with ``subitems == (("staging", False), ("production", True))``; item
numbers, ``current()`` and the pointer depend on top-level boxes only, and a child ticked by
hand shows up in ``subitems``. ``add`` appends after the last TODO item (in its list style),
wherever it stands, so sub-headings inside ``## TODO`` keep their order and numbering.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mdmem.errors import ConflictError, EditNotApplicable
from mdmem.markdown import edits
from mdmem.markdown.entries import Entry, find_meta
from mdmem.markdown.parse import Document, block_tokens, parse_document, split_lines
from mdmem.paths import slugify, workspace_path
from mdmem.text import dedent, one_line
from mdmem.writes.safe_writer import EditFile, create_exclusive

TASK_FILE = "task_process.md"
STATE, TODO, INSTRUCTIONS = "State", "TODO", "Instructions"
_BOX = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)(\[[ xX]\][ \t]*)?")
_RULE = re.compile(
    r"^IF\s+(?P<cond>.+?)\s+THEN\s+(?P<then>.+?)(?:\s+ELSE\s+(?P<else>.+))?$", re.I | re.S
)
_FIELD = re.compile(r"^(?P<key>[A-Za-z][\w -]{0,40}?)\s*:\s*(?P<value>.*)$", re.S)
_MARKER = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_CHECK = re.compile(r"^\[([ xX])\](?:[ \t]+|$)")
_ORDERED = re.compile(r"^([ \t]*)(\d{1,9})([.)])([ \t]+)")


@dataclass(frozen=True)
class TaskItem:
    """One item of the task's TODO list."""

    n: int
    """1-based position in the TODO list (done items count too, so numbers are stable)."""
    text: str
    """The item's first line plus continuation lines that are not list items."""
    done: bool
    line: int
    subitems: tuple[tuple[str, bool | None], ...] = ()
    """Items of a list nested in this one, as ``(text, done)``; done is None for a plain
    bullet. They don't count in numbering, the pointer or ``current()``."""


@dataclass(frozen=True)
class Instruction:
    """``IF condition THEN action ELSE otherwise``; a plain rule has no condition."""

    text: str
    condition: str | None
    then: str
    otherwise: str | None
    line: int


@dataclass(frozen=True)
class TaskState:
    """task_process.md read: the task's title, phase, TODO list and instructions."""

    title: str
    phase: str
    pointer: int
    """Number of the first open TODO item (0 when every item is done or there are none)."""
    items: tuple[TaskItem, ...]
    instructions: tuple[Instruction, ...]
    fields: dict[str, str]
    """Every ``- Key: value`` line of ``## State`` (Phase, Pointer and any a person adds)."""

    @property
    def current(self) -> TaskItem | None:
        return next((item for item in self.items if not item.done), None)

    @property
    def done(self) -> int:
        return sum(item.done for item in self.items)

    def to_dict(self) -> dict[str, object]:
        return {
            "title": self.title,
            "phase": self.phase,
            "pointer": self.pointer,
            "items": [vars(item) for item in self.items],
            "instructions": [vars(rule) for rule in self.instructions],
            "fields": dict(self.fields),
        }


def parse_task(doc: Document) -> TaskState:
    h1 = next((h.title for h in doc.headings if h.level == 1), "")
    title = re.sub(r"^task:\s*", "", h1, flags=re.I).strip()
    items: list[TaskItem] = []
    rules: list[Instruction] = []
    fields: dict[str, str] = {}
    parts = item_parts(doc)
    for entry in doc.entries:
        section = _section_of(entry)
        if section == TODO and entry.kind == "item":
            part = parts.get(entry.start_line)
            text = own_text(doc, part) if part else entry.text
            subs = tuple(_subitem(doc, child) for child in part.children) if part else ()
            n = len(items) + 1
            items.append(TaskItem(n, text, bool(entry.checked), entry.start_line, subs))
        elif section == INSTRUCTIONS:
            rules.append(_instruction(entry))
        elif section == STATE and (m := _FIELD.match(entry.text.split("\n", 1)[0])):
            fields[m.group("key").strip()] = m.group("value").strip()
    phase = next((v for k, v in fields.items() if k.lower() == "phase"), "") or "idle"
    current = next((item.n for item in items if not item.done), 0)
    if title.lower() in ("(none yet)", "none"):
        title = ""
    return TaskState(title, phase, current, tuple(items), tuple(rules), fields)


@dataclass
class ItemPart:
    """Where a list item's own lines end and its nested items are (1-based lines)."""

    start: int
    end: int
    """Last line of the whole item, nested lists included (trailing blank lines too)."""
    nested: int | None = None
    """First line of the first list nested in the item, if any."""
    children: list[ItemPart] = field(default_factory=list)

    @property
    def own_end(self) -> int:
        """Last line of the item's own text: before its first nested list."""
        return self.end if self.nested is None else max(self.start, self.nested - 1)


def item_parts(doc: Document) -> dict[int, ItemPart]:
    """Every list item that is not inside another one, by its first line."""
    lines = doc.lines
    skip = doc.body_start - 1
    tokens = block_tokens("\n" * skip + "".join(lines[skip:]))
    top: dict[int, ItemPart] = {}
    stack: list[ItemPart] = []
    for tok in tokens:
        if tok.type in ("bullet_list_open", "ordered_list_open") and tok.map:
            if stack and stack[-1].nested is None:
                stack[-1].nested = tok.map[0] + 1
        elif tok.type == "list_item_open" and tok.map:
            part = ItemPart(tok.map[0] + 1, tok.map[1])
            if stack:
                stack[-1].children.append(part)
            else:
                top[part.start] = part
            stack.append(part)
        elif tok.type == "list_item_close" and stack:
            stack.pop()
    return top


def own_text(doc: Document, part: ItemPart) -> str:
    """An item's text without its nested lists: marker, box and metadata comment removed."""
    lines = doc.lines
    end = part.own_end
    while end > part.start and not lines[end - 1].strip():
        end -= 1
    raw = [line.rstrip("\r\n") for line in lines[part.start - 1 : end]]
    for i, line in enumerate(raw):
        if match := find_meta(line):
            raw[i] = line[: match.start()] + line[match.end() :]
            break
    marker = _MARKER.match(raw[0])
    width = marker.end() if marker else 0
    first = raw[0][width:]
    if box := _CHECK.match(first):
        first = first[box.end() :]
    rest = [dedent(line, width).rstrip() for line in raw[1:]]
    return "\n".join([first.strip(), *rest]).strip()


def _subitem(doc: Document, part: ItemPart) -> tuple[str, bool | None]:
    line = doc.lines[part.start - 1]
    marker = _MARKER.match(line)
    box = _CHECK.match(line[marker.end() :]) if marker else None
    return own_text(doc, part), (box.group(1) != " " if box else None)


def _section_of(entry: Entry) -> str | None:
    for title in reversed(entry.heading_path):
        for name in (STATE, TODO, INSTRUCTIONS):
            if title.strip().lower() == name.lower():
                return name
    return None


def _instruction(entry: Entry) -> Instruction:
    text = one_line(entry.text)
    if m := _RULE.match(text):
        return Instruction(
            text, m.group("cond"), m.group("then"), m.group("else"), entry.start_line
        )
    return Instruction(text, None, text, None, entry.start_line)


# ---- edits: old text → new text, every other line kept ----------------------------------


def add_item_at(text: str, path: str, item: str) -> tuple[str, int]:
    """Append an open item right after the last TODO item, in that item's list style (under
    ``## TODO`` when there is none). Returns the new text and the new item's number."""
    doc = parse_document(path, text)
    item = _line(item)
    items = parse_task(doc).items
    new = None
    if items:
        lines = doc.lines
        last = items[-1]
        lead = _next_lead(lines[last.line - 1])
        end = next(e.end_line for e in doc.entries if e.start_line == last.line)
        if lead is not None:
            chunk = f"{lead}[ ] {item}{doc.newline}"
            if not lines[end - 1].endswith(("\n", "\r")):
                chunk = doc.newline + chunk  # the file had no final newline
            new = "".join(lines[:end]) + chunk + "".join(lines[end:])
            if not any(i.line == end + 1 for i in parse_task(parse_document(path, new)).items):
                new = None  # not a TODO item where it stands: fall back to the section's end
    if new is None:
        new = edits.insert_entry(doc, "todo", TODO, f"- [ ] {item}{doc.newline}")
    return sync_pointer(new, path), _first_new_item(text, new, path)


def _next_lead(line: str) -> str | None:
    """The list marker for an item after ``line``'s: same indent, bullet and spacing, or the
    next number of an ordered list."""
    if m := _ORDERED.match(line):
        return f"{m.group(1)}{int(m.group(2)) + 1}{m.group(3)}{m.group(4)}"
    m = re.match(r"^[ \t]*[-*+][ \t]+", line)
    return m.group(0) if m else None


def _first_new_item(old: str, new: str, path: str) -> int:
    """Number of the first TODO item at or after the first line ``new`` changed."""
    before = [line.rstrip("\r\n") for line in split_lines(old)]
    after = [line.rstrip("\r\n") for line in split_lines(new)]
    same = 0
    while same < min(len(before), len(after)) and before[same] == after[same]:
        same += 1
    items = parse_task(parse_document(path, new)).items
    return next((i.n for i in items if i.line > same), len(items))


def complete_item(text: str, path: str, n: int, done: bool = True) -> str:
    doc = parse_document(path, text)
    item = _item(doc, n)
    lines = doc.lines
    line = lines[item.line - 1]
    match = _BOX.match(line)
    if match is None:  # not a list item any more: the file changed in a way we can't redo
        raise EditNotApplicable(f"{path}:{item.line}: TODO item {n} is not a list item")
    box = "[x] " if done else "[ ] "
    lines[item.line - 1] = match.group(1) + box + line[match.end() :]
    return sync_pointer("".join(lines), path)


def set_field(text: str, path: str, key: str, value: str) -> str:
    """``- Key: value`` under ``## State``: replaced in place, or added."""
    doc = parse_document(path, text)
    value = _line(value)
    for entry in doc.entries:
        m = _FIELD.match(entry.text.split("\n", 1)[0])
        if _section_of(entry) == STATE and m and m.group("key").strip().lower() == key.lower():
            # only the value on the first line changes; notes below it are a person's
            lines = doc.lines
            first = lines[entry.start_line - 1]
            start = first.index(":", first.index(m.group("key"))) + 1
            ending = first[len(first.rstrip("\r\n")) :]
            lines[entry.start_line - 1] = f"{first[:start]} {value}{ending}"
            return "".join(lines)
    return edits.insert_entry(doc, "state", STATE, f"- {key}: {value}{doc.newline}")


def sync_pointer(text: str, path: str) -> str:
    state = parse_task(parse_document(path, text))
    if state.fields.get("Pointer") == str(state.pointer):
        return text
    return set_field(text, path, "Pointer", str(state.pointer))


def add_instruction(text: str, path: str, rule: str) -> str:
    doc = parse_document(path, text)
    return edits.insert_entry(doc, "instruction", INSTRUCTIONS, f"- {_line(rule)}{doc.newline}")


def new_task(title: str, items: list[str] | tuple[str, ...], phase: str, newline: str) -> str:
    lines = [f"# Task: {_line(title)}", "", f"## {STATE}", f"- Phase: {_line(phase)}"]
    lines += [f"- Pointer: {1 if items else 0}", "", f"## {TODO}"]
    lines += [f"- [ ] {_line(item)}" for item in items]
    lines += ["", f"## {INSTRUCTIONS}", ""]
    return newline.join(lines)


def _item(doc: Document, n: int) -> TaskItem:
    items = parse_task(doc).items
    if not 1 <= n <= len(items):
        raise IndexError(f"{doc.path}: no TODO item {n} (the list has {len(items)})")
    return items[n - 1]


def _line(text: str) -> str:
    text = edits.check_text(text)
    if "\n" in text:
        raise ValueError("task items, phases and instructions are one line each")
    return text


# ---- the object agents use ------------------------------------------------------------------


class Task:
    """``ws.task``: read and advance task_process.md (full mode writes it; minimal only reads)."""

    def __init__(
        self,
        read: Callable[[], Document | None],
        write: EditFile,
        archive: Callable[[str, str], None],
    ) -> None:
        self._read = read
        self._write = write
        self._archive = archive

    def state(self) -> TaskState:
        doc = self._read()
        if doc is None:
            return TaskState("", "idle", 0, (), (), {})
        return parse_task(doc)

    def items(self) -> list[TaskItem]:
        return list(self.state().items)

    def current(self) -> TaskItem | None:
        """The first open TODO item: what to work on now."""
        return self.state().current

    @property
    def phase(self) -> str:
        return self.state().phase

    @property
    def instructions(self) -> list[Instruction]:
        return list(self.state().instructions)

    def add(self, item: str) -> TaskItem:
        """Append an open item to the TODO list."""
        written = 0

        def edit(text: str) -> str:
            nonlocal written  # the last run is the one written (a retry redoes the edit)
            new, written = add_item_at(text, TASK_FILE, item)
            return new

        new = self._write(edit)
        return parse_task(parse_document(TASK_FILE, new)).items[written - 1]

    def complete(self, n: int, done: bool = True) -> TaskItem:
        """Tick item ``n`` (1-based); ``done=False`` unticks it. Ticking twice is harmless."""
        new = self._write(lambda text: complete_item(text, TASK_FILE, n, done))
        return parse_task(parse_document(TASK_FILE, new)).items[n - 1]

    def set_phase(self, phase: str) -> None:
        self._write(lambda text: set_field(text, TASK_FILE, "Phase", phase))

    def instruct(self, condition: str, then: str, otherwise: str | None = None) -> Instruction:
        """Add ``IF condition THEN then [ELSE otherwise]`` to the instructions."""
        rule = f"IF {condition} THEN {then}" + (f" ELSE {otherwise}" if otherwise else "")
        new = self._write(lambda text: add_instruction(text, TASK_FILE, rule))
        return parse_task(parse_document(TASK_FILE, new)).instructions[-1]

    def new(
        self, title: str, items: list[str] | tuple[str, ...] = (), phase: str = "plan"
    ) -> TaskState:
        """Start a new task. The previous one, if it had any content, is kept as
        ``.tasks/YYYYMMDD_HHMMSS_<slug>.md``: nothing is thrown away."""
        body = new_task(title, items, phase, "\n")  # validates before anything is written
        archived: list[str] = []

        def edit(text: str) -> str:
            # The old task is kept before it is replaced: if keeping it fails, nothing is
            # replaced. A retried edit (a person saved meanwhile) keeps the newer text too.
            if worth_keeping(text) and text not in archived:
                old = parse_task(parse_document(TASK_FILE, text))
                self._archive(old.title or "task", text)
                archived.append(text)
            return body.replace("\n", parse_document(TASK_FILE, text).newline) if text else body

        return parse_task(parse_document(TASK_FILE, self._write(edit)))


def worth_keeping(text: str) -> bool:
    """Whether a task file holds anything beyond the empty template (headings, Phase and
    Pointer lines, comments): a title, items, instructions, notes."""
    state = parse_task(parse_document(TASK_FILE, text))
    if state.title:
        return True
    for line in text.splitlines():
        bare = line.strip()
        if not bare or bare.startswith("#") or bare.startswith("<!--"):
            continue
        if re.match(r"^[-*+]\s+(phase|pointer)\s*:", bare, re.I):
            continue
        return True
    return False


def archive_name(title: str, moment: dt.datetime) -> str:
    return f".tasks/{moment.strftime('%Y%m%d_%H%M%S')}_{slugify(title)}.md"


def archiver(root: Path) -> Callable[[str, str], None]:
    """Archives a finished task as a new file under ``.tasks/``, never over an earlier one."""

    def archive(title: str, text: str) -> None:
        rel, absolute = workspace_path(root, archive_name(title, dt.datetime.now()))
        absolute.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        for n in range(1, 1000):
            target = absolute if n == 1 else absolute.with_name(f"{absolute.stem}-{n}.md")
            if create_exclusive(target, data):
                return
        raise ConflictError(f"{rel}: too many archived tasks with this name")

    return archive
