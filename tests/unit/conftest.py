"""tests/unit: no process started, no model loaded, so the whole folder runs in about a minute
(`make unit`). A test that needs either belongs in tests/integration; this folder says so."""

from __future__ import annotations

import os
import subprocess

import pytest

WHY = "a unit test starts no process and loads no model: move it to tests/integration"


@pytest.fixture(autouse=True)
def _no_process_and_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from mdmem.index.embed import SentenceTransformerEmbedder

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(WHY)

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(SentenceTransformerEmbedder, "embed", refuse)
