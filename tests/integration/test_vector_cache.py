"""The in-memory vector cache follows the index by reading only what is new, and always equals
the vectors read at once from SQLite: edits, new and deleted files, text moved between files,
row ids SQLite reuses, forgotten entries."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mdmem import Workspace
from mdmem.index.sqlite import read


def _same_as_a_full_read(ws: Workspace) -> None:
    index = ws.index._backend
    model = ws.index.embedder().model_id  # type: ignore[union-attr]
    cached = index.vectors(model)
    full = read.vectors(index.conn, index.layout(), model)
    assert cached.shape == full.shape
    assert np.array_equal(cached, full)


def test_the_cache_reads_only_new_texts_and_equals_a_full_read(tmp_path: Path, embedder) -> None:
    root = tmp_path / "ws"
    (root / "notes").mkdir(parents=True)
    for i in range(12):
        facts = "\n".join(
            f"- Fact {j} of note {i}: the {j}th server is in rack {i}" for j in range(4)
        )
        (root / "notes" / f"n{i:02}.md").write_text(f"# Note {i}\n\n## Facts\n{facts}\n")
    ws = Workspace(root, embedder=embedder)
    ws.index.update()
    index = ws.index._backend
    model = embedder.model_id
    cache = index.vector_cache(model)
    assert cache.reads == 48  # the first load: every text
    _same_as_a_full_read(ws)

    def step(change, new_texts: int) -> None:  # type: ignore[no-untyped-def]
        before = cache.reads
        change()
        ws.index.update()
        _same_as_a_full_read(ws)
        assert index.vector_cache(model) is cache  # updated, not replaced
        assert cache.reads - before == new_texts

    note = root / "notes" / "n03.md"
    step(lambda: note.write_text(note.read_text() + "- A new fact: backups run at 3am\n"), 1)
    step(lambda: (root / "notes" / "n11.md").unlink(), 0)  # the highest row ids go
    # a new file takes the row ids SQLite hands out again (its embedded texts, with their file
    # context, are new)
    step(lambda: (root / "notes" / "zz.md").write_text(
        "# Z\n\n## Facts\n- The coffee machine is on floor 2\n"
        "- Fact 1 of note 0: the 1th server is in rack 0\n"), 2)  # fmt: skip
    moved = (root / "notes" / "n05.md").read_text()
    step(lambda: ((root / "notes" / "n05.md").unlink(),
                  (root / "notes" / "moved.md").write_text(moved)), 0)  # fmt: skip

    # forgetting an entry drops its vector from memory too, not only from SQLite
    hit = ws.search("coffee machine floor", k=1)[0]
    text_hash = index.conn.execute(
        "SELECT text_hash FROM chunks WHERE entry_id = ? OR id = ?", (hit.id, hit.id)
    ).fetchone()[0]
    assert text_hash in cache.slot_of
    slot = cache.slot_of[text_hash]
    ws.forget(hit.id)
    ws.search("coffee", k=1)  # the next search brings the cache in step
    _same_as_a_full_read(ws)
    assert text_hash not in cache.slot_of and not cache.matrix[slot].any()
