"""Two halves of a hybrid search at once: the vector half (the query's embedding, then the scan)
on a lasting worker thread that runs OpenMP on one thread, the keyword half on the caller's.

Why: at 100k chunks ``ws.search`` with a watcher took p50 / p95 26.1 / 31.6 ms with this worker
against 28.9 / 34.0 with a fresh thread per search (``benchmarks/side_by_side.py``).

OpenMP keeps a thread count per OS thread, and torch gives each thread, on its first parallel
work, the process-wide count (two here). A fresh thread per search embedded its query on two
threads while the keyword search beside it needed one of the two cores; a lasting worker keeps a
count of one and leaves every other thread's alone (``torch.set_num_threads`` would have
changed the count of every thread started later, an indexing thread's too).

The worker runs one vector half at a time: a search that finds it busy (another thread's
search) runs its vector half on a fresh thread, as before. The worker is process-wide because
the setting it keeps belongs to an OS thread; it is a daemon, started on first use.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("mdmem.index.vector_worker")
WORKER_NAME = "mdmem-vector-worker"
"""The lasting worker's thread (a thread that outlives a search by design)."""


class Worker:
    """A daemon thread that runs jobs one at a time, with OpenMP on one thread once torch is
    loaded (a job may load it: the model loads on the first search)."""

    def __init__(self, name: str = WORKER_NAME) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]]
        self._jobs = queue.SimpleQueue()
        self._free = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """False in a forked child: it has the object, and Python marks the thread stopped."""
        return self._thread.is_alive()

    def take(self) -> bool:
        """Reserve the worker for one :meth:`submit`; False when it is busy."""
        return self._free.acquire(blocking=False)

    def submit(self, job: Callable[[], None], done: threading.Event) -> None:
        """Run ``job`` (which must not raise) after :meth:`take`; ``done`` is set once it has
        returned and the worker is free again."""
        self._jobs.put((job, done))

    def _serve(self) -> None:
        can = True  # until a runtime refuses: then torch's count stays
        while True:
            job, done = self._jobs.get()
            if can and "torch" in sys.modules:  # checked each time: a model load in a job may
                try:  # set its own count (embedding.threads)
                    can = one_openmp_thread()
                except Exception as exc:  # never end this thread: a search may be queued
                    log.warning("cannot set one OpenMP thread for searches: %s", exc)
                    can = False
            try:
                job()
            finally:
                self._free.release()
                done.set()


def one_openmp_thread() -> bool:
    """This thread's OpenMP count to 1 in every OpenMP runtime loaded (threadpoolctl), unless
    it is 1 already; whether it is now. torch sets a thread's count on the thread's first
    parallel work, so that goes first."""
    import torch

    if torch.get_num_threads() != 1:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="openmp")
    return torch.get_num_threads() == 1


_worker: Worker | None = None
_starting = threading.Lock()


def _forked() -> None:
    """In a forked child: no worker (its thread stayed in the parent), and a fresh lock (a
    thread of the parent may have held it at the fork)."""
    global _worker, _starting
    _worker, _starting = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _free_worker() -> Worker | None:
    global _worker
    with _starting:
        if _worker is None or not _worker.alive():
            _worker = Worker()
        return _worker if _worker.take() else None


def beside(background: Callable[[], None], foreground: Callable[[], T]) -> T:
    """``foreground()`` on this thread while ``background()`` runs on the worker (or, when it
    is busy, a fresh thread); both have ended when it returns, and an error of either is
    raised. Never an executor: one refuses work once the interpreter shuts down, and a search
    may run then (on a thread still working after the main one returned)."""
    failed: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            background()
        except BaseException as exc:  # raised on the caller's thread below
            failed.append(exc)

    def alone() -> None:
        run()
        done.set()

    worker = _free_worker()
    if worker is not None:
        worker.submit(run, done)
    else:
        threading.Thread(target=alone, name="mdmem-vector", daemon=True).start()
    try:
        result = foreground()
    finally:
        done.wait()
    if failed:
        raise failed[0]
    return result
