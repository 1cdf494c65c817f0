"""Sharing memory between agents, workspaces and clones: scopes and the parent chain, shared
pools with versioned keys, the resolvers of a parent's newer entries, and git (``mdmem
sync`` and its merge driver)."""
