"""The adapters against their references' own test suites: LangGraph's store tests and the
OpenAI Agents SDK's session tests, as their projects publish them, run on mdmem's adapters.

    .venv/bin/python benchmarks/upstream_suites.py [--suite NAME ...] [--embedding]
        [--cache DIR] [-k EXPRESSION] [--keep]

mdmem copies none of these tests: for each suite the script downloads the reference's source
distribution from PyPI with pip (``pip download --no-deps --no-binary :all:``, the version
installed here; LangGraph's SQLite store is not installed, so its release is pinned below, one
that requires the installed ``langgraph-checkpoint``), into ``--cache`` (default
``.bench/upstream_suites/``), extracts the suite's test files and the ``tests`` helpers they
import, and writes a ``conftest.py`` beside them that puts the adapter where the tests build
the reference class (``benchmarks/upstream_shims.py``): ``SqliteStore`` / ``AsyncSqliteStore``
become ``MdmemStore``, ``SQLiteSession`` becomes ``MdmemSession``, each on a workspace of its
own (keyword-only search unless ``--embedding``). pytest-asyncio and pytest-mock, which the
suites need and mdmem does not, are installed by pip into the cache (``--target``), never into
the venv.

It prints, per suite: tests, passed, failed, skipped, and how many of them built the adapter
(the rest test the references' helpers and pass or fail whatever mdmem does); then each failure,
its one-line reason and its kind: ``sqlite-internal`` (the test reached a part of the SQLite
implementation, which the stand-ins refuse by raising ``SqliteInternal``, or ran SQL on the
database file itself), ``not-offered`` (an option of the reference the adapter does not take:
``NotOffered``), or ``behaviour`` (everything else: the adapter answered otherwise). Exit code:
0 when no failure is a behaviour difference, 1 otherwise, 2 when a suite could not be fetched.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".bench" / "upstream_suites"
SQLITE_STORE = "3.1.2"
"""langgraph-checkpoint-sqlite's release whose tests run: it requires langgraph-checkpoint
>=4.3.0,<5 (checked against the installed one before anything runs)."""
TEST_PLUGINS = ("pytest-asyncio==1.5.0", "pytest-mock==3.17.0")
INI_KEYS = ("asyncio_mode", "asyncio_default_fixture_loop_scope", "markers")


@dataclass(frozen=True)
class Suite:
    name: str
    package: str
    version: str | None  # None: the installed version
    tests: tuple[str, ...]  # paths inside the sdist's tests/ folder
    install: str  # the function of upstream_shims that puts the adapter in place


SUITES = (
    Suite(
        "langgraph-store",
        "langgraph-checkpoint-sqlite",
        SQLITE_STORE,
        ("test_store.py", "test_async_store.py"),
        "install_langgraph",
    ),
    Suite(
        "langgraph-memory-store",
        "langgraph-checkpoint",
        None,
        ("test_store.py",),
        "install_langgraph_memory",
    ),
    Suite(
        "agents-session",
        "openai-agents",
        None,
        ("memory/test_session.py", "memory/test_session_limit.py"),
        "install_agents",
    ),
)


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, stdout=subprocess.DEVNULL)


def sdist(package: str, version: str, cache: Path) -> Path:
    """The package's source distribution, downloaded once into ``cache/sdists``."""
    folder = cache / "sdists"
    stem = f"{package}-{version}.tar.gz".lower().replace("-", "_")

    def found() -> Path | None:
        files = folder.glob("*.tar.gz") if folder.is_dir() else ()
        return next((f for f in files if f.name.lower().replace("-", "_") == stem), None)

    if (path := found()) is None:
        folder.mkdir(parents=True, exist_ok=True)
        spec = f"{package}=={version}"
        _pip(
            "download", "--quiet", "--no-deps", "--no-binary", ":all:", "--dest", str(folder), spec
        )
        path = found()
    if path is None:
        raise SystemExit(f"pip downloaded no source distribution of {package} {version}")
    return path


def _check_requirements(archive: tarfile.TarFile, top: str) -> None:
    """The sdist requires the langgraph-checkpoint installed here (or a pinned release would
    be run against a base it was not written for)."""
    info = archive.extractfile(f"{top}/PKG-INFO")
    assert info is not None
    for line in info.read().decode().splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.partition(":")[2].strip())
            try:
                have = importlib.metadata.version(req.name)
            except importlib.metadata.PackageNotFoundError:
                continue
            if req.name == "langgraph-checkpoint" and not req.specifier.contains(have):
                raise SystemExit(f"{top} requires {req}, and {have} is installed")


def extract(suite: Suite, archive_path: Path, into: Path) -> list[str]:
    """The suite's test files and the ``tests`` modules they import (with their packages'
    ``__init__.py`` and ``conftest.py``), written below ``into``; the pytest settings the
    suite's project uses for asyncio and markers, as ``pytest.ini``. Returns the test paths."""
    with tarfile.open(archive_path) as archive:
        top = archive.getnames()[0].split("/")[0]
        _check_requirements(archive, top)
        names = set(archive.getnames())
        wanted = [f"tests/{t}" for t in suite.tests]
        done: set[str] = set()
        while wanted:
            rel = wanted.pop()
            if rel in done or f"{top}/{rel}" not in names:
                continue
            done.add(rel)
            member = archive.extractfile(f"{top}/{rel}")
            assert member is not None
            source = member.read()
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            (into / rel).write_bytes(source)
            parts = Path(rel).parts
            for depth in range(1, len(parts)):
                package = "/".join(parts[:depth])
                wanted += [f"{package}/__init__.py", f"{package}/conftest.py"]
            wanted += _imported_tests_modules(source, rel)
        pyproject = archive.extractfile(f"{top}/pyproject.toml")
        options = {}
        if pyproject is not None:
            options = tomllib.loads(pyproject.read().decode())
            options = options.get("tool", {}).get("pytest", {}).get("ini_options", {})
    lines = ["[pytest]", "pythonpath = .", "cache_dir = .pytest_cache"]
    for key in INI_KEYS:
        value = options.get(key)
        if isinstance(value, list):
            lines.append(f"{key} =\n" + "\n".join(f"    {v}" for v in value))
        elif value is not None:
            lines.append(f"{key} = {value}")
    (into / "pytest.ini").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [f"tests/{t}" for t in suite.tests]


def _imported_tests_modules(source: bytes, rel: str) -> list[str]:
    """The files of ``tests.…`` modules the file ``rel`` imports (a module or a package;
    ``from .x import y`` too)."""
    package = Path(rel).parent.parts
    out = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if name == "tests" or name.startswith("tests."):
                path = name.replace(".", "/")
                out += [f"{path}.py", f"{path}/__init__.py"]
    return out


CONFTEST = """\
# Written by mdmem's benchmarks/upstream_suites.py: mdmem's adapter stands in for the
# reference class these tests build (see benchmarks/upstream_shims.py).
import upstream_shims

pytest_plugins = ["upstream_shims"]
upstream_shims.{install}()
"""


def plugins(cache: Path) -> Path:
    """pytest-asyncio and pytest-mock in ``cache/plugins`` (pip ``--target``; no dependencies:
    pytest is the venv's)."""
    target = cache / "plugins"
    stamp = target / ".installed"
    if stamp.exists() and stamp.read_text() == " ".join(TEST_PLUGINS):
        return target
    shutil.rmtree(target, ignore_errors=True)
    _pip("install", "--quiet", "--no-deps", "--target", str(target), *TEST_PLUGINS)
    stamp.write_text(" ".join(TEST_PLUGINS))
    return target


def run(suite: Suite, cache: Path, args: argparse.Namespace) -> list[dict[str, object]]:
    version = suite.version or importlib.metadata.version(suite.package)
    archive = sdist(suite.package, version, cache)
    folder = cache / "runs" / suite.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    tests = extract(suite, archive, folder)
    (folder / "conftest.py").write_text(CONFTEST.format(install=suite.install), encoding="utf-8")
    results = folder / "results.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "benchmarks"), str(REPO), str(plugins(cache))]),
        "UPSTREAM_RESULTS": str(results),
        "UPSTREAM_WORKSPACES": str(folder / "workspaces"),
        "UPSTREAM_EMBEDDING": "1" if args.embedding else "",
        "HF_HUB_OFFLINE": "1",
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q"]
    command += ["--durations=5"]
    command += ["--rootdir", str(folder), "-c", str(folder / "pytest.ini"), *tests]
    if args.k:
        command += ["-k", args.k]
    out = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    (folder / "pytest.log").write_text(out.stdout + out.stderr, encoding="utf-8")
    if not results.exists():
        raise SystemExit(f"{suite.name}: pytest wrote no results; see {folder / 'pytest.log'}")
    rows: list[dict[str, object]] = json.loads(results.read_text(encoding="utf-8"))
    for row in rows:
        row["kind"] = (
            kind(str(row["test"]), str(row["reason"])) if row["outcome"] == "failed" else ""
        )
    if not args.keep:
        shutil.rmtree(folder / "workspaces", ignore_errors=True)
    print(f"{suite.name}: {suite.package} {version}, log in {folder / 'pytest.log'}")
    return rows


REVIEWED = {
    "test_sql_injection_vulnerability": (
        "sqlite-internal",
        "SqliteStore refuses a filter key it cannot splice into its SQL JSON path; "
        "InMemoryStore, like MdmemStore, takes the key and finds nothing",
    ),
    "test_no_running_loop": (
        "sqlite-internal",
        "AsyncSqliteStore's sync methods wait on its aiosqlite connection's event loop, so on "
        "that loop they refuse (InvalidStateError); MdmemStore's do the work themselves",
    ),
    "test_sqlite_session_file_lock_is_shared_across_instances": (
        "sqlite-internal",
        "asserts SQLiteSession's process-wide lock registry (one _lock object for the sessions "
        "of one database file, _file_lock_counts); MdmemSession writes under the workspace's "
        "per-file locks, and two sessions written together stay apart "
        "(tests/unit/test_conformance_agents.py)",
    ),
}
"""Failures reviewed by hand whose exception does not tell their kind: kind, and why."""


def kind(test: str, reason: str) -> str:
    """What a failure is, from its exception (see the module's doc), or as reviewed."""
    name = test.rpartition("::")[2].partition("[")[0]
    if name in REVIEWED:
        return REVIEWED[name][0]
    if "SqliteInternal" in reason or reason.startswith("sqlite3."):
        return "sqlite-internal"
    if "NotOffered" in reason:
        return "not-offered"
    return "behaviour"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", choices=[s.name for s in SUITES])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--embedding", action="store_true", help="the workspaces' default model")
    parser.add_argument("-k", help="pytest's -k, to run some tests only")
    parser.add_argument("--keep", action="store_true", help="keep the tests' workspaces")
    args = parser.parse_args()
    console = Console(width=160)
    summary = Table("suite", "tests", "passed", "failed", "skipped", "built the adapter")
    failures = Table("suite", "failed test", "kind", "reason")
    behaviour = 0
    for suite in SUITES:
        if args.suite and suite.name not in args.suite:
            continue
        try:
            rows = run(suite, args.cache, args)
        except subprocess.CalledProcessError as exc:
            console.print(f"{suite.name}: could not fetch from PyPI ({exc})")
            return 2
        count = {o: sum(r["outcome"] == o for r in rows) for o in ("passed", "failed", "skipped")}
        used = sum(bool(r["adapter"]) for r in rows)
        summary.add_row(suite.name, str(len(rows)), *map(str, count.values()), str(used))
        grouped: dict[tuple[str, str, str], int] = {}
        for row in rows:
            if row["outcome"] == "failed":
                behaviour += row["kind"] == "behaviour"
                name = str(row["test"]).removeprefix("tests/").partition("[")[0]
                reason = str(row["reason"]).removeprefix("upstream_shims.")
                reviewed = REVIEWED.get(name.rpartition("::")[2])
                if reviewed:
                    reason = f"{reason} ({reviewed[1]})"
                key = (name, str(row["kind"]), reason)
                grouped[key] = grouped.get(key, 0) + 1
        for (name, what, reason), n in grouped.items():
            failures.add_row(suite.name, name + (f" (x{n})" if n > 1 else ""), what, reason)
    console.print(summary)
    if failures.row_count:
        console.print(failures)
    return 1 if behaviour else 0


if __name__ == "__main__":
    sys.exit(main())
