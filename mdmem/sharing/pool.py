"""The shared pool: keyed values every agent of a workspace reads and writes, with versions.

Each pool is one Markdown file, ``shared/<pool>.md`` (its format: :mod:`pool_format`).
Every write goes through the safe writes (the file's lock, compare-and-swap, the journal); the
version check runs inside the edit, under that lock, so two processes can never both write
version N+1. A write with ``expected_version`` is optimistic: it raises VersionConflict when
the key moved on, or when a person edited the entry by hand since it was written (or read).

The file is not the only record of what was acknowledged: a person's editor may save a copy
read before the latest writes, at any time, which shows older versions (issue 39 D2: a read
returned version 1 after version 2 was acknowledged, and version 2 was acknowledged twice).
Each write also records the section it acknowledged, under the same lock, in
``.mdmem/pools/<pool>.json`` (:class:`Acknowledged`); every write and read puts back what a
file shows older than that record before it checks a version or answers, so a version never
goes back and the compare-and-set is against what was truly acknowledged.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdmem.config import check_name
from mdmem.errors import FileProblem, VersionConflict
from mdmem.layout import STATE_DIR, private_dir
from mdmem.memory import pool_format as fmt
from mdmem.memory.documents import Documents
from mdmem.memory.writers import Writer
from mdmem.redact import Redactor
from mdmem.writes.safe_writer import atomic_write, read_markdown

if TYPE_CHECKING:
    from mdmem.sharing.file_watch import FileWatch

log = logging.getLogger("mdmem")
POOL_DIR = "shared"
DEFAULT_POOL = "default"
JSON = Any

Callback = Callable[["PoolEntry"], object]


@dataclass(frozen=True)
class PoolEntry:
    """One key of a pool as it is on disk."""

    pool: str
    key: str
    content: JSON
    """Text (``str``) or a structured JSON value, exactly as written."""
    version: int
    """1 for a new key, +1 each write; 0 for a section a person added without metadata."""
    created_by: str | None
    updated_by: str | None
    created_at: str | None
    updated_at: str | None
    metadata: Mapping[str, JSON] = field(compare=False)
    path: str = ""
    line: int = 0
    """1-based line of the key's heading."""
    hash: str = ""
    """Hash of the entry's text as read: pass the entry as ``expected_version`` to make a write
    conditional on exactly what was read."""
    edited: bool = False
    """A person changed the entry since the program last wrote it."""
    archived: bool = False
    deleted_at: str | None = None
    deleted_by: str | None = None
    redacted: int = field(default=0, compare=False)
    """Secrets masked in the content of the write that returned this entry."""
    skipped: tuple[int, ...] = field(default=(), compare=False)
    """For an event of :meth:`Pool.watch`: the versions written since the watch last saw the
    key that no event reports (events coalesce: the file keeps only the latest version, and a
    watch reads it once writes settle). A write through this object while a watch runs names
    those of others it wrote over; otherwise empty."""

    @property
    def citation(self) -> str:
        return f"{self.path}:{self.line}"

    def to_dict(self) -> dict[str, object]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["metadata"] = dict(self.metadata)
        out["citation"] = self.citation
        return out


class Pool:
    """``ws.sharing.pool(name)``: one shared pool. Reads are lock-free; writes are the safe writes.

    ``on_write`` / ``on_delete`` callbacks run after each write or delete made through this
    object; with :meth:`watch` running, also for changes anyone else made (other processes,
    hand edits). A callback that raises is logged, never undoes the write.
    """

    def __init__(
        self,
        name: str,
        documents: Documents,
        files: Callable[[], Writer],
        redactor: Callable[[], Redactor],
        agent: Callable[[], str],
    ) -> None:
        self.name = check_name(name, "pool")
        self.path = f"{POOL_DIR}/{self.name}.md"
        self._documents = documents
        self._files = files
        self._redactor = redactor
        self._agent = agent
        self._on_write: list[Callback] = []
        self._on_delete: list[Callback] = []
        self._lock = threading.RLock()
        self._seen: dict[str, PoolEntry] | None = None
        self._watch: FileWatch | None = None
        self._last: fmt.PoolFile | None = None
        """The last version of the file parsed: a write right after a read (the optimistic
        loop) finds the same text under the lock and parses nothing there."""
        self._acked = Acknowledged(documents.root / STATE_DIR / "pools" / f"{self.name}.json")

    def __repr__(self) -> str:
        return f"Pool({self.name!r}, {self.path!r})"

    # ---- reading --------------------------------------------------------------------------

    def read(self, key: str) -> PoolEntry | None:
        """The entry for ``key``, or None. FileProblem (file and line) if its JSON is broken."""
        key = fmt.check_key(key)
        pool = self._file()
        section = fmt.find(pool, key) if pool is not None else None
        return None if section is None else self._entry(section)

    def list(self, prefix: str = "", limit: int | None = None) -> list[PoolEntry]:
        """Entries whose key starts with ``prefix``, newest first (by ``updated_at``). An entry
        whose JSON a person broke is left out, with a warning naming its file and line."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        pool = self._file()
        if pool is None:
            return []
        entries = []
        for section in pool.live:
            if section.key.startswith(prefix):
                try:
                    entries.append(self._entry(section))
                except FileProblem as exc:
                    log.warning("pool %s: skipped %s", self.name, exc)
        entries.sort(key=lambda e: (e.updated_at or e.created_at or "", e.line), reverse=True)
        return entries if limit is None else entries[:limit]

    def history(self, key: str) -> builtins.list[PoolEntry]:  # list: the method above
        """Deleted versions of ``key`` kept in the file's ``## Archive``, newest first."""
        key = fmt.check_key(key)
        pool = self._file()
        archived = [s for s in pool.archived if s.key == key] if pool is not None else []
        return [self._entry(s) for s in reversed(archived)]

    def _file(self) -> fmt.PoolFile | None:
        """The file as it is now (None when missing); FileProblem when it cannot be read."""
        _, absolute = self._documents.resolve(self.path)
        if not absolute.exists():
            return None
        _, text = read_markdown(absolute, self.path, self._documents.max_file_bytes)
        pool = self._parse(text)
        if self._behind(pool):  # a stale copy saved over acknowledged versions: put them back
            with self._lock:
                text = self._files().write(self.path, lambda t: self._healed(self._parse(t)).text)
            pool = self._parse(text)
        return pool

    def _behind(self, pool: fmt.PoolFile) -> bool:
        """Whether the file shows a key older than its acknowledged version (or live again
        after its delete was acknowledged)."""
        for key, record in self._acked.load().items():
            live = fmt.find(pool, key)
            if record.archived:
                if live is not None and live.version <= record.version:
                    return True
            elif live is None or live.version < record.version:
                return True
        return False

    def _healed(self, pool: fmt.PoolFile) -> fmt.PoolFile:
        """``pool`` with every key the file shows older than acknowledged put back as it was
        acknowledged (a delete: archived again). The person's other lines stay; a section of
        theirs that is replaced (a hand edit of an older version) is in the journal, as the
        version this write replaced, and a warning says so."""
        for key, record in self._acked.load().items():
            live = fmt.find(pool, key)
            block = record.block.replace("\n", pool.newline)
            if record.archived:
                if live is None or live.version > record.version:
                    continue
                kept = any(s.key == key and s.version == record.version for s in pool.archived)
                if kept:
                    text = fmt.drop_section(pool, live)
                else:
                    text = fmt.archive_section(pool, live, block)
            elif live is None or live.version < record.version:
                if live is not None and live.edited:
                    log.warning(
                        "%s: %r was saved from an older copy (version %d, edited by hand); "
                        "version %d was acknowledged and stays (the saved text is in the "
                        "journal: `mdmem recover %s`)",
                        self.path,
                        key,
                        live.version,
                        record.version,
                        self.path,
                    )
                text = fmt.put_section(pool, key, block)[0]
            else:
                continue
            pool = self._parse(text)
        return pool

    def _acknowledge(self, key: str, *, archived: bool) -> Callable[[str], None]:
        """What runs once a write of ``key`` is on disk, under the file's lock: the section
        written becomes the acknowledged one."""

        def record(text: str) -> None:
            pool = self._parse(text)
            sections = [s for s in (pool.archived if archived else pool.live) if s.key == key]
            if not sections:
                return
            section = sections[-1]
            level = fmt.ARCHIVED_LEVEL if archived else fmt.SECTION_LEVEL
            block = fmt.render_section(key, section.meta, section.body, "\n", level)
            self._acked.record(key, Record(section.version, block, archived))

        return record

    def _parse(self, text: str) -> fmt.PoolFile:
        last = self._last
        if last is not None and last.text == text:
            return last
        self._last = fmt.parse_pool(self.path, text)
        return self._last

    def _entry(self, section: fmt.Section) -> PoolEntry:
        meta = section.meta
        return PoolEntry(
            pool=self.name,
            key=section.key,
            content=fmt.decode(section.body, self.path, section.body_line),
            version=section.version,
            created_by=meta.get("created_by"),
            updated_by=meta.get("updated_by"),
            created_at=meta.get("created_at"),
            updated_at=meta.get("updated_at"),
            metadata=_load_metadata(meta.get("metadata"), self.path, section.line + 1),
            path=self.path,
            line=section.line,
            hash=section.hash,
            edited=section.edited,
            archived=section.archived,
            deleted_at=meta.get("deleted_at"),
            deleted_by=meta.get("deleted_by"),
        )

    # ---- writing --------------------------------------------------------------------------

    def write(
        self,
        key: str,
        content: JSON,
        writer: str | None = None,
        expected_version: int | PoolEntry | None = None,
        metadata: Mapping[str, JSON] | None = None,
    ) -> PoolEntry:
        """Set ``key`` to ``content`` (text, or a JSON value: dict, list, number, bool, None).

        Last writer wins, unless ``expected_version`` is given: then the write happens only if
        the key is at that version (0: the key must not exist) and nobody edited it by hand,
        else VersionConflict(key, expected, actual) and nothing is written. Pass the PoolEntry
        you read instead of its version to accept a hand edit made before you read it.
        ``metadata`` is merged into the entry's. Secrets in the content are masked first.
        """
        key = fmt.check_key(key)
        who = check_name(writer or self._agent(), "writer")
        _check_expected(expected_version)
        fmt.check_json(content)
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise ValueError(f"metadata is a mapping, not {type(metadata).__name__}")
            fmt.check_json(dict(metadata), "metadata")
        redactor = self._redactor()
        content, masked = _masked(content, redactor)
        body = fmt.encode(content)
        if (found := redactor.redact(body)).count:  # a secret only its JSON form shows
            content = _read_masked(found.text, fmt.decode)
            body = fmt.encode(content)
            masked += found.count
        extra = _masked(dict(metadata or {}), redactor)[0]
        if (found := redactor.redact(json.dumps(extra))).count:
            extra = _read_masked(found.text, json.loads)
        stamp = _now()

        def edit(text: str) -> str:
            pool = self._healed(self._parse(text if text.strip() else fmt.header(self.name)))
            found = fmt.find(pool, key)
            self._check(key, found, expected_version)
            if found is None:
                version = 1 + max((s.version for s in pool.archived if s.key == key), default=0)
                created: dict[str, str | None] = {"created_by": who, "created_at": stamp}
                merged = extra
            else:
                version = found.version + 1
                created = {
                    "created_by": found.meta.get("created_by"),
                    "created_at": found.meta.get("created_at"),
                }
                merged = {**_load_metadata(found.meta.get("metadata"), self.path), **extra}
            meta = {
                "version": version,
                **created,
                "updated_by": who,
                "updated_at": stamp,
                "hash": fmt.body_hash(body),
                "metadata": _dump_metadata(merged),
            }
            block = fmt.render_section(key, meta, body, pool.newline, fmt.SECTION_LEVEL)
            new_text, line = fmt.put_section(pool, key, block)
            self._reads_back(new_text, key, body, line, archived=False)
            return new_text

        with self._lock:
            text = self._files().write(
                self.path, edit, committed=self._acknowledge(key, archived=False)
            )
            entry = self._written(text, key, archived=False)
        self._fire(self._on_write, entry)
        return replace(entry, redacted=masked)

    def delete(
        self,
        key: str,
        writer: str | None = None,
        expected_version: int | PoolEntry | None = None,
    ) -> PoolEntry:
        """Move ``key`` to the file's ``## Archive`` (nothing is lost: :meth:`history` reads it
        back; a new write of the key goes on from its last version). KeyError if absent."""
        key = fmt.check_key(key)
        who = check_name(writer or self._agent(), "writer")
        _check_expected(expected_version)
        stamp = _now()

        def edit(text: str) -> str:
            pool = self._healed(self._parse(text))
            found = fmt.find(pool, key)
            if found is None:
                raise KeyError(f"no key {key!r} in {self.path}")
            self._check(key, found, expected_version)
            meta = {**found.meta, "deleted_at": stamp, "deleted_by": who}
            block = fmt.render_section(key, meta, found.body, pool.newline, fmt.ARCHIVED_LEVEL)
            new_text = fmt.archive_section(pool, found, block)
            self._reads_back(new_text, key, found.body, found.line, archived=True)
            return new_text

        if not (self._documents.root / self.path).exists():
            raise KeyError(f"no key {key!r} in {self.path}")
        with self._lock:
            text = self._files().write(
                self.path, edit, create=False, committed=self._acknowledge(key, archived=True)
            )
            entry = self._written(text, key, archived=True)
        self._fire(self._on_delete, entry)
        return entry

    def _check(self, key: str, found: fmt.Section | None, expected: int | PoolEntry | None) -> None:
        """The optimistic check, run under the file's lock on the text about to be edited."""
        if expected is None:
            return
        want = expected.version if isinstance(expected, PoolEntry) else expected
        actual = found.version if found is not None else 0
        if actual != want:
            raise VersionConflict(key, want, actual, self.path)
        if found is None:
            return
        seen = expected.hash if isinstance(expected, PoolEntry) else found.meta.get("hash")
        if found.hash != seen:
            raise VersionConflict(key, want, "edited by hand", self.path)

    def _reads_back(self, text: str, key: str, body: str, line: int, *, archived: bool) -> None:
        """The edited file must read back with the entry where it was put: a block a person
        left open above it (an unclosed fence) would swallow it. Parsed once: the next read
        or write of this version finds the parse cached."""
        after = self._parse(text)
        live = fmt.find(after, key)
        gone = [s for s in after.archived if s.key == key] if archived else []
        placed = (gone[-1] if gone else None) if archived else live
        if placed is None or placed.body != body or (archived and live is not None):
            raise FileProblem(
                self.path,
                f"the entry {key!r} would not read back where it goes (line {line}): a block "
                "above it is left open (an unclosed ``` fence or HTML comment?); nothing was "
                "written",
                line,
            )

    def _written(self, text: str, key: str, *, archived: bool) -> PoolEntry:
        """The entry as the write left it on disk; the watch's view moves on with it."""
        pool = self._parse(text)
        sections = [s for s in (pool.archived if archived else pool.live) if s.key == key]
        entry = self._entry(sections[-1])
        if self._seen is not None:
            if archived:
                self._seen.pop(key, None)
            else:
                last = self._seen[key].version if key in self._seen else _last(pool, key)
                entry = replace(entry, skipped=tuple(range(last + 1, entry.version)))
                self._seen[key] = entry
        return entry

    # ---- events ---------------------------------------------------------------------------

    def on_write(self, fn: Callback) -> Callback:
        """Call ``fn(entry)`` after each write (usable as a decorator)."""
        self._on_write.append(fn)
        return fn

    def on_delete(self, fn: Callback) -> Callback:
        """Call ``fn(entry)`` (the archived entry) after each delete."""
        self._on_delete.append(fn)
        return fn

    def _fire(self, callbacks: builtins.list[Callback], entry: PoolEntry) -> None:
        for fn in list(callbacks):
            try:
                fn(entry)
            except Exception:
                log.exception("pool %s: a callback failed on %r", self.name, entry.key)

    def watch(self, debounce: float = 0.05) -> FileWatch:
        """Report changes anyone else makes to this pool (other processes, hand edits) to the
        callbacks, until the returned watch is stopped (``with pool.watch(): ...``).

        Events coalesce: the file holds each key's latest version only, so writes that land
        before the watch reads the file are one event, the latest, whose ``skipped`` names
        the versions written in between."""
        from mdmem.sharing.file_watch import FileWatch

        with self._lock:
            if self._watch is not None:
                self._watch.stop()
            self._seen = self._snapshot()
            absolute = self._documents.root / self.path
            self._watch = FileWatch(absolute, self._changed, debounce).start()
            return self._watch

    def _snapshot(self) -> dict[str, PoolEntry]:
        return {e.key: e for e in self.list()}

    def _changed(self) -> None:
        with self._lock:
            if self._seen is None:
                return
            try:
                now = self._snapshot()
                pool = self._file()
            except FileProblem as exc:
                log.warning("pool %s: %s", self.name, exc)
                return
            before, self._seen = self._seen, now
        written = [
            e
            for k, e in now.items()
            if k not in before or (before[k].version, before[k].hash) != (e.version, e.hash)
        ]
        archived = {s.key: s for s in pool.archived} if pool is not None else {}
        for entry in sorted(written, key=lambda e: e.line):
            seen = before[entry.key].version if entry.key in before else _last(pool, entry.key)
            self._fire(
                self._on_write, replace(entry, skipped=tuple(range(seen + 1, entry.version)))
            )
        for key in before.keys() - now.keys():
            gone = archived.get(key)
            self._fire(self._on_delete, self._entry(gone) if gone else before[key])

    # ---- async twins ----------------------------------------------------------------------

    async def aread(self, key: str) -> PoolEntry | None:
        import asyncio  # (only async callers pay for it)

        return await asyncio.to_thread(self.read, key)

    async def alist(self, prefix: str = "", limit: int | None = None) -> builtins.list[PoolEntry]:
        import asyncio  # (only async callers pay for it)

        return await asyncio.to_thread(self.list, prefix, limit)

    async def awrite(
        self,
        key: str,
        content: JSON,
        writer: str | None = None,
        expected_version: int | PoolEntry | None = None,
        metadata: Mapping[str, JSON] | None = None,
    ) -> PoolEntry:
        import asyncio  # (only async callers pay for it)

        return await asyncio.to_thread(self.write, key, content, writer, expected_version, metadata)

    async def adelete(
        self,
        key: str,
        writer: str | None = None,
        expected_version: int | PoolEntry | None = None,
    ) -> PoolEntry:
        import asyncio  # (only async callers pay for it)

        return await asyncio.to_thread(self.delete, key, writer, expected_version)


@dataclass(frozen=True)
class Record:
    """One key as its last write acknowledged it."""

    version: int
    block: str
    """The section written (LF line endings)."""
    archived: bool


class Acknowledged:
    """What the writes of one pool acknowledged, per key: ``.mdmem/pools/<pool>.json``,
    rewritten (atomically) under the pool file's lock by each write once it is on disk, and
    read by every read and write (cached while the file is unchanged). Local to this
    workspace folder, like the journal: a clone has its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[tuple[int, int], dict[str, Record]] | None = None

    def load(self) -> dict[str, Record]:
        try:
            st = self.path.stat()
        except OSError:
            return {}
        stamp = (st.st_mtime_ns, st.st_size)
        if self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            records = {
                k: Record(int(v["version"]), str(v["block"]), bool(v["archived"]))
                for k, v in raw.items()
            }
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            log.warning("%s is unreadable; the pool's versions are taken from its file", self.path)
            return {}
        self._cache = (stamp, records)
        return records

    def record(self, key: str, record: Record) -> None:
        """Under the pool file's lock: ``key`` is now at ``record``."""
        records = dict(self.load())
        old = records.get(key)
        if old is not None and (old.version, old.archived) > (record.version, record.archived):
            return  # never back
        records[key] = record
        data = {k: {"version": r.version, "block": r.block, "archived": r.archived}
                for k, r in records.items()}  # fmt: skip
        try:
            private_dir(self.path.parent)
            atomic_write(self.path, json.dumps(data, ensure_ascii=False).encode("utf-8"))
        except OSError as exc:
            log.warning("%s: cannot record the pool's versions: %s", self.path, exc)
        self._cache = None


def _last(pool: fmt.PoolFile | None, key: str) -> int:
    """The last version of a key the file archived (0: none): a key written again goes on
    from it."""
    return max((s.version for s in pool.archived if s.key == key), default=0) if pool else 0


def pool_names(root: Path) -> list[str]:
    """The pools of a workspace: ``shared/*.md`` with a valid pool name, sorted."""
    folder = root / POOL_DIR
    if not folder.is_dir():
        return []
    names = []
    for path in sorted(folder.glob("*.md")):
        try:
            names.append(check_name(path.stem, "pool"))
        except ValueError:
            continue
    return names


def _check_expected(expected: object) -> None:
    if expected is None or isinstance(expected, PoolEntry):
        return
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise ValueError(
            f"expected_version is a version (an int >= 0) or a PoolEntry: {expected!r}"
        )


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _masked(value: JSON, redactor: Redactor) -> tuple[JSON, int]:
    """``value`` with the secrets in its strings (keys included) masked, and how many."""
    if isinstance(value, str):
        found = redactor.redact(value)
        return found.text, found.count
    if isinstance(value, list):
        pairs = [_masked(item, redactor) for item in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out: dict[str, JSON] = {}
        count = 0
        for key, item in value.items():
            masked_key, n = _masked(key, redactor)
            out[masked_key], m = _masked(item, redactor)
            count += n + m
        return out, count
    return value, 0


def _read_masked(text: str, read: Callable[[str], JSON]) -> JSON:
    """The value back from its written form with a secret masked in it (``"password":
    "hunter2"`` shows the secret only as a key and its value): the file then gets no secret,
    and the entry returned is what the file holds."""
    try:
        return read(text)
    except (ValueError, FileProblem):
        raise ValueError(
            "a secret in this value spans JSON syntax and cannot be masked in place; mask it "
            "before writing (nothing was written)"
        ) from None


def _dump_metadata(metadata: Mapping[str, JSON]) -> str | None:
    """Metadata as one line of JSON for the comment (``<`` and ``>`` escaped: no ``-->``)."""
    if not metadata:
        return None
    text = json.dumps(metadata, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


def _load_metadata(text: str | None, path: str, line: int | None = None) -> dict[str, JSON]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise FileProblem(path, f"the pool entry's metadata is not JSON: {exc}", line) from None
    if not isinstance(value, dict):
        raise FileProblem(path, "the pool entry's metadata is not a JSON object", line)
    return value
