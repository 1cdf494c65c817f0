"""Merging a cluster of similar memories into one to three: extractive (offline, deterministic)
or by a model (litellm, temperature 0, JSON, one repair retry). Both only propose; the fidelity
check (:mod:`mdmem.distill.fidelity`) decides what is written."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mdmem.config import LLMConfig
from mdmem.distill.extract import parse_json_object
from mdmem.distill.fidelity import facts, keywords, lower_words, token_set
from mdmem.distill.rules import content_words
from mdmem.markdown.entries import Entry
from mdmem.text import one_line

MAX_MERGED_CHARS = 1000
"""A merged memory longer than this is split (at most 3 memories per cluster)."""
MAX_MERGES = 3
CONTENT_GAIN = 0.25
"""An original whose facts and keywords are all said already still goes in when it adds this
share of its content words (and at least 2)."""


@dataclass(frozen=True)
class Proposal:
    """One merged memory a cluster would become, before its fidelity check."""

    text: str
    importance: float
    sources: tuple[str, ...]
    """Ids of the originals it replaces."""


@dataclass(frozen=True)
class MergeResult:
    proposals: tuple[Proposal, ...]
    problems: tuple[str, ...] = ()
    cost: float | None = None


def merge_offline(members: Sequence[Entry]) -> MergeResult:
    """Per fact (:func:`same_fact` groups), the fewest originals that together say every fact,
    keyword and most words of it, joined in time order; originals they make redundant are
    their sources too. Originals of different facts ("job 7 …", "job 27 …") are never joined:
    one memory listing three jobs is no consolidation, and hides each from a precise search."""
    proposals: list[Proposal] = []
    for group in same_fact(members):
        if len(group) > 1:
            proposals += _merge_one(group)
    return MergeResult(tuple(proposals))


def same_fact(members: Sequence[Entry]) -> list[list[Entry]]:
    """The members grouped by fact: by their distinguishing tokens (numbers, names, ids:
    :func:`~mdmem.distill.fidelity.distinguishing`), but words capitalised only to start a
    sentence (stopwords, generic words, words another member writes in lower case). A member
    joins the first group (most tokens first) whose tokens include all of its own: two
    paraphrases of one fact, or a fact and a more precise one, go together; "job 7 …" and
    "job 27 …", whose tokens neither includes, never do."""
    common = lower_words([e.text for e in members])
    signed = sorted(
        ((_signature(e.text, common), e) for e in sorted(members, key=_age_key)),
        key=lambda pair: -len(pair[0]),
    )
    heads: list[frozenset[str]] = []
    groups: list[list[Entry]] = []
    for signature, entry in signed:
        n = next((n for n, head in enumerate(heads) if signature <= head), None)
        if n is None:
            heads.append(signature)
            groups.append([entry])
        else:
            groups[n].append(entry)
    return [sorted(g, key=_age_key) for g in groups]


def _signature(text: str, common: frozenset[str]) -> frozenset[str]:
    from mdmem.distill.fidelity import GENERIC, distinguishing
    from mdmem.distill.rules import STOPWORDS

    plain = STOPWORDS | GENERIC | common  # (a word only capitalised: "Production")
    return frozenset(
        t
        for t in distinguishing(text)
        if t not in plain or any(c.isdigit() or c in "-_." for c in t)
    )


def _merge_one(members: Sequence[Entry]) -> list[Proposal]:
    ordered = sorted(members, key=_age_key)
    common = lower_words([e.text for e in ordered])
    units = {e.id: _units(e.text, common) for e in ordered}
    chosen: list[Entry] = []
    covered: set[str] = set()
    remaining = list(reversed(ordered))  # newest first breaks ties
    while remaining:
        best = max(remaining, key=lambda e: _gain(units[e.id], covered))
        if chosen and not _worth(units[best.id], covered):
            break
        chosen.append(best)
        # a distinguishing token is said by any chosen text holding the word ("deploys")
        covered |= units[best.id] | {"token " + w for w in token_set(best.text)}
        remaining.remove(best)
    chosen.sort(key=_age_key)
    groups = _groups(chosen)[:MAX_MERGES]  # the rest stays, for the next run
    importance = max(e.importance for e in members)
    proposals = [Proposal(_join([e.text for e in group]), importance, ()) for group in groups]
    redundant = [e for e in ordered if e not in chosen]
    merged = _assign(proposals, groups, redundant)
    # a memory that would only be rewritten as itself is no merge
    return [p for p, g in zip(merged, groups, strict=True) if len(p.sources) > 1 or len(g) > 1]


def _age_key(entry: Entry) -> tuple[str, str, int]:
    return (entry.created or "", entry.path, entry.start_line)


def _units(text: str, common: frozenset[str]) -> set[str]:
    words = {"w " + (w[:-1] if len(w) > 3 and w.endswith("s") else w) for w in content_words(text)}
    return {"k " + k for k in keywords(text, common)} | facts(text, common) | words


def _gain(units: set[str], covered: set[str]) -> tuple[int, int]:
    new = units - covered
    return (sum(not u.startswith("w ") for u in new), len(new))


def _worth(units: set[str], covered: set[str]) -> bool:
    strong, new = _gain(units, covered)
    words = sum(u.startswith("w ") for u in units)
    return strong > 0 or (new >= 2 and new >= CONTENT_GAIN * words)


def _groups(chosen: list[Entry]) -> list[list[Entry]]:
    groups: list[list[Entry]] = [[]]
    for entry in chosen:
        if groups[-1] and len(_join([e.text for e in [*groups[-1], entry]])) > MAX_MERGED_CHARS:
            groups.append([])
        groups[-1].append(entry)
    return groups


def _assign(
    proposals: list[Proposal], groups: list[list[Entry]], redundant: list[Entry]
) -> list[Proposal]:
    """Each redundant original goes to the first merged memory that keeps all its facts (none
    does: it is no source, and stays)."""
    from mdmem.distill.fidelity import lost

    sources = [[e.id for e in group] for group in groups]
    for entry in redundant:
        wanted = facts(entry.text)
        for n, proposal in enumerate(proposals):
            if not lost(proposal.text, wanted):
                sources[n].append(entry.id)
                break
    pairs = zip(proposals, sources, strict=True)
    return [Proposal(p.text, p.importance, tuple(ids)) for p, ids in pairs]


_ENDED = re.compile(r"(?:[!?…]|\.\.\.)[\"'”’)\]]*$|\.[\"'”’)\]]+$")
"""A clause that ends its own sentence (``great!``, ``wait…``, ``"ship it."``): it keeps its
mark and takes no ``;`` or ``.`` after it ("great!." read as a typo)."""


def _join(texts: list[str]) -> str:
    out = ""
    for part in filter(None, (_clause(t) for t in texts)):
        if out:
            out += " " if _ENDED.search(out) else "; "
        out += part
    return out if _ENDED.search(out) else out + "."


def _clause(text: str) -> str:
    """One original as a clause: a plain final full stop goes (a ``;`` or the merge's own
    ``.`` follows); ``!``, ``?``, ``…`` and ``...`` stay."""
    part = one_line(text).rstrip(" ;")
    return part if part.endswith("...") else part.rstrip(" .;")


MERGE_PROMPT = """\
You merge memories that overlap into as few memories as keep everything they say: 1 to 3.
Keep every name, number, date and identifier exactly as written: every word holding a digit,
a capital letter, or an inner -, _ or . (m3, eu-west-1, v2.4, Kafka) must appear.
Add nothing that is not in them. Where two memories disagree, keep the newer one's value (they
are listed oldest first).
Each merged memory is one explicit, checkable statement in the third person.
Reply with only a JSON object:
{"memories": [{"content": "...", "importance": 0.7, "source_memory_ids": ["m-..."]}]}
source_memory_ids: the ids of the memories each merged memory replaces.
"""
REPAIR = 'Reply with only the JSON object {"memories": [...]} as described, nothing else.'


def merge_llm(members: Sequence[Entry], config: LLMConfig, **llm_kwargs: Any) -> MergeResult:
    """One JSON call; an unusable reply gets one repair retry (the reply and what is wrong go
    back to the model). Still unusable: no proposals, and the problem is reported."""
    from mdmem.distill.llm import complete

    ordered = sorted(members, key=_age_key)
    listing = "\n".join(f"- [{e.id}] ({e.created or 'undated'}) {e.text}" for e in ordered)
    prompt: list[dict[str, str]] = [
        {"role": "system", "content": MERGE_PROMPT},
        {"role": "user", "content": f"Memories of type {ordered[0].type}:\n{listing}"},
    ]
    ids = {e.id for e in members}
    problems: list[str] = []
    cost = 0.0
    for attempt in (1, 2):
        reply = complete(prompt, config, json=True, **llm_kwargs)
        cost += reply.cost or 0.0
        proposals, error = parse_merges(reply.text, ids)
        if error is None:
            return MergeResult(tuple(proposals), tuple(problems), cost or None)
        problems.append(f"reply {attempt}: {error}")
        prompt += [
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": f"That reply is not usable: {error}. {REPAIR}"},
        ]
    return MergeResult((), tuple(problems), cost or None)


def parse_merges(text: str, ids: set[str]) -> tuple[list[Proposal], str | None]:
    """The merged memories of a reply (``{"memories": [...]}`` or a bare list), or what is
    wrong with it."""
    items: Any
    if re.match(r"\s*(?:```(?:json)?\s*)?\[", text):
        try:
            items = json.loads(re.sub(r"^\s*```(?:json)?|```\s*$", "", text.strip()))
        except json.JSONDecodeError as exc:
            return [], f"invalid JSON: {exc.msg}"
    else:
        data, error = parse_json_object(text)
        if error is not None:
            return [], error
        items = data.get("memories")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_MERGES:
        return [], f'"memories" must be a list of 1 to {MAX_MERGES} objects'
    out = []
    for n, item in enumerate(items):
        problem = _item_problem(item, ids)
        if problem:
            return [], f"memory {n}: {problem}"
        sources = tuple(dict.fromkeys(item["source_memory_ids"]))
        importance = round(min(1.0, max(0.0, float(item.get("importance", 0.5)))), 2)
        out.append(Proposal(one_line(item["content"]), importance, sources))
    return out, None


def _item_problem(item: Any, ids: set[str]) -> str | None:
    if not isinstance(item, dict):
        return "not an object"
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        return "no content"
    if "<!--" in content or "-->" in content:
        return "content holds an HTML comment marker"
    importance = item.get("importance", 0.5)
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        return f"importance {importance!r} is not a number"
    sources = item.get("source_memory_ids")
    if not isinstance(sources, list) or not sources:
        return "no source_memory_ids"
    unknown = [s for s in sources if s not in ids]
    if unknown:
        return f"source_memory_ids {unknown!r} are not memories of this cluster"
    return None
