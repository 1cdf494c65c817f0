"""`embedding.threads`: torch's CPU threads for embedding, from mdmem.toml to torch itself."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mdmem import ConfigError, Workspace


def test_embedding_threads_reach_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real model, loaded by a workspace configured with ``threads``: each forward pass of
    the model while the workspace indexes its files runs torch on that many threads (seen from
    inside the pass, on whichever thread runs it, through torch's global forward hook). A
    search's query is embedded on the vector worker, one thread by design (``index/vector_worker.py``):
    not counted here. torch's count is process-wide: put back afterwards. (One entry would go
    to the default model's ONNX export, which takes the same count: $MDMEM_ONNX=0 keeps it on
    torch here.)"""
    import torch
    from torch.nn.modules.module import register_module_forward_pre_hook

    monkeypatch.setenv("MDMEM_ONNX", "0")
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mdmem.toml").write_text(f"[embedding]\nthreads = {target}\n")
    (root / "memory.md").write_text("## Facts\n- The office wifi is called Gandalf\n")
    seen: set[tuple[str, int]] = set()

    def note(module: torch.nn.Module, args: object) -> None:
        seen.add((threading.current_thread().name, torch.get_num_threads()))

    handle = register_module_forward_pre_hook(note)
    try:
        with Workspace.open(root) as ws:
            report = ws.index.update()
            handle.remove()
            assert report.embedded >= 1
            assert seen and {count for _, count in seen} == {target}, seen
            hit = ws.search("wifi network name", k=1, mode="vector")[0]
            assert "Gandalf" in hit.text
    finally:
        handle.remove()
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
