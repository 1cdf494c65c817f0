"""The one-time fp32 ONNX export of the default model, made where torch is loaded anyway.

When sentence-transformers has loaded all-MiniLM-L6-v2 to index documents, exporting its
transformer with ``torch.onnx`` costs a few seconds once per machine (and once per release of
the model's package); from then on a query is embedded by :mod:`mdmem.index.onnx_encoder`
without torch. The export is checked before it is kept: its vectors for a few probe texts must
match sentence-transformers' within :data:`MAX_ABS_DIFF`, or nothing is written. The file and
its manifest (SHA-256, the source files it came from) are written atomically; a second process
exporting at the same moment writes the same thing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from mdmem.index.onnx_encoder import (
    MANIFEST_FILE,
    MODEL_FILE,
    Manifest,
    OnnxEncoder,
    export_dir,
    source_stamp,
)

MAX_ABS_DIFF = 1e-5
"""The largest difference from sentence-transformers' unit vectors an export may show on the
probe texts (measured: ~4e-7 over 1,200 LoCoMo turns)."""
PROBES = (
    "Which port does the local Postgres use?",
    "x",
    "Caroline went to the LGBTQ support group on 7 May 2023 and said it was powerful. " * 12,
    "数据库迁移 rollback after the deploy failed",
)
"""Short, one-token, truncated (over 256 tokens) and mixed-script texts."""
OPSET = 17


def export(st_model: Any, name: str, source: Path, model_id: str) -> Path:
    """Export the transformer of a loaded SentenceTransformer ``st_model`` (made from the files
    in ``source``) to the cache; the folder written. Raises when torch cannot export it or
    the export does not agree with ``st_model``."""
    import torch

    transformer = st_model[0].auto_model
    folder = export_dir(name, source)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".model.", suffix=".onnx.tmp")
    os.close(fd)
    try:
        _export_file(torch, transformer, Path(tmp))
        data = Path(tmp).read_bytes()
        encoder = OnnxEncoder(data, source / "tokenizer.json")
        expected = st_model.encode(
            list(PROBES), normalize_embeddings=True, convert_to_numpy=True, batch_size=8
        )
        got = encoder.embed(PROBES)
        diff = float(np.abs(got - np.asarray(expected, dtype=np.float32)).max())
        if diff > MAX_ABS_DIFF:
            raise RuntimeError(
                f"the ONNX export differs from sentence-transformers by {diff:.2e} "
                f"(> {MAX_ABS_DIFF:.0e}); not kept"
            )
        manifest = Manifest(
            model_id=model_id,
            source=str(source),
            stamp=source_stamp(source),
            sha256=hashlib.sha256(data).hexdigest(),
            max_abs_diff=diff,
            versions=_versions(torch),
        )
        os.replace(tmp, folder / MODEL_FILE)
        _write_atomic(folder / MANIFEST_FILE, manifest.to_json())
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return folder


def _export_file(torch: Any, transformer: Any, path: Path) -> None:
    """torch's TorchScript exporter (``dynamo=False``: the dynamo one needs onnxscript), with
    the batch and sequence axes dynamic."""

    class Hidden(torch.nn.Module):  # type: ignore[misc]
        """The token embeddings alone, from keyword arguments (BERT's positional order
        changes between transformers releases)."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = torch.ones(2, 8, dtype=torch.long)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings about Python values it fixed
        torch.onnx.export(
            Hidden(transformer).eval(),
            (ids, ids, torch.zeros_like(ids)),
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def _versions(torch: Any) -> dict[str, str]:
    import onnxruntime

    return {"torch": str(torch.__version__), "onnxruntime": str(onnxruntime.__version__)}


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
