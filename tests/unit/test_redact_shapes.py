"""The secret redactor on what got through or was masked wrongly (issue 40), on the corpora in
tests/data/secrets/ (synthetic values, never real keys; ``generate.py`` writes them):

- values starting with ``/`` (base64 keys: AWS secret keys, Azure ``AccountKey=``) read as file
  paths after ``api_key=``, ``token:``, ``password=``, …: ``slash_value`` in secrets.jsonl;
- encrypted PEM keys with a blank line after their headers, indented: ``encrypted_pem``;
- a held-out set of providers' key shapes in prose (prose.jsonl), held at 0.95 or more;
- a YouTube ``list=`` and ids written as assignments (``conv = conv-…``) are no secrets:
  lookalikes.jsonl, which must stay unchanged whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdmem import Workspace
from mdmem.redact import DEFAULT

DATA = Path(__file__).parents[1] / "data" / "secrets"


def _load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line]


def _caught(sample: dict) -> bool:
    out = DEFAULT(sample["text"])
    return all(secret not in out for secret in sample["secrets"])


def test_providers_key_shapes_in_prose_are_masked() -> None:
    samples = _load("prose.jsonl")
    missed = [s for s in samples if not _caught(s)]
    rate = 1 - len(missed) / len(samples)
    assert rate >= 0.95, [(s["kind"], s["text"][:60]) for s in missed]
    kinds = {s["kind"] for s in samples}
    assert {"jwt", "sendgrid", "stripe_live", "perplexity", "settlemint", "sidekiq"} <= kinds


@pytest.mark.parametrize("kind", ["slash_value", "encrypted_pem"])
def test_what_got_through_is_masked(kind: str) -> None:
    samples = [s for s in _load("secrets.jsonl") if s["kind"] == kind]
    assert len(samples) == 24
    assert [s["text"] for s in samples if not _caught(s)] == []


@pytest.mark.parametrize("kind", ["youtube_playlist", "id_assignments", "path_assignments"])
def test_what_was_masked_wrongly_stays(kind: str) -> None:
    samples = [s for s in _load("lookalikes.jsonl") if s["kind"] == kind]
    assert len(samples) == 24
    assert [s["text"] for s in samples if DEFAULT(s["text"]) != s["text"]] == []


def test_a_value_starting_with_a_slash_in_each_assignment() -> None:
    key = "/k9Qz2Lm4Nq7Pz1Vb6Wt3Ys5Hd0Jf2Gk8Ua4EiXw"  # 40 base64 characters, made up
    for line in (
        f"api_key={key}",
        f"token: {key}",
        f"password={key}",
        f'SECRET_KEY="{key}"',
        f'{{"client_secret": "{key}"}}',
        f"AccountName=acme;AccountKey={key}==;EndpointSuffix=core.windows.net",
        f"export STRIPE_SECRET={key}",
    ):
        assert key[1:] not in DEFAULT(line), line
    for path in ("/run/secrets/db_password", "/etc/acme/ProdKey.pem", "~/.ssh/id_ed25519"):
        assert DEFAULT(f"token_file={path}") == f"token_file={path}"


def test_ids_written_as_assignments_stay_in_a_memory(tmp_path: Path) -> None:
    Workspace.init(tmp_path / "ws", mode="minimal", agent="a")
    (tmp_path / "ws" / "mdmem.toml").write_text('mode = "minimal"\n[embedding]\nmodel = ""\n')
    ws = Workspace.open(tmp_path / "ws")
    ids = {
        "thread": "thread_Xq7Lm2Np9Rt4Vb6Wc8Yd1Zf3",
        "conv": "conv-CZ7Uw9xfogoEmvnEN5N1aE6P",
        "call": "call_Ab12Cd34Ef56Gh78Ij90Kl12",
        "msg": "msg_01XFDUDYJgAACzvnptvVoYEL",
    }
    for name, value in ids.items():
        ws.remember(f"The failing run used {name} = {value} in the retry")
    text = (ws.root / "memory.md").read_text()
    assert [v for v in ids.values() if v not in text] == []
