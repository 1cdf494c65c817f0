"""Whether each extracted memory is new, a repeat, or a change to something already
remembered — and, for a new one, which section it belongs under."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mdmem.config import LLMConfig
from mdmem.distill.extract import Action, Candidate, Decision, parse_json_object, text_hash
from mdmem.distill.fidelity import distinguishing, token_set
from mdmem.distill.rules import content_words
from mdmem.distill.slots import changed_slot, slot_keys
from mdmem.markdown.entries import Entry
from mdmem.markdown.parse import Document
from mdmem.text import one_line

_NEGATION = re.compile(
    r"\b(?:not|no|never|no longer|don't|doesn't|didn't|isn't|aren't|won't|stopped|quit|"
    r"dropped|instead of|rather than)\b",
    re.I,
)
_IS = re.compile(
    r"^(?P<subject>.+?)\s(?:is|are|=|:|uses|use|goes to|go to|runs on)\s(?P<value>.+)$", re.I
)

RESOLVE_PROMPT = """\
Two memories are about the same thing. The EXISTING one is in the user's memory file; the NEW
one was just learned. Decide:
- "skip": NEW says nothing EXISTING does not already say
- "replace": NEW contradicts or updates EXISTING (EXISTING is now wrong or outdated)
- "merge": both hold and belong in one memory; give the merged text
- "keep_both": both hold and are different memories
Reply with only JSON: {"action": "skip|replace|merge|keep_both", "text": "merged text, for
merge only", "reason": "a few words"}
"""


def decide(
    candidates: Sequence[Candidate],
    existing: Sequence[Entry],
    *,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    threshold: float = 0.95,
    llm: LLMConfig | None = None,
    **llm_kwargs: Any,
) -> list[Decision]:
    """Decide what to do with each candidate, in order.

    1. Same normalized text (case, punctuation, spacing ignored) as a non-archived memory or
       an earlier candidate → skip.
    2. With ``embed`` (rows L2-normalized): cosine ≥ ``threshold`` with a non-archived memory →
       resolved by the model when ``llm`` has a model (one small JSON call per pair; a bad
       reply falls back to the rules), else by :func:`resolve_offline`. Cosine ≥ ``threshold``
       with an earlier candidate of the batch → skip.
    3. Otherwise → add.
    """
    active = [e for e in existing if not e.archived]
    by_hash = {text_hash(e.text): e for e in active}
    vectors, entry_vectors = _vectors(candidates, active, embed)
    decisions: list[Decision] = []
    accepted: list[int] = []  # candidates added so far (their rows in ``vectors``)
    seen: set[str] = set()
    for n, candidate in enumerate(candidates):
        key = text_hash(candidate.text)
        if key in by_hash:
            entry = by_hash[key]
            decisions.append(_decide("skip", candidate, entry, f"same text as {entry.id}"))
            continue
        if key in seen:
            decisions.append(_decide("skip", candidate, None, "same text as an earlier candidate"))
            continue
        seen.add(key)
        decision = _by_similarity(candidate, n, vectors, entry_vectors, active, accepted, threshold)
        if decision is None and (old := _conflicting(candidate, n, vectors, entry_vectors, active)):
            # a changed value is rarely similar enough to count as a duplicate: look for it
            why = f"same subject as {old.id}, different value"
            decision = _decide("skip", candidate, old, why)
        if decision is None:
            decisions.append(_decide("add", candidate, None, "new"))
            accepted.append(n)
            continue
        if decision.existing is not None:
            decision = _resolve(candidate, decision.existing, decision.reason, llm, llm_kwargs)
        decisions.append(decision)
        if decision.action in ("add", "keep_both", "replace", "merge"):
            accepted.append(n)
    return decisions


def _vectors(
    candidates: Sequence[Candidate],
    active: list[Entry],
    embed: Callable[[list[str]], np.ndarray] | None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    if embed is None or not candidates:
        return None, None
    cand = np.asarray(embed([c.text for c in candidates]), dtype=np.float32)
    entries = np.asarray(embed([e.text for e in active]), dtype=np.float32) if active else None
    return cand, entries


def _by_similarity(
    candidate: Candidate,
    n: int,
    vectors: np.ndarray | None,
    entry_vectors: np.ndarray | None,
    active: list[Entry],
    accepted: list[int],
    threshold: float,
) -> Decision | None:
    if vectors is None:
        return None
    if entry_vectors is not None and len(active):
        sims = entry_vectors @ vectors[n]
        best = int(np.argmax(sims))
        if float(sims[best]) >= threshold:
            reason = f"similar to {active[best].id} (cosine {float(sims[best]):.3f})"
            return _decide("skip", candidate, active[best], reason)
    if accepted:
        sims = vectors[accepted] @ vectors[n]
        best = int(np.argmax(sims))
        if float(sims[best]) >= threshold:
            reason = f"near-duplicate of an earlier candidate (cosine {float(sims[best]):.3f})"
            return _decide("skip", candidate, None, reason)
    return None


CONFLICT_SIMILARITY = 0.6
"""A same-subject, different-value pair must still be at least this similar (cosine) when
embeddings are on: a guard against two unrelated statements that share a subject."""


def _conflicting(
    candidate: Candidate,
    n: int,
    vectors: np.ndarray | None,
    entry_vectors: np.ndarray | None,
    active: list[Entry],
) -> Entry | None:
    """An existing memory the candidate updates: the same words but one value slot
    (:func:`changed_slot`: "port 5433" / "port 6543", "editor is Vim" / "… is Zed"), about a
    specific subject (two or more content words, or a number)."""
    for m, entry in enumerate(active):
        if entry.type != candidate.type or not _different_value(candidate.text, entry.text):
            continue
        subject = _IS.match(candidate.text.strip())
        broad = subject is not None and len(content_words(subject.group("subject"))) < 2
        if broad and not re.search(r"\d", candidate.text):
            continue  # "John is …" vs "John is …": too broad to call a conflict
        if vectors is not None and entry_vectors is not None:
            unrelated = float(entry_vectors[m] @ vectors[n]) < CONFLICT_SIMILARITY
            if unrelated:
                continue
        return entry
    return None


def _resolve(
    candidate: Candidate,
    entry: Entry,
    why: str,
    llm: LLMConfig | None,
    llm_kwargs: dict[str, Any],
) -> Decision:
    if llm is not None and llm.model:
        decision, problem = resolve_llm(candidate, entry, llm, **llm_kwargs)
        if decision is not None:
            found = Decision(
                decision.action, candidate, entry, decision.text, f"{why}; {decision.reason}"
            )
            return kept_facts(found)
        fallback = resolve_offline(candidate, entry)
        return kept_facts(
            Decision(
                fallback.action,
                candidate,
                entry,
                fallback.text,
                f"{why}; model reply unusable ({problem}); rule: {fallback.reason}",
            )
        )
    decision = resolve_offline(candidate, entry)
    return kept_facts(
        Decision(decision.action, candidate, entry, decision.text, f"{why}; {decision.reason}")
    )


def kept_facts(decision: Decision) -> Decision:
    """A replace or merge archives the existing memory behind the new text: allowed only when
    that text holds each of its distinguishing tokens (:func:`distinguishing`), but, for a
    replace, those of the one value slot it changes. Else both stay: a model's "replace" of
    "job 7 …" by "job 27 …" hides a job."""
    old = decision.existing
    if old is None or decision.action not in ("replace", "merge"):
        return decision
    missing = distinguishing(old.text) - token_set(decision.text)
    slot = changed_slot(decision.text, old.text) if decision.action == "replace" else None
    if slot is not None:
        missing -= set(slot.old.split())
    if not missing:
        return decision
    why = f"{decision.reason}; but it would hide {', '.join(sorted(missing)[:5])}: both kept"
    return Decision("keep_both", decision.candidate, old, decision.candidate.text, why)


def resolve_offline(candidate: Candidate, entry: Entry) -> Decision:
    """Rules for a candidate that is very similar to an existing memory:

    - one is negated and the other not ("uses X" / "no longer uses X") → replace: the
      newer statement wins, the old one is archived with a pointer;
    - the candidate says everything the memory says and more → merge (the candidate's text);
    - the memory says everything the candidate says → skip;
    - the same words but one value slot ("target is Heroku" / "target is Fly.io", "port
      5432" / "port 5433"; never a number naming the subject, "job 7" / "job 27") → replace;
    - otherwise (a paraphrase) → skip.
    """
    new, old = candidate.text, entry.text
    if bool(_NEGATION.search(new)) != bool(_NEGATION.search(old)):
        return _decide("replace", candidate, entry, "contradicts it (negation)")
    new_words, old_words = content_words(new), content_words(old)
    if old_words < new_words:
        return _decide("merge", candidate, entry, "says it and more", text=new)
    if new_words <= old_words:
        return _decide("skip", candidate, entry, "already remembered")
    if _different_value(new, old):
        return _decide("replace", candidate, entry, "same subject, different value")
    return _decide("skip", candidate, entry, "already remembered (paraphrase)")


def _different_value(new: str, old: str) -> bool:
    """Whether ``new`` changes exactly one value of ``old`` (:mod:`mdmem.distill.slots`): the
    rest matches, and no number that names the subject ("job 27", "module m3") differs."""
    return changed_slot(new, old) is not None


def resolve_llm(
    candidate: Candidate, entry: Entry, config: LLMConfig, **llm_kwargs: Any
) -> tuple[Decision | None, str | None]:
    """Ask the model how a candidate relates to a similar memory: (decision, None), or
    (None, problem) when the reply is unusable (the caller falls back to the rules)."""
    from mdmem.distill.llm import complete

    prompt = [
        {"role": "system", "content": RESOLVE_PROMPT},
        {"role": "user", "content": f"EXISTING: {entry.text}\nNEW: {candidate.text}"},
    ]
    reply = complete(prompt, config, json=True, **llm_kwargs)
    data, error = parse_json_object(reply.text)
    if error is not None:
        return None, error
    action = data.get("action")
    if action not in ("skip", "replace", "merge", "keep_both"):
        return None, f"action {action!r} is not skip, replace, merge or keep_both"
    text = data.get("text") if action == "merge" else candidate.text
    if not isinstance(text, str) or not text.strip():
        return None, "merge without a merged text"
    reason = str(data.get("reason") or action)[:200]
    return _decide(action, candidate, entry, f"model: {reason}", text=one_line(text)), None


def _decide(
    action: Action,
    candidate: Candidate,
    entry: Entry | None,
    reason: str,
    text: str | None = None,
) -> Decision:
    return Decision(action, candidate, entry, text if text is not None else candidate.text, reason)


def choose_section(doc: Document, text: str, type_: str) -> str | None:
    """The existing section a new memory belongs under, when the file is organised by topic
    (``## Testing``, ``## CI`` …) rather than by type: the one whose title and entries share
    the most words with it (at least three points; a title word counts double). None: use
    the section for its type (``## Skills`` …)."""
    from mdmem.markdown.entries import ARCHIVE_TITLE, type_from_heading

    if any(h.level > 1 and type_from_heading(h.title) == type_ for h in doc.headings):
        return None
    words = content_words(text)
    best, best_score = None, 2
    for heading in doc.headings:
        if heading.level < 2 or heading.title.strip().lower() == ARCHIVE_TITLE.lower():
            continue
        title = content_words(heading.title)
        body: set[str] = set()
        for entry in doc.entries:
            if entry.heading_path[-1:] == (heading.title,) and not entry.archived:
                body |= content_words(entry.text)
        score = 2 * len(words & title) + len(words & body)
        if score > best_score:
            best, best_score = heading.title, score
    return best


def conflicts(new: str, old: str) -> bool:
    """Whether ``new`` changes what ``old`` says (the newer is kept, the older superseded): two
    short statements that differ in exactly one value slot (:func:`changed_slot`: "the staging
    port is 5432" / "… 6543"; never "job 7 …" / "job 27 …", nor two slots), or the same words
    negated. Narrative memories, longer than :data:`CONFLICT_WORDS`, never conflict."""
    if max(len(new.split()), len(old.split())) > CONFLICT_WORDS:
        return False
    if _different_value(new, old):
        return True
    if bool(_NEGATION.search(new)) == bool(_NEGATION.search(old)):
        return False
    plain = lambda text: content_words(_NEGATION.sub(" ", text))  # noqa: E731
    return plain(new) == plain(old)


CONFLICT_WORDS = 20
"""Longer memories are told, not stated: they are merged, never superseded by one another."""


def conflict_keys(text: str) -> frozenset[tuple[str, object]]:
    """Keys two texts :func:`conflicts` says change one another always share one of: the words
    around each possible value slot (:func:`slot_keys`), the words but negations. Finds the
    pairs to check among thousands of memories by lookup, not by comparing every pair."""
    if len(text.split()) > CONFLICT_WORDS:
        return frozenset()
    keys: set[tuple[str, object]] = {("slot", key) for key in slot_keys(text)}
    keys.add(("plain", content_words(_NEGATION.sub(" ", text))))
    return frozenset(keys)
