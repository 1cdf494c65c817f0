"""What a command works on: the workspace ``-w`` names (or the one found upwards), or, with
``--url``/``--index-workspace``, a remote reader's index on PostgreSQL (no files)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from mdmem.cli.output import fail

if TYPE_CHECKING:
    from mdmem.workspace import Workspace


def open_workspace(ctx: typer.Context) -> Workspace:
    """The workspace of ``mdmem -w PATH``; with only a remote reader's settings, an error
    that says what this machine can do instead."""
    from mdmem.errors import WorkspaceNotFoundError
    from mdmem.workspace import Workspace

    try:
        return Workspace.open(ctx.obj.get("workspace"))
    except WorkspaceNotFoundError:
        needs_files(ctx.info_name or "this command")
        raise


def remote_index(url: str | None, name: str | None) -> Any:
    """The remote reader ``--url``/``--index-workspace`` (or ``$MDMEM_INDEX_URL`` and
    ``$MDMEM_INDEX_WORKSPACE``) name, or None when neither names a workspace."""
    import os

    name = name or os.environ.get("MDMEM_INDEX_WORKSPACE")
    if not name:
        if url is not None:
            fail("--url goes with --index-workspace NAME (the workspace to read)", 2)
        return None
    from mdmem.index.postgres.remote import RemoteIndex

    return RemoteIndex(url, name)


def needs_files(command: str) -> None:
    """With only a remote reader's configuration, say what this machine can do."""
    import os

    if os.environ.get("MDMEM_INDEX_WORKSPACE"):
        fail(
            f"mdmem {command} needs the workspace's files; with only $MDMEM_INDEX_URL and "
            "$MDMEM_INDEX_WORKSPACE this machine searches (mdmem search, status, mcp)"
        )
