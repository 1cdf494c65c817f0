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


def split_host(value: str) -> tuple[str, str | None]:
    """``HOST[:PORT]`` as a Host header carries it: (host, port or None); an IPv6 address in
    brackets (``[::1]:8765``), or bare (``::1``, then without a port). ValueError naming
    ``--allow-host`` for anything else."""
    text = value.strip()
    if text.startswith("["):
        host, _, rest = text.partition("]")
        host += "]"
        port = rest.removeprefix(":") if rest.startswith(":") else None
        if rest and port is None:
            raise ValueError(f"--allow-host {value!r}: expected HOST, HOST:PORT or [IPv6]:PORT")
    elif text.count(":") > 1:  # a bare IPv6 address
        host, port = f"[{text}]", None
    else:
        host, _, after = text.partition(":")
        port = after if ":" in text else None
    if (
        not host
        or host == "[]"
        or (port is not None and not (port.isdigit() and 0 < int(port) < 65536))
    ):
        raise ValueError(f"--allow-host {value!r}: expected HOST, HOST:PORT or [IPv6]:PORT")
    return host, port


def allowed_hosts(host: str, extra: list[str]) -> list[str]:
    """Host headers the SDK's DNS-rebinding protection lets through: each loopback name, the
    address served on and every ``--allow-host`` at any port (``name:*``) and without one,
    or exactly ``name:port`` when the port was given."""
    served = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = [*LOOPBACK_NAMES]
    if host not in ("0.0.0.0", "::") and served not in names:
        names.append(served)
    allowed = [form for name in names for form in (f"{name}:*", name)]
    for value in extra:
        name, port = split_host(value)
        forms = [f"{name}:{port}"] if port else [f"{name}:*", name]
        allowed += [form for form in forms if form not in allowed]
    return allowed


def host_allowed(header: str, allowed: list[str]) -> bool:
    """The SDK's rule: an exact entry, or ``name:*`` and the header ``name:`` plus a port."""
    return header in allowed or any(a.endswith(":*") and header.startswith(a[:-1]) for a in allowed)


class HostGuard:
    """ASGI middleware: a Host header the server does not answer to gets 421 with what to
    pass (the SDK's own check, behind it, says only "Invalid Host header")."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")
            if not host_allowed(header, self.allowed):
                await _plain(send, 421, _wrong_host(header))
                return
        await self.app(scope, receive, send)


def _wrong_host(header: str) -> bytes:
    if not header:
        return b"Invalid Host header: none given\n"
    shown = header.encode("ascii", "backslashreplace").decode("ascii")
    return (
        f"Invalid Host header {shown!r}: this server does not answer to that name. If it is "
        f"this machine's address, start the server with --allow-host {shown} "
        "(HOST:PORT as in the URL the client uses, or HOST for any port)\n"
    ).encode()


async def _plain(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
