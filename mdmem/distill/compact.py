"""Compaction: a long conversation becomes a short memory of the current state and key events.

Compaction is an act of attention. Every piece of the conversation is weighed by one rubric
(highest first): errors and their fixes 10, files created or changed 8, test results and
verification 7, key decisions and findings 6, state changes 5, ordinary thinking 2. Pieces
scoring at least :data:`KEEP` become key events; state changes feed the ``## State`` section.
Recent pieces keep more detail, older ones only their first clause; repeated content keeps only
its latest version; an error pulls its cause, fix and result into one event, in time order.

Two engines produce the same :class:`CompactMemory`: :func:`compact_offline` (rules,
deterministic, no network) and :func:`compact_llm` (one litellm call). The file format is the
one of ``.compact_memory.md``::

    # Compact Memory

    ## State
    - Branch feat/invoice-status; 27 tests pass locally

    ## Key Events
    - 2026-11-16 [error→fix] `database "invoice_test" does not exist`; fixed: initdb script
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from mdmem.config import LLMConfig
from mdmem.distill.transcript import Source, load_messages
from mdmem.text import one_line
from mdmem.tokens import count_message_tokens, estimate_tokens

if TYPE_CHECKING:  # mdmem.distill.llm is imported when the LLM engine runs
    from mdmem.distill.llm import LLMReply

TITLE = "Compact Memory"
STATE_TITLE = "State"
EVENTS_TITLE = "Key Events"

SCORES: dict[str, float] = {
    "error": 10,
    "fix": 10,
    "file": 8,
    "test": 7,
    "decision": 6,
    "fact": 6,
    "state": 5,
    "plan": 5,
    "action": 5,
    "result": 4,
    "remark": 3,
    "thinking": 2,
    "request": 2,
    "call": 2,
    "chatter": 1,
}
"""The rubric, per kind of piece. ``fact``: a concrete statement about a person in chat
(who they are, what they did, when) — the chat equivalent of a finding."""
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

Kind = str


# ---- the memory ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyEvent:
    """One line of ``## Key Events``: ``- 2026-11-16 [error→fix] text``."""

    date: str | None
    tag: str
    text: str

    def render(self) -> str:
        parts = [p for p in (self.date, f"[{self.tag}]" if self.tag else "", self.text) if p]
        return "- " + " ".join(parts)


@dataclass(frozen=True)
class CompactMemory:
    """The current state and the key events, in time order."""

    state: tuple[str, ...] = ()
    events: tuple[KeyEvent, ...] = ()

    def render(self) -> str:
        lines = [f"# {TITLE}", "", f"## {STATE_TITLE}"]
        lines += [f"- {one_line(s)}" for s in self.state]
        lines += ["", f"## {EVENTS_TITLE}"]
        lines += [replace(e, text=one_line(e.text)).render() for e in self.events]
        return "\n".join(lines) + "\n"

    def __bool__(self) -> bool:
        return bool(self.state or self.events)


_EVENT_LINE = re.compile(
    r"^(?:(?P<date>\d{4}-\d{2}-\d{2})(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?\s+)?"
    r"(?:\[(?P<tag>[^\]\n]{1,40})\]\s*)?(?P<text>.*)$",
    re.S,
)
_BULLET = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(?P<text>.*)$")


def parse_compact(text: str) -> CompactMemory:
    """Read a compact memory, hand edits included: any bullets (or plain lines) under a
    heading naming the state or the events; indented lines continue the bullet above."""
    section: str | None = None
    items: dict[str, list[str]] = {"state": [], "events": []}
    in_fence = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or not line.strip() or line.lstrip().startswith("<!--"):
            continue
        if heading := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line):
            section = _section_of(heading.group(1))
            continue
        if section is None:
            continue
        bullet = _BULLET.match(line)
        if bullet:
            items[section].append(bullet.group("text").strip())
        elif line[:1].isspace() and items[section]:
            items[section][-1] += " " + line.strip()
        else:
            items[section].append(line.strip())
    events = tuple(_parse_event(t) for t in items["events"] if t)
    return CompactMemory(state=tuple(t for t in items["state"] if t), events=events)


EVENTS_HEADING = re.compile(r"\b(?:events?|history|timeline)\b", re.I)
STATE_HEADING = re.compile(r"\b(?:state|status)\b", re.I)
"""Headings of a compact memory's two parts, as whole words ("Estate" and "Prevention"
are a person's own sections)."""


def _section_of(title: str) -> str | None:
    if EVENTS_HEADING.search(title):
        return "events"
    if STATE_HEADING.search(title):
        return "state"
    return None


def _parse_event(text: str) -> KeyEvent:
    match = _EVENT_LINE.match(text)
    assert match is not None  # the pattern matches any string
    return KeyEvent(match.group("date"), (match.group("tag") or "").strip(), match.group("text"))


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
        slot = _slot(line)
        if slot and any(_slot(s) == slot for s in new.state):
            continue
        if any(_superseded(line, s) for s in new.state):
            continue
        state.append(line)
    return CompactMemory(state=tuple(state[:MAX_STATE]), events=_time_ordered(kept))


def _superseded(old: str, new: str) -> bool:
    a, b = _words(old), _words(new)
    if not a or not b:
        return old.strip() == new.strip()
    return _jaccard(a, b) >= SIMILAR or (len(a) >= 3 and len(a & b) / len(a) >= 0.9)


def _time_ordered(events: Iterable[KeyEvent]) -> tuple[KeyEvent, ...]:
    """Stable sort by date; an undated event stays after the dated one before it."""
    keyed: list[tuple[str, int, KeyEvent]] = []
    last = ""
    for n, event in enumerate(events):
        last = event.date or last
        keyed.append((last, n, event))
    return tuple(e for _, _, e in sorted(keyed, key=lambda k: (k[0], k[1])))


# ---- the offline engine ----------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """A unit of the conversation the rubric weighs: one event, or one sentence of a message."""

    index: int
    message: int
    role: str
    date: str | None
    action: str
    speaker: str | None
    text: str
    kind: Kind
    slot: str | None = None

    @property
    def score(self) -> float:
        return SCORES[self.kind]


_STAMPED = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})?[ T]?(?P<time>\d{1,2}:\d{2}(?::\d{2})?)?\s*"
    r"\[(?P<action>[A-Za-z][\w .-]{0,31})\]\s*(?P<text>.*)$",
    re.S,
)
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})(?!\d)")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+(?=[\"'(\[]?[A-Z0-9\u4e00-\u9fff])|\n+")
_PATH = re.compile(
    r"(?<![\w@])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]*\w"
    r"|\b[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|md|toml|ya?ml|json|sql|html|css|txt|cfg|ini|sh|rs|go|"
    r"java|kt|c|h|cpp|hpp|rb|php|lock|env)\b|\b(?:Dockerfile|Makefile|\.env[\w.]*)\b"
)
_STRONG_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|fatal|failed|failure|failing|refused|denied|"
    r"undefined\w*|does not exist|doesn't exist|no such|not found|violat\w+|timed out|"
    r"errno|segfault|panic(?:ked)?|\d+\s*×\s*5\d\d)\b"
    r"|\b(?:CI|build|pipeline|run)\b[^.;]{0,30}\bred\b|□",
    re.I,
)
_WEAK_ERROR = re.compile(
    r"\b(?:unexpected|cannot|can't|could not|couldn't|unable to|broken|missing|wrong|crash\w*|"
    r"doesn't work|does not work|not working|bug|issue|problem|regression|leak\w*)\b",
    re.I,
)
_TECH = re.compile(
    r"`|\w+\(\)|\b[a-z]+_[a-z_]+\b|\b[A-Z][a-z]+[A-Z]\w*\b|"
    r"(?i:\b(?:test|tests|build|CI|server|API|db|database|docker|deploy|install|import|module|"
    r"package|library|config|port|query|migration|endpoint|compile\w*|script|function|"
    r"request|response|image|container|font|column|table)\b)"
)
_FIX = re.compile(
    r"\b(?:fix(?:ed|es|ing)?|solved|resolved|workaround|turned out|the (?:problem|issue|cause) "
    r"(?:was|is)|by (?:adding|installing|setting|using|changing|removing)|works now|now works|"
    r"install(?:ed|ing)?|added|changed|switched|replaced)\b",
    re.I,
)
_TEST = re.compile(
    r"\b\d+ (?:passed|failed|errors?|tests?)\b|\btests? (?:pass\w*|fail\w*|green|"
    r"red)\b|\bCI (?:is |was |now )?(?:green|red|pass\w*|fail\w*)\b|\bverif(?:y|ied|ication)\b"
    r"|\bgreen\b|\b\d+ × 2\d\d\b",
    re.I,
)
_CHANGE = re.compile(
    r"\b(?:creat\w+|wrote|writ(?:e|es|ten)|add(?:ed|s)?|chang\w+|updat\w+|edit\w*|modif\w+|"
    r"delet\w+|remov\w+|renam\w+|mov(?:ed|es)|refactor\w*|rewr\w+|new file)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:decided|decide|decision|agreed|chose|choose|chosen|go(?:ing)? with|instead of|"
    r"switch(?:ed|ing)? to|from now on|we(?:'ll| will) use|let's use|must|never|always|"
    r"blocker|conclu\w+|turns out|found that|root cause|because|prefer\w*|requirement|"
    r"rule|only|not allowed|don't (?:use|fix|add|break)|please don't)\b",
    re.I,
)
_STATE = re.compile(
    r"\b(?:commit(?:ted)?|merged?|push(?:ed)?|deploy\w*|releas\w+|branch|version|v\d+\.\d+|"
    r"status|done|completed?|finished|todo|next step|blocked|in progress|phase|milestone|"
    r"changes requested|approved)\b",
    re.I,
)
_REQUEST = re.compile(
    r"^(?:please\b|can you\b|could you\b|would you\b|i need\b|i want\b|we need\b|let's\b|"
    r"(?:add|fix|implement|make|set up|setup|create|build|write|review|refactor|update|remove|"
    r"migrate|deploy|investigate|debug|find|change|get)\b)",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|mine|me|we|we're|we've|our|us)\b")
_CONCRETE = re.compile(
    r"\d|\b(?:yesterday|today|tonight|tomorrow|last (?:week|month|year|night|weekend)|"
    r"next (?:week|month|year)|ago|since|January|February|March|April|May|June|July|August|"
    r"September|October|November|December|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|"
    r"Sunday|weekend|summer|winter|spring|fall|birthday|favorite|favourite|dream|goal|"
    r"passion|hobby|career|job|work|school|college|degree|family|kids?|children|son|daughter|"
    r"husband|wife|partner|mom|mother|dad|father|sister|brother|friend|dog|cat|pet|home|"
    r"house|moved|married|adopt\w*|started|joined|signed|bought|went|visited|finished|"
    r"learned|volunteer\w*|class|course|book|trip|concert|race|project|business|shop)\b"
)
_PLAN = re.compile(
    r"\b(?:going to|gonna|will|plan(?:ning)? to|planned|next (?:week|month|year|step)|"
    r"intend|hope to|looking forward)\b",
    re.I,
)
_RESOLVED = re.compile(
    r"\b(?:fix(?:ed|es)|solved|resolved|works now|now works|now passes|is green)\b", re.I
)
_VOLATILE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}:\d{2}\b"
    r"|\b(?:in |after |took )?\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|min|mins|minutes)\b"
    r"|\b(?:run|job|build|pipeline|attempt|pid|request|req)[ #:]+\d{4,}\b,?"
    r"|#\d{5,}\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
    re.I,
)
"""What changes from one run to the next: timestamps, durations, run numbers, hashes."""
_NEGATED = re.compile(r"\b(?:don't|do not|never|not|no|should)\b", re.I)
_ACTION_KINDS: dict[str, Kind] = {
    "planning": "plan",
    "plan": "plan",
    "thinking": "thinking",
    "think": "thinking",
    "reasoning": "thinking",
    "tool_call": "call",
    "call": "call",
    "complete": "state",
    "done": "state",
    "decision": "decision",
    "finding": "decision",
    "review": "decision",
    "fix": "fix",
    "setup": "action",
}
_ERROR_ACTIONS = {"error", "failure", "failed", "exception"}
_CHANGE_ACTIONS = {"execute", "exec", "edit", "edit_file", "write", "write_file", "create"}
_RESULT_ACTIONS = {"tool_result", "result", "observation", "output"}
STOPWORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing don down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not now of off on once only or other our ours out over own same she
    should so some such than that the their them then there these they this those through to
    too under until up very was we were what when where which while who whom why will with would
    you your yours yeah yes oh wow really so just like get got thing things lot also""".split()
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


def split_pieces(
    messages: Sequence[dict[str, str]], default_date: str | None = None
) -> list[Piece]:
    """Messages → classified pieces: session events whole, other text sentence by sentence."""
    pieces: list[Piece] = []
    # a request typed before the first stamped event was made that day
    date = default_date or next(
        (d for m in messages if (d := _message_date(m, _STAMPED.match(m.get("content", ""))))),
        None,
    )
    for number, message in enumerate(messages):
        content = message.get("content", "")
        stamped = _STAMPED.match(content.strip())
        date = _message_date(message, stamped) or date
        role = message.get("role", "user")
        speaker = message.get("name")
        if stamped:
            action = stamped.group("action").strip().lower().replace(" ", "_")
            texts = [_gist(stamped.group("text"))]
        else:
            action = ""
            texts = _sentences(content)
        for text in texts:
            if not text:
                continue
            text = resolve_relative_dates(text, date)
            kind = classify(text, action, role, speaker)
            piece = Piece(len(pieces), number, role, date, action, speaker, text, kind)
            pieces.append(replace(piece, slot=_slot(text, piece)))
    return pieces


def classify(text: str, action: str = "", role: str = "user", speaker: str | None = None) -> Kind:
    """The rubric's kind of one piece, from its ``[action]`` tag (session events) or its words.

    A dotted tag (``node.error``) is read by its last part."""
    action = action.rsplit(".", 1)[-1]
    if action in _ERROR_ACTIONS:
        return "error"
    if action in _CHANGE_ACTIONS:
        return "file" if _PATH.search(text) else "action"
    if action in _RESULT_ACTIONS:
        if _is_error(text):
            return "error"
        return "test" if _TEST.search(text) else "result"
    if action in _ACTION_KINDS:
        kind = _ACTION_KINDS[action]
        if kind == "thinking" and _DECISION.search(text):
            return "decision"
        return kind
    return _classify_text(text, role, speaker)


def _classify_text(text: str, role: str, speaker: str | None) -> Kind:
    words = _words(text)
    if text.rstrip().endswith("?"):
        return "thinking" if len(words) >= 3 else "chatter"
    if role == "user" and speaker is None and _is_request(text):
        return "request"  # the task, in State; not an event of its own
    if _is_error(text):
        return "fix" if _FIX.search(text) and not _STRONG_ERROR.search(text) else "error"
    if _TEST.search(text) and (_TECH.search(text) or role == "tool"):
        return "test"
    if _PATH.search(text) and _CHANGE.search(text):
        return "file"
    if (
        _FIX.search(text)
        and (_TECH.search(text) or _PATH.search(text))
        and not _NEGATED.search(text)
    ):
        return "fix"
    if _DECISION.search(text) and len(words) >= 3:
        return "decision"
    if _STATE.search(text) and (_TECH.search(text) or not speaker):
        return "state"
    if len(words) < 3:
        return "chatter"
    if _FIRST_PERSON.search(text) and len(words) >= 3:
        return "fact" if _CONCRETE.search(text) else "remark"
    if speaker and _CONCRETE.search(text) and len(words) >= 4:
        return "remark"
    return "thinking"


def _is_request(text: str) -> bool:
    """An instruction to the agent ("Add ...", "Then get CI green", "Push to main") that
    carries no rule or decision of its own."""
    if _RULE_WORDS.search(text):
        return False
    return bool(_REQUEST.match(text) or _MORE_REQUEST.match(text))


_RULE_WORDS = re.compile(
    r"\b(?:don't|do not|never|must|always|decided|agreed|instead of|from now on|not allowed)\b",
    re.I,
)
_MORE_REQUEST = re.compile(
    r"^(?:then|also|and|next|finally|after that|afterwards)?,?\s*(?:please\s+)?(?:push|merge|"
    r"commit|run|test|drop|keep|use|make sure|get|add|fix|implement|set up|create|build|"
    r"write|review|refactor|update|remove|migrate|deploy|check|open|close|tag|release|rename|"
    r"move|delete|ship)\b",
    re.I,
)


def _is_error(text: str) -> bool:
    if _STRONG_ERROR.search(text):
        return not re.search(r"\b0 (?:failed|errors?)\b", text) or "□" in text
    return bool(_WEAK_ERROR.search(text) and _TECH.search(text))


def _slot(text: str, piece: Piece | None = None) -> str | None:
    """What a state line is about, so a newer line on the same subject replaces it."""
    if piece is not None and piece.speaker and _PLAN.search(text):
        return f"plan:{piece.speaker}"
    if re.search(r"\b(?:CI|GitHub Actions|workflow|ci\.yml)\b|\brun \d{6,}", text, re.I):
        return "ci"
    if _TEST.search(text):
        return "tests"
    if re.search(r"\b(?:deploy\w*|staging|production)\b", text, re.I):
        return "deploy"
    if re.search(r"\b(?:commit\w*|merged?|push\w*|branch|PR #?\d+|pull request)\b", text, re.I):
        return "vcs"
    if re.search(r"\b(?:next step|todo|remaining|still to do)\b", text, re.I):
        return "next"
    if re.match(r"^(?:task|goal|request)\s*:", text, re.I):
        return "task"
    return None


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
            chain = _chain(pieces, n, used)
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


def _chain(pieces: list[Piece], start: int, used: set[int]) -> list[int]:
    """An error and what answered it: its cause (thinking right after), the fix (a change),
    and the fix's result (the next test or result). Stops at the next error; in chat, at a
    turn by someone else."""
    chain = [start]
    stream = bool(pieces[start].action)
    while (  # adjacent error lines of one stream are one error (status codes, then the cause)
        stream
        and chain[-1] + 1 < len(pieces)
        and pieces[chain[-1] + 1].kind == "error"
        and pieces[chain[-1] + 1].action
    ):
        chain.append(chain[-1] + 1)
    fix: int | None = None
    for n in range(chain[-1] + 1, min(len(pieces), start + 8)):
        piece = pieces[n]
        if n in used or piece.kind == "error" or piece.speaker != pieces[start].speaker:
            break
        if fix is None:
            if piece.kind in ("file", "fix") or (stream and piece.kind == "action"):
                if not stream and not _about(piece, [pieces[i] for i in chain]):
                    continue  # prose after an error (a closing summary) is no fix for it
                fix = n
                chain.append(n)
            elif stream and piece.kind in ("thinking", "decision") and piece.action:
                chain.append(n)
        elif piece.kind in ("test", "result"):
            chain.append(n)
            break
    if fix is None:
        return [n for n in chain if pieces[n].kind == "error"]
    return chain


def _about(fix: Piece, errors: list[Piece]) -> bool:
    """Does a prose fix share a content word with the error it would fix?"""
    wanted = frozenset().union(*(_stems(p.text) for p in errors))
    return bool(wanted & _stems(fix.text))


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
    words = [_words(k.event.text, numbers=False) for k in found]
    return [
        kept
        for n, kept in enumerate(found)
        if not any(
            words[n] and _jaccard(words[n], words[m]) >= SIMILAR for m in range(n + 1, len(found))
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
            pool = frozenset().union(*(_words(k.event.text) for k in near)) if near else None
            words = _words(kept.event.text)
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
        news = _stems(text, volatile=False)
        later = [_stems(t, volatile=False) for t in said[n + 1 :]]
        if len(news) >= 2 and any(news <= other for other in later):
            continue
        lines.append(text)
    return lines[:MAX_STATE]


def _neutral(piece: Piece) -> str:
    """A user's own words in a tool-style conversation, about "the user" instead of "I"."""
    if piece.role != "user" or piece.speaker or piece.action:
        return piece.text
    from mdmem.distill.extract import third_person  # extract builds on this module

    text = third_person(without_instruction(piece.text), "User")
    return re.sub(r"\b(?<!^)The team\b", "the team", text)


_INSTRUCTION_TAIL = re.compile(
    r"(?:,|;|\s-)\s*(?:so|and|then|please)\s+(?:please\s+)?(?:\w+\s+)?(?:drop|remove|add|fix|"
    r"make|change|update|delete|go|get|set|run|push|keep|do|put|move|rename|switch|write|"
    r"check|take|give|let|use)\b.*?(?=[.!]?$)",
    re.I,
)


def without_instruction(text: str) -> str:
    """A statement without the request tacked on to it: "We decided to deploy to Fly.io,
    so drop the Heroku job while you are in there." → "We decided to deploy to Fly.io."."""
    if not _INSTRUCTION_TAIL.search(text):
        return text
    out = _INSTRUCTION_TAIL.sub("", text).rstrip(" ,;")
    return out if out.endswith((".", "!")) else out + "."


def _task(pieces: list[Piece]) -> str | None:
    """The latest request a user made (first sentence), in tool-style conversations."""
    requests = [
        p
        for p in pieces
        if p.role == "user" and p.speaker is None and not p.action and _REQUEST.match(p.text)
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


def _sentences(content: str) -> list[str]:
    text = re.sub(r"```.*?```", _fenced_gist, content, flags=re.S)
    # soft line breaks inside a paragraph are spaces; blank lines and list items split
    text = re.sub(r"[ \t]*\n(?![ \t]*(?:\n|[-*+] |\d+[.)] |#))[ \t]*", " ", text)
    parts = [_gist(p) for p in _SENTENCE_END.split(text)]
    return [p for p in parts if p]


def _fenced_gist(match: re.Match[str]) -> str:
    """A code block stands for its last error line (tracebacks end with the news), else drops."""
    lines = [line.strip() for line in match.group(0).strip("`").splitlines() if line.strip()]
    errors = [line for line in lines if _STRONG_ERROR.search(line)]
    return f"\n{errors[-1]}\n" if errors else "\n"


def _gist(text: str) -> str:
    """One line: a long multi-line text (tool output) becomes its most telling line."""
    text = text.strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 3:
        errors = [line for line in lines if _STRONG_ERROR.search(line)]
        text = errors[-1] if errors else lines[0]
    return one_line(text)


def _detail(text: str, recent: bool) -> str:
    """Recent pieces keep their detail; older ones only their first clause."""
    limit = 300 if recent else 140
    if not recent:
        first = re.split(r"(?<=[.!?])\s+|;\s+", text, maxsplit=1)[0]
        if len(_words(first)) >= 3:
            text = first
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


_RELATIVE = {
    "yesterday": 1,
    "last night": 1,
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "tomorrow": -1,
    "two days ago": 2,
    "a few days ago": None,
    "last week": 7,
    "last weekend": None,
    "last month": 30,
    "last year": 365,
}
_RELATIVE_RE = re.compile(
    r"\b(" + "|".join(k for k, v in _RELATIVE.items() if v is not None) + r")\b('s)?(?! \()",
    re.I,
)


def resolve_relative_dates(text: str, date: str | None) -> str:
    """'yesterday' said on 2023-05-08 → 'yesterday (2023-05-07)': a compact memory is read
    long after the conversation, when 'yesterday' means nothing. Weeks, months and years are
    resolved to their unit (``last year (2022)``, ``last month (2023-04)``)."""
    if not date or not _RELATIVE_RE.search(text):
        return text
    day = dt.date.fromisoformat(date)

    def one(match: re.Match[str]) -> str:
        days = _RELATIVE[match.group(1).lower()]
        assert days is not None
        when = day - dt.timedelta(days=days)
        label = {365: f"{when:%Y}", 30: f"{when:%Y-%m}", 7: f"week of {when.isoformat()}"}
        return f"{match.group(0)} ({label.get(days, when.isoformat())})"

    return _RELATIVE_RE.sub(one, text, count=2)


def _words(text: str, numbers: bool = True) -> frozenset[str]:
    """Content words, lowercased; numbers kept as themselves or folded to '#'."""
    out = set()
    for word in re.findall(r"\w+", text.lower()):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        if not numbers and any(c.isdigit() for c in word):
            word = "#"
        out.add(word)
    return frozenset(out)


def _stems(text: str, volatile: bool = True) -> frozenset[str]:
    """Content words folded to a rough stem ("passed", "passes" → "pass"); with
    ``volatile=False`` durations, timestamps and run numbers are left out first."""
    if not volatile:
        text = strip_volatile(text)
    out = set()
    for word in _words(text):
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
                word = word[: -len(suffix)]
                break
        out.add(word)
    return frozenset(out)


def strip_volatile(text: str) -> str:
    """``text`` without what differs between two runs of the same thing (timestamps,
    durations, run and job numbers, commit hashes), so it can be reused and deduplicated."""
    text = _VOLATILE.sub("", text)
    text = re.sub(r"\(\s*\)|\[\s*\]", "", text)
    text = re.sub(r"^[\s,;:]+|\s+([,;:.])(?=\s|$)", r"\1", text)
    return one_line(text).strip(" ,;")


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _message_date(message: dict[str, str], stamped: re.Match[str] | None) -> str | None:
    for key in ("timestamp", "date"):
        if match := _DATE.match(message.get(key, "")):
            return match.group(1)
    if stamped and stamped.group("date"):
        return stamped.group("date")
    match = _DATE.match(message.get("content", "").lstrip())
    return match.group(1) if match else None


def _date_text(now: str | dt.date | None) -> str | None:
    if now is None:
        return None
    if isinstance(now, dt.date):
        return now.isoformat()[:10]
    match = _DATE.match(now)
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
    memory = parse_compact(_strip_fence(reply.text))
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


def error_fix_chains(pieces: list[Piece]) -> list[list[Piece]]:
    """Every error that got a fix, as [error..., cause?, fix, result?] (for skills)."""
    used: set[int] = set()
    out: list[list[Piece]] = []
    for n, piece in enumerate(pieces):
        if piece.kind != "error" or n in used:
            continue
        chain = _chain(pieces, n, used)
        used.update(chain)
        found = [pieces[i] for i in chain]
        if any(p.kind in ("file", "fix", "action") for p in found):
            out.append(found)
    return out
