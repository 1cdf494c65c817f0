"""The ``mdmem`` console entry point: ``mdmem search`` without typer, everything else with it.

An agent shelling out to ``mdmem search`` pays Python's start-up, then typer's (it builds
pydantic validators for every option of every command), then a socket round trip to the warm
server. This module skips the middle part: it reads the options of ``search`` itself — exactly
the typer command's, both built from :mod:`mdmem.index.search_params` — and asks the server through
:mod:`mdmem.live.client`, importing only the standard library and a few light modules. Anything
it does not recognise (``--help``, a usage error, another command) and every in-process search
goes to :func:`mdmem.cli.main`, so behaviour and messages are the typer command's.

With no server running, a search whose query needs no torch (the default model's ONNX export,
:mod:`mdmem.index.onnx_encoder`) is answered here, in-process, without typer either; the
server is started after the answer is out, for the next search. Any error there goes to the
typer command, which searches again and says what went wrong as it always does.

``$MDMEM_DEBUG_MODULES``, a folder: at exit, this process writes ``<pid>.modules`` there, its
arguments on the first line, then the name of every module it imported, one a line (how a test
sees that a short-lived process, or the server a search started, never imported torch).
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple

from mdmem.index.search_params import MODES, REMOTE, SEARCH_OPTIONS, SEARCH_PARAMS

TYPE_CHECKING = False  # neither typing nor dataclasses: each costs this path milliseconds
if TYPE_CHECKING:
    from typing import Any

VALUE_OPTIONS = {
    name: option.name
    for option in SEARCH_OPTIONS
    if option.kind != "bool" and option.role != REMOTE
    for name in option.names()
}
"""Options of ``mdmem search`` that take a value, and the search parameter each sets."""
FLAG_OPTIONS = {
    name: (option.name, value)
    for option in SEARCH_OPTIONS
    if option.kind == "bool"
    for name, value in option.switches().items()
}
"""Flags of ``mdmem search``: the setting each changes, and to what."""
WORKSPACE_OPTIONS = ("-w", "--workspace")
REMOTE_OPTIONS = tuple(name for o in SEARCH_OPTIONS if o.role == REMOTE for name in o.names())
"""Options of a remote reader's ``mdmem search`` (no files, no warm server): left to typer."""


DEBUG_MODULES_ENV = "MDMEM_DEBUG_MODULES"

SearchArgs = namedtuple("SearchArgs", "query workspace command_at params flags")
"""``mdmem search`` as read: the query, ``-w`` (or None), where ``search`` stands in the
arguments, the search parameters given, and the other flags (explain, no_server, verbose,
as_json) given."""


def main() -> None:
    """``mdmem``: a search through the warm server here; the typer CLI for the rest."""
    if os.environ.get(DEBUG_MODULES_ENV):
        import atexit

        atexit.register(_write_modules, os.environ[DEBUG_MODULES_ENV])
    try:
        _main()
    except BrokenPipeError:  # `mdmem search ... | head`: the reader has what it wanted
        # Python flushes stdout again at exit, which would raise once more: point it nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)  # as click does on the typer path


def _main() -> None:
    if "mcp" in sys.argv[1:4]:  # `[-w PATH] mcp [--agent NAME]`: served without typer
        from mdmem.integrations.mcp_start import serve

        served = serve(sys.argv[1:])
        if served is not None:
            sys.exit(served)
    hook = parse_hook(sys.argv[1:])
    if hook is not None:
        code = _hook(*hook)
        if code is None:
            _typer_cli()
        sys.exit(code)
    args = parse_search(sys.argv[1:])
    if args is None or args.flags.get("no_server") or os.environ.get("MDMEM_INDEX_WORKSPACE"):
        _typer_cli()
        return
    code = _search(args)
    if code is None:  # in-process, and not asking a server again
        sys.argv[args.command_at + 2 : args.command_at + 2] = ["--no-server"]
        _typer_cli()
    sys.exit(code)


def parse_search(argv: list[str]) -> SearchArgs | None:
    """``[-w PATH] search QUERY [options]`` read as typer would, or None for anything else
    (typer then handles it, including every usage error)."""
    workspace = None
    rest = list(argv)
    while rest and (rest[0] in WORKSPACE_OPTIONS or rest[0].startswith("--workspace=")):
        if "=" in rest[0]:
            workspace = rest.pop(0).split("=", 1)[1]
        elif len(rest) >= 2:
            workspace = rest[1]
            del rest[:2]
        else:
            return None
    if not rest or rest.pop(0) != "search":
        return None
    command_at = len(argv) - len(rest) - 1
    query: str | None = None
    params: dict[str, Any] = {}
    flags: dict[str, bool] = {}
    while rest:
        token = rest.pop(0)
        name, eq, inline = token.partition("=")
        if token == "--":
            if query is not None or len(rest) != 1:
                return None
            query = rest.pop()
        elif token in FLAG_OPTIONS:
            key, value = FLAG_OPTIONS[token]
            (params if key in SEARCH_PARAMS else flags)[key] = value
        elif token in VALUE_OPTIONS or (eq and name.startswith("--") and name in VALUE_OPTIONS):
            given = inline if eq else (rest.pop(0) if rest else None)
            if given is None or (not eq and given.startswith("-")):
                return None
            params[VALUE_OPTIONS[name if eq else token]] = given
        elif token.startswith("-") and token != "-":  # (REMOTE_OPTIONS too: typer's)
            return None
        elif query is None:
            query = token
        else:
            return None
    if query is None or not _valid(params):
        return None
    return SearchArgs(query, workspace, command_at, params, flags)


BUDGET_NAMES = ("--budget-tokens", "--budget", "-b")


def parse_hook(argv: list[str]) -> tuple[str | None, str, bool, int | None] | None:
    """``[-w PATH] hooks run claude-code ACTION [--extract] [--budget-tokens N]`` read as typer
    would (``--budget``, its old name, too): (workspace, action, extract, budget), or None for
    anything else (typer's then)."""
    workspace = None
    rest = list(argv)
    if rest[:1] in (["-w"], ["--workspace"]) and len(rest) >= 2:
        workspace = rest[1]
        del rest[:2]
    elif rest and rest[0].startswith("--workspace="):
        workspace = rest.pop(0).split("=", 1)[1]
    if rest[:3] != ["hooks", "run", "claude-code"] or len(rest) < 4:
        return None
    action, options = rest[3], rest[4:]
    if action not in ("session-start", "import"):
        return None
    extract, budget = False, None
    while options:
        token = options.pop(0)
        name, eq, inline = token.partition("=")
        if token == "--extract":
            extract = True
        elif name in BUDGET_NAMES and (eq or options) and not (eq and name == "-b"):
            try:
                budget = int(inline if eq else options.pop(0))
            except ValueError:
                return None
        else:
            return None
    return workspace, action, extract, budget


def _hook(workspace: str | None, action: str, extract: bool, budget: int | None) -> int | None:
    """A Claude Code hook without typer (its import costs a hook a third of its time): the exit
    code, or None for the typer command to run it instead (any error: it runs the hook again
    and says what went wrong as it always does; the hook's input is handed on)."""
    text = "" if sys.stdin.isatty() else sys.stdin.read()
    if action == "import" and not extract and _nothing_new(workspace, text):
        _prepare_next_start(workspace, text)
        return 0
    if action == "session-start":
        return _session_start(workspace, budget, text)
    import io

    from mdmem.integrations import hooks
    from mdmem.workspace import Workspace

    _log_to_stderr()
    try:
        payload = hooks.read_input(text)
        ws = Workspace.open(workspace)
        report = hooks.import_transcript(ws, payload, extract=extract)
    except Exception:
        sys.stdin = io.StringIO(text)
        return None
    if report is not None:
        for problem in report.problems:
            print(f"mdmem: warning: {problem}", file=sys.stderr)
        print(report.summary())
    _prepare_next_start(str(ws.root), text)
    return 0


def _session_start(workspace: str | None, budget: int | None, text: str) -> int | None:
    """SessionStart: the memory section, from what the last run printed when none of its
    inputs changed (:mod:`mdmem.integrations.hook_context`), else built (and kept for the
    next run). None (typer's command) on any error, as :func:`_hook` says."""
    import io

    from mdmem.integrations import hook_context
    from mdmem.layout import find_root

    try:
        root = str(find_root(workspace))
    except Exception:
        sys.stdin = io.StringIO(text)
        return None
    answer = hook_context.cached(root, budget, text)
    if answer is not None:
        print(answer)
        return 0
    from mdmem.integrations import hooks
    from mdmem.workspace import Workspace

    _log_to_stderr()
    try:
        hooks.read_input(text)
        with hook_context.Recording(root) as inputs:
            context = hooks.session_start(Workspace.open(root), budget)
    except Exception:
        sys.stdin = io.StringIO(text)
        return None
    print(context)
    inputs.remember(budget, context)
    return 0


def _prepare_next_start(workspace: str | None, text: str) -> None:
    """After an import hook that a SessionStart follows (SessionEnd, PreCompact: the event
    its payload names), that SessionStart's answer prepared in a detached process when the
    import made the remembered one stale (:func:`mdmem.integrations.hook_context.prepare_later`).
    The hook's answer is out first; nothing here can change it or fail it."""
    import json

    try:
        payload = json.loads(text) if text.strip() else {}
        event = payload.get("hook_event_name") if isinstance(payload, dict) else None
        from mdmem.integrations import hook_context

        if event not in hook_context.PREPARED_BY:
            return
        from mdmem.layout import find_root

        sys.stdout.flush()
        sys.stderr.flush()
        hook_context.prepare_later(str(find_root(workspace)))
    except Exception:  # (the next SessionStart builds its answer, as it always did)
        return


def _nothing_new(workspace: str | None, text: str) -> bool:
    """An import hook whose log, session file and workspace are as the last run left them
    (:mod:`mdmem.integrations.hook_state`): says what the import would say, and True; False
    (the import runs) in every other case, an unreadable payload too."""
    import json

    from mdmem.integrations import hook_state
    from mdmem.layout import find_root

    try:
        payload = json.loads(text) if text.strip() else {}
        transcript = payload.get("transcript_path") if isinstance(payload, dict) else None
        if not isinstance(transcript, str) or not transcript:
            return False
        found = hook_state.unchanged(find_root(workspace), transcript)
    except Exception:
        return False
    if found is None:
        return False
    summary, problems = found
    for problem in problems:
        print(f"mdmem: warning: {problem}", file=sys.stderr)
    print(summary)
    return True


def _valid(params: dict[str, Any]) -> bool:
    """Converts ``-k``; False for what typer reports as a usage error."""
    if "k" in params:
        try:
            params["k"] = int(params["k"])
        except ValueError:
            return False
        if params["k"] < 1:
            return False
    return params.get("mode", "hybrid") in MODES


def _search(args: SearchArgs) -> int | None:
    """The exit code once the server answered, or None to search in-process."""
    if args.flags.get("explain"):
        return None  # --explain also names open contradictions: that reads the files (typer's)
    import time

    from mdmem.errors import MdmemError
    from mdmem.layout import find_root
    from mdmem.live.client import ServerError, Status, ask, said
    from mdmem.live.search_output import print_results

    params = {"include_archived": False, **args.params}  # the server's defaults for the rest
    verbose = args.flags.get("verbose", False)
    started = time.perf_counter()
    try:
        root = find_root(args.workspace)
        answer = ask(root, args.query, params, status=Status(), answer_first=True)
        data = said(answer, started, verbose)
    except (MdmemError, OSError):  # no workspace, a bad mdmem.toml: typer's command says so
        return None
    except ServerError as exc:
        print(f"mdmem: error: {exc}", file=sys.stderr)
        return 2 if exc.kind == "ValueError" else 1
    if data is None and answer.start:
        return _search_here(root, args, params)
    if data is None:
        return None
    flags = args.flags
    print_results(
        data, args.query, explain=flags.get("explain", False), as_json=flags.get("as_json", False)
    )
    return 0


def _search_here(root: Any, args: SearchArgs, params: dict[str, Any]) -> int | None:
    """The first search of the day: in this process (its query embedded without torch), then
    the server started for the next one. None (typer searches again) on any error.

    The query encoder starts loading first, on a thread of its own, while this one imports
    the workspace and the index: a keyword search has no use for it."""
    if params.get("mode") != "keyword":
        _prefetch_encoder(root)
    from mdmem.index.request import SearchRequest
    from mdmem.live.client import start_server
    from mdmem.live.search_output import print_results
    from mdmem.workspace import Workspace

    _log_to_stderr()
    try:
        with Workspace(root) as ws:
            data = ws.search(SearchRequest.from_params(args.query, params)).to_dict()
    except Exception:  # typer's command searches again and says it as it always does
        return None
    flags = args.flags
    print_results(
        data, args.query, explain=flags.get("explain", False), as_json=flags.get("as_json", False)
    )
    sys.stdout.flush()
    start_server(root)
    return 0


def _prefetch_encoder(root: Any) -> None:
    """The configured model's ONNX export loading on a thread (nothing for another model, or
    a workspace whose mdmem.toml cannot be read: the search says why, as it always does)."""
    try:
        from mdmem.config import load_config
        from mdmem.index.embed import prefetch_query_encoder

        cfg = load_config(root).embedding
        prefetch_query_encoder(cfg.model, cfg.provider, cfg.device, cfg.threads)
    except Exception:  # (the search itself meets the same problem and reports it)
        return


def _log_to_stderr() -> None:
    """The library's warnings on stderr, one line each, as the typer commands show them."""
    import logging

    logger = logging.getLogger("mdmem")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("mdmem: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def _write_modules(folder: str) -> None:
    with open(os.path.join(folder, f"{os.getpid()}.modules"), "w", encoding="utf-8") as out:
        out.write(" ".join(sys.argv[1:]).replace("\n", " ") + "\n")
        out.write("\n".join(sorted(sys.modules)) + "\n")


def _typer_cli() -> None:
    from mdmem.cli import main as cli_main

    cli_main()
