"""The derived index: chunks (chunks.py), embeddings (embed.py), keyword tokenization (fts.py),
what a backend does (backend.py) and the code both backends share (backend_base.py), the shared
part of syncing (sync.py), filters and ranking (filters.py, search.py), and the backends: SQLite
(sqlite/, its scale machinery in sqlite/scale/) and PostgreSQL (postgres/)."""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # not typing's: `mdmem search` highlights with fts.py, and no more
if TYPE_CHECKING:
    from collections.abc import Callable

    from mdmem.config import FilesConfig, IndexConfig
    from mdmem.index.backend import IndexBackend
    from mdmem.index.embed import Embedder
    from mdmem.redact import Redactor


def open_index(
    root: Path,
    state_dir: Path,
    files: FilesConfig,
    embedder: Callable[[], Embedder | None],
    *,
    redactor: Redactor,
    on_message: Callable[[str], None] | None = None,
    config: IndexConfig | None = None,
    read_only: bool = False,
) -> IndexBackend:
    """The index of the workspace at ``root``: SQLite in ``state_dir``, or PostgreSQL when
    ``config`` says so (nothing is opened until first use). ``read_only``: another
    workspace's index, searched as it is (never synced, healed or written)."""
    import contextlib
    import os

    if config is not None and config.backend == "postgres":
        from mdmem.index.postgres.index import PostgresIndex

        return PostgresIndex(
            root,
            files,
            embedder,
            url=config.url or os.environ.get("MDMEM_INDEX_URL", ""),
            name=config.workspace,
            candidates=config.candidates,
            on_message=on_message,
            redactor=redactor,
        )

    from mdmem.index.sqlite.index import SqliteIndex
    from mdmem.layout import private_file

    if not read_only:
        with contextlib.suppress(OSError):  # (a read-only mount: searched as it is)
            private_file(state_dir / "index.lock")  # owner-only, like all of .mdmem/
    return SqliteIndex(
        root,
        state_dir / "index.db",
        files,
        embedder,
        on_message=on_message,
        redactor=redactor,
        read_only=read_only,
        float16_vectors_from=(config or IndexConfig()).float16_vectors_from,
    )
