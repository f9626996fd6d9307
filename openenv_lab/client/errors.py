"""The exceptions the OpenEnv client raises, one tree for everything that can go wrong on the wire.

Every message says what happened and what to do about it. The tree, and where each is raised::

    OpenEnvError
    ├── TransportError          the connection itself failed
    │   ├── ConnectError        nothing answered at the URL (refused, unknown host, connect timeout, a
    │   │                       refused upgrade such as HTTP 401)
    │   ├── Timeout             the server accepted a request but did not reply in time (a session, a
    │   │                       vector env's batch, an HTTP call)
    │   └── SessionClosed       the session is gone: the connection closed (server died, network gone),
    │                           or it was closed before (stepping a closed env)
    ├── ProtocolError           the peer does not speak the OpenEnv protocol (404 on /ws, malformed replies)
    │   └── EnvironmentMismatch the server is another environment than the one asked for (another game,
    │                           another env): ``asked`` and ``reported`` say which
    ├── LaunchError             a server we were asked to start did not come up (its log is in the message)
    └── ServerError             the server answered with an error message; carries its ``code`` and
        │                       ``server_message``
        └── CapacityError       the server refused a new session: all its session slots are taken

`Timeout` also derives from the built-in :class:`TimeoutError`, so code that catches that keeps working.
After a `Timeout` or a `SessionClosed` the session is unusable (a late reply could not be told apart from
the next one), so open a new one: the episode in progress is lost.

Errors of a vector environment say which sub-environment and server they concern: ``env_index`` (None
when the error concerns a server before any sub-environment was placed on it) and ``server_url`` are
attributes, and the message starts with them.

What the libraries below raise is translated here, and only here: `connect_error` and `transport_error`
for websockets' exceptions, the builders below them for httpx's and for HTTP statuses. `ClosedBecause`
keeps why a connection ended, for every later request on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

if TYPE_CHECKING:
    from ._config import Timeouts

__all__ = [
    "CapacityError",
    "ClosedBecause",
    "ConnectError",
    "EnvironmentMismatch",
    "LaunchError",
    "OpenEnvError",
    "ProtocolError",
    "ServerError",
    "SessionClosed",
    "Timeout",
    "TransportError",
]


class OpenEnvError(Exception):
    """Base class of every error raised while talking to an OpenEnv server.

    Attributes:
        url: the address involved (an ``http(s)://`` or ``ws(s)://`` URL), when there is one.
        env_index: the sub-environment of a vector environment the error concerns, or None.
        server_url: the server of that sub-environment (set with `env_index` by `concerning`), or None.
    """

    env_index: int | None = None
    server_url: str | None = None

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url

    def concerning(self, env_index: int | None, server_url: str) -> OpenEnvError:
        """Say which sub-environment (None: the server as a whole) and server this error concerns.

        Returns the error itself, for ``raise error.concerning(i, url)``. The first call wins: an error
        that already names its sub-environment keeps it.
        """
        if self.server_url is None:
            self.env_index, self.server_url = env_index, server_url
        return self

    def __str__(self) -> str:
        text = super().__str__()
        if self.server_url is None:
            return text
        if self.env_index is None:
            return f"Server {self.server_url}: {text}"
        return f"Sub-environment {self.env_index} (server {self.server_url}): {text}"


class TransportError(OpenEnvError):
    """The network connection failed: nothing reached the server, or the connection broke."""


class ConnectError(TransportError):
    """No OpenEnv server could be reached at the URL (refused, unknown host, or connect timeout), or it
    refused us (``status`` 401 or 403: credentials needed; else None)."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status = status


class Timeout(TransportError, TimeoutError):
    """The server did not answer within the request timeout; the session has been closed."""


class SessionClosed(TransportError):
    """The connection closed while the session was open, so the episode in progress is lost."""


class ProtocolError(OpenEnvError):
    """The peer answered, but not as an OpenEnv server would (wrong route, malformed reply).

    Attributes:
        status: the HTTP status of the answer (e.g. 404 for a missing route, 501 for a route the
            environment does not implement), when the error is one; else None.
    """

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status = status


class EnvironmentMismatch(ProtocolError):
    """The server is not the environment asked for: another game, another environment.

    Attributes:
        asked: what the user asked for (a game, a spec's name).
        reported: what the server reports (its names, the game it runs).
    """

    def __init__(self, message: str, *, asked: Any, reported: Any, url: str | None = None) -> None:
        super().__init__(message, url=url)
        self.asked = asked
        self.reported = reported


class LaunchError(OpenEnvError):
    """A server that openenv_lab was asked to start (an embedded process, a container) did not come up."""


class ServerError(OpenEnvError):
    """The server replied with an OpenEnv error message.

    Attributes:
        code: the server's error code, e.g. ``"VALIDATION_ERROR"`` or ``"EXECUTION_ERROR"``.
        server_message: the message exactly as the server sent it.
        details: every other field of the error message (e.g. pydantic's ``errors`` list).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        server_message: str,
        details: dict[str, Any] | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.code = code
        self.server_message = server_message
        self.details = details or {}


class CapacityError(ServerError):
    """The server has no free session slot.

    Attributes:
        active_sessions: sessions open on the server when it refused, if it said.
        max_sessions: the server's session limit, if it said.
    """

    def __init__(
        self,
        message: str,
        *,
        server_message: str,
        active_sessions: int | None,
        max_sessions: int | None,
        details: dict[str, Any] | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(
            message,
            code="CAPACITY_REACHED",
            server_message=server_message,
            details=details,
            url=url,
        )
        self.active_sessions = active_sessions
        self.max_sessions = max_sessions


# ---------------------------------------------------------------------------------------------- translation


def connect_error(exc: Exception, base_url: str, url: str, timeouts: Timeouts) -> Exception:
    """The error to raise when opening the WebSocket failed with ``exc``."""
    if isinstance(exc, InvalidStatus):
        return upgrade_refused(exc.response.status_code, base_url, url)
    if isinstance(exc, (InvalidHandshake, InvalidURI)):
        return ProtocolError(
            f"The WebSocket handshake with {url} failed ({exc}); is this an OpenEnv server?", url=url
        )
    if isinstance(exc, TimeoutError):
        return connect_timeout(url, timeouts)
    if isinstance(exc, OSError):
        return unreachable(url, exc.strerror or str(exc))
    return exc


def transport_error(exc: Exception, url: str, timeouts: Timeouts) -> OpenEnvError:
    """The error for a request whose reply never came (a timeout, or the connection closing)."""
    if isinstance(exc, TimeoutError):
        return Timeout(
            f"{url} did not reply within {timeouts.request:g} s. The session was closed (a late reply "
            "could not be told apart from the next one), so the episode is lost. Raise "
            "Timeouts(request=...) if steps are legitimately slow.",
            url=url,
        )
    assert isinstance(exc, ConnectionClosed)
    return SessionClosed(
        f"The connection to {url} closed during the session ({_describe_close(exc)}): the server "
        "stopped or dropped the session, and the episode in progress is lost.",
        url=url,
    )


def connect_timeout(url: str, timeouts: Timeouts) -> ConnectError:
    """Nothing answered at ``url`` within the connect timeout."""
    return ConnectError(
        f"Could not connect to {url} within {timeouts.connect:g} s. Is the server running and reachable? "
        "Raise Timeouts(connect=...) for slow starts.",
        url=url,
    )


def unreachable(url: str, reason: str) -> ConnectError:
    """The connection to ``url`` was refused or failed for ``reason``."""
    return ConnectError(
        f"Could not connect to {url}: {reason}. Is an OpenEnv server running there? Start one with "
        "'openenv-lab serve NAME' (chess, atari, finrl or echo), or leave base_url unset to use the "
        "embedded server.",
        url=url,
    )


def needs_credentials(url: str, status: int, said: str) -> ConnectError:
    """HTTP 401 or 403: ``said`` is what the server did, e.g. ``"refused the session with HTTP 401"``."""
    return ConnectError(
        f"{url} {said}: it needs credentials. Pass token='<token>' to make() (our servers print theirs; "
        "a Hugging Face token for a private Space), or headers={'Authorization': ...}.",
        url=url,
        status=status,
    )


def upgrade_refused(status: int, base_url: str, url: str) -> OpenEnvError:
    """The error for an HTTP status answered to the WebSocket upgrade."""
    if status in (401, 403):
        return needs_credentials(base_url, status, f"refused the session with HTTP {status}")
    if status >= 500:
        return ConnectError(
            f"{base_url} answered HTTP {status} to the WebSocket upgrade: the server is unavailable or "
            "still starting (a sleeping Space takes a minute to wake). Try again shortly.",
            url=url,
        )
    return ProtocolError(
        f"{base_url} answered HTTP {status} to the WebSocket upgrade at /ws: it does not look like an "
        "OpenEnv server (OpenEnv serves sessions at /ws). Check the URL and port.",
        url=url,
    )


def http_status_error(url: str, status: int, text: str) -> OpenEnvError:
    """The error for an HTTP answer of ``status`` (400 or more) to a request of ours."""
    if status == 404:
        return ProtocolError(
            f"{url} answered 404: this server has no such route. Is it an OpenEnv server?",
            url=url,
            status=404,
        )
    if status in (401, 403):
        return needs_credentials(url, status, f"answered HTTP {status}")
    return ProtocolError(f"{url} answered HTTP {status}: {text[:300]}", url=url, status=status)


def _describe_close(exc: ConnectionClosed) -> str:
    received = exc.rcvd
    if received is None:
        return "no close code received"
    return f"close code {received.code}" + (f", {received.reason}" if received.reason else "")


class ClosedBecause:
    """Why a connection ended: the first reason recorded, which every later request on it raises.

    ``one=True`` words it for a connection of one session (``/ws``).

    Example:
        >>> why = ClosedBecause("ws://127.0.0.1:8000/ws/batch")
        >>> str(why.error())
        'The sessions with ws://127.0.0.1:8000/ws/batch are closed.'
        >>> _ = why.dropped()
        >>> _ = why.closed()  # the first reason stays
        >>> str(why.error()).split(" after ")[0]
        'The sessions with ws://127.0.0.1:8000/ws/batch were dropped'
        >>> str(ClosedBecause("ws://127.0.0.1:8000/ws", one=True).closed()).split("; ")[1]
        'open a new one (for a gymnasium env: make a new env).'
    """

    def __init__(self, url: str, *, one: bool = False) -> None:
        self.url = url
        self.reason: Exception | None = None
        self._subject = f"The session with {url}" if one else f"The sessions with {url}"
        self._is, self._was = ("is", "was") if one else ("are", "were")
        self._again = "open a new one (for a gymnasium env: make a new env)" if one else "open new ones"

    def record(self, error: Exception) -> None:
        """Keep ``error`` as the reason, unless one was recorded before."""
        if self.reason is None:
            self.reason = error

    def closed(self) -> SessionClosed:
        """The sessions were closed on purpose: that error, recorded unless a reason was before."""
        error = SessionClosed(f"{self._subject} {self._is} closed; {self._again}.", url=self.url)
        self.record(error)
        return error

    def dropped(self, after: str | None = "a request failed or was interrupted") -> SessionClosed:
        """The connection was dropped ``after`` something went wrong (None: not said): that error,
        recorded unless a reason was before."""
        why = f" after {after}" if after else ""
        error = SessionClosed(f"{self._subject} {self._was} dropped{why}; {self._again}.", url=self.url)
        self.record(error)
        return error

    def error(self) -> Exception:
        """What a request on the ended connection raises."""
        return self.reason or SessionClosed(f"{self._subject} {self._is} closed.", url=self.url)
