"""Finding the workspace, like git finds its repository. Light on purpose: the CLI's fast
path (asking the warm server) uses it without importing the rest of mdmem."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from mdmem.errors import WorkspaceNotFoundError

ENV_VAR = "MDMEM_WORKSPACE"
MARKERS = ("mdmem.toml", "memory.md")
STATE_DIR = ".mdmem"
SOCKET_NAME = "server.sock"
WATCHER_FILE = "watcher.json"
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to ~104-108 bytes


def find_root(path: str | os.PathLike[str] | None = None) -> Path:
    if path is not None:
        root = Path(path).expanduser().absolute()
        if not root.is_dir():
            raise WorkspaceNotFoundError(f"workspace {root} does not exist or is not a folder")
        return root
    env = os.environ.get(ENV_VAR)
    if env:
        root = Path(env).expanduser().absolute()
        if not root.is_dir():
            raise WorkspaceNotFoundError(f"${ENV_VAR}={env} is not a folder")
        return root
    here = Path.cwd().absolute()
    for folder in (here, *here.parents):
        if any((folder / marker).is_file() for marker in MARKERS):
            return folder
    raise WorkspaceNotFoundError(
        f"no mdmem workspace in {here} or any folder above it (looked for {' or '.join(MARKERS)}). "
        f"Create one with `mdmem init`, or pass -w PATH or set ${ENV_VAR}."
    )


def socket_path(root: Path) -> Path:
    """Where the warm query server listens: inside ``.mdmem/``, unless that path is too long
    for a Unix socket, then a per-user, per-workspace name in the temp folder."""
    inside = root / STATE_DIR / SOCKET_NAME
    if len(os.fsencode(inside)) <= _MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"mdmem-{os.getuid()}-{digest}.sock"
