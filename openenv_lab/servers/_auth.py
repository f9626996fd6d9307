"""The token our servers require when they are reachable from other machines.

A server bound to anything but a loopback address answers only requests that carry its token,
``Authorization: Bearer <token>`` (the scheme's name in any case, as RFC 7235 has it), on every HTTP
request and on the WebSocket upgrade: without it, HTTP
gets ``401`` with a JSON error and a WebSocket is refused before any session opens. The token comes from
``--token``, else ``$OPENENV_LAB_TOKEN``, else is generated and printed with the server's address. A
server on loopback (the default) needs none unless given one with ``--token``. ``--no-token`` serves
everyone, for a server behind a proxy that does its own checks (a public Hugging Face Space).

``GET /health`` answers without the token: load balancers and Docker or Kubernetes probes
call it bare, and it says only that the server is up. Every other route needs the token.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
from typing import Any

__all__ = ["TOKEN_VARIABLE", "TokenGate", "needs_token", "server_token"]

#: Where servers (and our client) read the token when none is given explicitly.
TOKEN_VARIABLE = "OPENENV_LAB_TOKEN"


def needs_token(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from other machines (anything but loopback)."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name: it may resolve to anything


def server_token(host: str, token: str | None, *, open_to_all: bool = False) -> tuple[str | None, bool]:
    """The token to require (None: none), and whether it was generated here (then print it)."""
    if open_to_all:
        return None, False
    if token or not needs_token(host):
        return token or None, False  # loopback: a token only when one is given
    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is None:
        return secrets.token_urlsafe(24), True
    return token, False


class TokenGate:
    """ASGI middleware letting through only the requests that carry ``token``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        detail = "This server needs its token: send 'Authorization: Bearer <token>' (token=... in make)"
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        elif "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})  # refused before accepting: HTTP 403

    def _allowed(self, scope: dict[str, Any]) -> bool:
        if scope["type"] == "http" and scope.get("path") == "/health" and scope.get("method") == "GET":
            return True  # probes call it bare
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                bearer = scheme.lower() == b"bearer"
                return bearer and hmac.compare_digest(credentials.strip(), self._expected)
        return False
