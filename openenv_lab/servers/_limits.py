"""Limits on what one client may take from our servers: sessions per client address, per batch, idle
sessions, the size of a reply, and the time of a step.

`SessionLimits` is ASGI middleware around a server's app. On ``/ws`` and ``/ws/batch`` it

- refuses a connection that would give one client address more than ``per_client`` sessions (a
  ``/ws/batch`` connection counts its ``?sessions=``) with one ``{"type": "error"}`` message whose code is
  ``LIMIT_EXCEEDED`` and whose text names the limit and the option that sets it, then a close (as the
  framework answers a full server); the batch route refuses a connection of more than ``max_batch``
  sessions the same way (`batch_refusal`; the route finds the limits in ``app.state.limits``);
- closes a connection that sends no request for ``idle_timeout`` seconds (close code 1001, the reason
  says why), which ends its sessions and frees their slots. A client that vanishes without closing (a
  frozen process, a dropped network) is found sooner by the server's WebSocket pings, which the client
  library answers by itself while its code is idle;
- sends, in place of a reply longer than ``max_reply_bytes``, an error whose code is
  ``REPLY_TOO_LARGE`` (an environment that knows a reply's size in advance, Atari's screens, refuses
  the request before doing any work instead);
- lets a step that ran past the server's step time limit end its connection (`end_connection`): the
  client gets an error whose code is ``STEP_TIMEOUT`` and a close (1008), and the session is gone.

On HTTP routes a reply longer than ``max_reply_bytes`` becomes a 400 with a JSON error. The maximum
number of sessions per server is the framework's own (``max_sessions``); the largest message read is
uvicorn's ``ws_max_size`` (see `_run.py`).

Example:
    >>> from openenv_lab.servers import Limits
    >>> Limits(per_client=8, max_reply_bytes=None).describe()
    'max 8 sessions per client address, idle sessions closed after 3600 s'
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_STEP_TIMEOUT",
    "LIMIT_CODE",
    "REPLY_TOO_LARGE",
    "STEP_TIMEOUT",
    "Limits",
    "SessionLimits",
    "StepTimeLimitExceeded",
    "batch_refusal",
    "end_connection",
    "reply_too_large",
]

#: Seconds without a request after which a session is closed (a forgotten notebook's slot comes back).
DEFAULT_IDLE_TIMEOUT = 3600.0
#: The longest reply a server sends: five times its largest real observation (an Atari screen of the
#: largest preprocessing ``screen_size``, 512 x 512 RGB as a JSON list, is about 3 MB).
DEFAULT_MAX_REPLY_BYTES = 16 << 20

#: Seconds a step may run before its session is ended (``serve --step-timeout``).
DEFAULT_STEP_TIMEOUT = 600.0


#: The error code of a refusal by one of these limits.
LIMIT_CODE = "LIMIT_EXCEEDED"
#: The error code of a reply that would have been longer than the server's ``max_reply_bytes``.
REPLY_TOO_LARGE = "REPLY_TOO_LARGE"
#: The error code of a step that ran past the server's step time limit (its session ends).
STEP_TIMEOUT = "STEP_TIMEOUT"

_SESSION_ROUTES = ("/ws", "/ws/batch")


class StepTimeLimitExceeded(TimeoutError):
    """A step ran past the server's step time limit; its session has ended."""

    def __init__(self, limit: float) -> None:
        super().__init__(
            f"This step ran for more than {limit:g} s, the server's limit (its --step-timeout): the session "
            "has ended. Open a new one, with options that make steps cheaper, or run the server with a "
            "larger --step-timeout"
        )
        self.limit = limit

    def data(self) -> dict[str, Any]:
        """The error message's data, as sent to the client."""
        return {"message": str(self), "code": STEP_TIMEOUT, "limit": "step_timeout", "seconds": self.limit}


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
    #: Bytes of the longest reply sent (a WebSocket message's text, an HTTP body).
    max_reply_bytes: int | None = DEFAULT_MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        for name in ("per_client", "idle_timeout", "max_batch", "max_reply_bytes"):
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
        if self.max_reply_bytes is not None:
            parts.append(f"replies of at most {self.max_reply_bytes:,} bytes")
        return ", ".join(parts) or "no session limits"


class SessionLimits:
    """ASGI middleware applying `Limits` to the session routes of ``app``."""

    def __init__(self, app: Any, limits: Limits) -> None:
        self.app = app
        self.limits = limits
        self._held: collections.Counter[str] = collections.Counter()  # sessions per client address

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.limits.max_reply_bytes is not None:
            await self.app(scope, receive, _BoundedHTTPReply(send, self.limits.max_reply_bytes).send)
            return
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
        connection = _Connection(receive, send, self.limits.idle_timeout, self.limits.max_reply_bytes)
        token = _current.set(connection)
        try:
            await self.app(scope, connection.receive, connection.send)
        finally:
            connection.stop()
            _current.reset(token)
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


def reply_too_large(size: int, limit: int) -> dict[str, Any]:
    """The error data sent in place of a reply of ``size`` bytes, over the server's ``limit``."""
    return {
        "message": f"The reply would be {size:,} bytes, more than this server sends ({limit:,}, its "
        "--max-reply-bytes): ask for smaller observations (Atari: a smaller screen_size, "
        "screen_encoding='zlib'), or run the server with a larger --max-reply-bytes",
        "code": REPLY_TOO_LARGE,
        "limit": "max_reply_bytes",
        "size": size,
        "max_reply_bytes": limit,
    }


#: The WebSocket connection whose request is being handled (set by `SessionLimits` for the handler's task).
_current: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar("connection", default=None)


async def end_connection(data: dict[str, Any], reason: str) -> bool:
    """End the WebSocket connection whose request is being handled: send ``data`` as an error message,
    then close it (1008, ``reason``); its handler then reads a disconnect, as a client that left. False
    when there is none (an HTTP request, an app without `SessionLimits`)."""
    connection = _current.get()
    if connection is None:
        return False
    await connection.end(data, reason)
    return True


class _BoundedHTTPReply:
    """The ``send`` of one HTTP request that turns a reply longer than ``limit`` (by its content-length)
    into a 400 with `reply_too_large`'s JSON."""

    def __init__(self, send: Any, limit: int) -> None:
        self._send = send
        self._limit = limit
        self._refused = False

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            size = _content_length(message.get("headers", ()))
            if size is not None and size > self._limit:
                self._refused = True
                body = json.dumps({"detail": reply_too_large(size, self._limit)["message"]}).encode()
                length = str(len(body)).encode()
                headers = [(b"content-type", b"application/json"), (b"content-length", length)]
                await self._send({"type": "http.response.start", "status": 400, "headers": headers})
                await self._send({"type": "http.response.body", "body": body})
                return
        elif self._refused:
            return  # the refused reply's body
        await self._send(message)


def _content_length(headers: Any) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            with contextlib.suppress(ValueError):
                return int(value)
    return None


def _message_size(message: dict[str, Any], limit: int) -> int:
    """The bytes of a WebSocket message, counted only where they could exceed ``limit`` (a text of n
    characters is n to 4n bytes in UTF-8)."""
    text = message.get("text")
    if text is None:
        return len(message.get("bytes") or b"")
    if len(text) > limit or 4 * len(text) <= limit:
        return len(text)
    return len(text.encode())


class _Connection:
    """``receive``/``send`` of one WebSocket connection: they close it after ``seconds`` without a client
    message (none: never), send an error in place of a message longer than ``max_reply`` bytes, and end
    it on request (`end`).

    On Python 3.11+ one timer per connection watches the waits: it fires at the earliest moment the
    current wait could have lasted ``seconds``, and either cancels that wait (an idle close) or sets
    itself again for the wait then in progress. A timer per message (``asyncio.timeout`` around each
    receive) cost the server, per message, about as much CPU as a cheap environment's whole step.
    The cancellation is told from any other one (a server shutting down) as ``asyncio.timeout`` tells
    them apart, by the task's count of cancellation requests. uvicorn's receive is a queue's get, which
    a cancellation leaves with its message still queued.
    """

    def __init__(self, receive: Any, send: Any, seconds: float | None, max_reply: int | None = None) -> None:
        self._receive = receive
        self._send = send
        self._seconds = seconds
        self._max_reply = max_reply
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
        if self._seconds is None or not self._connected:  # the handshake's event: no timeout before accept
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
        reason = f"no request for {self._seconds:g} s: idle session closed (server's --idle-timeout)"
        await self._close(1001, reason)
        return {"type": "websocket.disconnect", "code": 1001}

    async def end(self, data: dict[str, Any], reason: str) -> None:
        """Send ``data`` as an error message, then close the connection (1008, ``reason``)."""
        if self._closed:
            return
        with contextlib.suppress(Exception):
            await self._send({"type": "websocket.send", "text": json.dumps({"type": "error", "data": data})})
        await self._close(1008, reason)

    async def _close(self, code: int, reason: str) -> None:
        self._closed = True
        self.stop()
        with contextlib.suppress(Exception):
            await self._send({"type": "websocket.close", "code": code, "reason": reason[:120]})

    async def send(self, message: Any) -> None:
        if self._closed:  # after an idle close or an end, the route's own goodbye has nowhere to go
            return
        if self._max_reply is not None and message["type"] == "websocket.send":
            size = _message_size(message, self._max_reply)
            if size > self._max_reply:
                refusal = {"type": "error", "data": reply_too_large(size, self._max_reply)}
                message = {"type": "websocket.send", "text": json.dumps(refusal)}
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
