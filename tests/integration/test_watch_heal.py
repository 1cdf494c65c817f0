"""The watcher heals itself: a damaged, deleted or replaced index under a live `mdmem watch`,
one watcher per workspace (a lock, not a ping), clean stops at any moment, an owner-only socket
without touching the umask, and searches that work when the index cannot be written.

Real `mdmem watch` processes, real signals, real SQLite files, real mounts."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stress import size

from mdmem import Workspace
from mdmem.config import Config, EmbeddingConfig
from mdmem.layout import STATE_DIR, WATCHER_FILE, running_watcher, socket_path
from mdmem.live.server import request

EXAMPLE = Path(__file__).resolve().parents[2] / "example_workspace"
MDMEM = str(Path(sys.executable).parent / "mdmem")
KEYWORD_ONLY = Config(embedding=EmbeddingConfig(model=""))
KEYWORD_TOML = 'mode = "full"\nagent = "coder"\n[embedding]\nmodel = ""\n'
STATE_SQL = (
    "SELECT path, start_line, end_line, text, type, archived FROM chunks "
    "ORDER BY path, start_line, end_line, text"
)
QUERIES = ("zebra crossing", "invoice numbering", "which port does the test database use")
HEAL_LINE = ("was damaged", "was deleted or replaced")


class Watch:
    """A real `mdmem watch` process; its stderr is collected line by line."""

    def __init__(self, root: Path, *args: str) -> None:
        self.root = root
        self.proc = subprocess.Popen(
            [MDMEM, "-w", str(root), "watch", *args], stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(timeout=5)
                pytest.fail(f"no {text!r} from mdmem watch: {self.stderr}")
            time.sleep(0.02)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 120.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def heal_lines(self) -> list[str]:
        return [line for line in self.lines if any(h in line for h in HEAL_LINE)]


def _workspace(tmp_path: Path, name: str = "ws", toml: str = KEYWORD_TOML) -> Path:
    root = tmp_path / name
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(STATE_DIR))
    (root / "mdmem.toml").write_text(toml)
    return root


def _state(db: Path) -> list[tuple] | None:
    """The chunks on disk, as another process sees them; None while unreadable."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return conn.execute(STATE_SQL).fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _fresh_copy(root: Path, tmp: Path) -> Path:
    """The same Markdown files in a new folder, with no index at all."""
    copy = tmp / f"fresh-{time.monotonic_ns()}"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(STATE_DIR))
    return copy


def _full_reindex(root: Path, tmp: Path) -> list[tuple] | None:
    copy = _fresh_copy(root, tmp)
    with Workspace(copy, KEYWORD_ONLY) as ws:
        ws.index.update(full=True, embed=False)
    return _state(copy / STATE_DIR / "index.db")


def _converged(root: Path, tmp: Path, timeout: float = 60.0) -> None:
    """The watcher's index on disk equals a full re-index of the same files."""
    deadline = time.monotonic() + timeout
    while True:
        expected = _full_reindex(root, tmp)
        got = _state(root / STATE_DIR / "index.db")
        if got == expected:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the index never matched a full re-index ({len(got or [])} rows)")
        time.sleep(0.1)


def _hits(hits: list) -> list[tuple]:
    return [(h["path"], h["start_line"], h["end_line"], h["text"]) for h in hits]


def _fresh_hits(root: Path, tmp: Path, query: str) -> list[tuple]:
    with Workspace(_fresh_copy(root, tmp), KEYWORD_ONLY) as ws:
        return _hits([h.to_dict() for h in ws.search(query, track_access=False)])


def _checkpoint(db: Path) -> None:
    """Move every page into the main file first, so damaging it damages the index."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()


def _truncate(root: Path) -> None:
    db = root / STATE_DIR / "index.db"
    _checkpoint(db)
    os.truncate(db, 0)


def _garble_header(root: Path) -> None:
    db = root / STATE_DIR / "index.db"
    _checkpoint(db)
    with open(db, "r+b") as handle:
        handle.write(os.urandom(100))


def _garble_pages(root: Path) -> None:
    db = root / STATE_DIR / "index.db"
    _checkpoint(db)
    size = db.stat().st_size
    rng = random.Random(7)
    with open(db, "r+b") as handle:
        for page in range(4096, size, 4096):  # every page but the header's
            handle.seek(page + rng.randrange(0, 2048))
            handle.write(rng.randbytes(2000))


def _delete(root: Path) -> None:
    (root / STATE_DIR / "index.db").unlink()


def _replace(root: Path) -> None:
    """Another process rebuilt it: `rm .mdmem/index.db*` then `mdmem index`."""
    for path in (root / STATE_DIR).glob("index.db*"):
        path.unlink()
    done = subprocess.run(
        [MDMEM, "-w", str(root), "index"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


DAMAGE = {
    "truncate": _truncate,
    "garble-header": _garble_header,
    "garble-pages": _garble_pages,
    "delete": _delete,
    "replace": _replace,
}


# ---- healing ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_index_heals_under_a_live_watcher(tmp_path: Path, damage: str) -> None:
    root = _workspace(tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    watch = Watch(root)
    try:
        watch.wait_for("watching")
        _converged(root, scratch)
        DAMAGE[damage](root)
        # a change for the watcher to index: it meets the damage before any search does
        (root / "notes" / "zebra.md").write_text("# Zebra\n- The zebra crossing is on Elm St\n")
        _converged(root, scratch)
        for query in QUERIES:  # the server answers from the healed index, as a fresh one would
            reply = request(socket_path(root), {"op": "search", "query": query, "params": {}})
            assert reply and reply["ok"], reply
            assert reply["pid"] == watch.proc.pid
            assert _hits(reply["hits"]) == _fresh_hits(root, scratch, query)
        (root / "notes" / "zebra.md").write_text("# Zebra\n- The zebra crossing moved to Oak\n")
        _converged(root, scratch)  # and it keeps working
    finally:
        code = watch.stop()
    assert code == 0, watch.stderr
    assert "Traceback" not in watch.stderr
    assert len(watch.heal_lines()) == 1, watch.stderr


def test_a_search_heals_a_garbled_index_in_process(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    with Workspace(root, KEYWORD_ONLY) as ws:
        ws.index.update(embed=False)
        before = _hits([h.to_dict() for h in ws.search("invoice numbering", track_access=False)])
        _garble_pages(root)
        after = _hits([h.to_dict() for h in ws.search("invoice numbering", track_access=False)])
    assert after == before == _fresh_hits(root, tmp_path, "invoice numbering")


def test_an_index_replaced_by_another_process_is_reopened(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    messages: list[str] = []
    with Workspace(root, KEYWORD_ONLY) as ws:
        ws.index.update(embed=False)
        ws.index._backend._on_message = messages.append
        assert ws.search("zebra", track_access=False) == []
        for path in (root / STATE_DIR).glob("index.db*"):
            path.unlink()
        (root / "notes" / "zebra.md").write_text("- The zebra crossing is on Elm St\n")
        with Workspace(root, KEYWORD_ONLY) as other:  # another process would do the same
            other.index.update(embed=False)
        hits = ws.search("zebra", track_access=False)
    assert [h.path for h in hits] == ["notes/zebra.md"]
    assert len(messages) == 1 and "was deleted or replaced" in messages[0]


def test_index_db_that_is_a_folder_is_one_line_error(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    (root / STATE_DIR / "index.db").mkdir(parents=True)
    for command in (["search", "invoice", "--no-server"], ["status"], ["index"]):
        done = subprocess.run(
            [MDMEM, "-w", str(root), *command], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 1, done
        assert done.stderr.startswith("mdmem: error: ") and "is a folder" in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert (root / STATE_DIR / "index.db").is_dir()  # nothing deleted


# ---- one watcher per workspace ---------------------------------------------------------------


@pytest.mark.slow
def test_a_second_watcher_is_refused_even_when_the_first_is_frozen(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    first = Watch(root)
    try:
        first.wait_for("watching")
        sock = socket_path(root)
        assert running_watcher(root) == first.proc.pid
        first.proc.send_signal(signal.SIGSTOP)  # busy or frozen: it cannot answer a ping
        try:
            second = subprocess.run(
                [MDMEM, "-w", str(root), "watch"], capture_output=True, text=True, timeout=120
            )
        finally:
            first.proc.send_signal(signal.SIGCONT)
        assert second.returncode == 1
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert f"pid {first.proc.pid}" in second.stderr and "already running" in second.stderr
        assert sock.exists()  # the live watcher's socket was left alone, and it still answers
        reply = request(sock, {"op": "search", "query": "invoice", "params": {}})
        assert reply and reply["ok"] and reply["pid"] == first.proc.pid
        status = subprocess.run(
            [MDMEM, "-w", str(root), "status"], capture_output=True, text=True, timeout=120
        )
        assert f"running (pid {first.proc.pid}" in status.stdout
    finally:
        assert first.stop() == 0, first.stderr
    assert running_watcher(root) is None and not sock.exists()


def test_running_is_decided_by_the_lock_not_the_heartbeat(tmp_path: Path) -> None:
    """A fresh heartbeat of a live process that is not a watcher (a reused pid) is not one."""
    import json

    root = _workspace(tmp_path)
    ws = Workspace(root, KEYWORD_ONLY)
    beat = {"pid": os.getpid(), "started": time.time(), "heartbeat": time.time(), "interval": 2}
    (root / STATE_DIR).mkdir()
    (root / STATE_DIR / WATCHER_FILE).write_text(json.dumps(beat))
    info = ws.index.status().watcher
    assert info is not None and info["running"] is False
    with ws.watch() as watcher:
        watcher.wait_idle(timeout=60)
        info = ws.index.status().watcher
        assert info and info["running"] and info["pid"] == os.getpid() and not info["stalled"]
        assert running_watcher(root) == os.getpid()
        with pytest.raises(Exception, match="already running"):
            Workspace(root, KEYWORD_ONLY).watch()
    assert running_watcher(root) is None and ws.index.status().watcher is None


# ---- the socket ------------------------------------------------------------------------------


def test_socket_is_owner_only_and_the_umask_is_never_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_umask = os.umask

    def umask(mask: int) -> int:
        calls.append(mask)
        return real_umask(mask)

    monkeypatch.setattr(os, "umask", umask)  # the process-wide umask other threads rely on
    short = _workspace(tmp_path, "w")
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    long = _workspace(deep, "ws")  # too long for a Unix socket: in a private temp folder
    for root in (short, long):
        with Workspace(root, KEYWORD_ONLY).watch(serve=True) as watcher:
            assert watcher.server is not None
            sock = watcher.server.path
            assert sock == socket_path(root)
            assert sock.stat().st_mode & 0o777 == 0o600
            assert sock.parent.stat().st_mode & 0o777 == 0o700
            assert sock.parent.stat().st_uid == os.getuid()
            reply = request(sock, {"op": "ping"})
            assert reply and reply["ok"]
        assert not sock.exists()
    assert socket_path(long).parent != long / STATE_DIR
    assert calls == []


# ---- clean stops -----------------------------------------------------------------------------


def _stop_at_random(root: Path, rng: random.Random, window: float, signum: int) -> str:
    """Start `mdmem watch`, stop it after a random delay; what went wrong, or ''."""
    watch = Watch(root)
    watch.wait_for("watching")  # the model warms up and the start-up scan runs from here on
    time.sleep(rng.uniform(0, window))
    code = watch.stop(signum)
    if code != 0 or "terminate called" in watch.stderr or "Traceback" in watch.stderr:
        return f"exit {code} after {signal.Signals(signum).name}: {watch.stderr[-600:]}"
    return ""


@pytest.mark.slow
def test_stops_at_random_moments_all_exit_0(tmp_path: Path) -> None:
    """SIGINT and SIGTERM while starting, while the model warms up, during a sync of many files
    (embedding them), and idle. Every stop exits 0, and nothing aborts. 12 stops in `make test`
    (each combination of signal, model and sync once), 30 with MDMEM_STRESS=full."""
    count = size(12, 30)
    rng = random.Random(20261122)
    model_root = _workspace(tmp_path, "model", toml='mode = "full"\nagent = "coder"\n')
    keyword_root = _workspace(tmp_path, "keyword")
    failures = []
    stops = 0
    for n in range(count):
        signum = (signal.SIGINT, signal.SIGTERM)[n % 2]
        real_model = n % 3 == 0  # the warm-up and embedding cases need the real model
        root = model_root if real_model else keyword_root
        if n % 4 == 1:  # a sync in progress: many files changed at once
            notes = root / "notes" / "many"
            notes.mkdir(exist_ok=True)
            for i in range(300):
                (notes / f"n{i:03}.md").write_text(f"# Note {i}\n- fact {i} of round {n}\n")
        window = 4.0 if real_model else 1.5
        failure = _stop_at_random(root, rng, window, signum)
        if failure:
            failures.append(failure)
        stops += 1
    assert stops == count
    assert failures == []


# ---- an index that cannot be written ---------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A real, small filesystem of its own: full when filled, read-only when remounted so."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def _indexed_on(mnt: Path, *, clean: bool) -> Path:
    """A workspace indexed on ``mnt``; ``clean`` closes the index (no -wal or -shm left), else
    the indexing process dies without closing it (a killed watcher leaves both)."""
    root = _workspace(mnt)
    code = (
        "import os, sys\n"
        "from mdmem import Workspace\n"
        "from mdmem.config import Config, EmbeddingConfig\n"
        "ws = Workspace(sys.argv[1], Config(embedding=EmbeddingConfig(model='')))\n"
        "ws.index.update(embed=False)\n"
        "ws.close() if sys.argv[2] == 'clean' else os._exit(0)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(root), "clean" if clean else "killed"], check=True
    )
    assert (root / STATE_DIR / "index.db-wal").exists() != clean
    return root


def _search_as_is(root: Path, expected: list[tuple], stale: str) -> None:
    """In-process and through the CLI: the index as it is, and the stale file named."""
    with Workspace(root, KEYWORD_ONLY) as ws:
        results = ws.search("invoice numbering")  # its access-count bump fails silently
        assert _hits([h.to_dict() for h in results]) == expected
        assert results.stale == [stale] and not results.fresh
        assert "cannot be written" in results.problems[0]
        assert ws.index.status().stale == [stale]
    done = subprocess.run(
        [MDMEM, "-w", str(root), "search", "invoice numbering", "--no-server"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert expected[0][0] in done.stdout
    assert f"mdmem: warning: {stale} changed but is not re-indexed yet" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("clean", [True, False], ids=["closed", "killed"])
def test_search_on_a_read_only_mount(tmp_path: Path, clean: bool) -> None:
    with _tmpfs(tmp_path / "mnt", "8m") as mnt:
        root = _indexed_on(mnt, clean=clean)
        expected = _fresh_hits(root, tmp_path, "invoice numbering")
        (root / "notes" / "zebra.md").write_text("- The zebra crossing is on Elm St\n")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        before = sorted(p.name for p in (root / STATE_DIR).iterdir())
        _search_as_is(root, expected, "notes/zebra.md")
        assert sorted(p.name for p in (root / STATE_DIR).iterdir()) == before
        watch = subprocess.run(
            [MDMEM, "-w", str(root), "watch"], capture_output=True, text=True, timeout=120
        )
        assert watch.returncode == 1 and "Read-only file system" in watch.stderr
        assert watch.stderr.count("\n") == 1


@pytest.mark.slow
def test_search_on_a_full_disk_then_space_again(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "mnt", "3m") as mnt:
        root = _indexed_on(mnt, clean=True)
        expected = _fresh_hits(root, tmp_path, "invoice numbering")
        (root / "notes" / "zebra.md").write_text("- The zebra crossing is on Elm St\n")
        filler = mnt / "filler"
        with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as handle:
            while True:  # to the brim
                handle.write(b"\0" * 4096)
        _search_as_is(root, expected, "notes/zebra.md")
        filler.unlink()
        with Workspace(root, KEYWORD_ONLY) as ws:
            results = ws.search("zebra crossing")
            assert results.fresh and results.problems == []
            assert [h.path for h in results] == ["notes/zebra.md"]


@pytest.mark.slow
def test_a_watcher_on_a_full_disk_says_so_once_and_catches_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _tmpfs(tmp_path / "mnt", "3m") as mnt:
        root = _indexed_on(mnt, clean=True)
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        caplog.set_level("INFO", logger="mdmem")
        ws = Workspace(root, KEYWORD_ONLY)
        with ws.watch() as watcher:
            assert watcher.wait_idle(timeout=60)
            filler = mnt / "filler"
            with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as handle:
                while True:
                    handle.write(b"\0" * 4096)
            for n in range(5):  # five changes the full disk cannot take
                (root / "notes" / f"full-{n}.md").write_text("")
                watcher.wait_idle(timeout=30)
                time.sleep(0.1)
            said = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
            assert len(said) == 1, said
            assert not [r for r in caplog.records if r.exc_info]
            filler.unlink()
            (root / "notes" / "full-0.md").write_text("- written once there was room\n")
            _converged(root, scratch)
        assert any("writable again" in r.getMessage() for r in caplog.records)


def test_a_sync_that_keeps_failing_backs_off_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An index server that is down: the watcher (and the search server built on it) logged
    `sync failed … will retry` every second for as long as it ran. It says so once, retries
    after 1, 2, 4 … s (at most a minute apart, said again then)."""
    toml = KEYWORD_TOML + '[index]\nbackend = "postgres"\nurl = "postgresql://u:p@127.0.0.1:1/db"\n'
    root = _workspace(tmp_path, toml=toml)
    caplog.set_level("WARNING", logger="mdmem")
    with Workspace(root).watch() as watcher:
        watcher.scanned.wait(timeout=60)
        deadline = time.monotonic() + 60
        while watcher._failed is None or watcher._failed[1] < 4:  # 1 + 2 + 4 s of retries
            assert time.monotonic() < deadline, "the sync was not retried"
            time.sleep(0.1)
    failed = [r.getMessage() for r in caplog.records if "sync failed" in r.getMessage()]
    assert len(failed) == 1, failed
    assert "cannot reach PostgreSQL" in failed[0] and "will retry in 1 s" in failed[0]
    assert "u:p@" not in caplog.text  # the password is never shown
