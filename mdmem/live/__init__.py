"""Long-running parts: the watcher that keeps the index fresh and the query server that keeps
the model warm."""
