"""How hard the stress tests push. ``make test`` runs each at a size that still races real
processes many times over and fits the suite's 20 minutes on two cores; ``MDMEM_STRESS=full``
runs the sizes the docs' figures come from (docs/development.md)."""

from __future__ import annotations

import os

FULL = os.environ.get("MDMEM_STRESS") == "full"


def size(ci: int, full: int) -> int:
    """``full`` under ``MDMEM_STRESS=full``, else ``ci``."""
    return full if FULL else ci
