"""One OpenEnv session: a WebSocket to ``/ws`` that carries reset, step and state requests.

The session is synchronous, never asyncio, so it works the same in a script, in a worker thread and
inside a running Jupyter kernel (no "event loop is already running"). It sends one request at a time and
waits for its reply, as the protocol requires; it is not meant to be shared between threads. On loopback
(``ws://`` to this machine, no compression) the waiting thread reads the reply itself
(`openenv_lab.client._direct`); elsewhere websockets' threaded client (TLS, proxies, compression) carries
the session.

What it must not do: know anything about gymnasium or any particular environment. It moves JSON
dictionaries and raises the errors of `openenv_lab.client.errors`.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from . import _protocol
from ._config import Keepalive, Timeouts
from ._direct import DirectConnection
from ._protocol import StepResult
from ._urls import http_url, is_loopback, ws_url
from .errors import ServerError, SessionClosed, connect_error, transport_error

__all__ = ["Session"]

#: Largest message accepted from a server. Atari screens as JSON lists are about 0.5 MB; 100 MiB is
#: the limit the official client uses.
MAX_MESSAGE_BYTES = 100 * 1024 * 1024


class Session:
    """A live session with an OpenEnv server: one environment instance on the server, one episode at a time.

    Opening a session connects to ``<base_url>/ws`` and asks for the state once, so that a full server
    (`CapacityError`), a URL that is not an OpenEnv server (`ProtocolError`) or no server at all
    (`ConnectError`) are reported here rather than at the first step.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8000"`` (``ws://`` and a bare ``host:port`` work too).
        timeouts: connect/request/close timeouts (see `Timeouts`).
        keepalive: WebSocket ping settings (see `Keepalive`).
        headers: extra HTTP headers for the upgrade request, e.g. ``{"Authorization": "Bearer ..."}``.
        compression: ``"deflate"`` to negotiate per-message compression (smaller messages, more CPU);
            ``None`` (the default) sends messages as they are, which is faster on loopback.

    Example:
        >>> from openenv_lab.client import Session
        >>> from openenv_lab.launch import shared_embedded_server
        >>> url = shared_embedded_server("chess").base_url
        >>> with Session(url) as session:
        ...     first = session.reset(seed=0)
        ...     result = session.step({"move": first.observation["legal_moves"][0]})
        ...     result.reward, result.done
        (0.0, False)
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
        keepalive = keepalive or Keepalive()
        self._stack = contextlib.ExitStack()
        self._ws: ClientConnection | DirectConnection | None = None
        try:
            if self.url.startswith("ws://") and is_loopback(self.base_url) and compression is None:
                # Replies read by the thread that waits for them: no hand-over from a reader thread.
                connection: Any = direct_connection(self.url, self.timeouts, keepalive, headers)
            else:
                options = connect_options(self.base_url, self.timeouts, keepalive, headers, compression)
                connection = connect(self.url, **options)
            self._ws = self._stack.enter_context(connection)
        except Exception as exc:
            raise connect_error(exc, self.base_url, self.url, self.timeouts) from None
        self._finalizer = weakref.finalize(self, self._stack.close)
        self.bytes_sent = 0
        self.bytes_received = 0
        # Asking for the state once surfaces refusals (capacity, factory errors) now, not mid-episode.
        try:
            self.state()
        except ServerError as exc:
            if exc.code in _protocol.FATAL_CODES:
                raise
            # Some environments cannot report a state before their first reset: that is fine.
        except BaseException:
            self._abandon()  # a garbled reply, an interrupt: do not hold the server's slot
            raise

    @property
    def closed(self) -> bool:
        """Whether the session is closed (by `close`, by the server, or after a failure)."""
        return self._ws is None

    def reset(self, **kwargs: Any) -> StepResult:
        """Start a new episode. ``kwargs`` go to the environment's ``reset`` (e.g. ``seed``).

        Servers silently drop keyword arguments their ``reset`` does not take: the official chess
        server ignores ``seed``, for instance.
        """
        data = self._request(_protocol.reset_message(kwargs), "observation")
        return _protocol.parse_observation(data, url=self.url)

    def step(self, action: dict[str, Any]) -> StepResult:
        """Play one action, given as the action model's fields (e.g. ``{"move": "e2e4"}``)."""
        data = self._request(_protocol.step_message(action), "observation")
        return _protocol.parse_observation(data, url=self.url)

    def state(self) -> dict[str, Any]:
        """The environment's state (``episode_id``, ``step_count`` and environment-specific fields)."""
        return self._request(_protocol.state_message(), "state")

    def close(self) -> None:
        """End the session and free its slot on the server. Safe to call more than once."""
        ws = self._ws
        if ws is None:
            return
        self._ws = None
        with contextlib.suppress(ConnectionClosed, OSError):
            ws.send(_protocol.close_message())
        self._finalizer()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Session {self.url} {'closed' if self.closed else 'open'}>"

    def _request(self, message: str, expected: str) -> dict[str, Any]:
        ws = self._ws
        if ws is None:
            raise SessionClosed(
                f"The session with {self.url} is closed; open a new one (for a gymnasium env: "
                "make a new env).",
                url=self.url,
            )
        try:
            # If the send fails, the server may have said why it closed in a message still queued: read on.
            with contextlib.suppress(ConnectionClosed):
                ws.send(message)
            raw = ws.recv(timeout=self.timeouts.request)
        except (TimeoutError, ConnectionClosed) as exc:
            self._abandon()
            raise transport_error(exc, self.url, self.timeouts) from None
        except BaseException:
            # Ctrl+C once the request went out: its reply, read later, would pass for the next request's.
            self._abandon()
            raise
        self.bytes_sent += len(message)
        self.bytes_received += len(raw)
        try:
            return _protocol.parse_reply(raw, expected=expected, url=self.url)
        except ServerError as exc:
            if exc.code in _protocol.FATAL_CODES:
                self._abandon()
            raise

    def _abandon(self) -> None:
        """Close the connection after a failure (the closing handshake waits at most ``timeouts.close``)."""
        if self._ws is not None:
            self._ws = None
            self._finalizer()


def direct_connection(
    url: str, timeouts: Timeouts, keepalive: Keepalive, headers: dict[str, str] | None
) -> DirectConnection:
    """A `DirectConnection` to ``url`` with a session's timeouts and keepalive (errors as websockets')."""
    return DirectConnection.connect(
        url,
        open_timeout=timeouts.connect,
        close_timeout=timeouts.close,
        send_timeout=timeouts.request,
        ping_interval=keepalive.interval,
        ping_timeout=keepalive.timeout,
        max_size=MAX_MESSAGE_BYTES,
        additional_headers=headers,
    )


def connect_options(
    base_url: str,
    timeouts: Timeouts,
    keepalive: Keepalive,
    headers: dict[str, str] | None,
    compression: str | None,
) -> dict[str, Any]:
    """Keyword arguments of ``websockets``' ``connect`` (sync and asyncio alike) for a session."""
    return {
        "open_timeout": timeouts.connect,
        "close_timeout": timeouts.close,
        "ping_interval": keepalive.interval,
        "ping_timeout": keepalive.timeout,
        "max_size": MAX_MESSAGE_BYTES,
        "compression": compression,
        "additional_headers": headers,
        "proxy": None if is_loopback(base_url) else True,
    }
