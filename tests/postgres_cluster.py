"""A throwaway PostgreSQL cluster for the tests: initdb and pg_ctl from ``pg_config --bindir``,
a Unix socket only (no TCP port), password authentication, torn down after.

Run as root, the cluster belongs to the ``postgres`` user, in a folder it owns (pytest's own
temporary folders are root-only). ``make`` builds pgvector when it is missing; this module never
installs anything: without PostgreSQL or pgvector it says why, and the tests skip (fail in CI).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD = "mdmem-test-password"


both_backends = pytest.mark.parametrize("indexed", ["sqlite", "postgres"], indirect=True)
"""Runs a test that takes the ``indexed`` workspace once on each index backend."""


@dataclass(frozen=True)
class Cluster:
    socket_dir: Path
    url: str
    """Superuser URL of the ``mdmem`` database."""

    def url_for(self, user: str = "postgres", password: str = PASSWORD, db: str = "mdmem") -> str:
        return f"postgresql://{user}:{password}@/{db}?host={self.socket_dir}"


def unavailable() -> str | None:
    """Why no cluster can be started here, or None."""
    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"the postgres extra is not installed ({exc}): pip install -e '.[postgres]'"
    bindir = _pg_config("--bindir")
    if bindir is None:
        return "PostgreSQL is not installed (no pg_config on PATH)"
    if not (Path(bindir) / "initdb").exists():
        return f"no initdb in {bindir} (install the PostgreSQL server)"
    share = _pg_config("--sharedir")
    if share is None or not (Path(share) / "extension" / "vector.control").exists():
        return f"pgvector is not installed in {share}: `make` builds it (needs root and apt-get)"
    if os.geteuid() == 0 and _uid("postgres") is None:
        return "running as root, and there is no postgres user to run the server as"
    return None


@contextlib.contextmanager
def cluster(
    shared_buffers: str = "64MB", *, pgvector: bool = True, nice: int = 0
) -> Iterator[Cluster]:
    """``shared_buffers``: the server's cache (a benchmark at scale wants more than a test).
    ``pgvector=False``: a server that has no pgvector at all (see :func:`_without_pgvector`).
    ``nice``: the server's CPU priority (a benchmark on a shared machine yields with 19)."""
    base = Path(tempfile.mkdtemp(prefix="mdmem-pg-"))  # short: a socket path has 107 bytes
    bindir = Path(_pg_config("--bindir") or "")
    if not pgvector:
        bindir = _without_pgvector(bindir, base / "pg")
    user = "postgres" if os.geteuid() == 0 else None
    if user is not None:
        os.chown(base, _uid(user) or 0, -1)
    data, sock = base / "data", base / "sock"
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD + "\n")
    sock.mkdir()
    if user is not None:
        for path in (pwfile, sock):
            os.chown(path, _uid(user) or 0, -1)
    try:
        _run(
            user,
            bindir / "initdb",
            "-D",
            data,
            "-U",
            "postgres",
            "--pwfile",
            pwfile,
            "--auth=scram-sha-256",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )
        options = (
            f"-k {sock} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c shared_buffers={shared_buffers}"
        )
        start = (bindir / "pg_ctl", "-D", data, "-l", base / "log", "-o", options, "-w", "start")
        _run(user, *(("nice", "-n", nice) if nice else ()), *start)
        found = Cluster(sock, "")
        import psycopg

        with psycopg.connect(found.url_for(db="postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE mdmem")
        yield Cluster(sock, found.url_for())
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _run(user, bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


def _without_pgvector(bindir: Path, root: Path) -> Path:
    """The installed PostgreSQL, relocated under ``root`` without pgvector: PostgreSQL finds
    its share folder (where extensions are listed) relative to where its programs are, so
    copies of them next to a share folder of links to everything but ``vector*`` run a real
    server to which pgvector was never installed. Returns the copy's bindir."""
    share = Path(_pg_config("--sharedir") or "")
    # the same path from the root down, as PostgreSQL computes the share folder relatively
    new_bin = root / bindir.relative_to("/")
    new_share = root / share.relative_to("/")
    new_bin.mkdir(parents=True)
    for program in ("initdb", "pg_ctl", "postgres"):
        shutil.copy2(bindir / program, new_bin / program)
    lib = Path(_pg_config("--pkglibdir") or "")
    (root / lib.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / lib.relative_to("/")).symlink_to(lib)
    (new_share / "extension").mkdir(parents=True)
    for entry in share.iterdir():
        if entry.name != "extension":
            (new_share / entry.name).symlink_to(entry)
    for entry in (share / "extension").iterdir():
        if not entry.name.startswith("vector"):
            (new_share / "extension" / entry.name).symlink_to(entry)
    for folder in (root, *root.rglob("*")):
        if folder.is_dir() and not folder.is_symlink():
            folder.chmod(0o755)
    return new_bin


def _run(user: str | None, *args: object) -> None:
    subprocess.run(
        [str(a) for a in args], check=True, capture_output=True, user=user, cwd="/", timeout=120
    )


def _pg_config(flag: str) -> str | None:
    try:
        out = subprocess.run(["pg_config", flag], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def _uid(user: str) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None
