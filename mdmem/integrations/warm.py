"""The warm query server of a running ``mdmem watch``, seen from an integration.

A search through it takes milliseconds (its model is loaded, its index open); without it the
integration searches in-process. The only module here that reaches into mdmem's internals
(the socket's path and its one-line protocol).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SEARCH_TIMEOUT_S = 30.0


def warm_search(root: Path, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The warm server's reply (``ok``, ``pid``, ``hits`` …), or None when none answers."""
    from mdmem.layout import socket_path
    from mdmem.live.server import request

    try:
        return request(
            socket_path(root),
            {"op": "search", "query": query, "params": params},
            timeout=SEARCH_TIMEOUT_S,
        )
    except (OSError, ValueError):
        return None


def warm_server_running(root: Path) -> bool:
    from mdmem.layout import socket_path
    from mdmem.live.server import ping

    return ping(socket_path(root))
