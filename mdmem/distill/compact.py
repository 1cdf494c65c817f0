"""Compaction: a long conversation becomes a short memory of the current state and key events.

Compaction is an act of attention. Every piece of the conversation is weighed by one rubric
(highest first): errors and their fixes 10, files created or changed 8, test results and
verification 7, key decisions and findings 6, state changes 5, ordinary thinking 2. Pieces
scoring at least :data:`KEEP` become key events; state changes feed the ``## State`` section.
Recent pieces keep more detail, older ones only their first clause; repeated content keeps only
its latest version; an error pulls its cause, fix and result into one event, in time order.

Two engines produce the same :class:`CompactMemory`: :func:`compact_offline` (rules,
deterministic, no network) and :func:`compact_llm` (one litellm call). The format is
:mod:`mdmem.memory.compact_memory`'s.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from mdmem.config import LLMConfig
from mdmem.distill.rules import (
    DATE,
    REQUEST,
    Piece,
    chain_from,
    jaccard,
    slot_of,
    split_pieces,
    stem_set,
    third_person,
    without_instruction,
    word_set,
)
from mdmem.distill.transcript import Source, load_messages
from mdmem.memory.compact_memory import CompactMemory, KeyEvent, read_memory
from mdmem.tokens import count_message_tokens, estimate_tokens

if TYPE_CHECKING:  # mdmem.distill.llm is imported when the LLM engine runs
    from mdmem.distill.llm import LLMReply

KEEP = 6.0
"""Pieces scoring at least this become key events."""
RECENT_SHARE = 0.3
"""The newest share of the conversation keeps full detail; older pieces keep a first clause."""
MAX_STATE = 8
SIMILAR = 0.7
"""Two pieces whose normalized words overlap this much (Jaccard) are repeats."""
RESTATED = 0.6
"""Prose whose content words are this much inside nearby event-stream events restates them."""
RESTATE_WINDOW = 40


def merge(previous: CompactMemory | None, new: CompactMemory) -> CompactMemory:
    """Fold an earlier compact memory into a newer one, losing nothing that still holds.

    Events: all kept in time order, except an old event that a newer one repeats or contains
    (the newer version wins). State: the newer state first; an old state line stays unless a
    newer line is about the same thing (same slot, e.g. tests or CI) or repeats it.
    """
    if not previous:
        return new
    events = [*previous.events, *new.events]
    kept: list[KeyEvent] = []
    for n, event in enumerate(events):
        later = events[n + 1 :]
        if any(_superseded(event.text, other.text) for other in later):
            continue
        kept.append(event)
    state = list(new.state)
    for line in previous.state:
        slot = slot_of(line)
        if slot and any(slot_of(s) == slot for s in new.state):
            continue
        if any(_superseded(line, s) for s in new.state):
            continue
        state.append(line)
    return CompactMemory(state=tuple(state[:MAX_STATE]), events=_time_ordered(kept))


def _superseded(old: str, new: str) -> bool:
    a, b = word_set(old), word_set(new)
    if not a or not b:
        return old.strip() == new.strip()
    return jaccard(a, b) >= SIMILAR or (len(a) >= 3 and len(a & b) / len(a) >= 0.9)


def _time_ordered(events: Iterable[KeyEvent]) -> tuple[KeyEvent, ...]:
    """Stable sort by date; an undated event stays after the dated one before it."""
    keyed: list[tuple[str, int, KeyEvent]] = []
    last = ""
    for n, event in enumerate(events):
        last = event.date or last
        keyed.append((last, n, event))
    return tuple(e for _, _, e in sorted(keyed, key=lambda k: (k[0], k[1])))


# ---- the offline engine ----------------------------------------------------------------------


_RESOLVED = re.compile(
    r"\b(?:fix(?:ed|es)|solved|resolved|works now|now works|now passes|is green)\b", re.I
)


def compact_offline(
    messages: Source,
    *,
    previous: CompactMemory | None = None,
    now: str | dt.date | None = None,
    budget_tokens: int | None = None,
    count: Callable[[str], int] = estimate_tokens,
) -> CompactMemory:
    """Compact by rules: classify, score, dedupe, chain, compress, keep time order.

    Deterministic: the same messages give the same memory. ``now`` dates pieces that carry no
    date of their own (messages may carry one in a ``timestamp``/``date`` key or a leading
    ``YYYY-MM-DD``). ``budget_tokens`` caps the events (highest decayed score first, then back
    into time order); without it every piece scoring :data:`KEEP` or more is kept.
    """
    pieces = split_pieces(load_messages(messages), default_date=_date_text(now))
    events = _events(pieces)
    if budget_tokens is not None:
        events = _within_budget(events, budget_tokens, count)
    memory = CompactMemory(state=tuple(_state(pieces)), events=tuple(k.event for k in events))
    return merge(previous, memory)


# ---- events ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kept:
    """A candidate key event with what ranking and dedupe need."""

    position: int
    score: float
    """Rubric score minus up to 1 for age (the oldest piece loses 1)."""
    event: KeyEvent
    stream: bool
    """From an event stream (``[action]`` tags) rather than prose."""
    message: int = -1
    """The message it came from; -1 for an error chain (never joined with others)."""


def _events(pieces: list[Piece]) -> list[_Kept]:
    """Pieces worth keeping, repeats dropped, each error joined with its fix and result."""
    used: set[int] = set()
    found: list[_Kept] = []
    total = max(1, len(pieces))
    for n, piece in enumerate(pieces):
        if n in used or (piece.score < KEEP and not _elaborates(pieces, n, found)):
            continue
        recent = n >= total * (1 - RECENT_SHARE)
        if piece.kind == "error":
            chain = chain_from(pieces, n, used)
            used.update(chain)
            tag, text = _chain_text([pieces[i] for i in chain], recent)
        else:
            tag, text = piece.kind, _detail(_neutral(piece), recent)
            if piece.speaker:
                text = f"{piece.speaker}: {text}"
        score = piece.score - (1 - n / total)
        message = -1 if piece.kind == "error" else piece.message
        found.append(_Kept(n, score, KeyEvent(piece.date, tag, text), bool(piece.action), message))
    return _drop_restated(_dedupe(_join_sentences(found)))


def _elaborates(pieces: list[Piece], n: int, found: list[_Kept]) -> bool:
    """In chat, a statement right after a kept fact of the same turn says more about it
    ("I went to a support group yesterday. The stories were so inspiring.")."""
    piece = pieces[n]
    if not piece.speaker or piece.kind not in ("remark", "thinking") or n == 0:
        return False
    before = pieces[n - 1]
    return (
        bool(found)
        and found[-1].position == n - 1
        and before.message == piece.message
        and not piece.text.rstrip().endswith("?")
    )


def _join_sentences(found: list[_Kept]) -> list[_Kept]:
    """Kept sentences of one message are one event (tag of the best one), as said."""
    out: list[_Kept] = []
    for kept in found:
        last = out[-1] if out else None
        if last is None or kept.message < 0 or kept.message != last.message:
            out.append(kept)
            continue
        best = last if last.score >= kept.score else kept
        text = kept.event.text
        if kept.event.text.startswith(prefix := _speaker_prefix(kept.event.text)):
            text = text[len(prefix) :]
        event = KeyEvent(last.event.date, best.event.tag, f"{last.event.text} {text}")
        out[-1] = replace(last, score=best.score, event=event)
    return out


def _speaker_prefix(text: str) -> str:
    match = re.match(r"^[^:\s]{1,40}: ", text)
    return match.group(0) if match else ""


def _chain_text(chain: list[Piece], recent: bool) -> tuple[str, str]:
    errors = [p for p in chain if p.kind == "error"]
    rest = chain[len(errors) :]
    text = "; ".join(_detail(p.text, recent) for p in errors)
    if errors[0].speaker:
        text = f"{errors[0].speaker}: {text}"
    fix_at = next((i for i, p in enumerate(rest) if p.kind in ("file", "fix", "action")), None)
    if fix_at is None:
        return "error", text
    cause, fix, after = rest[:fix_at], rest[fix_at], rest[fix_at + 1 :]
    if cause and recent:
        text += f"; cause: {_detail(cause[0].text, recent)}"
    text += f"; fixed: {_detail(fix.text, recent)}"
    if after:
        text += f" → {_detail(after[0].text, recent)}"
    return "error→fix", text


def _dedupe(found: list[_Kept]) -> list[_Kept]:
    """Repeated content keeps only its latest version (numbers ignored: '6 passed' and
    '19 passed' are the same kind of news)."""
    words = [word_set(k.event.text, numbers=False) for k in found]
    return [
        kept
        for n, kept in enumerate(found)
        if not any(
            words[n] and jaccard(words[n], words[m]) >= SIMILAR for m in range(n + 1, len(found))
        )
    ]


def _drop_restated(found: list[_Kept]) -> list[_Kept]:
    """Prose that only restates kept events (a final summary of the same session) goes: its
    content words are mostly in stream events nearby."""
    out = []
    for kept in found:
        if not kept.stream:
            near = [
                k for k in found if k.stream and abs(k.position - kept.position) <= RESTATE_WINDOW
            ]
            pool = frozenset().union(*(word_set(k.event.text) for k in near)) if near else None
            words = word_set(kept.event.text)
            if pool and words and len(words & pool) / len(words) >= RESTATED:
                continue
        out.append(kept)
    return out


def _within_budget(events: list[_Kept], budget: int, count: Callable[[str], int]) -> list[_Kept]:
    """The best events (decayed score, newer first on ties) that fit, back in time order."""
    chosen, used = [], 0
    for kept in sorted(events, key=lambda k: (-k.score, -k.position)):
        cost = count(kept.event.render()) + 1
        if used + cost <= budget:
            chosen.append(kept)
            used += cost
    return sorted(chosen, key=lambda k: k.position)


# ---- state -----------------------------------------------------------------------------------

STATE_KINDS = frozenset({"test", "state", "decision", "fix", "error", "plan", "fact", "file"})
STATE_ORDER = ("tests", "ci", "vcs", "deploy", "next")


def _state(pieces: list[Piece]) -> list[str]:
    """The current state: the latest request, an error left unresolved at the end, and the
    latest word on each subject (tests, CI, commits, deploys, next step; in chat, each
    speaker's latest plan)."""
    latest: dict[str, Piece] = {}
    for piece in pieces:
        if piece.slot and piece.kind in STATE_KINDS:
            if piece.slot == "tests" and piece.kind not in ("test", "error"):
                continue
            latest[piece.slot] = piece
    last_date = max((p.date for p in pieces if p.date), default=None)
    if (step := latest.get("next")) and step.date != last_date:
        del latest["next"]  # a next step from an earlier day has likely been taken since
    lines: list[str] = []
    if task := _task(pieces):
        lines.append(f"Task: {_detail(task, True)}")
    if open_error := _open_error(pieces):
        lines.append(f"Unresolved: {_detail(open_error.text, True)}")
    slots = [*STATE_ORDER, *sorted(k for k in latest if k.startswith("plan:"))]
    chosen = sorted((latest[s] for s in slots if s in latest), key=lambda p: p.index)
    said: list[str] = []
    for piece in chosen:
        text = _detail(_neutral(piece), True)
        if piece.speaker:
            text = f"{piece.speaker}: {text}"
        if not any(_superseded(text, line) for line in lines):
            said.append(text)
    # an older line whose news a later, fuller line repeats ("19 passed in 5.12s", then
    # "Done and pushed: ..., 19 pass locally") goes
    for n, text in enumerate(said):
        news = stem_set(text, volatile=False)
        later = [stem_set(t, volatile=False) for t in said[n + 1 :]]
        if len(news) >= 2 and any(news <= other for other in later):
            continue
        lines.append(text)
    return lines[:MAX_STATE]


def _neutral(piece: Piece) -> str:
    """A user's own words in a tool-style conversation, about "the user" instead of "I"."""
    if piece.role != "user" or piece.speaker or piece.action:
        return piece.text

    text = third_person(without_instruction(piece.text), "User")
    return re.sub(r"\b(?<!^)The team\b", "the team", text)


def _task(pieces: list[Piece]) -> str | None:
    """The latest request a user made (first sentence), in tool-style conversations."""
    requests = [
        p
        for p in pieces
        if p.role == "user" and p.speaker is None and not p.action and REQUEST.match(p.text)
    ]
    return requests[-1].text if requests else None


def _open_error(pieces: list[Piece]) -> Piece | None:
    """The last error of the conversation's last fifth, when no fix came after it."""
    tail = pieces[int(len(pieces) * 0.8) :]
    errors = [n for n, p in enumerate(tail) if p.kind == "error"]
    if not errors:
        return None
    error = tail[errors[-1]]
    if not error.action and _RESOLVED.search(error.text):
        return None  # "The image needed two fixes: ..." tells of problems already solved
    later = tail[errors[-1] + 1 :]
    return None if any(p.kind in ("file", "fix") for p in later) else error


# ---- text helpers ----------------------------------------------------------------------------


def _detail(text: str, recent: bool) -> str:
    """Recent pieces keep their detail; older ones only their first clause."""
    limit = 300 if recent else 140
    if not recent:
        first = re.split(r"(?<=[.!?])\s+|;\s+", text, maxsplit=1)[0]
        if len(word_set(first)) >= 3:
            text = first
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


def _date_text(now: str | dt.date | None) -> str | None:
    if now is None:
        return None
    if isinstance(now, dt.date):
        return now.isoformat()[:10]
    match = DATE.match(now)
    return match.group(1) if match else None


# ---- the LLM engine --------------------------------------------------------------------------

SYSTEM_PROMPT = """\
You compress a long agent conversation into a short memory that the agent will read instead of
the conversation. Attention is the point: keep what the agent will need, drop the rest.

Weigh every piece of the conversation by this rubric (10 = most important):
- 10: errors and the fixes that solved them (keep the chain: cause, fix, result)
- 8: files created or changed (name the file and what changed)
- 7: test results and other verification (the latest result wins)
- 6: key decisions and findings (what was decided and why; facts learned about people)
- 5: state changes (branch, commit, deploy, status)
- 2: ordinary thinking, chatter, tool calls with no lasting result
Keep everything scoring 6 or more as a key event. Recent events keep their specifics (names,
numbers, paths, error messages); early discussion keeps only its conclusion. When something
happened several times, keep only the latest version. Keep time order. Never invent anything.

If a previous compact memory is given, merge it: keep its events unless the conversation
supersedes them, and update its state.

Reply with Markdown in exactly this format and nothing else:

# Compact Memory

## State
- one line per fact about the current state (task, progress, what is true now, next step)

## Key Events
- YYYY-MM-DD [tag] one line: what happened (tags: error→fix, error, file, test, decision,
  fact, state)
"""


def compact_llm(
    messages: Source,
    config: LLMConfig,
    *,
    previous: CompactMemory | None = None,
    **llm_kwargs: Any,
) -> tuple[CompactMemory, LLMReply]:
    """One model call over the whole transcript; the reply is parsed into a
    :class:`CompactMemory` and merged with ``previous`` (so nothing old is lost even if the
    model drops it). An unusable reply raises :class:`~mdmem.distill.llm.LLMError`."""
    from mdmem.distill.llm import LLMError, complete

    prompt = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": _llm_input(load_messages(messages), previous)},
    ]
    reply = complete(prompt, config, **llm_kwargs)
    memory = read_memory(_strip_fence(reply.text), level=None)
    if not memory or not re.search(r"^#{1,3}\s", _strip_fence(reply.text), re.M):
        start = reply.text.strip()[:200]
        raise LLMError(f"{config.model}: the reply is not a compact memory: {start!r}")
    return merge(previous, memory), reply


def _llm_input(messages: list[dict[str, str]], previous: CompactMemory | None) -> str:
    parts = []
    if previous:
        parts += ["Previous compact memory:", previous.render(), ""]
    parts.append("Conversation (oldest first):")
    for message in messages:
        who = message.get("name") or message["role"]
        when = f"{message['timestamp']} " if message.get("timestamp") else ""
        parts.append(f"{when}{who}: {message['content']}")
    return "\n".join(parts)


def _strip_fence(text: str) -> str:
    """The memory out of a reply that fenced it (models like to, often after a line of
    prose). A fence inside the memory itself (a command in a key event) is content: only a
    fenced block holding the memory's headings is unwrapped."""
    for opening in re.finditer(r"^(`{3,}|~{3,})[\w-]*[ \t]*$", text, re.M):
        # the fence that wraps the memory closes last (code blocks inside it close earlier)
        rest = text[opening.end() + 1 :]
        closings = list(re.finditer(rf"^{re.escape(opening.group(1))}[ \t]*$", rest, re.M))
        if closings and re.search(r"^#{1,3}\s", rest[: closings[-1].start()], re.M):
            return rest[: closings[-1].start()].rstrip("\n")
    return text


# ---- the dispatcher --------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactResult:
    """What compaction made, and what it saved and cost."""

    memory: CompactMemory
    engine: Literal["offline", "llm"]
    tokens_before: int
    tokens_after: int
    ratio: float
    """tokens_after / tokens_before (0 for an empty conversation)."""
    cost: float | None = None


def compact(
    messages: Source,
    *,
    llm: LLMConfig | None = None,
    offline: bool = False,
    previous: CompactMemory | None = None,
    count: Callable[[str], int] = estimate_tokens,
    **llm_kwargs: Any,
) -> CompactResult:
    """Compact with the LLM engine when a model is configured (and ``offline`` is false),
    else with the offline engine. Tokens are counted with ``count`` on the message contents
    and on the rendered memory."""
    loaded = load_messages(messages)
    before = sum(count(m["content"]) for m in loaded)
    cost: float | None = None
    if llm is not None and llm.model and not offline:
        memory, reply = compact_llm(loaded, llm, previous=previous, **llm_kwargs)
        engine: Literal["offline", "llm"] = "llm"
        cost = reply.cost
    else:
        memory = compact_offline(loaded, previous=previous)
        engine = "offline"
    after = count(memory.render())
    ratio = after / before if before else 0.0
    return CompactResult(memory, engine, before, after, round(ratio, 4), cost)


def should_compact(messages: Source, threshold: int = 70_000, model: str | None = None) -> bool:
    """True past ``threshold`` tokens, counted with the model's tokenizer (litellm, offline)
    when ``model`` is given, else with the estimate."""
    loaded = load_messages(messages)
    return count_message_tokens(loaded, model or None) > threshold
