"""What ranking reads of a workspace's PostgreSQL index, through one connection: the layout,
keyword and vector candidates, rows and counters, and the generation a view is of.

Both the writer's :class:`~mdmem.index.postgres.index.PostgresIndex` and the pooled readers
of :class:`~mdmem.index.postgres.remote.RemoteIndex` are this; the layout (every chunk in
file order) is cached by index generation, shared by all the views of one process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from mdmem.index.backend import ChunkLayout, Scored, VectorScan
from mdmem.index.backend_base import ConnectionReads
from mdmem.index.filters import Filters
from mdmem.index.postgres import db, postgres_writes, read

MIN_EF_SEARCH = 100


@dataclass(frozen=True)
class Stamp:
    """Which index a search read: its generation and when it was last synced. A remote reader
    sees the index as the indexer last wrote it; this says how old that is."""

    generation: int
    synced: str | None


def settle(conn: psycopg.Connection[Any], candidates: int) -> None:
    """Session settings of a searching connection: ``hnsw.ef_search`` at least the candidates
    wanted (the default 40 would cap them), and iterative scans so filters keep them full."""
    conn.execute(f"SET hnsw.ef_search = {int(max(candidates, MIN_EF_SEARCH))}")
    conn.execute("SET hnsw.iterative_scan = relaxed_order")


class ChunkLayouts:
    """The layout of the newest generation seen, shared by threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: tuple[int, ChunkLayout] | None = None

    def get(self, conn: psycopg.Connection[Any], generation: int) -> ChunkLayout:
        with self._lock:
            cached = self._cached
        if cached is not None and cached[0] == generation:
            return cached[1]
        built = read.layout(conn)
        with self._lock:
            if self._cached is None or self._cached[0] <= generation:
                self._cached = (generation, built)
        return built

    def clear(self) -> None:
        with self._lock:
            self._cached = None


class View(ConnectionReads[psycopg.Connection[Any]]):
    """The reading methods of an index (:class:`~mdmem.index.backend.IndexReader`) over ``conn``."""

    read_sql = read
    store_sql = postgres_writes
    candidates: int
    layouts: ChunkLayouts

    @property
    def where(self) -> str:
        """The server and schema, for messages."""
        raise NotImplementedError

    def stamp(self) -> Stamp:
        """The generation and last sync of what this view reads (call inside ``reading``)."""
        return Stamp(self.generation(), self.meta("last_sync"))

    def layout(self) -> ChunkLayout:
        """The chunk layout, cached in memory until the index generation changes."""
        return self.layouts.get(self.conn, self.generation())

    def keyword_candidates(self, query: str, limit: int) -> Scored:
        return read.keyword(self.conn, self.layout(), query, limit)

    def vector_scan(self, model_id: str, *, filters: Filters | None = None) -> VectorScan:
        """The nearest chunks by HNSW (``index.candidates`` of them) that pass ``filters``:
        the server does the work, all of it in ``scored``, on the connection's thread."""
        return _ServerScan(self, model_id, filters or Filters())

    def nearest(self, model_id: str, query: np.ndarray, filters: Filters) -> Scored | None:
        """None when the index holds no vectors of ``model_id`` of the query's size."""
        dim = int(query.shape[0])
        table = db.vector_table(self.conn, model_id, dim)
        if table is None:
            self._check_model(model_id, dim)
            return None
        return read.nearest(self.conn, self.layout(), table, query, self.candidates, filters)

    def _check_model(self, model_id: str, dim: int) -> None:
        """A reader whose model does not match the vectors the index holds: say so."""
        dims = db.vector_dims(self.conn, model_id)
        held = self.meta("embed_model")
        if dims:
            raise db.IndexServerError(
                f"{self.where} holds {'/'.join(map(str, dims))}-d vectors of {model_id}, but "
                f"the model now gives {dim}-d ones: run `mdmem index` where the files are to "
                "embed them anew (or go back to the model that made them)"
            )
        if held is not None and held != model_id:
            raise db.IndexServerError(
                f"{self.where} holds vectors of {held}, not of {model_id}: set embedding.model "
                "to the indexer's model, or run `mdmem index` where the files are"
            )


class _ServerScan:
    """A :class:`~mdmem.index.backend.VectorScan` answered by the server's HNSW index."""

    def __init__(self, view: View, model_id: str, filters: Filters) -> None:
        self._view = view
        self._model_id = model_id
        self._filters = filters
        self._query: np.ndarray | None = None

    def scan(self, query: np.ndarray) -> None:
        self._query = query

    def scored(self, keyword: Scored | None) -> Scored | None:
        if self._query is None:
            return None
        return self._view.nearest(self._model_id, self._query, self._filters)
