"""Resolvers: when a child and its parent hold the same pool key, which value the child keeps.

``sync_from_parent`` pulls every parent pool entry newer than the one the child last took (its
``parent_version`` metadata) through the resolver the child's mdmem.toml names for that pool
(``[scopes] resolvers = {plan = "merge", "*" = "parent-wins"}``; default child-wins).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mdmem.errors import VersionConflict
from mdmem.sharing.pool import Pool, PoolEntry

JSON = Any
RETRIES = 5
BASE = "parent_value"
"""Metadata key: the parent's value as the child last took it (what a three-way merge
compares both sides with)."""


class _Missing:
    """No value: a key one side does not have (JSON's ``null`` is a value)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Resolution:
    content: JSON
    note: JSON = None
    """The value that lost, kept beside the winner (``parent_note`` in the entry's metadata)."""


class Resolver(Protocol):
    @property
    def name(self) -> str: ...

    def resolve(self, parent: JSON, child: JSON, base: JSON = MISSING) -> Resolution:
        """``base``: the parent's value the child last took (MISSING when it never took one)."""
        ...


@dataclass(frozen=True)
class ParentWins:
    """The parent's value replaces the child's (team decisions a child must follow)."""

    name: str = "parent-wins"

    def resolve(self, parent: JSON, child: JSON, base: JSON = MISSING) -> Resolution:
        return Resolution(parent)


@dataclass(frozen=True)
class ChildWins:
    """The child keeps its own value (it knows its task better); the parent's is ignored."""

    name: str = "child-wins"

    def resolve(self, parent: JSON, child: JSON, base: JSON = MISSING) -> Resolution:
        return Resolution(child)


@dataclass(frozen=True)
class Merge:
    """A three-way merge against the parent's value the child last took (``base``): what the
    child left as it took it follows the parent; what the child changed itself stays the
    child's; dicts merge key by key. With no base (the first pull of a key the child wrote
    itself), dicts merge deeply with the child's leaves winning. A value both changed that is
    not a pair of dicts stays the child's, and the parent's is kept as a note."""

    name: str = "merge"

    def resolve(self, parent: JSON, child: JSON, base: JSON = MISSING) -> Resolution:
        merged = merge3(base, parent, child)
        if isinstance(parent, dict) and isinstance(child, dict):
            return Resolution(merged)
        if same(merged, child) and not same(parent, child) and not same(parent, base):
            return Resolution(child, note=parent)
        return Resolution(merged)


RESOLVERS: dict[str, Resolver] = {r.name: r for r in (ParentWins(), ChildWins(), Merge())}


def same(a: JSON, b: JSON) -> bool:
    """Equal as JSON values: ``1``, ``1.0`` and ``true`` stay apart (Python's == joins them);
    the order of a dict's keys does not count."""
    if a is MISSING or b is MISSING:
        return a is b
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def merge3(base: JSON, parent: JSON, child: JSON) -> JSON:
    """The parent's changes since ``base`` laid on the child's value, leaf by leaf: where the
    child still has ``base``, the parent's; where the parent still has it, the child's; where
    both changed a dict (or one changed it and the other deleted it), key by key; where both
    changed anything else, the child's. MISSING (a key one side deleted or never had) takes
    part like a value."""
    if same(child, base):
        return parent
    if same(parent, base) or same(parent, child):
        return child
    if not (_tree(base) and _tree(parent) and _tree(child)):
        return child
    under, theirs, ours = (v if isinstance(v, dict) else {} for v in (base, parent, child))
    out: dict[str, JSON] = {}
    for key in [*theirs, *(k for k in ours if k not in theirs)]:
        value = merge3(under.get(key, MISSING), theirs.get(key, MISSING), ours.get(key, MISSING))
        if value is not MISSING:
            out[key] = value
    return MISSING if not out and MISSING in (parent, child) else out


def _tree(value: JSON) -> bool:
    """A dict, or no value (a dict one side deleted merges with the other's edits in it)."""
    return value is MISSING or isinstance(value, dict)


def resolver_for(resolvers: Mapping[str, str], pool: str) -> Resolver:
    return RESOLVERS[resolvers.get(pool, resolvers.get("*", "child-wins"))]


@dataclass(frozen=True)
class Pulled:
    """What happened to one key: ``added`` (new in the child), ``replaced`` (the parent's
    value won), ``merged``, or ``kept`` (the child's value stays; under ``merge`` the parent's
    version and value are still recorded in the entry's metadata, the base of the next
    merge)."""

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
    """What ``ws.sharing.sync_from_parent()`` did, key by key."""

    parent: str
    pulled: tuple[Pulled, ...]

    @property
    def changed(self) -> list[Pulled]:
        """The keys whose value the sync changed (or added)."""
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
        meta: dict[str, JSON] = {
            "parent": origin,
            "parent_version": theirs.version,
            BASE: theirs.content,
        }
        if ours is None:
            action, content = "added", theirs.content
        else:
            resolution = resolver.resolve(theirs.content, ours.content, _base(ours))
            content = resolution.content
            if resolution.note is not None:
                meta["parent_note"] = resolution.note
            if resolution.note is None and same(content, ours.content):
                if not isinstance(resolver, Merge):
                    return Pulled(child.name, theirs.key, "kept", theirs.version, ours.version)
                action = "kept"  # the take is recorded all the same: the next merge starts there
            else:
                action = "replaced" if same(content, theirs.content) else "merged"
        try:
            entry = child.write(theirs.key, content, writer, ours or 0, meta)
        except VersionConflict:
            continue
        return Pulled(child.name, theirs.key, action, theirs.version, entry.version)
    raise VersionConflict(theirs.key, theirs.version, "changing under every retry", child.path)


def _base(entry: PoolEntry) -> JSON:
    """The parent's value the child last took, as its metadata keeps it (MISSING: never)."""
    return entry.metadata.get(BASE, MISSING) if "parent_version" in entry.metadata else MISSING
