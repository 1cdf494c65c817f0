from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mdmem import Workspace

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
