"""The two drivers of a WebSocket to an OpenEnv server: `ThreadDriver` (the calling thread sends and reads)
and `LoopDriver` (an asyncio event loop does).

A connection carries its sessions' requests in one of two wire formats (`WireFormat`, no I/O): ``/ws``,
one session and one request a message (`Session`, `AsyncSession`), or our ``/ws/batch``, many sessions
and one message for all their requests (`SyncChannel`, `Channel`). Everything else is written here once
for all four: opening the connection and asking each session's state (a full server, or a URL that is not
OpenEnv, is reported at once), sending, reading replies in the order their messages went out (several may
be in flight), the request timeout, the errors, and closing.

Any failure of the connection drops it: a timeout, a close, an interrupt (Ctrl+C), a garbled or refused
message, or an error after which the server closes the session (`FATAL_CODES`). Replies still on their way
could no longer be matched to their requests. Why it ended is kept (`ClosedBecause`), and every later
request raises it.

A session of a driver (one of its ``sessions``: ``channel`` and ``index``) plays with ``reset``, ``step``
and ``state`` (`SyncPlay`, `AsyncPlay`). A one-session driver is its own session.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import weakref
from typing import Any

from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as connect_async
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as connect_sync

from . import _protocol
from ._config import Keepalive, Timeouts
from ._direct import DirectConnection
from ._protocol import SESSION_WIRE, Entry, StepResult, WireFormat
from ._urls import http_url, is_loopback, ws_url
from .errors import ClosedBecause, ProtocolError, ServerError, connect_error, transport_error

__all__ = ["AsyncPlay", "LoopDriver", "OneSession", "SyncPlay", "ThreadDriver", "direct_usable", "within"]

#: Largest message accepted from a server. Atari screens as JSON lists are about 0.5 MB; 100 MiB is
#: the limit the official client uses.
MAX_MESSAGE_BYTES = 100 * 1024 * 1024


def direct_usable(base_url: str, compression: str | None = None) -> bool:
    """Whether the calling thread can read the socket itself (`DirectConnection`): plain ``ws://`` to this
    machine, uncompressed. Elsewhere websockets' own client brings TLS, proxies and compression."""
    return compression is None and ws_url(http_url(base_url)).startswith("ws://") and is_loopback(base_url)


def read_reply(kind: str, reply: Any, url: str) -> StepResult | dict[str, Any]:
    """One reply to a request of ``kind``: the session's state for ``"state"``, else the observation (or
    the error it carries, raised)."""
    if kind == "state":
        return _protocol.reply_data(reply, expected="state", url=url)
    return _protocol.observation_data(reply, url=url)


class _Driver:
    """What both drivers share: the URL, the sessions, the counters, and reading one reply.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8000"``.
        route: ``"/ws"``, or the batch route ``GET /capacity`` announces.
        size: the sessions the connection holds (1 on ``/ws``).
        wire: the route's format (`SESSION_WIRE`, `BATCH_WIRE`).
        timeouts, keepalive, headers, compression: as `Session` takes them.
    """

    def __init__(
        self,
        base_url: str,
        route: str,
        size: int,
        wire: WireFormat,
        *,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        compression: str | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"A channel holds at least one session, got {size}")
        self.base_url = http_url(base_url)
        self.url = wire.url(self.base_url, route, size)
        self.timeouts = Timeouts.of(timeouts)
        self.wire = wire
        self.size = size
        #: The sessions: a one-session driver is its own; a channel's are made by its class.
        self.sessions: list[Any] = [] if wire.batched else [self]
        self.bytes_sent = 0
        self.bytes_received = 0
        self._why = ClosedBecause(self.url, one=not wire.batched)
        self._keepalive = keepalive or Keepalive()
        self._headers = headers
        self._compression = compression

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (by `close`, by the server, or after a failure)."""
        return self._ws is None  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        sessions = f" {self.size} sessions" if self.wire.batched else ""
        return f"<{type(self).__name__} {self.url}{sessions} {'closed' if self.closed else 'open'}>"

    def read(self, kind: str, reply: Any) -> StepResult | dict[str, Any]:
        """One of the replies of `request` (or `receive`) to a request of ``kind``, or the error it carries,
        raised; an error after which the server closes the session drops the connection."""
        try:
            return read_reply(kind, reply, self.url)
        except ServerError as exc:
            if exc.code in _protocol.FATAL_CODES:
                self._drop()  # type: ignore[attr-defined]
            raise

    def _connect_options(self) -> dict[str, Any]:
        """Keyword arguments of ``websockets``' ``connect`` (sync and asyncio alike)."""
        return {
            "open_timeout": self.timeouts.connect,
            "close_timeout": self.timeouts.close,
            "ping_interval": self._keepalive.interval,
            "ping_timeout": self._keepalive.timeout,
            "max_size": MAX_MESSAGE_BYTES,
            "compression": self._compression,
            "additional_headers": self._headers,
            "proxy": None if is_loopback(self.base_url) else True,
        }

    def _states_read(self, replies: list[Any]) -> None:
        """Each session's first state: refusals (capacity, factory errors) raise now, not mid-episode."""
        for reply in replies:
            try:
                self.read("state", reply)
            except ServerError as exc:
                if exc.code in _protocol.FATAL_CODES:
                    raise
                # Some environments cannot report a state before their first reset: that is fine.


class ThreadDriver(_Driver):
    """A connection whose requests the calling thread sends and whose replies it reads.

    Never asyncio, so it works the same in a script, a worker thread and a running Jupyter kernel. On
    loopback (`direct_usable`) the thread reads the socket itself (`DirectConnection`): no hand-over from a
    reader thread. Not thread-safe. Takes the arguments of `_Driver`, and connects at once.
    """

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self._pending: collections.deque[int] = collections.deque()  # each message's request count
        self._ws: Any = None
        try:
            if direct_usable(self.base_url, self._compression):
                connection: Any = DirectConnection.connect(
                    self.url,
                    open_timeout=self.timeouts.connect,
                    close_timeout=self.timeouts.close,
                    send_timeout=self.timeouts.request,
                    ping_interval=self._keepalive.interval,
                    ping_timeout=self._keepalive.timeout,
                    max_size=MAX_MESSAGE_BYTES,
                    additional_headers=self._headers,
                )
            else:  # as websockets asks, entered as a context (closed by the finalizer)
                connection = connect_sync(self.url, **self._connect_options()).__enter__()
        except Exception as exc:
            raise connect_error(exc, self.base_url, self.url, self.timeouts) from None
        self._ws = connection
        self._finalizer = weakref.finalize(self, connection.close)
        try:
            self._states_read(self.request([(i, "state", None) for i in range(self.size)]))
        except BaseException:
            self._drop()  # a garbled reply, an interrupt: do not hold the server's slots
            raise

    @property
    def in_flight(self) -> int:
        """Messages sent whose replies have not been received yet."""
        return len(self._pending)

    def submit(self, entries: list[Entry]) -> None:
        """Send one message of ``(session, kind, data)`` requests; `receive` returns their replies."""
        ws = self._ws
        if ws is None:
            raise self._why.error()
        message = self.wire.encode(entries)  # first: an action that cannot be sent leaves no slot
        self._pending.append(len(entries))
        try:
            with contextlib.suppress(ConnectionClosed):  # the server may have said why: `receive` reads it
                ws.send(message)
        except TimeoutError as exc:
            self._drop()
            raise transport_error(exc, self.url, self.timeouts) from None
        except BaseException:  # interrupted half-way (Ctrl+C): the stream can no longer be trusted
            self._drop()
            raise
        self.bytes_sent += len(message)

    def receive(self) -> list[Any]:
        """The replies to the oldest message in flight (one per request, for `read`), within
        ``timeouts.request``."""
        ws = self._ws
        if ws is None:
            raise self._why.error()
        if not self._pending:
            raise ProtocolError(f"No batch is in flight on {self.url}: submit one first", url=self.url)
        try:
            raw = ws.recv(timeout=self.timeouts.request)
        except (TimeoutError, ConnectionClosed) as exc:
            self._drop()
            raise transport_error(exc, self.url, self.timeouts) from None
        except BaseException:
            self._drop()  # interrupted while waiting: its reply would pass for the next request's
            raise
        self.bytes_received += len(raw)
        try:
            return self.wire.decode(raw, count=self._pending.popleft(), url=self.url)
        except Exception:  # refused as a whole, or garbled: nothing after it can be trusted
            self._drop()
            raise

    def request(self, entries: list[Entry]) -> list[Any]:
        """`submit` one message and `receive` its replies."""
        self.submit(entries)
        return self.receive()

    def has_reply(self) -> bool:
        """Whether `receive` returns (or raises) at once; otherwise wait for `fileno` to be readable.
        On loopback only (`direct_usable`), as `fileno` and `poll`."""
        return self._ws is None or self._ws.has_message()

    def fileno(self) -> int:
        return -1 if self._ws is None else self._ws.fileno()

    def poll(self) -> bool:
        """Read what has arrived without waiting; then whether `receive` returns (or raises) at once."""
        return self._ws is None or self._ws.poll()

    def close(self) -> None:
        """End every session of the connection and free their slots. Safe to call more than once."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed, OSError):
                ws.send(_protocol.close_message())
            self._finalizer()  # the closing handshake waits at most ``timeouts.close``
        self._pending.clear()
        self._why.closed()

    def _drop(self) -> None:
        """Close after a failed or interrupted request; later requests say the sessions were dropped."""
        self._why.dropped()
        ws, self._ws = self._ws, None
        self._pending.clear()
        if ws is not None:
            self._finalizer()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


async def within(awaitable: Any, seconds: float) -> Any:
    """``await`` with a deadline; ``asyncio.timeout`` (3.11+) avoids the extra task ``wait_for`` makes."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)


class LoopDriver(_Driver):
    """A connection driven by the running asyncio event loop: open it with ``await cls.open(...)``.

    A reader task hands each reply to the request waiting for it, so requests of many connections
    overlap on one loop (`openenv_lab.client.loop.LoopTransport`). Takes the arguments of `_Driver`.
    """

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self._ws: AsyncConnection | None = None
        self._pending: collections.deque[tuple[asyncio.Future[list[Any]], int]] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None  # a connection dropped mid-request, closing

    @classmethod
    async def open(cls, *args: Any, **options: Any) -> Any:
        """Make one with these arguments, connect, and ask every session for its state once (capacity and
        protocol errors surface here)."""
        driver = cls(*args, **options)
        try:
            driver._ws = await connect_async(driver.url, **driver._connect_options())
        except Exception as exc:
            raise connect_error(exc, driver.base_url, driver.url, driver.timeouts) from None
        driver._reader = asyncio.get_running_loop().create_task(driver._read())
        try:
            driver._states_read(await driver.request([(i, "state", None) for i in range(driver.size)]))
        except BaseException:
            await driver.close()
            raise
        return driver

    async def request(self, entries: list[Entry]) -> list[Any]:
        """Send one message of ``(session, kind, data)`` requests and return their replies, within
        ``timeouts.request`` (after which the connection is dropped: a late reply could pass for the next)."""
        future = await self.submit(entries)
        try:
            return await within(future, self.timeouts.request)
        except (TimeoutError, asyncio.TimeoutError):
            self._drop()
            raise transport_error(TimeoutError(), self.url, self.timeouts) from None
        except asyncio.CancelledError:
            self._drop()
            raise

    async def submit(self, entries: list[Entry]) -> asyncio.Future[list[Any]]:
        """Send one message and return the future of its replies (one per request, for `read`)."""
        ws = self._ws
        if ws is None:
            raise self._why.error()
        message = self.wire.encode(entries)  # first: an action that cannot be sent leaves no slot
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._pending.append((future, len(entries)))
        with contextlib.suppress(ConnectionClosed):  # the reader reports why the connection ended
            await ws.send(message)
        self.bytes_sent += len(message)
        return future

    async def close(self) -> None:
        """End every session of the connection and free their slots. Safe to call more than once."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed, OSError):
                await ws.send(_protocol.close_message())
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), self.timeouts.close)
        self._fail(self._why.closed())
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.wait([self._reader])  # its end, not its exception (a cancel of close() counts)
        closing, self._closing = self._closing, None
        if closing is not None:
            with contextlib.suppress(Exception):
                await closing

    def _drop(self) -> None:
        """Drop the connection now (it closes in the background; `close` waits for that): for a request
        that failed, timed out or was cancelled while its replies were on their way."""
        ws, self._ws = self._ws, None
        if ws is not None:
            self._closing = asyncio.get_running_loop().create_task(self._close_within(ws))
        self._fail(self._why.dropped(None))

    async def _close_within(self, ws: AsyncConnection) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), self.timeouts.close)

    async def _read(self) -> None:
        ws = self._ws
        assert ws is not None
        try:
            while True:
                raw = await ws.recv()
                if not self._pending:
                    raise ProtocolError(f"The server at {self.url} sent a reply nobody asked for")
                future, count = self._pending.popleft()
                self.bytes_received += len(raw)
                if future.done():  # its request was given up: the connection is being dropped anyway
                    continue
                try:
                    future.set_result(self.wire.decode(raw, count=count, url=self.url))
                except Exception as exc:  # refused as a whole, or garbled: no reply can be trusted
                    future.set_exception(exc)
                    raise
        except ConnectionClosed as exc:
            self._ws = None
            self._fail(transport_error(exc, self.url, self.timeouts))
        except Exception as exc:
            self._fail(exc)  # first, so that waiting requests and later ones learn what went wrong
            self._drop()

    def _fail(self, error: Exception) -> None:
        """Fail every request still waiting with ``error``; later requests are refused with it too."""
        self._why.record(error)
        while self._pending:
            future, _ = self._pending.popleft()
            if not future.done():
                future.set_exception(error)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class OneSession:
    """A connection to ``/ws``: one session, which is the connection itself (`Session`, `AsyncSession`)."""

    #: The session's number on its connection (a ``/ws`` connection holds one).
    index = 0

    def __init__(
        self,
        base_url: str,
        *,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        compression: str | None = None,
    ) -> None:
        super().__init__(  # type: ignore[call-arg]
            base_url,
            "/ws",
            1,
            SESSION_WIRE,
            timeouts=timeouts,
            keepalive=keepalive,
            headers=headers,
            compression=compression,
        )

    @property
    def channel(self) -> Any:
        """The connection that carries the session's requests: the session itself."""
        return self


class SyncPlay:
    """``reset``, ``step`` and ``state`` of session ``index`` of a `ThreadDriver` (its ``channel``)."""

    channel: ThreadDriver
    index: int

    def reset(self, **kwargs: Any) -> StepResult:
        """Start a new episode. ``kwargs`` go to the environment's ``reset`` (e.g. ``seed``).

        Servers silently drop keyword arguments their ``reset`` does not take: the official chess
        server ignores ``seed``, for instance.
        """
        return self._ask("reset", kwargs)  # type: ignore[return-value]

    def step(self, action: dict[str, Any]) -> StepResult:
        """Play one action, given as the action model's fields (e.g. ``{"move": "e2e4"}``)."""
        return self._ask("step", action)  # type: ignore[return-value]

    def state(self) -> dict[str, Any]:
        """The environment's state (``episode_id``, ``step_count`` and environment-specific fields)."""
        return self._ask("state", None)  # type: ignore[return-value]

    def _ask(self, kind: str, data: dict[str, Any] | None) -> StepResult | dict[str, Any]:
        (reply,) = self.channel.request([(self.index, kind, data)])
        return self.channel.read(kind, reply)


class AsyncPlay:
    """`SyncPlay` for session ``index`` of a `LoopDriver`: ``await session.step(action)``."""

    channel: LoopDriver
    index: int

    async def reset(self, **kwargs: Any) -> StepResult:
        return await self._ask("reset", kwargs)  # type: ignore[return-value]

    async def step(self, action: dict[str, Any]) -> StepResult:
        return await self._ask("step", action)  # type: ignore[return-value]

    async def state(self) -> dict[str, Any]:
        return await self._ask("state", None)  # type: ignore[return-value]

    async def _ask(self, kind: str, data: dict[str, Any] | None) -> StepResult | dict[str, Any]:
        (reply,) = await self.channel.request([(self.index, kind, data)])
        return self.channel.read(kind, reply)
