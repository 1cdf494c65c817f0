"""The folders a test run makes outside pytest's tmp_path, and that they go away
(tests/conftest.py): the model cache alone (its ONNX export) is 170 MB a run, and none was ever
removed (pytest's tmp_path keeps the last three runs' and removes older ones itself)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile


def folder_of_this_process(prefix: str) -> str:
    """A new temporary folder, removed with what it holds when this process exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def unless_set(name: str, prefix: str) -> dict[str, str]:
    """``{name: a new folder of this process}``, unless the environment sets ``name`` (to a
    folder the run's first process made, which its xdist workers share, or one of the user's
    choosing): then nothing, and no folder is made."""
    return {} if name in os.environ else {name: folder_of_this_process(prefix)}
