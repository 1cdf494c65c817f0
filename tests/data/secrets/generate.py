"""Write the redaction corpora: fake secrets in each provider's published format, and look-alikes.

Every secret here is random characters in the documented shape of a real one (prefix, length,
alphabet); none was ever a real key. Run from the repository root to regenerate (the seed is
fixed, so the output is the same each time)::

    python tests/data/secrets/generate.py

``secrets.jsonl``: one sample per line, ``{"kind", "text", "secrets"}``: ``text`` is the secret in
a realistic sentence, config line or snippet; ``secrets`` are the strings that must not survive.
``lookalikes.jsonl``: ``{"kind", "text"}``: text that must come out unchanged (git SHAs, UUIDs,
base64 images, lockfile hashes, prose about passwords, ...). ``prose.jsonl``: a held-out set,
providers' key shapes in sentences (``my key is …``) and a few assignments, held at a rate.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PER_KIND = 24
SEED = 20261122

rng = random.Random(SEED)
UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
BASE32 = UPPER + "234567"


def pick(alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


# ---- secrets, one generator per kind: (secret value, [strings that must not survive]) -------


def anthropic() -> str:
    # sk-ant-api03-<93 base64url>AA (108 chars); admin keys: sk-ant-admin01-
    prefix = rng.choice(["sk-ant-api03-", "sk-ant-api03-", "sk-ant-admin01-"])
    return prefix + pick(B64URL, 93) + "AA"


def openai() -> str:
    style = rng.choice(["legacy", "proj", "proj", "svcacct", "admin"])
    if style == "legacy":  # sk-<20>T3BlbkFJ<20>
        return "sk-" + pick(ALNUM, 20) + "T3BlbkFJ" + pick(ALNUM, 20)
    body = pick(B64URL, 74) + "T3BlbkFJ" + pick(B64URL, 74)
    return f"sk-{style}-{body}"


def aws_access_key() -> str:
    return rng.choice(["AKIA", "AKIA", "ASIA"]) + pick(BASE32, 16)


def aws_secret_key() -> str:
    return pick(B64, 40)


def github() -> str:
    style = rng.choice(["ghp_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"])
    if style == "github_pat_":
        return "github_pat_" + pick(ALNUM, 22) + "_" + pick(ALNUM, 59)
    return style + pick(ALNUM, 36)


def gitlab() -> str:
    return "glpat-" + pick(B64URL, 20)


def slack() -> str:
    style = rng.choice(["xoxb", "xoxb", "xoxp", "xapp"])
    if style == "xoxb":
        return f"xoxb-{pick(DIGITS, 12)}-{pick(DIGITS, 13)}-{pick(ALNUM, 24)}"
    if style == "xoxp":
        return f"xoxp-{pick(DIGITS, 12)}-{pick(DIGITS, 12)}-{pick(DIGITS, 13)}-{pick(HEX, 32)}"
    return f"xapp-1-A{pick(UPPER + DIGITS, 10)}-{pick(DIGITS, 13)}-{pick(HEX, 64)}"


def slack_webhook() -> str:
    return (
        f"https://hooks.slack.com/services/T{pick(UPPER + DIGITS, 8)}/"
        f"B{pick(UPPER + DIGITS, 10)}/{pick(ALNUM, 24)}"
    )


def google() -> str:
    style = rng.choice(["api", "api", "oauth_secret", "access"])
    if style == "api":
        return "AIza" + pick(B64URL, 35)
    if style == "oauth_secret":
        return "GOCSPX-" + pick(B64URL, 28)
    return "ya29." + pick(B64URL, 150)


def stripe() -> str:
    prefix = rng.choice(["sk_live_", "sk_live_", "rk_live_", "sk_test_", "whsec_"])
    if prefix == "whsec_":
        return prefix + pick(ALNUM, 32)
    return prefix + "51" + pick(ALNUM, 97)


def huggingface() -> str:
    return "hf_" + pick(UPPER + LOWER, 34)


def npm() -> str:
    return "npm_" + pick(ALNUM, 36)


def pypi() -> str:
    return "pypi-AgEIcHlwaS5vcmc" + pick(B64URL, rng.randint(60, 160))


def sendgrid() -> str:
    return f"SG.{pick(B64URL, 22)}.{pick(B64URL, 43)}"


def jwt() -> str:
    header = b64url(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
    claims = {
        "sub": pick(DIGITS, 10),
        "name": rng.choice(["Ada", "Chen Jing", "Tomasz", "svc-deploy"]),
        "iat": rng.randint(1_700_000_000, 1_800_000_000),
        "scope": rng.choice(["read", "read write", "admin"]),
    }
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{payload}.{b64url(rng.randbytes(32))}"


PEM_KINDS = ("RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY")


def private_key() -> str:
    kind = rng.choice([*PEM_KINDS, "ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK"])
    body = base64.b64encode(rng.randbytes(rng.randint(90, 400))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"])


WORDS = ["summer", "tiger", "orange", "Berlin", "invoice", "coffee", "Rocket", "maple", "Falcon"]


def password() -> str:
    style = rng.choice(["words", "random", "random", "simple"])
    if style == "words":
        return rng.choice(WORDS) + pick(DIGITS, rng.randint(2, 4)) + rng.choice("!#$%&*?")
    if style == "simple":
        return rng.choice(WORDS).lower() + pick(DIGITS, 3)
    return pick(ALNUM + "!#$%&*-_.", rng.randint(12, 24))


def token_value() -> str:
    return pick(rng.choice([ALNUM, B64URL, HEX]), rng.choice([24, 32, 40, 48]))


def entropy_value() -> str:
    return pick(rng.choice([ALNUM, B64]), rng.randint(28, 64))


# ---- contexts ------------------------------------------------------------------------------

Maker = Callable[[], tuple[str, list[str]]]


def in_contexts(make: Callable[[], str], var: str, contexts: list[str]) -> Maker:
    def sample() -> tuple[str, list[str]]:
        secret = make()
        text = rng.choice(contexts).format(s=secret, var=var)
        return text, [secret]

    return sample


KEY_CONTEXTS = [
    "export {var}={s}",
    "{var}={s}",
    '{{"{var}": "{s}"}}',
    "The user pasted their key {s} by mistake; tell them to rotate it.",
    "Set the key in CI secrets (it is {s}) and never commit it.",
    "os.environ['{var}'] = '{s}'",
    "- step failed: 401 Unauthorized for key {s}",
    "curl -H 'Authorization: Bearer {s}' https://api.example.com/v1/models",
    "{var}: {s}",
    'client = Client(api_key="{s}")',
]


def url_credentials() -> tuple[str, list[str]]:
    user = rng.choice(["admin", "deploy", "postgres", "app_user", "ci", "oauth2", "x-access-token"])
    secret = password() if rng.random() < 0.6 else token_value()
    host = rng.choice(["db.internal", "10.0.3.17", "cluster0.ab1cd.mongodb.net", "github.com"])
    template = rng.choice(
        [
            "DATABASE_URL=postgres://{u}:{p}@{h}:5432/invoice",
            "connect with mysql://{u}:{p}@{h}/app?ssl=true",
            "git clone https://{u}:{p}@{h}/acme/invoice-api.git",
            "redis://{u}:{p}@{h}:6379/0 is the cache",
            "mongodb+srv://{u}:{p}@{h}/?retryWrites=true",
            "amqp://{u}:{p}@{h}:5672/%2F (RabbitMQ)",
            "proxy: http://{u}:{p}@{h}:3128",
        ]
    )
    return template.format(u=user, p=secret, h=host), [secret]


def password_assignment() -> tuple[str, list[str]]:
    secret = password()
    template = rng.choice(
        [
            "password={p}",
            "DB_PASSWORD={p}",
            "password: {p}",
            '"password": "{p}"',
            "The staging admin login is admin / password={p}",
            "passwd={p}",
            "pwd: {p}",
            "mysql -u root --password={p} invoice",
            "POSTGRES_PASSWORD: '{p}'",
            'smtp_pass = "{p}"',
            "login as ops, password {p}",
            "the wifi password is {p}",
        ]
    )
    return template.format(p=secret), [secret]


def secret_assignment() -> tuple[str, list[str]]:
    secret = token_value()
    template = rng.choice(
        [
            "token={t}",
            "auth_token: {t}",
            "secret: {t}",
            "client_secret={t}",
            '"api_key": "{t}"',
            "API_TOKEN='{t}'",
            'access_token = "{t}"',
            "SECRET_KEY={t}",
            "webhook secret: {t}",
            "Authorization: Bearer {t}",
            "x-api-key: {t}",
            "session_secret => '{t}'",
        ]
    )
    return template.format(t=secret), [secret]


def high_entropy() -> tuple[str, list[str]]:
    secret = entropy_value()
    name = rng.choice(
        [
            "SIGNING_SALT",
            "DD_APP",
            "SENTRY_AUTH",
            "MASTER_SEED",
            "license_blob",
            "ENCRYPTION_MATERIAL",
            "cookieSigner",
            "X_PARTNER_CRED",
            "ROLLBAR_ACCESS",
            "hmac_value",
        ]
    )
    template = rng.choice(
        ["{n}={v}", '{n} = "{v}"', "{n}: {v}", "export {n}='{v}'", '"{n}": "{v}"']
    )
    return template.format(n=name, v=secret), [secret]


def aws_secret() -> tuple[str, list[str]]:
    key, secret = aws_access_key(), aws_secret_key()
    template = rng.choice(
        [
            "aws_access_key_id = {k}\naws_secret_access_key = {s}",
            "AWS_SECRET_ACCESS_KEY={s}",
            "export AWS_SECRET_ACCESS_KEY='{s}'",
            '"SecretAccessKey": "{s}"',
            "aws configure set aws_secret_access_key {s}",
        ]
    )
    return template.format(k=key, s=secret), [secret]


def pem() -> tuple[str, list[str]]:
    block = private_key()
    template = rng.choice(
        [
            "{b}",
            "The deploy key (keep it private):\n\n{b}\n",
            "```\n{b}\n```",
            "key.pem:\n{b}",
        ]
    )
    body = block.split("\n")[1:-1]
    return template.format(b=block), body


def jwt_sample() -> tuple[str, list[str]]:
    token = jwt()
    template = rng.choice(
        [
            "Authorization: Bearer {t}",
            "the session cookie was {t}",
            "jwt={t}",
            '{{"id_token": "{t}"}}',
            "decoded {t} on jwt.io: the exp claim was missing",
        ]
    )
    return template.format(t=token), [token]


KINDS: dict[str, Maker] = {
    "anthropic": in_contexts(anthropic, "ANTHROPIC_API_KEY", KEY_CONTEXTS),
    "openai": in_contexts(openai, "OPENAI_API_KEY", KEY_CONTEXTS),
    "aws_access_key": in_contexts(aws_access_key, "AWS_ACCESS_KEY_ID", KEY_CONTEXTS),
    "aws_secret_key": aws_secret,
    "github": in_contexts(github, "GITHUB_TOKEN", KEY_CONTEXTS),
    "gitlab": in_contexts(gitlab, "GITLAB_TOKEN", KEY_CONTEXTS),
    "slack": in_contexts(slack, "SLACK_BOT_TOKEN", KEY_CONTEXTS),
    "slack_webhook": in_contexts(slack_webhook, "SLACK_WEBHOOK_URL", KEY_CONTEXTS),
    "google": in_contexts(google, "GOOGLE_API_KEY", KEY_CONTEXTS),
    "stripe": in_contexts(stripe, "STRIPE_SECRET_KEY", KEY_CONTEXTS),
    "huggingface": in_contexts(huggingface, "HF_TOKEN", KEY_CONTEXTS),
    "npm": in_contexts(npm, "NPM_TOKEN", KEY_CONTEXTS),
    "pypi": in_contexts(pypi, "TWINE_PASSWORD", KEY_CONTEXTS),
    "sendgrid": in_contexts(sendgrid, "SENDGRID_API_KEY", KEY_CONTEXTS),
    "private_key": pem,
    "jwt": jwt_sample,
    "password": password_assignment,
    "secret": secret_assignment,
    "url_credentials": url_credentials,
    "high_entropy": high_entropy,
}


# ---- look-alikes: must come out unchanged ---------------------------------------------------


def git_sha() -> str:
    sha = pick(HEX, 40)
    return rng.choice(
        [
            f"Fixed in commit {sha}.",
            f"git checkout {sha}",
            f"reverted {sha[:7]} (the enum migration)",
            f'rev = "{sha}"',
            f"sha: {sha}",
            f"HEAD is now at {sha[:12]} fix: invoice totals",
            f"commit={sha}",
            f"https://github.com/acme/invoice-api/commit/{sha}",
        ]
    )


def uuid() -> str:
    parts = [pick(HEX, 8), pick(HEX, 4), "4" + pick(HEX, 3), rng.choice("89ab") + pick(HEX, 3)]
    value = "-".join([*parts, pick(HEX, 12)])
    return rng.choice(
        [
            f"session {value} timed out",
            f'id = "{value}"',
            f'"request_id": "{value}"',
            f"trace_id={value}",
            f"invoice {value} moved to paid",
            f"X-Request-Id: {value}",
        ]
    )


def base64_image() -> str:
    kind, magic = rng.choice(
        [("png", b"\x89PNG\r\n\x1a\n"), ("jpeg", b"\xff\xd8\xff\xe0"), ("gif", b"GIF89a")]
    )
    data = base64.b64encode(magic + rng.randbytes(rng.randint(60, 600))).decode()
    uri = f"data:image/{kind};base64,{data}"
    return rng.choice(
        [
            f"![logo]({uri})",
            f'<img src="{uri}" alt="chart">',
            f'icon = "{uri}"',
            f"background: url({uri});",
            f'"thumbnail": "{uri}"',
        ]
    )


def lockfile_hash() -> str:
    b64 = base64.b64encode(rng.randbytes(64)).decode()
    sha256 = pick(HEX, 64)
    name = rng.choice(["left-pad", "httpx", "weasyprint", "serde", "lodash", "anyio"])
    return rng.choice(
        [
            f'"integrity": "sha512-{b64}",',
            f"{name}==1.2.3 --hash=sha256:{sha256}",
            f'{{file = "{name}-1.2.3-py3-none-any.whl", hash = "sha256:{sha256}"}}',
            f"  integrity sha512-{b64}",
            f'checksum = "{sha256}"',
            f"github.com/acme/{name} v1.2.3 h1:{base64.b64encode(rng.randbytes(32)).decode()}",
            f'  resolved "https://registry.yarnpkg.com/{name}/-/{name}-1.2.3.tgz#{pick(HEX, 40)}"',
            f"sha256sum: {sha256}  {name}.tar.gz",
        ]
    )


def digest() -> str:
    sha256 = pick(HEX, 64)
    return rng.choice(
        [
            f"image: ghcr.io/acme/invoice-api@sha256:{sha256}",
            f"docker pull python@sha256:{sha256}",
            f"digest: sha256:{sha256}",
            f'etag: W/"{pick(HEX, 32)}"',
            f"md5 {pick(HEX, 32)} matches the upload",
        ]
    )


def public_material() -> str:
    blob = base64.b64encode(rng.randbytes(rng.randint(100, 300))).decode()
    lines = "\n".join(blob[i : i + 64] for i in range(0, len(blob), 64))
    return rng.choice(
        [
            f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{pick(B64, 43)} ada@laptop",
            f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{pick(B64, 200)} deploy@ci",
            f"-----BEGIN PUBLIC KEY-----\n{lines}\n-----END PUBLIC KEY-----",
            f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----",
        ]
    )


def url_plain() -> str:
    return rng.choice(
        [
            "git clone git@github.com:acme/invoice-api.git",
            "ssh://git@gitlab.example.com:2222/acme/app.git",
            "DATABASE_URL=postgres://localhost:5433/invoice_test",
            "mail chen.jing@example.com about the numbering rules",
            f"https://example.com:8443/invoices/{pick(DIGITS, 6)}?page=2&sort=date",
            "postgres://postgres@localhost/invoice (no password locally, trust auth)",
            "see https://docs.stripe.com/keys#obtain-api-keys for key formats",
            "redis://cache:6379/0",
            f"https://user-images.githubusercontent.com/{pick(DIGITS, 8)}/{pick(HEX, 8)}.png",
        ]
    )


def prose() -> str:
    return rng.choice(
        [
            "Reset your password from the account settings page.",
            "The token expires after 24 hours; refresh it with the refresh token.",
            "password: see the 1Password vault entry 'prod db'",
            "password=${DB_PASSWORD}",
            "api_key = os.environ['OPENAI_API_KEY']",
            "token: <your token here>",
            "secret: ***",
            "password = getpass.getpass('Password: ')",
            "Never log the secret; log its last four characters instead.",
            "token = request.headers.get('Authorization')",
            'password: "{{ vault_db_password }}"',
            "PASSWORD=changeme is the placeholder in .env.example; replace it.",
            "Passwords must be at least 12 characters long.",
            "the api key is read from $OPENAI_API_KEY",
            "secret_key_base is generated by `rails secret`",
            "The word 'token' is overloaded: tokenizer tokens vs auth tokens.",
            "password_hash = bcrypt.hashpw(password, bcrypt.gensalt())",
            "token_count: 1532",
            "Use `mdmem forget ID` when a secret leaks.",
            "AWS_SECRET_ACCESS_KEY is set in the GitHub Actions secrets, not in .env",
            "password: (ask Tomasz, it is not written down anywhere)",
            "the secret: keep migrations small and reversible",
            "token=None  # filled in by the auth middleware",
            "client_secret: ${{ secrets.GOOGLE_CLIENT_SECRET }}",
            "password = input()",
            "Rotate the Stripe key every 90 days (see the runbook).",
            "api_key: str = Field(default='', repr=False)",
            "if token is None: raise AuthError('no token')",
            "The password field is masked as ******** in the UI.",
            "secret=REPLACE_ME",
        ]
    )


def identifiers() -> str:
    return rng.choice(
        [
            f"- Deploys go to Fly.io <!-- mdmem id=m-{pick(HEX, 10)} type=fact importance=0.8 "
            f"created=2026-11-19 source=20261119_142210_invoice-status-enum-ci -->",
            f"invoice number INV-2026-{pick(DIGITS, 6)}",
            "getUserAuthenticationTokenFromRequestHeaders(request)",
            "tests/test_invoice_status_transitions.py::test_void_after_paid_returns_409",
            f"build {pick(DIGITS, 5)} on runner ubuntu-24.04 took 3m{pick(DIGITS, 2)}s",
            f"color: #{pick(HEX, 6)}; font-family: Noto Sans CJK SC",
            f"session file .sessions/2026{pick(DIGITS, 4)}_{pick(DIGITS, 6)}_fix-login-bug.md",
            "ConfigurationPropertiesBindingPostProcessorRegistrar",
            f"- 14:22:48 [planning] Reproduce first <!-- mdmem importance=0.8 id=h-{pick(HEX, 10)} -->",
            f"chunk id {pick(HEX, 16)} text_hash {pick(HEX, 32)}",
            f'version = "1.{rng.randint(0, 40)}.{rng.randint(0, 9)}"',
            "PYTHONHASHSEED=0 CUBLAS_WORKSPACE_CONFIG=:4096:8",
        ]
    )


LOOKALIKES: dict[str, Callable[[], str]] = {
    "git_sha": git_sha,
    "uuid": uuid,
    "base64_image": base64_image,
    "lockfile_hash": lockfile_hash,
    "digest": digest,
    "public_key": public_material,
    "url_without_credentials": url_plain,
    "prose_about_secrets": prose,
    "identifiers": identifiers,
}


# ---- added for issue 40 (their own seed: the samples above stay as they were) ----------------


def slash_value() -> tuple[str, list[str]]:
    """A base64 key that starts with '/' (one in 64 does: AWS secret keys, Azure AccountKey),
    which read as a file path and got through."""
    secret = "/" + pick(B64, 39)
    context = rng.choice(
        [
            "api_key={s}",
            "token: {s}",
            "password={s}",
            'SECRET_KEY="{s}"',
            '{{"client_secret": "{s}"}}',
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s}==;"
            "EndpointSuffix=core.windows.net",
            "export STRIPE_SECRET={s}",
            "aws_secret_access_key = {s}",
        ]
    )
    return context.format(s=secret), [secret]


def encrypted_pem() -> tuple[str, list[str]]:
    """An encrypted PEM key (Proc-Type and DEK-Info headers, a blank line), indented as in a
    YAML block or a Markdown list, which got through whole."""
    body = base64.b64encode(rng.randbytes(rng.randint(120, 400))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    kind = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY"])
    head = [f"-----BEGIN {kind}-----", "Proc-Type: 4,ENCRYPTED",
            f"DEK-Info: AES-256-CBC,{pick(HEX, 32).upper()}", ""]  # fmt: skip
    block = [*head, *lines, f"-----END {kind}-----"]
    indent = rng.choice(["", "  ", "    "])
    text = "\n".join(indent + line if line else line for line in block)
    if indent:
        text = rng.choice(["deploy_key: |\n", "- the staging key:\n", "Key:\n\n"]) + text
    return text, [line[:40] for line in lines if len(line) >= 40]


def youtube_list() -> str:
    video, playlist = pick(B64URL, 11), "PL" + pick(B64URL, 32)
    return f"watch https://www.youtube.com/watch?v={video}&list={playlist} before the demo"


def id_assignment() -> str:
    prefix, sep = rng.choice([("thread", "_"), ("conv", "-"), ("call", "_"), ("msg", "_"),
                              ("run", "_"), ("asst", "_"), ("batch", "_"), ("file", "-")])  # fmt: skip
    value = prefix + sep + pick(ALNUM, 24)
    return rng.choice(["{p} = {v}", "the {p} = {v} one", "set {p}={v} and retry"]).format(
        p=prefix, v=value
    )


def path_assignment() -> str:
    name = rng.choice(["token_file", "api_key", "password", "secret", "ssh_key", "client_secret"])
    path = rng.choice(["/run/secrets/", "/etc/acme/", "./config/", "~/.ssh/", "/var/lib/app/"])
    leaf = rng.choice(["db_password", "id_ed25519", "token.txt", "prod-key.pem", "client.json"])
    return f"{name}={path}{leaf}"


EXTRA_KINDS: dict[str, Maker] = {"slash_value": slash_value, "encrypted_pem": encrypted_pem}
EXTRA_LOOKALIKES: dict[str, Callable[[], str]] = {
    "youtube_playlist": youtube_list,
    "id_assignments": id_assignment,
    "path_assignments": path_assignment,
}


# ---- prose: a held-out set of providers' key shapes in sentences ----------------------------
# Written once, measured, never tuned against: tests/integration/test_redact.py holds the
# rate at 0.95 or more. Shapes as the providers (and gitleaks' rules) publish them.

HELD_OUT_SEED = 40_2026


def held_out_shapes() -> dict[str, Callable[[], str]]:
    return {
        "anthropic": anthropic,
        "openai": openai,
        "aws_access_key": aws_access_key,
        "github": github,
        "gitlab": gitlab,
        "slack": slack,
        "google": google,
        "stripe_live": lambda: rng.choice(["sk_live_", "rk_live_"]) + "51" + pick(ALNUM, 97),
        "huggingface": huggingface,
        "npm": npm,
        "pypi": pypi,
        "sendgrid": sendgrid,
        "jwt": jwt,
        "groq": lambda: "gsk_" + pick(ALNUM, 52),
        "xai": lambda: "xai-" + pick(ALNUM, 80),
        "digitalocean": lambda: "dop_v1_" + pick(HEX, 64),
        "shopify": lambda: "shpat_" + pick(HEX, 32),
        "docker": lambda: "dckr_pat_" + pick(B64URL, 27),
        "twilio": lambda: "SK" + pick(HEX, 32),
        "perplexity": lambda: "pplx-" + pick(ALNUM, 48),
        "square_secret": lambda: "sq0csp-" + pick(B64URL, 43),
        "square_token": lambda: rng.choice(
            ["EAAA" + pick(B64URL, 60), "sq0atp-" + pick(B64URL, 22)]
        ),
        "settlemint": lambda: rng.choice(["sm_pat_", "sm_aat_", "sm_sat_"]) + pick(ALNUM, 16),
        "sidekiq": lambda: f"{pick(HEX, 8)}:{pick(HEX, 8)}",
    }


PROSE = [
    "my key is {s}",
    "My API key is {s}, can you check why it fails?",
    "here's my token: {s}",
    "I used {s} as the key and got a 401.",
    "the token I got back was {s}.",
    "ok so the credential is {s} (don't share it)",
    "Try again with {s} please",
    "Pasting it here: {s}",
]
ASSIGNED = {
    "perplexity": "PERPLEXITY_API_KEY={s}",
    "square_secret": "SQUARE_APPLICATION_SECRET = {s}",
    "square_token": "square_access_token: {s}",
    "settlemint": "SETTLEMINT_PAT={s}",
    "sidekiq": "BUNDLE_GEMS__CONTRIBSYS__COM={s}",
}


def prose_sample(kind: str, make: Callable[[], str]) -> dict[str, object]:
    secret = make()
    if kind == "sidekiq":  # credentials for Sidekiq's gem server, always written as this
        text = rng.choice(
            ["BUNDLE_GEMS__CONTRIBSYS__COM={s}", "export BUNDLE_ENTERPRISE__CONTRIBSYS__COM={s}"]
        )
    elif kind in ASSIGNED and rng.random() < 0.5:
        text = ASSIGNED[kind]
    else:
        text = rng.choice(PROSE)
    return {"kind": kind, "text": text.format(s=secret), "secrets": [secret]}


def main() -> None:
    global rng
    with open(HERE / "secrets.jsonl", "w", encoding="utf-8") as out:
        for kind, make in KINDS.items():
            for _ in range(PER_KIND):
                text, must_go = make()
                out.write(json.dumps({"kind": kind, "text": text, "secrets": must_go}) + "\n")
    with open(HERE / "lookalikes.jsonl", "w", encoding="utf-8") as out:
        for kind, make_text in LOOKALIKES.items():
            _lookalikes(out, kind, make_text)
    rng = random.Random(SEED + 40)
    with open(HERE / "secrets.jsonl", "a", encoding="utf-8") as out:
        for kind, make in EXTRA_KINDS.items():
            for _ in range(PER_KIND):
                text, must_go = make()
                out.write(json.dumps({"kind": kind, "text": text, "secrets": must_go}) + "\n")
    with open(HERE / "lookalikes.jsonl", "a", encoding="utf-8") as out:
        for kind, make_text in EXTRA_LOOKALIKES.items():
            _lookalikes(out, kind, make_text)
    rng = random.Random(HELD_OUT_SEED)
    with open(HERE / "prose.jsonl", "w", encoding="utf-8") as out:
        for kind, make in held_out_shapes().items():
            for _ in range(10):
                out.write(json.dumps(prose_sample(kind, make)) + "\n")


def _lookalikes(out: Any, kind: str, make_text: Callable[[], str]) -> None:
    seen: set[str] = set()
    while len(seen) < PER_KIND:
        text = make_text()
        if text not in seen:
            seen.add(text)
            out.write(json.dumps({"kind": kind, "text": text}) + "\n")


if __name__ == "__main__":
    main()
