"""faiss on one OpenMP thread in each thread that searches, imported on first use only
(``mdmem --help`` never pays for it).

Why: with the model loaded in the same process, faiss's two OpenMP threads made a search's vector
part take 2.4 times the CPU and 2.2 times the wall time at 100k chunks (43.8 against 18.1 ms of
CPU), and 1.6 times at 1M (docs/performance.md, "Speed and memory").
"""

from __future__ import annotations

from typing import Any


def load_faiss() -> Any:
    """faiss, on one thread in the thread that imports it."""
    import faiss

    one_faiss_thread(faiss)
    return faiss


def one_faiss_thread(faiss: Any) -> None:
    """Set by each thread that searches: OpenMP keeps the setting per thread, and a search
    scans on a thread of its own."""
    faiss.omp_set_num_threads(1)
