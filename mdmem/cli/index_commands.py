"""Index and search server: ``index``, ``watch``, ``status``, ``server``."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from mdmem.cli.opening import open_workspace, remote_index
from mdmem.cli.options import (
    IndexUrlOpt,
    IndexWorkspaceOpt,
    JsonOpt,
)
from mdmem.cli.output import fail, log_to_stderr, print_json, warn

STOP_WAIT_S = 2.0
"""How long `mdmem watch` waits, when stopped, for a model load or embedding batch to end."""


ORPHAN_POLL_S = 0.1
"""How often `mdmem watch` checks that its workspace and lock file are still there (two
stats): a deleted workspace's server exits within half a second, as docs/search.md says."""


def index(
    ctx: typer.Context,
    full: Annotated[bool, typer.Option(help="Re-read and re-chunk every file.")] = False,
    as_json: JsonOpt = False,
    backend: Annotated[
        str | None,
        typer.Option(
            help="postgres: copy the SQLite index into PostgreSQL, embedding nothing again.",
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            help="The PostgreSQL server for --backend (default: index.url, $MDMEM_INDEX_URL).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Bring the index up to date with the files (incremental unless --full)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    log_to_stderr()
    ws = open_workspace(ctx)
    if backend is not None or url is not None:
        _copy_index(ws, backend, url, as_json)
        return
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeRemainingColumn(), transient=True, disable=as_json) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                label = "Reading files" if stage == "files" else "Embedding chunks"
                tasks[stage] = bar.add_task(label, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = ws.index.update(full=full, progress=progress)
    data = {
        "added": report.added,
        "updated": report.updated,
        "removed": report.removed,
        "unchanged": report.unchanged,
        "chunks_written": report.chunks_written,
        "embedded": report.embedded,
        "stale": report.stale,
        "problems": [str(p) for p in report.problems],
        "seconds": round(report.seconds, 3),
        "unwritable": report.readonly,
    }
    if as_json:
        print_json(data)
    elif not report.readonly:
        typer.echo(
            f"Indexed in {report.seconds:.2f} s: {report.added} added, {report.updated} updated, "
            f"{report.removed} removed files; {report.chunks_written} chunks written, "
            f"{report.embedded} embedded."
        )
    for problem in report.problems:
        warn(str(problem))
    if report.readonly:  # nothing was indexed: never a "0 added" that reads as up to date
        behind = f" ({len(report.stale)} changed file(s) not indexed)" if report.stale else ""
        fail(report.readonly + behind)


def _copy_index(ws: Any, backend: str | None, url: str | None, as_json: bool) -> None:
    """`mdmem index --backend postgres`: the SQLite index, copied into PostgreSQL."""
    if backend is None:
        fail("--url goes with --backend postgres (it names the server to copy the index to)")
    if backend != "postgres":
        fail(f"--backend takes postgres (SQLite is the default index), got {backend!r}")
    copied = ws.index.copy_to_postgres(url)
    if as_json:
        print_json({name: getattr(copied, name) for name in copied.__dataclass_fields__})
        return
    if copied.synced:
        typer.echo(
            f"{copied.where} already holds this workspace's index: synced it with the files "
            f"instead of copying the local one over it ({copied.embedded} chunks embedded; "
            f"generation {copied.generation}; {copied.files} files, {copied.chunks} chunks)."
        )
    else:
        typer.echo(
            f"Copied {copied.files} files, {copied.chunks} chunks and {copied.vectors} vectors "
            f"into {copied.where} in {copied.seconds:.2f} s (nothing embedded again)."
        )
    index = ws.config.index
    done = index.backend == "postgres" and index.workspace == copied.name
    typer.echo(
        "mdmem.toml has these lines already:"
        if done
        else "Set these lines in mdmem.toml (and the server's URL, password included, in "
        "$MDMEM_INDEX_URL); a reader elsewhere uses the same index.workspace:"
    )
    typer.echo(f'\n[index]\nbackend = "postgres"\nworkspace = "{copied.name}"')


def watch(
    ctx: typer.Context,
    serve: Annotated[
        bool, typer.Option(help="Also answer `mdmem search` over a local socket (warm model).")
    ] = True,
    idle_exit: Annotated[
        bool,
        typer.Option(
            "--idle-exit",
            help="Exit after server.idle_minutes without a search (how a "
            "server `mdmem search` started runs).",
        ),
    ] = False,
) -> None:
    """Watch the workspace and re-index every change as it happens, until Ctrl-C.

    One watcher per workspace. SIGINT and SIGTERM stop it cleanly (exit 0) at any moment; it
    also stops when its workspace is deleted.
    """
    import os
    import signal
    import threading

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # no KeyboardInterrupt mid-start-up
        signal.signal(signum, lambda *_: stop.set())
    log_to_stderr()
    ws = open_workspace(ctx)
    watcher = ws.watch(serve=serve)  # one per workspace: a second one stops here, one line
    where = f"; answering searches on {watcher.server.path}" if watcher.server else ""
    typer.echo(f"mdmem: watching {ws.root}{where}. Ctrl-C stops.", err=True)
    idle_s = ws.config.server.idle_minutes * 60 if idle_exit else None
    wait_s = STOP_WAIT_S
    try:
        while not stop.wait(ORPHAN_POLL_S):
            if reason := _watch_ends(watcher, idle_s):
                typer.echo(f"mdmem: {reason}.", err=True)
                break
    finally:
        if watcher.orphaned():  # its files are gone: nothing a thread finishes can be kept
            wait_s = 0.0
        if watcher.stop(timeout=wait_s):
            ws.close()
        typer.echo("mdmem: watcher stopped.", err=True)
    # The socket, heartbeat and lock are gone, and every thread of ours has ended, or is inside
    # torch (a model load or an embedding batch: no commit is lost, SQLite rolls it back).
    # Threads inside native code must not meet the interpreter's shutdown, which can abort
    # ("terminate called without an active exception"): leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _watch_ends(watcher: Any, idle_s: float | None) -> str | None:
    """Why a running `mdmem watch` should stop on its own, or None."""
    if gone := watcher.orphaned():
        return f"{gone}; nothing left to watch"
    server = watcher.server
    if server is not None and server.stop_requested.is_set():
        return "asked to stop (`mdmem server stop`)"
    if idle_s is not None and server is not None and server.idle_seconds() > idle_s:
        return f"no search for {idle_s / 60:g} minutes; the server stops"
    return None


def status(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    url: IndexUrlOpt = None,
    index_workspace: IndexWorkspaceOpt = None,
) -> None:
    """What the index holds, whether it is fresh, and where it lives."""
    log_to_stderr()
    remote = remote_index(url, index_workspace)
    if remote is not None:
        _remote_status(remote, as_json)
        return
    ws = open_workspace(ctx)
    st = ws.index.status()
    unembedded = st.chunks - st.embedded if st.model else 0
    if as_json:
        data = {"workspace": str(ws.root), "mode": ws.config.mode, **st.to_dict()}
        print_json({**data, "unembedded": unembedded})
        return
    stale = [
        *(
            [f"{len(st.stale) + len(st.removed)} file(s) changed since the last sync"]
            if st.stale or st.removed
            else []
        ),
        *([f"{unembedded} chunk(s) not embedded yet"] if unembedded > 0 else []),
    ]
    fresh = f"{'; '.join(stale)} (`mdmem index` brings it up to date)" if stale else "fresh"
    rows = [
        ("workspace", f"{ws.root} (mode {ws.config.mode}, agent {ws.config.agent})"),
        ("files", str(st.files)),
        ("chunks", f"{st.chunks} ({st.embedded} embedded)"),
        ("model", st.model or "none (keyword search only)"),
        ("index", f"{st.db_path} ({st.index_bytes / 1e6:.1f} MB)"),
        ("last sync", st.last_sync or "never"),
        *([] if st.generation is None else [("generation", str(st.generation))]),
        ("freshness", fresh),
        ("watcher", _watcher_line(st.watcher)),
    ]
    for name, value in rows:
        typer.echo(f"{name:>10}  {value}")
    for path in [*st.stale, *st.removed]:
        typer.echo(f"{'':>10}  changed: {path}")
    for problem in st.problems:
        warn(problem)


def _watcher_line(info: dict[str, Any] | None) -> str:
    if not info:
        return "not running (start one with `mdmem watch`)"
    age = info.get("heartbeat_age")
    beat = "no heartbeat yet" if age is None else f"last heartbeat {age:.0f} s ago"
    if not info["running"]:
        return f"not running (pid {info.get('pid')} stopped; {beat})"
    served = f", serving {info['socket']}" if info.get("socket") else ""
    stalled = " — stalled? it holds the lock but its heartbeat is late" if info["stalled"] else ""
    return f"running (pid {info['pid']}, {beat}{served}){stalled}"


def _remote_status(remote: Any, as_json: bool) -> None:
    with remote:
        st = remote.status()
    if as_json:
        print_json(st.to_dict())
        return
    rows = [
        ("workspace", f"{st.workspace} (remote reader: search only)"),
        ("files", str(st.files)),
        ("chunks", f"{st.chunks} ({st.embedded} embedded)"),
        ("model", st.model or "none (keyword search only)"),
        ("index", f"{st.where} ({st.index_bytes / 1e6:.1f} MB)"),
        ("last sync", st.last_sync or "never"),
        ("generation", str(st.generation)),
        ("indexed by", st.indexed_from or "unknown"),
    ]
    for name, value in rows:
        typer.echo(f"{name:>10}  {value}")


server_app = typer.Typer(
    help="The workspace's search server (the first `mdmem search` starts one).",
    no_args_is_help=True,
)


@server_app.command("status")
def server_status_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Whether a server runs for this workspace. Exit 0: running; 3: none runs."""
    from mdmem.layout import find_root
    from mdmem.live.control import server_status

    st = server_status(find_root(ctx.obj.get("workspace")))
    if as_json:
        print_json(st.to_dict())
    elif not st.running:
        typer.echo(f"no server runs for {st.root}")
    elif not st.serving:
        typer.echo(f"a watcher (pid {st.pid}) runs for {st.root}, answering on no socket")
    else:
        idle = "" if st.idle_seconds is None else f", last search {st.idle_seconds:.0f} s ago"
        model = "ready" if st.ready else "loading the model"
        typer.echo(f"server (pid {st.pid}) {model}, on {st.socket}{idle}")
    raise typer.Exit(0 if st.running else 3)


@server_app.command("stop")
def server_stop_cmd(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for it to stop.", min=0.0)] = 15.0,
) -> None:
    """Stop this workspace's server. Exit 0: stopped, or none ran; 1: it did not stop."""
    from mdmem.layout import find_root
    from mdmem.live.control import stop_server

    result = stop_server(find_root(ctx.obj.get("workspace")), timeout=timeout)
    if as_json:
        print_json(result.to_dict())
    elif result.ok:
        typer.echo(result.message)
    if not result.ok:
        if not as_json:
            fail(result.message)
        raise typer.Exit(1)
