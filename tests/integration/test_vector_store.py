"""The float16 vector store (float16 in faiss, in a file beside the index) used above
``index.float16_vectors_from`` chunks: it round-trips, rebuilds itself from SQLite when its file
is missing, damaged or foreign, follows edits incrementally, forgets for good, survives a writer
killed midway, and ranks as the float32 path does (scores within float16 rounding); from
``FAST_SCAN_FROM`` rows its fast-scan copy picks the nearest rows, and a mask it cannot honour
falls back to the float16 scan."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.config import IndexConfig, load_config
from mdmem.index.sqlite import read
from mdmem.index.sqlite.scale.fast_scan import FAST_NEAREST
from mdmem.index.sqlite.scale.float16_vectors import Float16Vectors, StoreError, store_path

pytest.importorskip("faiss")

FP16 = 2e-3
"""Largest difference of a cosine between float16 and float32 vectors (unit, 384-d)."""


def _workspace(root: Path, embedder, threshold: int = 0) -> Workspace:  # type: ignore[no-untyped-def]
    config = load_config(root)
    config = replace(config, index=IndexConfig(float16_vectors_from=threshold))
    return Workspace(root, config, embedder=embedder)


def _notes(root: Path, files: int = 8, per_note: int = 4) -> None:
    (root / "notes").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        facts = "\n".join(
            f"- Fact {j} of note {i}: the {j}th server is in rack {i}, row {i * j}"
            for j in range(per_note)
        )
        (root / "notes" / f"n{i:02}.md").write_text(f"# Note {i}\n\n## Facts\n{facts}\n")


def _store(ws: Workspace) -> Float16Vectors:
    store = ws.index._backend.vector_cache(ws.index.embedder().model_id)  # type: ignore[union-attr]
    assert isinstance(store, Float16Vectors)
    return store


def _matches_exact(ws: Workspace, queries: list[str]) -> None:
    """The store's vectors equal SQLite's within float16 rounding, and its candidates hold
    the exact top 10 with the same order and scores."""
    index, embedder = ws.index._backend, ws.index.embedder()
    assert embedder is not None
    store = _store(ws)
    layout = index.layout()
    exact = read.vectors(index.conn, layout, embedder.model_id)
    assert np.abs(store.layout_matrix() - exact).max() < 1e-3
    for query in queries:
        q = embedder.embed([query])[0]
        truth = exact @ q
        rows = store.nearest(q, ~layout.archived, nearest=10)
        assert rows is not None
        found = store.candidates(q, rows, layout)
        assert found.positions is not None
        scores = found.dense(len(truth))
        top = np.argsort(-truth)[:10]
        assert list(np.argsort(-scores)[:10]) == list(top)
        assert np.abs(scores[found.positions] - truth[found.positions]).max() < FP16
        also = np.random.default_rng(0).integers(0, len(truth), 30)  # keyword candidates
        assert np.array_equal(
            store.candidates(q, rows, layout, also[:0]).positions, found.positions
        )
        more = store.candidates(q, rows, layout, also.astype(np.int32))
        assert more.positions is not None and (np.diff(more.positions) > 0).all()
        around = np.concatenate([also, layout.prev[also], layout.next[also], found.positions])
        assert set(more.positions.tolist()) == set(around[around >= 0].tolist())
        assert np.abs(more.scores - truth[more.positions]).max() < FP16


def test_round_trip_and_rebuild_when_missing_damaged_or_foreign(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    _notes(root)
    ws = _workspace(root, embedder)
    ws.index.update()
    first = _store(ws)
    path = store_path(ws.index._backend.db_path)
    assert first.writes == 1 and path.is_file()
    _matches_exact(ws, ["which rack holds the 2th server of note 5"])
    model = embedder.model_id
    hashes = ws.index._backend._cache.texts

    def fresh() -> Float16Vectors:
        store = Float16Vectors(model, path)
        with read.snapshot(ws.index._backend.conn):
            store.update(ws.index._backend.conn, hashes)
        return store

    again = fresh()  # the file as written: loaded, nothing read from SQLite
    assert (again.writes, again.reads) == (0, 0)
    assert np.array_equal(again.layout_matrix(), first.layout_matrix())

    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF  # one flipped bit in the codes
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="checksum"):
        Float16Vectors(model, path)._load()
    rebuilt = fresh()
    assert rebuilt.writes == 1 and np.array_equal(rebuilt.layout_matrix(), first.layout_matrix())

    path.write_bytes(path.read_bytes()[:-100])  # truncated
    assert fresh().writes == 1
    path.unlink()
    assert fresh().writes == 1 and path.is_file()
    with pytest.raises(StoreError, match="another model"):
        Float16Vectors("another/model", path)._load()
    foreign = Float16Vectors("another/model", path)  # no vector of it: an empty store, and
    with read.snapshot(ws.index._backend.conn):  # the file of the model that has vectors stays
        foreign.update(ws.index._backend.conn, hashes)
    assert foreign.rows == 0 and fresh().writes == 0


def test_edits_follow_incrementally_and_rank_as_the_float32_path(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    _notes(root, files=24)
    ws = _workspace(root, embedder)
    ws.index.update()
    store = _store(ws)
    queries = ["rack of the 3th server of note 1", "where is the coffee machine"]
    note = root / "notes" / "n03.md"
    note.write_text(note.read_text() + "- The coffee machine is on floor 2\n")  # added
    ws.index.update()
    (root / "notes" / "n04.md").write_text("# Note 4\n\n## Facts\n- Rack 9 holds the backups\n")
    ws.index.update()  # replaced
    (root / "notes" / "n06.md").unlink()  # deleted
    ws.index.update()
    assert _store(ws) is store  # followed, not reloaded
    assert store.writes == 1 and len(store.delta_of) > 0 and (store.refs == 0).any()
    _matches_exact(ws, queries)

    for i in range(40):  # past REWRITE_SHARE: the file is rewritten, still exact
        (root / "notes" / f"x{i}.md").write_text(f"# X\n\n- Extra fact {i} about tape {i}\n")
    ws.index.update()
    _matches_exact(ws, queries)
    assert store.writes == 2 and not store.delta_of and not (store.refs == 0).any()

    # whole searches: the same hits as the float32 path, scores within float16 rounding
    plain = _workspace(root, embedder, threshold=10**9)
    for query in [*queries, "rack 9 backups", "note 7"]:
        compact = ws.search(query, k=8, track_access=False)
        exact = plain.search(query, k=8, track_access=False)
        assert [(h.path, h.start_line) for h in compact] == [(h.path, h.start_line) for h in exact]
        for a, b in zip(compact, exact, strict=True):
            assert abs(a.score - b.score) < FP16
            assert abs((a.scores.vector or 0) - (b.scores.vector or 0)) < FP16


def test_forget_leaves_no_vector_in_the_file(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    _notes(root, files=3)
    ws = _workspace(root, embedder)
    entry = ws.remember("The vault code is 7341 and it opens the basement door")
    ws.index.update()
    store = _store(ws)
    path = store_path(ws.index._backend.db_path)
    layout = ws.index._backend.layout()
    rows = ws.index._backend.chunk_rows([int(r) for r in layout.rowids])
    at = [i for i, r in enumerate(layout.rowids) if "vault" in rows[int(r)].text]
    secret = read.vectors(ws.index._backend.conn, layout, embedder.model_id)[at]
    codes = [v.astype("<f2").tobytes() for v in secret]
    assert all(c in path.read_bytes() for c in codes)  # fp16 codes, as faiss stores them
    texts = [ws.index._backend._cache.texts[i].encode() for i in at]
    ws.forget(entry.id)
    after = path.read_bytes()
    assert not any(c in after for c in codes)
    assert not any(t in after for t in texts)
    exact = read.vectors(ws.index._backend.conn, ws.index._backend.layout(), embedder.model_id)
    assert np.abs(store.layout_matrix() - exact).max() < 1e-3


def test_a_writer_killed_midway_leaves_a_usable_store(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    _notes(root, files=4)
    ws = _workspace(root, embedder)
    ws.index.update()
    before = _store(ws).layout_matrix()
    path = store_path(ws.index._backend.db_path)
    script = textwrap.dedent(
        f"""
        import os, signal
        from mdmem.index.sqlite.scale.float16_vectors import Float16Vectors
        store = Float16Vectors({embedder.model_id!r}, __import__("pathlib").Path({str(path)!r}))
        store._load()
        def blocks():
            yield store.hashes[:1], b"x" * store._code_size()
            os.kill(os.getpid(), signal.SIGKILL)
        store._write(blocks())
        """
    )
    killed = subprocess.run([sys.executable, "-c", script], check=False)
    assert killed.returncode == -9
    again = Float16Vectors(embedder.model_id, path)
    with read.snapshot(ws.index._backend.conn):
        again.update(ws.index._backend.conn, ws.index._backend._cache.texts)
    assert again.writes == 0  # the old file, whole, not rebuilt
    assert np.array_equal(again.layout_matrix(), before)
    left = list(path.parent.glob(f"{path.name}.tmp-*"))
    assert len(left) == 1  # what the dead writer left
    path.unlink()  # rebuilt from SQLite: the next rewrite zeroes and removes what was left
    rebuilt = Float16Vectors(embedder.model_id, path)
    with read.snapshot(ws.index._backend.conn):
        rebuilt.update(ws.index._backend.conn, ws.index._backend._cache.texts)
    assert rebuilt.writes == 1
    assert list(path.parent.glob(f"{path.name}.tmp-*")) == []


def _random_store(tmp_path: Path, fast_scan_from: int) -> tuple[Float16Vectors, np.ndarray]:
    """2,000 chunks with random unit vectors, in a store that builds its scanner from
    ``fast_scan_from`` rows; also the float32 vectors of its base rows."""
    root = tmp_path / "ws"
    _notes(root, files=20, per_note=100)
    ws = Workspace(root)
    ws.index.update(embed=False)
    conn, model = ws.index._backend.conn, "test/random-384"
    ws.index._backend.layout()
    hashes = ws.index._backend._cache.texts
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(hashes), 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with conn:
        conn.executemany(
            "INSERT INTO embeddings(model, text_hash, dim, vector) VALUES (?, ?, 384, ?)",
            [(model, h, v.tobytes()) for h, v in zip(hashes, vectors, strict=True)],
        )
    store = Float16Vectors(model, tmp_path / "vectors", fast_scan_from=fast_scan_from)
    with read.snapshot(conn):
        store.update(conn, hashes)
    by_text = dict(zip(hashes, vectors, strict=True))
    ws.close()
    return store, np.stack([by_text[h.decode()] for h in store.hashes])


def test_the_fast_scan_picks_the_nearest_rows_and_honours_every_mask(tmp_path: Path) -> None:
    store, base = _random_store(tmp_path, fast_scan_from=1000)
    scanner = store.scanner
    assert scanner is not None and scanner.ntotal == store.rows == 2000
    everyone = np.ones(len(store.order), dtype=bool)
    rng = np.random.default_rng(11)
    queries = rng.standard_normal((40, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    kept = []
    for q in queries:
        truth = np.argsort(-(base @ q))[:10]
        picked = store.nearest(q, everyone, nearest=25)
        assert picked is not None and len(picked) == FAST_NEAREST * 25
        kept.append(np.isin(truth, picked).mean())
    # 0.978 here (the float16 scan: 1.0); a scanner picking at random would keep 0.025
    assert np.mean(kept) >= 0.95

    q = queries[0]
    hidden = rng.random(len(store.order)) < 0.3  # a filter hiding 30%: asked for more, dropped
    picked = store.nearest(q, ~hidden, nearest=25)
    assert picked is not None and len(picked) == FAST_NEAREST * 25
    assert not np.isin(picked, store.order[hidden]).any()

    as_stored = store._vectors(np.arange(store.rows))  # the float16 codes decide the order
    nearest_first = np.argsort(-(as_stored @ q))
    hidden = np.isin(store.order, nearest_first[:200])  # the 200 nearest hidden: the fast scan
    picked = store.nearest(q, ~hidden, nearest=25)  # finds too few, the float16 scan decides
    assert picked is not None and list(picked) == list(nearest_first[200:225])

    hidden = rng.random(len(store.order)) < 0.6  # most rows hidden: the float16 scan decides
    picked = store.nearest(q, ~hidden, nearest=25)
    allowed_rows = np.flatnonzero(~np.isin(np.arange(store.rows), store.order[hidden]))
    best = allowed_rows[np.argsort(-(as_stored[allowed_rows] @ q))[:25]]
    assert picked is not None and list(picked) == list(best)

    store.rewrite()  # a new base: a new scanner over it
    assert store.scanner is not None and store.scanner is not scanner
    assert store.scanner.ntotal == store.rows


def test_a_small_store_has_no_scanner(tmp_path: Path) -> None:
    store, _ = _random_store(tmp_path, fast_scan_from=2001)  # one row short of the line
    assert store.scanner is None
    as_stored = store._vectors(np.arange(store.rows))
    q = as_stored[5]
    picked = store.nearest(q, np.ones(len(store.order), dtype=bool), nearest=10)
    assert picked is not None and list(picked) == list(np.argsort(-(as_stored @ q))[:10])
    at_the_line = Float16Vectors(store.model_id, store.path, fast_scan_from=store.rows)
    at_the_line._load()
    assert at_the_line.scanner is not None and at_the_line.scanner.ntotal == store.rows
