"""The workspace: :class:`Workspace` (the facade), its named parts, and the wiring behind them."""

from mdmem.workspace.facade import Workspace as Workspace
from mdmem.workspace.wiring import SEARCH_SYNC_MAX_BYTES as SEARCH_SYNC_MAX_BYTES

__all__ = ["SEARCH_SYNC_MAX_BYTES", "Workspace"]
