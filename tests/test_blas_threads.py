"""The index's vector products run with numpy's BLAS on one thread, and only while they run
(mdmem/index/sqlite/blas.py): the agent's own numpy work keeps its threads."""

from __future__ import annotations

import threading

import numpy as np
from threadpoolctl import threadpool_info

from mdmem.index.sqlite.blas import OneBlasThread


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_the_process_setting_after() -> None:
    before = _blas_threads()
    assert before, "numpy's BLAS is loaded"
    guard = OneBlasThread()
    with guard:
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


def test_searches_on_several_threads_take_turns_and_leave_the_setting_as_it_was() -> None:
    before = _blas_threads()
    guard = OneBlasThread()
    vectors = np.ones((5000, 64), dtype=np.float32)
    results: list[float] = []

    def search() -> None:
        for _ in range(50):
            with guard:
                results.append(float((vectors @ vectors[0])[0]))

    threads = [threading.Thread(target=search) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [64.0] * 200
    assert _blas_threads() == before
