"""A hybrid search runs its two retrievers side by side (issue 15): the query's embedding
and the vector scan on a second thread, the keyword search on the caller's, which holds the
index's connection. These tests make the keyword search wait for the vector half, so a search
that ran them one after the other would never finish. The second thread is a lasting worker
that runs OpenMP (torch, faiss) on one thread, its own setting alone (``index/vector_worker.py``)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mdmem import Workspace
from mdmem.config import IndexConfig, load_config
from mdmem.index.backend import Scored
from mdmem.index.filters import Filters
from mdmem.index.search import search
from mdmem.index.vector_worker import beside

WAIT_S = 20.0


def _workspace(root: Path, embedder: Any, compact: bool) -> Workspace:
    root.mkdir()
    (root / "notes.md").write_text(
        "# Ops\n\n"
        + "".join(
            f"## Service {n}\n\nService {n} deploys to region eu-{n} every {n} days.\n\n"
            for n in range(30)
        )
        + "## Staging\n\nStaging runs on Fly.io with port 6543.\n"
    )
    config = load_config(root)
    if compact:  # the faiss store from the first chunk on
        config = dataclasses.replace(config, index=IndexConfig(float16_vectors_from=0))
    ws = Workspace(root, config, embedder=embedder)
    ws.index.update()
    return ws


class _Gate:
    """Wraps the index: the keyword search waits until the vector scan has started."""

    def __init__(
        self,
        index: Any,
        fail_scan: bool = False,
        on_scan: Callable[[], None] = lambda: None,
        after_scan: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_scan`` runs as the scan starts, ``after_scan`` once it ends (on its thread)."""
        self.index = index
        self.fail_scan = fail_scan
        self.on_scan = on_scan
        self.after_scan = after_scan
        self.started = threading.Event()
        self.scan_thread: int | None = None
        self.keyword_found: Scored | None = None
        self.scored_with: Scored | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        assert self.started.wait(WAIT_S), "the vector half did not start beside the keyword search"
        self.keyword_found = self.index.keyword_candidates(query, limit)
        return self.keyword_found

    def vector_scan(self, model_id: str, *, filters: Filters | None = None) -> Any:
        real = self.index.vector_scan(model_id, filters=filters)
        gate = self

        class Scan:
            def scan(self, query: np.ndarray) -> None:
                gate.scan_thread = threading.get_ident()
                gate.started.set()
                gate.on_scan()
                if gate.fail_scan:
                    raise RuntimeError("scan failed")
                real.scan(query)
                gate.after_scan()

            def scored(self, keyword: Scored | None) -> Scored | None:
                gate.scored_with = keyword
                return real.scored(keyword)

        return Scan()


def _search(index: Any, ws: Workspace, query: str) -> list[tuple[str, int, float, str]]:
    hits = search(
        index,
        ws.index.embedder(),
        query,
        k=5,
        mode="hybrid",
        config=ws.config.search,
        filters=Filters(),
        track_access=False,
    )
    return [(h.path, h.start_line, round(h.score, 9), h.text) for h in hits]


@pytest.mark.parametrize("compact", [False, True], ids=["float32", "store"])
def test_the_vector_half_runs_beside_the_keyword_search(
    tmp_path: Path, embedder: Any, compact: bool
) -> None:
    ws = _workspace(tmp_path / "ws", embedder, compact)
    try:
        query = "which port does staging use"
        plain = _search(ws.index._backend, ws, query)
        gate = _Gate(ws.index._backend)
        gated = _search(gate, ws, query)
    finally:
        ws.close()
    assert gated == plain
    assert "port 6543" in plain[0][3]
    assert gate.scan_thread is not None and gate.scan_thread != threading.get_ident()
    # the vector half also scores exactly this search's own keyword candidates
    assert gate.scored_with is gate.keyword_found


def test_an_error_of_either_half_reaches_the_caller_and_leaves_no_thread(
    tmp_path: Path, embedder: Any
) -> None:
    ws = _workspace(tmp_path / "ws", embedder, compact=False)
    try:
        with pytest.raises(RuntimeError, match="scan failed"):
            _search(_Gate(ws.index._backend, fail_scan=True), ws, "staging port")

        class KeywordFails(_Gate):
            def keyword_candidates(self, query: str, limit: int) -> Scored:
                raise OSError("disk gone")

        with pytest.raises(OSError, match="disk gone"):
            _search(KeywordFails(ws.index._backend), ws, "staging port")
        assert not [t for t in threading.enumerate() if t.name == "mdmem-vector"]
        assert _search(ws.index._backend, ws, "staging port")  # and the index still searches
        gate = _Gate(ws.index._backend)
        _search(gate, ws, "staging port")  # the worker is free again: the half runs there
        assert gate.scan_thread in {t.ident for t in threading.enumerate() if t.daemon}
    finally:
        ws.close()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenMP has one thread anyway")
def test_faiss_scans_on_one_thread_whichever_thread_searches(tmp_path: Path, embedder: Any) -> None:
    """OpenMP keeps its thread count per thread: the scan thread sets its own."""
    ws = _workspace(tmp_path / "ws", embedder, compact=True)
    try:
        scan = ws.index._backend.vector_scan(embedder.model_id)
        query = embedder.embed(["staging port"])[0]
        threads: list[int] = []

        def run() -> None:
            from mdmem.index.sqlite.scale.faiss_threads import load_faiss

            scan.scan(query)
            threads.append(load_faiss().omp_get_max_threads())

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        assert threads == [1]
        assert scan.scored(None) is not None
    finally:
        ws.close()


def test_a_search_on_a_thread_that_outlives_the_main_one(tmp_path: Path) -> None:
    """A thread still searching after the main thread returned (the interpreter is shutting
    down: executors refuse work then) gets its hybrid hits."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("# Ops\n\nStaging runs on Fly.io with port 6543.\n")
    script = f"""
import threading, time
import numpy as np
from mdmem import Workspace
from mdmem.config import load_config
from pathlib import Path

class Letters:
    model_id = "test/letters-26"
    def embed(self, texts, progress=None):
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for row, text in enumerate(texts):
            for ch in text.lower():
                if "a" <= ch <= "z":
                    out[row, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

root = Path({str(root)!r})
ws = Workspace(root, load_config(root), embedder=Letters())
ws.index.update()

def later():
    time.sleep(0.5)
    hits = ws.search("staging port", k=1, mode="hybrid")
    print("found:", hits[0].text, hits[0].scores.vector is not None, flush=True)

threading.Thread(target=later).start()
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert "found: Staging runs on Fly.io with port 6543. True" in done.stdout, done.stderr


def test_the_vector_half_runs_openmp_on_one_thread_and_leaves_others_alone(
    tmp_path: Path, embedder: Any
) -> None:
    import torch

    def in_a_new_thread() -> int:
        """What a thread started now gets (faiss set this one's own count to 1)."""
        counts: list[int] = []
        thread = threading.Thread(target=lambda: counts.append(torch.get_num_threads()))
        thread.start()
        thread.join()
        return counts[0]

    before = in_a_new_thread()
    ws = _workspace(tmp_path / "ws", embedder, compact=False)
    seen: list[int] = []
    try:

        def search() -> None:
            counted = _Gate(ws.index._backend, on_scan=lambda: seen.append(torch.get_num_threads()))
            hits = _search(counted, ws, "which port does staging use")
            assert "port 6543" in hits[0][3]

        search()
        search()
        # a job on the worker that sets torch's count (a model loading there with
        # embedding.threads) leaves it one again for the next search
        try:
            beside(lambda: torch.set_num_threads(2), lambda: None)
        finally:
            torch.set_num_threads(before)  # (torch's count for later threads, as it was)
        search()
    finally:
        ws.close()
    assert seen == [1, 1, 1]
    assert in_a_new_thread() == before


def test_a_search_that_finds_the_worker_busy_gets_a_thread_of_its_own(
    tmp_path: Path, embedder: Any
) -> None:
    """Two threads search at once: the first one's vector half holds the worker until the
    second search has finished, which would never happen if the second waited for the worker."""
    ws = _workspace(tmp_path / "ws", embedder, compact=False)
    second_done = threading.Event()
    first: list[list[tuple[str, int, float, str]]] = []
    try:

        def hold() -> None:
            assert second_done.wait(WAIT_S), "the second search waited for the first"

        holding = _Gate(ws.index._backend, after_scan=hold)
        runner = threading.Thread(
            target=lambda: first.append(_search(holding, ws, "which port does staging use"))
        )
        runner.start()
        assert holding.started.wait(WAIT_S)
        other = _Gate(ws.index._backend)
        second = _search(other, ws, "which port does staging use")
        second_done.set()
        runner.join(WAIT_S)
    finally:
        ws.close()
    assert first == [second] and "port 6543" in second[0][3]
    assert other.scan_thread not in (holding.scan_thread, threading.get_ident())


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenMP has one thread anyway")
def test_the_worker_serves_on_when_the_thread_count_cannot_be_set(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A search may already wait in its queue: the worker never ends, it says why once and
    runs its jobs on torch's count."""
    import threadpoolctl
    import torch  # noqa: F401 - loaded, as in a process that embeds

    from mdmem.index.vector_worker import Worker

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("no OpenMP here")

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", refuse)
    worker = Worker()
    ran: list[int] = []
    for n in range(3):
        done = threading.Event()
        assert worker.take()
        worker.submit(lambda n=n: ran.append(n), done)
        assert done.wait(WAIT_S)
    assert ran == [0, 1, 2] and worker.alive()
    assert [r.message for r in caplog.records].count(
        "cannot set one OpenMP thread for searches: no OpenMP here"
    ) == 1
