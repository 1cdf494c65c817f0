"""A PostgreSQL URL's password is shown nowhere (issue 32 §4): for malformed URLs (no scheme, a
scheme missing its colon, an unescaped @ in the password, query options without a scheme) and
unreachable servers, neither stdout, stderr, an exception (psycopg's included, chained or not)
nor the search server's log holds it. No server is needed: none of these URLs reaches one."""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mdmem import Workspace
from mdmem.cli import app
from mdmem.config import IndexConfig, load_config
from mdmem.index.postgres.db import IndexServerError, scrub

SECRET = "Sup3rSecretPw"
URLS = [
    f"mdmem:{SECRET}@127.0.0.1:5432/memory",  # the issue's: no scheme
    f"postgresql//mdmem:{SECRET}@127.0.0.1:5432/memory",  # the issue's: no colon
    f"postgres:/mdmem:{SECRET}@127.0.0.1/memory",
    f"postgresql://mdmem:{SECRET[:6]}@{SECRET[6:]}@127.0.0.1:5432/memory",  # an @ unescaped
    f"mdmem:{SECRET}@127.0.0.1/memory?sslmode=require",
    f"host=127.0.0.1 port=5432 password='{SECRET}",  # an unclosed quote
    f"postgresql://mdmem:{SECRET}@127.0.0.1:99999/memory",  # no such port
    f"postgresql://mdmem:{SECRET}@127.0.0.1:1/memory",  # nothing listens
    f"postgresql://mdmem:{SECRET}@/memory?host=/nonexistent-mdmem-socket-dir",
    f"host=127.0.0.1 port=1 user=mdmem password={SECRET}",
]
PARTS = (SECRET, SECRET[:6], SECRET[6:])


def _clean(text: str) -> None:
    for part in PARTS:
        assert part not in text


def _exception_text(exc: BaseException | None) -> str:
    """The exception as a traceback shows it, its chain (causes and contexts) included."""
    if exc is None:
        return ""
    return "".join(traceback.format_exception(exc)) + repr(exc)


@pytest.fixture
def sqlite_ws(tmp_path: Path) -> Workspace:
    ws = Workspace.init(tmp_path / "ws", mode="full", agent="coder")
    config = ws.root / "mdmem.toml"
    config.write_text(config.read_text().replace('model = "all-MiniLM-L6-v2"', 'model = ""'))
    ws.remember("The staging database listens on port 5433", type="fact")
    return Workspace.open(ws.root)


def _on_postgres(ws: Workspace) -> None:
    (ws.root / "mdmem.toml").write_text(
        (ws.root / "mdmem.toml").read_text() + '\n[index]\nbackend = "postgres"\n'
    )


@pytest.mark.parametrize("url", URLS)
def test_no_password_in_errors_of_the_library_or_the_cli(
    url: str, sqlite_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = sqlite_ws.root
    runner = CliRunner()
    copy = runner.invoke(app, ["-w", str(root), "index", "--backend", "postgres", "--url", url])
    assert copy.exit_code != 0
    _clean(copy.stdout + copy.stderr + _exception_text(copy.exception))
    _on_postgres(sqlite_ws)
    monkeypatch.setenv("MDMEM_INDEX_URL", url)
    ws = Workspace(root, replace(load_config(root), index=IndexConfig(backend="postgres")))
    with pytest.raises(IndexServerError) as caught:
        ws.search("staging port", k=1)
    text = _exception_text(caught.value)
    _clean(text)
    assert "\n" not in str(caught.value)
    assert "psycopg" not in text  # psycopg's own error, which may quote the URL, is not carried
    ws.close()
    for args in (["search", "staging port"], ["status"]):
        out = runner.invoke(app, ["-w", str(root), *args])
        assert out.exit_code != 0, args
        _clean(out.stdout + out.stderr + _exception_text(out.exception))


def test_scrub_masks_each_part_of_a_password() -> None:
    for url in URLS:
        assert not any(p in scrub(f"it said: {url}", url) for p in PARTS if p in url)


@pytest.mark.slow
def test_no_password_in_the_search_servers_log(
    sqlite_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server a search starts (its stderr is .mdmem/server.log) fails to sync, and logs it."""
    from mdmem.live.client import start_server

    _on_postgres(sqlite_ws)
    log = sqlite_ws.root / ".mdmem" / "server.log"
    for url in URLS[:1]:
        monkeypatch.setenv("MDMEM_INDEX_URL", url)
        process = start_server(sqlite_ws.root)
        try:
            deadline = time.monotonic() + 60
            while "sync failed" not in log.read_text() and time.monotonic() < deadline:
                assert process.poll() is None or "sync failed" in log.read_text()
                time.sleep(0.1)
        finally:
            process.terminate()
            process.wait(30)
        text = log.read_text()
        assert "IndexServerError" in text, text
        _clean(text)


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("Unix sockets")
