"""The ``mdmem`` command: a thin typer layer over the library.

Only typer is imported at start-up; each command imports what it needs, so ``--help`` is
instant. Exit codes: 0 done, 1 an mdmem error (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

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


@app.callback()
def _main(ctx: typer.Context, workspace: WorkspaceOpt = None) -> None:
    ctx.obj = {"workspace": workspace}


def _open(ctx: typer.Context) -> Workspace:
    from mdmem.workspace import Workspace

    return Workspace.open(ctx.obj.get("workspace"))


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
    agent: Annotated[str, typer.Option(help="Default agent name.")] = "default",
) -> None:
    """Create a workspace from the templates. Never overwrites an existing file."""
    from mdmem.workspace import TEMPLATES, Workspace

    target = path or ctx.obj.get("workspace") or Path(".")
    existed = {name for name in TEMPLATES.values() if (target / name).exists()}
    if mode not in ("minimal", "full"):
        _fail(f"--mode must be 'minimal' or 'full', got {mode!r}", 2)
    ws = Workspace.init(target, mode=mode, agent=agent)  # type: ignore[arg-type]
    for name in TEMPLATES.values():
        state = "kept" if name in existed else "created"
        typer.echo(f"  {state:8} {name}")
    typer.echo(f"Workspace ready at {ws.root} (mode={ws.mode}, agent={ws.agent}).")


@app.command()
def add(
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
    from mdmem.entries import MEMORY_TYPES

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


@app.command()
def show(
    ctx: typer.Context,
    file: Annotated[str | None, typer.Argument(help="One file (default: all).")] = None,
    archived: Annotated[bool, typer.Option(help="Include archived entries.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Print the parsed entries: where each stands, its type, importance and text."""
    from mdmem.markdown import Problem

    ws = _open(ctx)
    problems: list[Problem]
    if file is not None:
        entries = ws.entries(file, include_archived=archived)
        problems = list(ws.read(file).problems)
    else:
        snap = ws.snapshot()
        entries = list(snap.entries(include_archived=archived))
        problems = list(snap.problems)
    if as_json:
        _print_json(
            {
                "workspace": str(ws.root),
                "entries": [e.to_dict() for e in entries],
                "problems": [
                    {"path": p.path, "line": p.line, "message": p.message} for p in problems
                ],
            }
        )
    else:
        _print_entries(entries)
    for problem in problems:
        _warn(str(problem))


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
    archived: Annotated[bool, typer.Option(help="Include archived entries.")] = False,
    explain: Annotated[bool, typer.Option(help="Show every part of each score.")] = False,
    no_server: Annotated[
        bool, typer.Option("--no-server", help="Search in-process even if a server runs.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Say who answered and how fast.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the workspace: ranked passages cited as path:start-end.

    Uses the warm server of a running `mdmem watch` when there is one, else works in-process.
    """
    if mode is not None and mode not in ("hybrid", "keyword", "vector"):
        _fail(f"--mode must be hybrid, keyword or vector, got {mode!r}", 2)
    if k is not None and k < 1:
        _fail("-k must be at least 1", 2)
    params = {
        "k": k,
        "mode": mode,
        "type": type_,
        "path": path,
        "agent": agent,
        "session": session,
        "since": since,
        "until": until,
        "include_archived": archived,
    }
    data = None if no_server else _ask_server(ctx, query, params, verbose)
    if data is None:
        _log_to_stderr()
        ws = _open(ctx)
        results = ws.search(query, **params)  # type: ignore[arg-type]
        data = {
            "mode": results.mode,
            "fresh": results.fresh,
            "stale": results.stale,
            "hits": [hit.to_dict() for hit in results],
        }
        if verbose:
            _warn("no warm server running (start one with `mdmem watch`); searched in-process")
    if as_json:
        _print_json({"query": query, **data})
    else:
        _print_hits(data["hits"], query, explain)
    for path_ in data["stale"]:
        _warn(f"{path_} changed but cannot be read; its last indexed version was searched")


def _ask_server(
    ctx: typer.Context, query: str, params: dict[str, Any], verbose: bool
) -> dict[str, Any] | None:
    """The fast path: a running `mdmem watch` answers with its warm model and index."""
    import time

    from mdmem.discovery import find_root, socket_path
    from mdmem.server import request

    started = time.perf_counter()
    root = find_root(ctx.obj.get("workspace"))
    try:
        reply = request(socket_path(root), {"op": "search", "query": query, "params": params})
    except (OSError, ValueError) as exc:
        if verbose:
            _warn(f"warm server did not answer ({exc}); searching in-process")
        return None
    if reply is None:
        return None
    if not reply.get("ok"):
        _fail(str(reply.get("error")), 2 if reply.get("kind") == "ValueError" else 1)
    if verbose:
        ms = (time.perf_counter() - started) * 1000
        _warn(f"answered by the warm server (pid {reply.get('pid')}) in {ms:.0f} ms")
    return reply


def _print_hits(hits: list[dict[str, Any]], query: str, explain: bool) -> None:
    """Colours on a terminal (rich); plain text in a pipe, without importing rich at all."""
    emit: Any = print
    tag: Any = lambda text, _style: text  # noqa: E731
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markup import escape

        emit = Console(highlight=False, soft_wrap=True).print
        tag = lambda text, style: f"[{style}]{escape(text)}[/]"  # noqa: E731
    if not hits:
        emit("No results.")
        return
    for n, hit in enumerate(hits, start=1):
        where = f"{hit['path']}:{hit['start_line']}"
        if hit["end_line"] > hit["start_line"]:
            where += f"-{hit['end_line']}"
        heading = "  " + tag(hit["heading"], "dim") if hit["heading"] else ""
        number, score = f"{n:>2}.", f"{hit['score']:.3f}"
        emit(
            f"{tag(number, 'bold')} {tag(where, 'cyan')}  {tag(hit['type'], 'magenta')}"
            f"{heading}  {tag(score, 'green')}"
        )
        text = _snippet(hit["text"], query)
        out, last = [], 0
        for start, end in _highlight(text, query):
            out.append(tag(text[last:start], "default") + tag(text[start:end], "bold yellow"))
            last = end
        out.append(tag(text[last:], "default"))
        emit("    " + "".join(out).replace("\n", "\n    "))
        if explain:
            s = hit["scores"]
            kw = "-" if s["keyword"] is None else f"{s['keyword']:.3f}"
            vec = "-" if s["vector"] is None else f"{s['vector']:.3f}"
            parts = (
                f"keyword(bm25)={kw} vector(cos)={vec} relevance={s['relevance']:.3f} "
                f"recency={s['recency']:.3f} importance={s['importance']:.2f} "
                f"frequency={s['frequency']:.3f}"
            )
            emit("    " + tag(parts, "dim"))


def _highlight(text: str, query: str) -> list[tuple[int, int]]:
    """Spans of query words in text (a light copy of the index's tokenizing: no jieba here)."""
    import re

    words = {w.lower() for w in re.findall(r"[^\W_]{2,}", query)}
    if not words:
        return []
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.I)
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def _snippet(text: str, query: str, width: int = 300) -> str:
    if len(text) <= width:
        return text
    spans = _highlight(text, query)
    start = max(0, spans[0][0] - width // 3) if spans else 0
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


@app.command()
def index(
    ctx: typer.Context,
    full: Annotated[bool, typer.Option(help="Re-read and re-chunk every file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Bring the index up to date with the files (incremental unless --full)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    _log_to_stderr()
    ws = _open(ctx)
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeRemainingColumn(), transient=True, disable=as_json) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                label = "Reading files" if stage == "files" else "Embedding chunks"
                tasks[stage] = bar.add_task(label, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = ws.sync(full=full, progress=progress)
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
    }
    if as_json:
        _print_json(data)
    else:
        typer.echo(
            f"Indexed in {report.seconds:.2f} s: {report.added} added, {report.updated} updated, "
            f"{report.removed} removed files; {report.chunks_written} chunks written, "
            f"{report.embedded} embedded."
        )
    for problem in report.problems:
        _warn(str(problem))


@app.command()
def watch(
    ctx: typer.Context,
    serve: Annotated[
        bool, typer.Option(help="Also answer `mdmem search` over a local socket (warm model).")
    ] = True,
) -> None:
    """Watch the workspace and re-index every change as it happens, until Ctrl-C."""
    import signal
    import threading

    _log_to_stderr()
    ws = _open(ctx)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    typer.echo(f"mdmem: indexing {ws.root} ...", err=True)
    watcher = ws.watch(serve=serve)
    where = f"; answering searches on {watcher.server.path}" if watcher.server else ""
    typer.echo(f"mdmem: watching {ws.root}{where}. Ctrl-C stops.", err=True)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        watcher.stop()
        typer.echo("mdmem: watcher stopped.", err=True)


@app.command()
def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """What the index holds, whether it is fresh, and where it lives."""
    _log_to_stderr()
    ws = _open(ctx)
    st = ws.status()
    if as_json:
        _print_json({"workspace": str(ws.root), "mode": ws.mode, **st.to_dict()})
        return
    fresh = (
        "fresh"
        if not (st.stale or st.removed)
        else (
            f"{len(st.stale) + len(st.removed)} file(s) changed since the last sync "
            "(the next search re-indexes them)"
        )
    )
    rows = [
        ("workspace", f"{ws.root} (mode {ws.mode}, agent {ws.agent})"),
        ("files", str(st.files)),
        ("chunks", f"{st.chunks} ({st.embedded} embedded)"),
        ("model", st.model or "none (keyword search only)"),
        ("index", f"{st.db_path} ({st.index_bytes / 1e6:.1f} MB)"),
        ("last sync", st.last_sync or "never"),
        ("freshness", fresh),
        ("watcher", _watcher_line(st.watcher)),
    ]
    for name, value in rows:
        typer.echo(f"{name:>10}  {value}")
    for path in [*st.stale, *st.removed]:
        typer.echo(f"{'':>10}  changed: {path}")
    for problem in st.problems:
        _warn(problem)


def _watcher_line(info: dict[str, Any] | None) -> str:
    if not info:
        return "not running (start one with `mdmem watch`)"
    beat = f"last heartbeat {info['heartbeat_age']:.0f} s ago"
    if not info["running"]:
        return f"not running (pid {info['pid']} stopped; {beat})"
    served = f", serving {info['socket']}" if info.get("socket") else ""
    return f"running (pid {info['pid']}, {beat}{served})"


def _log_to_stderr() -> None:
    import logging

    logger = logging.getLogger("mdmem")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
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
        raise
    sys.exit(code if isinstance(code, int) else 0)
