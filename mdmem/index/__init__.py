"""The derived index: chunks (chunks.py), embeddings (embed.py), keyword text (text.py), the
SQLite schema (db.py) and syncing it with the files (sync.py)."""
