"""`embedding.threads`: torch's CPU threads for embedding, from mdmem.toml to torch itself; and
the query, embedded on a thread of its own with one."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mdmem import ConfigError, Workspace
from mdmem.index.embed import QueryThread


def test_embedding_threads_reach_torch(tmp_path: Path) -> None:
    """The real model, loaded by a workspace configured with one thread: torch then runs on
    one thread (process-wide; put back afterwards for the other tests)."""
    import torch

    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text(f"[embedding]\nthreads = {target}\n")
    (root / "memory.md").write_text("## Facts\n- The office wifi is called Gandalf\n")
    try:
        with Workspace.open(root) as ws:
            vectors = ws.embedder().embed(["what is the wifi called"])  # type: ignore[union-attr]
            assert torch.get_num_threads() == target
            assert vectors.shape == (1, 384)
            hit = ws.search("wifi network name", k=1, mode="vector")[0]
            assert "Gandalf" in hit.text
    finally:
        torch.set_num_threads(before)


def test_embedding_threads_zero_leaves_torch_alone(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text("[embedding]\nthreads = 0\n")
    assert Workspace.open(root).config.embedding.threads == 0


def test_negative_threads_are_a_config_error(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text("[embedding]\nthreads = -2\n")
    with pytest.raises(ConfigError, match=r"mdmem.toml: embedding.threads must be 0"):
        Workspace.open(root)


def test_a_query_runs_on_one_openmp_thread_of_its_own(embedder: Any) -> None:
    """A single text goes to the embedder's query thread, which runs torch on one thread while
    every other thread keeps torch's count: a thread started afterwards still gets it."""
    import torch

    before = torch.get_num_threads()
    query = QueryThread()
    assert query.run(torch.get_num_threads) == 1
    seen: list[int] = []
    later = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    later.start()
    later.join()
    assert seen == [before]
    assert torch.get_num_threads() == before

    one = embedder.embed(["where is the spare key"])
    assert any(t.name == "mdmem-query" for t in threading.enumerate())
    batch = embedder.embed(["where is the spare key", "the office wifi"])
    np.testing.assert_allclose(one[0], batch[0], atol=1e-5)


def test_an_error_on_the_query_thread_is_raised_to_the_caller() -> None:
    query = QueryThread()
    with pytest.raises(ZeroDivisionError):
        query.run(lambda: 1 / 0)
    assert query.run(lambda: "still serving") == "still serving"
