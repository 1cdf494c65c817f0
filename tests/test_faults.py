"""The fault-injection suite (benchmarks/faults.py), run in CI: every fault, many times, and
nothing lost, nothing corrupted, every failure a clear error.

The editor races (4 × 1,000 saves) run in tests/test_editor_races.py; the README's table comes
from `.venv/bin/python benchmarks/faults.py`, which runs them all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import faults

pytestmark = pytest.mark.slow

NEEDS_ROOT = {"disk_full", "read_only_search"}


@pytest.mark.parametrize("name", sorted(faults.FAULTS))
def test_fault(name: str, tmp_path: Path) -> None:
    if name in NEEDS_ROOT and os.geteuid() != 0:
        pytest.skip("mounts a tmpfs: needs root")
    out = faults.FAULTS[name](tmp_path)
    for result in out if isinstance(out, list) else [out]:
        assert result.tried > 0, result
        assert result.ok, result
