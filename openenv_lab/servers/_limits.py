"""Limits on the WebSocket sessions of our servers: per client address, per batch, and for idle sessions.

`SessionLimits` is ASGI middleware around a server's app. On ``/ws`` and ``/ws/batch`` it

- refuses a connection that would give one client address more than ``per_client`` sessions (a
  ``/ws/batch`` connection counts its ``?sessions=``) with one ``{"type": "error"}`` message whose code is
  ``LIMIT_EXCEEDED`` and whose text names the limit and the option that sets it, then a close (as the
  framework answers a full server); the batch route refuses a connection of more than ``max_batch``
  sessions the same way (`batch_refusal`; the route finds the limits in ``app.state.limits``);
- closes a connection that sends no request for ``idle_timeout`` seconds (close code 1001, the reason
  says why), which ends its sessions and frees their slots. A client that vanishes without closing (a
  frozen process, a dropped network) is found sooner by the server's WebSocket pings, which the client
  library answers by itself while its code is idle.

Every other request passes through untouched. The maximum number of sessions per server is the
framework's own (``max_sessions``); the largest message is uvicorn's ``ws_max_size`` (see `_run.py`).

Example:
    >>> from openenv_lab.servers import Limits
    >>> Limits(per_client=8).describe()
    'max 8 sessions per client address, idle sessions closed after 3600 s'
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_IDLE_TIMEOUT", "LIMIT_CODE", "Limits", "SessionLimits", "batch_refusal"]

#: Seconds without a request after which a session is closed (a forgotten notebook's slot comes back).
DEFAULT_IDLE_TIMEOUT = 3600.0

#: The error code of a refusal by one of these limits.
LIMIT_CODE = "LIMIT_EXCEEDED"

_SESSION_ROUTES = ("/ws", "/ws/batch")

#: Whether tasks count their cancellation requests (Python 3.11+), which tells our cancellation apart.
_uncancel = hasattr(asyncio.Task, "uncancel")


@dataclass(frozen=True)
class Limits:
    """The session limits of one server; ``None`` means no limit beyond the server's ``max_sessions``."""

    #: Sessions one client address may hold at once.
    per_client: int | None = None
    #: Seconds a WebSocket may stay without a request before the server closes it.
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT
    #: Sessions one ``/ws/batch`` connection may hold (so: requests in one batch message).
    max_batch: int | None = None

    def __post_init__(self) -> None:
        for name in ("per_client", "idle_timeout", "max_batch"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive (or None for no limit), got {value!r}")

    def describe(self) -> str:
        """The limits in words, for a server's log."""
        parts = []
        if self.per_client is not None:
            parts.append(f"max {self.per_client} sessions per client address")
        if self.max_batch is not None:
            parts.append(f"max {self.max_batch} sessions per /ws/batch connection")
        if self.idle_timeout is not None:
            parts.append(f"idle sessions closed after {self.idle_timeout:g} s")
        return ", ".join(parts) or "no session limits"


class SessionLimits:
    """ASGI middleware applying `Limits` to the session routes of ``app``."""

    def __init__(self, app: Any, limits: Limits) -> None:
        self.app = app
        self.limits = limits
        self._held: collections.Counter[str] = collections.Counter()  # sessions per client address

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket" or scope.get("path") not in _SESSION_ROUTES:
            await self.app(scope, receive, send)
            return
        asked = _sessions_asked(scope)
        address = (scope.get("client") or ("unknown",))[0]
        refusal = self._refusal(asked, address)
        if refusal is not None:
            await _refuse(receive, send, refusal)
            return
        self._held[address] += asked
        try:
            if self.limits.idle_timeout is None:
                await self.app(scope, receive, send)
            else:
                idle = _IdleClose(receive, send, self.limits.idle_timeout)
                try:
                    await self.app(scope, idle.receive, idle.send)
                finally:
                    idle.stop()
        finally:
            self._held[address] -= asked
            if self._held[address] <= 0:
                del self._held[address]

    def _refusal(self, asked: int, address: str) -> dict[str, Any] | None:
        limits = self.limits
        held = self._held[address]
        if limits.per_client is not None and held + asked > limits.per_client:
            return {
                "message": f"This client address ({address}) holds {held} sessions and asked for {asked} "
                f"more; the server allows {limits.per_client} per address (its "
                "--max-sessions-per-client). Close sessions you no longer need, or use another server",
                "code": LIMIT_CODE,
                "limit": "per_client",
                "held": held,
                "per_client": limits.per_client,
            }
        return None


def batch_refusal(asked: int, limits: Limits | None) -> dict[str, Any] | None:
    """The error data refusing a ``/ws/batch`` connection of ``asked`` sessions, or None when allowed (the
    batch route asks, after it has checked that the server could hold them at all)."""
    if limits is None or limits.max_batch is None or asked <= limits.max_batch:
        return None
    return {
        "message": f"?sessions={asked} is more than one /ws/batch connection may hold on this server "
        f"({limits.max_batch}, its --max-batch): open several connections of at most {limits.max_batch} "
        'sessions (GET /capacity says "max_batch")',
        "code": LIMIT_CODE,
        "limit": "max_batch",
        "max_batch": limits.max_batch,
    }


def _sessions_asked(scope: dict[str, Any]) -> int:
    """Sessions a connection asks for: one on ``/ws``, ``?sessions=`` on ``/ws/batch`` (the route itself
    refuses a value that is not a positive integer)."""
    if scope.get("path") != "/ws/batch":
        return 1
    query = scope.get("query_string", b"").decode("latin-1")
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "sessions":
            with contextlib.suppress(ValueError):
                return max(1, int(value))
    return 1


async def _refuse(receive: Any, send: Any, data: dict[str, Any]) -> None:
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": json.dumps({"type": "error", "data": data})})
    await send({"type": "websocket.close", "code": 1008, "reason": "limit exceeded"})


class _IdleClose:
    """``receive``/``send`` of one connection that close it after ``seconds`` without a client message.

    On Python 3.11+ one timer per connection watches the waits: it fires at the earliest moment the
    current wait could have lasted ``seconds``, and either cancels that wait (an idle close) or sets
    itself again for the wait then in progress. A timer per message (``asyncio.timeout`` around each
    receive) cost the server, per message, about as much CPU as a cheap environment's whole step.
    The cancellation is told from any other one (a server shutting down) as ``asyncio.timeout`` tells
    them apart, by the task's count of cancellation requests. uvicorn's receive is a queue's get, which
    a cancellation leaves with its message still queued.
    """

    def __init__(self, receive: Any, send: Any, seconds: float) -> None:
        self._receive = receive
        self._send = send
        self._seconds = seconds
        self._connected = False
        self._closed = False
        self._pending: asyncio.Future[Any] | None = None  # Python 3.10: the receive being waited on
        self._task: asyncio.Task[Any] | None = None  # the connection's task, whose waits are watched
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_since: float | None = None  # the loop time the wait in progress began
        self._expired = False

    async def receive(self) -> Any:
        if self._closed:
            return {"type": "websocket.disconnect", "code": 1001}
        if not self._connected:  # the handshake's event: no timeout before the route accepts
            self._connected = True
            return await self._receive()
        if _uncancel:
            task = asyncio.current_task()
            if self._task is None and task is not None:
                self._task, self._loop = task, asyncio.get_running_loop()
                self._timer = self._loop.call_later(self._seconds, self._check)
            if task is self._task:
                cancelling = task.cancelling()
                self._waiting_since = self._loop.time()
                try:
                    return await self._receive()
                except asyncio.CancelledError:
                    if not self._expired or task.uncancel() > cancelling:
                        raise  # not (only) ours: the server is stopping, say
                finally:
                    self._waiting_since = None
            else:  # a wait from another task (no route does that): a timer of its own
                try:
                    async with asyncio.timeout(self._seconds):
                        return await self._receive()
                except TimeoutError:
                    pass
        else:  # Python 3.10: a task to wait on
            if self._pending is None:
                self._pending = asyncio.ensure_future(self._receive())
            try:
                done, _ = await asyncio.wait({self._pending}, timeout=self._seconds)
            except asyncio.CancelledError:
                self._pending.cancel()
                raise
            if done:
                message, self._pending = self._pending.result(), None
                return message
            self._pending.cancel()
            self._pending = None
        self._closed = True
        self.stop()
        reason = f"no request for {self._seconds:g} s: idle session closed (server's --idle-timeout)"
        with contextlib.suppress(Exception):
            await self._send({"type": "websocket.close", "code": 1001, "reason": reason[:120]})
        return {"type": "websocket.disconnect", "code": 1001}

    async def send(self, message: Any) -> None:
        if not self._closed:  # after an idle close, the route's own goodbye has nowhere to go
            await self._send(message)

    def stop(self) -> None:
        """Stop watching (the connection has ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        """The timer: cancel a wait that has lasted ``seconds``, else watch again until the wait in
        progress (or, when none is, the next one) could have."""
        self._timer = None
        task, loop = self._task, self._loop
        if task is None or loop is None or task.done() or self._closed:
            return
        since = self._waiting_since
        if since is None:
            delay = self._seconds
        else:
            delay = since + self._seconds - loop.time()
            if delay <= 0:
                self._expired = True
                task.cancel()
                return
        self._timer = loop.call_later(delay, self._check)
