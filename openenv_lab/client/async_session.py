"""`AsyncSession`: the asyncio twin of `Session`, for driving many sessions at once from one event loop.

Same protocol, same errors, same timeouts: only the I/O differs (``websockets.asyncio``). Vector
environments drive their sessions from one event loop in a background thread
(`openenv_lab.client.loop.LoopTransport`), so N round trips overlap instead of adding up.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from . import _protocol
from ._config import Keepalive, Timeouts
from ._protocol import StepResult
from ._urls import http_url, ws_url
from .errors import ServerError, SessionClosed, connect_error, transport_error
from .session import connect_options

__all__ = ["AsyncSession", "within"]


async def within(awaitable: Any, seconds: float) -> Any:
    """``await`` with a deadline; ``asyncio.timeout`` (3.11+) avoids the extra task ``wait_for`` makes."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)


class AsyncSession:
    """A live session with an OpenEnv server, for asyncio code. Open it with `AsyncSession.open`.

    Example:
        >>> import asyncio
        >>> from openenv_lab.client import AsyncSession
        >>> async def first_fen(url):
        ...     async with await AsyncSession.open(url) as session:
        ...         return (await session.reset(seed=0, agent_color="white")).observation["fen"]
        >>> from openenv_lab.launch import shared_embedded_server
        >>> asyncio.run(first_fen(shared_embedded_server("chess").base_url))
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
        self._unanswered = 0  # bytes of the message whose reply has not been read yet
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
        data = await self._request(_protocol.reset_message(kwargs), "observation")
        return _protocol.parse_observation(data, url=self.url)

    async def step(self, action: dict[str, Any]) -> StepResult:
        data = await self._request(_protocol.step_message(action), "observation")
        return _protocol.parse_observation(data, url=self.url)

    async def state(self) -> dict[str, Any]:
        return await self._request(_protocol.state_message(), "state")

    async def close(self) -> None:
        """End the session and free its slot on the server. Safe to call more than once."""
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed, OSError):
                await ws.send(_protocol.close_message())
            with contextlib.suppress(Exception):
                await ws.close()
        await self._closed()  # a connection dropped mid-request

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncSession {self.url} {'closed' if self.closed else 'open'}>"

    async def _request(self, message: str, expected: str) -> dict[str, Any]:
        await self._send(message)
        return await self._receive(expected, self.timeouts.request)

    async def _send(self, message: str) -> None:
        ws = self._ws
        if ws is None:
            raise SessionClosed(f"The session with {self.url} is closed; open a new one.", url=self.url)
        with contextlib.suppress(ConnectionClosed):  # a queued message may say why: read on
            await ws.send(message)
        self._unanswered = len(message)

    async def _receive(self, expected: str, timeout: float | None) -> dict[str, Any]:
        """The reply to the message sent last, within ``timeout`` seconds (None: the caller's deadline)."""
        ws = self._ws
        if ws is None:
            raise SessionClosed(f"The session with {self.url} is closed; open a new one.", url=self.url)
        try:
            raw = await (ws.recv() if timeout is None else within(ws.recv(), timeout))
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
            self._closing = asyncio.get_running_loop().create_task(self._closewithin(ws))

    async def _closewithin(self, ws: ClientConnection) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), self.timeouts.close)

    async def _closed(self) -> None:
        closing, self._closing = self._closing, None
        if closing is not None:
            with contextlib.suppress(Exception):
                await closing
