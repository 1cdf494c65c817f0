"""Rules for what a working session states that outlasts it, beyond "I prefer" and "we
decided": a preference stated about the user, a setting of the environment logged by a step
("production PostgreSQL is 15", "GUNICORN_WORKERS is 4"), and a decision in any wording
("Going with X", "Decision: ...", "switched from A to B", or an event the agent tagged
``[decision]``). Each function answers for one sentence; :mod:`mdmem.distill.extract` decides
which sentences to ask about."""

from __future__ import annotations

import re

_USER_PREFERS = re.compile(
    r"\b(?:the )?user(?:'s)? (?:(?:also |really |strongly )?(?:prefers|wants|likes|requires|"
    r"dislikes|hates|would rather)|does not want|doesn't want|asked for|insists on)\b"
    r"|^(?:the )?user(?:'s)? preferences?\s*:"
    r"|\b(?:as|like) the user (?:prefers|wants|asked|requires|likes|requested)\b"
    r"|\bper the user(?:'s (?:preference|request|rule|instructions?))?\b"
    r"|\bthe user's (?:preference|rule)\b",
    re.I,
)


def states_user_preference(text: str) -> bool:
    """A sentence that says what the user wants ("The user prefers small pull requests",
    "User preference: ...", "Wrote the tests with fixtures, as the user asked")."""
    return bool(_USER_PREFERS.search(text))


_DECIDED = re.compile(
    r"^(?:decision|decided|rule|policy|convention)\s*:"
    r"|\b(?:decided|agreed|going with|went with|settled on|opted for|we chose|we(?:'ll| will) "
    r"use|let's use|from now on|switched\b[^.;]*\bto|replaces|replaced (?:by|with)|"
    r"instead of)\b",
    re.I,
)


def states_decision(text: str) -> bool:
    """A sentence worded as a decision or a change of one."""
    return bool(_DECIDED.search(text))


_VALUE = re.compile(r"\d|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b[A-Z]{3,}\b|\w{2,}[-_.]\w{2,}|://")
"""A concrete value: a number or version, an ALL_CAPS setting, an identifier with ``-`` ``_``
or ``.`` (a bucket, a host, a file), a URL."""
_LINK = re.compile(
    r"\b(?:is|are|uses?|runs?(?: on)?|listens on|points (?:at|to)|goes to|go to|sets|"
    r"defaults to|pinned (?:to|at)|on port|(?:is|are) (?:\w+ed|set|kept|run) (?:in|on|to|at|by|"
    r"from|with|as))\b|\s=\s",
    re.I,
)
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][\w .'-]{2,60}?):\s+(?P<value>\S+)$")
_WORK_LOG = re.compile(
    r"^(?:ran|run|running|edited|editing|read|reading|wrote|writing|opened|created|added|"
    r"renamed|moved|deleted|removed|updated|looked|searched|tried|listed|installed|started|"
    r"plan|reviewed|asked|split|refactored|merged|committed|pushed)\b",
    re.I,
)
_NOT_SETTING = re.compile(
    r"\?$|\.\.\.|…|\b(?:I|I'm|I've|maybe|might|perhaps|probably|should|would|could|will|todo|"
    r"done|next step|passed|failed|failing|errors?|pushed|committed|merged)\b",
    re.I,
)


def setting(text: str) -> str | None:
    """The sentence, as a memory, when it states a setting of the environment: a named thing
    bound to a concrete value ("Production runs PostgreSQL 15", "MAX_UPLOAD_MB is 10", "Sentry
    project for the backend: invoices-api", "Checked the server version: production PostgreSQL
    is 15"). Log lines of the agent's own work (runs, edits, reads), questions, hedges and test
    results are none. A closing "now"
    goes (a memory is dated): "X is 16 now" then reads as "X is 15" with another value, which
    is how deduplication tells a changed value."""
    text = re.sub(r",?\s+now([.!]?)$", r"\1", text.strip())
    words = text.split()
    if not 3 <= len(words) <= 30 or _WORK_LOG.match(text) or _NOT_SETTING.search(text):
        return None
    pair = _KEY_VALUE.match(text.rstrip("."))
    if pair and _VALUE.search(pair.group("value")):
        return text
    link = _LINK.search(text)
    if link is None or link.start() == 0:
        return None
    return text if _VALUE.search(text) else None
