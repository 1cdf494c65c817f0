"""`embedding.threads`: torch's CPU threads for embedding, from mdmem.toml to torch itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdmem import ConfigError, Workspace


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
