"""The vectors of a large workspace: float16 in faiss, in a file beside the index
(``index.db-vectors``), used from ``index.float16_vectors_from`` chunks instead of the float32
matrix of :mod:`.vector_cache`.

Why: at 1M chunks the float32 matrix took 1.5 GB and 208 ms a scan; faiss's float16 scan takes
87 ms in 776 MB and finds the same top 10 (``benchmarks/million.py``).

The *base* is a faiss ``IndexScalarQuantizer`` (fp16, inner product) loaded from the file;
texts new since the file was written sit in a small float32 *delta* scanned with numpy, and
base rows no layout position holds any more are *dead* (masked out of every search). When delta
and dead together pass ``REWRITE_SHARE`` of the rows, or after ``forget``, the file is
rewritten (a temporary file, then an atomic rename) and loaded again.

Like the cache, the store is keyed by content (``text_hash``): the vector of one text under one
model never changes, so a file written at an older generation of the index is still right for
every text it holds; it is only diffed against the layout (what is missing is read from SQLite
into the delta). A file that is missing, damaged (checksum), of another model or size, or too
far behind (more than ``REWRITE_SHARE`` to add) is rebuilt from SQLite.

A search takes faiss's ``NEAREST`` best rows among the allowed ones plus exact (fp16) scores for
the keyword candidates and the neighbours of both, so that fusion sees the scores the numpy path
gives every chunk that can rank. From ``FAST_SCAN_FROM`` rows the nearest are picked by the
fast-scan copy of the base (:mod:`.fast_scan`).

The file: ``MAGIC``, a 4-byte header length, a JSON header (model, dim, rows, the change log
entry it reflects, the code size), the rows' text hashes (32 bytes each), their sort order
(int64), the fp16 codes, and a CRC-32 of all that.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mdmem.index.backend import ChunkLayout, Scored
from mdmem.index.sqlite import read
from mdmem.index.sqlite.scale import fast_scan
from mdmem.index.sqlite.scale.cosine import cosines
from mdmem.index.sqlite.scale.faiss_threads import load_faiss, one_faiss_thread
from mdmem.index.sqlite.scale.fast_scan import FAST_SCAN_FROM
from mdmem.index.sqlite.scale.vector_cache import Span, VectorCache

if TYPE_CHECKING:
    import faiss

MAGIC = b"MDMEMV01"
HASH_BYTES = 32
REWRITE_SHARE = 0.25
"""Rewrite the file when delta and dead rows together pass this share of the rows."""
NEAREST = 1000
"""Rows faiss returns per search (the fused pool is ``search.candidates``, 100)."""
BATCH = 16384
"""Vectors read from SQLite, encoded or written per step (memory stays flat)."""
SUFFIX = "-vectors"


def store_path(db_path: Path) -> Path:
    """``index.db-vectors``: counted with the index's size, removed with it."""
    return Path(str(db_path) + SUFFIX)


class StoreError(Exception):
    """The file cannot be used (missing, damaged, foreign): rebuild it."""


class Float16Vectors:
    """What :class:`.vector_cache.VectorCache` does (``update``, ``splice``, ``layout_matrix``),
    with the vectors in a faiss float16 file, and ``candidates`` instead of dense scores."""

    def __init__(
        self,
        model_id: str,
        path: Path,
        on_message: Callable[[str], None] | None = None,
        fast_scan_from: int = FAST_SCAN_FROM,
    ) -> None:
        self.model_id = model_id
        self.fast_scan_from = fast_scan_from
        self.path = path
        self._say = on_message
        self.faiss = load_faiss()
        self.base: faiss.IndexScalarQuantizer | None = None
        self.scanner: faiss.IndexPQFastScan | None = None
        """The base again in 4-bit codes, to pick the nearest rows (:mod:`.fast_scan`)."""
        self.dim = 0
        self.hashes = np.zeros(0, dtype=f"S{HASH_BYTES}")
        """The text of each base row."""
        self.sorted = np.zeros(0, dtype=np.int64)
        """Base rows in the order of their hashes (to look texts up)."""
        self.refs = np.zeros(0, dtype=np.int32)
        """Layout positions holding each base row's text; 0: a dead row."""
        self.delta = np.zeros((0, 0), dtype=np.float32)
        self.delta_of: dict[str, int] = {}
        self.delta_refs: dict[str, int] = {}
        self.delta_free: list[int] = []
        self.missing: set[str] = set()
        """Delta texts with no vector of this model yet (a row of zeros: they score 0)."""
        self.order = np.zeros(0, dtype=np.int64)
        """The slot of each layout position: a base row, or ``len(base)`` + a delta row."""
        self.seq = 0
        """The change log entry the layout (and so ``order``) reflects."""
        self.reads = 0
        self.writes = 0
        self.writable = True
        """False once the folder refused a write (read-only): the store lives in memory."""
        self._inverse: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    # ---- the layout's texts ----------------------------------------------------------------

    @property
    def rows(self) -> int:
        return len(self.hashes)

    def update(self, conn: sqlite3.Connection, hashes: Sequence[str]) -> None:
        """In step with a whole layout (first load or reload): the file if it is usable, the
        rest from SQLite into the delta; rebuilt when too much is missing."""
        self.seq = read.last_change(conn)
        if self.base is None:
            try:
                self._load()
            except StoreError as exc:
                if self.path.exists() and self._say:
                    self._say(f"vector store {self.path} {exc}; rebuilding it from the index")
                self._build(conn, hashes)
                return
        self._layout(conn, hashes)
        if self._worn():
            self._build(conn, hashes)

    def splice(
        self, conn: sqlite3.Connection, spans: Sequence[Span], stored: Sequence[int]
    ) -> None:
        """Follow a layout splice; ``stored``: row ids of vectors stored since (any model)."""
        self.seq = read.last_change(conn)
        added = [h for span in spans for h in span.added]
        slots = self._claim(added)
        fresh = [h for h in dict.fromkeys(added) if h in self.missing]
        if fresh:
            self._fill(read.vectors_of(conn, self.model_id, fresh))
        self._fill(read.vectors_stored(conn, self.model_id, stored, self.missing))
        pieces: list[np.ndarray] = []
        kept = done = 0
        for span in spans:
            pieces += [self.order[kept : span.start], slots[done : done + len(span.added)]]
            kept, done = span.stop, done + len(span.added)
        pieces.append(self.order[kept:])
        self.order = np.concatenate(pieces) if pieces else self.order
        self._release([h for span in spans for h in span.removed])
        self._inverse = None
        if self._worn():
            self.rewrite()

    def layout_matrix(self) -> np.ndarray:
        """All vectors in layout order as float32 (decoded; zeros where a text has none)."""
        out = np.zeros((len(self.order), max(self.dim, 1)), dtype=np.float32)
        for start in range(0, len(self.order), BATCH):
            out[start : start + BATCH] = self._vectors(self.order[start : start + BATCH])
        return out

    def forgotten(self) -> None:
        """After ``forget``: no vector of a text the layout lost stays in the file."""
        if self.base is not None and (self.refs == 0).any():
            self.rewrite()

    # ---- searching -------------------------------------------------------------------------

    def nearest(
        self, query: np.ndarray, allowed: np.ndarray | None, nearest: int = NEAREST
    ) -> np.ndarray | None:
        """The ``nearest`` allowed base rows to ``query`` by faiss (``FAST_NEAREST`` times as
        many when the scanner picks them: the costly half of a search, it touches no
        connection); None when the query is not of the store's size."""
        if not self.dim or query.shape[0] != self.dim:
            return None
        return self._nearest(np.ascontiguousarray(query, dtype=np.float32), allowed, nearest)

    def candidates(
        self,
        query: np.ndarray,
        found: np.ndarray,
        layout: ChunkLayout,
        also: np.ndarray | None = None,
    ) -> Scored:
        """The positions of the ``found`` base rows, every delta text, and ``also`` (keyword
        candidates), with the neighbours of all of them: positions and their cosines."""
        near = self.around(query, found, layout)
        return near if also is None else self.with_also(query, near, layout, also)

    def around(self, query: np.ndarray, found: np.ndarray, layout: ChunkLayout) -> Scored:
        """:meth:`candidates` without the keyword candidates: this half touches no connection
        and needs no keyword result, so a search scores it on the scan's thread."""
        first, many, shared, in_delta = self._positions()
        positions = [first[found], in_delta]
        held = found[many[found]]
        if held.size:  # texts several chunks hold: every position of each
            positions.append(shared[np.isin(self.order[shared], held)])
        picked = _with_neighbours(np.concatenate(positions), layout)
        return Scored(picked, self._cosines(query, picked))

    def with_also(
        self, query: np.ndarray, near: Scored, layout: ChunkLayout, also: np.ndarray
    ) -> Scored:
        """``near`` (from :meth:`around`) and the cosines of ``also`` and its neighbours."""
        assert near.positions is not None
        more = _with_neighbours(also.astype(np.int64, copy=False), layout)
        more = more[~np.isin(more, near.positions, assume_unique=True)]
        if not more.size:
            return near
        positions = np.concatenate([near.positions, more])
        scores = np.concatenate([near.scores, self._cosines(query, more)])
        order = np.argsort(positions, kind="stable")
        return Scored(positions[order], scores[order])

    def _cosines(self, query: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return cosines(self._vectors(self.order[positions]), query)

    def _nearest(self, query: np.ndarray, allowed: np.ndarray | None, k: int) -> np.ndarray:
        """Base rows: the best ``k`` alive and allowed ones (``FAST_NEAREST`` times as many,
        in approximate order, when the scanner picks them)."""
        nb = self.rows
        if self.base is None or not nb:
            return np.zeros(0, dtype=np.int64)
        ok = self.refs > 0
        if allowed is not None and not allowed.all():
            row_ok = np.zeros(nb, dtype=bool)
            held = self.order[allowed]
            row_ok[held[held < nb]] = True
            ok &= row_ok
        one_faiss_thread(self.faiss)
        picked = self._picked(query, ok, min(k, nb))
        if picked is not None:
            return picked
        params = None
        if not ok.all():
            bits = np.packbits(ok, bitorder="little")
            selector = self.faiss.IDSelectorBitmap(nb, self.faiss.swig_ptr(bits))
            params = self.faiss.SearchParameters(sel=selector)
        _, rows = self.base.search(query[None, :], min(k, max(nb, 1)), params=params)
        rows = rows[0]
        return rows[rows >= 0]

    def _picked(self, query: np.ndarray, ok: np.ndarray, k: int) -> np.ndarray | None:
        """The fast-scan copy's nearest ``ok`` rows; None where the float16 scan decides."""
        return None if self.scanner is None else fast_scan.pick(self.scanner, query, ok, k)

    def _positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For each slot a layout position holding it and whether several do; the positions
        of those shared slots; the positions of delta slots. Kept until the layout changes,
        so a search never scans the whole layout."""
        inverse = self._inverse
        if inverse is None:
            slots = self.rows + len(self.delta)
            first = np.zeros(slots, dtype=np.int64)
            first[self.order] = np.arange(len(self.order))
            many = np.bincount(self.order, minlength=slots) > 1
            shared = np.flatnonzero(many[self.order])
            in_delta = np.flatnonzero(self.order >= self.rows)
            inverse = self._inverse = (first, many, shared, in_delta)
        return inverse

    def _vectors(self, slots: np.ndarray) -> np.ndarray:
        """float32 vectors of these slots: base rows decoded from faiss's own fp16 codes in one
        call (the fastest of the ways measured: ``reconstruct_batch``, numpy's float16 cast)."""
        nb = self.rows
        in_base = slots < nb
        one_faiss_thread(self.faiss)
        if self.base is not None and len(slots) and in_base.all():
            codes = _codes_view(self.faiss, self.base, nb, self._code_size())
            return self.base.sa_decode(np.take(codes, slots, axis=0))
        out = np.zeros((len(slots), max(self.dim, 1)), dtype=np.float32)
        if in_base.any() and self.base is not None:
            codes = _codes_view(self.faiss, self.base, nb, self._code_size())
            out[in_base] = self.base.sa_decode(np.take(codes, slots[in_base], axis=0))
        if (~in_base).any():
            out[~in_base] = self.delta[slots[~in_base] - nb]
        return out

    # ---- following the layout --------------------------------------------------------------

    def _lookup(self, hashes: Sequence[str]) -> np.ndarray:
        """The base row of each text, -1 where the base has none."""
        if not self.rows or not hashes:
            return np.full(len(hashes), -1, dtype=np.int64)
        wanted = np.array(hashes, dtype=f"S{HASH_BYTES}")
        at = np.searchsorted(self.hashes[self.sorted], wanted)
        at = np.minimum(at, self.rows - 1)
        rows = self.sorted[at]
        return np.where(self.hashes[rows] == wanted, rows, -1)

    def _layout(self, conn: sqlite3.Connection, hashes: Sequence[str]) -> None:
        self.refs = np.zeros(self.rows, dtype=np.int32)
        self.delta = np.zeros((0, self.dim), dtype=np.float32)
        self.delta_of, self.delta_refs, self.delta_free = {}, {}, []
        self.missing = set()
        self.order = np.zeros(0, dtype=np.int64)
        self.order = self._claim(hashes)
        if self.missing:
            self._fill(read.vectors_of(conn, self.model_id, sorted(self.missing)))
        self._inverse = None

    def _claim(self, hashes: Sequence[str]) -> np.ndarray:
        """The slot of each of these texts (now held by one more position each)."""
        rows = self._lookup(hashes)
        np.add.at(self.refs, rows[rows >= 0], 1)
        nb = self.rows
        for i in np.nonzero(rows < 0)[0].tolist():
            text_hash = hashes[i]
            if text_hash in self.delta_refs:
                self.delta_refs[text_hash] += 1
            else:
                self.delta_refs[text_hash] = 1
                self.delta_of[text_hash] = self._delta_slot()
                self.missing.add(text_hash)
            rows[i] = nb + self.delta_of[text_hash]
        return rows

    def _delta_slot(self) -> int:
        if self.delta_free:
            return self.delta_free.pop()
        used = len(self.delta_of)
        if used >= len(self.delta):
            grown = np.zeros((max(64, 2 * len(self.delta)), self.dim), dtype=np.float32)
            grown[: len(self.delta)] = self.delta
            self.delta = grown
        return used

    def _fill(self, found: Iterable[tuple[str, bytes]]) -> None:
        for text_hash, blob in found:
            if text_hash in self.missing:
                vector = np.frombuffer(blob, dtype=np.float32)
                if not self.dim:  # the first vector of this model: now the size is known
                    self.dim = vector.shape[0]
                    self.delta = np.zeros((len(self.delta), self.dim), dtype=np.float32)
                if vector.shape[0] == self.dim:
                    self.delta[self.delta_of[text_hash]] = vector
                    self.missing.discard(text_hash)
                    self.reads += 1

    def _release(self, hashes: Sequence[str]) -> None:
        rows = self._lookup(hashes)
        np.subtract.at(self.refs, rows[rows >= 0], 1)
        for i in np.nonzero(rows < 0)[0].tolist():
            text_hash = hashes[i]
            self.delta_refs[text_hash] -= 1
            if not self.delta_refs[text_hash]:
                del self.delta_refs[text_hash]
                slot = self.delta_of.pop(text_hash)
                self.delta[slot] = 0.0  # a forgotten vector does not linger in memory
                self.delta_free.append(slot)
                self.missing.discard(text_hash)

    def _worn(self) -> bool:
        """Delta and dead rows past ``REWRITE_SHARE`` of what the store holds."""
        dead = int(np.count_nonzero(self.refs == 0))
        return dead + len(self.delta_of) > REWRITE_SHARE * max(self.rows + len(self.delta_of), 1)

    # ---- the file --------------------------------------------------------------------------

    def rewrite(self) -> None:
        """The alive base rows and the delta to a new file, loaded in place of the old (the
        old one's bytes are zeroed first: ``forget`` leaves no vector on disk)."""
        if not self.writable:
            return
        keep = np.nonzero(self.refs > 0)[0]
        delta = [(h, s) for h, s in self.delta_of.items() if h not in self.missing]
        base, code_size = self.base, self._code_size()

        def blocks() -> Iterator[tuple[np.ndarray, bytes]]:
            if base is not None:
                view = _codes_view(self.faiss, base, self.rows, code_size)
                for start in range(0, len(keep), BATCH):
                    rows = keep[start : start + BATCH]
                    yield self.hashes[rows], view[rows].tobytes()
            for start in range(0, len(delta), BATCH):
                part = delta[start : start + BATCH]
                texts = np.array([h for h, _ in part], dtype=f"S{HASH_BYTES}")
                yield texts, self._encode(self.delta[[s for _, s in part]])

        held = self._layout_hashes()
        if self._write(blocks()):
            self.base = self.scanner = None
            self._load()
            self._follow(held)

    def _layout_hashes(self) -> list[str]:
        nb = self.rows
        by_delta = {slot: h for h, slot in self.delta_of.items()}
        text = self.hashes
        return [text[s].decode() if s < nb else by_delta[s - nb] for s in self.order.tolist()]

    def _follow(self, hashes: Sequence[str]) -> None:
        """Map the layout onto a freshly loaded base (only texts still missing a vector stay
        in the delta, as zeros)."""
        self.refs = np.zeros(self.rows, dtype=np.int32)
        self.delta = np.zeros((0, self.dim), dtype=np.float32)
        self.delta_of, self.delta_refs, self.delta_free = {}, {}, []
        self.missing = set()
        self.order = self._claim(hashes)
        self._inverse = None

    def _build(self, conn: sqlite3.Connection, hashes: Sequence[str]) -> None:
        """Every vector of the layout's texts, from SQLite, to a new file, then loaded (a
        batch at a time: memory holds the codes once)."""
        self.base, self.hashes, self.sorted = None, self.hashes[:0], self.sorted[:0]
        self.scanner = None
        first = conn.execute(
            "SELECT length(vector) FROM embeddings WHERE model = ? LIMIT 1", (self.model_id,)
        ).fetchone()
        self.dim = int(first[0]) // 4 if first else 0
        if self.dim and self._write(self._from_sqlite(conn, set(hashes))):
            self._load()
        elif self.dim:  # the folder cannot be written: the same, in memory only
            base = self._quantizer()
            texts: list[np.ndarray] = []
            for part, codes in self._from_sqlite(conn, set(hashes)):
                base.add(self._decode(codes))
                texts.append(part)
            self._adopt(base, np.concatenate(texts) if texts else self.hashes[:0])
        self._layout(conn, hashes)

    def _from_sqlite(
        self, conn: sqlite3.Connection, wanted: set[str]
    ) -> Iterator[tuple[np.ndarray, bytes]]:
        cursor = conn.execute(
            "SELECT text_hash, vector FROM embeddings WHERE model = ?", (self.model_id,)
        )
        while batch := cursor.fetchmany(BATCH):
            batch = [r for r in batch if r[0] in wanted and len(r[1]) == 4 * self.dim]
            if batch:
                block = np.frombuffer(b"".join(r[1] for r in batch), dtype=np.float32)
                self.reads += len(batch)
                texts = np.array([r[0] for r in batch], dtype=f"S{HASH_BYTES}")
                yield texts, self._encode(block.reshape(len(batch), self.dim))

    def _adopt(
        self,
        base: faiss.IndexScalarQuantizer,
        texts: np.ndarray,
        order: np.ndarray | None = None,
    ) -> None:
        self.base, self.hashes = base, texts
        self.sorted = np.argsort(texts, kind="stable").astype(np.int64) if order is None else order
        self.scanner = self._scanner_of(base)

    def _scanner_of(self, base: faiss.IndexScalarQuantizer) -> faiss.IndexPQFastScan | None:
        if base.ntotal < max(self.fast_scan_from, 1) or self.dim % 2:
            return None
        codes = _codes_view(self.faiss, base, base.ntotal, self._code_size())
        return fast_scan.build(self.faiss, base, codes)

    def _encode(self, block: np.ndarray) -> bytes:
        return self._quantizer().sa_encode(np.ascontiguousarray(block, np.float32)).tobytes()

    def _decode(self, codes: bytes) -> np.ndarray:
        raw = np.frombuffer(codes, dtype=np.uint8).reshape(-1, self._code_size())
        return self._quantizer().sa_decode(raw)

    def _quantizer(self) -> faiss.IndexScalarQuantizer:
        """Each encode, decode and build goes through here, on whichever thread syncs."""
        faiss = self.faiss
        one_faiss_thread(faiss)
        return faiss.IndexScalarQuantizer(
            self.dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
        )

    def _code_size(self) -> int:
        return 2 * self.dim

    def _write(self, blocks: Iterable[tuple[np.ndarray, bytes]]) -> bool:
        """Codes as they come, then the texts, their order and the header, to a temporary
        file, fsync, rename: a writer killed midway leaves the old file (or none). False
        when the folder cannot be written (the store then lives in memory). The temporary
        files of writers killed midway are zeroed and removed first: one may hold a vector
        forgotten since."""
        for stale in _dead_writers_files(self.path):
            with contextlib.suppress(OSError):
                _scrub(stale)
                stale.unlink()
        tmp = self.path.with_name(f"{self.path.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                crc = zlib.crc32(MAGIC)
                f.write(MAGIC)
                parts: list[np.ndarray] = []
                for texts, codes in blocks:
                    f.write(codes)
                    crc = zlib.crc32(codes, crc)
                    parts.append(texts)
                texts = np.concatenate(parts) if parts else np.zeros(0, f"S{HASH_BYTES}")
                order = np.argsort(texts, kind="stable").astype(np.int64)
                header = json.dumps(
                    {
                        "model": self.model_id,
                        "dim": self.dim,
                        "rows": len(texts),
                        "code_size": self._code_size(),
                        "seq": self.seq,
                    }
                ).encode()
                tail = texts.tobytes() + order.tobytes() + header + struct.pack("<I", len(header))
                crc = zlib.crc32(tail, crc)
                f.write(tail + struct.pack("<I", crc))
                f.flush()
                os.fsync(f.fileno())
            _scrub(self.path)
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self.writable = False
            if self._say:
                self._say(f"vector store {self.path} cannot be written ({exc}); kept in memory")
            return False
        self.writes += 1
        return True

    def _load(self) -> None:
        """The base from the file; ``StoreError`` when it is missing, damaged or foreign."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise StoreError(f"cannot be read ({exc.strerror})") from exc
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC) + 8 or f.read(len(MAGIC)) != MAGIC:
                raise StoreError("is damaged (no header)")
            f.seek(size - 8)
            length, stored_crc = struct.unpack("<II", f.read(8))
            f.seek(max(size - 8 - length, 0))
            raw = f.read(length)
            try:
                header = json.loads(raw)
                model, dim, rows = header["model"], int(header["dim"]), int(header["rows"])
                code_size = int(header["code_size"])
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreError("is damaged (header)") from exc
            if model != self.model_id or (self.dim and dim != self.dim):
                raise StoreError(f"holds vectors of another model ({model}, {dim}-d)")
            if size != len(MAGIC) + rows * (code_size + HASH_BYTES + 8) + length + 8:
                raise StoreError("is damaged (size)")
            self.dim = dim
            base = self._quantizer()
            texts = np.empty(rows, dtype=f"S{HASH_BYTES}")
            order = np.empty(rows, dtype=np.int64)
            f.seek(len(MAGIC))
            crc = zlib.crc32(MAGIC)
            if rows:
                base.codes.resize(rows * code_size)
                crc = _read_into(f, _codes_view(self.faiss, base, rows, code_size), crc)
            base.ntotal = rows
            crc = _read_into(f, texts.view(np.uint8), crc)
            crc = _read_into(f, order.view(np.uint8), crc)
            crc = zlib.crc32(raw + struct.pack("<I", length), crc)
            if crc != stored_crc:
                raise StoreError("is damaged (checksum)")
        if rows and not np.array_equal(np.sort(order), np.arange(rows)):
            raise StoreError("is damaged (order)")
        self._adopt(base, texts, order)


def _with_neighbours(positions: np.ndarray, layout: ChunkLayout) -> np.ndarray:
    """These positions and the chunks before and after each, sorted, once each."""
    picked = np.unique(positions)
    around = np.concatenate([picked, layout.prev[picked], layout.next[picked]])
    return np.unique(around[around >= 0])


def _read_into(f: Any, view: np.ndarray, crc: int) -> int:
    flat = view.reshape(-1)
    for start in range(0, len(flat), 1 << 26):
        part = flat[start : start + (1 << 26)]
        if f.readinto(part.data) != len(part):
            raise StoreError("is damaged (truncated)")
        crc = zlib.crc32(part.data, crc)
    return crc


def _codes_view(faiss: Any, base: Any, rows: int, code_size: int) -> np.ndarray:
    """The fp16 codes faiss holds, as a numpy array over its memory (no copy)."""
    flat = faiss.rev_swig_ptr(base.codes.data(), rows * code_size)
    return np.asarray(flat).reshape(rows, code_size)


def _dead_writers_files(path: Path) -> list[Path]:
    """``path``'s temporary files (``.tmp-<pid>``) whose writer no longer runs."""
    found = []
    for tmp in path.parent.glob(f"{path.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _running(int(pid)):
            found.append(tmp)
    return found


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _scrub(path: Path) -> None:
    """Zero the old file in place before it is replaced: a forgotten vector must not stay in
    its freed blocks. A reader that opened it meanwhile finds a bad checksum and rebuilds."""
    with contextlib.suppress(FileNotFoundError), open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        zeros = bytes(1 << 20)
        for _ in range(0, size, len(zeros)):
            f.write(zeros)
        f.truncate(size)
        f.flush()
        os.fsync(f.fileno())


Vectors = VectorCache | Float16Vectors


@dataclass(frozen=True)
class VectorChoice:
    """Which vectors a layout of ``n`` chunks gets: the float32 cache below ``threshold``
    (``index.float16_vectors_from``), the float16 store from there on (and until the layout
    falls under half of it, so a workspace near the line does not flip back and forth)."""

    path: Path
    threshold: int
    on_message: Callable[[str], None] | None = None

    def fits(self, vectors: Vectors, n: int) -> bool:
        if isinstance(vectors, Float16Vectors):
            return n >= self.threshold // 2
        return n < self.threshold or not _has_faiss()

    def make(self, model_id: str, n: int) -> Vectors:
        if n >= self.threshold:
            if _has_faiss():
                return Float16Vectors(model_id, self.path, self.on_message)
            if self.on_message:
                self.on_message(
                    f"{n} chunks, but faiss-cpu is not installed: vectors stay in memory as "
                    "float32 (pip install faiss-cpu)"
                )
        return VectorCache(model_id)


@functools.cache
def _has_faiss() -> bool:
    try:
        load_faiss()
    except ImportError:
        return False
    return True


class Float16Scan:
    """A :class:`~mdmem.index.backend.VectorScan` of the store: in :meth:`scan`, faiss's
    nearest and the exact cosines of them and their neighbours; in :meth:`scored`, those of
    the keyword candidates and their neighbours, which the keyword search beside it found."""

    def __init__(self, store: Float16Vectors, layout: ChunkLayout, allowed: np.ndarray) -> None:
        self._store = store
        self._layout = layout
        self._allowed = allowed
        self._query: np.ndarray | None = None
        self._near: Scored | None = None
        store._positions()  # built here, on the connection's thread: the scan's only reads it

    def scan(self, query: np.ndarray) -> None:
        self._query = query
        found = self._store.nearest(query, self._allowed)
        self._near = None if found is None else self._store.around(query, found, self._layout)

    def scored(self, keyword: Scored | None) -> Scored | None:
        if self._query is None or self._near is None:
            return None
        if keyword is None or keyword.positions is None:
            return self._near
        return self._store.with_also(self._query, self._near, self._layout, keyword.positions)


def forgotten(vectors: Vectors | None, path: Path) -> None:
    """After ``forget`` or a rebuild that masked secrets: no vector of a text the index lost
    stays in the file (rewritten by a store in step with the index, else zeroed and
    removed: the next search rebuilds it)."""
    if isinstance(vectors, Float16Vectors) and vectors.writable:
        vectors.forgotten()
        return
    if path.exists():
        _scrub(path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
