"""Secrets out of memory: find API keys, private keys, tokens and passwords, and mask them.

A :class:`Redactor` is a value built from the ``[redact]`` config. ``redact(text)`` returns the
text with every secret replaced by ``[REDACTED:kind]`` and the spans it replaced, so a write can
say how many it masked. Every program write, the index and everything sent to a model go
through one; a person's own file is never rewritten for it (its secrets are masked in the index,
search results and context instead).

The rules are provider formats as published (prefix, alphabet, length), private key blocks,
JWTs, credentials in URLs, ``password=`` / ``token:`` / ``secret=`` assignments, and
high-entropy values in assignments. Each rule runs only when its trigger (a literal prefix or
keyword) is in the text, so ordinary prose costs a few substring checks. Why not a library:
docs/secrets.md, "The detector: measured, then chosen" (detect-secrets and others measured on
tests/data/secrets/).

Structure is not text to mask: a write's ids, keys and mdmem's own labels (:class:`Field`, found
by :mod:`mdmem.memory.structure`) are kept as they are and checked against provider formats only
(:meth:`Redactor.provider_spans`); one holding such a secret raises :class:`SecretInField`.
Every rule is linear in the text: quantifiers after a trigger are bounded or cannot backtrack,
and the assignment scan finds each value's end once (tests/integration/test_redact.py times
100 KB of near-matches per rule).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mdmem.errors import MdmemError

RULES_VERSION = 4
"""Bumped when the built-in rules change: indexes built with other rules are rebuilt."""
MEMO_SIZE = 8192
MARK = "[REDACTED:{kind}]"
_MARK_RE = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class Span:
    """A secret found in a text: ``text[start:end]`` is replaced by ``[REDACTED:kind]``."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class Redaction:
    """A text with its secrets masked, and the spans (of the original text) that were."""

    text: str
    spans: tuple[Span, ...] = ()

    @property
    def count(self) -> int:
        return len(self.spans)

    def kinds(self) -> dict[str, int]:
        return dict(Counter(s.kind for s in self.spans))


@dataclass(frozen=True)
class Field:
    """A structural field of a text mdmem writes (an id, a key, a timestamp, one of mdmem's own
    labels): never rewritten. ``text[start:end]`` is kept as it is; with ``checked``, it is a
    value searched for provider-format secrets only (a write holding one is refused); without,
    it is a label (``# Session:``), blanked while the text around it is searched, so it is never
    read as the name of an assignment. Which fields a file has: :mod:`mdmem.memory.structure`."""

    start: int
    end: int
    name: str
    checked: bool = True


class SecretInField(MdmemError, ValueError):
    """A structural field (a key, an id) holds a secret in a provider's format: it cannot be
    masked (that would corrupt the key), so the write is refused."""

    def __init__(
        self, name: str, masked: str, kind: str, path: str = "", secrets: tuple[str, ...] = ()
    ) -> None:
        self.name, self.masked, self.kind, self.path = name, masked, kind, path
        self.secrets = secrets
        """The secrets themselves (never in the message): to mask them elsewhere, such as in
        a file name made from the key."""
        super().__init__(
            f"{path + ': ' if path else ''}the {name} {masked!r} holds a secret ({kind}); a "
            f"{name} is never masked (that would corrupt it), so nothing was written: keep the "
            f"secret out of the {name}"
        )


FieldFinder = Callable[[str, int, int], Iterable[Field]]
"""``(text, start, end)`` → the structural fields of ``text`` that meet ``[start, end)``."""

Check = Callable[[str], bool]


@dataclass(frozen=True)
class Rule:
    """One kind of secret: where ``regex`` matches, group ``group`` is the secret (if
    ``check`` accepts it; group 0: the first group that matched, else the whole match)."""

    kind: str
    regex: str
    flags: int = 0
    group: int = 0
    check: Check | None = None
    boundary: bool = False
    """Reject a match glued to a longer word (``xsk-ant-...``)."""
    triggers: tuple[str, ...] = ()
    """The rule runs only if one of these literals is in the text; none: it always runs."""
    provider: bool = True
    """A format a provider publishes (prefix, alphabet, length), not a guess from context:
    the only rules a structural field (an id, a key) is checked against."""

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """Compiled on first use: importing mdmem (every CLI call) compiles nothing."""
        return re.compile(self.regex, self.flags)


# ---- value checks ------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}?       # $VAR, ${VAR}
      | \$\{\{.*|\{.*|<.*|%\(.*             # templates: ${{ }}, {{ }}, {name}, <your key>
      | \*+|x{3,}|X{3,}|\.{3,}|…|-+          # masks: ***, xxx, ...
      | [A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+        # CONSTANT_NAMES (env var names, REPLACE_ME)
      | (?i:none|null|nil|true|false|undefined|changeme|change_me|replace_?me|example
            |placeholder|your[_-].*|my[_-]?(?:password|token|secret|key).*|redacted|secret
            |password|passwd|pass|pwd|token|hidden|masked|empty|required|optional|str|string
            |int)
      | (?:os\.|process\.|env\.|getenv|environ|settings\.|config\.|self\.|secrets\.).*
    )$""",
    re.X,
)
_HEXISH = re.compile(r"^[0-9a-fA-F\-]+$")
_HASH_PREFIX = re.compile(r"^(?:sha\d{1,3}|md5|blake2[bs]?|h\d)[-:_]", re.I)
_PATH = re.compile(r"^[~.]{0,2}/[\w./\-]*$")
_WORD_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+|[^A-Za-z0-9]")
_PORT_PATH = re.compile(r"^\d{1,5}(?:/|$)")
_UPPER, _LOWER, _DIGIT = re.compile("[A-Z]"), re.compile("[a-z]"), re.compile("[0-9]")


def entropy(value: str) -> float:
    """Shannon entropy in bits per character of ``value``'s own characters."""
    if not value:
        return 0.0
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _not_placeholder(value: str) -> bool:
    return not _PLACEHOLDER.match(value) and "[REDACTED:" not in value


def _is_path(value: str) -> bool:
    """A file path (``/etc/app/key.pem``, ``./secrets``), not a base64 key that happens to
    start with ``/`` (AWS secret keys, Azure ``AccountKey=`` values do, one in 64): a path's
    parts are words; a key has a long run mixing upper and lower case (and digits)."""
    if not _PATH.match(value):
        return False
    return not any(_random_part(part) for part in value.split("/"))


def _random_part(part: str) -> bool:
    if len(part) < 12 or not (_UPPER.search(part) and _LOWER.search(part)):
        return False
    return bool(_DIGIT.search(part)) or not _camel_case(part)


def _password_value(value: str) -> bool:
    """After ``password=``: anything but a placeholder, a word in prose, a call or a path."""
    if len(value) < 4 or not _not_placeholder(value) or "(" in value or _is_path(value):
        return False
    # 'see', 'changeme', 'required': a word in prose, not a password
    return not (value.isalpha() and value.islower() and len(value) < 16)


def _url_password(value: str) -> bool:
    """After ``scheme://user:``: not a placeholder, and not a port and path (``host:8443/x``)."""
    return _not_placeholder(value) and not _PORT_PATH.match(value)


def _flag_password(value: str) -> bool:
    """``curl -u user:X``: X is a password unless a placeholder or a number (``-u 1000:1000``)."""
    return len(value) >= 3 and not value.isdigit() and _not_placeholder(value)


def _spoken_password(value: str) -> bool:
    """``the password is X`` with no ``=``: X must look made up (letters and digits/symbols)."""
    has_alpha = any(c.isalpha() for c in value)
    has_other = any(c.isdigit() or not c.isalnum() for c in value)
    return len(value) >= 6 and has_alpha and has_other and _password_value(value)


def _token_value(value: str) -> bool:
    """After ``token=`` / ``secret:``: a random-looking string of at least 8 characters."""
    if len(value) < 8 or not _not_placeholder(value) or _is_path(value):
        return False
    if not re.fullmatch(r"[A-Za-z0-9_\-.+/=~!@#$%^&*]+", value):
        return False  # code (calls, attribute chains with brackets), text with spaces
    if re.fullmatch(r"[a-z]+(?:[._\-][a-z]+)*", value):
        return False  # identifiers and dotted names: request.headers, my_token_name
    mixed = _UPPER.search(value) and _LOWER.search(value)
    return bool(_DIGIT.search(value) or mixed or len(value) >= 20)


def _high_entropy(value: str) -> bool:
    """A value in an assignment that looks random: mixed classes, high entropy, no hash."""
    core = value.rstrip("=")
    if len(core) < 20 or not _not_placeholder(core):
        return False
    if _HEXISH.match(core) or _HASH_PREFIX.match(core):
        return False  # git SHAs, UUIDs, checksums: random, but not secret
    if not (_UPPER.search(core) and _LOWER.search(core) and _DIGIT.search(core)):
        return False
    if _camel_case(core):
        return False  # Base64HighEntropyString, UserProfileV2Handler: a name, not a secret
    return entropy(core) >= 3.5 + min(len(core), 64) / 64


def _camel_case(value: str) -> bool:
    """Words run together (``Base64HighEntropyString``): no letter run of one or two that
    holds a lowercase letter, and most letters in words of three or more."""
    letters = words = 0
    for part in _WORD_PARTS.findall(value):
        if part.isdigit():
            if len(part) > 4:
                return False
        elif part.isalpha():
            letters += len(part)
            lower = not part.isupper()
            if lower and len(part) < 3:
                return False
            words += len(part) if lower else 0
    return letters > 0 and words >= 0.6 * letters


# ---- the rules --------------------------------------------------------------------------------
# Each pattern starts with a literal (or a short set of literals), so the regex engine skips
# through text without one at memchr speed; a secret glued to a longer word (``xsk-ant-...``) is
# rejected in code (``boundary``) rather than with a leading look-behind, which would make the
# engine try every position.

_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_END = r"(?![A-Za-z0-9_\-])"
_AWS_VALUE = r"[\"']?(?:\s*[:=]\s*|\s+)[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"


def _rule(
    kind: str,
    triggers: str,
    pattern: str,
    group: int = 0,
    check: Check | None = None,
    flags: int = 0,
    boundary: bool = True,
    provider: bool = True,
) -> Rule:
    return Rule(kind, pattern, flags, group, check, boundary, tuple(triggers.split()), provider)


BUILTIN_RULES: tuple[Rule, ...] = (
    # private keys first: a block may hold strings that look like other secrets
    _rule(
        "private_key",
        "PRIVATE",
        # armor headers (Proc-Type:, DEK-Info:, Version:) and the blank line after them are
        # part of the block, indented too (a YAML `key: |`, a Markdown list); another blank
        # line ends a block cut off before its END line
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:\r?\n[ \t]*[A-Za-z][A-Za-z0-9\-]{0,40}:[^\n]*)*(?:\r?\n[ \t]*(?=\r?\n))?.*?"
        r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|(?=\n[ \t]*\r?\n)|\Z)",
        flags=re.S,
        boundary=False,
    ),
    _rule(
        "private_key",
        "-----END",
        # a key's body cut from its BEGIN line by a blank line (the index keeps paragraphs
        # apart): base64 lines, at most 120, indented or not, that end at an END line
        r"(?m)^[ \t]*((?:[A-Za-z0-9+/=]{16,80}[ \t]*\r?\n[ \t]*){1,120}"
        r"(?:=[A-Za-z0-9+/]{4}[ \t]*\r?\n[ \t]*)?)"
        r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
        group=1,
        boundary=False,
    ),
    _rule("anthropic", "sk-ant-", r"sk-ant-[a-z]{2,8}\d{2}-[A-Za-z0-9_\-]{32,}" + _END),
    _rule(
        "openai",
        "T3BlbkFJ",
        r"sk-(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{10,}T3BlbkFJ[A-Za-z0-9_\-]{10,}"
        + _END,
    ),
    _rule(
        "openai",
        "sk-proj- sk-svcacct- sk-admin-",
        r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}" + _END,
    ),
    _rule("openai", "sk-", r"sk-[A-Za-z0-9]{48}" + _END),
    _rule(
        "aws_access_key",
        "AKIA ASIA ABIA ACCA",
        r"A(?:KIA|SIA|BIA|CCA)[A-Z2-7]{16}(?![A-Za-z0-9])",
    ),
    _rule(
        "aws_secret_key",
        "ecret ECRET",
        r"(?:[Ss]ecret|SECRET)[_\-]?(?:[Aa]ccess|ACCESS)[_\-]?(?:[Kk]ey|KEY)" + _AWS_VALUE,
        group=1,
        boundary=False,
        provider=False,
    ),
    _rule(
        "aws_secret_key",
        "ecret ECRET",
        r"(?:aws|AWS)[_\-]?(?:secret|SECRET)[_\-]?(?:key|KEY)" + _AWS_VALUE,
        group=1,
        boundary=False,
        provider=False,
    ),
    _rule(
        "github",
        "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{60,251})" + _END,
    ),
    _rule(
        "gitlab",
        "glpat- gldt- glrt- glptt- glcbt- glimt- glsoat- glffct- glagent- glft- gloas-",
        r"gl(?:pat|dt|rt|ptt|cbt|imt|soat|ffct|agent|ft|oas)-[A-Za-z0-9_\-]{20,}" + _END,
    ),
    _rule("gitlab", "GR1348941", r"GR1348941[A-Za-z0-9_\-]{20,}" + _END),
    _rule("gitlab", "_gitlab_session", r"_gitlab_session=([0-9a-z]{32})" + _END, boundary=False),
    _rule(
        "slack_webhook",
        "hooks.slack.com",
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_\-/]{20,}",
    ),
    _rule(
        "slack",
        "xox xapp-",
        r"(?:(?:xoxe\.)?xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,})" + _END,
    ),
    _rule("google", "AIza", r"AIza[A-Za-z0-9_\-]{35}" + _END),
    _rule("google", "GOCSPX-", r"GOCSPX-[A-Za-z0-9_\-]{28}" + _END),
    _rule("google", "ya29.", r"ya29\.[A-Za-z0-9_\-]{20,}" + _END),
    _rule("stripe", "k_live_ k_test_", r"[sr]k_(?:live|test)_[A-Za-z0-9]{20,}" + _END),
    _rule("stripe", "whsec_", r"whsec_[A-Za-z0-9]{24,}" + _END),
    _rule("huggingface", "hf_", r"hf_[A-Za-z]{30,}" + _END),
    _rule("huggingface", "api_org_", r"api_org_[A-Za-z0-9]{30,}" + _END),
    _rule("npm", "npm_", r"npm_[A-Za-z0-9]{36}" + _END),
    _rule("pypi", "pypi-", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}" + _END),
    _rule("sendgrid", "SG.", r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _END),
    _rule("twilio", "SK", r"SK[0-9a-fA-F]{32}" + _END),
    _rule("digitalocean", "_v1_", r"do[opr]_v1_[a-f0-9]{64}" + _END),
    _rule("groq", "gsk_", r"gsk_[A-Za-z0-9]{48,}" + _END),
    _rule("xai", "xai-", r"xai-[A-Za-z0-9]{70,}" + _END),
    _rule("shopify", "shp", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _END),
    _rule("docker", "dckr_pat_", r"dckr_pat_[A-Za-z0-9_\-]{27,}" + _END),
    _rule("perplexity", "pplx-", r"pplx-[A-Za-z0-9]{48}" + _END),
    _rule("square", "sq0csp-", r"sq0csp-[A-Za-z0-9_\-]{43}" + _END),
    _rule("square", "EAAA sq0atp-", r"(?:EAAA|sq0atp-)[A-Za-z0-9_\-]{22,60}" + _END),
    _rule("settlemint", "sm_pat_ sm_aat_ sm_sat_", r"sm_[psa]at_[A-Za-z0-9]{16}" + _END),
    _rule(
        "sidekiq",
        "CONTRIBSYS__COM",
        # Sidekiq Pro/Enterprise's gem server credentials, as Bundler reads them from the env
        r"BUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"([a-f0-9]{8}:[a-f0-9]{8})(?![A-Za-z0-9])",
        group=1,
        boundary=False,
    ),
    _rule(
        "jwt",
        "eyJ",
        r"eyJ[A-Za-z0-9_\-]{8,2048}\.eyJ[A-Za-z0-9_\-]{8,16384}\.[A-Za-z0-9_\-]{0,1024}" + _END,
    ),
    _rule(
        "url_credentials",
        "://",
        # the password ends at the first '@' followed by a host and the end of the authority,
        # so it may hold '/' or '@' itself; bounded, so a run of '@'s costs little
        r"://[^\s:@/?#\[\]]{0,256}:([^\s\"'`<>]{1,256}?)@"
        r"[A-Za-z0-9][A-Za-z0-9.\-]{0,253}(?::\d{1,5})?(?=[/?#\s\"'`)>\],;]|$)",
        group=1,
        check=_url_password,
        boundary=False,
        provider=False,
    ),
    _rule(
        "password",
        "assword ASSWORD assphrase ASSPHRASE",
        # "password is X", "the password for the staging db is X" (up to four words between)
        r"(?<![A-Za-z0-9_])[Pp](?:ASS(?:WORD|PHRASE)|ass(?:word|phrase))"
        r"(?:\s+(?:for|of|to|on|at)(?:\s+[^\s\"'`]{1,40}){1,4}?\s+(?:is|was)|(?:\s+(?:is|was))?)"
        r"\s+([^\s\"'`]{6,128})(?<![.,;:)])",
        group=1,
        check=_spoken_password,
        boundary=False,  # (``--password X`` is one: only letters before it make a longer word)
        provider=False,
    ),
    _rule(
        "password",
        "-u --user",
        r"-(?:u[ \t]*|-user[= \t][ \t]*)[\"']?[^\s:\"'`@]{1,128}:([^\s\"'`@]{1,256})",
        group=1,
        check=_flag_password,
        provider=False,  # (boundary: ``pre-update`` is no flag)
    ),
    _rule(
        "secret",
        "earer EARER",
        r"(?:Bearer|bearer|BEARER)\s+([A-Za-z0-9_\-.=+/~]{16,})",
        group=1,
        check=_token_value,
        provider=False,
    ),
)
"""Built-in rules, most specific first: where spans overlap, the earlier rule names the kind.
Each runs only when one of its trigger literals is in the text (most lines of prose hold none).
Assignments (``password=``, ``api_key:``, high-entropy values) are found by
:func:`_assignment_spans`."""

# ---- assignments ------------------------------------------------------------------------------

_OPERATOR = re.compile(r"""[:=][=>]?(?:\*\*)?[ \t]*["']?[^\s"'`,;)\]}<>]{4}""")
_LEAD_IN = re.compile(
    r"""(?:\*\*)?[ \t]*(?:(?:[Bb]earer|[Tt]oken|[Bb]asic)[ \t]+|!![A-Za-z]{1,16}[ \t]+)?"""
)
"""Between an operator and its value: closing bold, spaces, an auth scheme, a YAML tag."""
_UNQUOTED = re.compile(r"""[^\s"'`,;)\]}<>]+""")
_PEEK = 512
"""How much of a value its checks read: a value is judged by its start, masked whole."""
_BLOB = 1024
"""A random-looking value longer than this under a name that says nothing is data (an
image, a certificate), not a secret; under ``token=`` or ``password:`` it is masked whole."""
_PASS_NAME = re.compile(r"password|passwd|passphrase|(?:^|[_.\-])(?:pass|pwd)(?:$|[_.\-])")
_KEY_NAME = re.compile(
    r"token|secret|credential|bearer|auth(?!or)|(?:^|[_.\-])key$|^key|"
    r"(?:api|access|private|signing|session|master|encryption|account|client|app|license|"
    r"service|admin|deploy|ssh|gpg|pgp|hmac|webhook|subscription|storage|x-api)[_.\-]?key"
)
_NOT_SECRET_NAME = re.compile(
    r"tokenizer|token_?count|tokens?_(?:used|in|out|limit)|max_tokens|hashed"  # a hash of one
)
_HASH_NAME = re.compile(
    r"(?:^|[_.\-])(?:sha\d*|md5|hash|checksum|integrity|digest|etag|h\d|rev|commit|revision|"
    r"uuid|guid|id|ref|version|fingerprint|src|href|url|path|file|image|"
    r"session|conversation|conv|thread|run|trace|request|message|msg|call|response|resp|"
    r"list|playlist)$"  # (YouTube's list=PL…: a playlist id)
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_GAP = frozenset("\"' \t*")  # quotes, spaces, Markdown bold (``**db_password**:``)
_B64ISH = re.compile(r"^[A-Za-z0-9+/_\-]+=*$")
_BLOCK_END = re.compile(r"[:=][ \t]*\r?\n")
_BLOCK_HEAD = re.compile(r"([ \t]*)([A-Za-z_][\w.\-]{0,63})[ \t]*[:=][ \t]*\r?\n")
_BLOCK_ITEM = re.compile(r"[ \t]*(?:[-*][ \t]+)?(?:[A-Za-z_][\w.\-]{0,63}[ \t]*[:=](?:[ \t]+|$))?")


def _end_of(pattern: re.Pattern[str], text: str, at: int) -> int:
    """Where ``pattern`` stops matching at ``at``: every part of it is optional, so it matches."""
    match = pattern.match(text, at)
    assert match is not None, pattern.pattern
    return match.end()


class _Ahead:
    """The next position of a character at or after a point, for points that only grow:
    each character's search resumes where the last one ended (linear in all)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.found: dict[str, int] = {}

    def next(self, char: str, at: int) -> int:
        known = self.found.get(char, -1)
        if known < at:
            known = self.text.find(char, at)
            known = len(self.text) if known < 0 else known
            self.found[char] = known
        return known


def _assignment_spans(text: str) -> Iterable[tuple[int, int, str]]:
    """``name = value`` / ``name: value`` / ``"name": "value"``: the value is a password, a
    secret or a random high-entropy string depending on the name and on how it looks.

    Found from the operator (one cheap regex) forwards to the value and backwards to the name,
    which is read character by character (a regex searching backwards would try every start).
    A value has no length limit; the end of an unquoted run and the next quote are found once
    for all operators, and operators inside a value already masked are skipped, so the time
    stays linear in the text whatever it holds."""
    ahead = _Ahead(text)
    run = (0, 0)  # the last run of unquoted value characters found
    masked_until = 0
    for op in _OPERATOR.finditer(text):
        at = op.start()
        if at < masked_until:
            continue
        name = _name_before(text, at)
        if name is None:
            continue
        begin = _end_of(_LEAD_IN, text, at + _op_len(text, at))
        if begin < len(text) and text[begin] in "\"'":
            close = ahead.next(text[begin], begin + 1)
            if close >= ahead.next("\n", begin) or close == begin + 1:
                continue  # not closed on its line
            start, end = begin + 1, close
        else:
            if not run[0] <= begin < run[1]:
                match = _UNQUOTED.match(text, begin)
                if match is None:
                    continue
                run = match.span()
            start, end = begin, run[1]
        kind = _assigned_kind(name, text[start : min(end, start + _PEEK)], end - start)
        if kind is not None:
            masked_until = end
            yield start, end, kind
    if "\n" in text:
        yield from _block_spans(text)


def _name_before(text: str, at: int) -> str | None:
    """The name an operator at ``at`` assigns to (lowercase), or None."""
    j = at
    while j and at - j < 4 and text[j - 1] in _NAME_GAP:
        j -= 1
    k = j
    while k and j - k < 64 and text[k - 1] in _NAME_CHARS:
        k -= 1
    while k < j and not (text[k].isalpha() or text[k] == "_"):
        k += 1
    return text[k:j].lower() if k < j else None


def _block_spans(text: str) -> Iterable[tuple[int, int, str]]:
    """A secret name with its value on the lines below, more indented: an INI multi-line value
    (``secrets =`` then one value a line) or a nested YAML mapping (``password:`` then
    ``secure: X``). Each line's value is judged as if assigned to the name."""
    for end in _BLOCK_END.finditer(text):  # a line ending in ':' or '=' (a cheap scan)
        head = _BLOCK_HEAD.fullmatch(text, text.rfind("\n", 0, end.start()) + 1, end.end())
        if head is None:
            continue
        name = head.group(2).lower()
        if not (_PASS_NAME.search(name) or _KEY_NAME.search(name)):
            continue
        indent = len(head.group(1).expandtabs(4))
        at = head.end()
        while at < len(text):
            stop = text.find("\n", at)
            stop = len(text) if stop < 0 else stop
            line = text[at:stop].rstrip("\r")
            if line.strip() and len(line) - len(line.lstrip(" \t")) <= indent:
                break
            if line.strip() and line.lstrip()[0] not in "#;":
                lead = _end_of(_BLOCK_ITEM, line, 0)
                value = line[lead:].rstrip()
                kind = _assigned_kind(name, value[:_PEEK], len(value)) if value else None
                if kind is not None:
                    yield at + lead, at + lead + len(value), kind
            at = stop + 1


def _assigned_kind(name: str, value: str, length: int) -> str | None:
    """What ``name = value`` holds: a password, a secret, a random string, or nothing.
    ``value`` is the value's start (at most ``_PEEK`` characters); ``length`` its length."""
    if _PASS_NAME.search(name):
        return "password" if _password_value(value) else None
    if _KEY_NAME.search(name) and not _NOT_SECRET_NAME.search(name):
        return "secret" if _token_value(value) else None
    if not 20 <= length <= _BLOB or _HASH_NAME.search(name) or not _B64ISH.match(value):
        return None
    if _names_itself(name, value):
        return None  # thread = thread_…, asst = asst_…: an id whose prefix is its name
    return "high_entropy" if _high_entropy(value) else None


def _names_itself(name: str, value: str) -> bool:
    """An identifier written as an assignment to its own kind (``conv = conv-6790…``,
    ``batch = batch_…``): the value starts with the name (or its last part) and a separator."""
    last = re.split(r"[_.\-]", name)[-1] or name
    head = value[: len(last) + 1].lower()
    return len(last) >= 2 and head[:-1] == last and head[-1:] in ("_", "-")


def _op_len(text: str, at: int) -> int:
    return 2 if text[at + 1 : at + 2] in ("=", ">") else 1


# ---- the redactor -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Redactor:
    """Finds and masks secrets. Build one with :meth:`from_config`; the default is on."""

    enabled: bool = True
    rules: tuple[Rule, ...] = BUILTIN_RULES
    allow: frozenset[str] = frozenset()
    """Exact strings never masked (e.g. a documented example key)."""
    allow_patterns: tuple[re.Pattern[str], ...] = ()
    """Regexes: a secret they match in full is never masked."""

    @classmethod
    def from_config(
        cls,
        enabled: bool = True,
        patterns: Mapping[str, str] | None = None,
        allow: Iterable[str] = (),
        allow_patterns: Iterable[str] = (),
    ) -> Redactor:
        """``patterns``: kind → regex (its first group, if any, is the secret). Raises
        ValueError naming the kind or regex that is not valid."""
        extra = tuple(custom_rule(kind, regex) for kind, regex in (patterns or {}).items())
        allowed = tuple(_compile(p, f"allow pattern {p!r}") for p in allow_patterns)
        return cls(enabled, BUILTIN_RULES + extra, frozenset(allow), allowed)

    @functools.cached_property
    def _triggers(
        self,
    ) -> tuple[re.Pattern[str], tuple[tuple[str, tuple[int, ...]], ...], tuple[int, ...]]:
        """A regex finding any trigger, (trigger, the rules it wakes) pairs, and the rules that
        have no trigger (they always run)."""
        wakes: dict[str, list[int]] = {}
        for rank, rule in enumerate(self.rules):
            for literal in rule.triggers:
                wakes.setdefault(literal, []).append(rank)
        always = tuple(rank for rank, rule in enumerate(self.rules) if not rule.triggers)
        gate = re.compile("|".join(re.escape(t) for t in wakes) or "(?!)")
        return gate, tuple((k, tuple(v)) for k, v in wakes.items()), always

    @functools.cached_property
    def key(self) -> str:
        """Changes when what would be masked changes (the index is rebuilt then)."""
        base = f"r{RULES_VERSION}-{'on' if self.enabled else 'off'}"
        extra = [(r.kind, r.regex) for r in self.rules if r not in BUILTIN_RULES]
        if not (extra or self.allow or self.allow_patterns) or not self.enabled:
            return base
        spec = repr((extra, sorted(self.allow), [p.pattern for p in self.allow_patterns]))
        return f"{base}-{hashlib.sha256(spec.encode()).hexdigest()[:12]}"

    def find(self, text: str, fields: Iterable[Field] = ()) -> list[Span]:
        """The secrets in ``text``, in order; overlapping finds are merged into one span.
        ``fields``: structural fields of ``text`` (offsets in it): labels are blanked before
        the search, and no span that meets a checked field is returned (those are checked
        against provider formats only: :meth:`provider_spans`)."""
        if not self.enabled or not text:
            return []
        fields = tuple(fields) if fields else ()
        view = _blanked(text, [f for f in fields if not f.checked]) if fields else text
        found = self._found(view, self._ranks(view))
        if ":" in view or "=" in view:
            rank = len(self.rules)
            found += [(s, e, rank, kind) for s, e, kind in _assignment_spans(view)]
        if found and fields:
            kept = [(f.start, f.end) for f in fields if f.checked]
            found = [f for f in found if not any(f[0] < e and s < f[1] for s, e in kept)]
        return self._merged(text, found) if found else []

    def provider_spans(self, text: str) -> list[Span]:
        """The secrets in ``text`` in a provider's published format (``sk-ant-…``, ``ghp_…``,
        ``AKIA…``, private key blocks, JWTs, ``redact.patterns``): what a structural field is
        checked against. Context rules (``password=``, high entropy) are not run."""
        if not self.enabled or not text:
            return []
        ranks = [r for r in self._ranks(text) if self.rules[r].provider]
        found = self._found(text, ranks)
        return self._merged(text, found) if found else []

    def redact_provider(self, text: str) -> str:
        """``text`` with its provider-format secrets masked (a file name in an error)."""
        return _apply(text, self.provider_spans(text)).text

    def _ranks(self, text: str) -> list[int]:
        """The rules worth running on ``text``: those whose trigger it holds, or that have none."""
        gate, literals, always = self._triggers
        ranks = set(always)
        if gate.search(text):  # one pass; most text has no trigger at all
            for literal, rule_ranks in literals:
                if literal in text:
                    ranks.update(rule_ranks)
        return sorted(ranks)

    def _found(self, text: str, ranks: Iterable[int]) -> list[tuple[int, int, int, str]]:
        found: list[tuple[int, int, int, str]] = []  # start, end, rule rank, kind
        for rank in ranks:
            rule = self.rules[rank]
            for match in rule.pattern.finditer(text):
                at = match.start()
                if rule.boundary and at and text[at - 1] in _TOKEN_CHARS:
                    continue
                start, end = _secret_span(match, rule.group)
                if start < 0 or end <= start:
                    continue
                if rule.check is not None and not rule.check(text[start:end]):
                    continue
                found.append((start, end, rank, rule.kind))
        return found

    def redact(self, text: str) -> Redaction:
        """``text`` with every secret replaced by ``[REDACTED:kind]``, and what was replaced."""
        return _apply(text, self.find(text))

    def __call__(self, text: str) -> str:
        return self.redact(text).text

    def mask(self, text: str) -> str:
        """:meth:`redact`'s text, remembered for texts seen again and again (the memories a
        context is built from, search hits); returns ``text`` itself when it holds none."""
        memo = self._memo
        found = memo.get(text)
        if found is None:
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            masked = self.redact(text).text
            found = memo[text] = text if masked == text else masked
        return found

    def redact_added(self, before: str, after: str, fields: FieldFinder | None = None) -> Redaction:
        """``after`` (an edit of ``before``) with the secrets it adds masked: secrets in the
        lines it changed, unless ``before`` already held the same secret (a person's own
        text is never rewritten for this). Spans are offsets in ``after``.

        ``fields`` finds the structural fields of ``after`` (ids, keys, labels): they are never
        rewritten; one that adds a provider-format secret raises :class:`SecretInField` (the
        caller writes nothing)."""
        if not self.enabled or after == before:
            return Redaction(after)
        start, end = _changed_lines(before, after)
        if start >= end:
            return Redaction(after)
        runs = [(start, end)]
        if end - start > 2000:  # a big region: only the lines that are new in it
            runs = _new_runs(before, after, start, end)
        spans: list[Span] = []
        for run_start, run_end in runs:
            local: list[Field] = []
            if fields is not None:
                for f in fields(after, run_start, run_end):
                    if f.start < run_end and run_start < f.end:
                        self._refuse_secret_in(f, before, after)
                        lo, hi = max(f.start, run_start), min(f.end, run_end)
                        local.append(Field(lo - run_start, hi - run_start, f.name, f.checked))
            for span in self.find(after[run_start:run_end], local):
                secret = after[run_start + span.start : run_start + span.end]
                if secret not in before:
                    spans.append(Span(run_start + span.start, run_start + span.end, span.kind))
        return _apply(after, spans)

    def _refuse_secret_in(self, field: Field, before: str, after: str) -> None:
        """Raise SecretInField when a checked field adds a provider-format secret."""
        if not field.checked:
            return
        value = after[field.start : field.end]
        added = [s for s in self.provider_spans(value) if value[s.start : s.end] not in before]
        if added:
            secrets = tuple(value[s.start : s.end] for s in added)
            raise SecretInField(field.name, self.redact_provider(value), added[0].kind, "", secrets)

    def clear_memo(self) -> None:
        """Forget the texts :meth:`mask` remembered (after ``forget``: no copy in memory)."""
        self._memo.clear()

    @functools.cached_property
    def _memo(self) -> dict[str, str]:
        return {}

    def _merged(self, text: str, found: list[tuple[int, int, int, str]]) -> list[Span]:
        """Overlapping finds as one span each (named by the earliest rule), in one pass."""
        found.sort(key=lambda f: (f[0], -f[1]))
        spans = []
        start, end, rank, kind = found[0]
        for f_start, f_end, f_rank, f_kind in found[1:]:
            if f_start < end:
                end = max(end, f_end)
                if f_rank < rank:
                    rank, kind = f_rank, f_kind
                continue
            if not self._allowed(text[start:end]):
                spans.append(Span(start, end, kind))
            start, end, rank, kind = f_start, f_end, f_rank, f_kind
        if not self._allowed(text[start:end]):
            spans.append(Span(start, end, kind))
        return spans

    def _allowed(self, value: str) -> bool:
        if value in self.allow:
            return True
        return any(p.fullmatch(value) for p in self.allow_patterns)


def _blanked(text: str, labels: Iterable[Field]) -> str:
    """``text`` with each label's characters (not its line breaks) replaced by spaces: the
    offsets stay, and nothing around a label can read it as a name."""
    out = list(text)
    for field in labels:
        for at in range(field.start, min(field.end, len(text))):
            if out[at] not in "\r\n":
                out[at] = " "
    return "".join(out)


def _apply(text: str, spans: list[Span]) -> Redaction:
    if not spans:
        return Redaction(text)
    out: list[str] = []
    at = 0
    for span in spans:
        out.append(text[at : span.start])
        out.append(MARK.format(kind=span.kind))
        at = span.end
    out.append(text[at:])
    return Redaction("".join(out), tuple(spans))


def _changed_lines(before: str, after: str) -> tuple[int, int]:
    """The whole lines of ``after`` that differ from ``before`` (common head and tail cut)."""
    limit = min(len(before), len(after))
    head = _common(lambda n: before[:n] == after[:n], limit)
    tail = _common(lambda n: before[len(before) - n :] == after[len(after) - n :], limit - head)
    start = after.rfind("\n", 0, head) + 1
    end = after.find("\n", len(after) - tail)
    return start, len(after) if end < 0 else end


def _common(same: Callable[[int], bool], limit: int) -> int:
    """The largest n <= limit with same(n), by binary search (slice compares run in C)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if same(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _new_runs(before: str, after: str, start: int, end: int) -> list[tuple[int, int]]:
    """Runs of consecutive lines in ``after[start:end]`` that ``before`` does not have."""
    old = set(before.splitlines())
    runs: list[tuple[int, int]] = []
    at = start
    for line in after[start:end].splitlines(keepends=True):
        line_end = at + len(line)
        if line.rstrip("\r\n") not in old:
            if runs and runs[-1][1] == at:
                runs[-1] = (runs[-1][0], line_end)
            else:
                runs.append((at, line_end))
        at = line_end
    return runs


def _secret_span(match: re.Match[str], group: int) -> tuple[int, int]:
    """The span of the secret: the given group, else the first value group that matched."""
    if group:
        return match.span(group)
    if match.re.groups:
        for n in range(1, match.re.groups + 1):
            if match.group(n) is not None:
                return match.span(n)
    return match.span()


def custom_rule(kind: str, regex: str) -> Rule:
    """A rule from config: ``kind`` names it in the mark; the regex's first group (if it has
    one) is the secret, else the whole match."""
    if not _KIND_RE.match(kind):
        raise ValueError(f"redact pattern name {kind!r}: use lowercase letters, digits and _")
    _compile(regex, f"redact pattern {kind!r}")
    return Rule(kind, regex, boundary=False)


def _compile(regex: str, what: str) -> re.Pattern[str]:
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise ValueError(f"{what}: invalid regex: {exc}") from None
    if pattern.search(""):
        raise ValueError(f"{what}: the regex matches the empty string")
    return pattern


DEFAULT = Redactor()
"""The built-in rules, on: what callers without a workspace config get."""
