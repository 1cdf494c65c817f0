"""Consolidation: old, rarely used lasting memories that say the same thing become one, checked
for fidelity before anything is replaced; the originals are archived, never deleted.

1. Candidates: memories in memory.md / learnings.md older than ``min_age_days`` and returned
   fewer than ``max_access`` times (an entry the index has no count for counts as recently
   used); or all of them past ``threshold`` memories (but the often returned ones).
   Hand-written entries and entries a person edited since the program wrote them are only
   suggested, never changed.
2. Clusters: per file and type, pairs at cosine ≥ ``similarity`` joined (union-find); clusters
   smaller than ``min_cluster`` stay. A memory that a newer one of its cluster changes (one
   value slot, :mod:`mdmem.distill.slots`, and dated a later day) is superseded by it instead
   of merged; the report lists each pair (:class:`Change`).
3. Merges: :mod:`mdmem.distill.merge_memories` (model or extractive, per fact), each checked by
   :mod:`mdmem.distill.fidelity`; below the threshold, or losing a fact or a distinguishing
   token (``m3``, ``27``, ``eu-west-1``), the originals stay: nothing archived hides one.
4. One write per file through the safe writes: the merged memory (``refines=`` its sources,
   ``fidelity=``, ``emb_sim=``, ``kw_retention=``) goes in, the originals go to ``## Archive``
   with ``consolidated_into=``. Each write re-reads the file: a cluster a person changed
   meanwhile is left alone. The full report goes to ``.mdmem/consolidation/``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mdmem.config import Config
from mdmem.distill.fidelity import Fidelity, check
from mdmem.distill.merge_memories import MergeResult, Proposal, merge_llm, merge_offline
from mdmem.layout import KNOWLEDGE_FILES
from mdmem.markdown import edits
from mdmem.markdown.entries import (
    ARCHIVE_TITLE,
    MEMORY_TYPES,
    SECTION_TITLES,
    Entry,
    edited_by_hand,
    find_meta,
    format_meta,
    new_id,
    text_sum,
)
from mdmem.markdown.parse import parse_document, split_lines
from mdmem.memory.documents import Documents
from mdmem.memory.knowledge_store import today
from mdmem.memory.restore import ARCHIVED_BY, CONSOLIDATED, CONSOLIDATED_INTO, RESTORED
from mdmem.memory.writers import DryRunWriter, Writer
from mdmem.redact import Redactor

REPORT_DIR = "consolidation"
"""Reports go to ``.mdmem/consolidation/<stamp>.json``."""
Embed = Callable[[list[str]], np.ndarray]
Outcome = Literal["merged", "refused", "superseded", "kept", "changed", "failed"]


@dataclass(frozen=True)
class Merged:
    """One merged memory and its check."""

    id: str
    text: str
    importance: float
    sources: tuple[str, ...]
    fidelity: Fidelity

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "text": self.text,
            "importance": self.importance,
            "sources": list(self.sources),
            "fidelity": self.fidelity.to_dict(),
        }


@dataclass(frozen=True)
class Change:
    """One memory superseded by a newer value: the pair the report lists."""

    old: str
    new: str
    old_text: str
    new_text: str

    def to_dict(self) -> dict[str, str]:
        return dict(vars(self))

    def describe(self) -> str:
        return f"{self.old} → {self.new}: {self.old_text!r} → {self.new_text!r}"


@dataclass(frozen=True)
class Cluster:
    path: str
    type: str
    members: tuple[str, ...]
    outcome: Outcome
    reason: str
    merges: tuple[Merged, ...] = ()
    """Proposed merged memories, each with its check (written are those that passed)."""
    superseded: tuple[tuple[str, str], ...] = ()
    """(older id, newer id): memories a newer one of the cluster contradicts."""
    protected: tuple[str, ...] = ()
    """Members written or edited by a person: suggested, never changed."""

    @property
    def written(self) -> tuple[Merged, ...]:
        return tuple(m for m in self.merges if m.fidelity.passed) if self.active else ()

    @property
    def active(self) -> bool:
        return self.outcome in ("merged", "superseded")

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "type": self.type,
            "members": list(self.members),
            "outcome": self.outcome,
            "reason": self.reason,
            "merges": [m.to_dict() for m in self.merges],
            "superseded": [list(p) for p in self.superseded],
            "protected": list(self.protected),
        }


@dataclass(frozen=True)
class ConsolidateReport:
    engine: str
    """``llm``, ``offline``, ``importance`` or ``none`` (no embeddings: nothing done)."""
    rule: str
    """Why these candidates: ``age`` or ``threshold``."""
    memories: int
    candidates: int
    clusters: tuple[Cluster, ...]
    tokens_before: int
    tokens_after: int
    entries_after: int
    archived: tuple[str, ...] = ()
    """By ``--by-importance``: the ids archived."""
    suggestions: tuple[str, ...] = ()
    """What a person may want to merge by hand."""
    problems: tuple[str, ...] = ()
    cost: float | None = None
    dry_run: bool = False
    diff: str = ""
    report_path: str | None = None
    fidelity_threshold: float = 0.5
    passed_over: tuple[tuple[str, int], ...] = ()
    """Why the other memories were no candidates: (reason, count), see :func:`passed_over`."""
    changes: tuple[Change, ...] = ()
    """Each memory superseded by a newer value, with both texts."""
    when: str = field(default_factory=lambda: dt.datetime.now().isoformat(timespec="seconds"))

    def count(self, outcome: str) -> int:
        return sum(c.outcome == outcome for c in self.clusters)

    @property
    def merged(self) -> int:
        """Originals archived into merged memories."""
        return sum(len(m.sources) for c in self.clusters for m in c.written)

    @property
    def written(self) -> int:
        return sum(len(c.written) for c in self.clusters)

    @property
    def superseded(self) -> int:
        """Memories archived because a newer one changes them (``superseded_by=``)."""
        return sum(len(c.superseded) for c in self.clusters if c.active)

    @property
    def refused(self) -> tuple[Merged, ...]:
        return tuple(m for c in self.clusters for m in c.merges if not m.fidelity.passed)

    def summary(self) -> str:
        verb = "would go" if self.dry_run else "went"
        if self.engine == "none":
            return (
                f"{self.candidates} of {self.memories} memories are candidates, but there are no "
                "embeddings to cluster them: nothing done (use --by-importance)"
            )
        if self.engine == "importance":
            return (
                f"{len(self.archived)} of {self.memories} memories {verb} to the archive by "
                f"importance; {self.entries_after} left"
            )
        why = ", ".join(f"{n} {PASSED_OVER[reason]}" for reason, n in self.passed_over)
        return (
            f"{self.candidates} of {self.memories} memories were candidates ({self.rule})"
            + (f" (not: {why})" if why else "")
            + f"; {len(self.clusters)} clusters: {self.count('merged')} merged "
            f"({self.merged} originals into {self.written}), {self.count('refused')} refused, "
            f"{self.count('kept')} kept"
            + (f", {self.superseded} superseded by a newer value" if self.superseded else "")
            + f"; {self.memories} → {self.entries_after} memories, "
            f"{self.tokens_before:,} → {self.tokens_after:,} tokens ({verb} as shown)"
        )

    def to_dict(self) -> dict[str, object]:
        skip = ("clusters", "changes")
        out: dict[str, object] = {
            k: getattr(self, k) for k in self.__dataclass_fields__ if k not in skip
        }
        out["clusters"] = [c.to_dict() for c in self.clusters]
        out["changes"] = [c.to_dict() for c in self.changes]
        out["archived"] = list(self.archived)
        out["suggestions"] = list(self.suggestions)
        out["problems"] = list(self.problems)
        out["passed_over"] = dict(self.passed_over)
        out["merged"] = self.merged
        out["written"] = self.written
        out["superseded"] = self.superseded
        out["summary"] = self.summary()
        return out


@dataclass(frozen=True)
class Consolidator:
    config: Config
    documents: Documents
    writer: Writer
    redactor: Redactor
    embed: Callable[[], Embed | None]
    access_counts: Callable[[Sequence[str]], dict[str, int]]
    state_dir: Path
    count_tokens: Callable[[str], int]

    def run(
        self,
        *,
        offline: bool = False,
        dry_run: bool = False,
        by_importance: bool = False,
        writer: Writer | None = None,
        **llm_kwargs: Any,
    ) -> ConsolidateReport:
        """``writer``: a dry run's writer that already holds earlier steps' edits (promotion
        extracts into memory.md first): consolidation reads the files as it holds them and
        adds its own edits, so the caller's diff shows everything."""
        cfg = self.config.consolidate
        if writer is None:
            writer = DryRunWriter(self.documents, self.redactor) if dry_run else self.writer
        memories = lasting(self.documents, writer)
        counts = _counts(self.access_counts, memories)
        rule = "threshold" if len(memories) > cfg.threshold else "age"
        picked = candidates(memories, counts, self.config, dt.date.today())
        before = self._texts()
        embed = None if by_importance else self.embed()
        if by_importance or embed is None:
            report = self._by_importance(memories, counts, writer, by_importance, rule, picked)
        else:
            report = self._by_clusters(memories, picked, embed, writer, rule, offline, llm_kwargs)
        diff = writer.diff() if isinstance(writer, DryRunWriter) else _diff(before, self._texts())
        skipped = passed_over(memories, counts, self.config, dt.date.today())
        report = replace(report, dry_run=dry_run, diff=diff, passed_over=skipped)
        if not dry_run and report.engine != "none":
            report = replace(report, report_path=self._save(report))
        return report

    def _by_clusters(
        self,
        memories: list[Entry],
        picked: list[Entry],
        embed: Embed,
        writer: Writer,
        rule: str,
        offline: bool,
        llm_kwargs: dict[str, Any],
    ) -> ConsolidateReport:
        cfg = self.config.consolidate
        llm = self.config.llm
        use_llm = bool(llm.model) and not offline
        found: list[Cluster] = _changed_since(picked, memories, embed, cfg.similarity)
        gone = {old for c in found for old, _ in c.superseded}
        picked = [e for e in picked if e.id not in gone]
        vectors = _unit(embed([e.text for e in picked])) if picked else np.zeros((0, 1))
        groups = clusters(picked, vectors, cfg.similarity)
        problems: list[str] = []
        cost = 0.0
        suggestions: list[str] = []
        row = {e.id: n for n, e in enumerate(picked)}
        for members in groups:
            own = vectors[[row[e.id] for e in members]]
            cluster, merged = self._cluster(members, own, embed, use_llm, llm_kwargs)
            found.append(cluster)
            problems += [f"{cluster.path} {members[0].id}…: {p}" for p in merged.problems]
            cost += merged.cost or 0.0
            if cluster.protected:
                suggestions.append(_suggestion(cluster))
        applied = self._apply(found, memories, writer)
        before = sum(self.count_tokens(e.text) for e in memories)
        after_entries, after_tokens = _after(memories, applied, self.count_tokens)
        by_id = {e.id: e for e in memories}
        changes = tuple(
            Change(old, new, by_id[old].text, by_id[new].text)
            for c in applied
            if c.active
            for old, new in c.superseded
        )
        return ConsolidateReport(
            "llm" if use_llm else "offline",
            rule,
            len(memories),
            sum(not edited_by_hand(e) for e in picked),
            tuple(applied),
            before,
            after_tokens,
            after_entries,
            suggestions=tuple(suggestions),
            problems=tuple(problems),
            cost=cost or None,
            fidelity_threshold=cfg.fidelity_threshold,
            changes=changes,
        )

    def _cluster(
        self,
        members: list[Entry],
        vectors: np.ndarray,
        embed: Embed,
        use_llm: bool,
        llm_kwargs: dict[str, Any],
    ) -> tuple[Cluster, MergeResult]:
        cfg = self.config.consolidate
        first = members[0]
        ids = tuple(e.id for e in members)
        protected = tuple(e.id for e in members if edited_by_hand(e))
        free = [e for e in members if not edited_by_hand(e)]
        superseded = _superseded(free)
        gone = {old for old, _ in superseded}
        free = [e for e in free if e.id not in gone]
        base = Cluster(first.path, first.type, ids, "kept", "", protected=protected)
        nothing = MergeResult(())
        if len(free) < cfg.min_cluster:
            why = f"{len(free)} memories to merge (fewer than {cfg.min_cluster})"
            if superseded:
                return replace(base, outcome="superseded", reason=why, superseded=superseded), (
                    nothing
                )
            return replace(base, reason=why), nothing
        if use_llm:
            llm_kwargs = {"redactor": self.redactor, **llm_kwargs}  # nothing leaves unmasked
            result = merge_llm(free, self.config.llm, **llm_kwargs)
        else:
            result = merge_offline(free)
        if not result.proposals:
            why = "; ".join(result.problems) or "its memories state different facts"
            outcome: Outcome = (
                "superseded" if superseded else "failed" if result.problems else "kept"
            )
            return replace(base, outcome=outcome, reason=why, superseded=superseded), result
        own = dict(zip((e.id for e in members), vectors, strict=True))
        merges = _checked(result.proposals, free, own, embed, cfg.fidelity_threshold)
        passed = [m for m in merges if m.fidelity.passed]
        if passed:
            why = f"{sum(len(m.sources) for m in passed)} originals into {len(passed)}"
            outcome = "merged"
        else:
            why = "; ".join(m.fidelity.reason for m in merges)
            outcome = "superseded" if superseded else "refused"
        cluster = replace(
            base, outcome=outcome, reason=why, merges=tuple(merges), superseded=superseded
        )
        return cluster, result

    def _apply(self, found: list[Cluster], memories: list[Entry], writer: Writer) -> list[Cluster]:
        """One write per file; clusters whose originals changed meanwhile become ``changed``."""
        by_id = {e.id: e for e in memories}
        out = {id(c): c for c in found}
        for rel in dict.fromkeys(c.path for c in found if c.active):
            todo = [c for c in found if c.path == rel and c.active]
            changed: list[Cluster] = []
            edit = _file_edit(rel, todo, by_id, changed)
            writer.write(rel, edit, create=False)
            for cluster in changed:
                why = "a person changed or moved its memories meanwhile: left as it is"
                out[id(cluster)] = replace(cluster, outcome="changed", reason=why)
        return list(out.values())

    def _by_importance(
        self,
        memories: list[Entry],
        counts: dict[str, int],
        writer: Writer,
        by_importance: bool,
        rule: str,
        picked: list[Entry],
    ) -> ConsolidateReport:
        cfg = self.config.consolidate
        tokens = sum(self.count_tokens(e.text) for e in memories)
        eligible = sum(not edited_by_hand(e) for e in picked)
        if not by_importance:
            return ConsolidateReport(
                "none", rule, len(memories), eligible, (), tokens, tokens, len(memories)
            )
        ranked = sorted(memories, key=lambda e: (-e.importance, e.created or ""), reverse=False)
        drop = [
            e
            for e in ranked[cfg.threshold :]
            if not edited_by_hand(e)
            and counts.get(e.id, 0) < cfg.max_access
            and RESTORED not in e.meta
        ]
        for rel in dict.fromkeys(e.path for e in drop):
            here = [e for e in drop if e.path == rel]
            writer.write(rel, partial(_archive_many, rel=rel, entries=here))
        kept = [e for e in memories if e not in drop]
        return ConsolidateReport(
            "importance",
            rule,
            len(memories),
            eligible,
            (),
            tokens,
            sum(self.count_tokens(e.text) for e in kept),
            len(kept),
            archived=tuple(e.id for e in drop),
        )

    def _texts(self) -> dict[str, str]:
        return {
            rel: (self.documents.root / rel).read_text(encoding="utf-8", errors="replace")
            for rel in KNOWLEDGE_FILES
            if (self.documents.root / rel).is_file()
        }

    def _save(self, report: ConsolidateReport) -> str:
        folder = self.state_dir / REPORT_DIR
        folder.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        path = folder / f"{stamp}.json"
        data = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, path)
        return str(path.relative_to(self.state_dir.parent))


def _diff(before: dict[str, str], after: dict[str, str]) -> str:
    from mdmem.reports import unified_diff

    changed = [rel for rel in after if before.get(rel) != after[rel]]
    return unified_diff({r: before.get(r, "") for r in changed}, {r: after[r] for r in changed})


def lasting(documents: Documents, writer: Writer | None = None) -> list[Entry]:
    """The lasting memories consolidation looks at: active entries of memory.md and
    learnings.md of a memory type (as a dry run's ``writer`` holds them, when it does)."""
    return [
        e
        for rel in KNOWLEDGE_FILES
        for e in _entries(documents, writer, rel)
        if not e.archived and e.type in MEMORY_TYPES
    ]


def _entries(documents: Documents, writer: Writer | None, rel: str) -> list[Entry]:
    if isinstance(writer, DryRunWriter) and rel in writer.texts:
        return list(parse_document(rel, writer.texts[rel]).entries)
    return list(documents.entries_or_warn(rel, "consolidate"))


def candidates(
    memories: list[Entry], counts: dict[str, int], config: Config, today: dt.date
) -> list[Entry]:
    """Old, rarely returned memories; all of them (but the often returned) past the threshold.
    Memories a person restored, and ids that appear twice, are never candidates. Hand-written
    and hand-edited ones are (to be suggested; :func:`edited_by_hand` keeps them unchanged)."""
    cfg = config.consolidate
    seen: dict[str, int] = {}
    for e in memories:
        seen[e.id] = seen.get(e.id, 0) + 1
    over = len(memories) > cfg.threshold
    out = []
    for e in memories:
        if seen[e.id] > 1 or RESTORED in e.meta:
            continue
        count = counts.get(e.id)
        if count is not None and count >= cfg.max_access:
            continue
        if over:
            out.append(e)
            continue
        age = _age(e.created, today)
        if count is not None and age is not None and age >= cfg.min_age_days:
            out.append(e)
    return out


PASSED_OVER = {
    "by_hand": "written or edited by a person (suggested only)",
    "often_used": "returned often",
    "no_count": "with no access count (counted as recently used)",
    "young": "younger than min_age_days",
    "undated": "with no created date",
    "restored": "restored",
    "duplicate_id": "with an id that appears twice",
}
"""What :func:`passed_over` counts, as the summary says it."""


def passed_over(
    memories: list[Entry], counts: dict[str, int], config: Config, today: dt.date
) -> tuple[tuple[str, int], ...]:
    """Why each memory that is no candidate (or only a suggestion) is one: the first reason of
    :data:`PASSED_OVER` that applies, counted. A first run on a fresh index otherwise reads as
    "0 of 40 memories were candidates" with nothing to say why."""
    cfg = config.consolidate
    picked = {id(e) for e in candidates(memories, counts, config, today)}
    seen: dict[str, int] = {}
    for e in memories:
        seen[e.id] = seen.get(e.id, 0) + 1
    found: dict[str, int] = {}
    for e in memories:
        if id(e) in picked:
            if not edited_by_hand(e):
                continue
            reason = "by_hand"
        elif seen[e.id] > 1:
            reason = "duplicate_id"
        elif RESTORED in e.meta:
            reason = "restored"
        elif (count := counts.get(e.id)) is not None and count >= cfg.max_access:
            reason = "often_used"
        elif _age(e.created, today) is None:
            reason = "undated"
        elif (_age(e.created, today) or 0) < cfg.min_age_days:
            reason = "young"
        else:
            reason = "no_count"
        found[reason] = found.get(reason, 0) + 1
    return tuple((r, found[r]) for r in PASSED_OVER if r in found)


def clusters(entries: list[Entry], vectors: np.ndarray, similarity: float) -> list[list[Entry]]:
    """Groups of two or more memories of one file and type, pairs at cosine ≥ ``similarity``
    joined transitively (union-find), in file order."""
    parent = list(range(len(entries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_group: dict[tuple[str, str], list[int]] = {}
    for n, e in enumerate(entries):
        by_group.setdefault((e.path, e.type), []).append(n)
    for rows in by_group.values():
        if len(rows) < 2:
            continue
        sims = vectors[rows] @ vectors[rows].T
        for a, b in zip(*np.nonzero(np.triu(sims >= similarity, k=1)), strict=True):
            ra, rb = find(rows[int(a)]), find(rows[int(b)])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    members: dict[int, list[Entry]] = {}
    for n, e in enumerate(entries):
        members.setdefault(find(n), []).append(e)
    found = [m for m in members.values() if len(m) > 1]
    return sorted(found, key=lambda m: (m[0].path, m[0].start_line))


def _counts(
    access_counts: Callable[[Sequence[str]], dict[str, int]], memories: list[Entry]
) -> dict[str, int]:
    try:
        return access_counts([e.id for e in memories])
    except Exception:  # no index (read-only disk, damaged): every count missing = recently used
        return {}


def counted(
    counts: dict[str, int],
    keys: Sequence[str],
    since: str | None,
    today: dt.date,
    min_age_days: int,
) -> dict[str, int]:
    """``counts`` with each key the index has no row for counted as 0 once the index has
    counted accesses (``since``, ISO) for at least ``min_age_days``: a memory no search
    returned in all that time is old and unused. A shorter or unknown history leaves it out
    (read as recently used: a fresh index, another machine)."""
    history = _age(since, today)
    if history is None or history < min_age_days:
        return counts
    return {key: counts.get(key, 0) for key in keys}


def _age(created: str | None, today: dt.date) -> int | None:
    if not created:
        return None
    try:
        return (today - dt.date.fromisoformat(created[:10])).days
    except ValueError:
        return None


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _superseded(members: list[Entry]) -> tuple[tuple[str, str], ...]:
    """(older, newer) pairs where a newer member contradicts an older one."""
    from mdmem.distill.dedupe import conflicts

    ordered = sorted(members, key=lambda e: (e.created or "", e.start_line))
    out: list[tuple[str, str]] = []
    gone: set[str] = set()
    for i, old in enumerate(ordered):
        for new in reversed(ordered[i + 1 :]):
            if new.id not in gone and _dated_later(new, old) and conflicts(new.text, old.text):
                out.append((old.id, new.id))
                gone.add(old.id)
                break
    return tuple(out)


def _changed_since(
    picked: list[Entry], memories: list[Entry], embed: Embed, similarity: float
) -> list[Cluster]:
    """Candidates that a newer memory which is no candidate (recent, or often returned) changes:
    each is superseded by it, as in a cluster (the same conflict rule and similarity), but the
    newer one was never in a cluster, so an old value used to stay beside its new one until the
    threshold made both candidates. Hand-written or edited memories take no part."""
    from mdmem.distill.dedupe import conflict_keys, conflicts

    picked_ids = {e.id for e in picked}
    seen: dict[str, int] = {}
    for e in memories:
        seen[e.id] = seen.get(e.id, 0) + 1
    others = [
        e for e in memories if e.id not in picked_ids and seen[e.id] == 1 and not edited_by_hand(e)
    ]
    if not others:
        return []
    by_key: dict[tuple[str, str, object], list[Entry]] = {}
    for e in others:
        for key in conflict_keys(e.text):
            by_key.setdefault((e.path, e.type, key), []).append(e)
    pairs: list[tuple[Entry, Entry]] = []
    for old in picked:
        if edited_by_hand(old):
            continue
        near = {
            id(e): e
            for key in conflict_keys(old.text)
            for e in by_key.get((old.path, old.type, key), ())
        }
        newer = [e for e in near.values() if _dated_later(e, old)]
        changes = [e for e in newer if conflicts(e.text, old.text)]
        if changes:
            pairs.append((old, max(changes, key=_age_key)))  # the newest change wins
    if not pairs:
        return []
    vectors = _unit(embed([t for old, new in pairs for t in (old.text, new.text)]))
    out = []
    for n, (old, new) in enumerate(pairs):
        if float(vectors[2 * n] @ vectors[2 * n + 1]) < similarity:
            continue
        why = f"{new.id}, newer and no candidate, changes it"
        out.append(
            Cluster(
                old.path,
                old.type,
                (old.id, new.id),
                "superseded",
                why,
                superseded=((old.id, new.id),),
            )
        )
    return out


def _age_key(entry: Entry) -> tuple[str, int]:
    return (entry.created or "", entry.start_line)


def _dated_later(new: Entry, old: Entry) -> bool:
    """Only a memory dated after another may supersede it: two of one day (or undated) are
    two statements, not a change."""
    a, b = (new.created or "")[:10], (old.created or "")[:10]
    return bool(a and b) and a > b


def _checked(
    proposals: Sequence[Proposal],
    members: list[Entry],
    vectors: dict[str, np.ndarray],
    embed: Embed,
    threshold: float,
) -> list[Merged]:
    by_id = {e.id: e for e in members}
    merged_vectors = _unit(embed([p.text for p in proposals]))
    out = []
    for n, p in enumerate(proposals):
        sources = [by_id[i] for i in p.sources]
        sims = [float(merged_vectors[n] @ vectors[s.id]) for s in sources]
        fidelity = check(p.text, [s.text for s in sources], sims, threshold)
        out.append(Merged(new_id(), p.text, p.importance, p.sources, fidelity))
    # an original two passing merges both claim goes to the first only
    claimed: set[str] = set()
    final = []
    for m in out:
        if m.fidelity.passed:
            unclaimed = tuple(s for s in m.sources if s not in claimed)
            claimed |= set(unclaimed)
            m = replace(m, sources=unclaimed)
        final.append(m)
    return [m for m in final if m.sources]


def _file_edit(
    rel: str, todo: list[Cluster], by_id: dict[str, Entry], changed: list[Cluster]
) -> Callable[[str], str]:
    """The edit of one file (re-run on the file as it is now if a person saved meanwhile): the
    file is parsed a handful of times, not once per memory moved."""

    def edit(current: str) -> str:
        changed.clear()
        doc = parse_document(rel, current)
        now: dict[str, list[Entry]] = {}
        for e in doc.entries:
            now.setdefault(e.id, []).append(e)
        ready: list[Cluster] = []
        for cluster in todo:
            (ready if _unchanged(now, cluster, by_id) else changed).append(cluster)
        return _apply_all(current, rel, ready, by_id)

    return edit


def _unchanged(now: dict[str, list[Entry]], cluster: Cluster, by_id: dict[str, Entry]) -> bool:
    """Every original this cluster archives is still there once, active, with the same text."""
    wanted = {s for m in cluster.written for s in m.sources}
    wanted |= {i for pair in cluster.superseded for i in pair}
    for entry_id in wanted:
        found = now.get(entry_id, [])
        if len(found) != 1 or found[0].archived or found[0].text != by_id[entry_id].text:
            return False
    return True


def _apply_all(text: str, rel: str, clusters: list[Cluster], by_id: dict[str, Entry]) -> str:
    day = today()
    moves: dict[str, dict[str, object]] = {}  # id -> what its archived copy records
    for cluster in clusters:
        for old, new in cluster.superseded:
            earlier = edits.find_entry(parse_document(rel, text), new).meta.get("supersedes")
            both = f"{earlier},{old}" if earlier else old
            text = edits.rewrite_entry(text, rel, new, {"supersedes": both})
            moves[old] = {"superseded_by": new, "superseded": day}
        for merged in cluster.written:
            for source in merged.sources:
                moves[source] = {CONSOLIDATED_INTO: merged.id, CONSOLIDATED: day}
    if not moves:
        return text
    text, archived = _cut(text, rel, moves)
    sections: dict[tuple[str, str], list[str]] = {}
    newline = parse_document(rel, text).newline if text else "\n"
    for cluster in clusters:
        for merged in cluster.written:
            title = _section(by_id[merged.sources[0]], cluster.type)
            block = edits.render_item(merged.text, _merged_meta(merged, cluster, day), newline)
            sections.setdefault((cluster.type, title), []).append(block)
    for (type_, title), blocks in sections.items():
        text = edits.insert_entry(parse_document(rel, text), type_, title, "".join(blocks))
    return _to_archive(text, rel, archived)


def _merged_meta(merged: Merged, cluster: Cluster, day: str) -> dict[str, object]:
    return {
        "id": merged.id,
        "type": cluster.type,
        "importance": merged.importance,
        "created": day,
        "refines": ",".join(merged.sources),
        "fidelity": round(merged.fidelity.composite, 3),
        "emb_sim": round(merged.fidelity.emb_sim, 3),
        "kw_retention": round(merged.fidelity.kw_retention, 3),
        "sum": text_sum(merged.text),
    }


def _cut(text: str, rel: str, moves: dict[str, dict[str, object]]) -> tuple[str, list[str]]:
    """Remove the entries in ``moves`` from ``text``; returns the text and their archived
    copies (first line's metadata extended, list indentation removed), in file order."""
    doc = parse_document(rel, text)
    lines = doc.lines
    found = [e for e in doc.entries if e.id in moves and not e.archived]
    blocks = []
    for entry in found:
        block = [line.rstrip("\r\n") for line in lines[entry.start_line - 1 : entry.end_line]]
        meta = {**dict(entry.meta), "type": entry.type, **moves[entry.id]}
        block[0] = _with_meta(block[0], meta)
        if entry.kind == "item":
            indent = len(block[0]) - len(block[0].lstrip(" \t"))
            block = [line[min(indent, len(line) - len(line.lstrip(" \t"))) :] for line in block]
        blocks.append(doc.newline.join(block) + doc.newline)
    for entry in sorted(found, key=lambda e: e.start_line, reverse=True):
        del lines[entry.start_line - 1 : entry.end_line]
        at = entry.start_line - 1
        gap = 0 <= at < len(lines) and not lines[at].strip()
        if entry.kind == "paragraph" and gap and (at == 0 or not lines[at - 1].strip()):
            del lines[at]  # no two blank lines where a paragraph was
    return "".join(lines), blocks


def _with_meta(line: str, meta: dict[str, object]) -> str:
    comment = format_meta(meta)
    match = find_meta(line)
    if match:
        return line[: match.start()] + " " + comment + line[match.end() :]
    return line.rstrip() + " " + comment


def _to_archive(text: str, rel: str, blocks: list[str]) -> str:
    """Append the archived copies under ``## Archive`` (made at the end when missing)."""
    if not blocks:
        return text
    doc = parse_document(rel, text)
    block = "".join(blocks)
    if any(h.title.strip().lower() == ARCHIVE_TITLE.lower() for h in doc.headings):
        return edits.insert_entry(doc, "note", ARCHIVE_TITLE, block)
    newline = doc.newline
    if text and not text.endswith(("\n", "\r")):
        text += newline
    if text.strip() and split_lines(text)[-1].strip():
        text += newline
    return text + f"## {ARCHIVE_TITLE}{newline}{newline}" + block


def _section(entry: Entry, type_: str) -> str:
    if entry.heading_path and entry.heading_path[-1] and len(entry.heading_path) > 1:
        return entry.heading_path[-1]
    return SECTION_TITLES.get(type_, type_.title())


def _archive_many(text: str, rel: str, entries: list[Entry]) -> str:
    doc = parse_document(rel, text)
    current = {e.id: e for e in doc.entries if not e.archived}
    stamp: dict[str, object] = {ARCHIVED_BY: "importance", CONSOLIDATED: today()}
    # one changed or moved by a person meanwhile is left as it is
    moves = {e.id: stamp for e in entries if e.id in current and current[e.id].text == e.text}
    text, blocks = _cut(text, rel, moves)
    return _to_archive(text, rel, blocks)


def _after(
    memories: list[Entry], found: list[Cluster], count: Callable[[str], int]
) -> tuple[int, int]:
    gone = {s for c in found for m in c.written for s in m.sources}
    gone |= {old for c in found if c.active for old, _ in c.superseded}
    kept = [e for e in memories if e.id not in gone]
    added = [m.text for c in found for m in c.written]
    return len(kept) + len(added), sum(count(e.text) for e in kept) + sum(count(t) for t in added)


SUGGESTED_IDS = 8
"""A suggestion names this many ids (the report's cluster lists them all)."""


def _suggestion(cluster: Cluster) -> str:
    names = ", ".join(cluster.protected[:SUGGESTED_IDS])
    if len(cluster.protected) > SUGGESTED_IDS:
        names += f" and {len(cluster.protected) - SUGGESTED_IDS} more"
    if len(cluster.protected) == len(cluster.members):
        return (
            f"{cluster.path}: {names} (written or edited by a person) look alike: merge them "
            "by hand if they say the same"
        )
    return (
        f"{cluster.path}: {names} (written or edited by a person) resemble "
        f"{len(cluster.members) - len(cluster.protected)} other memories of type {cluster.type}: "
        "merge them by hand if they say the same"
    )
