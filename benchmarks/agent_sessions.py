"""A seeded, deterministic generator of a coding agent's 180 days of work sessions.

The project: a Python invoicing service (FastAPI, PostgreSQL, PDF rendering) that one agent
works on with one user. Every workday (Monday to Friday) holds 1 to 3 sessions; each session
takes one feature or chore as its request and logs what an agent logs: a plan, file edits,
test runs, reads, thoughts, and, mixed in at random, the lasting kinds of statement:

- **decisions** (SQLAlchemy 2.0, money in cents, WeasyPrint, ...), each introduced on its own
  day; two are later reversed (Celery → Dramatiq, wkhtmltopdf → WeasyPrint);
- **preferences** of the user (small pull requests, type hints, ...), stated in a request
  the first time and mentioned again later as the agent follows them;
- **environment facts** (the staging port, Python on CI, the deploy region, ...), six of
  which change value on a given day (only the newest value is true after it);
- **recurring errors and their fixes** (the database not started, Alembic's multiple heads,
  a flaky time-zone test, ...), each recurring with its fix several times.

A statement already introduced comes back in later sessions with a probability (0.35 per
session for one known fact, another 0.35 for a second), each time in one of 3-4 phrasings, so
a memory is restated in different words as it would be over months; a recurring error comes
back with probability 0.25 a session. Nothing is tuned to what consolidation merges: the
phrasings are written as an agent would write them, and the rates are fixed before any run.

``generate(seed)`` returns the sessions; the benchmark writes them with ``ws.session`` and
extracts each one offline. Each statement records the fact it states (``evidence``), so the
benchmark can check which statements survive.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DAYS = 180
RESTATE = 0.35
RECUR = 0.25


@dataclass(frozen=True)
class Statement:
    """One event of a session; ``fact`` names the lasting fact it states, if any."""

    action: str
    text: str
    importance: float | None = None
    fact: str | None = None


@dataclass(frozen=True)
class SimSession:
    day: int
    """0 .. DAYS-1: the simulated day the session ran on."""
    title: str
    request: str
    events: tuple[Statement, ...]


@dataclass(frozen=True)
class Changing:
    """An environment fact whose value changes on ``changes_on`` (None: never)."""

    key: str
    values: tuple[str, str]
    changes_on: int | None
    phrasings: tuple[str, ...]

    def value(self, day: int) -> str:
        return (
            self.values[1]
            if self.changes_on is not None and day >= self.changes_on
            else (self.values[0])
        )


ENVIRONMENT = (
    Changing(
        "staging-port",
        ("5432", "6543"),
        74,
        (
            "The staging database listens on port {v}",
            "Connected to the staging PostgreSQL on port {v}",
            "Staging DB port is {v} (set in .env.staging)",
        ),
    ),
    Changing(
        "ci-python",
        ("3.11", "3.12"),
        101,
        (
            "CI runs the tests on Python {v}",
            "The GitHub Actions matrix uses Python {v}",
            "Python {v} is the version pinned in .python-version for CI",
        ),
    ),
    Changing(
        "prod-postgres",
        ("15", "16"),
        123,
        (
            "Production runs PostgreSQL {v}",
            "The production database is PostgreSQL {v} on Fly.io",
            "Checked the server version: production PostgreSQL is {v}",
        ),
    ),
    Changing(
        "deploy-region",
        ("ams", "fra"),
        142,
        (
            "The API is deployed to Fly.io in the {v} region",
            "fly.toml sets primary_region = {v}",
            "Deploys go to Fly.io, region {v}",
        ),
    ),
    Changing(
        "gunicorn-workers",
        ("4", "8"),
        61,
        (
            "Gunicorn runs {v} workers in production",
            "GUNICORN_WORKERS is {v} in the production config",
            "The production web process uses {v} gunicorn workers",
        ),
    ),
    Changing(
        "pdf-bucket",
        ("invoices-pdf-prod", "invoices-pdf-prod"),
        None,
        (
            "Rendered PDFs are stored in the S3 bucket invoices-pdf-prod",
            "The PDF bucket is invoices-pdf-prod (eu-central-1)",
            "PDF uploads go to s3://invoices-pdf-prod",
        ),
    ),
    Changing(
        "sentry",
        ("invoices-api", "invoices-api"),
        None,
        (
            "Errors are reported to the Sentry project invoices-api",
            "SENTRY_DSN points at the invoices-api project",
            "Sentry project for the backend: invoices-api",
        ),
    ),
    Changing(
        "upload-limit",
        ("10", "25"),
        88,
        (
            "The maximum upload size for attachments is {v} MB",
            "MAX_UPLOAD_MB is {v}",
            "Attachments over {v} MB are rejected by the API",
        ),
    ),
)


@dataclass(frozen=True)
class Lasting:
    """A decision or a preference: introduced on ``day``; ``replaces`` names one it reverses."""

    key: str
    kind: str
    day: int
    phrasings: tuple[str, ...]
    replaces: str | None = None


DECISIONS = (
    Lasting(
        "sqlalchemy",
        "decision",
        3,
        (
            "We decided to use SQLAlchemy 2.0 with the async engine for the data layer",
            "Decision: the data layer uses SQLAlchemy 2.0 async sessions",
            "Going with SQLAlchemy 2.0 (async) for all database access",
        ),
    ),
    Lasting(
        "cents",
        "decision",
        6,
        (
            "We decided to store money as integer cents, never as floats",
            "Amounts are stored as integer cents in the amount_cents columns",
            "Rule: never use float for money; integer cents everywhere",
        ),
    ),
    Lasting(
        "gapless",
        "decision",
        11,
        (
            "We decided that invoice numbers are gap-free per year, allocated in one transaction",
            "Invoice numbers stay gap-free within a year (allocated with SELECT ... FOR UPDATE)",
            "Decision: gap-free yearly invoice numbering, allocated inside the invoice transaction",
        ),
    ),
    Lasting(
        "alembic",
        "decision",
        15,
        (
            "We decided to use Alembic for migrations, one migration per pull request",
            "Every schema change ships as one Alembic migration in its own PR",
            "Migrations are Alembic revisions, one per pull request",
        ),
    ),
    Lasting(
        "celery",
        "decision",
        20,
        (
            "We decided to use Celery with Redis for background jobs",
            "Background jobs (reminders, PDF rendering) run on Celery with a Redis broker",
            "Going with Celery for the task queue, Redis as the broker",
        ),
    ),
    Lasting(
        "wkhtml",
        "decision",
        24,
        (
            "We decided to render invoice PDFs with wkhtmltopdf",
            "PDFs are rendered by wkhtmltopdf from the Jinja templates",
            "Invoice PDF rendering uses wkhtmltopdf",
        ),
    ),
    Lasting(
        "httpx",
        "decision",
        33,
        (
            "We decided to use httpx for outbound calls to the payment provider",
            "Outbound HTTP to Stripe goes through an httpx.AsyncClient with retries",
            "Decision: httpx, not requests, for calls to the payment provider",
        ),
    ),
    Lasting(
        "vat-table",
        "decision",
        47,
        (
            "We decided that VAT rates live in the vat_rates table, not in code",
            "VAT rates are read from the vat_rates table; no rates hard-coded",
            "Rule: VAT rates come from the vat_rates table only",
        ),
    ),
    Lasting(
        "weasyprint",
        "decision",
        58,
        (
            "We switched PDF rendering from wkhtmltopdf to WeasyPrint",
            "Invoice PDFs are now rendered with WeasyPrint instead of wkhtmltopdf",
            "Decision: WeasyPrint replaces wkhtmltopdf for PDF rendering",
        ),
        replaces="wkhtml",
    ),
    Lasting(
        "dramatiq",
        "decision",
        93,
        (
            "We switched background jobs from Celery to Dramatiq",
            "The task queue is now Dramatiq with Redis; Celery was removed",
            "Decision: Dramatiq replaces Celery for background jobs",
        ),
        replaces="celery",
    ),
    Lasting(
        "uv-lock",
        "decision",
        110,
        (
            "We decided to pin dependencies with uv lock and commit uv.lock",
            "Dependencies are locked with uv; uv.lock is committed",
            "Rule: update dependencies only through uv lock --upgrade-package",
        ),
    ),
    Lasting(
        "audit-log",
        "decision",
        131,
        (
            "We decided that every change to an issued invoice writes a row to audit_log",
            "Issued invoices are immutable; changes are recorded in the audit_log table",
            "Decision: audit_log row for every change to an issued invoice",
        ),
    ),
)
PREFERENCES = (
    Lasting(
        "small-prs",
        "preference",
        2,
        (
            "The user prefers small pull requests, under 400 changed lines",
            "Keeping the PR under 400 lines, as the user prefers",
            "User preference: pull requests stay below 400 lines",
        ),
    ),
    Lasting(
        "type-hints",
        "preference",
        5,
        (
            "The user wants type hints on every public function",
            "Added type hints to the public functions, as the user requires",
            "User preference: every public function is fully typed",
        ),
    ),
    Lasting(
        "fixtures",
        "preference",
        9,
        (
            "The user prefers pytest fixtures over setUp methods",
            "Wrote the tests with pytest fixtures, not setUp, per the user's preference",
            "User preference: pytest fixtures instead of unittest setUp",
        ),
    ),
    Lasting(
        "imperative",
        "preference",
        14,
        (
            "The user wants commit messages in the imperative mood",
            "Commit message in the imperative mood, as the user asked",
            "User preference: imperative commit messages ('Add', not 'Added')",
        ),
    ),
    Lasting(
        "british",
        "preference",
        40,
        (
            "The user prefers British English in customer-facing texts",
            "Customer-facing emails use British spelling, per the user",
            "User preference: British English for anything customers read",
        ),
    ),
    Lasting(
        "no-deps",
        "preference",
        66,
        (
            "The user does not want new dependencies added without asking first",
            "Asked before adding a dependency, as the user requires",
            "User preference: no new dependency without the user's approval",
        ),
    ),
)


@dataclass(frozen=True)
class Recurring:
    key: str
    day: int
    errors: tuple[str, ...]
    fixes: tuple[str, ...]


ERRORS = (
    Recurring(
        "db-down",
        1,
        (
            "pytest failed: psycopg.OperationalError: connection refused on localhost:{port}",
            "Tests error out: could not connect to server on port {port} (connection refused)",
        ),
        (
            "Fixed by starting the database with docker compose up -d db before the tests",
            "The database container was not running; docker compose up -d db fixed it",
        ),
    ),
    Recurring(
        "alembic-heads",
        18,
        (
            "alembic upgrade failed: Multiple head revisions are present",
            "Alembic error: multiple heads after merging main",
        ),
        (
            "Fixed by running alembic merge heads and committing the merge revision",
            "Resolved the multiple heads with alembic merge heads",
        ),
    ),
    Recurring(
        "weasy-ci",
        60,
        (
            "CI failed: OSError: cannot load library 'libpango-1.0-0' when importing weasyprint",
            "The test job fails importing WeasyPrint: libpango is missing in the CI image",
        ),
        (
            "Fixed by installing libpango-1.0-0 in the CI image (apt-get in the workflow)",
            "Added libpango to the CI workflow's apt-get install; WeasyPrint imports now",
        ),
    ),
    Recurring(
        "tz-flaky",
        35,
        (
            "Flaky test test_send_reminder fails around midnight: freezegun and the scheduler "
            "disagree on the time zone",
            "test_send_reminder failed again: the reminder date is one day off in CI",
        ),
        (
            "Fixed by making the scheduler use UTC explicitly (ZoneInfo('UTC'))",
            "The scheduler now computes reminder dates in UTC; the flaky test passes",
        ),
    ),
    Recurring(
        "mypy-numbering",
        27,
        (
            "mypy error: Incompatible types in assignment in invoices/numbering.py",
            "mypy fails on invoices/numbering.py: next_number may be None",
        ),
        (
            "Fixed by annotating next_number as int | None and checking it before use",
            "Handled the None case of next_number in invoices/numbering.py; mypy is clean",
        ),
    ),
    Recurring(
        "healthz",
        70,
        (
            "Deploy failed: health check on /healthz timed out",
            "Fly.io marked the release unhealthy: /healthz did not answer in time",
        ),
        (
            "Fixed by raising the health check grace period to 30 seconds in fly.toml",
            "Set grace_period = 30s for the /healthz check in fly.toml; the deploy passed",
        ),
    ),
)
FEATURES = (
    ("credit notes", "invoices/credit_notes.py"),
    ("reminder emails", "invoices/reminders.py"),
    ("PDF layout", "templates/invoice.html"),
    ("VAT rates for Austria", "invoices/vat.py"),
    ("CSV export", "invoices/export/csv.py"),
    ("Stripe webhooks", "invoices/payments/webhooks.py"),
    ("multi-currency totals", "invoices/money.py"),
    ("customer search", "invoices/api/customers.py"),
    ("late fees", "invoices/fees.py"),
    ("recurring invoices", "invoices/recurring.py"),
    ("partial payments", "invoices/payments/allocate.py"),
    ("dunning levels", "invoices/dunning.py"),
    ("API pagination", "invoices/api/pagination.py"),
    ("attachment uploads", "invoices/attachments.py"),
)
VERBS = ("Add", "Fix", "Refactor", "Speed up", "Test", "Document")
THOUGHTS = (
    "The handler already validates the payload, so the check belongs in the service layer",
    "Two call sites build the query by hand; one helper would cover both",
    "The failing case is an empty list, not a missing key",
    "Better to keep the old endpoint until the frontend switches",
    "This needs a migration, so it goes in its own pull request",
)


def generate(seed: int = 0, days: int = DAYS) -> list[SimSession]:
    rng = random.Random(seed)
    sessions: list[SimSession] = []
    known: list[str] = [e.key for e in ENVIRONMENT]  # the environment is there from day 0
    lasting = {d.key: d for d in (*DECISIONS, *PREFERENCES)}
    env = {e.key: e for e in ENVIRONMENT}
    for day in range(days):
        if day % 7 in (5, 6):  # the weekend
            continue
        for _ in range(rng.choice((1, 2, 2, 3))):
            sessions.append(_session(rng, day, known, lasting, env))
    return sessions


def _session(
    rng: random.Random,
    day: int,
    known: list[str],
    lasting: dict[str, Lasting],
    env: dict[str, Changing],
) -> SimSession:
    feature, path = rng.choice(FEATURES)
    verb = rng.choice(VERBS)
    title = f"{verb} {feature}"
    request = f"{verb} {feature} in {path}."
    events: list[Statement] = [
        Statement("planning", f"Plan: read {path}, change it, add tests, run the suite")
    ]
    new = [d for d in lasting.values() if d.day == day and d.key not in known]
    for item in new:  # introduced today, in its first phrasing
        if item.kind == "preference":
            request += f" {item.phrasings[0]}."
        events.append(Statement("decision", item.phrasings[0], 0.8, item.key))
        known.append(item.key)
    for _ in range(rng.randint(2, 6)):
        events.append(_work(rng, path))
    for chance in (RESTATE, RESTATE):
        if rng.random() < chance:
            events.append(_restate(rng, day, known, lasting, env))
    for changing in env.values():
        if changing.changes_on == day:
            text = rng.choice(changing.phrasings).format(v=changing.value(day))
            events.append(Statement("decision", f"{text} now", 0.8, changing.key))
    due = [r for r in ERRORS if r.day == day]
    seen = [r for r in ERRORS if r.day < day]
    if seen and rng.random() < RECUR:
        due.append(rng.choice(seen))
    for recurring in due:
        port = env["staging-port"].value(day)
        events.append(
            Statement("error", rng.choice(recurring.errors).format(port=port), None, recurring.key)
        )
        events.append(_work(rng, path))
        events.append(Statement("fix", rng.choice(recurring.fixes), None, recurring.key))
    passed = rng.randint(380, 520)
    events.append(Statement("execute", f"Ran pytest: {passed} passed"))
    events.append(Statement("complete", f"{title}: done, PR opened"))
    return SimSession(day, title, request, tuple(events))


def _work(rng: random.Random, path: str) -> Statement:
    kind = rng.random()
    if kind < 0.4:
        return Statement("execute", f"Edited {path}: {rng.choice(_EDITS)}")
    if kind < 0.6:
        return Statement("read", f"Read {rng.choice(_READS)} to see how it is called")
    if kind < 0.8:
        return Statement("thinking", rng.choice(THOUGHTS))
    return Statement("execute", f"Ran pytest {_test_path(path)}: {rng.randint(8, 60)} passed")


_EDITS = (
    "added the new function and its docstring",
    "moved the validation into the service",
    "renamed the helper and updated its callers",
    "split the long function in two",
    "added a test for the empty case",
)
_READS = (
    "invoices/api/routes.py",
    "invoices/models.py",
    "invoices/services.py",
    "tests/conftest.py",
    "invoices/settings.py",
)


def _test_path(path: str) -> str:
    name = path.rsplit("/", 1)[-1].split(".")[0]
    return f"tests/test_{name}.py"


def _restate(
    rng: random.Random,
    day: int,
    known: list[str],
    lasting: dict[str, Lasting],
    env: dict[str, Changing],
) -> Statement:
    """One known fact again, in one of its phrasings (a reversed decision is not restated:
    the agent states the decision that replaced it)."""
    replaced = {d.replaces for d in lasting.values() if d.replaces and d.key in known}
    key = rng.choice([k for k in known if k not in replaced])
    if key in env:
        changing = env[key]
        return Statement(
            "execute", rng.choice(changing.phrasings).format(v=changing.value(day)), None, key
        )
    item = lasting[key]
    return Statement("decision", rng.choice(item.phrasings), None, key)


def current_values(day: int) -> dict[str, str]:
    """Each changing environment fact's true value on ``day``."""
    return {e.key: e.value(day) for e in ENVIRONMENT if e.changes_on is not None}


def stale_values(day: int) -> dict[str, str]:
    """Each changing environment fact's old value, once it changed by ``day``."""
    return {
        e.key: e.values[0] for e in ENVIRONMENT if e.changes_on is not None and day >= e.changes_on
    }
