"""What the Claude Code ``SessionStart`` hook printed last time, so that a session started on a
workspace nothing changed in costs what Python costs.

The memory section ``SessionStart`` prints is a pure function of files (the configuration,
``memory.md``, ``learnings.md``, the task and world files, ``.sessions/``, the pools …), of a
few environment variables and of the budget; it reads no clock. Working out which files by
reading the code would go stale the day a source is added, so the run that computes the answer
*records* them: a Python audit hook (:func:`sys.addaudithook`) sees every file opened and
every folder listed while the workspace is opened and the context built, and the file system's
word for each (device, inode, size, modification and change times) is taken the moment it is
first touched, together with the folder holding it (a file added beside it, or removed,
changes the folder's times: what an existence check sees). Then every one is taken again: an
answer is kept (in ``.mdmem/hook-context/answers.json``) only when none moved while it was
computed, none changed less than :data:`RACY_SECONDS` ago (a write in the same tick of the
file system's clock as the read would leave the same stat over other bytes), and nothing was
logged (a warning is said on every run, so such a run is never replayed). The source files of
the modules it ran (not the standard library's) are part of the key too: an edited or
upgraded mdmem computes again.

:func:`cached` answers a later run only when every recorded stat, the options and the
environment are as they were; anything else and the context is built as always.

An import hook that a ``SessionStart`` follows (``SessionEnd``: the next session's start;
``PreCompact``: the compacted session's restart) prepares that answer when its import made the
remembered one stale: :func:`prepare_later` starts a detached process (its own session, no
terminal, nothing on the hook's pipes) that waits out :data:`RACY_SECONDS` and builds each stale
answer again exactly as ``SessionStart`` would (:func:`prepare`), so the next session's start
only stats files. The hook answers without waiting for it; anything it cannot keep, the next
``SessionStart`` builds as always.
"""

from __future__ import annotations

import json
import os
import sys
import time

from mdmem.integrations.hook_state import replace_whole

TYPE_CHECKING = False  # not typing's: this module is on a hook's path before anything else
if TYPE_CHECKING:
    from collections.abc import Iterator

FOLDER = "hook-context"
"""In the workspace's ``.mdmem/``: the answers, written only by this module."""
STATE_FILE = "answers.json"
VERSION = 1
KEEP = 8
"""Answers remembered per workspace (one per budget and environment)."""
RACY_SECONDS = 1.0
"""An input changed this recently is not trusted to its stat (FAT's clock ticks in 2 s, most
others' well under 1 s; a same-size write in the tick of the read would go unseen)."""
PREPARED_BY = ("SessionEnd", "PreCompact")
"""The hook events a ``SessionStart`` follows: their import hook prepares its answer."""
DEBUG_MODULES_ENV = "MDMEM_DEBUG_MODULES"
_CODE = (".py", ".pyc", ".pyo", ".so", ".pyd")
_SKIP = ("/dev/", "/proc/", "/sys/")


def cached(root: str, budget: int | None, payload: str) -> str | None:
    """The text the last computation printed for this workspace and budget when every input
    it recorded is as it was; else None (the context is built). The payload must be what
    :func:`mdmem.integrations.hooks.read_input` accepts (else the hook says why, as always)."""
    try:
        if payload.strip() and not isinstance(json.loads(payload), dict):
            return None
        with open(_state_path(root), encoding="utf-8") as handle:
            state = json.load(handle)
        if state.get("version") != VERSION:
            return None
        entry = state["answers"][_options(root, budget)]
        if entry["inputs"] is None:  # (asked for, never kept)
            return None
        for path, seen in entry["inputs"]:
            if stat_of(path) != seen:
                return None
        return str(entry["text"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stat_of(path: str) -> list[int] | None:
    """A file's (or folder's) identity and state as the file system gives it; None when it
    is missing or cannot be looked at."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class Recording:
    """The inputs of one computation: use as a context manager around it, then
    :meth:`remember` its answer. Only one records at a time in a process."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.seen: dict[str, list[int] | None] = {}
        self.unknowable = False
        """Something was opened by descriptor or by a name that cannot be looked at again."""
        self.logged = False
        self._own = os.path.join(root, ".mdmem", FOLDER)
        self._mine = self._own + os.sep

    def __enter__(self) -> Recording:
        global _current
        try:  # made before anything is recorded: its making changes .mdmem's times
            os.makedirs(self._own, exist_ok=True)
        except OSError:
            self.unknowable = True
        _install()
        self._note(self.root)  # (what an existence check of its files sees)
        import logging

        recording = self

        class Flag(logging.Handler):  # (notes that something was said: never replayed)
            def emit(self, record: logging.LogRecord) -> None:
                recording.logged = True

        self._handler: logging.Handler = Flag()
        logging.getLogger("mdmem").addHandler(self._handler)
        _current = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _current
        _current = None
        import logging

        logging.getLogger("mdmem").removeHandler(self._handler)

    def event(self, name: str, args: tuple[object, ...]) -> None:
        if name not in ("open", "os.listdir", "os.scandir"):
            return
        target = args[0] if args else None
        if target is None:
            target = "."
        if isinstance(target, int):
            self.unknowable = True
            return
        try:
            path = os.path.abspath(os.fsdecode(target))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.unknowable = True
            return
        if name == "open" and (path.endswith(_CODE) or path.startswith(_SKIP)):
            return  # (code: the modules' files are keyed by remember())
        self._note(path)
        self._note(os.path.dirname(path))

    def _note(self, path: str) -> None:
        if path not in self.seen and path != self._own and not path.startswith(self._mine):
            self.seen[path] = stat_of(path)

    def inputs(self) -> list[tuple[str, list[int] | None]] | None:
        """Every input with its stat, or None when the answer must not be kept: an input moved
        while it was read, changed too recently to trust, or could not be named."""
        if self.unknowable or self.logged:
            return None
        code = _module_files()
        for path in code:
            self._note(path)
        newest = time.time_ns() - int(RACY_SECONDS * 1e9)
        out = []
        for path, before in self.seen.items():
            if stat_of(path) != before:
                return None
            if before is not None and max(before[3], before[4]) > newest:
                return None
            out.append((path, before))
        return out

    def remember(self, budget: int | None, text: str) -> bool:
        """Keep ``text`` as the answer for this workspace and budget when it may be replayed
        (:meth:`inputs`); whether it was. One that may not is recorded as asked for (no
        inputs, no text): never replayed, but prepared by the next import hook before a
        SessionStart. Never raises: a state that cannot be written costs
        only the next run its shortcut."""
        try:
            inputs = self.inputs()
            path = _state_path(self.root)
            try:
                with open(path, encoding="utf-8") as handle:
                    state = json.load(handle)
                if state.get("version") != VERSION or not isinstance(state.get("answers"), dict):
                    raise ValueError
            except (OSError, ValueError):
                state = {"version": VERSION, "answers": {}}
            answers = state["answers"]
            key = _options(self.root, budget)
            answers.pop(key, None)
            # An answer that may not be kept still says which budget SessionStart asks for:
            # what the next import hook before a SessionStart prepares (:func:`prepare`).
            answers[key] = {"inputs": inputs, "text": text if inputs is not None else None}
            while len(answers) > KEEP:
                answers.pop(next(iter(answers)))
            replace_whole(path, json.dumps(state))
            return inputs is not None
        except Exception:  # (the next run computes as it always did)
            return False


_current: Recording | None = None
_installed = False


def _install() -> None:
    """One audit hook per process (they cannot be removed): it forwards to the recording
    under way, if any."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True


def _audit(name: str, args: tuple[object, ...]) -> None:
    recording = _current
    if recording is not None:
        recording.event(name, args)


def _module_files() -> Iterator[str]:
    """The source files of the modules loaded now, the standard library's excepted (its
    version is in the options)."""
    stdlib = os.path.dirname(os.__file__)
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and not where.startswith(stdlib):
            yield os.path.abspath(where)


def _options(root: str, budget: int | None) -> str:
    """What else decides the answer: the workspace, the budget, the folder the hook runs in,
    the home folder, mdmem's environment variables, this Python."""
    env = sorted(
        (k, v) for k, v in os.environ.items() if k.startswith("MDMEM_") and k != DEBUG_MODULES_ENV
    )
    home = os.path.expanduser("~")
    where = [str(root), budget, os.getcwd(), home, sys.prefix, sys.version, env]
    return json.dumps(where)


def stale(root: str) -> list[int | None]:
    """The budgets whose remembered answer for this workspace, in this process's folder and
    environment, no longer holds (an input changed): what :func:`prepare` builds again."""
    try:
        with open(_state_path(root), encoding="utf-8") as handle:
            state = json.load(handle)
        if state.get("version") != VERSION:
            return []
        out = []
        for key, entry in state["answers"].items():
            budget = json.loads(key)[1]
            if key != _options(root, budget):
                continue  # (another folder, environment or Python: not this process's to do)
            inputs = entry["inputs"]
            if inputs is None or any(stat_of(path) != seen for path, seen in inputs):
                out.append(budget)
        return out
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return []


def prepare_later(root: str) -> bool:
    """After an import hook's answer: when a remembered answer is stale, a detached process
    that builds it again (:func:`prepare`); whether one was started. Never raises, never
    waits: the hook has answered already."""
    spawn = getattr(os, "posix_spawn", None)
    if spawn is None or not stale(root):
        return False
    code = "import sys; from mdmem.integrations.hook_context import prepare; prepare(sys.argv[1])"
    env = {k: v for k, v in os.environ.items() if k != DEBUG_MODULES_ENV}
    quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    try:
        # -P: not the current folder first on sys.path (a project's own `mdmem/` folder would
        # shadow the installed one the hook ran), as the `mdmem` script does not put it.
        spawn(sys.executable, [sys.executable, "-P", "-c", code, root], env,
              file_actions=quiet, setsid=True)  # fmt: skip
    except Exception:  # (no interpreter to name, a platform without it: not prepared)
        return False
    return True


def prepare(root: str) -> None:
    """Build each stale answer again (:func:`stale`), as ``SessionStart`` would, and keep it
    when it may be replayed. First waits out :data:`RACY_SECONDS`: the import that made it
    stale wrote a moment ago, and an input changed that recently is never kept."""
    import logging

    time.sleep(RACY_SECONDS + 0.05)
    from mdmem.integrations import hooks
    from mdmem.workspace import Workspace

    # As SessionStart sets it: a run that would say something (at INFO) is never kept.
    logging.getLogger("mdmem").setLevel(logging.INFO)
    for budget in stale(root):
        try:
            with Recording(root) as inputs:
                text = hooks.session_start(Workspace.open(root), budget)
        except Exception:  # (SessionStart builds it, and says what went wrong, as always)
            continue
        inputs.remember(budget, text)


def _state_path(root: str) -> str:
    return os.path.join(root, ".mdmem", FOLDER, STATE_FILE)
