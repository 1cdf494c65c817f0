"""The SQLite backend: every SQL statement of the index lives in this package.

db (schema, migrations, recovery of the file), store (writes), read (what a search reads),
purge (deleted text gone for good), index (:class:`SqliteIndex`, the backend itself)."""
