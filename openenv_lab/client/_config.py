"""Value objects that configure the client: timeouts and WebSocket keepalive."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Keepalive", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """How long the client waits, in seconds, before it gives up.

    Args:
        connect: opening a connection (TCP, TLS and the WebSocket upgrade), and each HTTP connect.
        request: waiting for the reply to one request (a reset, a step, an HTTP GET). Steps that run a
            model or an engine on the server can take long; raise this rather than disabling it.
        close: waiting for the server to acknowledge a closing session.

    Wherever the client takes ``timeouts=``, a plain number sets all three.

    Example:
        >>> Timeouts(request=120.0)
        Timeouts(connect=10.0, request=120.0, close=2.0)
        >>> Timeouts.of(5)
        Timeouts(connect=5, request=5, close=5)
    """

    connect: float = 10.0
    request: float = 60.0
    close: float = 2.0

    @classmethod
    def of(cls, value: Timeouts | float | None) -> Timeouts:
        """``value`` as `Timeouts`: None gives the defaults, a number sets all three (as httpx does)."""
        if value is None:
            return cls()
        if isinstance(value, Timeouts):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(connect=value, request=value, close=value)
        raise TypeError(f"timeouts must be a Timeouts(...) or a number of seconds, got {value!r}")

    def __post_init__(self) -> None:
        for name in ("connect", "request", "close"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Timeouts.{name} must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True)
class Keepalive:
    """WebSocket keepalive pings, which detect a silently dropped connection.

    Args:
        interval: seconds between pings; ``None`` disables pings (some tunnels drop pings).
        timeout: seconds to wait for the pong before the connection is declared dead.

    Example:
        >>> Keepalive(interval=None)
        Keepalive(interval=None, timeout=20.0)
    """

    interval: float | None = 20.0
    timeout: float | None = 20.0
