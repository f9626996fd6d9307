"""The exceptions the OpenEnv client raises, one tree for everything that can go wrong on the wire.

Every message says what happened and what to do about it. The tree::

    OpenEnvError
    ├── TransportError          the connection itself failed
    │   ├── ConnectError        nothing answered at the URL (refused, unknown host, connect timeout)
    │   ├── Timeout             the server accepted the request but did not reply in time
    │   └── SessionClosed       the connection closed while a session was open (server died, network gone)
    ├── ProtocolError           the peer does not speak the OpenEnv protocol (404 on /ws, malformed replies)
    ├── LaunchError             a server we were asked to start did not come up (its log is in the message)
    └── ServerError             the server answered with an error frame; carries its ``code`` and ``message``
        └── CapacityError       the server refused a new session: all its session slots are taken

`Timeout` also derives from the built-in :class:`TimeoutError`, so code that catches that keeps working.
After a `Timeout` or a `SessionClosed` the session is unusable (a late reply could not be told apart from
the next one), so open a new one: the episode in progress is lost.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CapacityError",
    "ConnectError",
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

    ``url`` is the address involved (an ``http(s)://`` or ``ws(s)://`` URL), when there is one.
    """

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class TransportError(OpenEnvError):
    """The network connection failed: nothing reached the server, or the connection broke."""


class ConnectError(TransportError):
    """No OpenEnv server could be reached at the URL (refused, unknown host, or connect timeout)."""


class Timeout(TransportError, TimeoutError):
    """The server did not answer within the request timeout; the session has been closed."""


class SessionClosed(TransportError):
    """The connection closed while the session was open, so the episode in progress is lost."""


class ProtocolError(OpenEnvError):
    """The peer answered, but not as an OpenEnv server would (wrong route, malformed reply)."""


class LaunchError(OpenEnvError):
    """A server that openenv_lab was asked to start (an embedded process, a container) did not come up."""


class ServerError(OpenEnvError):
    """The server replied with an OpenEnv error frame.

    Attributes:
        code: the server's error code, e.g. ``"VALIDATION_ERROR"`` or ``"EXECUTION_ERROR"``.
        server_message: the message exactly as the server sent it.
        details: every other field of the error frame (e.g. pydantic's ``errors`` list).
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
