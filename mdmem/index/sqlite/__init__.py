"""The SQLite backend: every SQL statement of the index lives in this package.

db (schema, migrations, recovery of the file), store (writes), read (what a search reads),
purge (deleted text gone for good), index (:class:`SqliteIndex`, the backend itself), and scale/
(what keeps it fast from 100k to 1M chunks: the layout and vectors in memory, the compact
vector store, keyword search at a bounded cost)."""
