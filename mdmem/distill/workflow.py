"""Compaction and extraction over a workspace's stores: which conversation, which file, what
is written where, and the report of it all — on disk, or as a dry run's diff."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mdmem.config import Config
from mdmem.errors import EntryNotFoundError
from mdmem.layout import COMPACT_FILE, KNOWLEDGE_FILES
from mdmem.markdown.entries import MEMORY_TYPES, Entry
from mdmem.markdown.sections import section_text, set_section
from mdmem.memory.compact_memory import (
    CompactMemory,
    read_memory,
    stamp,
    without_stamp,
    write_memory,
)
from mdmem.memory.documents import Documents
from mdmem.memory.knowledge_store import KnowledgeStore, today
from mdmem.memory.session_files import SessionFiles
from mdmem.memory.session_format import SUMMARY_SECTION, SessionRecord, is_session_path
from mdmem.memory.session_writer import Session
from mdmem.memory.writers import DryRunWriter, FileWriter, Writer
from mdmem.redact import Redactor
from mdmem.reports import CompactReport, ExtractReport, MemoryChange

Conversation = list[dict[str, Any]] | str | os.PathLike[str] | Session | SessionRecord | None
"""What to compact or extract from: chat messages (OpenAI-style dicts), a JSONL/JSON
transcript path, a session id or path, a Session or SessionRecord; None: the agent's latest
session."""
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Distiller:
    config: Config
    documents: Documents
    writer: FileWriter
    sessions: SessionFiles
    embed: Callable[[], Callable[[list[str]], np.ndarray] | None]
    """The embedding function for near-duplicate checks (loaded only when there is a
    candidate), or None when embeddings are off."""
    on_compacted: Callable[[str, str], None] | None = None
    """Called with (path, new text) after a compaction wrote its summary (automatic tier
    promotion: in minimal mode the only writer of L3)."""

    @property
    def redactor(self) -> Redactor:
        return self.writer.redactor

    def _model(self) -> str | None:
        return self.config.context.model or self.config.llm.model or None

    def should_compact(self, source: Conversation) -> bool:
        from mdmem.distill.compact import should_compact

        messages, _ = self.conversation(source)
        return should_compact(messages, self.config.compact.threshold_tokens, self._model())

    def extract(
        self, source: Conversation, *, offline: bool, dry_run: bool, **llm_kwargs: Any
    ) -> ExtractReport:
        messages, record = self.conversation(source)
        writer = self._writer(dry_run)
        report = self._extract(messages, _session_id(record), offline, writer, llm_kwargs)
        return replace(report, dry_run=dry_run, diff=_diff(writer))

    def extract_into(self, messages: Messages, source: str | None, writer: Writer) -> ExtractReport:
        """Offline extraction of ``messages`` through ``writer`` (promotion from L3 to L4). An
        old summary says things that have changed since: a memory it would give that was
        superseded already is stale, and skipped (never brought back over the newer one)."""
        return self._extract(messages, source, True, writer, {}, skip_superseded=True)

    def compact(
        self,
        source: Conversation,
        *,
        offline: bool,
        dry_run: bool,
        flush: bool,
        into: str | None,
        **llm_kwargs: Any,
    ) -> CompactReport:
        from mdmem.distill.compact import compact, merge
        from mdmem.tokens import token_counter

        messages, record = self.conversation(source)
        writer = self._writer(dry_run)
        extraction = None
        if flush:
            found = self._extract(messages, _session_id(record), offline, writer, llm_kwargs)
            extraction = replace(found, dry_run=dry_run)
        if into is not None:
            record = self.sessions.record(into)
        target = self._target(record)
        previous = self._previous(target, record)
        count = token_counter(self._model())
        llm_kwargs = {"redactor": self.redactor, **llm_kwargs}  # nothing leaves unmasked
        result = compact(
            messages,
            llm=self.config.llm,
            offline=offline,
            previous=previous,
            count=count,
            **llm_kwargs,
        )
        result = replace(result, memory=_masked(result.memory, self.redactor.mask))
        if previous:  # what the memory held before counts as input, not as growth
            before = result.tokens_before + count(previous.render())
            ratio = round(result.tokens_after / before, 4) if before else 0.0
            result = replace(result, tokens_before=before, ratio=ratio)
        line = stamp(result.engine, today(), result.tokens_before, result.tokens_after)
        limit = self.config.compact.max_events

        def edit(current: str) -> str:
            # the file as it is now (a person's edits included) is merged, never replaced
            if target == COMPACT_FILE:
                merged = merge(read_memory(current), result.memory)
                return write_memory(current, merged, max_events=limit, today=today())
            body = section_text(current, target, SUMMARY_SECTION)  # (\n line ends)
            merged = merge(read_memory(body, level=3), result.memory)
            body = write_memory(
                without_stamp(body), merged, max_events=limit, today=today(), level=3
            )
            return set_section(current, target, SUMMARY_SECTION, line + "\n\n" + body)

        text = writer.write(target, edit)
        if not dry_run and self.on_compacted is not None:
            self.on_compacted(target, text)
        return CompactReport(
            result.engine,
            result.tokens_before,
            result.tokens_after,
            result.ratio,
            target,
            text,
            result.cost,
            dry_run,
            _diff(writer),
            extraction,
        )

    def _target(self, record: SessionRecord | None) -> str:
        """A recorded session's summary in full mode (a deleted session file is not brought
        back); otherwise ``.compact_memory.md``."""
        path = record.path if record is not None else None
        if self.config.mode == "full" and path and (self.documents.root / path).exists():
            return path
        return COMPACT_FILE

    def _previous(self, target: str, record: SessionRecord | None) -> CompactMemory | None:
        if target == COMPACT_FILE:
            doc = self.documents.or_none(COMPACT_FILE)
            return read_memory(doc.text) if doc is not None else None
        if record is not None and record.summary:
            return read_memory(record.summary, level=3)
        return None

    def _extract(
        self,
        messages: Messages,
        session_id: str | None,
        offline: bool,
        writer: Writer,
        llm_kwargs: dict[str, Any],
        skip_superseded: bool = False,
    ) -> ExtractReport:
        from mdmem.distill.dedupe import choose_section, decide
        from mdmem.distill.extract import extract_llm, extract_offline, text_hash
        from mdmem.distill.relearn import newest_wins, not_learned_before
        from mdmem.distill.reversal import supersede_reversed

        llm_kwargs = {"redactor": self.redactor, **llm_kwargs}  # nothing leaves unmasked
        llm = self.config.llm
        use_llm = bool(llm.model) and not offline
        problems: tuple[str, ...] = ()
        cost = None
        if use_llm:
            found = extract_llm(messages, llm, source=session_id, **llm_kwargs)
            candidates, problems = list(found.candidates), found.problems
            cost = found.reply.cost if found.reply else None
        else:
            candidates = extract_offline(messages, source=session_id)
        existing = [
            e
            for f in KNOWLEDGE_FILES
            for e in self.documents.entries_or_warn(f, "extract")
            if e.type in MEMORY_TYPES
        ]
        every = [
            e
            for f in KNOWLEDGE_FILES
            if (self.documents.root / f).exists()
            for e in self.documents.entries(f, include_archived=True)
        ]
        threshold = self.config.compact.dedupe_similarity
        embed = self.embed() if candidates else None
        candidates = not_learned_before(candidates, every, session_id, embed, threshold)
        if skip_superseded:
            stale = {
                text_hash(e.text)
                for f in KNOWLEDGE_FILES
                if (self.documents.root / f).exists()
                for e in self.documents.entries(f, include_archived=True)
                if e.archived and "superseded_by" in e.meta
            }
            candidates = [c for c in candidates if text_hash(c.text) not in stale]
        decisions = decide(
            candidates,
            existing,
            embed=self.embed() if candidates else None,
            threshold=self.config.compact.dedupe_similarity,
            llm=llm if use_llm else None,
            **llm_kwargs,
        )
        decisions = newest_wins(decisions, session_id)
        store = KnowledgeStore(self.documents, writer, self.redactor)
        mask = self.redactor.mask
        changes = []
        for d in decisions:
            c = d.candidate
            d = replace(d, text=mask(d.text))
            written: Entry | None = None
            if d.action in ("add", "keep_both"):
                doc = writer.current(store.file_for(c.type))
                topic = choose_section(doc, d.text, c.type) if doc is not None else None
                written = store.remember(
                    d.text, c.type, c.importance, source=session_id, section=topic
                )
            elif d.action in ("replace", "merge") and d.existing is not None:
                # the new memory says how it bears on the old one: visible in its metadata
                kind = "contradicts" if d.action == "replace" else "refines"
                written = store.supersede(
                    d.existing,
                    d.text,
                    importance=c.importance,
                    source=session_id,
                    related={kind: d.existing.id},
                )
            if written is not None and c.type in ("fact", "preference"):
                changes += supersede_reversed(writer, existing, written, c, self.embed())
            changes.append(
                MemoryChange(
                    d.action,
                    c.type,
                    d.text,
                    c.importance,
                    d.reason,
                    mask(c.evidence),
                    written.id if written else None,
                    written.path if written else None,
                    d.existing.id if d.existing is not None else None,
                )
            )
        engine = "llm" if use_llm else "offline"
        return ExtractReport(session_id, engine, tuple(changes), problems, cost)

    def _writer(self, dry_run: bool) -> Writer:
        return DryRunWriter(self.documents, self.redactor) if dry_run else self.writer

    def conversation(self, source: Conversation) -> tuple[Messages, SessionRecord | None]:
        """Messages from whatever the caller has, and the session they come from (if any)."""
        from mdmem.distill.transcript import load_messages

        record: SessionRecord | None = None
        if source is None:
            own = self.sessions.list(agent=self.config.agent, limit=1)
            if not own:
                hint = (
                    "minimal mode records no session files: give messages or a transcript"
                    if self.config.mode == "minimal"
                    else f"no session of agent {self.config.agent!r} in .sessions/ yet: give "
                    "messages, a transcript file or a session id"
                )
                raise EntryNotFoundError(f"nothing to compact: {hint}")
            record = own[0]
        elif isinstance(source, Session):
            # a session whose file is gone (or never was: minimal mode) is read from memory
            record = self.sessions.record(source.id) if source.written else source.record()
        elif isinstance(source, SessionRecord):
            record = source
        elif isinstance(source, str | os.PathLike):
            found = self._transcript_file(source)
            if found is None:
                record = self.sessions.record(str(source))
            elif (rel := self._inside(found)) is not None and is_session_path(rel):
                record = self.sessions.record(Path(rel).stem)
            else:
                return load_messages(found), None
        else:
            return load_messages(source), None
        return load_messages(record), record

    def _transcript_file(self, source: str | os.PathLike[str]) -> Path | None:
        path = Path(source)
        inside = self.documents.root / path if not path.is_absolute() else path
        return path if path.is_file() else inside if inside.is_file() else None

    def _inside(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self.documents.root.resolve()).as_posix()
        except ValueError:
            return None


def _session_id(record: SessionRecord | None) -> str | None:
    return record.id if record is not None and record.path else None


def _diff(writer: Writer) -> str:
    return writer.diff() if isinstance(writer, DryRunWriter) else ""


def _masked(memory: CompactMemory, mask: Callable[[str], str]) -> CompactMemory:
    """Compaction output (a model's or the offline engine's) with its secrets masked."""
    return replace(
        memory,
        state=tuple(mask(s) for s in memory.state),
        events=tuple(replace(e, text=mask(e.text)) for e in memory.events),
    )
