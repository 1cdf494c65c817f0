"""Reading workspace files safely, and writing them as a polite co-author.

A program write never loses a person's save. Under a per-file lock it:

1. reads the file once it has *settled*: a file that changed a moment ago, or just became
   empty, may be an editor's save in progress (VS Code truncates, then writes);
2. applies the edit (old text → new text);
3. swaps the new file in with ``renameat2(RENAME_EXCHANGE)`` (:mod:`mdmem.writes.swap`), so
   the file it replaced is in hand, not gone: if that is not exactly what it read, a person
   saved in between, and the edit is redone on their version (or, if it no longer applies
   there, their version goes back and ``ConflictError`` is raised);
4. moves the replaced file into the journal (:mod:`mdmem.writes.journal`) and, for
   ``write.late_save_ms``, watches it and the path (:mod:`mdmem.writes.late_saves`): an
   editor that opened the file before the swap and writes into the old inode afterwards, or
   saves a copy it read before the write, is merged back in line by line
   (:mod:`mdmem.writes.line_merge`).

Where the exchange call is missing (not Linux), step 3 becomes: hard-link the current file
into the journal, check it is what was read, ``os.replace`` — a check-then-replace window of
microseconds remains there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mdmem.errors import ConflictError, EditNotApplicable, FileProblem
from mdmem.layout import PRIVATE_FILE_MODE, private_dir
from mdmem.markdown.conflicts import conflict_line, conflict_message
from mdmem.writes.file_state import (
    BOM,
    EMPTY_QUIET_S,
    QUIET_LIMIT_S,
    QUIET_S,
    SLOW_SAVE_S,
    FileState,
    Target,
    read_all,
    save_in_progress,
    settled_bytes,
)
from mdmem.writes.journal import WRITTEN, Journal
from mdmem.writes.lineage import Lineage, digest
from mdmem.writes.processes import pid_alive
from mdmem.writes.swap import exchange

log = logging.getLogger("mdmem")

BINARY_SNIFF_BYTES = 8192
LOCK_TIMEOUT_S = 60.0
MAX_WRITE_ATTEMPTS = 32
TEMP_SUFFIX = ".mdmem-tmp"
MAX_QUIET_S = 0.02
"""After repeated races, a write waits for up to this long a lull before trying again."""
READ_EMPTY_WAIT_S = 0.2
"""How long a reader waits for a just-emptied file to fill (a writer waits EMPTY_QUIET_S)."""
UNFINISHED_WATCH_S = 60.0
"""How long the file a write replaced is watched when another program was still writing it
(for more than ``SLOW_SAVE_S``): the rest of that save lands there and is merged."""
MISSING_WAIT_S = 0.25
"""A file the program wrote before that is missing may be mid-save (vim, JetBrains rename it
away for a moment): wait this long for it to come back before treating it as deleted."""


EditFile = Callable[[Callable[[str], str]], str]
"""Applies an edit (old text → new text) to one file safely; returns the text now on disk."""


# ---- reading ---------------------------------------------------------------------------------


def decode_markdown(path: str, data: bytes, max_bytes: int) -> str:
    """Bytes of a workspace file → text, or a FileProblem naming the file and line."""
    check_size(path, len(data), max_bytes)
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise FileProblem(path, "binary file (NUL bytes), not Markdown")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1
        col = exc.start - max(before.rfind(b"\n"), before.rfind(b"\r"))
        raise FileProblem(
            path, f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {col})", line
        ) from None
    return text.removeprefix("\ufeff")


def read_markdown(absolute: Path, rel: str, max_bytes: int) -> tuple[bytes, str]:
    """A workspace file's bytes and text; every way it can fail is a FileProblem naming it."""
    try:
        fd = os.open(absolute, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileProblem(rel, "no such file (removed, or being replaced)") from None
    except IsADirectoryError:
        raise FileProblem(rel, "is a folder, not a file") from None
    except OSError as exc:
        raise FileProblem(rel, f"cannot read: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        _check_regular(rel, st.st_mode)
        check_size(rel, st.st_size, max_bytes)  # never read a huge file
        _wait_if_emptied(fd, st)
        data = read_all(fd)
    except OSError as exc:
        raise FileProblem(rel, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return data, decode_markdown(rel, data, max_bytes)


def _wait_if_emptied(fd: int, st: os.stat_result) -> None:
    """A file emptied a moment ago is an in-place save between truncate and write: give it
    a moment to fill, so a reader does not take it for a file with nothing in it."""
    deadline = time.monotonic() + READ_EMPTY_WAIT_S
    while st.st_size == 0 and time.time_ns() - st.st_mtime_ns < EMPTY_QUIET_S * 1e9:
        if time.monotonic() > deadline:
            return
        time.sleep(0.002)
        st = os.fstat(fd)


def check_size(path: str, size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise FileProblem(
            path,
            f"too large ({size / 1e6:.1f} MB > {max_bytes / 1e6:.1f} MB); skipped. "
            "Raise files.max_file_mb in mdmem.toml to include it",
        )


def check_writable(path: Path, display: str) -> None:
    """A file a person made read-only (``chmod 444``, ``chmod a-w``) is not written, though a
    write swaps a new file in (which needs only the folder's permission) and root may write
    anything: its mode bits say no, so mdmem says no."""
    try:
        st = os.stat(path)
    except OSError:
        return  # missing (a new file), or unreadable: the read says why
    if not stat.S_ISREG(st.st_mode):
        return
    if st.st_mode & 0o222 == 0 or not os.access(path, os.W_OK):
        raise FileProblem(
            display,
            f"is read-only (mode {stat.S_IMODE(st.st_mode):04o}); nothing was written. "
            f"To let mdmem write it: chmod u+w {display}",
        )


def _check_regular(rel: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise FileProblem(rel, "is a folder, not a file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device or socket"
        raise FileProblem(rel, f"is {kind}, not a regular file; nothing was read or written")


# ---- writing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteResult:
    """What a safe write left on disk, and how many tries it took."""

    path: Path
    text: str
    """The text now on disk."""
    attempts: int
    """1 when nothing changed under us; more when the edit was redone on a person's save."""


class SafeWriter:
    """Program writes to workspace files: locked, compare-and-swap, journaled, late saves
    merged. One per workspace (its state lives in ``.mdmem/``)."""

    def __init__(
        self,
        state_dir: Path,
        *,
        late_save_s: float = 0.25,
        journal_versions: int = 50,
        journal_bytes: int = 64_000_000,
    ) -> None:
        from mdmem.writes.late_saves import LateSaveGuard

        self.state_dir = state_dir
        self.journal = Journal(state_dir, journal_versions, journal_bytes)
        self.late_save_s = late_save_s
        self.guard = LateSaveGuard(self, late_save_s)

    # ---- the lock and what the last program write left -------------------------------------

    def _key(self, rel: str) -> str:
        return urllib.parse.quote(rel, safe="")

    def lock_path(self, rel: str) -> Path:
        return self.state_dir / "locks" / f"{self._key(rel)}.lock"

    def seen(self, rel: str) -> FileState | None:
        """The file as the last program write (any process) left it, if known."""
        try:
            return FileState.parse(
                (self.state_dir / "locks" / f"{self._key(rel)}.seen").read_text()
            )
        except OSError:
            return None

    def _set_seen(self, rel: str, state: FileState) -> None:
        path = self.state_dir / "locks" / f"{self._key(rel)}.seen"
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
            with os.fdopen(fd, "w") as handle:
                handle.write(state.line())

    def known_versions(self, rel: str, wanted: set[str]) -> dict[str, bytes]:
        """The versions of ``rel`` the journal holds whose digests are ``wanted`` (what program
        writes replaced and wrote, in any process), newest first until all are found: the
        late-save guard follows the path's history through every program write's versions."""
        found: dict[str, bytes] = {}
        for entry in self.journal.entries(rel):
            if len(found) == len(wanted):
                break
            try:
                data = entry.read_bytes()
            except OSError:
                continue  # pruned meanwhile
            key = digest(data)
            if key in wanted:
                found.setdefault(key, data)
        return found

    def lineage(self, rel: str) -> Lineage:
        """Which versions of ``rel`` program writes (any process) made, and from which."""
        return Lineage(self.state_dir / "locks" / f"{self._key(rel)}.lineage")

    def locked(self, rel: str, display: str) -> contextlib.AbstractContextManager[object]:
        from mdmem.writes.file_lock import FileLock, Timeout

        lock = self.lock_path(rel)
        private_dir(lock.parent)
        file_lock = FileLock(str(lock), timeout=LOCK_TIMEOUT_S, mode=0o600, poll_interval=0.002)

        @contextlib.contextmanager
        def hold():  # type: ignore[no-untyped-def]
            try:
                with file_lock:
                    yield file_lock
            except Timeout:
                raise ConflictError(
                    f"{display}: another mdmem process held the write lock for "
                    f"{LOCK_TIMEOUT_S:.0f} s ({lock}); nothing was written"
                ) from None

        return hold()

    # ---- one write ----------------------------------------------------------------------

    def edit(
        self,
        target: Target,
        edit: Callable[[str], str],
        *,
        display: str | None = None,
        initial: str = "",
        create: bool = True,
        committed: Callable[[str], None] | None = None,
    ) -> WriteResult:
        """Apply ``edit`` (old text → new text) to the file, never over a person's save.

        If a person saved since the read, the edit is redone on their version; if it no
        longer applies there, ConflictError and their version stays. ``create=False``: a
        missing file is a FileProblem, not a new file. ``committed(text)`` runs once the text
        is in place, still under the file's lock (the shared pool records what it
        acknowledged there, so no other write comes between).
        """
        display = display or target.rel
        try:
            with self.locked(target.rel, display):
                return self.edit_locked(
                    target,
                    edit,
                    display=display,
                    initial=initial,
                    create=create,
                    committed=committed,
                )
        except (FileProblem, ConflictError, EditNotApplicable):
            raise
        except OSError as exc:  # a full disk, a read-only mount: said plainly, nothing written
            reason = exc.strerror or str(exc)
            raise FileProblem(display, f"cannot write: {reason}; the file is unchanged") from None

    def edit_locked(
        self,
        target: Target,
        edit: Callable[[str], str],
        *,
        display: str | None = None,
        initial: str = "",
        create: bool = True,
        committed: Callable[[str], None] | None = None,
    ) -> WriteResult:
        """:meth:`edit` for a caller that holds :meth:`locked` already."""
        display = display or target.rel
        check_writable(target.path, display)
        remove_stale_temps(target.path)
        result = self._edit_locked(target, edit, display, initial, create)
        if committed is not None:
            committed(result.text)
        return result

    def _edit_locked(
        self,
        target: Target,
        edit: Callable[[str], str],
        display: str,
        initial: str,
        create: bool,
    ) -> WriteResult:
        seen = self.seen(target.rel)
        read = self._read_settled(target, display, seen)
        base, unfinished = read.data, read.unfinished
        expected = (base, read.state)  # what the swap must find at the path
        restoring = False
        for attempt in range(1, MAX_WRITE_ATTEMPTS + 1):
            if base is None and not create:
                raise FileProblem(display, "no such file: it was deleted or moved; nothing written")
            text = initial if base is None else decode_markdown(display, base, target.max_bytes)
            if (marked := conflict_line(text)) is not None:
                raise FileProblem(display, conflict_message(marked), marked)
            if restoring:
                new_text = text
            else:
                try:
                    new_text = edit(text)
                except EditNotApplicable as exc:
                    if attempt == 1:
                        raise
                    if expected[0] == base:
                        raise self._conflict(display, exc) from None
                    restoring, conflict = True, exc  # put the person's version back first
                    new_text = text
            bom = BOM if base and base.startswith(BOM) else b""
            data = bom + new_text.encode("utf-8")
            if data == expected[0]:
                if restoring:
                    raise self._conflict(display, conflict) from None
                return WriteResult(target.path, new_text, attempt)
            # after a race, wait for a longer lull each time: a burst of saves passes
            quiet = min(QUIET_S * 2 ** (attempt - 1), MAX_QUIET_S)
            # logged before the swap: another process's guard that looks at the path without
            # the lock must find the new version's origin (else it diffs and merges for naught)
            self.lineage(target.rel).record(base, data)
            outcome = self._commit(target, expected, data, quiet, unfinished)
            if outcome.clean:
                state = outcome.state
                assert state is not None, "a clean write knows the state of the file it placed"
                self._set_seen(target.rel, state)
                self._keep_written(target.rel, data)
                if base is not None:
                    self.guard.written(target, base, data, state, _landed(expected[1]))
                if restoring:
                    raise self._conflict(display, conflict) from None
                return WriteResult(target.path, new_text, attempt)
            # a person saved between the read and the swap: theirs is the new base
            base, unfinished = outcome.theirs, outcome.unfinished
            expected = (outcome.placed, outcome.state)
        raise ConflictError(
            f"{display} kept changing while mdmem tried to write it ({MAX_WRITE_ATTEMPTS} "
            "attempts); the file on disk is the person's version (or, in a few cases, the "
            "program's: see `mdmem recover`)"
        )

    @staticmethod
    def _conflict(display: str, exc: Exception) -> ConflictError:
        return ConflictError(
            f"{display} changed while mdmem was writing it, and the change cannot be redone "
            f"on the new version: {exc}. Nothing was written; the file on disk is the "
            "person's version."
        )

    def _read_settled(
        self, target: Target, display: str, seen: FileState | None, quiet: float = QUIET_S
    ) -> _Read:
        """The file's bytes once it is not in the middle of someone's save: quiet for a few
        ms, and (for up to ``SLOW_SAVE_S``) no longer held open for writing by the process
        that just changed it (an in-place save paused between its chunks)."""
        started = time.monotonic()
        missing_until = time.monotonic() + (MISSING_WAIT_S if seen is not None else 0.0)
        while True:
            try:
                fd = os.open(target.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                if time.monotonic() < missing_until:
                    time.sleep(0.005)
                    continue
                return _Read(None, None)
            except IsADirectoryError:
                raise FileProblem(display, "is a folder, not a file; nothing written") from None
            except OSError as exc:
                raise FileProblem(
                    display, f"cannot read: {exc.strerror}; nothing written"
                ) from None
            try:
                st = os.fstat(fd)
                _check_regular(display, st.st_mode)
                state = FileState.of(st)
                wait = state.settle_wait(seen, quiet)
                limit = EMPTY_QUIET_S if state.size == 0 else max(QUIET_LIMIT_S, 4 * quiet)
                if wait > 0 and time.monotonic() < started + limit:
                    time.sleep(min(wait, 0.01))
                    continue
                waited = time.monotonic() - started
                # still being written, as far back as this read has waited: the save paused
                unfinished = state != seen and save_in_progress(fd, state, SLOW_SAVE_S + waited)
                if unfinished and waited < SLOW_SAVE_S and save_in_progress(fd, state):
                    time.sleep(0.01)
                    continue
                check_size(display, state.size, target.max_bytes)
                data = read_all(fd)
                if FileState.of(os.fstat(fd)) != state:
                    continue  # written to while we read
                with contextlib.suppress(FileNotFoundError):
                    if FileState.of(os.stat(target.path)) == state:
                        if unfinished:
                            log.warning(_UNFINISHED, display, SLOW_SAVE_S)
                        return _Read(data, state, unfinished)
            finally:
                os.close(fd)

    def _commit(
        self,
        target: Target,
        expected: tuple[bytes | None, FileState | None],
        data: bytes,
        quiet: float = QUIET_S,
        unfinished: bool = False,
    ) -> _Outcome:
        """Put ``data`` at the path if the path still holds ``expected``; else hand back
        what a person saved there instead (and leave it at the path), once it is ``quiet``.
        ``unfinished``: ``expected`` was still being written; the rest of that save, which
        lands in the replaced file, is watched for longer than the late-save window."""
        path = target.path
        want, want_state = expected
        if want is None or want_state is None:
            return self._create(target, data)
        tmp = _temp_copy(path, data, _mode_of(path))
        try:
            if not _same_version(_state_of(path), want_state):  # saved meanwhile: no swap
                os.unlink(tmp)
                return self._reread(target, quiet)
            ours = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        try:
            swapped = exchange(tmp, path)
        except FileNotFoundError:  # the file is away for a moment (a save in progress)
            os.close(ours)
            os.unlink(tmp)
            return self._reread(target, quiet)
        except BaseException:
            os.close(ours)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if not swapped:
            os.close(ours)
            return self._replace_checked(target, tmp, expected, data)
        old_fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)  # what was at the path
        old_state = FileState.of(os.fstat(old_fd))
        if _same_version(old_state, want_state) and read_all(old_fd) == want:
            placed = FileState.of(os.fstat(ours))
            os.close(ours)
            self._keep(target, tmp)
            _fsync_dir(path.parent)
            hold = UNFINISHED_WATCH_S if unfinished else None
            self.guard.watch_replaced(target, old_fd, old_state, want, hold)
            return _Outcome(True, placed, data, None)
        # A person saved between the read and the swap. Their file goes back at once (the
        # same inode: an editor still writing it writes at the path again); then the edit is
        # redone on what is at the path.
        exchange(tmp, path)
        self._after_swap_back(target, tmp, ours)
        theirs, _ = settled_bytes(old_fd, FileState.of(os.fstat(old_fd)), quiet)
        os.close(old_fd)
        # a copy saved from ours meanwhile lacks their lines: the guard adds them back
        self.guard.exposed(target, want, theirs)
        return self._reread(target, quiet)

    def _keep_written(self, rel: str, data: bytes) -> None:
        """A copy of what the write put in place, in the journal (its own inode): an editor
        that truncates and rewrites the path from a stale copy cannot destroy it."""
        try:
            self.journal.add(rel, data, WRITTEN)
        except OSError as exc:
            log.warning("%s: the version written could not be kept in the journal: %s", rel, exc)

    def _keep(self, target: Target, tmp: str) -> None:
        """The replaced file into the journal (the same inode); the write stands either way."""
        try:
            self.journal.keep(target.rel, Path(tmp))
        except OSError as exc:
            log.warning(
                "%s: the replaced version could not be kept in the journal: %s", target.rel, exc
            )
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _after_swap_back(self, target: Target, tmp: str, ours: int) -> None:
        """``tmp`` should hold our file again. If an editor saved in the microseconds ours was
        at the path, its file is the newest of the person's: it goes back to the path (and
        the one the swap back put there goes to the journal)."""
        try:
            back = os.stat(tmp)
        except FileNotFoundError:
            os.close(ours)
            return
        same = back.st_ino == os.fstat(ours).st_ino
        os.close(ours)
        if same:
            os.unlink(tmp)
            return
        with contextlib.suppress(FileNotFoundError):
            exchange(tmp, target.path)
        self._keep(target, tmp)

    def _create(self, target: Target, data: bytes) -> _Outcome:
        """A new file appears whole, and only if nobody created it meanwhile."""
        path = target.path
        tmp = _temp_copy(path, data, _default_mode())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return self._reread(target)
        finally:
            os.unlink(tmp)
        _fsync_dir(path.parent)
        return _Outcome(True, FileState.of(os.stat(path)), data, None)

    def _replace_checked(
        self,
        target: Target,
        tmp: str,
        expected: tuple[bytes | None, FileState | None],
        data: bytes,
    ) -> _Outcome:
        """Without an exchange call: keep the current file in the journal (a hard link), check
        it is what was read, replace. A save in the microseconds between is not seen."""
        old_path = self.journal.new_path(target.rel, "replaced")
        try:
            os.link(target.path, old_path)
        except FileNotFoundError:
            os.unlink(tmp)
            return self._reread(target)
        old_fd = os.open(old_path, os.O_RDONLY | os.O_CLOEXEC)
        old_state = FileState.of(os.fstat(old_fd))
        if not _same_version(old_state, expected[1]) or read_all(old_fd) != expected[0]:
            os.close(old_fd)
            old_path.unlink()
            os.unlink(tmp)
            return self._reread(target)
        os.replace(tmp, target.path)
        _fsync_dir(target.path.parent)
        self.guard.watch_replaced(target, old_fd, old_state, expected[0] or b"")
        return _Outcome(True, FileState.of(os.stat(target.path)), data, None)

    def _reread(self, target: Target, quiet: float = QUIET_S) -> _Outcome:
        read = self._read_settled(target, target.rel, None, quiet)
        return _Outcome(False, read.state, read.data, read.data, read.unfinished)


_UNFINISHED = (
    "%s: another program has been writing it for %.0f s; mdmem wrote on what it holds now and "
    "will merge the rest of that save when it lands (each version is kept: `mdmem recover`)"
)


@dataclass(frozen=True)
class _Read:
    """A file as a write reads it: its bytes and state (None: no such file)."""

    data: bytes | None
    state: FileState | None
    unfinished: bool = False
    """Another process was still writing it when the wait for its save ran out."""


@dataclass(frozen=True)
class _Outcome:
    """What a swap found at the path, and whether the write is in place."""

    clean: bool
    """The path held what was expected: the write is in place."""
    state: FileState | None
    """The path now (our file after a swap, or what was found)."""
    placed: bytes | None
    """The bytes now at the path."""
    theirs: bytes | None
    """When not clean: the person's version, to redo the edit on."""
    unfinished: bool = False
    """When not clean: the person's version was still being written (see :class:`_Read`)."""


def _landed(state: FileState | None) -> float | None:
    """When (on the monotonic clock) this version of the file was saved: its change time."""
    if state is None:
        return None
    age = (time.time_ns() - max(state.mtime_ns, state.ctime_ns)) / 1e9
    return time.monotonic() - max(0.0, age)


def _state_of(path: Path) -> FileState | None:
    try:
        return FileState.of(os.stat(path))
    except FileNotFoundError:
        return None


def _same_version(found: FileState | None, expected: FileState | None) -> bool:
    """The same file, unchanged (a rename changes only its ctime)."""
    if found is None or expected is None:
        return False
    return (found.dev, found.ino, found.size, found.mtime_ns) == (
        expected.dev,
        expected.ino,
        expected.size,
        expected.mtime_ns,
    )


def _mode_of(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return _default_mode()


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader or a crash sees the old or the new file.

    For mdmem's own state files (heartbeat, caches); workspace files go through SafeWriter.
    An error names ``path`` (a full disk fails in ``write``, whose error names no file).
    """
    try:
        tmp = _temp_copy(path, data, _mode_of(path))
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _temp_copy(path: Path, data: bytes, mode: int) -> str:
    """``data`` in a synced temp file beside ``path`` (named so a dead writer's is found)."""
    prefix = f".{path.name}.{os.getpid()}."
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _default_mode() -> int:
    """0o666 less the umask, read without changing it (other threads may create files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


def remove_stale_temps(path: Path) -> None:
    """Delete temp files a killed writer of ``path`` left behind (its process is gone)."""
    for temp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        pid = temp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                temp.unlink()


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data`` atomically, only if it does not exist (False if it does).

    The data is written to a temp file first and hard-linked into place, so the file appears
    whole or not at all, and two creators never both win.
    """
    tmp = _temp_copy(path, data, _default_mode())
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(path.parent)
    return True


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
