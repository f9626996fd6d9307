"""`AsyncSession`: the asyncio twin of `Session`, for driving many sessions at once from one event loop.

Same protocol, same errors, same timeouts: only the I/O differs (``websockets.asyncio``). Vector
environments run one event loop in a background thread and step all their sessions at once with
`exchange`, so N round trips overlap instead of adding up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from . import _protocol
from ._config import Keepalive, Timeouts
from ._protocol import StepResult
from ._urls import http_url, ws_url
from .batch import BatchedSession, Channel, _within, read_observation
from .errors import ServerError, SessionClosed
from .session import connect_error, connect_options, transport_error

__all__ = ["AsyncSession", "exchange"]


class AsyncSession:
    """A live session with an OpenEnv server, for asyncio code. Open it with `AsyncSession.open`.

    Example:
        >>> import asyncio
        >>> from openenv_lab.client import AsyncSession
        >>> async def first_fen(url):
        ...     async with await AsyncSession.open(url) as session:
        ...         return (await session.reset(seed=0)).observation["fen"]
        >>> asyncio.run(first_fen(url))                                 # doctest: +SKIP
        'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1'
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        compression: str | None = None,
    ) -> None:
        self.base_url = http_url(base_url)
        self.url = ws_url(self.base_url)
        self.timeouts = Timeouts.of(timeouts)
        self._options = connect_options(
            self.base_url, self.timeouts, keepalive or Keepalive(), headers, compression
        )
        self._ws: ClientConnection | None = None
        self._closing: asyncio.Task[None] | None = None  # a connection dropped mid-request, closing
        self._unanswered = 0  # bytes of the frame whose reply has not been read yet
        self.bytes_sent = 0
        self.bytes_received = 0

    @classmethod
    async def open(cls, base_url: str, **options: Any) -> AsyncSession:
        """Connect and ask for the state once, like `Session` (capacity and protocol errors surface here)."""
        session = cls(base_url, **options)
        try:
            session._ws = await connect(session.url, **session._options)
        except Exception as exc:
            raise connect_error(exc, session.base_url, session.url, session.timeouts) from None
        try:
            await session.state()
        except ServerError as exc:
            if exc.code in _protocol.FATAL_CODES:
                raise
        except BaseException:
            await session._abandon()
            raise
        return session

    @property
    def closed(self) -> bool:
        return self._ws is None

    async def reset(self, **kwargs: Any) -> StepResult:
        data = await self._request(_protocol.reset_frame(kwargs), "observation")
        return _protocol.parse_observation(data, url=self.url)

    async def step(self, action: dict[str, Any]) -> StepResult:
        data = await self._request(_protocol.step_frame(action), "observation")
        return _protocol.parse_observation(data, url=self.url)

    async def state(self) -> dict[str, Any]:
        return await self._request(_protocol.state_frame(), "state")

    async def close(self) -> None:
        """End the session and free its slot on the server. Safe to call more than once."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed, OSError):
                await ws.send(_protocol.close_frame())
            with contextlib.suppress(Exception):
                await ws.close()
        await self._closed()  # a connection dropped mid-request

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncSession {self.url} {'closed' if self.closed else 'open'}>"

    async def _request(self, frame: str, expected: str) -> dict[str, Any]:
        await self._send(frame)
        return await self._receive(expected, self.timeouts.request)

    async def _send(self, frame: str) -> None:
        ws = self._ws
        if ws is None:
            raise SessionClosed(f"The session with {self.url} is closed; open a new one.", url=self.url)
        with contextlib.suppress(ConnectionClosed):  # a queued frame may say why: read on
            await ws.send(frame)
        self._unanswered = len(frame)

    async def _receive(self, expected: str, timeout: float | None) -> dict[str, Any]:
        """The reply to the frame sent last, within ``timeout`` seconds (None: the caller's deadline)."""
        ws = self._ws
        if ws is None:
            raise SessionClosed(f"The session with {self.url} is closed; open a new one.", url=self.url)
        try:
            raw = await (ws.recv() if timeout is None else _within(ws.recv(), timeout))
        except (TimeoutError, asyncio.TimeoutError, ConnectionClosed) as exc:
            await self._abandon()
            failure = exc if isinstance(exc, ConnectionClosed) else TimeoutError()
            raise transport_error(failure, self.url, self.timeouts) from None
        except asyncio.CancelledError:
            self._detach()  # the reply is still coming: this connection can no longer be trusted
            raise
        self.bytes_sent += self._unanswered
        self.bytes_received += len(raw)
        try:
            return _protocol.parse_reply(raw, expected=expected, url=self.url)
        except ServerError as exc:
            if exc.code in _protocol.FATAL_CODES:
                await self._abandon()
            raise

    async def _abandon(self) -> None:
        """Drop the connection and wait (at most ``timeouts.close``) until it is closed."""
        self._detach()
        await self._closed()

    def _detach(self) -> None:
        """Drop the connection now, without waiting: it closes in the background, and `close` waits for
        that. For a request cancelled while its reply is on its way (awaiting would delay the cancel)."""
        ws, self._ws = self._ws, None
        if ws is not None:
            self._closing = asyncio.get_running_loop().create_task(self._close_within(ws))

    async def _close_within(self, ws: ClientConnection) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), self.timeouts.close)

    async def _closed(self) -> None:
        closing, self._closing = self._closing, None
        if closing is not None:
            with contextlib.suppress(Exception):
                await closing


async def exchange(
    requests: Sequence[tuple[AsyncSession | BatchedSession, str, dict[str, Any]]], timeout: float
) -> list[StepResult | Exception]:
    """Send every ``(session, "reset" or "step", payload)`` request, then collect every reply.

    One outcome per request, in order: its `StepResult`, or the error it met (as ``session.reset`` or
    ``session.step`` would raise it). All requests are in flight before the first reply is read, and one
    deadline of ``timeout`` seconds covers them all (the replies arrive together, so the batch needs no
    more time than its slowest request). This is what a vector environment's step does: no task and no
    timer per request, about 30% less client CPU per request than ``asyncio.gather`` over
    ``session.step`` (``benchmarks/vector_throughput.py``, 16 echo sessions). The requests of
    `BatchedSession`\\ s go as one frame per `Channel`, with one reply frame for them all.
    """
    outcomes: list[StepResult | Exception | None] = [None] * len(requests)
    sent: list[int] = []
    reading = 0  # the position in `sent` being read, for the timeout's report
    by_channel: dict[Channel, list[int]] = {}
    batches: list[tuple[Channel, list[int], asyncio.Future[list[Any]]]] = []

    async def collect() -> None:
        nonlocal reading
        for reading, k in enumerate(sent):  # noqa: B007  # `reading` is read after a timeout
            session = requests[k][0]
            assert isinstance(session, AsyncSession)
            try:
                data = await session._receive("observation", None)
                outcomes[k] = _protocol.parse_observation(data, url=session.url)
            except Exception as exc:
                outcomes[k] = exc
        for channel, positions, future in batches:
            try:
                replies = await future
            except Exception as exc:
                for k in positions:
                    outcomes[k] = exc
                continue
            for k, reply in zip(positions, replies, strict=True):
                try:
                    outcomes[k] = read_observation(reply, channel.url)
                except Exception as exc:
                    outcomes[k] = exc

    try:
        for k, (session, kind, payload) in enumerate(requests):
            if isinstance(session, BatchedSession):
                by_channel.setdefault(session.channel, []).append(k)
                continue
            frame = _protocol.reset_frame(payload) if kind == "reset" else _protocol.step_frame(payload)
            try:
                await session._send(frame)
            except Exception as exc:
                outcomes[k] = exc
            else:
                sent.append(k)
        for channel, positions in by_channel.items():
            entries = [(requests[k][0].index, requests[k][1], requests[k][2]) for k in positions]  # type: ignore[union-attr]
            try:
                batches.append((channel, positions, await channel.submit(entries)))
            except Exception as exc:
                for k in positions:
                    outcomes[k] = exc
        await _within(collect(), timeout)
    except (TimeoutError, asyncio.TimeoutError):
        # The first late one did not answer in time; all of them are dropped (they close in the
        # background: `close` on the session waits for that).
        for k in sent[reading:]:
            session = requests[k][0]
            assert isinstance(session, AsyncSession)
            session._detach()
            outcomes[k] = transport_error(TimeoutError(), session.url, session.timeouts)
        for channel, positions, future in batches:
            if outcomes[positions[0]] is None:  # its replies had not come (the timeout cancelled the wait)
                channel.detach()
                for k in positions:
                    outcomes[k] = transport_error(TimeoutError(), channel.url, channel.timeouts)
            if future.done() and not future.cancelled():
                future.exception()  # read: a batch failed by the drop is reported above, not logged
    except BaseException:  # cancelled (the caller was interrupted): no reply on its way can be trusted
        for k, (session, _, _) in enumerate(requests):
            if outcomes[k] is None:
                if isinstance(session, BatchedSession):
                    session.channel.detach()
                else:
                    session._detach()
        raise
    return outcomes  # type: ignore[return-value]  # every entry is set by now
