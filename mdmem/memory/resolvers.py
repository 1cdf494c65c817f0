"""Resolvers: when a child and its parent hold the same pool key, which value the child keeps.

``sync_from_parent`` pulls every parent pool entry newer than the one the child last took (its
``parent_version`` metadata) through the resolver the child's mdmem.toml names for that pool
(``[scopes] resolvers = {plan = "merge", "*" = "parent-wins"}``; default child-wins).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mdmem.errors import VersionConflict
from mdmem.memory.pool import Pool, PoolEntry

JSON = Any
RETRIES = 5


@dataclass(frozen=True)
class Resolution:
    content: JSON
    note: JSON = None
    """The value that lost, kept beside the winner (``parent_note`` in the entry's metadata)."""


class Resolver(Protocol):
    name: str

    def resolve(self, parent: JSON, child: JSON) -> Resolution: ...


@dataclass(frozen=True)
class ParentWins:
    """The parent's value replaces the child's (team decisions a child must follow)."""

    name: str = "parent-wins"

    def resolve(self, parent: JSON, child: JSON) -> Resolution:
        return Resolution(parent)


@dataclass(frozen=True)
class ChildWins:
    """The child keeps its own value (it knows its task better); the parent's is ignored."""

    name: str = "child-wins"

    def resolve(self, parent: JSON, child: JSON) -> Resolution:
        return Resolution(child)


@dataclass(frozen=True)
class Merge:
    """Dicts merge deeply (the child's value wins where both set a leaf); for anything else
    the child's value wins and the parent's is kept as a note."""

    name: str = "merge"

    def resolve(self, parent: JSON, child: JSON) -> Resolution:
        if isinstance(parent, dict) and isinstance(child, dict):
            return Resolution(deep_merge(parent, child))
        if parent == child:
            return Resolution(child)
        return Resolution(child, note=parent)


RESOLVERS: dict[str, Resolver] = {r.name: r for r in (ParentWins(), ChildWins(), Merge())}


def deep_merge(base: Mapping[str, JSON], over: Mapping[str, JSON]) -> dict[str, JSON]:
    """``base`` with ``over`` laid on it: nested dicts merge, any other value of ``over`` wins."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def resolver_for(resolvers: Mapping[str, str], pool: str) -> Resolver:
    return RESOLVERS[resolvers.get(pool, resolvers.get("*", "child-wins"))]


@dataclass(frozen=True)
class Pulled:
    """What happened to one key: ``added`` (new in the child), ``replaced`` (the parent's
    value won), ``merged``, or ``kept`` (the child's value stays; nothing written)."""

    pool: str
    key: str
    action: str
    parent_version: int
    version: int
    """The child's version of the key after the sync."""

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ParentSync:
    """What ``ws.sync_from_parent()`` did, key by key."""

    parent: str
    pulled: tuple[Pulled, ...]

    @property
    def changed(self) -> list[Pulled]:
        return [p for p in self.pulled if p.action != "kept"]

    def to_dict(self) -> dict[str, object]:
        return {"parent": self.parent, "pulled": [p.to_dict() for p in self.pulled]}


def sync_pools(
    names: list[str],
    parent: Callable[[str], Pool],
    child: Callable[[str], Pool],
    resolvers: Mapping[str, str],
    writer: str,
    origin: str,
) -> ParentSync:
    """Every pool of the parent (``names``) pulled into the child's pool of the same name."""
    pulled = [
        done
        for name in names
        for done in pull(parent(name), child(name), resolver_for(resolvers, name), writer, origin)
    ]
    return ParentSync(origin, tuple(pulled))


def pull(parent: Pool, child: Pool, resolver: Resolver, writer: str, origin: str) -> list[Pulled]:
    """The parent pool's entries that are newer than what the child took, through ``resolver``
    into the child's pool. Each write is conditional on the child's entry as read (retried
    when another agent wrote it meanwhile), so a concurrent write is never lost."""
    return [
        done
        for entry in parent.list()
        if (done := _pull_one(entry, child, resolver, writer, origin)) is not None
    ]


def _pull_one(
    theirs: PoolEntry, child: Pool, resolver: Resolver, writer: str, origin: str
) -> Pulled | None:
    for _ in range(RETRIES):
        ours = child.read(theirs.key)
        taken = ours.metadata.get("parent_version", 0) if ours is not None else 0
        if ours is not None and isinstance(taken, int) and taken >= theirs.version:
            return None  # not newer than what the child already took
        meta: dict[str, JSON] = {"parent": origin, "parent_version": theirs.version}
        if ours is None:
            action, content = "added", theirs.content
        else:
            resolution = resolver.resolve(theirs.content, ours.content)
            if resolution.content == ours.content and resolution.note is None:
                return Pulled(child.name, theirs.key, "kept", theirs.version, ours.version)
            content = resolution.content
            action = "replaced" if content == theirs.content else "merged"
            if resolution.note is not None:
                meta["parent_note"] = resolution.note
        try:
            entry = child.write(theirs.key, content, writer, ours or 0, meta)
        except VersionConflict:
            continue
        return Pulled(child.name, theirs.key, action, theirs.version, entry.version)
    raise VersionConflict(theirs.key, theirs.version, "changing under every retry", child.path)
