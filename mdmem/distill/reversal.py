"""A decision that reverses an earlier one ("We switched PDF rendering from wkhtmltopdf to
WeasyPrint") makes the memories that still say the old choice is in use stale. They are
superseded by the new memory (archived with ``superseded_by``), never deleted, and never when a
person wrote or edited them."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mdmem.distill.rules import STOPWORDS, content_words
from mdmem.markdown import edits
from mdmem.markdown.entries import Entry, edited_by_hand
from mdmem.markdown.parse import parse_document
from mdmem.memory.writers import Writer
from mdmem.reports import MemoryChange

if TYPE_CHECKING:
    from mdmem.distill.extract import Candidate

Embed = Callable[[list[str]], np.ndarray]

_NAME = r"[A-Za-z][\w.+-]*\w"
_PATTERNS = (
    re.compile(
        rf"\b(?:switched|migrated|moved|changed)\b[^.;]*?\bfrom (?P<old>{_NAME}) "
        rf"to (?P<new>{_NAME})",
        re.I,
    ),
    re.compile(rf"\b(?P<new>{_NAME}) (?:now )?(?:replaces|replaced|supersedes) (?P<old>{_NAME})"),
    re.compile(
        rf"\b(?P<old>{_NAME}) (?:was|is|has been) (?:replaced|superseded) (?:by|with) "
        rf"(?P<new>{_NAME})"
    ),
    re.compile(rf"\b(?P<new>{_NAME}),? instead of (?P<old>{_NAME})"),
)
TOPIC_SIMILARITY = 0.4
"""With embeddings, a memory that names the old choice but shares no other word with the
reversal must be at least this similar (cosine) to count as the same subject."""


@dataclass(frozen=True)
class Reversal:
    old: str
    """The choice given up (one name: "wkhtmltopdf", "Celery")."""
    new: str


def reversal(text: str) -> Reversal | None:
    """The choice a statement gives up and the one it takes: "switched ... from A to B", "B
    replaces A", "A was replaced by B", "B instead of A"."""
    for pattern in _PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        old, new = match.group("old"), match.group("new")
        if old.lower() not in STOPWORDS and new.lower() not in STOPWORDS and old != new:
            return Reversal(old, new)
    return None


def stale(
    text: str,
    entries: Sequence[Entry],
    embed: Embed | None = None,
) -> list[Entry]:
    """The active facts and preferences the statement ``text`` reverses: they name the old
    choice, not the new one, and are about the same subject (another content word in common,
    or, with ``embed``, cosine ≥ :data:`TOPIC_SIMILARITY`). Hand-written or hand-edited
    entries are never among them."""
    found = reversal(text)
    if found is None:
        return []
    old, new = _word(found.old), _word(found.new)
    names = {found.old.lower(), found.new.lower()}
    topic = content_words(text) - names
    out: list[Entry] = []
    unsure: list[Entry] = []
    for entry in entries:
        if entry.archived or entry.type not in ("fact", "preference") or edited_by_hand(entry):
            continue
        if not old.search(entry.text) or new.search(entry.text) or entry.text == text:
            continue
        if _hides(entry.text, text, found.old):
            continue  # "… from the Jinja templates": a fact the reversal does not restate
        (out if topic & (content_words(entry.text) - names) else unsure).append(entry)
    if unsure and embed is not None:
        vectors = np.asarray(embed([text, *(e.text for e in unsure)]), dtype=np.float32)
        sims = vectors[1:] @ vectors[0]
        out += [e for e, sim in zip(unsure, sims, strict=True) if float(sim) >= TOPIC_SIMILARITY]
    return sorted(out, key=lambda e: (e.path, e.start_line))


def _hides(old_text: str, reversal_text: str, choice: str) -> bool:
    """Whether superseding ``old_text`` by the reversal would hide a distinguishing token of it
    (:func:`~mdmem.distill.fidelity.distinguishing`) other than the choice given up; a plural
    of a word the reversal says ("PDFs" / "PDF") is said."""
    from mdmem.distill.fidelity import distinguishing, token_set

    said = token_set(reversal_text)
    missing = distinguishing(old_text) - said - {choice.lower()}
    return any(not (w.endswith("s") and w[:-1] in said) for w in missing)


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", re.I)


def supersede_reversed(
    writer: Writer, existing: list[Entry], written: Entry, candidate: Candidate, embed: Embed | None
) -> list[MemoryChange]:
    """Supersede the memories ``written`` (just written for ``candidate``) reverses; what was
    done, as report lines."""
    old = stale(written.text, existing, embed)
    if not old:
        return []
    turn = reversal(written.text)
    why = f"reversed by {written.id} ({turn.old} → {turn.new})" if turn else "reversed"
    done = set(archive_stale(writer, old, written.id, dt.date.today().isoformat()))
    return [
        MemoryChange(
            "replace",
            e.type or candidate.type,
            written.text,
            candidate.importance,
            why,
            candidate.evidence,
            written.id,
            written.path,
            e.id,
        )
        for e in old
        if e.id in done
    ]


def archive_stale(writer: Writer, entries: Sequence[Entry], by: str, day: str) -> list[str]:
    """Archive each entry as superseded by ``by`` (through ``writer``, under its lock); an
    entry someone changed or removed since it was read is left as it is. The ids archived."""
    done: list[str] = []
    for entry in entries:
        stamp = {"superseded_by": by, "superseded": day}

        def edit(current: str, entry: Entry = entry, stamp: dict[str, str] = stamp) -> str:
            if _live(current, entry) is None:
                return current
            return edits.archive_entry(current, entry.path, entry.id, stamp)

        after = writer.write(entry.path, edit, create=False)
        archived = _find(after, entry, archived=True)
        if archived is not None and archived.meta.get("superseded_by") == by:
            done.append(entry.id)
    return done


def _live(text: str, entry: Entry) -> Entry | None:
    """``entry`` in ``text``, still active and with the text it was read with."""
    now = _find(text, entry, archived=False)
    return now if now is not None and now.text == entry.text else None


def _find(text: str, entry: Entry, *, archived: bool) -> Entry | None:
    doc = parse_document(entry.path, text)
    return next((e for e in doc.entries if e.id == entry.id and e.archived == archived), None)
