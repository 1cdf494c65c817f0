"""The memory files themselves: safe writes that never lose a person's save, the scanner, and
the stores (knowledge entries, sessions, task, world, the compact memory) over them."""
