"""The pipelined sync (issue 15): files are read, chunks stored and texts embedded at once, on
three threads, and the index is exactly what reading each file alone and embedding the texts
in other batches gives; an error on any thread is raised as it was, leaving whole steps and
a sync that finishes the job."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.index import sync as neutral
from mdmem.index.chunks import chunk_document
from mdmem.markdown.parse import parse_document
from mdmem.memory.scan import FileStat

FILES = 30  # three batches of files (8, 16, 6)


def write_files(root: Path) -> None:
    """Files of different lengths; one text repeated in every file (embedded once)."""
    for n in range(FILES):
        entries = "".join(
            f"- Fact {n}.{i}: the {'very ' * (i * n % 7)}old crane {n} lifts crate {i}\n"
            for i in range(4)
        )
        text = f"# Yard\n\n{entries}- Shared: the gate closes at six\n"
        (root / "notes" / f"yard{n:02}.md").write_text(text)


def workspace(tmp_path: Path, embedder: object) -> Workspace:
    root = tmp_path / "ws"
    (root / "notes").mkdir(parents=True)
    write_files(root)
    return Workspace(root, embedder=embedder)  # type: ignore[arg-type]


def stored(ws: Workspace) -> dict[tuple[str, str], tuple[str, str]]:
    rows = ws.index._backend.conn.execute("SELECT path, id, embed_text, text_hash FROM chunks")
    return {(path, cid): (text, text_hash) for path, cid, text, text_hash in rows}


def vectors(ws: Workspace, model_id: str) -> dict[str, np.ndarray]:
    rows = ws.index._backend.conn.execute(
        "SELECT text_hash, vector FROM embeddings WHERE model = ?", (model_id,)
    )
    return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}


class Failing:
    """The real model, failing on its ``fail_at``-th batch (an API or model error)."""

    def __init__(self, model: object, fail_at: int) -> None:
        self.model = model
        self.model_id = model.model_id  # type: ignore[attr-defined]
        self.fail_at = fail_at
        self.calls = 0

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the model ran out of memory")
        return self.model.embed(texts, progress)  # type: ignore[attr-defined]


def test_the_pipelined_sync_stores_what_each_file_alone_gives(tmp_path: Path, embedder) -> None:
    with workspace(tmp_path, embedder) as ws:
        seen: list[tuple[str, int, int]] = []
        report = ws.index.update(
            progress=lambda stage, done, total: seen.append((stage, done, total))
        )
        chunks = stored(ws)
        expected = {}
        for path in sorted((ws.root / "notes").iterdir()):
            rel = path.relative_to(ws.root).as_posix()
            doc = parse_document(rel, path.read_text())
            for chunk in chunk_document(doc, ws.index._backend.redactor):
                expected[(rel, chunk.id)] = (chunk.embed_text, chunk.text_hash)
        assert chunks == expected
        texts = {text_hash: text for text, text_hash in chunks.values()}
        assert report.embedded == len(texts) < len(chunks)  # the shared line once
        got = vectors(ws, embedder.model_id)
        assert got.keys() == texts.keys()
        order = sorted(texts, key=lambda h: -len(texts[h]))  # other batches than the sync's
        alone = embedder.embed([texts[h] for h in order])
        np.testing.assert_allclose(np.stack([got[h] for h in order]), alone, atol=2e-4)
        files = [s for s in seen if s[0] == "files"]
        assert files == [("files", 8, FILES), ("files", 24, FILES), ("files", FILES, FILES)]
        assert seen[-1] == ("embedding", len(texts), len(texts))
        assert ws.index.update().changed == 0 and ws.index.update().embedded == 0


PIPELINE_THREADS = ("mdmem-read", "mdmem-embed")
"""The threads a sync starts (its reader, its embedding pool). Other mdmem threads may outlive a
test by design: the search worker, and another test's late-save guard still watching its
windows on this process."""


def _sync_threads() -> list[threading.Thread]:
    """The sync's threads still running."""
    return [t for t in threading.enumerate() if t.name.startswith(PIPELINE_THREADS)]


def test_a_model_error_is_raised_and_the_next_sync_finishes_the_job(
    tmp_path: Path, embedder
) -> None:
    failing = Failing(embedder, fail_at=2)
    with workspace(tmp_path, failing) as ws:
        with pytest.raises(RuntimeError, match="ran out of memory"):
            ws.index.update()
        assert not _sync_threads()
        chunks = stored(ws)
        assert {path for path, _ in chunks} == {
            f"notes/yard{n:02}.md" for n in range(FILES)
        }  # every file's chunks, whole
        partial = vectors(ws, embedder.model_id)
        assert 0 < len(partial) < len({h for _, h in chunks.values()})  # the first batch
        report = ws.index.update()  # the model works again: the rest is embedded
        assert report.embedded == len({h for _, h in chunks.values()}) - len(partial)
        assert vectors(ws, embedder.model_id).keys() == {h for _, h in chunks.values()}
        hits = ws.search("old crane 17 lifts crate 2", mode="vector", k=3)
        assert any("yard17" in hit.path for hit in hits)


def test_a_reader_error_stops_the_threads_and_is_raised_as_it_was() -> None:
    stats = [FileStat(f"f{n}.md", 1, 1) for n in range(40)]
    written: list[list[str]] = []

    def read(batch: list[FileStat], report: neutral.SyncReport):  # type: ignore[no-untyped-def]
        if batch[0].path == "f8.md":  # the second batch
            raise UnicodeError("f8.md: not what the reader expected")
        report.problems.append(neutral.Problem(batch[0].path, "odd"))
        return [], [neutral.ParsedFile(stat, "digest", []) for stat in batch]

    writer = neutral.Writer(
        store_files=lambda touched, parsed: written.append([p.stat.path for p in parsed]) or [],
        finish_files=lambda: pytest.fail("the files were not all stored"),
        store_vectors=lambda hashes, vectors: None,
    )
    report = neutral.SyncReport()
    with pytest.raises(UnicodeError, match=r"f8\.md"):
        neutral.pipeline(stats, read, writer, None, report)
    assert written == [[f"f{n}.md" for n in range(8)]]
    assert [p.path for p in report.problems] == ["f0.md"]  # what was read is reported
    assert not _sync_threads()
