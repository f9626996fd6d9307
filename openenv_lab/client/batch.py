"""Many sessions over one WebSocket (``/ws/batch`` on openenv_lab's servers), for vector environments.

On OpenEnv's ``/ws`` each session is a connection, and a vector step of N sub-environments costs N
messages each way; the server's per-message work then bounds the throughput. Our servers also offer
``/ws/batch`` (announced by ``GET /capacity``), where one connection holds N sessions and one message
carries a request for each (see ``openenv_lab/servers/_batch.py`` for the format). A `Channel` is such
a connection; its `BatchedSession`\\ s stand in for `AsyncSession`\\ s, and `exchange` sends one message
per channel for all of its sessions' requests. A `SyncChannel` is the same connection without asyncio,
read by the thread that waits for the replies (`DirectConnection`), for servers on this machine.

Replies come back in the order the messages went out, so several batches may be in flight on one channel
(``send``/``recv``); a reader task hands each reply to the batch that waits for it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from . import _protocol
from ._config import Keepalive, Timeouts
from ._direct import DirectConnection
from ._protocol import StepResult
from ._urls import http_url, is_loopback, ws_url
from .async_session import within
from .errors import ClosedBecause, ProtocolError, connect_error, transport_error
from .session import connect_options, direct_connection

__all__ = ["BatchedSession", "Channel", "SyncBatchedSession", "SyncChannel"]


class Channel:
    """One WebSocket to a server's batch route, holding ``size`` sessions. Open it with `Channel.open`.

    Example:
        >>> import asyncio
        >>> from openenv_lab.client.batch import Channel
        >>> async def two_resets(url):
        ...     channel = await Channel.open(url, "/ws/batch", 2)
        ...     try:
        ...         replies = await channel.request([(0, "reset", {"seed": 0}), (1, "reset", {"seed": 1})])
        ...         return [reply["type"] for reply in replies]
        ...     finally:
        ...         await channel.close()
        >>> from openenv_lab.launch import shared_embedded_server
        >>> asyncio.run(two_resets(shared_embedded_server("echo").base_url))
        ['observation', 'observation']
    """

    def __init__(
        self,
        base_url: str,
        route: str,
        size: int,
        *,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        compression: str | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"A channel holds at least one session, got {size}")
        self.base_url = http_url(base_url)
        self.url = ws_url(self.base_url, query=f"sessions={size}", route=route)
        self.timeouts = Timeouts.of(timeouts)
        self._options = connect_options(
            self.base_url, self.timeouts, keepalive or Keepalive(), headers, compression
        )
        self.sessions = [BatchedSession(self, i) for i in range(size)]
        self._ws: ClientConnection | None = None
        self._pending: collections.deque[tuple[asyncio.Future[list[Any]], int]] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._why = ClosedBecause(self.url)  # why the connection ended, for later requests

    @classmethod
    async def open(cls, base_url: str, route: str, size: int, **options: Any) -> Channel:
        """Connect and ask every session for its state once (capacity and protocol errors surface here)."""
        channel = cls(base_url, route, size, **options)
        try:
            channel._ws = await connect(channel.url, **channel._options)
        except Exception as exc:
            raise connect_error(exc, channel.base_url, channel.url, channel.timeouts) from None
        channel._reader = asyncio.get_running_loop().create_task(channel._read())
        try:
            replies = await channel.request([(i, "state", None) for i in range(size)])
            for reply in replies:
                _protocol.reply_data(reply, expected="state", url=channel.url)
        except BaseException:
            await channel.close()
            raise
        return channel

    @property
    def closed(self) -> bool:
        return self._ws is None

    async def request(self, entries: list[tuple[int, str, dict[str, Any] | None]]) -> list[Any]:
        """Send one batch of ``(session, kind, data)`` requests and return their replies, within
        ``timeouts.request`` (after which the channel is closed: a late reply could be taken for the next)."""
        future = await self.submit(entries)
        try:
            return await within(future, self.timeouts.request)
        except (TimeoutError, asyncio.TimeoutError):
            self.detach()
            raise transport_error(TimeoutError(), self.url, self.timeouts) from None
        except asyncio.CancelledError:
            self.detach()
            raise

    async def submit(
        self, entries: list[tuple[int, str, dict[str, Any] | None]]
    ) -> asyncio.Future[list[Any]]:
        """Send one batch and return the future of its replies (one per entry, for `_protocol.reply_data`)."""
        ws = self._ws
        if ws is None:
            raise self._why.error()
        message = _protocol.batch_message(entries)  # first: an action that cannot be sent leaves no slot
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._pending.append((future, len(entries)))
        with contextlib.suppress(ConnectionClosed):  # the reader reports why the connection ended
            await ws.send(message)
        return future

    async def close(self) -> None:
        """End every session of the channel and free their slots. Safe to call more than once."""
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

    def detach(self) -> None:
        """Drop the connection now (it closes in the background; `close` waits for that): for a batch
        that timed out or was cancelled while its replies were on their way."""
        ws, self._ws = self._ws, None
        if ws is not None:
            self._closing = asyncio.get_running_loop().create_task(self._closewithin(ws))
        self._fail(self._why.dropped(None))

    async def _closewithin(self, ws: ClientConnection) -> None:
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
                if future.done():  # its batch was given up: the channel is being dropped anyway
                    continue
                try:
                    future.set_result(_protocol.parse_batch(raw, count=count, url=self.url))
                except Exception as exc:  # the whole batch was refused (or garbled): no reply can be trusted
                    future.set_exception(exc)
                    raise
        except ConnectionClosed as exc:
            self._ws = None
            self._fail(transport_error(exc, self.url, self.timeouts))
        except Exception as exc:
            self._fail(exc)  # first, so that waiting batches and later requests learn what went wrong
            self.detach()

    def _fail(self, error: Exception) -> None:
        """Fail every batch still waiting with ``error``; later requests are refused with it too."""
        self._why.record(error)
        while self._pending:
            future, _ = self._pending.popleft()
            if not future.done():
                future.set_exception(error)

    def __repr__(self) -> str:
        return f"<Channel {self.url} {len(self.sessions)} sessions {'closed' if self.closed else 'open'}>"


class _ChannelSeat:
    """Session ``index`` of a channel: where a sub-environment's requests go."""

    def __init__(self, channel: Any, index: int) -> None:
        self.channel = channel
        self.index = index
        self.base_url: str = channel.base_url
        self.url: str = channel.url
        self.timeouts: Timeouts = channel.timeouts

    @property
    def closed(self) -> bool:
        return bool(self.channel.closed)


class BatchedSession(_ChannelSeat):
    """Session ``index`` of a `Channel`: `AsyncSession`'s ``reset``/``step``/``state``/``close``, over the
    channel's connection. Closing one closes the whole channel (its sessions end together)."""

    channel: Channel

    async def reset(self, **kwargs: Any) -> StepResult:
        return await self._observation("reset", kwargs)

    async def step(self, action: dict[str, Any]) -> StepResult:
        return await self._observation("step", action)

    async def state(self) -> dict[str, Any]:
        (reply,) = await self.channel.request([(self.index, "state", None)])
        return _protocol.reply_data(reply, expected="state", url=self.url)

    async def close(self) -> None:
        await self.channel.close()

    async def _observation(self, kind: str, data: dict[str, Any]) -> StepResult:
        (reply,) = await self.channel.request([(self.index, kind, data)])
        return read_observation(reply, self.url)

    def __repr__(self) -> str:
        return f"<BatchedSession {self.index} of {self.channel!r}>"


def read_observation(reply: Any, url: str) -> StepResult:
    """One entry of a batch's replies as a `StepResult` (or the error it carries, raised)."""
    return _protocol.observation_data(reply, url=url)


def read_reply(kind: str, reply: Any, url: str) -> StepResult | dict[str, Any]:
    """One entry of a batch's replies to a request of ``kind``: the session's state for ``"state"``, else
    the observation (or the error it carries, raised)."""
    if kind == "state":
        return _protocol.reply_data(reply, expected="state", url=url)
    return read_observation(reply, url)


class SyncChannel:
    """`Channel` without asyncio: one WebSocket to a server's batch route, read by the calling thread.

    For ``ws://`` servers on this machine (`usable`), where the hand-over of each reply from an event-loop
    thread costs as much as the server's work for 16 cheap environments (``benchmarks/vector_throughput.py``).
    Batches go out with `submit` and their replies come back, oldest first, from `receive`; `request` does
    both. Any failure of the connection (a timeout, a close, an interrupt, a refused batch) closes the
    channel: replies still on their way could no longer be matched to their batches. Not thread-safe.

    Example:
        >>> from openenv_lab.client.batch import SyncChannel
        >>> from openenv_lab.launch import EmbeddedServer
        >>> with EmbeddedServer("echo") as server:
        ...     channel = SyncChannel(server.base_url, "/ws/batch", 2)
        ...     replies = channel.request([(0, "reset", {"seed": 0}), (1, "step", {"message": "hi"})])
        ...     channel.close()
        >>> [reply["data"]["observation"].get("message_length") for reply in replies]
        [0, 2]
    """

    def __init__(
        self,
        base_url: str,
        route: str,
        size: int,
        *,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"A channel holds at least one session, got {size}")
        self.base_url = http_url(base_url)
        self.url = ws_url(self.base_url, query=f"sessions={size}", route=route)
        self.timeouts = Timeouts.of(timeouts)
        self.sessions = [SyncBatchedSession(self, i) for i in range(size)]
        self._pending: collections.deque[int] = collections.deque()  # each batch's entry count, oldest first
        self._why = ClosedBecause(self.url)  # why the connection ended, for later requests
        self._ws: DirectConnection | None = None
        try:
            self._ws = direct_connection(self.url, self.timeouts, keepalive or Keepalive(), headers)
        except Exception as exc:
            raise connect_error(exc, self.base_url, self.url, self.timeouts) from None
        try:  # capacity and protocol errors surface here, as for `Channel.open`
            for reply in self.request([(i, "state", None) for i in range(size)]):
                _protocol.reply_data(reply, expected="state", url=self.url)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def usable(base_url: str) -> bool:
        """Whether a `SyncChannel` can reach ``base_url``: plain ``ws://`` to this machine."""
        return ws_url(http_url(base_url)).startswith("ws://") and is_loopback(base_url)

    @property
    def closed(self) -> bool:
        return self._ws is None

    @property
    def in_flight(self) -> int:
        """Batches sent whose replies have not been received yet."""
        return len(self._pending)

    def submit(self, entries: list[tuple[int, str, dict[str, Any] | None]]) -> None:
        """Send one batch of ``(session, kind, data)`` requests; `receive` returns its replies."""
        ws = self._ws
        if ws is None:
            raise self._why.error()
        message = _protocol.batch_message(entries)  # first: an action that cannot be sent leaves no slot
        self._pending.append(len(entries))
        try:
            with contextlib.suppress(ConnectionClosed):  # the server may have said why: `receive` reads it
                ws.send(message)
        except BaseException:  # interrupted half-way (Ctrl+C): the stream can no longer be trusted
            self._drop()
            raise

    def receive(self) -> list[Any]:
        """The replies to the oldest batch in flight (one per entry, for `read_observation`), within
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
            self._drop()  # interrupted while waiting: its reply would pass for the next batch's
            raise
        try:
            return _protocol.parse_batch(raw, count=self._pending.popleft(), url=self.url)
        except Exception:  # the whole batch was refused (or garbled): nothing after it can be trusted
            self._drop()
            raise

    def request(self, entries: list[tuple[int, str, dict[str, Any] | None]]) -> list[Any]:
        """`submit` one batch and `receive` its replies."""
        self.submit(entries)
        return self.receive()

    def has_reply(self) -> bool:
        """Whether `receive` returns (or raises) at once; otherwise wait for `fileno` to be readable."""
        return self._ws is None or self._ws.has_message()

    def fileno(self) -> int:
        return -1 if self._ws is None else self._ws.fileno()

    def poll(self) -> bool:
        """Read what has arrived without waiting; then whether `receive` returns (or raises) at once."""
        return self._ws is None or self._ws.poll()

    def close(self) -> None:
        """End every session of the channel and free their slots. Safe to call more than once."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed, OSError):
                ws.send(_protocol.close_message())
            ws.close()
        self._pending.clear()
        self._why.closed()

    def _drop(self) -> None:
        """Close after a failed or interrupted request; later calls say the sessions were dropped."""
        self._why.dropped()
        ws, self._ws = self._ws, None
        self._pending.clear()
        if ws is not None:
            ws.close()

    def __repr__(self) -> str:
        return f"<SyncChannel {self.url} {len(self.sessions)} sessions {'closed' if self.closed else 'open'}>"


class SyncBatchedSession(_ChannelSeat):
    """Session ``index`` of a `SyncChannel` (its channel does the talking, for all its sessions at once)."""

    channel: SyncChannel

    def __repr__(self) -> str:
        return f"<SyncBatchedSession {self.index} of {self.channel!r}>"
