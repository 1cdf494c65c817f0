"""Extraction: what a conversation taught, as typed, lasting memories — and whether each one is
new, a repeat, or a change to something already remembered.

Two engines produce :class:`Candidate` memories: :func:`extract_offline` (rules; precision
over recall) and :func:`extract_llm` (one JSON call, validated, one repair retry, never a crash
on a bad reply). :func:`plan` then decides, per candidate, against the existing memories:
add, skip, replace, merge or keep both. Writing the decisions to files is the workspace's job.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdmem.compact import Piece, error_fix_chains, split_pieces
from mdmem.config import LLMConfig
from mdmem.entries import MEMORY_TYPES, Entry
from mdmem.transcript import Source, load_messages

if TYPE_CHECKING:
    from mdmem.llm import LLMReply

Action = Literal["add", "skip", "replace", "merge", "keep_both"]
IMPORTANCE = {"preference": 0.7, "fact": 0.6, "pattern": 0.65, "skill": 0.75}
"""Default importance per type; an explicit "always"/"never"/"must" adds 0.1."""
MAX_TEXT = 400


@dataclass(frozen=True)
class Candidate:
    """A memory worth keeping, before deduplication."""

    type: str
    """One of :data:`mdmem.entries.MEMORY_TYPES`."""
    text: str
    """One independent, explicit, checkable statement (third person)."""
    importance: float
    evidence: str
    """What in the conversation it rests on (a quote), so a person can check it."""
    source: str | None = None
    """The session id it came from, when known."""


@dataclass(frozen=True)
class ExtractionResult:
    candidates: tuple[Candidate, ...]
    problems: tuple[str, ...] = ()
    """What went wrong with the model's reply (invalid JSON, bad items); empty when fine."""
    reply: LLMReply | None = None
    """The last reply (for cost and tokens)."""


@dataclass(frozen=True)
class Decision:
    """What to do with one candidate."""

    action: Action
    candidate: Candidate
    existing: Entry | None
    """The memory it repeats, replaces or merges with (None for add, and for a repeat of an
    earlier candidate of the same batch)."""
    text: str
    """The text to write: the candidate's, or the merged text."""
    reason: str


# ---- the offline engine ----------------------------------------------------------------------

_TEMPORARY = re.compile(
    r"\b(?:today|tonight|right now|at the moment|currently|this (?:morning|afternoon|evening|"
    r"week)|weather|raining|sunny|hello|hi|hey|thanks|thank you|good (?:morning|night)|"
    r"bye|lol|haha)\b",
    re.I,
)
_HEDGE = re.compile(r"\b(?:maybe|might|perhaps|probably|i think|i guess|not sure|wonder)\b", re.I)
_PREFER = re.compile(
    r"\bI (?:really |also |much |strongly |definitely )?(?P<verb>prefer|like|love|enjoy|hate|"
    r"dislike|can't stand|don't like|do not like)\b\s+(?P<rest>.+)",
    re.I,
)
_RULE = re.compile(
    r"^(?:please\s+)?(?P<word>always|never|don't ever|do not ever|don't|do not)\s+(?P<rest>.+)",
    re.I,
)
_MY = re.compile(
    r"\bmy (?P<what>[\w' -]{2,40}?) (?P<verb>is|are|was) (?P<value>[^,;.!?]{2,})", re.I
)
_WE = re.compile(
    r"\bwe (?P<verb>use|decided(?: to)?|agreed(?: to)?|chose|deploy(?: to)?|run|switched to)\s+"
    r"(?P<rest>.+)",
    re.I,
)
_LOCATED = re.compile(
    r"\b(?:is located (?:in|at)|runs on|listens on|lives (?:in|at)|is hosted (?:on|at)|"
    r"port \d{2,5}|is deployed (?:on|to))\b",
    re.I,
)
_PATTERN = re.compile(r"\b(?:whenever|every time|each time|when(?:ever)? \w+[^,]*,)", re.I)
_FIRST = re.compile(r"\b(?:I|I'm|I've|my|me|we|we're|our)\b")
_LIFE = re.compile(
    r"\b(?:went|got|started|joined|moved|bought|adopted|married|graduated|signed up|"
    r"visited|finished|learned|painted|ran|won|lost|met|made|took|have|has|had|am|work|"
    r"worked|live|lived|love|studied|volunteer\w*|research\w*|plan(?:ning)? to|want to|"
    r"decided|became|been)\b",
    re.I,
)
_CONJUGATE = {
    "am": "is",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "go": "goes",
    "'m": " is",
    "'ve": " has",
}


def extract_offline(messages: Source, *, source: str | None = None) -> list[Candidate]:
    """Lasting memories by rules: stated preferences and rules ("I prefer", "always",
    "never"), facts ("my X is", "we use", "we decided", where things run), patterns
    ("whenever ..."), skills from errors that got a fix, and — in chat with named speakers —
    concrete first-person statements (what a person did, has, plans). Temporary things
    (today, the weather, greetings), questions and hedged statements are left out.
    """
    pieces = split_pieces(load_messages(messages))
    found: list[Candidate] = []
    for piece in pieces:
        candidate = _from_piece(piece)
        if candidate is not None:
            found.append(_with_source(candidate, source))
    for chain in error_fix_chains(pieces):
        if skill := _skill(chain):
            found.append(_with_source(skill, source))
    return _unique(found)


def _from_piece(piece: Piece) -> Candidate | None:
    text = piece.text.strip()
    words = text.split()
    if piece.action and piece.action not in ("thinking", "decision", "finding"):
        return None  # tool calls and outputs state events, not lasting memories
    if piece.role not in ("user", "assistant") and not piece.speaker:
        return None
    if text.endswith("?") or len(words) < 4 or len(words) > 60 or _HEDGE.search(text):
        return None
    subject = piece.speaker or "User"
    if _WE.search(text) and re.search(r"\b(?:decided|agreed|chose)\b", text, re.I):
        return _fact(text, subject, piece)  # a decision stays true after "this morning"
    if _TEMPORARY.search(text):
        return None
    speaking_for_user = piece.role == "user" or piece.speaker is not None
    return (
        (_preference(text, subject) if speaking_for_user else None)
        or (_rule(text, subject) if piece.role == "user" and not piece.speaker else None)
        or _fact(text, subject, piece)
        or _pattern(text)
    )


def _preference(text: str, subject: str) -> Candidate | None:
    match = _PREFER.search(text)
    if not match or len(match.group("rest").split()) < 1:
        return None
    return Candidate(
        "preference", third_person(text, subject), _importance(text, "preference"), text
    )


def _rule(text: str, subject: str) -> Candidate | None:
    match = _RULE.match(text)
    if not match or len(match.group("rest").split()) < 2:
        return None
    verb = "always" if match.group("word").lower() == "always" else "never"
    rest = match.group("rest").rstrip(".!")
    return Candidate("preference", f"{subject} wants the agent to {verb} {rest}", 0.8, text)


def _fact(text: str, subject: str, piece: Piece) -> Candidate | None:
    if _MY.search(text) or _LOCATED.search(text) or _WE.search(text):
        return Candidate("fact", third_person(text, subject), _importance(text, "fact"), text)
    if piece.speaker and piece.kind == "fact" and _FIRST.search(text) and _LIFE.search(text):
        return Candidate("fact", third_person(text, subject), 0.5, text)
    return None


def _pattern(text: str) -> Candidate | None:
    if not _PATTERN.search(text) or not re.search(r"\b(?:always|usually|first|then)\b", text):
        return None
    return Candidate("pattern", text.rstrip(), _importance(text, "pattern"), text)


def _skill(chain: list[Piece]) -> Candidate | None:
    """``When <error>: fix with <fix>``, for fixes that are a recorded change or say "fixed"
    (prose that merely follows an error is no fix)."""
    errors = [p for p in chain if p.kind == "error"]
    fix = next(p for p in chain if p.kind in ("file", "fix", "action"))
    if not fix.action and fix.kind != "fix":
        return None
    error = _clause(" ".join(p.text for p in errors), 200, first=False)
    text = f"When {error}: fix with {_clause(fix.text, 200)}"
    evidence = " → ".join(p.text for p in chain)
    return Candidate("skill", text, IMPORTANCE["skill"], evidence[:MAX_TEXT])


def third_person(text: str, subject: str) -> str:
    """A first-person statement as a statement about ``subject``, where that is cheap:
    "I prefer httpx" → "User prefers httpx"; "my dog is Max" → "Ana's dog is Max"."""
    out = text.strip()
    possessive = "the user's" if subject == "User" else f"{subject}'s"

    def verb(match: re.Match[str]) -> str:
        word = match.group(1)
        lower = word.lower()
        if lower in _CONJUGATE:
            return f"{subject} {_CONJUGATE[lower]}".replace("  ", " ")
        if lower.endswith(("s", "sh", "ch", "x", "o")):
            return f"{subject} {word}es"
        if lower.endswith("y") and lower[-2:-1] not in "aeiou":
            return f"{subject} {word[:-1]}ies"
        return f"{subject} {word}s"

    out = re.sub(r"\bI('m|'ve)", lambda m: f"{subject}{_CONJUGATE[m.group(1)]}", out)
    out = re.sub(
        r"\bI (am|have|do|don't|go|prefer|like|love|enjoy|hate|dislike|want|need|use|work|live"
        r"|think|feel|know|play|own|run|teach|study|paint|write|cook|volunteer)\b",
        verb,
        out,
    )
    out = re.sub(r"\bI\b", subject, out)
    out = re.sub(
        r"^[Ww]e (use|run|deploy|prefer|need|want)\b", lambda m: f"The team {m.group(1)}s", out
    )
    out = re.sub(r"^[Ww]e\b", "The team", out)
    out = re.sub(r"^[Oo]ur\b", "The team's", out)
    out = re.sub(r"\b[Mm]y\b", possessive, out)
    out = re.sub(r"\bmyself\b", "themselves", out)
    out = re.sub(r"\bme\b", subject, out)
    out = out[:1].upper() + out[1:]
    return out if len(out) <= MAX_TEXT else out[: MAX_TEXT - 1].rsplit(" ", 1)[0] + " …"


def _importance(text: str, kind: str) -> float:
    bonus = 0.1 if re.search(r"\b(?:always|never|must|important)\b", text, re.I) else 0.0
    return round(min(0.9, IMPORTANCE[kind] + bonus), 2)


def _clause(text: str, limit: int, first: bool = True) -> str:
    text = text.strip()
    if first:
        text = re.split(r";\s+|(?<=[.!?])\s+", text, maxsplit=1)[0]
    first_part = text.rstrip(".")
    if len(first_part) <= limit:
        return first_part
    return first_part[: limit - 1].rsplit(" ", 1)[0] + " …"


def _with_source(candidate: Candidate, source: str | None) -> Candidate:
    if source is None:
        return candidate
    return Candidate(
        candidate.type, candidate.text, candidate.importance, candidate.evidence, source
    )


def _unique(candidates: list[Candidate]) -> list[Candidate]:
    seen: set[str] = set()
    out = []
    for candidate in candidates:
        key = text_hash(candidate.text)
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out


def text_hash(text: str) -> str:
    """The exact-duplicate key: case, punctuation and spacing do not count."""
    normal = " ".join(re.findall(r"\w+", text.lower()))
    return hashlib.sha1(normal.encode()).hexdigest()


# ---- the LLM engine --------------------------------------------------------------------------

EXTRACT_PROMPT = """\
You read a conversation and write down what is worth remembering for a long time: things that
will still be true and useful in later conversations. Four types:
- preference: what the user wants, likes or rejects ("User prefers httpx over requests")
- fact: a stable fact about the user, people, the project or the world ("Deploys go to Fly.io")
- pattern: a recurring way of working ("Every migration is checked with upgrade/downgrade")
- skill: how to do or fix something, learned here ("When X fails with Y, do Z")
Each memory is one independent, explicit, checkable statement in the third person, with names
instead of pronouns and absolute dates instead of "yesterday". Leave out temporary things (the
weather, what happens today, greetings), guesses, and anything not said in the conversation.
importance: 0.0-1.0 (0.9 = breaks things if forgotten, 0.5 = nice to know).

Reply with only a JSON object:
{"memories": [{"type": "preference", "text": "...", "importance": 0.8, "evidence": "short quote"}]}
Reply {"memories": []} if nothing is worth remembering.
"""


def extract_llm(
    messages: Source,
    config: LLMConfig,
    *,
    source: str | None = None,
    **llm_kwargs: Any,
) -> ExtractionResult:
    """One JSON call; an unusable reply gets one repair retry (the reply and what is wrong with
    it go back to the model). Still unusable: no candidates, and the problem is reported.
    Invalid items are dropped and reported; valid ones are kept."""
    from mdmem.llm import complete

    loaded = load_messages(messages)
    prompt: list[dict[str, str]] = [
        {"role": "system", "content": EXTRACT_PROMPT},
        {"role": "user", "content": _transcript(loaded)},
    ]
    problems: list[str] = []
    reply = complete(prompt, config, json=True, **llm_kwargs)
    items, error = parse_memories(reply.text)
    if error is not None:
        problems.append(f"reply 1: {error}")
        prompt += [
            {"role": "assistant", "content": reply.text},
            {"role": "user", "content": f"That reply is not usable: {error}. {REPAIR}"},
        ]
        reply = complete(prompt, config, json=True, **llm_kwargs)
        items, error = parse_memories(reply.text)
        if error is not None:
            problems.append(f"reply 2: {error}")
            return ExtractionResult((), tuple(problems), reply)
    candidates, bad = _validated(items, source)
    return ExtractionResult(tuple(_unique(candidates)), tuple(problems + bad), reply)


REPAIR = 'Reply with only the JSON object {"memories": [...]} as described, nothing else.'


def parse_memories(text: str) -> tuple[list[Any], str | None]:
    """The ``memories`` list of a reply (code fences and prose around the JSON tolerated), or
    an error message saying what is wrong."""
    data, error = parse_json_object(text)
    if error is not None:
        return [], error
    memories = data.get("memories")
    if not isinstance(memories, list):
        return [], 'the object has no "memories" list'
    return memories, None


def parse_json_object(text: str) -> tuple[dict[str, Any], str | None]:
    """The first JSON object in ``text``: fenced, bare, or surrounded by prose."""
    body = text.strip()
    if fenced := re.search(r"```(?:json)?\s*\n?(.*?)```", body, re.S | re.I):
        body = fenced.group(1).strip()
    start = body.find("{")
    if start < 0:
        return {}, f"no JSON object in the reply (starts {text.strip()[:80]!r})"
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if not isinstance(data, dict):
        return {}, "the reply's JSON is not an object"
    return data, None


def _validated(items: list[Any], source: str | None) -> tuple[list[Candidate], list[str]]:
    candidates, problems = [], []
    for n, item in enumerate(items):
        problem = _item_problem(item)
        if problem:
            problems.append(f"memory {n}: {problem}")
            continue
        importance = item.get("importance", 0.5)
        candidates.append(
            Candidate(
                type=item["type"],
                text=" ".join(item["text"].split()),
                importance=round(min(1.0, max(0.0, float(importance))), 2),
                evidence=str(item.get("evidence") or "")[:MAX_TEXT],
                source=source,
            )
        )
    return candidates, problems


def _item_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "not an object"
    if item.get("type") not in MEMORY_TYPES:
        return f"type {item.get('type')!r} is not one of {', '.join(MEMORY_TYPES)}"
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        return "no text"
    if len(text) > 2 * MAX_TEXT:
        return f"text too long ({len(text)} characters)"
    importance = item.get("importance", 0.5)
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        return f"importance {importance!r} is not a number"
    return None


def _transcript(messages: list[dict[str, str]]) -> str:
    lines = []
    for message in messages:
        who = message.get("name") or message["role"]
        when = f"[{message['timestamp']}] " if message.get("timestamp") else ""
        lines.append(f"{when}{who}: {message['content']}")
    return "Conversation:\n" + "\n".join(lines)


# ---- deduplication ---------------------------------------------------------------------------

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


def plan(
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
            return Decision(
                decision.action, candidate, entry, decision.text, f"{why}; {decision.reason}"
            )
        fallback = resolve_offline(candidate, entry)
        return Decision(
            fallback.action,
            candidate,
            entry,
            fallback.text,
            f"{why}; model reply unusable ({problem}); rule: {fallback.reason}",
        )
    decision = resolve_offline(candidate, entry)
    return Decision(decision.action, candidate, entry, decision.text, f"{why}; {decision.reason}")


def resolve_offline(candidate: Candidate, entry: Entry) -> Decision:
    """Rules for a candidate that is very similar to an existing memory:

    - one is negated and the other not ("uses X" / "no longer uses X") → replace: the
      newer statement wins, the old one is archived with a pointer;
    - the candidate says everything the memory says and more → merge (the candidate's text);
    - the memory says everything the candidate says → skip;
    - the same subject with a different value ("target is Heroku" / "target is Fly.io"), or
      the same words with different numbers ("port 5432" / "port 5433") → replace;
    - otherwise (a paraphrase) → skip.
    """
    new, old = candidate.text, entry.text
    if bool(_NEGATION.search(new)) != bool(_NEGATION.search(old)):
        return _decide("replace", candidate, entry, "contradicts it (negation)")
    new_words, old_words = _content(new), _content(old)
    if old_words < new_words:
        return _decide("merge", candidate, entry, "says it and more", text=new)
    if new_words <= old_words:
        return _decide("skip", candidate, entry, "already remembered")
    if _different_value(new, old):
        return _decide("replace", candidate, entry, "same subject, different value")
    return _decide("skip", candidate, entry, "already remembered (paraphrase)")


def _different_value(new: str, old: str) -> bool:
    a, b = _IS.match(new.strip()), _IS.match(old.strip())
    if a and b and _content(a.group("subject")) == _content(b.group("subject")):
        return _content(a.group("value")) != _content(b.group("value"))
    numbers_a, numbers_b = re.findall(r"\d+(?:\.\d+)?", new), re.findall(r"\d+(?:\.\d+)?", old)
    words_a = {w for w in _content(new) if not w[0].isdigit()}
    words_b = {w for w in _content(old) if not w[0].isdigit()}
    return bool(numbers_a and numbers_b) and numbers_a != numbers_b and words_a == words_b


def _content(text: str) -> frozenset[str]:
    from mdmem.compact import STOPWORDS

    return frozenset(w for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS)


def resolve_llm(
    candidate: Candidate, entry: Entry, config: LLMConfig, **llm_kwargs: Any
) -> tuple[Decision | None, str | None]:
    """Ask the model how a candidate relates to a similar memory: (decision, None), or
    (None, problem) when the reply is unusable (the caller falls back to the rules)."""
    from mdmem.llm import complete

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
    return _decide(action, candidate, entry, f"model: {reason}", text=" ".join(text.split())), None


def _decide(
    action: Action,
    candidate: Candidate,
    entry: Entry | None,
    reason: str,
    text: str | None = None,
) -> Decision:
    return Decision(action, candidate, entry, text if text is not None else candidate.text, reason)
