"""Extraction: what a conversation taught, as typed, lasting memories — and whether each one is
new, a repeat, or a change to something already remembered.

Two engines produce :class:`Candidate` memories: :func:`extract_offline` (rules; precision
over recall) and :func:`extract_llm` (one JSON call, validated, one repair retry, never a crash
on a bad reply). :func:`mdmem.distill.dedupe.decide` then decides, per candidate, against the
existing memories: add, skip, replace, merge or keep both. Writing the decisions to files is
:mod:`mdmem.distill.workflow`'s job.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mdmem.config import LLMConfig
from mdmem.distill.agent_rules import setting, states_decision, states_user_preference
from mdmem.distill.rules import (
    IRREGULAR,
    MAX_TEXT,
    Piece,
    content_words,
    error_fix_chains,
    says_fixed,
    split_pieces,
    strip_volatile,
    third_person,
    without_instruction,
)
from mdmem.distill.transcript import Source, load_messages
from mdmem.markdown.entries import MEMORY_TYPES, Entry
from mdmem.text import one_line, same_text

if TYPE_CHECKING:
    from mdmem.distill.llm import LLMReply

Action = Literal["add", "skip", "replace", "merge", "keep_both"]
IMPORTANCE = {"preference": 0.7, "fact": 0.6, "pattern": 0.65, "skill": 0.75}
"""Default importance per type; an explicit "always"/"never"/"must" adds 0.1."""


@dataclass(frozen=True)
class Candidate:
    """A memory worth keeping, before deduplication."""

    type: str
    """One of :data:`mdmem.markdown.entries.MEMORY_TYPES`."""
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


def extract_offline(messages: Source, *, source: str | None = None) -> list[Candidate]:
    """Lasting memories by rules: stated preferences and rules ("I prefer", "always",
    "never"), facts ("my X is", "we use", "we decided", where things run), patterns
    ("whenever ..."), skills from errors that got a fix, and — in chat with named speakers —
    concrete first-person statements (what a person did, has, plans). Temporary things
    (today, the weather, greetings), questions and hedged statements are left out.
    """
    pieces = split_pieces(load_messages(messages))
    found: list[Candidate] = []
    speakers = list(dict.fromkeys(p.speaker for p in pieces if p.speaker and not p.action))
    turn: list[Piece] = []
    for n, piece in enumerate(pieces):
        if piece.speaker and not piece.action:  # chat: one memory per turn
            turn.append(piece)
            following = pieces[n + 1] if n + 1 < len(pieces) else None
            if following is None or following.message != piece.message:
                others = [s for s in speakers if s != piece.speaker]
                listener = others[0] if len(speakers) == 2 and others else None
                if candidate := _from_turn(turn, listener):
                    found.append(_with_source(candidate, source))
                turn = []
            continue
        if candidate := _from_piece(piece):
            found.append(_with_source(candidate, source))
    for chain in error_fix_chains(pieces):
        if skill := _skill(chain):
            found.append(_with_source(skill, source))
    return _unique(found)


_NO_MEMORY_KINDS = frozenset({"error", "fix", "test", "call", "plan", "request", "chatter"})
"""Events that say what happened, not what stays true (a fix is learned with its error)."""


def _from_piece(piece: Piece) -> Candidate | None:
    text = piece.text.strip()
    words = text.split()
    if piece.role not in ("user", "assistant") and not piece.speaker:
        return None  # tool outputs
    if text.endswith("?") or len(words) < 4 or len(words) > 60 or _HEDGE.search(text):
        return None
    work = not piece.speaker and piece.kind not in _NO_MEMORY_KINDS
    if piece.action:  # a logged step: what it states for good, if anything
        if work and (found := _from_work(piece, text)):
            return found
        if piece.action not in ("thinking", "decision", "finding"):
            return None  # other steps (commands, edits) state events, not lasting memories
    subject = piece.speaker or "User"
    text = without_instruction(text)
    if piece.role == "assistant" and not piece.speaker:
        text = re.sub(r"\b[Yy]our\b", "the user's", text)
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
        or (_from_work(piece, text) if work else None)
    )


def _from_work(piece: Piece, text: str) -> Candidate | None:
    """What a working session (requests, the agent's messages and logged steps) states for
    good: a preference about the user, a decision in any wording (or a step the agent tagged
    ``[decision]``), a setting of the environment."""
    if states_user_preference(text):
        return Candidate("preference", _sentence(text), _importance(text, "preference"), text)
    who = "User"  # as _fact: first person in a working session is the user's
    worded = states_decision(text)
    if not worded and (found := setting(text)):
        return Candidate("fact", third_person(found, who), _importance(found, "fact"), text)
    tagged = piece.action.rsplit(".", 1)[-1] == "decision"
    if (tagged or worded) and not _TEMPORARY.search(text):
        if piece.role == "user" and _RULE.match(text):
            return None  # the user's own "always ..." is a rule: _rule words it
        kind = "preference" if _RULE.match(text) else "fact"
        memory = third_person(_sentence(text), who)
        return Candidate(kind, memory, _importance(text, kind), text)
    return None


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] if text.split()[0].isalpha() else text


# ---- chat: what people say about their lives ---------------------------------------------------

_FILLER = re.compile(
    r"^(?:(?:yeah|yep|yes|yup|oh|ooh|wow|whoa|haha|hah|lol|well|so|actually|anyway|anyways|hey|"
    r"hi|hello|thanks|thank you|ok|okay|sure|totally|definitely|absolutely|aw+|omg|ah|hmm|"
    r"indeed|true|right|cool|great|nice|awesome|by the way|btw|speaking of which|also|and|but|"
    r"plus)\b[,!.:;\s-]*)+",
    re.I,
)
_SINCE_WE_TALKED = re.compile(
    r"\b(?:since|after) (?:the )?(?:last time )?(?:we|our) (?:last )?(?:talked|chatted|spoke|chat|"
    r"talk|conversation)\b,?",
    re.I,
)
_ELIDED = re.compile(
    r"^(?:(?P<been>been)|(?P<still>(?:still )?(?=\w+ing (?:on|at|as|with|for)\b))|"
    r"(?:just |finally |recently )?"
    r"(?=(?:started|finished|joined|got|went|made|took|ran|won|met|bought|began|saw|had|"
    r"signed|visited|tried|adopted|moved)\b))",
    re.I,
)
_SPEAKER_I = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|(?i:my|mine|we|we're|we've|we'll|our|ours))\b")
_TO_LISTENER = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|you'd|ya|u)\b", re.I)
_CHAT_HEDGE = re.compile(
    r"\b(?:maybe|might|perhaps|probably|i think|i guess|not sure|wonder\w*|i bet|i hope you|"
    r"i feel like|kind of|sort of|if i|would be|could be|imagine|hard to (?:say|choose|pick)|"
    r"not (?:yet )?decided|i wish|thinking|wondering|remembering)\b",
    re.I,
)
_PASSING = re.compile(
    r"\b(?:right now|at the moment|raining|rainy|sunny|snowing|hot today|cold today|"
    r"tired|exhausted|hungry|sleepy|bored|swamped|busy|off to|about to|on my way|heading out|"
    r"tonight|gotta go|talk (?:to you )?(?:soon|later)|catch you later|see you|take care|"
    r"good night|feel|feels|feeling|felt|glad|sorry)\b",
    re.I,
)
_PREFERENCE_CHAT = re.compile(
    r"\b(?:I (?:really |also |totally |absolutely |just |still )?(?:love|like|enjoy|prefer|adore|"
    r"hate|dislike|can't stand)|my (?:all-time )?fav(?:ou?rite|e)\b|I'm (?:a (?:big |huge )?fan "
    r"of|passionate about|into|obsessed with|crazy about)|(?:is|are) my (?:passion|favou?rite|"
    r"thing))\b",
    re.I,
)
_LIFE_VERBS = (
    r"went|got|started|start|joined|moved|bought|adopted|married|engaged|graduated|"
    r"signed up|visited|finished|learned|learnt|painted|ran|won|lost|met|made|took|worked|"
    r"become|became|interested in|"
    r"work (?:as|at|for|in|on)|working (?:as|at|for|in|on)|live[sd]? (?:in|at|near|with)|"
    r"living (?:in|at|near|with)|studied|study|studying|volunteer\w*|research\w*|"
    r"plan(?:ning)? to|planned|going to|gonna|decided|became|traveled|travelled|"
    r"been (?!thinking|wondering|feeling|slogging|struggling|trying|meaning|dealing|going|"
    r"considering|reflecting|busy|hanging|chilling|doing)\w+ing|"
    r"attended|competed|played|built|created|wrote|written|published|performed|opened|"
    r"launched|received|found|cooked|baked|sold|saw|watched|read|tried|hiked|camped|climbed|"
    r"organized|organised|hosted|gave|donated|raised|taught|teach|coached|coach|trained|"
    r"practic\w+|recorded|released|designed|grew|planted|drew|sang|flew|drove|celebrated|"
    r"named|rescued|quit|retired|hired|promoted|enrolled|completed|passed|failed|injured|broke|"
    r"recovered|diagnosed|born|grew up|used to|own|"
    r"(?:have|has|had|got) (?:a|an|two|three|four|five|\d+|some|lots)"
    r"(?! (?:\w+ )?(?:fun|time|blast|lot|great|good|hard|tough|rough|crazy|busy|wild|day|"
    r"week|chance|feeling|idea|question|few)\b)|am an?|'m an?"
)
_LIFE_EVENT = re.compile(
    r"(?:\b(?:I|(?i:we|my|our))\b|\bI'(?:m|ve|d|ll)\b|\b(?i:we)'(?:ve|re|d|ll)\b)"
    r"(?:[\s,]+[\w'-]+){0,8}?[\s,]+(?:" + _LIFE_VERBS + r")\b(?!')(?! (?:bit|little|lot)\b)"
    r"|\bI'm an? (?!bit\b|little\b|lot\b)",
)
_NOT_ANCHOR = re.compile(
    r"^(?:just |so )?(?:it's|its|it is|it was|that's|that is|that was|this is|these are|"
    r"there's|there is|here's|here is|here are|what a|how|check (?:it|this|that|'em|them) out|"
    r"look at|take a look|let's|hope|wish|can't wait|cannot wait|as for)\b"
    r"|\b(?:got|made|took|did|tried|bought|found|wrapped|finished|started|saw|had|loved?|liked?|"
    r"enjoy(?:ed)?|tried making|doing) (?:it|that|this|one|them|those|these)\b",
    re.I,
)
_RELATION = re.compile(
    r"\bmy (?:\w+ )?(?:sister|brother|siblings?|mom|mother|mum|dad|father|parents?|husband|wife|"
    r"partner|boyfriend|girlfriend|fianc\w+|son|daughter|kids?|children|family|fam|friends?|"
    r"grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|niece|nephew|dogs?|cats?|pets?|"
    r"puppy|kitten|job|boss|team|colleague|coworker|house|home|apartment|car|birthday|hobby|"
    r"passion|goal|dream|business|company|shop|studio|band|book|career|degree|school|class|"
    r"course|teacher|coach|mentor|neighbou?r|roommate)\b",
    re.I,
)
_IMPERATIVE = re.compile(
    r"(?:have|keep|enjoy|let|try|check|take|go|give|come|don't|do|stay|remember|make sure|"
    r"good luck|see|look|tell|send|say|hang|stop|be)\b",
    re.I,
)
_FUTURE = re.compile(
    r"\b(?:will|'ll|gonna|going to|plan(?:ning)? to|hop(?:e|ing) to|would like to|wanna)\b", re.I
)
_WHEN = re.compile(
    r"\d|\b(?:tomorrow|tonight|next (?:\w+ )?(?:week|weekend|month|year|summer|winter|spring|"
    r"fall|season|semester|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"this (?:weekend|summer|winter|spring|fall|month|year)|january|february|march|april|may|"
    r"june|july|august|september|october|november|december|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|soon)\b",
    re.I,
)
_HABIT = re.compile(
    r"\b(?:I|we)\b(?: \w+){0,3} (?:go|take|play|run|walk|swim|cook|bake|paint|write|teach|"
    r"work|visit|attend|watch|read|practice|train|volunteer|meet|hike|ride|use|do)\b"
    r"[^.!?]*\b(?:every|each|twice|once a|three times|usually|often|always|regularly|weekly|"
    r"daily|on weekends|most days)\b",
    re.I,
)
_FAMILY = re.compile(
    r"\b(?:kids?|children|family|fam|husband|wife|partner|son|daughter|mom|dad|parents)\b", re.I
)


def _from_turn(turn: list[Piece], listener: str | None = None) -> Candidate | None:
    """One turn of a chat between people → one memory: the sentences that state something
    lasting about the speaker (what they did, have, are, like or plan with a date), with the
    sentences right after that say more about it, and the photo shared with them. Questions,
    greetings, thanks, advice and compliments to the listener, hedges, passing states and
    undated intentions are left out. "you" becomes ``listener`` (in a chat of two)."""
    subject = turn[0].speaker or "User"
    kept: list[str] = []
    evidence: list[str] = []
    preference = anchored = False
    for piece in turn:
        text, caption = _split_caption(piece.text)
        sentence = _clean_chat(text)
        if listener and sentence.startswith(f"{listener}, "):
            sentence = _clean_chat(sentence[len(listener) + 2 :])
        if sentence and not sentence.endswith("?") and not _TO_LISTENER.match(sentence):
            if _is_anchor(sentence):
                anchored = True
                preference = preference or bool(_PREFERENCE_CHAT.search(sentence))
                kept.append(sentence)
                evidence.append(text.strip())
            elif anchored and _elaborates(sentence):
                kept.append(sentence)
                evidence.append(text.strip())
        if caption and anchored:
            kept.append(f"[{subject} shared {caption}.]")
    if not anchored:
        return None
    we = f"{subject}'s family" if any(_FAMILY.search(k) for k in kept) else f"{subject} and others"
    text = " ".join(_to_listener(third_person(k, subject, we=we), listener) for k in kept)
    kind = "preference" if preference else "fact"
    importance = 0.6 if preference else 0.5
    return Candidate(kind, _trim(text), importance, " ".join(evidence)[:MAX_TEXT])


def _elaborates(sentence: str) -> bool:
    """A sentence that can follow a memory's first sentence: more about it, not a passing
    state, a hedge, or words to the listener."""
    if _PASSING.search(sentence) or _CHAT_HEDGE.search(sentence) or _IMPERATIVE.match(sentence):
        return False
    return len(content_words(sentence)) >= 3 and not _TO_LISTENER.search(sentence)


def _to_listener(text: str, listener: str | None) -> str:
    """What a speaker said about "you", with the listener's name (when known)."""
    if listener is None or not _TO_LISTENER.search(text):
        return text
    text = re.sub(r"\byou (?:are|were)\b", lambda m: f"{listener} {_BE[m.group(0)[4:]]}", text)
    text = re.sub(r"\byou've\b", f"{listener} has", text)
    text = re.sub(r"\byou're\b", f"{listener} is", text)
    text = re.sub(r"\byou (have|do)\b", lambda m: f"{listener} {IRREGULAR[m.group(1)]}", text)
    text = re.sub(r"\byours?\b", f"{listener}'s", text)
    return re.sub(r"\byou\b", listener, text)


_BE = {"are": "is", "were": "was"}


def _split_caption(text: str) -> tuple[str, str]:
    match = re.search(r"\s*\[shares (?P<what>[^\]]*)\]\s*$", text)
    if not match:
        return text, ""
    return text[: match.start()], match.group("what")


def _clean_chat(text: str) -> str:
    """A chat sentence without its leading fillers ("Yeah, so, ...") and with an elided "I"
    put back ("Been running more" → "I've been running more")."""
    text = _FILLER.sub("", text.strip().replace("\u2019", "'")).strip(" ,;:-–—")
    text = _SINCE_WE_TALKED.sub("", text).strip(" ,;:-–—")
    elided = _ELIDED.match(text)
    if elided:
        if elided.group("been"):
            text = "I've " + text[:1].lower() + text[1:]
        elif elided.group("still") is not None:
            text = "I'm " + text[:1].lower() + text[1:]
        else:
            text = "I " + text[:1].lower() + text[1:]
    return text[:1].upper() + text[1:]


def _is_anchor(sentence: str) -> bool:
    """A first-person statement of something lasting and checkable."""
    if not _SPEAKER_I.search(sentence) or _PASSING.search(sentence):
        return False
    if _CHAT_HEDGE.search(sentence) or len(content_words(sentence)) < 2:
        return False
    if _TO_LISTENER.search(" ".join(sentence.split()[:5])):
        return False  # "I love your ...", "If you want, I'm happy to ..."
    if _FUTURE.search(sentence) and not _WHEN.search(sentence):
        return False  # an intention with no date is not yet a fact
    if _NOT_ANCHOR.search(sentence):
        return False
    if _PREFERENCE_CHAT.search(sentence):
        return True
    if _HABIT.search(sentence):
        return True
    return bool(_LIFE_EVENT.search(sentence) or _RELATION.search(sentence))


def _trim(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1].rsplit(" ", 1)[0] + " …"


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
    error = _clause(strip_volatile(" ".join(p.text for p in errors)), 200, first=False)
    how = _clause(strip_volatile(fix.text, durations=False), 240, first=not says_fixed(fix.text))
    if _FIXED_BY.match(how):  # "Fixed by starting the database ..." says how already
        text = f"When {error}: {how[:1].lower()}{how[1:]}"
    else:
        text = f"When {error}: fix with {how}"
    evidence = " → ".join(p.text for p in chain)
    return Candidate("skill", text, IMPORTANCE["skill"], evidence[:MAX_TEXT])


_FIXED_BY = re.compile(r"^(?:fixed|resolved|solved|worked around)\b", re.I)


def _importance(text: str, kind: str) -> float:
    bonus = 0.1 if re.search(r"\b(?:always|never|must|important)\b", text, re.I) else 0.0
    return round(min(0.9, IMPORTANCE[kind] + bonus), 2)


def _clause(text: str, limit: int, first: bool = True) -> str:
    text = text.strip()
    if first:
        text = re.split(r";\s+|(?<!\.\.)(?<=[.!?])\s+", text, maxsplit=1)[0]
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
    """The exact-duplicate key (:func:`mdmem.text.same_text`), hashed."""
    return hashlib.sha1(same_text(text).encode()).hexdigest()


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
    from mdmem.distill.llm import complete

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
                text=one_line(item["text"]),
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
