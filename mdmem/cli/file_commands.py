"""File versions and forgetting: ``recover``, ``forget``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace
from mdmem.cli.options import (
    JsonOpt,
)
from mdmem.cli.output import fail, print_json, warn


def recover(
    ctx: typer.Context,
    file: Annotated[
        str | None, typer.Argument(help="A workspace file (omit to list files).")
    ] = None,
    version: Annotated[
        str | None, typer.Argument(help="A version: its number in the list (1 = newest) or id.")
    ] = None,
    show: Annotated[bool, typer.Option("--show", help="Print that version.")] = False,
    put_back: Annotated[
        bool, typer.Option("--put-back", help="Put that version back (the current one is kept).")
    ] = False,
    old_restore: Annotated[
        bool, typer.Option("--restore", hidden=True, help="Old name of --put-back.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Versions of a file: what each program write replaced and wrote, kept in .mdmem/journal/.

    `mdmem recover FILE` lists them; with a VERSION, a diff against the file as it is now,
    `--show` prints it, `--put-back` puts it back (`mdmem restore` is another thing: it brings
    back an entry a consolidation archived)."""
    put_back = put_back or old_restore
    ws = open_workspace(ctx)
    if file is None:
        files = ws.files._journal.files()
        if as_json:
            print_json(files)
        else:
            typer.echo("\n".join(files) if files else "No earlier versions kept yet.")
        return
    if version is None:
        if show or put_back:
            fail("--show and --put-back need a VERSION (see `mdmem recover FILE`)", 2)
        _list_versions(ws, file, as_json)
        return
    rel, absolute = ws.files._resolve(file)
    try:
        entry = ws.files._journal.find(rel, version)
    except KeyError as exc:
        fail(str(exc.args[0]))
    if put_back:
        ws.files.recover(rel, entry.id)
        if as_json:
            print_json({"restored": entry.to_dict()})
        else:
            typer.echo(f"put back {rel} from {entry.id} ({entry.time:%Y-%m-%d %H:%M:%S})")
        return
    old = entry.read_bytes().decode("utf-8", errors="replace")
    if show:
        typer.echo(old, nl=False)
        return
    from mdmem.reports import unified_diff

    current = absolute.read_text(encoding="utf-8", errors="replace") if absolute.exists() else ""
    diff = unified_diff({rel: current}, {rel: old})
    if as_json:
        print_json({"version": entry.to_dict(), "diff": diff})
    else:
        typer.echo(diff or "(the same as the file now)", nl=False)


def _list_versions(ws: Any, file: str, as_json: bool) -> None:
    import difflib

    rel, absolute = ws.files._resolve(file)
    entries = ws.files.versions(rel)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        typer.echo(f"No earlier versions of {rel} kept.")
        return
    now = (
        absolute.read_text(encoding="utf-8", errors="replace").splitlines()
        if absolute.exists()
        else []
    )
    for n, e in enumerate(entries, start=1):
        lines = e.read_bytes().decode("utf-8", errors="replace").splitlines()
        added = removed = 0
        for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, now, lines).get_opcodes():
            removed += (a2 - a1) if op in ("delete", "replace") else 0
            added += (b2 - b1) if op in ("insert", "replace") else 0
        typer.echo(
            f"{n:>3}  {e.time:%Y-%m-%d %H:%M:%S.%f}"[:-3]
            + f"  {e.size:>8,} B  {e.reason:9}  +{added}/-{removed} lines vs now  {e.id}"
        )


def forget(
    ctx: typer.Context,
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="The entry's id (m-... or h-...).")],
    as_json: JsonOpt = False,
) -> None:
    """Delete an entry for good (a leaked secret, a person's data).

    Removes its lines and every archived copy of its text from the files, its index rows and
    cached vectors, and any write-journal or .trash/ file holding it. Everything else in mdmem
    archives instead; git history, backups and synced copies still hold what they held.
    """
    ws = open_workspace(ctx)
    report = ws.forget(entry_id)
    if as_json:
        print_json(report.to_dict())
    else:
        for where in report.removed:
            typer.echo(f"removed  {where}")
        typer.echo(f"index    {report.chunks} rows, {report.vectors} cached vectors deleted")
        for path in (*report.journal, *report.trash):
            typer.echo(f"deleted  {path}")
    for warning in report.warnings:
        warn(warning)
