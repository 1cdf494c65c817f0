"""Who may reach ``mdmem mcp --http``: loopback by default, a bearer token for anything else.

Kept apart from the MCP SDK so the CLI refuses a bad host before importing it.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, token: str | None) -> None:
    """A host other than loopback serves the whole workspace to a network: only with a token."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"--host {host} is not a loopback address: anyone who reaches it could read and "
            "write this workspace. Give --token (or MDMEM_MCP_TOKEN), or serve on 127.0.0.1"
        )


def allowed_hosts(host: str, extra: list[str]) -> list[str]:
    """Host headers the SDK's DNS-rebinding protection lets through (any port)."""
    names = [*LOOPBACK_NAMES]
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if host not in ("0.0.0.0", "::") and shown not in names:
        names.append(shown)
    names += [name for name in extra if name not in names]
    return [f"{name}:*" for name in names]


class BearerToken:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"missing or wrong token\n"})
                return
        await self.app(scope, receive, send)
