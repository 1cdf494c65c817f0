"""Secrets never reach the files, the index, search results or a prompt (issue 10 §4)."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mdmem import Workspace
from mdmem.config import config_from_dict
from mdmem.errors import ConfigError
from mdmem.redact import DEFAULT, Redactor

# Fakes in each provider's published format (random characters, never real keys).
ANTHROPIC = (
    "sk-ant-api03-R2D2c3poK9x8Lm4Nq7Pz1Vb6Wt3Ys5Hd0Jf2Gk8Ua4Ei9Oc7Tr1Yw6Qn3Mx5Bv0Za8Lp2Ks"
    "4Dg7Fh1Jj9Hq3We6Rt0Yu5Io2AA"
)
AWS = "AKIAZ7QX4M2KLP3RTW5N"
PASSWORD = "Tr0ub4dor&3xq"
SECRETS = (ANTHROPIC, AWS, PASSWORD)
LEAKY = f"deploy creds: ANTHROPIC_API_KEY={ANTHROPIC} aws {AWS} password={PASSWORD}"
DATA = Path(__file__).parents[1] / "data" / "secrets"
BIN = Path(sys.executable).parent / "mdmem"


def _leaks(data: bytes | str, secrets: tuple[str, ...] = SECRETS) -> list[str]:
    if isinstance(data, bytes):
        return [s for s in secrets if s.encode() in data]
    return [s for s in secrets if s in data]


def _db_bytes(root: Path) -> bytes:
    """The raw bytes of index.db and its -wal and -shm: free pages and old frames included."""
    state = root / ".mdmem"
    return b"".join(p.read_bytes() for p in sorted(state.glob("index.db*")) if p.is_file())


def _keyword_only(root: Path, extra: str = "") -> Workspace:
    (root / "mdmem.toml").write_text(f'mode = "full"\n[embedding]\nmodel = ""\n{extra}')
    return Workspace.open(root)


def _load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


# ---- the reproduction ---------------------------------------------------------------------------


def test_secrets_reach_no_file_index_result_or_prompt(ws: Workspace, embedder: object) -> None:
    """Before redaction every one of these held the three secrets verbatim."""
    ws = Workspace.open(ws.root, embedder=embedder)  # type: ignore[arg-type]
    entry = ws.remember(LEAKY)
    with ws.session("deploy the service") as session:
        event = session.event("execute", LEAKY)
    memory = (ws.root / "memory.md").read_text()
    session_file = (ws.root / session.path).read_text()  # type: ignore[operator]
    hits = ws.search("deploy creds anthropic aws password")
    context = ws.build_context("deploy creds")
    assert _leaks(memory) == []
    assert _leaks(session_file) == []
    assert _leaks(_db_bytes(ws.root)) == []  # read while the index (and its WAL) is open
    assert hits and all(_leaks(h.text) == [] for h in hits)
    assert _leaks(context.text) == []
    assert _leaks(entry.text) == [] and _leaks(event.text) == []
    assert entry.redacted == 3 and event.redacted == 3
    assert "[REDACTED:anthropic]" in memory and "[REDACTED:password]" in session_file
    ws.close()


# ---- the detector on the corpora ------------------------------------------------------------------


@pytest.mark.parametrize("sample", _load("secrets.jsonl"), ids=lambda s: s["kind"])
def test_every_fake_secret_is_masked(sample: dict) -> None:
    masked = DEFAULT.redact(sample["text"])
    assert _leaks(masked.text, tuple(sample["secrets"])) == [], masked.text
    assert masked.count >= 1
    again = DEFAULT.redact(masked.text)  # masking is idempotent: marks are never secrets
    assert again.count == 0 and again.text == masked.text


@pytest.mark.parametrize("sample", _load("lookalikes.jsonl"), ids=lambda s: s["kind"])
def test_lookalikes_stay(sample: dict) -> None:
    assert DEFAULT.find(sample["text"]) == [], sample["text"]


def test_spans_kinds_and_counts() -> None:
    masked = DEFAULT.redact(LEAKY)
    assert masked.kinds() == {"anthropic": 1, "aws_access_key": 1, "password": 1}
    assert [LEAKY[s.start : s.end] for s in masked.spans] == [ANTHROPIC, AWS, PASSWORD]
    assert masked.text == (
        "deploy creds: ANTHROPIC_API_KEY=[REDACTED:anthropic] aws [REDACTED:aws_access_key] "
        "password=[REDACTED:password]"
    )


def test_redactor_from_config_patterns_allow_and_off() -> None:
    redactor = Redactor.from_config(
        patterns={"internal": r"itk_[A-Za-z0-9]{12}", "ticket_pin": r"PIN (\d{6})"},
        allow=[AWS],
        allow_patterns=[r"sk-ant-api03-R2D2.*"],
    )
    text = f"{LEAKY} itk_abcdefGHIJ12 PIN 123456"
    assert redactor(text) == (
        f"deploy creds: ANTHROPIC_API_KEY={ANTHROPIC} aws {AWS} password=[REDACTED:password] "
        "[REDACTED:internal] PIN [REDACTED:ticket_pin]"
    )
    assert Redactor.from_config(enabled=False)(LEAKY) == LEAKY
    assert redactor.key != DEFAULT.key != Redactor.from_config(enabled=False).key


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"redact\.patterns\.bad: invalid regex"):
        config_from_dict({"redact": {"patterns": {"bad": "(["}}})
    with pytest.raises(ConfigError, match="matches the empty string"):
        config_from_dict({"redact": {"allow_patterns": [".*"]}})
    with pytest.raises(ConfigError, match=r"redact\.enabled must be bool"):
        config_from_dict({"redact": {"enabled": "no"}})


def test_added_secrets_only(tmp_path: Path) -> None:
    """The write backstop masks what an edit adds, never what the file already held."""
    before = f"# Notes\n\n- mine: password={PASSWORD}\n"
    after = before + f"- new: key {AWS}\n- again: password={PASSWORD}\n"
    masked = DEFAULT.redact_added(before, after)
    assert masked.text == before + "- new: key [REDACTED:aws_access_key]\n" + (
        f"- again: password={PASSWORD}\n"
    )
    assert masked.count == 1


# ---- every write path ------------------------------------------------------------------------------


def test_writes_report_what_they_masked(tmp_path: Path) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "w").root)
    entry = ws.remember(f"CI uses {AWS}")
    assert entry.redacted == 1 and entry.text == "CI uses [REDACTED:aws_access_key]"
    updated = ws.update(entry, f"CI uses {AWS} and password={PASSWORD}")
    assert updated.redacted == 2
    newer = ws.supersede(updated, f"CI uses OIDC now; old key {ANTHROPIC}")
    assert newer.redacted == 1 and "[REDACTED:anthropic]" in newer.text
    assert ws.remember("plain fact").redacted == 0
    assert _leaks((ws.root / "memory.md").read_text()) == []


def test_session_text_round_trips_but_for_masked_spans(tmp_path: Path) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "w").root)
    request = f"Deploy with\n\n    export AWS_ACCESS_KEY_ID={AWS}\n\nplease"
    with ws.session(f"deploy {AWS}") as s:
        assert s.request(request) == 1
        call, result = s.tool(
            "shell", {"cmd": f"login --password {PASSWORD}", "token": ANTHROPIC}, "ok"
        )
        assert call.redacted == 2 and result is not None and result.redacted == 0
        assert s.event("note", f"password: {PASSWORD}").redacted == 1
        assert s.set_metadata("api_key", "Zx81-Qw2Lm9Po3Nb7Vc5") == 1
        assert s.response("done, nothing secret") == 0
    record = ws.sessions.record(s.id)
    assert record.request == request.replace(AWS, "[REDACTED:aws_access_key]")
    assert record.events[-1].text == "password: [REDACTED:password]"
    assert record.metadata == {"api_key": "[REDACTED:secret]"}
    assert record.title == "deploy [REDACTED:aws_access_key]"
    text = (ws.root / s.path).read_text()  # type: ignore[operator]
    assert _leaks(text, (*SECRETS, "Zx81-Qw2Lm9Po3Nb7Vc5")) == []
    assert AWS.lower() not in s.path  # type: ignore[operator]  (nor in the file name)


def test_task_world_and_any_later_write_add_no_secret(tmp_path: Path) -> None:
    """Writers that do not mask their own input are covered by the backstop in every write."""
    ws = _keyword_only(Workspace.init(tmp_path / "w").root)
    ws.task.new("rotate keys", [f"revoke {AWS}"])
    ws.task.add(f"check the vault for {ANTHROPIC}")
    fact = ws.world.set("db", f"postgres://app:{PASSWORD}@db.internal:5432/app")
    assert PASSWORD not in fact.value
    for name in ("task_process.md", "world_state.md"):
        assert _leaks((ws.root / name).read_text()) == [], name


def test_a_persons_file_is_never_rewritten_but_masked_everywhere_else(tmp_path: Path) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "w").root)
    memory = ws.root / "memory.md"
    memory.write_text(memory.read_text() + f"\n- The staging db password={PASSWORD}\n")
    by_hand = memory.read_bytes()
    ws.remember("Deploys go to Fly.io")  # a program write to the same file
    hand = next(e for e in ws.entries("memory.md") if "staging" in e.text)
    ws.update(hand, importance=0.9)  # and one to the person's own line
    assert PASSWORD.encode() in memory.read_bytes()  # the person's text, byte for byte
    assert by_hand.splitlines()[-1] in memory.read_bytes()
    hits = ws.search("staging db password", mode="keyword")
    assert hits and all(PASSWORD not in h.text for h in hits)
    assert PASSWORD not in ws.build_context("staging db").text
    assert PASSWORD.encode() not in _db_bytes(ws.root)
    ws.close()


def test_redaction_off_keeps_text_verbatim(tmp_path: Path) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "w").root, "[redact]\nenabled = false\n")
    assert ws.remember(LEAKY).text == LEAKY
    assert ws.search("deploy creds", mode="keyword")[0].text == LEAKY


def test_compaction_output_is_masked(tmp_path: Path) -> None:
    root = Workspace.init(tmp_path / "w", mode="minimal").root
    (root / "mdmem.toml").write_text('mode = "minimal"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(root)
    messages = [
        {"role": "user", "content": f"Deploy failed. Use AWS key {AWS}, password={PASSWORD}"},
        {"role": "assistant", "content": f"Fixed: exported AWS_ACCESS_KEY_ID={AWS}; deploy passed"},
    ]
    report = ws.compact(messages, offline=True)
    assert (root / ".compact_memory.md").read_text().count("[REDACTED:") >= 1
    assert all(_leaks(p.read_text()) == [] for p in [*root.glob("*.md"), *root.glob(".*.md")])
    assert _leaks(report.text or "") == []
    assert all(_leaks(c.text + c.evidence) == [] for c in report.extraction.changes)


def test_nothing_secret_is_sent_to_a_model_and_replies_are_masked(tmp_path: Path, scripted) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "w").root, '[llm]\nmodel = "scripted/m"\n')
    with ws.session("deploy") as s:
        s.event("error", f"401 with key {AWS}")
    path = ws.root / s.path  # type: ignore[operator]
    by_hand = f"- 10:00:01 [note] hand-added {ANTHROPIC}\n\n## Response"
    path.write_text(path.read_text().replace("## Response", by_hand, 1))
    # (a model never sees the secret; this reply stands for one that makes a secret up)
    reply = json.dumps({"memories": [{"type": "fact", "text": f"old password={PASSWORD}"}]})
    compact = "# Compact Memory\n\n## State\n- deploy blocked: key revoked\n\n## Key Events\n"
    calls = scripted(reply, compact)
    ws.compact(s.id)
    sent = json.dumps(calls)
    assert _leaks(sent) == [], "a secret was sent to the model"
    assert "[REDACTED:anthropic]" in sent and "[REDACTED:aws_access_key]" in sent
    assert _leaks((ws.root / "memory.md").read_text()) == []  # the model's reply, masked


def test_complete_masks_text_parts(scripted) -> None:
    from mdmem.config import LLMConfig
    from mdmem.distill.llm import complete

    calls = scripted("ok")
    message = {"role": "user", "content": [{"type": "text", "text": f"key {AWS}"}]}
    complete([message], LLMConfig(model="scripted/m"))
    assert AWS not in json.dumps(calls[0])


# ---- the index: upgrade rebuild, forget, permissions ------------------------------------------------


def test_upgrade_rebuild_leaves_no_old_text(tmp_path: Path, embedder: object) -> None:
    """An index built before redaction (here: with it off, plus free pages a pre-secure_delete
    mdmem left) is rebuilt once: no secret in the db file, free pages or the WAL."""
    root = Workspace.init(tmp_path / "w").root
    (root / "mdmem.toml").write_text('mode = "full"\n[redact]\nenabled = false\n')
    old = Workspace.open(root, embedder=embedder)  # type: ignore[arg-type]
    old.remember(LEAKY)
    old.index.update()
    old.close()
    raw = sqlite3.connect(root / ".mdmem" / "index.db")
    raw.execute("PRAGMA secure_delete=OFF")  # what an older mdmem did
    raw.execute("CREATE TABLE junk(t)")
    raw.execute("INSERT INTO junk VALUES (?)", (LEAKY * 50,))
    raw.execute("DROP TABLE junk")
    raw.commit()
    raw.close()
    assert _leaks(_db_bytes(root)) == list(SECRETS)  # the precondition: it is all there
    (root / "mdmem.toml").write_text('mode = "full"\n')
    ws = Workspace.open(root, embedder=embedder)  # type: ignore[arg-type]
    hits = ws.search("deploy creds")
    assert hits and "[REDACTED:" in hits[0].text
    assert _leaks(_db_bytes(root)) == []
    vectors = ws.index._backend.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    chunks = ws.index._backend.conn.execute(
        "SELECT count(DISTINCT text_hash) FROM chunks"
    ).fetchone()[0]
    assert vectors == chunks  # the vectors of the unmasked text are gone
    generation = ws.index._backend.generation()
    ws.search("deploy creds")
    assert ws.index._backend.generation() == generation  # rebuilt once, not on every search
    ws.close()


def test_forget_removes_every_copy(tmp_path: Path, embedder: object) -> None:
    root = Workspace.init(tmp_path / "w").root
    (root / "mdmem.toml").write_text('mode = "full"\n[redact]\nenabled = false\n')
    ws = Workspace.open(root, embedder=embedder)  # type: ignore[arg-type]
    leaked = ws.remember(f"Prod db: postgres://admin:{PASSWORD}@db.internal/prod")
    keep = ws.remember("Deploys go to Fly.io")
    newer = ws.supersede(leaked, "Prod db credentials live in the vault")
    archived_copy = ws.remember(leaked.text)  # the same text again, then archived
    ws.supersede(archived_copy, "Prod db: see the vault")
    journal = root / ".mdmem" / "journal" / "2026" / "x.bin"
    journal.parent.mkdir(parents=True)
    journal.write_bytes(b"replaced: " + leaked.text.encode())
    unrelated = root / ".mdmem" / "journal" / "other.bin"
    unrelated.write_bytes(b"- Deploys go to Fly.io\n")
    trash = root / ".trash" / "memory.md"
    trash.parent.mkdir()
    trash.write_text(f"- {leaked.text}\n")
    ws.index.update()
    assert PASSWORD.encode() in _db_bytes(root)
    query = "SELECT text_hash FROM chunks WHERE entry_id = ?"
    hashes = [r[0] for r in ws.index._backend.conn.execute(query, (leaked.id,))]

    report = ws.forget(leaked.id)

    assert PASSWORD not in (root / "memory.md").read_text()
    assert len(report.removed) == 2 and report.chunks >= 2 and report.vectors >= 1
    # the planted copy, and the versions the write journal kept of memory.md that held it
    assert ".mdmem/journal/2026/x.bin" in report.journal and not journal.exists()
    kept = [p for p in (root / ".mdmem" / "journal").rglob("*") if p.is_file()]
    assert all(PASSWORD.encode() not in p.read_bytes() for p in kept)
    assert report.trash == (".trash/memory.md",) and unrelated.exists()
    assert any("git history" in w for w in report.warnings)
    assert PASSWORD.encode() not in _db_bytes(root)  # db file, free pages and WAL
    left = ws.index._backend.conn.execute(
        f"SELECT count(*) FROM embeddings WHERE text_hash IN ({','.join('?' * len(hashes))})",
        hashes,
    ).fetchone()[0]
    assert left == 0
    assert ws.get(keep.id).text == "Deploys go to Fly.io" and ws.get(newer.id)
    assert all(PASSWORD not in h.text for h in ws.search("prod db postgres admin"))
    ws.close()


def test_forget_cli(tmp_path: Path) -> None:
    ws = _keyword_only(Workspace.init(tmp_path / "w").root, "[redact]\nenabled = false\n")
    entry = ws.remember(f"temp pin {PASSWORD}")
    twin = ws.remember(f"temp pin {PASSWORD}", file="notes.md")  # a live copy elsewhere
    env = {**os.environ, "MDMEM_WORKSPACE": str(ws.root)}
    done = subprocess.run(
        [str(BIN), "forget", entry.id, "--json"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == [f"memory.md:{entry.start_line}-{entry.end_line}"]
    assert "git history" in done.stderr and PASSWORD not in (ws.root / "memory.md").read_text()
    assert f"other entries hold the same text (forget them too): {twin.id} (notes.md:" in (
        done.stderr
    )
    again = subprocess.run([str(BIN), "forget", entry.id], capture_output=True, text=True, env=env)
    assert again.returncode == 1 and "no entry with id" in again.stderr
    assert "Traceback" not in again.stderr


def test_state_folder_is_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        root = Workspace.init(tmp_path / "w").root
        (root / ".mdmem").mkdir(mode=0o755)  # as an older mdmem left it
        ws = _keyword_only(root)
        ws.remember("a fact")
        ws.index.update()
        with ws.watch():
            heartbeat = root / ".mdmem" / "watcher.json"
            for _ in range(100):
                if heartbeat.exists() and heartbeat.stat().st_size:
                    break
                time.sleep(0.05)
            files = [p for p in (root / ".mdmem").rglob("*") if p.is_file()]
            modes = {p.name: oct(p.stat().st_mode & 0o777) for p in files}
        assert set(modes) >= {"index.db", "index.lock", "memory.md.lock", "watcher.json"}
        assert oct((root / ".mdmem").stat().st_mode & 0o777) == "0o700"
        assert oct((root / ".mdmem" / "locks").stat().st_mode & 0o777) == "0o700"
        assert set(modes.values()) == {"0o600"}, modes
        assert oct((root / "memory.md").stat().st_mode & 0o777) == "0o644"  # see README
        ws.close()
    finally:
        os.umask(old)


# ---- secrets that got through (issue 33 §2) -----------------------------------------------------
# Each case held its secret verbatim before the fix. Fakes: random characters in each format.

_LONG = "Zq8" + "x7Kp2Lm9Qw4R" * 30  # a 363-character token
_PEM_BODY = (
    "MIIEpAIBAAKCAQEAx7Yb3kF9Qz2Lm8Nq4Pz1Vb6Wt3Ys5Hd0Jf2Gk8Ua4Ei9Oc7Tr\n"
    "U2Yw6Qn3Mx5Bv0Za8Lp2Ks4Dg7Fh1Jj9Hq3We6Rt0Yu5Io2AAbbccddEeFfGgHh"
)
GOT_THROUGH = [
    ("long token, KEY=", f"API_TOKEN={_LONG}", [_LONG]),
    ("long token, quoted", f'token: "{_LONG}"', [_LONG]),
    ("long token, JSON", f'{{"api_key": "{_LONG}", "n": 1}}', [_LONG]),
    (
        "encrypted PEM",
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        f"DEK-Info: AES-128-CBC,2A3B4C5D6E7F8091A2B3C4D5E6F70819\n\n{_PEM_BODY}\n"
        "-----END RSA PRIVATE KEY-----",
        _PEM_BODY.split("\n"),
    ),
    (
        "PGP armor headers",
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n{_PEM_BODY}\n=Ab1c\n"
        "-----END PGP PRIVATE KEY BLOCK-----",
        _PEM_BODY.split("\n"),
    ),
    ("URL password with /", "postgres://admin:pa/ss9Word@db.example.com:5432/app", ["pa/ss9Word"]),
    ("URL password with @", "mysql://root:p@ssw0rd!@localhost/db", ["p@ssw0rd!", "ssw0rd!"]),
    (
        "Slack refresh token",
        "refresh with xoxe-1-My0xLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkwMTIzLTEyMzQ1Njc4OTA",
        ["My0xLTEyMzQ1Njc4OTAxMi0xMjM0NTY3ODkwMTIzLTEyMzQ1Njc4OTA"],
    ),
    (
        "Slack webhook, no scheme",
        "post to hooks.slack.com/services/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",
        ["q1w2e3r4t5y6u7i8o9p0AsDf"],
    ),
    (
        "Slack webhook, http",
        "http://hooks.slack.com/services/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",
        ["q1w2e3r4t5y6u7i8o9p0AsDf"],
    ),
    ("GitLab feed token", "feed url uses glft-Ab3dEf1234-6GhIjKlMn", ["Ab3dEf1234-6GhIjKlMn"]),
    ("GitLab OAuth secret", "secret gloas-" + "a1B2c3D4" * 8, ["a1B2c3D4" * 8]),
    ("GitLab runner token", "register GR1348941Ab3dEf1234_6GhIjKlMz", ["Ab3dEf1234_6GhIjKlMz"]),
    (
        "GitLab session cookie",
        "Cookie: _gitlab_session=0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        ["0f1e2d3c4b5a69788796a5b4c3d2e1f0"],
    ),
    (
        "Hugging Face org token",
        "HF org token api_org_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
        ["AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"],
    ),
    ("curl -u", "curl -u admin:hunter2-Blue https://api.example.com", ["hunter2-Blue"]),
    ("curl --user", "curl --user deploy:S3cr3tPass! https://x.example", ["S3cr3tPass!"]),
    ("prose", "the password for the staging db is hunter2-Blue", ["hunter2-Blue"]),
    (
        "YAML !!binary",
        "hex_binary_secret: !!binary MmIwMDA0MmY3NDgxYzdiMDU2YzRiNDEwZDI4ZjMzY2Y=",
        ["MmIwMDA0MmY3NDgxYzdiMDU2YzRiNDEwZDI4ZjMzY2Y"],
    ),
    (
        "INI multi-line value",
        "[auth]\nsecret_tokens =\n    password123\n    BEEF0123456789a\n\n[next]\nname = x",
        ["password123", "BEEF0123456789a"],
    ),
    (
        "nested YAML password",
        "deploy:\n    user: aaronloo\n    password:\n        secure: thequickbrownfoxjumpsoverthelazydog\n"
        "    on:\n        repo: Yelp/detect-secrets",
        ["thequickbrownfoxjumpsoverthelazydog"],
    ),
]


@pytest.mark.parametrize(("case", "text", "secrets"), GOT_THROUGH, ids=[c[0] for c in GOT_THROUGH])
def test_secrets_that_got_through_are_masked(case: str, text: str, secrets: list[str]) -> None:
    masked = DEFAULT.redact(text)
    pieces = tuple(s[i : i + 8] for s in secrets for i in range(len(s) - 7))  # none kept
    assert _leaks(masked.text, pieces) == [], masked.text
    assert DEFAULT.redact(masked.text).count == 0  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "https://host.example:8443/api/v1/users/@me",  # a port and a path, not a password
        "git+ssh://git@github.com:22/org/repo@v1.2",
        "docker run -u 1000:1000 image",
        "the password for the staging db is in the vault",  # prose with no password in it
        "the password reset link expired",
        "icon: !!binary R0lGODlhAQABAIAAAAAAAP",  # binary data under a neutral name
        "[paths]\nroots =\n    /srv/data\n    /var/lib/app",
        "deploy:\n    password:\n        secure: true",
    ],
)
def test_the_new_rules_leave_lookalikes(text: str) -> None:
    assert DEFAULT.find(text) == [], DEFAULT(text)


def _near_misses() -> dict[str, str]:
    """For each rule, 100 KB of text that almost matches it: the input a backtracking regex
    takes the longest on (a trigger, then a value that runs on and never completes)."""
    size = 100_000
    runs = {f"rule {n} {rule.kind}": rule.triggers for n, rule in enumerate(DEFAULT.rules)}
    out = {}
    for name, triggers in runs.items():
        trigger = triggers[0] if triggers else ""  # a rule's triggers share its regex
        out[f"{name} glued"] = (trigger + "Ab1-" * 9) * (size // (len(trigger) + 36))
        out[f"{name} long"] = trigger + "Ab1" * (size // 3)
    out |= {
        "assignment chain": "token=" + "a=b" * (size // 3),
        "assignment glued": "token=Ab12" * (size // 10),
        "open quote": 'token: "' + "Ab12 " * (size // 5),
        "open quotes": 'token: "Ab1c' * (size // 12),
        "url no at": "://" + "user:pass" * (size // 9),
        "url many at": "postgres://u:" + "p@" * (size // 2),
        "url many schemes": "://a:b/" * (size // 7),
        "pem no end": "-----BEGIN RSA PRIVATE KEY-----\n" + "Proc-Type: 4\n" * (size // 13),
        "pem many begins": "-----BEGIN PRIVATE KEY-----\n" * (size // 28),
        "pem body no end": "-----END CERTIFICATE-----\n" + ("A" * 64 + "\n") * (size // 65),
        "pem bodies": ("A" * 64 + "\n") * 119 + "-----END PRIVATE\n" * (size // 8000),
        "spoken": "password for " + "the db " * (size // 7),
        "spoken many": "password for the db is x " * (size // 25),
        "curl": "curl -u " + "a" * size,
        "curl many": " -u a:" * (size // 6),
        "block name": "password:\n" + "    " * (size // 4),
        "block lines": "password:\n" + "  x\n" * (size // 4),
        "many blocks": "password:\n  x\n" * (size // 14),
        "jwt": "eyJ" + "a" * 10 + ".eyJ" + "b" * size,
        "bold names": "**token**:" * (size // 10),
    }
    return out


def test_adversarial_input_redacts_in_under_a_second() -> None:
    """The length limits bound backtracking: 100 KB of near-matches per rule (and per
    assignment shape) each redacts in under 1 s. One generous bound: the issue's spec. Timed
    in CPU time of this thread (a loaded machine stretches the wall clock, not the work; each
    case takes about 0.1 s of CPU here, the quadratic ones took 10 s)."""
    slow = {}
    for name, text in _near_misses().items():
        started = time.thread_time()
        DEFAULT.redact(text)
        took = time.thread_time() - started
        if took >= 1.0:
            slow[name] = round(took, 2)
    assert slow == {}


def _vendored_benchmark() -> Any:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "redaction_vendored.py"
    spec = importlib.util.spec_from_file_location("redaction_vendored", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_recall_on_detect_secrets_test_data(tmp_path: Path) -> None:
    """detect-secrets' test data (Apache-2.0, vendored in ../shared/vendor/, extracted here):
    the figures docs/secrets.md reports, and no span on a line without a secret."""
    bench = _vendored_benchmark()
    if not bench.TARBALL.exists():
        pytest.skip(f"{bench.TARBALL} is not here (a checkout without ../shared/vendor/)")
    result = bench.measure(bench.extract(tmp_path))
    assert result.false_positives == ()
    assert result.caught == {
        bench.AWS: (3, 3),
        bench.BASIC_AUTH: (1, 1),
        bench.ENTROPY: (2, 2),
        bench.KEYWORD: (16, 18),  # missed: hunter2 (7 characters), a second value after a comma
        bench.PRIVATE_KEY: (1, 1),
    }


def test_secrets_that_got_through_reach_no_session_file_search_or_context(tmp_path: Path) -> None:
    """The same cases through a session (what an agent records): the file, search results and
    the context hold none of them."""
    ws = _keyword_only(tmp_path)
    with ws.session("deploy notes") as session:
        for _, text, _ in GOT_THROUGH:
            session.event("execute", text)
    pieces = tuple(
        s[i : i + 12] for _, _, secrets in GOT_THROUGH for s in secrets for i in range(len(s) - 11)
    )
    assert _leaks((ws.root / session.path).read_text(), pieces) == []
    hits = ws.search("password token secret webhook curl staging deploy", k=50)
    assert hits and all(_leaks(h.text, pieces) == [] for h in hits)
    assert _leaks(ws.build_context("deploy password token").text, pieces) == []
    ws.close()


def test_a_key_body_cut_off_by_a_blank_line_stays_out_of_the_index(tmp_path: Path) -> None:
    """An encrypted PEM in a person's file: the blank line after DEK-Info puts its body in a
    paragraph (an index chunk) of its own, without the BEGIN line. It leaked into search."""
    ws = _keyword_only(tmp_path)
    pem = GOT_THROUGH[3][1]
    (ws.root / "notes.md").write_text(f"# Notes\n\nthe deploy key:\n\n{pem}\n")
    ws.index.update()
    pieces = tuple(line[i : i + 12] for line in _PEM_BODY.split("\n") for i in range(0, 50, 7))
    hits = ws.search(_PEM_BODY[:40], k=10) + ws.search("deploy key END RSA PRIVATE", k=10)
    assert hits and all(_leaks(h.text, pieces) == [] for h in hits)
    assert _leaks(ws.build_context("deploy key").text, pieces) == []
    assert _leaks(_db_bytes(ws.root), pieces) == []
    assert (ws.root / "notes.md").read_text().count(_PEM_BODY) == 1  # the file is the person's
    ws.close()
