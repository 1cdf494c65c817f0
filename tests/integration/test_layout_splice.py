"""After a change, the in-memory layout and vectors are spliced (only the changed files are
read again) and always equal a full read: edits, new, deleted and renamed files, session files,
a pruned change log, a deleted index, and a reader racing a writer in another connection."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from mdmem import Workspace
from mdmem.index.sqlite import read
from mdmem.index.sqlite.index import SqliteIndex

QUERIES = ("rack server backups", "coffee machine floor", "deploy the ledger")


def _write_notes(root: Path, files: int) -> None:
    (root / "notes").mkdir(parents=True)
    for i in range(files):
        facts = "\n".join(f"- Fact {j} of note {i}: server {j} sits in rack {i}" for j in range(3))
        (root / "notes" / f"n{i:02}.md").write_text(f"# Note {i}\n\n## Facts\n{facts}\n")
    (root / ".sessions").mkdir()
    (root / ".sessions" / "20261101_090000_a_deploy.md").write_text(
        "# Session: deploy\n\n## Events\n"
        "- **user** [2026-11-01 09:00] deploy the ledger service\n"
        "- **agent** [2026-11-01 09:01] the ledger is deployed to rack 4\n"
    )


def _same_as_a_full_read(index: SqliteIndex, model: str) -> None:
    """Layout, texts and vectors in memory equal what a full read of the same snapshot gives."""
    with index.searching(), index.reading():
        layout = index.layout()
        cache = index._cache
        full, texts = read.layout_and_texts(index.conn)
        for name in ("rowids", "file_starts", "file_of", "prev", "next", "stream", "archived"):
            assert np.array_equal(getattr(layout, name), getattr(full, name)), name
        assert layout.file_paths == full.file_paths
        assert np.array_equal(layout.rowids[layout.by_rowid], np.sort(full.rowids))
        assert cache.texts == texts
        assert np.array_equal(index.vectors(model), read.vectors(index.conn, full, model))


def _hits(ws: Workspace) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.path, h.start_line, round(h.score, 6)) for h in ws.search(q, k=5, track_access=False)]
        for q in QUERIES
    ]


def test_a_change_is_spliced_in_and_equals_a_full_read(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    _write_notes(root, 30)
    ws = Workspace(root, embedder=embedder)
    ws.index.update()
    model = embedder.model_id
    index = ws.index._backend
    _same_as_a_full_read(index, model)
    cache = index._cache
    loads = cache.loads
    notes = root / "notes"

    def step(change) -> None:  # type: ignore[no-untyped-def]
        splices = cache.splices
        change()
        ws.index.update()
        _same_as_a_full_read(index, model)
        assert cache.splices == splices + 1 and cache.loads == loads  # spliced, not reloaded
        with Workspace(root, embedder=embedder) as fresh:  # a layout loaded from scratch
            assert _hits(ws) == _hits(fresh)

    step(lambda: (notes / "n07.md").write_text((notes / "n07.md").read_text() + "- backups\n"))
    step(lambda: (notes / "aa.md").write_text("# A\n\n- The coffee machine is on floor 2\n"))
    step(lambda: (notes / "zz.md").write_text("# Z\n\n- Rack 9 holds the coffee server\n"))
    step(lambda: (notes / "n00.md").unlink())  # the first file
    step(lambda: (notes / "zz.md").unlink())  # the last file
    step(lambda: (notes / "n12.md").rename(notes / "n12b.md"))  # text moved between files
    session = root / ".sessions" / "20261101_090000_a_deploy.md"
    step(lambda: session.write_text(session.read_text() + "- **user** [2026-11-01 09:02] ok\n"))

    # a vector stored after the chunks were spliced in (a watcher embeds after indexing)
    (notes / "late.md").write_text("# Late\n\n- The ledger export runs nightly\n")
    ws.index.update(embed=False)
    index.layout()
    assert cache.vectors is not None and cache.vectors.missing
    ws.index.update()
    _same_as_a_full_read(index, model)
    assert not cache.vectors.missing and cache.loads == loads

    # the log no longer reaches back to what this reader saw: it reads everything again
    (notes / "n20.md").write_text("# Twenty\n\n- Changed, then pruned from the log\n")
    ws.index.update()
    with index.conn:
        index.conn.execute("DELETE FROM changes")
    (notes / "n21.md").write_text("# Twenty-one\n\n- Changed after the pruning\n")
    ws.index.update()
    _same_as_a_full_read(index, model)
    assert cache.loads == loads + 1
    ws.close()


def test_a_deleted_index_is_rebuilt_and_searched_as_from_scratch(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    _write_notes(root, 8)
    ws = Workspace(root, embedder=embedder)
    before = _hits(ws)
    for suffix in ("", "-wal", "-shm"):
        Path(str(ws.index._backend.db_path) + suffix).unlink(missing_ok=True)
    assert _hits(ws) == before
    _same_as_a_full_read(ws.index._backend, embedder.model_id)
    ws.close()


def test_a_reader_racing_a_writer_always_sees_a_whole_snapshot(tmp_path: Path, embedder) -> None:
    """The writer is another connection (as a watcher in another process is): every layout the
    reader splices equals a full read of the same snapshot."""
    root = tmp_path / "ws"
    _write_notes(root, 20)
    reader = Workspace(root, embedder=embedder)
    reader.index.update()
    writer = Workspace(root, embedder=embedder)
    errors: list[BaseException] = []
    done = threading.Event()

    def read_all_the_time() -> None:
        try:
            while not done.is_set():
                _same_as_a_full_read(reader.index._backend, embedder.model_id)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=read_all_the_time)
    thread.start()
    try:
        for i in range(12):
            path = root / "notes" / f"n{i:02}.md"
            if i % 3 == 0:
                path.unlink()
            else:
                path.write_text(path.read_text() + f"- change {i}: the rack moved\n")
            writer.index.update()
    finally:
        done.set()
        thread.join(60)
    assert not errors, errors[0]
    assert reader.index._backend._cache.splices > 0
    _same_as_a_full_read(reader.index._backend, embedder.model_id)
    reader.close()
    writer.close()
