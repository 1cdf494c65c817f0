"""Scopes: whose memory a passage is, which workspaces a workspace reads, who may write what.

- LOCAL: one agent's sessions (``.sessions/``) and private notes (``.notes/<agent>/``).
- SHARED: everything else of the workspace (knowledge files, task, world, shared pools).
- INHERITED: a parent workspace's SHARED knowledge (``parent = "../team"`` in mdmem.toml,
  chains allowed), read and never written but through ``publish``.
- GLOBAL: the user's own workspace (``$MDMEM_GLOBAL``, default under the user's data folder),
  for preferences that hold in every project.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mdmem.config import CONFIG_NAME, Config, ScopesConfig, load_config
from mdmem.errors import ConfigError, ParentCycleError, ScopeError
from mdmem.layout import SESSIONS_DIR
from mdmem.memory.writers import NOTES_DIR

LOCAL, SHARED, INHERITED, GLOBAL = "LOCAL", "SHARED", "INHERITED", "GLOBAL"
SCOPES = (LOCAL, SHARED, INHERITED, GLOBAL)
GLOBAL_ENV = "MDMEM_GLOBAL"
LOCAL_DIRS = (SESSIONS_DIR + "/", NOTES_DIR + "/")


@dataclass(frozen=True)
class Rule:
    """One row of the write policy: who may write a scope, and through what."""

    scope: str
    who: str
    through: str


POLICY = (
    Rule(LOCAL, "the agent itself", "its sessions and .notes/<agent>/"),
    Rule(SHARED, "every agent of the workspace", "remember, pools, task, world"),
    Rule(
        INHERITED,
        "agents in the child's scopes.publish that the parent's scopes.accept lets in",
        'ws.sharing.publish(key, value, to="parent"), through the parent\'s safe writes',
    ),
    Rule(
        GLOBAL,
        "agents in the workspace's scopes.global_writers",
        'ws.sharing.publish(key, value, to="global")',
    ),
)
"""The write policy (docs/sharing.md). Nothing writes INHERITED or GLOBAL knowledge but
``publish``, which checks it; a program write to another agent's ``.notes/<agent>/`` is
refused (:func:`mdmem.memory.writers.check_local`); SHARED files are every agent's."""


def scope_of(path: str) -> str:
    """LOCAL or SHARED, from a path inside one workspace."""
    return LOCAL if path.startswith(LOCAL_DIRS) else SHARED


def check_scopes(scopes: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """Scope names as a caller gives them (a list, or ``"shared,inherited"``), upper-cased and
    checked; None for every scope."""
    if scopes is None:
        return None
    names = scopes.split(",") if isinstance(scopes, str) else list(scopes)
    out = tuple(dict.fromkeys(str(n).strip().upper() for n in names if str(n).strip()))
    unknown = [n for n in out if n not in SCOPES]
    if unknown or not out:
        raise ValueError(f"scopes are {', '.join(s.lower() for s in SCOPES)}; got {scopes!r}")
    return out


def global_root() -> Path:
    """``$MDMEM_GLOBAL``, else ``mdmem/global`` in the user's data folder (platformdirs:
    ~/.local/share on Linux, ~/Library/Application Support on macOS, %LOCALAPPDATA% on
    Windows)."""
    env = os.environ.get(GLOBAL_ENV)
    if env:
        return Path(env).expanduser().absolute()
    import platformdirs

    return platformdirs.user_data_path("mdmem", appauthor=False) / "global"


@dataclass(frozen=True)
class Ancestor:
    """A workspace up the parent chain: 1 is the parent, 2 its parent, and so on."""

    root: Path
    config: Config
    depth: int


def parent_chain(root: Path, config: Config) -> list[Ancestor]:
    """The parents of the workspace at ``root``, nearest first. A missing folder is a
    ConfigError naming the mdmem.toml that points at it; a loop is a ParentCycleError naming
    every workspace on it."""
    chain: list[Ancestor] = []
    seen = [root.resolve()]
    here, cfg = root, config
    while cfg.parent:
        there = (here / Path(cfg.parent).expanduser()).resolve()
        if there in seen:
            loop = " -> ".join(str(p) for p in [*seen[seen.index(there) :], there])
            raise ParentCycleError(f"parent workspaces form a cycle: {loop}")
        if not there.is_dir():
            raise ConfigError(
                f"{here / CONFIG_NAME}: parent = {cfg.parent!r}: no folder at {there}"
            )
        seen.append(there)
        cfg = load_config(there)
        chain.append(Ancestor(there, cfg, len(chain) + 1))
        here = there
    return chain


def allowed(names: Sequence[str], agent: str) -> bool:
    return "*" in names or agent in names


def check_publish(agent: str, child: ScopesConfig, parent: ScopesConfig, parent_root: Path) -> None:
    """INHERITED: the child lets ``agent`` publish, and the parent accepts it."""
    if not allowed(child.publish, agent):
        raise ScopeError(
            f"agent {agent!r} may not write INHERITED knowledge ({parent_root}): this "
            f"workspace's scopes.publish is {list(child.publish)!r}"
        )
    if not allowed(parent.accept, agent):
        raise ScopeError(
            f"agent {agent!r} may not write INHERITED knowledge: {parent_root / CONFIG_NAME} "
            f"has scopes.accept = {list(parent.accept)!r}"
        )


def check_global(agent: str, scopes: ScopesConfig, root: Path) -> None:
    """GLOBAL: ``agent`` is one of the workspace's ``scopes.global_writers``."""
    if not allowed(scopes.global_writers, agent):
        raise ScopeError(
            f"agent {agent!r} may not write GLOBAL knowledge: {root / CONFIG_NAME} has "
            f"scopes.global_writers = {list(scopes.global_writers)!r}"
        )


def publish_target(to: str, agent: str, root: Path, config: Config) -> Path:
    """The folder a publish from the workspace at ``root`` writes to, once the policy allows
    ``agent`` to (ScopeError, naming the rule, when it does not)."""
    if to == "global":
        check_global(agent, config.scopes, root)
        return global_root()
    if to != "parent":
        raise ValueError(f'publish to "parent" or "global", not {to!r}')
    chain = parent_chain(root, config)
    if not chain:
        raise ScopeError(f"{root / CONFIG_NAME} names no parent: there is nothing to publish to")
    check_publish(agent, config.scopes, chain[0].config.scopes, chain[0].root)
    return chain[0].root
