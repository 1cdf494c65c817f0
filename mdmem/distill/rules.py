"""How compaction and extraction read a conversation: pieces (a sentence, a tool call, a
result), what kind each is, and the text rules both share (volatile details, instructions,
error→fix chains, third person)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mdmem.text import one_line

MAX_TEXT = 400


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


Kind = str


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


DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})(?!\d)")


_ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Mt", "Jr", "Sr", "vs")
"""Words whose full stop ends an abbreviation, not a sentence ("Mr. Haddad"); "No." only
before a number ("No. 5", where "No. I didn't" is two sentences)."""
_SENTENCE_END = re.compile(
    "".join(rf"(?<!\b{word}\.)" for word in _ABBREVIATIONS)
    + r"(?!(?<=\bNo\.)\s+\d)(?<=[.!?。！？])\s+(?=[\"'(\[]?[A-Z0-9\u4e00-\u9fff])|\n+"
)


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


REQUEST = re.compile(
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


_STAMPS = (
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b\d{1,2}:\d{2}:\d{2}\b"
    r"|\b(?:run|job|build|pipeline|attempt|pid|request|req)[ #:]+\d{4,}\b,?"
    r"|#\d{5,}\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
)
_VOLATILE = re.compile(
    _STAMPS
    + r"|\b(?:in |after |took )?\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|min|mins|minutes)\b",
    re.I,
)
"""What changes from one run to the next: timestamps, durations, run numbers, hashes."""


_VOLATILE_BUT_DURATIONS = re.compile(
    _STAMPS + r"|\b(?:in |after |took )\d+(?:\.\d+)?\s?(?:ms|s|sec|secs)\b", re.I
)
"""The same, but a duration stays unless it says how long something took: in a fix it is a
setting ("a grace period of 30 seconds"), not how long a run took."""


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
            pieces.append(replace(piece, slot=slot_of(text, piece)))
    return pieces


def classify(text: str, action: str = "", role: str = "user", speaker: str | None = None) -> Kind:
    """The rubric's kind of one piece, from its ``[action]`` tag (session events) or its words.

    A dotted tag (``node.error``) is read by its last part."""
    action = action.rsplit(".", 1)[-1]
    if action in _ERROR_ACTIONS:
        return "error"
    if action in _CHANGE_ACTIONS:
        if _TEST.search(text) and not _CHANGE.search(text):
            return "test"  # "Ran pytest tests/test_x.py: 40 passed" reports, changes nothing
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
    words = word_set(text)
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
    return bool(REQUEST.match(text) or _MORE_REQUEST.match(text))


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


def slot_of(text: str, piece: Piece | None = None) -> str | None:
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


def chain_from(pieces: list[Piece], start: int, used: set[int]) -> list[int]:
    """An error and what answered it: its cause (thinking right after), the fix, and the fix's
    result (the next test or result). Stops at the next error; in chat, at a turn by someone
    else. The fix is the step that says it fixed the error (a ``[fix]`` event, "fixed",
    "resolved", "works now") when one follows before the next error, else the first change."""
    chain = [start]
    stream = bool(pieces[start].action)
    while (  # adjacent error lines of one stream are one error (status codes, then the cause)
        stream
        and chain[-1] + 1 < len(pieces)
        and pieces[chain[-1] + 1].kind == "error"
        and pieces[chain[-1] + 1].action
    ):
        chain.append(chain[-1] + 1)
    window: list[int] = []
    for n in range(chain[-1] + 1, min(len(pieces), start + 8)):
        piece = pieces[n]
        if n in used or piece.kind == "error" or piece.speaker != pieces[start].speaker:
            break
        window.append(n)
    fix = _fix_in(pieces, window, [pieces[i] for i in chain], stream)
    if fix is None:
        return [n for n in chain if pieces[n].kind == "error"]
    if stream:  # the cause: what the agent thought about it before the fix
        chain += [
            n
            for n in window
            if n < fix and pieces[n].kind in ("thinking", "decision") and pieces[n].action
        ]
    chain.append(fix)
    chain += [n for n in window if n > fix and pieces[n].kind in ("test", "result")][:1]
    return chain


def _fix_in(
    pieces: list[Piece], window: list[int], errors: list[Piece], stream: bool
) -> int | None:
    """Which step of ``window`` fixed the error: the first that says so, else the first
    change (in prose, one about the error: a closing summary is no fix for it)."""
    changes = [
        n
        for n in window
        if pieces[n].kind in ("file", "fix") or (stream and pieces[n].kind == "action")
    ]
    if not stream:
        changes = [n for n in changes if _about(pieces[n], errors)]
    said = [n for n in changes if pieces[n].kind == "fix" or says_fixed(pieces[n].text)]
    found = said or changes
    return found[0] if found else None


_FIXED = re.compile(
    r"\b(?:fix(?:ed|es)|resolved|solved|that did it|did the trick|works now|now works|"
    r"pass(?:es)? now|now pass(?:es)?|worked)\b",
    re.I,
)
_NOT_FIXED = re.compile(
    r"\b(?:not|n't|never|still|no longer)\b[^.;]{0,20}\b(?:fix|resolv|solv|work|pass)", re.I
)


def says_fixed(text: str) -> bool:
    """Does a step say it fixed something ("Fixed by ...", "that did it", "passes now")?"""
    return bool(_FIXED.search(text)) and not _NOT_FIXED.search(text)


def _about(fix: Piece, errors: list[Piece]) -> bool:
    """Does a prose fix share a content word with the error it would fix?"""
    wanted = frozenset().union(*(stem_set(p.text) for p in errors))
    return bool(wanted & stem_set(fix.text))


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


def word_set(text: str, numbers: bool = True) -> frozenset[str]:
    """Content words, lowercased; numbers kept as themselves or folded to '#'."""
    out = set()
    for word in re.findall(r"\w+", text.lower()):
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        if not numbers and any(c.isdigit() for c in word):
            word = "#"
        out.add(word)
    return frozenset(out)


def stem_set(text: str, volatile: bool = True) -> frozenset[str]:
    """Content words folded to a rough stem ("passed", "passes" → "pass"); with
    ``volatile=False`` durations, timestamps and run numbers are left out first."""
    if not volatile:
        text = strip_volatile(text)
    out = set()
    for word in word_set(text):
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 2 and word.endswith(suffix) and not word.endswith("ss"):
                word = word[: -len(suffix)]
                break
        out.add(word)
    return frozenset(out)


def strip_volatile(text: str, durations: bool = True) -> str:
    """``text`` without what differs between two runs of the same thing (timestamps,
    durations, run and job numbers, commit hashes), so it can be reused and deduplicated.
    ``durations=False`` keeps bare durations (only "took 3.2 s" and the like go)."""
    text = (_VOLATILE if durations else _VOLATILE_BUT_DURATIONS).sub("", text)
    text = re.sub(r"\(\s*\)|\[\s*\]", "", text)
    text = re.sub(r"^[\s,;:]+|\s+([,;:.])(?=\s|$)", r"\1", text)
    return one_line(text).strip(" ,;")


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _message_date(message: dict[str, str], stamped: re.Match[str] | None) -> str | None:
    for key in ("timestamp", "date"):
        if match := DATE.match(message.get(key, "")):
            return match.group(1)
    if stamped and stamped.group("date"):
        return stamped.group("date")
    match = DATE.match(message.get("content", "").lstrip())
    return match.group(1) if match else None


def error_fix_chains(pieces: list[Piece]) -> list[list[Piece]]:
    """Every error that got a fix, as [error..., cause?, fix, result?] (for skills)."""
    used: set[int] = set()
    out: list[list[Piece]] = []
    for n, piece in enumerate(pieces):
        if piece.kind != "error" or n in used:
            continue
        chain = chain_from(pieces, n, used)
        used.update(chain)
        found = [pieces[i] for i in chain]
        if not any(p.kind in ("file", "fix", "action") for p in found):
            continue
        if not any(p.kind == "fix" or says_fixed(p.text) for p in found) and _comes_back(
            pieces, chain
        ):
            continue  # the error came back after this step: it was no fix
        out.append(found)
    return out


def _comes_back(pieces: list[Piece], chain: list[int]) -> bool:
    """Does the chain's error happen again later (the same words, volatile details aside)?"""
    error = stem_set(pieces[chain[0]].text, volatile=False)
    return any(
        p.kind == "error" and jaccard(stem_set(p.text, volatile=False), error) >= 0.6
        for p in pieces[chain[-1] + 1 :]
    )


def third_person(text: str, subject: str, *, we: str | None = None) -> str:
    """A first-person statement as a statement about ``subject``, where that is cheap:
    "I prefer httpx" → "User prefers httpx"; "my dog is Max" → "Ana's dog is Max". ``we``
    names who "we" are (default: "The team" at the start of a sentence)."""
    out = text.strip()
    possessive = "the user's" if subject == "User" else f"{subject}'s"
    out = re.sub(
        r"\bI('m|'ve|'ll|'d)\b", lambda m: f"{subject} {_CONTRACTED[m.group(1).lower()]}", out
    )
    out = re.sub(
        r"\bI((?: [a-z]+ly| just| also| still| even| never| always| already| ever| sometimes"
        r"| often| too)?) "
        r"([a-z']+)\b",
        lambda m: f"I{m.group(1)} {_third(m.group(2))}",
        out,
    )
    out = re.sub(r"\bI\b", subject, out)
    if we is None:
        out = re.sub(
            r"^[Ww]e (use|run|deploy|prefer|need|want)\b",
            lambda m: f"The team {m.group(1)}s",
            out,
        )
        out = re.sub(r"^[Ww]e\b", "The team", out)
        out = re.sub(r"^[Oo]ur\b", "The team's", out)
    else:
        out = re.sub(r"\b[Ww]e're\b", f"{we} are", out)
        out = re.sub(r"\b[Ww]e've\b", f"{we} have", out)
        out = re.sub(r"\b[Ww]e'll\b", f"{we} will", out)
        out = re.sub(r"\b[Ww]e'd\b", f"{we} would", out)
        out = re.sub(r"\b[Ww]e\b", we, out)
        ours = f"{we}'" if we.endswith("s") else f"{we}'s"
        out = re.sub(r"\b[Oo]urs?\b", ours, out)
        out = re.sub(r"\b[Uu]s\b", we, out)
        out = re.sub(r"\b[Oo]urselves\b", "themselves", out)
    out = re.sub(r"\b[Mm]y\b", possessive, out)
    out = re.sub(r"\b[Mm]ine\b", possessive, out)
    out = re.sub(r"\bmyself\b", "themselves", out)
    out = re.sub(r"\bme\b", subject, out)
    out = re.sub(r"\b(\w+)'s own\b", r"\1's own", out)
    out = out[:1].upper() + out[1:]
    return out if len(out) <= MAX_TEXT else out[: MAX_TEXT - 1].rsplit(" ", 1)[0] + " …"


_CONTRACTED = {"'m": "is", "'ve": "has", "'ll": "will", "'d": "would"}


IRREGULAR = {
    "haven't": "hasn't",
    "am": "is",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "go": "goes",
    "was": "was",
    "can't": "can't",
}


_UNCHANGED = frozenset(
    """can could will would shall should must may might did didn't wasn't won't wouldn't
    couldn't shouldn't went got had made took saw ran won lost met bought found gave told felt
    left kept came became began wrote heard thought knew grew drew flew held sold taught built
    spent sent said put set let hit cut quit read been being was were a an the to of""".split()
)


def _third(word: str) -> str:
    """``word`` after "I", as after "she": "prefer" → "prefers"; past tenses stay."""
    lower = word.lower()
    if lower in IRREGULAR:
        return IRREGULAR[lower]
    if lower in _UNCHANGED or lower.endswith(("ed", "ing", "'t")) or "'" in lower:
        return word
    if lower.endswith(("s", "sh", "ch", "x", "o", "z")):
        return word + "es"
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that carry meaning (lowercased, stopwords out)."""
    return frozenset(w for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS)
