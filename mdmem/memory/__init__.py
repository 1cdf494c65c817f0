"""The memory files: which files belong to the workspace and reading them, each file's format
(knowledge entries, sessions, task, world, shared pools, the compact memory), and the stores
that edit them through the safe writes (:mod:`mdmem.writes`)."""
