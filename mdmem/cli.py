"""The ``mdmem`` command: a thin typer layer over the library.

Only typer is imported at start-up; each command imports what it needs, so ``--help`` is
instant. Exit codes: 0 done, 1 an mdmem error (message on stderr), 2 bad usage; `mdmem pool`
adds 3 (a version conflict) and 4 (no such key).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    from mdmem.workspace import Workspace

app = typer.Typer(
    name="mdmem",
    help="File-first memory for AI agents: Markdown you can edit, indexed for fast search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

WorkspaceOpt = Annotated[
    Path | None,
    typer.Option(
        "--workspace",
        "-w",
        help="Workspace folder (default: $MDMEM_WORKSPACE, else the nearest folder upwards "
        "with mdmem.toml or memory.md).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for programs.")]
IndexUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="A remote reader's PostgreSQL server (default: $MDMEM_INDEX_URL); "
        "goes with --index-workspace.",
        show_default=False,
    ),
]
IndexWorkspaceOpt = Annotated[
    str | None,
    typer.Option(
        "--index-workspace",
        help="Read this workspace's index on PostgreSQL, without its files "
        "(default: $MDMEM_INDEX_WORKSPACE).",
        show_default=False,
    ),
]
STOP_WAIT_S = 2.0
"""How long `mdmem watch` waits, when stopped, for a model load or embedding batch to end."""
ORPHAN_POLL_S = 0.1
"""How often `mdmem watch` checks that its workspace and lock file are still there (two
stats): a deleted workspace's server exits within half a second, as docs/search.md says."""

IncludeArchivedOpt = Annotated[
    bool,
    typer.Option(
        "--include-archived/--no-include-archived",
        "--archived/--no-archived",  # its name before issue 42, in scripts
        help="Include archived entries.",
    ),
]
OldBudgetOpt = Annotated[
    int | None, typer.Option("--budget", hidden=True, help="Old name of --budget-tokens.")
]
"""``--budget``, the name before issue 42 (in users' hook settings and scripts): hidden."""


@app.callback()
def _main(ctx: typer.Context, workspace: WorkspaceOpt = None) -> None:
    ctx.obj = {"workspace": workspace}


def _open(ctx: typer.Context) -> Workspace:
    from mdmem.errors import WorkspaceNotFoundError
    from mdmem.workspace import Workspace

    try:
        return Workspace.open(ctx.obj.get("workspace"))
    except WorkspaceNotFoundError:
        _needs_files(ctx.info_name or "this command")
        raise


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"mdmem: error: {message}", err=True)
    raise typer.Exit(code)


def _warn(message: str) -> None:
    typer.echo(f"mdmem: warning: {message}", err=True)


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2))


@app.command()
def init(
    ctx: typer.Context,
    path: Annotated[Path | None, typer.Argument(help="Folder to create (default: .)")] = None,
    mode: Annotated[str, typer.Option(help="minimal or full")] = "full",
    agent: Annotated[
        str | None,
        typer.Option(
            help="Agent name (default: default). Where mdmem.toml exists already (a clone), "
            "this machine's own, in the git-ignored mdmem.local.toml."
        ),
    ] = None,
) -> None:
    """Create a workspace from the templates. Never overwrites an existing file."""
    from mdmem.config import CONFIG_NAME
    from mdmem.memory.templates import TEMPLATES
    from mdmem.workspace import Workspace

    target = path or ctx.obj.get("workspace") or Path(".")
    existed = {name for name in TEMPLATES.values() if (target / name).exists()}
    if mode not in ("minimal", "full"):
        _fail(f"--mode must be 'minimal' or 'full', got {mode!r}", 2)
    if agent is not None and CONFIG_NAME in existed:
        _init_local_agent(target, agent)
    ws = Workspace.init(target, mode=mode, agent=agent or "default")  # type: ignore[arg-type]
    for name in TEMPLATES.values():
        state = "kept" if name in existed else "created"
        typer.echo(f"  {state:8} {name}")
    _init_git(ws.root)
    typer.echo(f"Workspace ready at {ws.root} (mode={ws.config.mode}, agent={ws.config.agent}).")


def _init_local_agent(root: Path, agent: str) -> None:
    """``--agent`` where mdmem.toml exists (a clone of a shared workspace): this machine's
    agent, in mdmem.local.toml (git-ignored), never the shared file."""
    from mdmem.config import check_name, load_config, local_agent, set_local_agent
    from mdmem.sharing.git_sync import ignore_local_config

    check_name(agent, "agent")
    if local_agent(root) is None and load_config(root).agent == agent:
        return
    path = set_local_agent(root, agent)
    ignore_local_config(root)
    typer.echo(f"  {'set':8} {path.name} (agent={agent}: this machine only, git-ignored)")


def _init_git(root: Path) -> None:
    """.gitattributes lines for the merge driver; inside a git repository, its config too."""
    from mdmem.sharing.git_sync import (
        configure_driver,
        configured_driver,
        driver_notice,
        ignore_temp_files,
        install_gitattributes,
        repo_root,
    )

    ignore_temp_files(root)  # a write in progress is never committed
    added = install_gitattributes(root)
    repository = repo_root(root) is not None
    changed = bool(added)
    if repository:
        before = configured_driver(root)
        changed = configure_driver(root) != before or changed
    typer.echo(f"  {'updated' if changed else 'kept':8} {driver_notice(repository)}")


@app.command()
def remember(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The memory, in plain words.")],
    type_: Annotated[
        str, typer.Option("--type", "-t", help="preference, fact, pattern or skill")
    ] = "fact",
    importance: Annotated[float, typer.Option("--importance", "-i", help="0..1")] = 0.5,
    file: Annotated[
        str | None, typer.Option("--file", "-f", help="Workspace file to write to.")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Session id it came from.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember TEXT: append it under the right heading, touching nothing else."""
    from mdmem.markdown.entries import MEMORY_TYPES

    if type_ not in MEMORY_TYPES:
        _fail(f"--type must be one of {', '.join(MEMORY_TYPES)}, got {type_!r}", 2)
    if not 0 <= importance <= 1:
        _fail(f"--importance must be between 0 and 1, got {importance}", 2)
    ws = _open(ctx)
    entry = ws.remember(text, type=type_, importance=importance, source=source, file=file)
    if as_json:
        _print_json(entry.to_dict())
        return
    typer.echo(f"{entry.path}:{entry.start_line}  [{entry.type}] {entry.text}  ({entry.id})")


# `add` and `show` were these commands' names before the one vocabulary (docs/cli.md): scripts
# and agents' instructions written then keep working, unlisted.
app.command("add", hidden=True, help="Old name of `remember`.")(remember)


@app.command()
def entries(
    ctx: typer.Context,
    file: Annotated[str | None, typer.Argument(help="One file (default: all).")] = None,
    include_archived: IncludeArchivedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the parsed entries: where each stands, its type, importance and text."""
    from mdmem.markdown.parse import Problem

    ws = _open(ctx)
    problems: list[Problem]
    if file is not None:
        found = ws.entries(file, include_archived=include_archived)
        problems = list(ws.files.read(file).problems)
    else:
        snap = ws.files.all()
        found = list(snap.entries(include_archived=include_archived))
        problems = list(snap.problems)
    if as_json:
        _print_json(
            {
                "workspace": str(ws.root),
                "entries": [e.to_dict() for e in found],
                "problems": [
                    {"path": p.path, "line": p.line, "message": p.message} for p in problems
                ],
            }
        )
    else:
        _print_entries(found)
    for problem in problems:
        _warn(str(problem))


app.command("show", hidden=True, help="Old name of `entries`.")(entries)


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int | None, typer.Option("-k", help="How many hits (default: search.k).")] = None,
    mode: Annotated[
        str | None, typer.Option(help="hybrid, keyword or vector (default: search.mode).")
    ] = None,
    type_: Annotated[str | None, typer.Option("--type", "-t", help="Only this type.")] = None,
    path: Annotated[str | None, typer.Option(help="Only files matching this glob.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent's files.")] = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    since: Annotated[str | None, typer.Option(help="Created on or after (YYYY-MM-DD).")] = None,
    until: Annotated[str | None, typer.Option(help="Created on or before (YYYY-MM-DD).")] = None,
    include_archived: IncludeArchivedOpt = False,
    scopes: Annotated[
        str | None,
        typer.Option("--scope", help="Only these scopes: local,shared,inherited,global."),
    ] = None,
    explain: Annotated[bool, typer.Option(help="Show every part of each score.")] = False,
    no_server: Annotated[
        bool, typer.Option("--no-server", help="Search in-process even if a server runs.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Say who answered and how fast.")
    ] = False,
    as_json: JsonOpt = False,
    url: IndexUrlOpt = None,
    index_workspace: IndexWorkspaceOpt = None,
) -> None:
    """Search the workspace: ranked passages cited as path:start-end.

    Asks the workspace's warm server, starting one in the background when none runs (see
    server.auto), else works in-process.
    """
    from mdmem.index.filters import SEARCH_PARAMS
    from mdmem.live.search_output import print_results

    if mode is not None and mode not in ("hybrid", "keyword", "vector"):
        _fail(f"--mode must be hybrid, keyword or vector, got {mode!r}", 2)
    if k is not None and k < 1:
        _fail("-k must be at least 1", 2)
    values = dict(k=k, mode=mode, type=type_, path=path, agent=agent, session=session,
                  since=since, until=until, include_archived=include_archived,
                  scopes=scopes)  # fmt: skip
    params = {name: values[name] for name in SEARCH_PARAMS}
    remote = _remote(url, index_workspace)
    if remote is not None:
        with remote:
            data = remote.search(query, **params).to_dict()  # type: ignore[arg-type]
        print_results(data, query, explain=explain, as_json=as_json)
        if data["hits"] and not as_json:
            index = data["hits"][0]["index"]
            typer.echo(f"(index generation {index['generation']}, synced {index['synced']})")
        return
    data = None if no_server else _ask_server(ctx, query, params, verbose)
    if data is None:
        _log_to_stderr()
        ws = _open(ctx)
        data = ws.search(query, **params).to_dict()  # type: ignore[arg-type]
    against = _contradicted(ctx) if explain and data["hits"] else None
    if against is not None and as_json:  # the same "contradicted by" the text shows
        for hit in data["hits"]:
            hit["contradicted_by"] = against.get(hit["id"], [])
    print_results(data, query, explain=explain, as_json=as_json, against=against)


def _ask_server(
    ctx: typer.Context, query: str, params: dict[str, Any], verbose: bool
) -> dict[str, Any] | None:
    """The fast path: the workspace's warm server answers with its loaded model and index."""
    from mdmem.layout import find_root
    from mdmem.live.client import ServerError, server_search

    try:
        return server_search(find_root(ctx.obj.get("workspace")), query, params, verbose=verbose)
    except ServerError as exc:
        _fail(str(exc), 2 if exc.kind == "ValueError" else 1)


@app.command()
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

    _log_to_stderr()
    ws = _open(ctx)
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
        _print_json(data)
    elif not report.readonly:
        typer.echo(
            f"Indexed in {report.seconds:.2f} s: {report.added} added, {report.updated} updated, "
            f"{report.removed} removed files; {report.chunks_written} chunks written, "
            f"{report.embedded} embedded."
        )
    for problem in report.problems:
        _warn(str(problem))
    if report.readonly:  # nothing was indexed: never a "0 added" that reads as up to date
        behind = f" ({len(report.stale)} changed file(s) not indexed)" if report.stale else ""
        _fail(report.readonly + behind)


@app.command()
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
    _log_to_stderr()
    ws = _open(ctx)
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


server_app = typer.Typer(
    help="The workspace's search server (the first `mdmem search` starts one).",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")


@server_app.command("status")
def server_status_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Whether a server runs for this workspace. Exit 0: running; 3: none runs."""
    from mdmem.layout import find_root
    from mdmem.live.control import server_status

    st = server_status(find_root(ctx.obj.get("workspace")))
    if as_json:
        _print_json(st.to_dict())
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
        _print_json(result.to_dict())
    elif result.ok:
        typer.echo(result.message)
    if not result.ok:
        if not as_json:
            _fail(result.message)
        raise typer.Exit(1)


@app.command()
def status(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    url: IndexUrlOpt = None,
    index_workspace: IndexWorkspaceOpt = None,
) -> None:
    """What the index holds, whether it is fresh, and where it lives."""
    _log_to_stderr()
    remote = _remote(url, index_workspace)
    if remote is not None:
        _remote_status(remote, as_json)
        return
    ws = _open(ctx)
    st = ws.index.status()
    unembedded = st.chunks - st.embedded if st.model else 0
    if as_json:
        data = {"workspace": str(ws.root), "mode": ws.config.mode, **st.to_dict()}
        _print_json({**data, "unembedded": unembedded})
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
        _warn(problem)


@app.command()
def mode(
    ctx: typer.Context,
    new_mode: Annotated[
        str | None, typer.Argument(metavar="[minimal|full]", help="Switch to this mode.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the workspace's mode, or switch it (no file is ever deleted)."""
    if new_mode is not None and new_mode not in ("minimal", "full"):
        _fail(f"mode must be 'minimal' or 'full', got {new_mode!r}", 2)
    ws = _open(ctx)
    created: list[str] = []
    before = ws.config.mode
    if new_mode is not None:
        created = ws.set_mode(new_mode)  # type: ignore[arg-type]
    if as_json:
        _print_json({"mode": ws.config.mode, "previous": before, "created": created})
        return
    if new_mode is None or new_mode == before:
        typer.echo(f"{ws.config.mode}")
    else:
        typer.echo(f"mode: {before} -> {ws.config.mode}")
    for name in created:
        typer.echo(f"  created  {name}")


sessions_app = typer.Typer(
    help="Recorded sessions (the event stream in .sessions/).", no_args_is_help=False
)
app.add_typer(sessions_app, name="sessions")


@sessions_app.callback(invoke_without_command=True)
def sessions_list(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option(help="Only this agent's sessions.")] = None,
    since: Annotated[str | None, typer.Option(help="Started on or after (YYYY-MM-DD).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="At most this many.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List sessions, newest first (`mdmem sessions record ID` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    if since is not None:
        _check_date(since, "--since")
    ws = _open(ctx)
    records = ws.sessions.list(agent=agent, since=since, limit=limit)
    if as_json:
        _print_json([r.to_dict(events=False) for r in records])
        return
    if not records:
        typer.echo("No sessions.")
    for r in records:
        when = (r.started or "?")[:16].replace("T", " ")
        tools = sum(r.tools.values())
        typer.echo(
            f"{r.id}  {when}  {r.agent:10} {r.status:9} {len(r.events):3} events "
            f"{tools:3} tools  {r.title}"
        )


@sessions_app.command("record")
def sessions_record(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or part of it.")],
    as_json: JsonOpt = False,
) -> None:
    """Print one session: request, events with importance, response."""
    ws = _open(ctx)
    r = ws.sessions.record(session_id)
    if as_json:
        _print_json(r.to_dict())
        return
    tools = ", ".join(f"{k} {v}" for k, v in r.tools.items()) or "none"
    typer.echo(f"{r.title}  ({r.path})")
    typer.echo(
        f"agent {r.agent} | {r.status} | started {r.started} | ended {r.ended or '-'} | "
        f"{r.rounds} rounds | tools: {tools}"
    )
    if r.request:
        typer.echo(f"\nRequest:\n{_indent(r.request)}")
    typer.echo("\nEvents:")
    for e in r.events:
        typer.echo(f"  {e.time:8} {e.importance:.2f} [{e.action}] {_indent(e.text).lstrip()}")
    if r.response:
        typer.echo(f"\nResponse:\n{_indent(r.response)}")
    if r.summary:
        typer.echo(f"\nSummary:\n{_indent(r.summary)}")


sessions_app.command("show", hidden=True, help="Old name of `record`.")(sessions_record)


task_app = typer.Typer(help="The current task in task_process.md: TODO, phase, instructions.")
app.add_typer(task_app, name="task")


@task_app.callback(invoke_without_command=True)
def task_main(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Show the task (same as `mdmem task list`)."""
    if ctx.invoked_subcommand is None:
        _show_task(ctx, as_json)


@task_app.command("list")
def task_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Show the task: phase, TODO items (the current one marked), instructions."""
    _show_task(ctx, as_json)


@task_app.command("add")
def task_add(
    ctx: typer.Context,
    item: Annotated[str, typer.Argument(help="The TODO item, one line.")],
    as_json: JsonOpt = False,
) -> None:
    """Append an open item to the TODO list."""
    added = _open(ctx).task.add(item)
    if as_json:
        _print_json(vars(added))
        return
    typer.echo(f"added {added.n}. {added.text}")


@task_app.command("complete")
def task_complete(
    ctx: typer.Context,
    n: Annotated[int, typer.Argument(help="Item number (as `mdmem task` shows it).")],
    undo: Annotated[bool, typer.Option(help="Untick it instead.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Tick TODO item N (the same as ticking its box by hand)."""
    ws = _open(ctx)
    try:
        item = ws.task.complete(n, done=not undo)
    except IndexError as exc:
        _fail(str(exc))
    current = ws.task.current()
    if as_json:
        _print_json({"item": vars(item), "current": vars(current) if current else None})
        return
    typer.echo(f"{'[x]' if item.done else '[ ]'} {item.n}. {item.text}")
    typer.echo(f"now: {current.n}. {current.text}" if current else "all items done")


task_app.command("done", hidden=True, help="Old name of `complete`.")(task_complete)


@task_app.command("phase")
def task_phase(
    ctx: typer.Context,
    phase: Annotated[str | None, typer.Argument(help="New phase (omit to show it).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show or set the task's phase (plan, implement, verify, … any word you use)."""
    ws = _open(ctx)
    if phase is not None:
        ws.task.set_phase(phase)
    if as_json:
        _print_json({"phase": ws.task.phase})
        return
    typer.echo(ws.task.phase)


@task_app.command("new")
def task_new(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(help="What the task is.")],
    items: Annotated[list[str] | None, typer.Argument(help="Initial TODO items.")] = None,
    phase: Annotated[str, typer.Option(help="Starting phase.")] = "plan",
    as_json: JsonOpt = False,
) -> None:
    """Start a new task; the previous one is kept in .tasks/ (never deleted)."""
    state = _open(ctx).task.new(title, items or [], phase=phase)
    if as_json:
        _print_json(state.to_dict())
        return
    typer.echo(f"new task: {state.title} ({len(state.items)} items, phase {state.phase})")


def _show_task(ctx: typer.Context, as_json: bool) -> None:
    state = _open(ctx).task.state()
    if as_json:
        _print_json(state.to_dict())
        return
    if not (state.title or state.items):
        typer.echo("No task (start one with `mdmem task new TITLE`).")
        return
    typer.echo(f"{state.title}  (phase {state.phase}; {state.done} of {len(state.items)} done)")
    current = state.current
    for item in state.items:
        mark = "->" if current is not None and item.n == current.n else "  "
        typer.echo(f"{mark} [{'x' if item.done else ' '}] {item.n}. {item.text}")
        for text, done in item.subitems:
            box = "" if done is None else "[x] " if done else "[ ] "
            typer.echo(f"         {box}{text}")
    if state.instructions:
        typer.echo("instructions:")
        for rule in state.instructions:
            typer.echo(f"   {rule.text}")


class _WorldGroup(TyperGroup):
    """``mdmem world`` by subcommand (``get``, ``set``, ``remove``, like ``pool`` and ``task``);
    the form before issue 42, ``world KEY [VALUE]`` / ``world --remove KEY``, which scripts may
    still run, goes to the hidden ``old-form`` command."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        words = [a for a in args if not a.startswith("-")]
        if "--remove" in args or (words and words[0] not in self.commands):
            args = ["old-form", *args]
        return super().parse_args(ctx, args)


world_app = typer.Typer(
    cls=_WorldGroup, help="The world state (world_state.md): facts by key, in sections."
)
app.add_typer(world_app, name="world")
WorldKeyArg = Annotated[str, typer.Argument(metavar="KEY", help="A fact's key.")]
SectionOpt = Annotated[str | None, typer.Option(help="Section for a new key (default: the first).")]


@world_app.callback(invoke_without_command=True)
def world_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the facts by section (`mdmem world get KEY` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    facts = _open(ctx).world.facts()
    if as_json:
        _print_json([f.to_dict() for f in facts])
        return
    section_now = None
    for fact in facts:
        if fact.section != section_now:
            section_now = fact.section
            typer.echo(f"{fact.section or '(no section)'}:")
        typer.echo(f"  {fact.key}: {fact.value}")
    if not facts:
        typer.echo("No world facts (set one with `mdmem world set KEY VALUE`).")


@world_app.command("get")
def world_get(ctx: typer.Context, key: WorldKeyArg, as_json: JsonOpt = False) -> None:
    """Print KEY's value (keys match whatever their case)."""
    facts = [f for f in _open(ctx).world.facts() if f.key.casefold() == key.casefold()]
    if not facts:
        _fail(f"no world fact {key!r} in world_state.md")
    if as_json:
        _print_json(facts[0].to_dict())
        return
    typer.echo(facts[0].value)


@world_app.command("set")
def world_set(
    ctx: typer.Context,
    key: WorldKeyArg,
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The fact's text.")],
    section: SectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set KEY to VALUE (a new key goes under --section)."""
    fact = _open(ctx).world.set(key, value, section=section)
    if as_json:
        _print_json(fact.to_dict())
        return
    typer.echo(f"world_state.md:{fact.line}  {fact.key}: {fact.value}")


@world_app.command("remove")
def world_remove(ctx: typer.Context, key: WorldKeyArg, as_json: JsonOpt = False) -> None:
    """Archive KEY's bullet (nothing is lost: it moves to ## Archive)."""
    try:
        _open(ctx).world.remove(key)
    except KeyError:
        _fail(f"no world fact {key!r} in world_state.md")
    if as_json:
        _print_json({"archived": key})
        return
    typer.echo(f"archived {key}")


@world_app.command("old-form", hidden=True, help="`world KEY [VALUE]`, `world --remove KEY`.")
def world_old_form(
    ctx: typer.Context,
    key: Annotated[str | None, typer.Argument()] = None,
    value: Annotated[str | None, typer.Argument()] = None,
    section: SectionOpt = None,
    remove: Annotated[bool, typer.Option()] = False,
    as_json: JsonOpt = False,
) -> None:
    if remove:
        if key is None or value is not None:
            _fail("--remove takes exactly one KEY", 2)
        world_remove(ctx, key, as_json)
    elif key is not None and value is not None:
        world_set(ctx, key, value, section, as_json)
    elif key is not None:
        world_get(ctx, key, as_json)
    else:
        world_list(ctx, as_json)


@app.command()
def context(
    ctx: typer.Context,
    query: Annotated[str | None, typer.Argument(help="What the next turn is about.")] = None,
    budget_tokens: Annotated[
        int | None,
        typer.Option(
            "--budget-tokens", "-b", help="Token budget (default: context.budget_tokens)."
        ),
    ] = None,
    old_budget: OldBudgetOpt = None,
    model: Annotated[
        str | None, typer.Option(help="Count tokens with this model's tokenizer (litellm).")
    ] = None,
    agent: Annotated[
        str | None, typer.Option(help="Whose sessions (default: the workspace's agent).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the memory section of a system prompt, within a token budget.

    What each source used and left out goes to stderr (the text itself to stdout).
    """
    budget = budget_tokens if budget_tokens is not None else old_budget
    if budget is not None and budget < 0:
        _fail("--budget-tokens must be >= 0", 2)
    _log_to_stderr()
    ws = _open(ctx)
    result = ws.build_context(query, budget, model, agent=agent)
    if as_json:
        _print_json(result.to_dict())
        return
    typer.echo(result.text)
    counted = result.model or "estimate"
    typer.echo(
        f"mdmem: {result.tokens:,} of {result.budget:,} tokens ({counted}); mode {result.mode}",
        err=True,
    )
    for s in result.sources:
        lost = f", {s.omitted:,} omitted ({s.omitted_units} items)" if s.omitted else ""
        typer.echo(f"mdmem:   {s.name:10} {s.used:6,} used of {s.share:6,}{lost}", err=True)


SourceArg = Annotated[
    str | None,
    typer.Argument(
        metavar="[SOURCE]",
        help="A session id (or part of it), a session file, or a .jsonl/.json transcript "
        "(default: this agent's latest session).",
    ),
]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="Use the offline engine even if llm.model is set.")
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Change no file; print what would change as a diff.")
]


@app.command()
def compact(
    ctx: typer.Context,
    source: SourceArg = None,
    offline: OfflineOpt = False,
    dry_run: DryRunOpt = False,
    no_flush: Annotated[
        bool, typer.Option("--no-flush", help="Skip the memory flush (extraction) that runs first.")
    ] = False,
    into: Annotated[
        str | None, typer.Option(help="Full mode: write the summary into this session.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compact a conversation: keep the current state and key events, drop the rest.

    Minimal mode writes .compact_memory.md (merged with what it held); full mode writes a
    Summary section in the session's file. Lasting memories are extracted first.
    """
    _log_to_stderr()
    ws = _open(ctx)
    report = ws.compact(source, offline=offline, dry_run=dry_run, flush=not no_flush, into=into)
    if as_json:
        _print_json(report.to_dict())
        return
    if dry_run:
        typer.echo(report.diff or "(no change)", nl=False)
    typer.echo(report.summary(), err=dry_run)
    if report.extraction is not None:
        typer.echo(report.extraction.summary(), err=dry_run)
        for problem in report.extraction.problems:
            _warn(problem)


@app.command()
def extract(
    ctx: typer.Context,
    source: SourceArg = None,
    offline: OfflineOpt = False,
    dry_run: DryRunOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Extract lasting memories (preferences, facts, patterns, skills) into memory.md and
    learnings.md, deduplicated against what is there."""
    _log_to_stderr()
    ws = _open(ctx)
    report = ws.extract(source, offline=offline, dry_run=dry_run)
    if as_json:
        _print_json(report.to_dict())
        return
    if dry_run:
        typer.echo(report.diff or "(no change)", nl=False)
    else:
        for change in report.changes:
            where = f"{change.path} {change.entry_id}" if change.entry_id else change.replaced or ""
            typer.echo(
                f"{change.action:9} [{change.type}] {change.text}  ({where}; {change.reason})"
            )
    typer.echo(report.summary(), err=dry_run)
    for problem in report.problems:
        _warn(problem)


@app.command()
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
    ws = _open(ctx)
    if file is None:
        files = ws.files._journal.files()
        if as_json:
            _print_json(files)
        else:
            typer.echo("\n".join(files) if files else "No earlier versions kept yet.")
        return
    if version is None:
        if show or put_back:
            _fail("--show and --put-back need a VERSION (see `mdmem recover FILE`)", 2)
        _list_versions(ws, file, as_json)
        return
    rel, absolute = ws.files._resolve(file)
    try:
        entry = ws.files._journal.find(rel, version)
    except KeyError as exc:
        _fail(str(exc.args[0]))
    if put_back:
        ws.files.recover(rel, entry.id)
        if as_json:
            _print_json({"restored": entry.to_dict()})
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
        _print_json({"version": entry.to_dict(), "diff": diff})
    else:
        typer.echo(diff or "(the same as the file now)", nl=False)


def _list_versions(ws: Any, file: str, as_json: bool) -> None:
    import difflib

    rel, absolute = ws.files._resolve(file)
    entries = ws.files.versions(rel)
    if as_json:
        _print_json([e.to_dict() for e in entries])
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


@app.command()
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
    ws = _open(ctx)
    report = ws.forget(entry_id)
    if as_json:
        _print_json(report.to_dict())
    else:
        for where in report.removed:
            typer.echo(f"removed  {where}")
        typer.echo(f"index    {report.chunks} rows, {report.vectors} cached vectors deleted")
        for path in (*report.journal, *report.trash):
            typer.echo(f"deleted  {path}")
    for warning in report.warnings:
        _warn(warning)


def _indent(text: str, pad: str = "  ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def _check_date(value: str, option: str) -> None:
    import datetime as dt

    try:
        dt.date.fromisoformat(value)
    except ValueError:
        _fail(f"{option} must be a date (YYYY-MM-DD), got {value!r}", 2)


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


def _log_to_stderr() -> None:
    import logging

    class CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
        """Writes to ``sys.stderr`` as it is when a record is emitted, not as it was when the
        handler was made: a background thread (late saves, the watcher) may log after a host
        swapped stderr and closed the old one, as a test runner's capture does."""

        @property  # type: ignore[override]
        def stream(self) -> Any:
            return sys.stderr

        @stream.setter
        def stream(self, _: Any) -> None:
            pass

    logger = logging.getLogger("mdmem")
    if not logger.handlers:
        handler = CurrentStderr()
        handler.setFormatter(logging.Formatter("mdmem: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def _print_entries(entries: list[Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    current = None
    for entry in entries:
        if entry.path != current:
            current = entry.path
            console.print(f"\n[bold]{escape(entry.path)}[/bold]")
        where = (
            f"{entry.start_line}-{entry.end_line}"
            if entry.end_line > entry.start_line
            else (f"{entry.start_line}")
        )
        flag = " [dim](archived)[/dim]" if entry.archived else ""
        box = "" if entry.checked is None else ("[x] " if entry.checked else "[ ] ")
        first = entry.text.split("\n", 1)[0]
        console.print(
            f"  [cyan]{where:>7}[/cyan] [magenta]{entry.type:10}[/magenta] "
            f"{entry.importance:.2f}  {escape(box + first)}{flag} [dim]{entry.id}[/dim]"
        )
    if not entries:
        console.print("(no entries)")


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Annotated[
        Path | None,
        typer.Argument(help="An export or log (.json, .jsonl, .zip), or a folder of them."),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="chatgpt, claude, claude-code, codex or jsonl (default: told from the content).",
        ),
    ] = None,
    extract_: Annotated[
        bool, typer.Option("--extract", help="Extract lasting memories from what is imported.")
    ] = False,
    offline: OfflineOpt = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; print what would be imported.")
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(help="Agent the sessions are recorded under (default: the source's name)."),
    ] = None,
    undo: Annotated[
        str | None,
        typer.Option(
            "--undo", metavar="ID", help="Revert import ID (its id is printed when it ends)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Import chat histories as session files: ChatGPT and Claude.ai exports, Claude Code and
    Codex CLI logs, a generic JSONL of {role, content, timestamp}.

    Importing again writes nothing twice: a conversation imported before is skipped, or gets
    only its new messages. Unreadable records are named (file:line) and skipped.
    """
    from mdmem.integrations import importers

    _log_to_stderr()
    ws = _open(ctx)
    if undo is not None:
        done = importers.undo(ws, undo)
        if as_json:
            _print_json(done.to_dict())
            return
        for rel in done.moved:
            typer.echo(f"moved     {rel}")
        for rel in done.restored:
            typer.echo(f"restored  {rel}")
        for note in done.kept:
            _warn(f"kept {note}")
        typer.echo(done.summary())
        return
    if path is None:
        _fail("give a PATH to import (or --undo ID)", 2)
    if from_ is not None and from_ not in importers.FORMATS:
        _fail(f"--from must be one of {', '.join(importers.FORMATS)}, got {from_!r}", 2)
    try:
        report = _import_with_progress(ws, path, from_, extract_, offline, dry_run, agent, as_json)
    except OSError as exc:
        _fail(str(exc))
    if as_json:
        _print_json(report.to_dict())
        return
    for problem in report.problems:
        _warn(str(problem))
    verb = {"created": "would create" if dry_run else "created", "appended": "would add to"
            if dry_run else "appended"}  # fmt: skip
    for outcome in report.outcomes:
        if outcome.status in verb:
            typer.echo(
                f"{verb[outcome.status]:12} {outcome.path or outcome.title}  "
                f"({outcome.source}, {outcome.messages} messages)"
            )
        elif outcome.status == "changed":
            _warn(
                f"{outcome.where}: {outcome.source} conversation {outcome.conversation} no "
                f"longer starts as imported in {outcome.path}; left alone"
            )
    typer.echo(report.summary())
    for extraction in report.extractions:
        typer.echo(extraction.summary())
        for problem in extraction.problems:
            _warn(problem)
    if report.id:
        typer.echo(f"undo with: mdmem import --undo {report.id}", err=True)


def _import_with_progress(
    ws: Workspace,
    path: Path,
    source: str | None,
    extract: bool,
    offline: bool,
    dry_run: bool,
    agent: str | None,
    quiet: bool,
) -> Any:
    """The import, with a progress bar (bytes read) on stderr when it is a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from mdmem.integrations.importers import import_path

    console = Console(stderr=True)
    columns = (TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    disable = quiet or not console.is_terminal
    with Progress(*columns, console=console, transient=True, disable=disable) as bar:
        task = bar.add_task("import", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return import_path(
            ws,
            path,
            source,
            extract=extract,
            offline=offline,
            dry_run=dry_run,
            agent=agent,
            progress=progress,
        )


hooks_app = typer.Typer(help="Hooks that give Claude Code mdmem's memory with no code.")
app.add_typer(hooks_app, name="hooks")
TargetArg = Annotated[str, typer.Argument(metavar="TARGET", help="claude-code")]
ScopeOpt = Annotated[
    str,
    typer.Option(
        help="project (.claude/settings.json), local (.claude/settings.local.json) or user "
        "(~/.claude/settings.json)."
    ),
]
SettingsOpt = Annotated[
    Path | None, typer.Option("--settings", help="This settings file instead of the scope's.")
]
ProjectOpt = Annotated[
    Path | None, typer.Option("--project", help="The project folder (default: the current one).")
]
BudgetOpt = Annotated[
    int | None,
    typer.Option("--budget-tokens", "-b", help="Token budget of the context at start."),
]


def _hooks_target(target: str) -> None:
    if target != "claude-code":
        _fail(f"hooks are available for claude-code, not {target!r}", 2)


def _hooks_settings(scope: str, settings: Path | None, project: Path | None) -> Path:
    from mdmem.integrations import hooks

    if settings is not None:
        return settings
    if scope not in hooks.SCOPES:
        _fail(f"--scope must be one of {', '.join(hooks.SCOPES)}, got {scope!r}", 2)
    return hooks.settings_path(scope, (project or Path.cwd()).absolute())


@hooks_app.command("install")
def hooks_install(
    ctx: typer.Context,
    target: TargetArg,
    scope: ScopeOpt = "project",
    settings: SettingsOpt = None,
    project: ProjectOpt = None,
    extract_: Annotated[
        bool, typer.Option("--extract", help="Also extract lasting memories at each import.")
    ] = False,
    budget: BudgetOpt = None,
    old_budget: OldBudgetOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Write nothing; print the settings file.")
    ] = False,
) -> None:
    """Add mdmem's hooks to Claude Code's settings: the memory context at session start; the
    session imported (new messages only) before compaction, at each stop and at the end.

    --scope project writes commands that work in any clone (the workspace under
    $CLAUDE_PROJECT_DIR, mdmem as found on PATH); local and user, absolute paths."""
    from mdmem.errors import ModeError
    from mdmem.integrations import hooks

    _hooks_target(target)
    ws = _open(ctx)
    if ws.config.mode != "full":
        raise ModeError("the hooks import sessions, which only full mode keeps (`mdmem mode full`)")
    path = _hooks_settings(scope, settings, project)
    shared = scope == "project" and settings is None  # the team's file: no path of this machine
    where = (project or Path.cwd()).absolute() if shared else None
    budget = budget if budget is not None else old_budget
    wanted = hooks.commands(ws.root, extract=extract_, budget=budget, project=where)
    if shared and not hooks.portable_command().startswith("mdmem"):
        _warn(
            "mdmem is not on PATH here: the hooks run `python3 -m mdmem`, so each teammate "
            "needs mdmem installed for that Python (or on PATH)"
        )
    report = hooks.install(path, wanted, dry_run=dry_run)
    if dry_run:
        typer.echo(report.text, nl=False)
    typer.echo(report.summary(), err=dry_run)


@hooks_app.command("uninstall")
def hooks_uninstall(
    target: TargetArg,
    scope: ScopeOpt = "project",
    settings: SettingsOpt = None,
    project: ProjectOpt = None,
) -> None:
    """Remove mdmem's hooks from Claude Code's settings; every other setting stays."""
    from mdmem.integrations import hooks

    _hooks_target(target)
    report = hooks.uninstall(_hooks_settings(scope, settings, project))
    typer.echo(report.summary())


@hooks_app.command("run")
def hooks_run(
    ctx: typer.Context,
    target: TargetArg,
    action: Annotated[str, typer.Argument(help="session-start or import")],
    extract_: Annotated[bool, typer.Option("--extract", help="Extract after importing.")] = False,
    budget: BudgetOpt = None,
    old_budget: OldBudgetOpt = None,
) -> None:
    """What a hook runs (Claude Code sends the hook's JSON on stdin). Errors exit with 1, which
    Claude Code shows without stopping the session."""
    from mdmem.integrations import hooks

    _hooks_target(target)
    if action not in ("session-start", "import"):
        _fail(f"ACTION must be session-start or import, got {action!r}", 1)
    payload = hooks.read_input("" if sys.stdin.isatty() else sys.stdin.read())
    ws = _open(ctx)
    if action == "session-start":
        typer.echo(hooks.session_start(ws, budget if budget is not None else old_budget))
        return
    try:
        report = hooks.import_transcript(ws, payload, extract=extract_)
    except OSError as exc:
        _fail(str(exc))
    if report is not None:
        for problem in report.problems:
            _warn(str(problem))
        typer.echo(report.summary())


def main() -> None:
    """Console entry point: mdmem errors become one clear line on stderr and exit code 1."""
    try:
        code = app(standalone_mode=False)  # click returns the code of a typer.Exit here
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: bad option, missing argument
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except Exception as exc:
        from mdmem.errors import MdmemError

        if isinstance(exc, MdmemError | ValueError):
            typer.echo(f"mdmem: error: {exc}", err=True)
            sys.exit(1)
        if isinstance(exc, OSError):  # the machine, not mdmem (a full disk): still one line
            from mdmem.writes.os_failures import os_error_line

            typer.echo(f"mdmem: error: {os_error_line(exc)}", err=True)
            sys.exit(1)
        raise
    sys.exit(code if isinstance(code, int) else 0)


@app.command("mcp")
def mcp_serve(
    ctx: typer.Context,
    agent: Annotated[
        str | None, typer.Option(help="The agent writing (sessions); default: mdmem.toml's.")
    ] = None,
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
    ] = False,
    host: Annotated[str, typer.Option(help="--http: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="--http: port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="MDMEM_MCP_TOKEN",
            help="--http: require 'Authorization: Bearer TOKEN' (needed off loopback).",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="--http: accept clients that reach this machine by another name or address: "
            "HOST:PORT as in their URL, or HOST for any port (repeatable).",
        ),
    ] = None,
    url: IndexUrlOpt = None,
    index_workspace: IndexWorkspaceOpt = None,
) -> None:
    """Serve this workspace to MCP clients (Claude Code, Claude Desktop, Cursor …).

    Over stdio by default (the client starts it: give -w, clients start servers anywhere);
    --http serves streamable HTTP at http://HOST:PORT/mcp, on loopback unless --token is given.
    """
    from mdmem.integrations.http_guard import allowed_hosts, check_host

    if http:
        try:
            check_host(host, token)
            allowed_hosts(host, allow_host or [])
        except ValueError as exc:
            _fail(str(exc), 2)
    remote = _remote(url, index_workspace)
    root = config = None
    if remote is None:
        from mdmem.config import check_name, load_config
        from mdmem.layout import find_root

        _a_workspace_to_serve(ctx)
        root = find_root(ctx.obj.get("workspace"))
        config = load_config(root)  # a bad mdmem.toml or --agent: said at once, before the SDK
        if agent is not None:
            check_name(agent, "agent")
    try:
        from mdmem.integrations import mcp_server
    except ImportError as exc:
        _fail(f"mdmem mcp needs the MCP SDK ({exc.name}): pip install 'mdmem[mcp]'")
    _log_to_stderr()
    if root is None:
        server: Any = _remote_mcp(remote)
    else:  # the workspace opens in the background, once `initialize` is answered
        server = mcp_server.build_server(root, agent=agent, config=config)
    if http:
        typer.echo(f"mdmem: MCP over streamable HTTP at http://{host}:{port}/mcp", err=True)
        mcp_server.serve_http(server, host, port, token, allow_host or [])
    else:
        mcp_server.serve_stdio(server)


pool_app = typer.Typer(
    help="The shared pool (shared/<pool>.md): versioned keys every agent reads and writes. "
    "Exit codes: 3 a version conflict, 4 no such key."
)
app.add_typer(pool_app, name="pool")
PoolOpt = Annotated[str, typer.Option("--pool", "-p", help="The pool (shared/<pool>.md).")]
KeyArg = Annotated[str, typer.Argument(metavar="KEY", help="The entry's key.")]
ExpectOpt = Annotated[
    int | None,
    typer.Option(
        "--expect-version",
        min=0,
        help="Write only if KEY is at this version (0: only if absent); else exit 3.",
    ),
]
EXIT_CONFLICT = 3
EXIT_NO_KEY = 4


def _pool_value(entry: Any) -> str:
    value = entry.content
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)


def _pool_line(entry: Any) -> str:
    when = (entry.updated_at or "?")[:19].replace("T", " ")
    value = " ".join(_pool_value(entry).split())
    value = value if len(value) <= 60 else value[:59] + "…"
    edited = " (edited by hand)" if entry.edited else ""
    return f"{entry.key}  v{entry.version}  {when}  {entry.updated_by or '-'}{edited}  {value}"


def _pool_call(call: Any) -> Any:
    """A pool call; a version conflict and a missing key get exit codes of their own."""
    from mdmem.errors import VersionConflict

    try:
        return call()
    except VersionConflict as exc:
        _fail(str(exc), EXIT_CONFLICT)
    except KeyError as exc:
        _fail(str(exc.args[0]) if exc.args else "no such key", EXIT_NO_KEY)


@pool_app.command("list")
def pool_list(
    ctx: typer.Context,
    pool: PoolOpt = "default",
    prefix: Annotated[str, typer.Option(help="Only keys starting with this.")] = "",
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=0, help="At most this many.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List a pool's entries, newest first."""
    entries = _open(ctx).sharing.pool(pool).list(prefix=prefix, limit=limit)
    if as_json:
        _print_json([e.to_dict() for e in entries])
        return
    if not entries:
        typer.echo(f"No entries in shared/{pool}.md (write one with `mdmem pool write KEY VALUE`).")
    for entry in entries:
        typer.echo(_pool_line(entry))


@pool_app.command("read")
def pool_read(
    ctx: typer.Context, key: KeyArg, pool: PoolOpt = "default", as_json: JsonOpt = False
) -> None:
    """Print KEY's value (text as it is, structured values as JSON); exit 4 if absent."""
    entry = _open(ctx).sharing.pool(pool).read(key)
    if entry is None:
        _fail(f"no key {key!r} in shared/{pool}.md", EXIT_NO_KEY)
    if as_json:
        _print_json(entry.to_dict())
        return
    typer.echo(_pool_value(entry))


@pool_app.command("write")
def pool_write(
    ctx: typer.Context,
    key: KeyArg,
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The value ('-': stdin).")],
    pool: PoolOpt = "default",
    parse: Annotated[
        bool, typer.Option("--json-value", help="VALUE is JSON: a structured value.")
    ] = False,
    expect_version: ExpectOpt = None,
    writer: Annotated[str | None, typer.Option(help="Who writes (default: the agent).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write VALUE under KEY; with --expect-version, only if nobody wrote it since (exit 3)."""
    text = sys.stdin.read() if value == "-" else value
    content: Any = text
    if parse:
        try:
            content = json.loads(text)
        except ValueError as exc:
            _fail(f"--json-value: VALUE is not JSON: {exc}", 2)
    target = _open(ctx).sharing.pool(pool)
    entry = _pool_call(lambda: target.write(key, content, writer, expect_version))
    if as_json:
        _print_json(entry.to_dict())
        return
    typer.echo(f"{entry.citation}  {entry.key}  v{entry.version}")


@pool_app.command("delete")
def pool_delete(
    ctx: typer.Context,
    key: KeyArg,
    pool: PoolOpt = "default",
    expect_version: ExpectOpt = None,
    writer: Annotated[str | None, typer.Option(help="Who deletes (default: the agent).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Move KEY to the pool file's ## Archive (nothing is lost); exit 4 if absent."""
    target = _open(ctx).sharing.pool(pool)
    entry = _pool_call(lambda: target.delete(key, writer, expect_version))
    if as_json:
        _print_json(entry.to_dict())
        return
    typer.echo(f"archived {entry.key} (v{entry.version}) in {entry.path}")


# the names scripts written before issue 42 use: hidden, the same commands
pool_app.command("get", hidden=True, help="Old name of `read`.")(pool_read)
pool_app.command("set", hidden=True, help="Old name of `write`.")(pool_write)
pool_app.command("rm", hidden=True, help="Old name of `delete`.")(pool_delete)


@app.command()
def consolidate(
    ctx: typer.Context,
    offline: OfflineOpt = False,
    dry_run: DryRunOpt = False,
    by_importance: Annotated[
        bool,
        typer.Option(
            "--by-importance",
            help="No clustering: keep the consolidate.threshold most important memories, "
            "archive the rest (what to do without embeddings).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge old, rarely used memories that say the same thing, each merge checked for fidelity
    before anything is replaced; the originals go to ## Archive (undo with `mdmem restore ID`).
    """
    _log_to_stderr()
    ws = _open(ctx)
    report = ws.lifecycle.consolidate(offline=offline, dry_run=dry_run, by_importance=by_importance)
    if as_json:
        _print_json(report.to_dict())
        return
    typer.echo(report.diff or "(no change)\n", nl=False)
    _print_consolidation(report)
    for suggestion in report.suggestions:
        typer.echo(f"suggestion: {suggestion}", err=True)
    for problem in report.problems:
        _warn(problem)
    typer.echo(report.summary(), err=True)
    if report.report_path:
        typer.echo(f"report: {report.report_path}", err=True)


def _print_consolidation(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Consolidation", title_justify="left")
    for column in ("clusters", "kept", "merged", "refused", "superseded", "memories", "tokens"):
        table.add_column(column, justify="right")
    table.add_row(
        str(len(report.clusters)),
        str(report.count("kept")),
        f"{report.count('merged')} ({report.merged} → {report.written})",
        str(report.count("refused")),
        str(report.superseded),
        f"{report.memories} → {report.entries_after}",
        f"{report.tokens_before:,} → {report.tokens_after:,}",
    )
    console = Console(stderr=True, width=100)
    console.print(table)
    for merged in report.refused:
        fidelity = merged.fidelity
        console.print(
            f"refused ({fidelity.composite:.3f}): {merged.text[:70]!r}: {fidelity.reason}",
            markup=False,
            highlight=False,
        )
    for change in getattr(report, "changes", ()):  # (--by-importance reports none)
        console.print(f"superseded {change.describe()}", markup=False, highlight=False)


@app.command("restore")
def restore_cmd(
    ctx: typer.Context,
    entry_id: Annotated[
        str, typer.Argument(metavar="ID", help="A merged memory, or an original it archived.")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Undo a consolidation: a merged memory's originals come back (it goes to the archive), or
    one archived original comes back alone."""
    ws = _open(ctx)
    report = ws.lifecycle.restore(entry_id)
    if as_json:
        _print_json(report.to_dict())
        return
    for restored in report.restored:
        typer.echo(f"restored  {restored}")
    for archived in report.archived:
        typer.echo(f"archived  {archived}")
    for missing in report.missing:
        _warn(f"{missing} (named by refines=) is in no archive: not restored")


def _contradicted(ctx: typer.Context) -> dict[str, list[str]]:
    """Open contradictions across the workspace: id → the active memories contradicting it."""
    return _open(ctx).lifecycle.contradicted()


@app.command()
def related(
    ctx: typer.Context,
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="The entry's id (m-... or h-...).")],
    as_json: JsonOpt = False,
) -> None:
    """Relations from and to a memory: supports, contradicts, refines (written in the
    metadata of the memory that declares them)."""
    from mdmem.errors import EntryNotFoundError

    ws = _open(ctx)
    found = ws.lifecycle.related(entry_id)
    try:
        ws._w.documents.get(entry_id)  # an unknown id is an error, not an empty list ...
    except EntryNotFoundError:
        if not found:
            raise
        _warn(f"{entry_id} is in no file; memories name it:")  # ... unless memories name it
    if as_json:
        _print_json([r.to_dict() for r in found])
        return
    if not found:
        typer.echo(f"No relations from or to {entry_id}.")
    for r in found:
        state = "" if r.open else " (archived)" if r.target_found else " (missing: in no file)"
        typer.echo(f"{r.source} {r.kind} {r.target}{state}  ({r.path}:{r.line})")
    for r in found:
        if not r.target_found:
            _warn(f"{r.path}:{r.line}: {r.source} {r.kind} {r.target}, which is in no file")


@app.command()
def stats(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """What the memory holds and how it is used: memories by type and file, archived counts,
    most and least returned memories, search latency, the last consolidation."""
    report = _open(ctx).lifecycle.stats()
    if as_json:
        _print_json(report.to_dict())
        return
    average = "-" if report.average_importance is None else f"{report.average_importance:.2f}"
    typer.echo(f"memories     {report.memories} (average importance {average})")
    typer.echo("by type      " + _counts(report.by_type))
    typer.echo("by file      " + _counts(report.by_file))
    typer.echo("archived     " + (_counts(report.archived) or "none"))
    tiers = [f"{t['name']} {t['tokens']:,}/{t['budget']:,}" for t in report.tiers]
    typer.echo("tier tokens  " + (", ".join(tiers) or "-"))
    for title, items in (("most", report.most_accessed), ("least", report.least_accessed)):
        for a in items:
            count = "no count" if a.count is None else f"{a.count}×"
            typer.echo(f"{title:5} used   {count:>8}  {a.id}  {a.text[:60]}")
    if report.searches:
        typer.echo(
            f"searches     {report.searches} recent: p50 {report.latency_p50_ms:.1f} ms, "
            f"p99 {report.latency_p99_ms:.1f} ms"
        )
    last = report.last_consolidation
    typer.echo(f"consolidated {last['when']}: {last['summary']}" if last else "consolidated never")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _copy_index(ws: Any, backend: str | None, url: str | None, as_json: bool) -> None:
    """`mdmem index --backend postgres`: the SQLite index, copied into PostgreSQL."""
    if backend is None:
        _fail("--url goes with --backend postgres (it names the server to copy the index to)")
    if backend != "postgres":
        _fail(f"--backend takes postgres (SQLite is the default index), got {backend!r}")
    copied = ws.index.copy_to_postgres(url)
    if as_json:
        _print_json({name: getattr(copied, name) for name in copied.__dataclass_fields__})
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


# ---- sharing a workspace through git ---------------------------------------------------------


@app.command("merge-driver")
def merge_driver(
    base: Annotated[Path, typer.Argument(help="%O: the common ancestor's version.")],
    ours: Annotated[Path, typer.Argument(help="%A: our version; the result is written here.")],
    theirs: Annotated[Path, typer.Argument(help="%B: their version.")],
    path: Annotated[str, typer.Argument(help="%P: the file's path in the repository.")],
    marker_size: Annotated[int, typer.Option(help="%L: conflict marker length.")] = 7,
) -> None:
    """git's merge driver for memory files: merged entry by entry (set up by `mdmem init`).

    Exit 0 when merged cleanly; 1 when conflict markers were left for a person."""
    from mdmem.sharing.git_merge_driver import run_driver

    outcome = run_driver(base, ours, theirs, path, marker_size)
    for message in outcome.messages:
        typer.echo(f"mdmem merge-driver: {message}", err=True)
    raise typer.Exit(1 if outcome.conflicts else 0)


@app.command("sync")
def git_sync(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Fetch and say what would happen; change nothing.")
    ] = False,
    rebase: Annotated[
        bool, typer.Option("--rebase/--merge", help="Pull with a rebase (default) or a merge.")
    ] = True,
    message: Annotated[str | None, typer.Option("--message", "-m", help="Commit message.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Share the workspace through git: commit its files, pull, re-index, push.

    Commits only the workspace's files and refuses when other files are dirty or git could
    not run the merge driver; checks that the merge kept every entry of both sides before it
    pushes; never force-pushes. Exit codes: 0 done, 1 error, 3 refused, 4 pull left conflicts,
    5 push rejected, 6 the merge would have lost entries (undone, nothing pushed)."""
    from mdmem.sharing.git_sync import SyncError

    _log_to_stderr()
    ws = _open(ctx)
    try:
        report = ws.sharing.sync(dry_run=dry_run, rebase=rebase, message=message)
    except SyncError as exc:
        if as_json:
            _print_json({"error": str(exc), "code": exc.code})
        _fail(str(exc), exc.code)
    if as_json:
        _print_json(report.to_dict())
        return
    if report.migrated:
        typer.echo(f"merge driver set to {report.migrated} (it was the bare name `mdmem`)")
    for contradiction in report.contradictions:
        _warn(f"to settle: {contradiction} (both replace one memory: mdmem forget the wrong one)")
    for note in report.kept_both:
        _warn(f"to settle: {note}")
    verb = "would commit" if dry_run else "committed"
    typer.echo(f"{verb} {len(report.committed)} workspace file(s)")
    for path in report.committed:
        typer.echo(f"  {path}")
    if dry_run:
        typer.echo(f"{report.behind} commit(s) to pull, {report.ahead} to push (dry run)")
    else:
        typer.echo(f"pulled {report.behind} commit(s), re-indexed, pushed {report.ahead}")


# ---- remote readers: a URL and a workspace name, no files ------------------------------------


def _remote(url: str | None, name: str | None) -> Any:
    """The remote reader ``--url``/``--index-workspace`` (or ``$MDMEM_INDEX_URL`` and
    ``$MDMEM_INDEX_WORKSPACE``) name, or None when neither names a workspace."""
    import os

    name = name or os.environ.get("MDMEM_INDEX_WORKSPACE")
    if not name:
        if url is not None:
            _fail("--url goes with --index-workspace NAME (the workspace to read)", 2)
        return None
    from mdmem.index.postgres.remote import RemoteIndex

    return RemoteIndex(url, name)


def _needs_files(command: str) -> None:
    """With only a remote reader's configuration, say what this machine can do."""
    import os

    if os.environ.get("MDMEM_INDEX_WORKSPACE"):
        _fail(
            f"mdmem {command} needs the workspace's files; with only $MDMEM_INDEX_URL and "
            "$MDMEM_INDEX_WORKSPACE this machine searches (mdmem search, status, mcp)"
        )


def _remote_status(remote: Any, as_json: bool) -> None:
    with remote:
        st = remote.status()
    if as_json:
        _print_json(st.to_dict())
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


def _a_workspace_to_serve(ctx: typer.Context) -> None:
    """`mdmem -w FOLDER mcp` on a folder that is no workspace would serve every .md below it
    and make memory.md and .mdmem/ there at the first `remember`: refused, before anything is
    opened or written (a folder found by looking upwards holds a marker by definition)."""
    import shlex

    from mdmem.layout import MARKERS, find_root

    root = find_root(ctx.obj.get("workspace"))
    if not any((root / marker).is_file() for marker in MARKERS):
        _fail(
            f"{root} is no mdmem workspace (no {' or '.join(MARKERS)}); create one with "
            f"`mdmem init {shlex.quote(str(root))}`, or give -w the workspace's folder"
        )


def _remote_mcp(remote: Any) -> Any:
    from mdmem.integrations.mcp_remote import build_remote_server

    return build_remote_server(remote)


@app.command()
def tiers(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The memory tiers L1-L4: tokens, budget, items, and what the next promotion would do."""
    found = _open(ctx).lifecycle.tiers()
    if as_json:
        _print_json([t.to_dict() for t in found])
        return
    _print_tiers(found)


@app.command()
def promote(ctx: typer.Context, dry_run: DryRunOpt = False, as_json: JsonOpt = False) -> None:
    """Run the tier promotions that are due: L2 events into the session's summary, the oldest
    summaries' facts into memory.md / learnings.md, consolidation past its threshold, and old
    compacted sessions into .sessions/archive/."""
    _log_to_stderr()
    report = _open(ctx).lifecycle.promote(dry_run=dry_run)
    if as_json:
        _print_json(report.to_dict())
        return
    if dry_run:
        typer.echo(report.diff or "(no change)\n", nl=False)
    _print_tiers(report.after or report.tiers)
    for problem in report.problems:
        _warn(problem)
    typer.echo(report.summary(), err=True)


def _print_tiers(found: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Memory tiers", title_justify="left")
    for column in ("tier", "tokens", "budget", "used", "items", "next promotion"):
        table.add_column(column, justify="left" if column == "next promotion" else "right")
    for t in found:
        table.add_row(
            t.name, f"{t.tokens:,}", f"{t.budget:,}", f"{t.share:.0%}", str(t.items), t.next
        )
    Console(width=110).print(table)
