"""numpy's BLAS on one thread for the index's own products of the query with stored vectors.

Such a product is bound by memory, not arithmetic: a second BLAS thread barely speeds it up
(100k × 384 float32: 9.3 ms p50 on one thread against 8.1 on two). But OpenBLAS's workers spin
for a while after each call, on the cores torch then needs for the next query embedding: in
``benchmarks/speed.py`` at 100k chunks on a quiet 2-core machine, a vector search with its
query embedding took 30.8 / 113.1 ms p50 / p95 with numpy's two BLAS threads and 20.8 / 25.5 on
one (README, "Speed and memory"). The limit holds only while the index computes, so the rest of
the process (an agent's own numpy work) keeps its threads.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any


class OneBlasThread:
    """``with ONE_BLAS_THREAD:`` — BLAS on one thread inside, as before outside. The thread
    count is one setting for the whole process, so one product at a time holds it (searches
    on several threads take turns for these few milliseconds of memory-bound work), and the
    thread that lowered it restores it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limiter: Any = None
        self._controller: Any = None

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            if self._controller is None:  # looking for the libraries takes ~1.5 ms
                from threadpoolctl import ThreadpoolController

                self._controller = ThreadpoolController().select(user_api="blas")
            self._limiter = self._controller.limit(limits=1)  # ~7 µs
        except BaseException:
            self._lock.release()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            self._limiter.restore_original_limits()
            self._limiter = None
        finally:
            self._lock.release()


ONE_BLAS_THREAD = OneBlasThread()
"""One per process, like the BLAS thread count it guards."""
