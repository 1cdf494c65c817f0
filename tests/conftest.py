from __future__ import annotations

import os

# Tests never touch the network: set before anything imports litellm or transformers.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datetime as dt
import shutil
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
    deadline=dt.timedelta(seconds=10),  # a slow, shared 2-core machine
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

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_workspace"


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
    model.embed(["warm up"])
    return model


@pytest.fixture(scope="session")
def indexed_template(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """example_workspace/ indexed once with the real model; tests get copies of it."""
    target = tmp_path_factory.mktemp("template") / "indexed"
    shutil.copytree(EXAMPLE, target)
    with Workspace.open(target, embedder=embedder) as ws:
        ws.sync()
    return target


@pytest.fixture
def indexed(tmp_path: Path, indexed_template: Path, embedder) -> Workspace:
    """A private copy of example_workspace/ with its index, ready to search."""
    target = tmp_path / "indexed"
    shutil.copytree(indexed_template, target)  # copy2 keeps mtimes: the index is fresh
    return Workspace.open(target, embedder=embedder)


class Script(list):
    """The prompts (message lists) a scripted provider received, in order; ``kwargs`` holds
    everything litellm passed with each."""

    def __init__(self, replies: tuple[object, ...]) -> None:
        super().__init__()
        self.replies = list(replies)
        self.kwargs: list[dict] = []


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    """A litellm custom provider, ``scripted/<name>``, answering from a list of replies (a
    string, or an exception to raise as the provider's error).

    The model calls go through litellm itself, as with a real provider: nothing of ours is
    replaced.
    """
    from mdmem.tokens import import_litellm

    litellm = import_litellm()
    from litellm.utils import custom_llm_setup

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

        provider = [{"provider": "scripted", "custom_handler": Handler()}]
        monkeypatch.setattr(litellm, "custom_provider_map", provider)
        custom_llm_setup()  # registers the provider's name with litellm
        return script

    return make
