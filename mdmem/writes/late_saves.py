"""Saves that land just after a program write, merged instead of lost.

Two kinds of save can miss a program write however carefully the write checks first:

- an editor that opened the file *before* the swap and writes into it afterwards (an in-place
  save: open, truncate, write) writes into the replaced inode, which no path shows any more;
- an editor that read the file before the write and saves a copy afterwards (temp file +
  rename) replaces the program's version with one that lacks it.

For ``write.late_save_ms`` after each write, a background thread watches the replaced inode
(kept open, and kept in the journal) and the path. A save into the old inode is merged into
the current file. A save at the path that lacks the program's recent writes gets them merged
back — the writes it misses, not the ones it already holds (perhaps edited by the person). A
save that kept little of the file (a ``git checkout`` putting another file in its place) is
left as it is. Merges are line merges (:mod:`mdmem.writes.line_merge`) through the same safe
writes. When the process exits, it waits for open windows to close (at most ``late_save_ms``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mdmem.errors import MdmemError
from mdmem.writes.file_state import (
    BOM,
    FileState,
    Target,
    open_for_writing,
    read_all,
    save_in_progress,
    settled_bytes,
)
from mdmem.writes.line_merge import Newer, kept, matching_blocks, merge_text
from mdmem.writes.lineage import Lineage, digest

log = logging.getLogger("mdmem")
CHECKS_S = (0.002, 0.01, 0.03, 0.06, 0.1)
"""When to look after a write (then every 0.1 s, and once more as the window closes)."""
MIN_KEPT = 0.8
"""A save at the path that kept less of the file than this replaced it: not merged into."""
CHAIN_WRITES = 32
"""Earlier writes whose versions a stale save may have been made from."""
CHAIN_BYTES = 16_000_000
MAX_OPEN = 256
"""Replaced files kept open at once; past this, the oldest is checked a last time early."""
_guards: weakref.WeakSet[LateSaveGuard] = weakref.WeakSet()


@dataclass
class _Inode:
    """A replaced file, kept open: an editor that opened it before the swap writes here."""

    target: Target
    fd: int
    state: FileState
    base: bytes
    """Its content when it was replaced (or when a late save was last merged from it)."""
    started: float
    deadline: float
    checks: int = 0
    held: bool = False
    """Replaced while another program was still writing it: watched until that program
    lets go of it (at most the longer ``hold_s``), then for the usual window."""


@dataclass(frozen=True)
class _Write:
    """A program write whose lines a save made from an older copy would drop."""

    before: bytes
    after: bytes
    deadline: float
    digests: tuple[str, str] = field(init=False, repr=False, compare=False)
    """Of ``before`` and ``after``, once: every check of the path looks them up in the
    lineage, and hashing each known version per check kept eight writers' guards busy."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "digests", (digest(self.before), digest(self.after)))


@dataclass
class _PathWatch:
    """One path watched for late saves: the program writes made to it, and the saves exposed."""

    target: Target
    writes: list[_Write] = field(default_factory=list)
    exposed: list[_Write] = field(default_factory=list)
    """A person's save that was off the path for microseconds while a program version stood
    there (``before`` what both were made from, ``after`` theirs): a copy saved from the
    program's version must not drop the person's change."""
    checked: FileState | None = None
    """The path as this process's latest write left it (or as last verified)."""
    started: float = 0.0
    checks: int = 0

    @property
    def deadline(self) -> float:
        return max((w.deadline for w in (*self.writes, *self.exposed)), default=0.0)

    def expire(self, now: float) -> bool:
        """Drop what is past its window; True when nothing is left to watch."""
        self.writes = [w for w in self.writes if w.deadline > now]
        self.exposed = [w for w in self.exposed if w.deadline > now]
        return not (self.writes or self.exposed)


class Rewriter(Protocol):
    """What the guard needs of the writer it guards (:class:`~mdmem.writes.safe_writer.SafeWriter`):
    its per-file lock, its edits with and without taking that lock, and the file's record of
    which versions program writes made."""

    def locked(self, rel: str, display: str) -> contextlib.AbstractContextManager[object]: ...
    def edit(self, target: Target, edit: Callable[[str], str]) -> Any: ...
    def lineage(self, rel: str) -> Lineage: ...
    def edit_locked(self, target: Target, edit: Callable[[str], str]) -> Any: ...
    def known_versions(self, rel: str, wanted: set[str]) -> dict[str, bytes]: ...


class LateSaveGuard:
    def __init__(self, writer: Rewriter, window_s: float) -> None:
        self.writer = writer
        self.window_s = window_s
        self.merged = 0
        """Late saves merged so far (for tests and benchmarks)."""
        self.conflicts = 0
        self._inodes: list[_Inode] = []
        self._paths: dict[str, _PathWatch] = {}
        self._chains: dict[str, list[_Write]] = {}
        self._added: dict[tuple[str, str], set[str]] = {}
        """The lines each known change added (:meth:`_holds`), by the digests of its ends."""
        """Per file, this guard's latest writes (:meth:`_remember`)."""
        self._observed: dict[str, float] = {}
        """Per file, when (monotonic) it was last seen as this guard expected it (after one of
        its writes, or a check): every version at the path before then was seen, and a
        version that differs from it may descend from saves since then that nobody saw."""
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        _guards.add(self)

    # ---- called by the writer, under the file's lock -------------------------------------------

    def watch_replaced(
        self,
        target: Target,
        fd: int,
        state: FileState,
        base: bytes,
        hold_s: float | None = None,
    ) -> None:
        """Keep the replaced file open for the window, or for ``hold_s`` (a save that was
        still being written when it was replaced); takes ownership of ``fd``."""
        window = self.window_s if hold_s is None else max(self.window_s, hold_s)
        if window <= 0:
            os.close(fd)
            return
        now = time.monotonic()
        with self._cond:
            inode = _Inode(target, fd, state, base, now, now + window, held=hold_s is not None)
            self._inodes.append(inode)
            self._start()

    def written(
        self,
        target: Target,
        before: bytes,
        after: bytes,
        state: FileState,
        read_at: float | None = None,
    ) -> None:
        """A write is in place. If it was made on a version that lacks our previous writes (a
        save from an older copy landed between two of them), put those back now. The writes
        whose window was open when the version it was made on was saved (``read_at``, on the
        monotonic clock), or when this guard last saw the path as it expected, whichever is
        earlier, count, though their window may have closed since (a write may wait for a slow
        save; the process may have been stalled while a save landed inside a window and a
        person's copy of that save replaced it after the window)."""
        if self.window_s <= 0:
            return
        now = time.monotonic()
        write = _Write(before, after, now + self.window_s)
        since = now if read_at is None else min(now, read_at)
        with self._cond:
            since = min(since, self._observed.get(target.rel, since))
            self._saw(target.rel, _landed_at(state))
            watch = self._paths.setdefault(target.rel, _PathWatch(target))
            watch.expire(now)
            recent = {id(w): w for w in (*self._chains.get(target.rel, []), *watch.writes)}
            earlier = sorted(
                (w for w in recent.values() if w.deadline > since), key=lambda w: w.deadline
            )
            watch.writes = [*watch.writes, write]
            watch.checked, watch.started, watch.checks = state, now, 0
            self._start()
        found = None
        if earlier and before != earlier[-1].after:
            found = self._made_from(target, earlier, before, made=after)
        with self._cond:
            self._remember(target.rel, write)
        if found is not None:
            base, under = found
            latest, save = earlier[-1].after, before if under is None else under
            newer = self._newer(self._history(target.rel, self._ordered(target.rel, earlier)))
            self._merge(
                target,
                lambda current: self._restore(base, latest, save, current, newer),
                locked=True,
            )

    def _remember(self, rel: str, write: _Write) -> None:
        """Keep this guard's latest writes to ``rel`` (bounded), past their windows: a save
        from a copy made before them may land in the window of a later write, and is merged
        as a change of the version it was made from."""
        chain = [*self._chains.get(rel, []), write][-CHAIN_WRITES:]
        while len(chain) > 1 and sum(len(w.after) for w in chain) > CHAIN_BYTES:
            chain = chain[1:]
        self._chains[rel] = chain

    def exposed(self, target: Target, base: bytes, theirs: bytes) -> None:
        """Our version (an edit of ``base``) was at the path for a moment before the person's
        (``theirs``, their change of ``base``) went back: a copy saved from ours meanwhile
        must get the person's change, merged as a change of ``base``."""
        if self.window_s <= 0:
            return
        now = time.monotonic()
        with self._cond:
            watch = self._paths.setdefault(target.rel, _PathWatch(target))
            watch.exposed.append(_Write(base, theirs, now + self.window_s))
            watch.checked = None  # look at the path at the next check
            watch.started, watch.checks = now, 0
            self._start()

    def wait(self, timeout: float | None = None) -> bool:
        """Until every window is closed (and its saves merged); False on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._inodes or self._paths:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    # ---- the watching thread -----------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="mdmem-late-saves", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._inodes and not self._paths:
                    self._thread = None
                    self._cond.notify_all()
                    return
                now = time.monotonic()
                inodes = [w for w in self._inodes if _due(w.started, w.checks, w.deadline) <= now]
                if len(self._inodes) > MAX_OPEN:
                    inodes += self._inodes[: len(self._inodes) - MAX_OPEN]
                paths = [
                    w for w in self._paths.values() if _due(w.started, w.checks, w.deadline) <= now
                ]
                if not inodes and not paths:
                    due = [_due(w.started, w.checks, w.deadline) for w in self._inodes]
                    due += [_due(w.started, w.checks, w.deadline) for w in self._paths.values()]
                    self._cond.wait(min(due) - now)
                    continue
            for inode in {id(w): w for w in inodes}.values():
                self._guarded(self._check_inode, inode)
            for watch in paths:
                self._guarded(self._check_path, watch)
            with self._cond:
                closing = {id(w) for w in inodes} if len(self._inodes) > MAX_OPEN else set()
                for w in list(self._inodes):
                    if w.deadline <= now or id(w) in closing:
                        self._inodes.remove(w)
                        os.close(w.fd)
                for rel, path_watch in list(self._paths.items()):
                    if path_watch.expire(now):
                        del self._paths[rel]
                self._cond.notify_all()

    def _guarded(self, check: Callable[[Any], None], watch: _Inode | _PathWatch) -> None:
        """One check; whatever it meets (a file gone mid-save), the watching goes on."""
        try:
            check(watch)
        except Exception:  # a crashed thread would stop every other window's watching
            log.warning(
                "late-save check of %s failed; will look again", watch.target.rel, exc_info=True
            )

    def _check_inode(self, watch: _Inode) -> None:

        watch.checks += 1
        if watch.held and open_for_writing(watch.fd) is False:
            watch.held = False  # the writer let go: one more usual window for a last save
            watch.deadline = min(watch.deadline, time.monotonic() + self.window_s)
        try:
            state = FileState.of(os.fstat(watch.fd))
            if (state.size, state.mtime_ns) == (watch.state.size, watch.state.mtime_ns):
                return
            late, state = settled_bytes(watch.fd, state)
        except OSError:
            return
        base = watch.base
        watch.state = state
        if not late.strip() or late == base:
            return  # emptied and left so (a crashed save), or no change at all
        watch.base = late
        watch.deadline = max(watch.deadline, time.monotonic() + self.window_s)
        self._merge(watch.target, lambda current: self._combine(base, current, late))

    def _check_path(self, watch: _PathWatch) -> None:

        watch.checks += 1
        looked = time.monotonic()
        if self._unchanged(watch):
            self._saw(watch.target.rel, looked)
            return
        with self._cond:
            writes, exposed = self._unseen(watch), list(watch.exposed)

        def combine(current: bytes) -> bytes:
            current = self._reapply(watch.target.rel, writes, exposed, current)  # theirs first
            found = self._made_from(watch.target, writes, current)
            if found is None:
                return current
            base, under = found
            if under is None:
                return self._combine(base, writes[-1].after, current)
            newer = self._newer(
                self._history(watch.target.rel, self._ordered(watch.target.rel, writes))
            )
            return self._restore(base, writes[-1].after, under, current, newer)

        # Most changes at the path hold every recent write: a look without the lock says so.
        # A save still being written is looked at again when done (or, at the window's end,
        # merged under the lock: the write waits for that save to finish).
        looked = time.monotonic()
        try:
            fd = os.open(watch.target.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return  # away for a moment (a save by rename): the next check looks again
        try:
            state = FileState.of(os.fstat(fd))
            if not save_in_progress(fd, state):
                current = read_all(fd)
                if combine(current) == current and FileState.of(os.fstat(fd)) == state:
                    watch.checked = state
                    self._saw(watch.target.rel, looked)
                    return
            elif time.monotonic() < watch.deadline:
                return
        except OSError:
            return
        finally:
            os.close(fd)
        # Else merge under the file's lock: never in the middle of one of our own writes.
        with self.writer.locked(watch.target.rel, watch.target.rel):
            if self._unchanged(watch):
                return
            with self._cond:  # the writes made while this check waited for the lock count
                writes[:], exposed[:] = self._unseen(watch), watch.exposed
            merged = self._merge(watch.target, combine, locked=True)
            if merged is not None:
                watch.checked = merged

    def _saw(self, rel: str, at: float) -> None:
        """The path was as this guard expected at ``at`` (monotonic)."""
        self._observed[rel] = max(self._observed.get(rel, at), at)

    def _unseen(self, watch: _PathWatch) -> list[_Write]:
        """The writes (oldest first) a version now at the path must hold: those whose window
        was open after the path was last seen as expected. Saves since then were not seen (the
        process may have been stalled past a window): one of them may have landed inside it,
        and the version now there may be a person's copy of that one, saved later. Called
        under ``_cond``."""
        rel = watch.target.rel
        since = self._observed.get(rel, 0.0)
        pool = {id(w): w for w in (*self._chains.get(rel, []), *watch.writes)}
        return sorted((w for w in pool.values() if w.deadline > since), key=lambda w: w.deadline)

    @staticmethod
    def _unchanged(watch: _PathWatch) -> bool:

        try:
            return FileState.of(os.stat(watch.target.path)) == watch.checked
        except OSError:
            return True

    # ---- merging -------------------------------------------------------------------------------

    def _made_from(
        self,
        target: Target,
        writes: list[_Write],
        version: bytes,
        *,
        made: bytes | None = None,
    ) -> tuple[bytes, bytes | None] | None:
        """The version of ours ``version`` was made from, when it lacks some of the program's
        changes since (``writes``, oldest first, the newest last): the newest of ours that
        program writes alone made it from (another agent's deliberate change), else the one
        just before the first program write it lacks after the last change it holds (a
        person's copy, saved with their changes: :meth:`_copied_from`); None when it lacks
        nothing, or is no copy of ours but another file put in its place (a ``git
        checkout``: it kept little of every one). Line endings aside: a CRLF editor's copy of
        an LF file is still a copy. With it, the person's copy that ``version`` is program
        writes made on, if it is (:meth:`_copied_from`), else None."""
        latest = writes[-1].after if writes else None
        if latest is None or version == latest:
            return None
        ordered = self._ordered(target.rel, writes)
        made_from = self.writer.lineage(target.rel).chain(version)
        made_on_it = [w for w in ordered if w.before == version]
        if self._revisited(target.rel, version, None if made is None else digest(made)) or (
            made_on_it
            and not self._built_on_holder(target.rel, made_from - {digest(version)}, made_on_it[-1])
        ):
            # a copy of a version the path had moved on from, saved again as it was read; or
            # the very bytes one of our writes was made on, rebuilt since from a version that
            # lacked that write (another guard's merge-back of a stale save: by lineage they
            # would descend from that save, and be merged against it)
            if _lf(_merged(version, latest, version)) == _lf(version):
                return None
            return version, None
        ours = [w.after for w in ordered if w.digests[1] in made_from]
        if ours and ours[-1] == latest:
            return None  # other programs' writes on top of ours (the common case: no diff)
        if self._built_on_holder(target.rel, made_from - {digest(version)}, writes[-1]):
            return None
        lines = _text(_lf(version))
        known = [v for w in ordered for v in (w.before, w.after)]
        if not any(
            kept(_text(_lf(k)), lines) >= MIN_KEPT for k in reversed(known)
        ) and not self._in_history(target.rel, ordered, version, made):
            return None
        made_on = made is not None  # the save a write was just made on, not the path now
        found = (
            (ours[-1], None) if ours else self._copied_from(target.rel, ordered, version, made_on)
        )
        if found is None or _lf(found[0]) == _lf(latest):
            return None
        newer = None if found[1] is None else self._newer(self._history(target.rel, ordered))
        if _lf(_layered(*found, latest, version, newer)) == _lf(version):
            return None
        return found

    def _revisited(self, rel: str, version: bytes, ours: str | None = None) -> bool:
        """Whether program writes had gone on from these very bytes since a program last made
        them: the version at the path is then a copy of an older one (a person's buffer saved
        again unchanged), not a program's result (``ours``: the write just made on it, no
        evidence). Its digest alone would have it taken for that older program write, and
        merged as if every write since were on top of it."""
        key = digest(version)
        links = self.writer.lineage(rel).links()
        made = max((i for i, (_, child) in enumerate(links) if child == key), default=-1)
        left = max(
            (i for i, (parent, child) in enumerate(links) if parent == key and child != ours),
            default=-1,
        )
        # made by a program before: a link with no child that landed (a write that failed
        # after logging itself, a full disk) must not turn a person's edit into a copy
        return made >= 0 and left > made

    def _in_history(
        self, rel: str, ordered: list[_Write], version: bytes, made: bytes | None
    ) -> bool:
        """Whether ``version`` is a copy of the path's own history, though far from every one
        of this guard's writes: a program write was made on these very bytes before (not
        ``made``, the one just made on it), or it is near a version the path held (a person's
        copy of their own earlier save, after other agents' writes), not another file put in
        its place."""
        key, just = digest(version), None if made is None else digest(made)
        if any(p == key and c != just for p, c in self.writer.lineage(rel).links()):
            return True
        lines = _text(_lf(version))
        return any(
            kept(_text(_lf(known)), lines) >= MIN_KEPT
            for step in self._history(rel, ordered)
            for known in step[:2]
            # (not the version itself, nor the write just made on it; every file keeps all of
            # an empty one's lines)
            if known.strip() and known not in (version, made)
        )

    def _built_on_holder(self, rel: str, ancestors: set[str], write: _Write) -> bool:
        """Whether program writes alone made the version from one that held ``write``: then
        whatever of it is missing was changed on purpose (another agent's next pool version
        on a merge-back made by another guard, whose version is none of this guard's writes),
        and merging it back would undo that change (a second section for one pool key, a
        superseded entry live again)."""
        if not ancestors:
            return False
        found = {
            d: v
            for w in self._ordered(rel, [write])
            for d, v in zip(w.digests, (w.before, w.after), strict=True)
            if d in ancestors
        }
        if ancestors - found.keys():
            found.update(self.writer.known_versions(rel, ancestors - found.keys()))
        # held: every line it added is there (a merge that leaves the ancestor as it is says
        # nothing: where a person's copy changed the same lines, the person's side wins)
        return any(
            self._holds(write.before, write.after, set(_text(_lf(ancestor)).splitlines()))
            for ancestor in found.values()
        )

    def _copied_from(
        self, rel: str, ordered: list[_Write], version: bytes, made_on: bool = False
    ) -> tuple[bytes, bytes | None] | None:
        """The version a person's copy was made from; and when ``version`` is program writes
        made on that copy (another guard's merge-back of it, or an agent's write on it), the
        copy: what it lacked goes back into it, under those writes (:meth:`_restore`).

        Two readings of the path's history, each right where the other is wrong:

        - by evidence (:meth:`_search`): the history is followed to the last change
          ``version`` holds (lines it added are all there); the copy was made after it and
          before the first program write after it that ``version`` lacks, whose ``before``
          is the answer. Right where a person edits or deletes a line of their own earlier
          save: by lines the version before that save is nearer, and merged against it the
          old line came back (issue 39 D13); and every program write after the copy comes
          back, not only the latest (D1). Wrong where earlier stale saves dropped program
          lines that merge-backs then restored: the history looks as if the copy lacked
          writes it only lacked because the save it was made from lacked them;
        - by lines (:meth:`_nearest`): the known version the copy differs least from (an
          edited line counts once), the newest of equals. Right in that churn, and in D13's
          tie.

        Where the evidence's merge would lose a line a program write added, or bring back a
        line nobody's write asked for (a person's edited or deleted line), the version whose
        merge does least of that wins — losing an acknowledged write counts first — and
        between equals the evidence, then the nearest. Where the evidence finds no write the save
        lacks, it is taken as it is (the person deleted a line a write had just added).

        The history every program write saw or made (:meth:`_history`, all guards and
        processes) is read first, and its answers taken when this guard's latest write came
        after them (the merge is of the changes from it to that write); else this guard's own
        writes, with whatever was saved between two of them."""
        latest = ordered[-1].after
        own: list[tuple[bytes, bytes, bool]] = []
        for write in ordered:
            if own and own[-1][1] != write.before:
                own.append((own[-1][1], write.before, False))  # a save, or another program
            own.append((write.before, write.after, True))
        steps = self._history(rel, ordered)
        evidence, at = self._search(steps, version, made_on)
        if evidence == version and not made_on and not _after(steps, at, latest):
            # the version lacks only what a program write made on it since (that write did
            # not stay: a save put back over it), and this guard's latest write came before
            # it: it was made from what came before it, as the save a write was just made on
            # is. (Where this guard wrote after it, the version is a person's earlier save
            # saved again: merged as it is, it gets every program write since.)
            evidence, at = self._search(steps, version, True)
        under = None
        save = self._save_under(steps, version) if evidence in (None, version) else None
        if save is not None:
            under = steps[save][1]
            # program writes made on a person's save, by another guard or process: the version
            # lacks what that save lacked, and the save was made from what it was read from
            # before it was first saved (writes made on it that it was saved over since count
            # as writes it lacks, not as what it was made from)
            evidence, at = self._search(steps[: save + 1], under, True)
        for _ in range(CHAIN_WRITES):
            # made from a person's earlier save that came after this guard's latest write (so
            # lacked it): made, as far as the merge goes, from what that save was made from
            # (merged against the save itself, the changes since it read as the program's: a
            # line the person edited in the copy came back beside its edit)
            if evidence is None or _after(steps, at, latest):
                break
            saved = [i for i, s in enumerate(steps) if s[1] == evidence and not s[2]]
            if saved:
                evidence, at = self._search(steps[: saved[0] + 1], evidence, True)
                continue
            # or from another agent's writes on such a save: what the save lacked goes into
            # it, under those writes (as for a version that is such writes itself)
            below = self._save_under(steps, evidence) if under is None else None
            if below is None:
                break
            under = steps[below][1]
            evidence, at = self._search(steps[: below + 1], under, True)
        if evidence is None or not _after(steps, at, latest):
            steps, under = own, None
            evidence = self._search(own, version, made_on)[0]
        if evidence is None:
            return None  # the history shows no write the save lacks: a person's own change
        added = self._program_lines(steps, latest, version)
        theirs = set(_text(_lf(version)).splitlines())
        newer = self._newer(steps)

        def harm(base: bytes) -> tuple[int, int]:
            """(program lines the merge on ``base`` loses, other lines it brings back)."""
            text = _text(_lf(version))
            if under is not None:
                text = _text(_layered(base, under, latest, version, newer))
            else:
                merged = merge_text(_text(_lf(base)), _text(_lf(latest)), text)
                text = text if merged.conflicts else merged.text  # as _combine does
            lines = set(text.splitlines())
            return len(added - lines), len(lines - theirs - added)

        if harm(evidence) == (0, 0):
            return evidence, under
        candidates = [evidence, *self._nearest(steps, version)]
        if under is not None:  # and what the save itself is nearest to (it is the copy)
            candidates += [c for c in self._nearest(steps, under) if c not in candidates]
        best = min(candidates, key=lambda known: (*harm(known), candidates.index(known)))
        return best, under

    def _search(
        self, steps: list[tuple[bytes, bytes, bool]], version: bytes, made_on: bool = False
    ) -> tuple[bytes | None, int]:
        """:meth:`_copied_from` in ``steps`` (before, after, a program write), oldest first:
        the answer and the index of its step. ``made_on``: ``version`` is the save a program
        write was just made on (that write is the history's last step), not what is at the
        path now."""
        if made_on:
            # the save itself is in the history, its descendants after it: it was made from
            # what came before it
            saved = max(
                (i for i, s in enumerate(steps) if s[1] == version and not s[2]), default=None
            )
            if saved is not None:
                steps = steps[:saved]
        # the same bytes at the path before (a program write's result, or a save of the person's
        # that program writes then went on from): a copy of that version, saved again as it was
        # read, lacking what came after it. Bytes made twice (a merge-back that rebuilt an
        # earlier version) count from their first time: what came between is what a stale
        # save took away, not what anyone meant to undo
        copy_of = min((i for i, s in enumerate(steps) if s[1] == version), default=None)
        have = set(_text(_lf(version)).splitlines())
        held = max(
            (
                i
                for i, (before, after, _) in enumerate(steps)
                # a step that made these very bytes holds itself: no evidence of what they lack
                if after != version and self._holds(before, after, have)
            ),
            default=-1,
        )
        if copy_of is not None:
            held = max(held, copy_of)
        for i, (before, after, program) in enumerate(steps[held + 1 :], start=held + 1):
            if program and _lf(_merged(before, after, version)) != _lf(version):
                return before, i
        return None, -1

    @staticmethod
    def _save_under(steps: list[tuple[bytes, bytes, bool]], version: bytes) -> int | None:
        """Where in ``steps`` the person's save that the program writes ending in ``version``
        were made on was first saved, when ``version`` is such a write's result (the last time
        it was made); None when it is no program write's, or program writes alone made it."""
        at = max((i for i, step in enumerate(steps) if step[1] == version), default=None)
        if at is None or not steps[at][2]:
            return None
        while at > 0 and steps[at][2]:
            at -= 1
        if steps[at][2]:
            return None
        save = steps[at][1]
        return min(i for i, step in enumerate(steps) if step[1] == save and not step[2])

    @staticmethod
    def _nearest(
        steps: list[tuple[bytes, bytes, bool]], version: bytes, count: int = 8
    ) -> list[bytes]:
        """The ``count`` versions in ``steps`` that ``version`` differs least from, by lines (a
        run of changed lines counts as the longer of its two sides), nearest first and the
        newest of equals first; only versions from before ``version`` itself appears (it was
        not made from its descendants)."""
        first = next((i for i, step in enumerate(steps) if step[1] == version), len(steps))
        order: dict[bytes, int] = {}
        for i, (before, after, _) in enumerate(steps[:first]):
            order[before], order[after] = 2 * i, 2 * i + 1
        order.pop(version, None)
        theirs = _text(_lf(version)).splitlines()

        def distance(known: bytes) -> int:
            ours = _text(_lf(known)).splitlines()
            total, i, j = 0, 0, 0
            for a, b, size in matching_blocks(ours, theirs):
                total += max(a - i, b - j)
                i, j = a + size, b + size
            return total

        return sorted(order, key=lambda known: (distance(known), -order[known]))[:count]

    def _program_lines(
        self, steps: list[tuple[bytes, bytes, bool]], latest: bytes, version: bytes
    ) -> set[str]:
        """The lines program writes in ``steps`` added and none removed since (not a person's),
        that ``latest`` or ``version`` holds: a merge that drops one loses a write (one that
        ``version`` holds may be another guard's merge-back, and none of this guard's)."""
        have = set(_text(_lf(latest)).splitlines()) | set(_text(_lf(version)).splitlines())
        live: set[str] = set()
        for before, after, program in steps:
            if program:
                live -= self._added_lines(after, before)  # the lines it removed
                live |= self._added_lines(before, after)
        return live & have

    def _history(self, rel: str, ordered: list[_Write]) -> list[tuple[bytes, bytes, bool]]:
        """The path's history as every program write saw or made it (before, after, a program
        write), oldest first: the shared lineage log gives the order of all program writes,
        of every guard and process; the bytes come from this guard's writes and the journal.
        Between two program writes, whatever was saved there (a person's save, which a
        merge-back then built on) is a step too. A person who saves the same buffer twice
        made the second from their first save: one guard's own writes alone miss it when
        another guard merged its writes back into that save (the second save then read as
        a change of a version holding writes the person never saw: each a line deleted)."""
        links = self.writer.lineage(rel).links()[-4 * CHAIN_WRITES :]
        known: dict[str, bytes] = {}
        for write in ordered:
            known[write.digests[0]], known[write.digests[1]] = write.before, write.after
        wanted = {d for link in links for d in link if d is not None} - known.keys()
        if wanted:
            known.update(self.writer.known_versions(rel, wanted))
        steps: list[tuple[bytes, bytes, bool]] = []
        for parent, child in links:
            if parent is None or parent not in known or child not in known or parent == child:
                continue  # a write whose bytes are gone (or that never landed)
            before, after = known[parent], known[child]
            if steps and steps[-1][1] != before:
                steps.append((steps[-1][1], before, False))  # a save, or an unknown write
            steps.append((before, after, True))
        return steps

    def _holds(self, before: bytes, after: bytes, have: set[str]) -> bool:
        """Whether a version with the lines ``have`` holds the change ``before`` -> ``after``:
        it added lines (not blank), and all are there. A change that only removed lines is
        no evidence (an older copy lacks them too)."""
        added = self._added_lines(before, after)
        return bool(added) and added <= have

    def _added_lines(self, before: bytes, after: bytes) -> set[str]:
        """The non-blank lines the change ``before`` -> ``after`` added (cached by digests)."""
        key = (digest(before), digest(after))
        added = self._added.get(key)
        if added is None:
            old, new = _text(_lf(before)).splitlines(), _text(_lf(after)).splitlines()
            added, i = set(), 0
            for _, a, size in matching_blocks(old, new):
                added.update(line for line in new[i:a] if line.strip())
                i = a + size
            if len(self._added) > 4 * CHAIN_WRITES:
                self._added.clear()
            self._added[key] = added
        return added

    def _ordered(self, rel: str, writes: list[_Write]) -> list[_Write]:
        """This guard's latest writes to ``rel`` and ``writes``, oldest first, each once."""
        with self._cond:
            chain = list(self._chains.get(rel, []))
        return sorted({id(w): w for w in (*chain, *writes)}.values(), key=lambda w: w.deadline)

    def _reapply(
        self, rel: str, writes: list[_Write], exposed: list[_Write], current: bytes
    ) -> bytes:
        """The person's saves a swap found (``exposed``, oldest first) applied to ``current``
        (a copy saved from ours in the moment ours was at the path lacks them), except one
        whose change would take away lines program writes made: that save was a stale copy,
        not a person's edit of what our write read, and what it lacked is no one's deletion."""
        if not exposed:
            return current
        steps = self._history(rel, self._ordered(rel, writes))
        for write in exposed:
            merged = self._combine(write.before, write.after, current, copy=True)
            lines = set(_text(_lf(merged)).splitlines())
            if not self._program_lines(steps, current, current) - lines:
                current = merged
        return current

    def _restore(
        self, base: bytes, latest: bytes, save: bytes, current: bytes, newer: Newer
    ) -> bytes:
        """A program write was made on a person's ``save`` (``current`` is the file now) that
        lacked the program's changes ``base`` -> ``latest``: those go back into the save (the
        person's lines win where both changed the same ones), and under the writes made on it.
        Where those changed the same lines, no person made either: the newer program line
        wins (``newer``). Two agents updating one entry, one on a stale save lacking the
        other's update, and a second stale save that both guards merged back into: the first
        guard's merge-back of the older update must not outrank the newer one."""
        restored = self._combine(base, latest, save)
        return self._combine(save, restored, current, warn=False, newer=newer)

    def _newer(self, steps: list[tuple[bytes, bytes, bool]]) -> Newer:
        """Whether some lines are newer program lines than others, by the ``steps`` (the
        path's history, oldest first) in which a program write first added each: a line a
        merge-back restored keeps the age of the write that first made it."""
        ages: dict[str, int] = {}
        for i, (before, after, program) in enumerate(steps):
            if program:
                for line in self._added_lines(before, after):
                    ages.setdefault(line, i)

        def age(lines: Sequence[str]) -> list[int | None]:
            return [ages.get(line.rstrip("\r\n")) for line in lines if line.strip()]

        def newer(mine: Sequence[str], theirs: Sequence[str]) -> bool:
            ours, others = age(mine), age(theirs)
            if not ours or not others or None in ours or None in others:
                return False  # a person's line (or a deletion) is never outranked
            return min(a for a in ours if a is not None) > max(a for a in others if a is not None)

        return newer

    def _combine(
        self,
        base: bytes,
        program: bytes,
        person: bytes,
        *,
        copy: bool = False,
        warn: bool = True,
        newer: Newer | None = None,
    ) -> bytes:
        """``program``'s changes since ``base`` applied to ``person``'s version (theirs win
        where both changed the same lines; the program's version stays in the journal).

        With ``copy``, ``person`` is a save found at the path, made from an older version: a
        write that conflicts with it is not applied in part (the person's version stands).
        When the sides' line endings differ (a CRLF editor, an LF program), the lines are
        compared without them, and the result has the person's. ``warn``: False when the
        "person" is a program write too (the newer one wins; no person to tell).
        """
        crlf = _crlf(person)
        if crlf == _crlf(base) == _crlf(program):
            merged = merge_text(_text(base), _text(program), _text(person), newer=newer)
            text = merged.text.encode("utf-8", errors="surrogateescape")
        else:
            merged = merge_text(
                _text(_lf(base)), _text(_lf(program)), _text(_lf(person)), newer=newer
            )
            text = merged.text.encode("utf-8", errors="surrogateescape")
            if text == _lf(person):
                text = person
            elif crlf:
                text = text.replace(b"\n", b"\r\n")
        if copy and merged.conflicts:
            return person
        if merged.conflicts and warn:
            self.conflicts += merged.conflicts
            log.warning(
                "a person's save and a program write changed the same lines; the person's "
                "version was kept (the program's is in the journal: `mdmem recover`)"
            )
        return text

    def _merge(
        self, target: Target, combine: Callable[[bytes], bytes], *, locked: bool = False
    ) -> FileState | None:
        """Write ``combine(current)`` through the safe writes; the path's state after."""

        changed: list[bool] = []

        def edit(text: str) -> str:
            current = text.encode("utf-8", errors="surrogateescape")
            merged = combine(current).removeprefix(BOM)
            changed.append(merged != current)
            return merged.decode("utf-8", errors="surrogateescape")

        try:
            if locked:
                self.writer.edit_locked(target, edit)
            else:
                self.writer.edit(target, edit)
            state = FileState.of(os.stat(target.path))
        except (MdmemError, OSError, UnicodeError) as exc:
            log.warning(
                "%s: a late save could not be merged (%s); see `mdmem recover`", target.rel, exc
            )
            return None
        if changed and changed[-1]:
            self.merged += 1
            log.info("%s: merged a save that landed around a program write", target.rel)
        return state


def _merged(base: bytes, program: bytes, person: bytes, newer: Newer | None = None) -> bytes:
    """The merge, line endings aside (LF)."""
    text = merge_text(_text(_lf(base)), _text(_lf(program)), _text(_lf(person)), newer=newer).text
    return text.encode("utf-8", errors="surrogateescape")


def _layered(
    base: bytes, under: bytes | None, latest: bytes, version: bytes, newer: Newer | None = None
) -> bytes:
    """What the merge of ``version`` gives (LF): the changes ``base`` -> ``latest`` in it; when
    ``version`` is program writes made on a person's copy ``under``, in that copy, under those
    writes (as :meth:`LateSaveGuard._restore` merges)."""
    if under is None:
        return _merged(base, latest, version)
    return _merged(under, _merged(base, latest, under), version, newer)


def _after(steps: list[tuple[bytes, bytes, bool]], at: int, latest: bytes) -> bool:
    """Whether a program write at ``at`` in ``steps`` or after it made ``latest``."""
    return any(program and after == latest for _, after, program in steps[at:])


def _lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


def _crlf(data: bytes) -> bool:
    """Whether most lines end CRLF (a Windows editor's, or git's autocrlf)."""
    crlf = data.count(b"\r\n")
    return bool(crlf) and crlf * 2 >= data.count(b"\n")


def _landed_at(state: FileState) -> float:
    """When (monotonic) this version reached the path: its change time (a coarse clock: a few
    ms early at most, which only counts a window as open a little longer)."""
    age = (time.time_ns() - max(state.mtime_ns, state.ctime_ns)) / 1e9
    return time.monotonic() - max(0.0, age)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _due(started: float, checks: int, deadline: float) -> float:
    if checks < len(CHECKS_S):
        return min(started + CHECKS_S[checks], deadline)
    return min(started + CHECKS_S[-1] + 0.1 * (checks - len(CHECKS_S) + 1), deadline)


@atexit.register
def _wait_for_windows() -> None:
    """A short-lived process (``mdmem remember``) keeps its windows open until they close."""
    for guard in list(_guards):
        with contextlib.suppress(Exception):
            guard.wait(timeout=guard.window_s + 2.0)
