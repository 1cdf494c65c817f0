"""What keeps the SQLite index fast from 100k to 1M chunks, behind one boundary: the plain
backend (``db``, ``store``, ``read``, ``purge``, ``index``) works without any of it, and each
module here says in its docstring, in one line starting "Why:", the measurement it exists for.

chunk_layout_cache (the layout in memory, spliced after a change), vector_cache (the float32
vectors in memory, following the splice by content), float16_vectors (float16 vectors in faiss,
in a file beside the index, from ``index.float16_vectors_from`` chunks), fast_scan (its 4-bit
copy that picks the nearest rows), faiss_threads (faiss on one OpenMP thread), cosine (the
query-by-vectors product without BLAS), keyword (keyword candidates at a bounded cost)."""
