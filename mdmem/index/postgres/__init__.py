"""The PostgreSQL backend (pgvector): one server many machines share; every SQL statement of
it lives in this package.

db (connecting, schema per workspace, migrations, one-line errors), terms (keyword terms as the
SQLite side makes them), postgres_writes (writes), read (BM25, HNSW, rows, counters), index
(:class:`PostgresIndex`, the backend itself), copy (a SQLite index into PostgreSQL, without
embedding anything again)."""
