from __future__ import annotations

import os

from run_folders import folder_of_this_process, unless_set

# Tests never touch the network: set before anything imports litellm or transformers.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A search that finds no warm server starts one in the background; no test leaves one behind
# but the tests of that feature (tests/integration/test_auto_server.py), which set it back for themselves.
os.environ["MDMEM_SERVER_AUTO"] = "0"
# The user's GLOBAL workspace is read by every search: never the real user's in a test (each
# test gets its own below; this covers session fixtures).
os.environ["MDMEM_GLOBAL"] = os.path.join(folder_of_this_process("mdmem-tests-global-"), "global")
# The default model's ONNX export (mdmem/index/onnx_encoder.py) goes to a cache of the test run,
# shared by its processes (made once, by the first that loads sentence-transformers), never the
# user's; removed when that process exits.
os.environ.update(unless_set("MDMEM_CACHE_DIR", "mdmem-tests-cache-"))

import contextlib
import datetime as dt
import fcntl
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from mdmem import Workspace

# Hypothesis profiles. Property tests set no example count of their own: the profile decides.
# dev: the everyday run. ci: the same examples every run (derandomized, no example database), so
# CI never fails at random; a failure prints the blob that replays it. deep: many random examples,
# run by `make test-deep` to hunt (pin what it finds with @example).
# Each starts from Hypothesis' own defaults: under CI=true Hypothesis has loaded its own `ci`
# profile before this file runs, and `deep` must not inherit its derandomize.
_BASE = settings.get_profile("default")
_SLOW_MACHINE = [HealthCheck.too_slow]
settings.register_profile("dev", _BASE, max_examples=100, deadline=dt.timedelta(seconds=2))
settings.register_profile(
    "ci",
    _BASE,
    max_examples=100,
    derandomize=True,
    database=None,
    print_blob=True,
    # no deadline: one example's time on a loaded shared machine is no result (an MCP
    # search that loads the encoder took 14 s once under a full parallel run)
    deadline=None,
    suppress_health_check=_SLOW_MACHINE,
)
settings.register_profile(
    "deep",
    _BASE,
    max_examples=2000,
    print_blob=True,
    deadline=dt.timedelta(seconds=10),
    suppress_health_check=_SLOW_MACHINE,
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE")
    or ("ci" if os.environ.get("CI", "").lower() not in ("", "0", "false") else "dev")
)


LONGEST = (
    "tests/integration/test_readme.py::",
    "tests/integration/test_faults.py::",
    "tests/integration/test_import_growth.py::test_two_hundred_stops",
    "tests/integration/test_pool_races.py::test_processes_racing",
    "tests/integration/test_git_model.py::",
    "tests/integration/test_watch_heal.py::test_stops_at_random_moments",
    "tests/integration/test_wheel.py::",
    "tests/integration/test_concurrency.py::",
    "tests/integration/test_pool.py::test_processes_racing",
    "tests/integration/test_safe_writes_property.py::",
    "tests/integration/test_search_gate.py::test_a_fresh_workspace",
)
"""Tests that take a minute or more (`--durations`), handed out before all others."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first, then the other slow ones (each in their order), so `make
    test`'s workers are not left with one long test each at the end while the others idle."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        longest = [n for n, prefix in enumerate(LONGEST) if item.nodeid.startswith(prefix)]
        if longest:
            return (0, longest[0])
        return (1 if item.get_closest_marker("slow") else 2, 0)

    items.sort(key=rank)


REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_workspace"


def _compile_mdmem() -> None:
    """mdmem's bytecode, made once before the tests start, for every process they start.

    Under PYTHONDONTWRITEBYTECODE (as CI's environment sets it) Python compiles a package it
    has no .pyc for at every start, and writes none: each of the suite's hundreds of ``mdmem``
    processes and ``python -c`` children compiled mdmem's ~150 modules again, about 0.3 s of
    CPU each. It still reads a .pyc that is there (checked against the source's mtime, so an
    edit is never missed): compiled here once, by the run's first process (xdist's controller,
    before its workers start), into mdmem's own ``__pycache__`` (git ignores it), what Python
    does anyway without that variable. Without it this finds everything compiled already."""
    if not sys.flags.dont_write_bytecode or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall

    compileall.compile_dir(REPO / "mdmem", quiet=2, workers=1)


_compile_mdmem()


@pytest.fixture(autouse=True)
def _own_global_workspace(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each test its own GLOBAL workspace folder ($MDMEM_GLOBAL, not created until used): one
    test's global preferences never show up in another's searches."""
    monkeypatch.setenv("MDMEM_GLOBAL", str(tmp_path_factory.mktemp("user-data") / "global"))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    """A fresh workspace made by `init`, in full mode."""
    return Workspace.init(tmp_path / "ws", mode="full", agent="coder")


@pytest.fixture
def example(tmp_path: Path) -> Workspace:
    """A private copy of example_workspace/."""
    target = tmp_path / "example"
    shutil.copytree(EXAMPLE, target)
    return Workspace.open(target)


@pytest.fixture(scope="session")
def embedder():
    """The real default model, loaded once per test session (offline, from its PyPI package)."""
    from mdmem.index.embed import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder()
    model.load()  # sentence-transformers for every text (it also makes the ONNX export, once)
    return model


@pytest.fixture(scope="session")
def indexed_template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """example_workspace/ indexed once with the real model; tests get copies of it.

    Once per test run, not per pytest-xdist worker: embedding its 191 chunks costs about 12 s
    of CPU, which each of `make test`'s workers paid on a shared 2-core machine. The first
    worker to need it builds it in the run's shared temporary folder (under a lock, renamed
    into place when complete); the others wait for it and use it. Nothing of a worker's own
    goes into it: the index holds relative paths and the model's vectors, the same in every
    process, and tests only ever copy it. A worker that uses it without the model (``make
    demo``'s copy) need not load the model at all."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        shared = tmp_path_factory.mktemp("template")
    else:  # the workers' folders (popen-gw0, ...) are in the run's folder
        shared = tmp_path_factory.getbasetemp().parent
    target = shared / "indexed"
    with open(shared / "indexed.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not target.exists():
            building = shared / "indexed.building"
            shutil.rmtree(building, ignore_errors=True)
            shutil.copytree(EXAMPLE, building)
            with Workspace.open(building, embedder=request.getfixturevalue("embedder")) as ws:
                ws.index.update()
            building.rename(target)
    return target


@pytest.fixture
def indexed(
    request: pytest.FixtureRequest, tmp_path: Path, indexed_template: Path, embedder
) -> Workspace:
    """A private copy of example_workspace/ with its index, ready to search. Parametrized
    with ``both_backends`` (tests/postgres_cluster.py), also with the index on PostgreSQL:
    the SQLite index copied into a throwaway cluster (nothing embedded again)."""
    target = tmp_path / "indexed"
    shutil.copytree(indexed_template, target)  # copy2 keeps mtimes: the index is fresh
    if getattr(request, "param", "sqlite") == "sqlite":
        return Workspace.open(target, embedder=embedder)
    from dataclasses import replace

    from mdmem.config import IndexConfig, load_config

    url = request.getfixturevalue("postgres").url
    config = replace(load_config(target), index=IndexConfig(backend="postgres", url=url))
    ws = Workspace(target, config, embedder=embedder)
    ws.index.copy_to_postgres()
    request.addfinalizer(ws.close)
    return ws


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A throwaway PostgreSQL cluster with pgvector for the session (tests/postgres_cluster.py).
    Without PostgreSQL the tests that use it skip, saying why; with CI=true they fail."""
    import postgres_cluster

    reason = postgres_cluster.unavailable()
    if reason is not None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"CI runs the PostgreSQL tests, but {reason}", pytrace=False)
        pytest.skip(reason)
    with postgres_cluster.cluster() as cluster:
        yield cluster


class Script(list):
    """The prompts (message lists) a scripted provider received, in order; ``kwargs`` holds
    everything litellm passed with each."""

    def __init__(self, replies: tuple[object, ...]) -> None:
        super().__init__()
        self.replies = list(replies)
        self.kwargs: list[dict] = []


@contextlib.contextmanager
def litellm_provider(name: str, handler: object) -> Iterator[None]:
    """Register a custom provider with litellm for the ``with`` block only.

    litellm keeps its providers in module-level lists (``custom_provider_map``, and
    ``provider_list`` / ``_custom_providers``, which ``custom_llm_setup`` appends to and nothing
    ever trims). Their contents are saved and put back in place, so no other test (nor later
    code holding the same list objects) ever sees this provider.
    """
    from mdmem.tokens import import_litellm

    litellm = import_litellm()
    from litellm.utils import custom_llm_setup

    lists = [litellm.custom_provider_map, litellm.provider_list, litellm._custom_providers]
    saved = [list(items) for items in lists]
    try:
        litellm.custom_provider_map[:] = [
            *(p for p in saved[0] if p["provider"] != name),
            {"provider": name, "custom_handler": handler},
        ]
        custom_llm_setup()  # registers the provider's name with litellm
        yield
    finally:
        for items, before in zip(lists, saved, strict=True):
            items[:] = before


@pytest.fixture
def register_provider():
    """``with register_provider(name, handler):`` a litellm custom provider, for that block."""
    return litellm_provider


@pytest.fixture
def scripted():
    """A litellm custom provider, ``scripted/<name>``, answering from a list of replies (a
    string, or an exception to raise as the provider's error); registered for this test only.

    The model calls go through litellm itself, as with a real provider: nothing of ours is
    replaced.
    """
    from mdmem.tokens import import_litellm

    litellm = import_litellm()

    def make(*replies: object) -> Script:
        script = Script(replies)

        class Handler(litellm.CustomLLM):
            def completion(self, *args, **kwargs):  # type: ignore[no-untyped-def]
                script.append(kwargs["messages"])
                script.kwargs.append(kwargs)
                reply = script.replies.pop(0)
                if isinstance(reply, BaseException):
                    raise reply
                return litellm.completion(
                    model="gpt-4o-mini", messages=kwargs["messages"], mock_response=reply
                )

        stack.enter_context(litellm_provider("scripted", Handler()))
        return script

    with contextlib.ExitStack() as stack:
        yield make
