"""A thin, fast client for the OpenEnv protocol: `Session` and `AsyncSession` (WebSocket episodes) and
`Client` (HTTP info); for many sessions at once, `openenv_lab.client.pool.open_pool` and the `Transport`
that drives them (`openenv_lab.client.transport`).

This package never imports gymnasium or ``openenv``: it is the wire and nothing else. The gymnasium
side lives in `openenv_lab.envs`, on top of it.
"""

from ._config import Keepalive, Timeouts
from ._protocol import StepResult
from ._urls import http_url, is_loopback
from .async_session import AsyncSession
from .errors import (
    CapacityError,
    ConnectError,
    EnvironmentMismatch,
    LaunchError,
    OpenEnvError,
    ProtocolError,
    ServerError,
    SessionClosed,
    Timeout,
    TransportError,
)
from .http import Client
from .session import Session

__all__ = [
    "AsyncSession",
    "CapacityError",
    "Client",
    "ConnectError",
    "EnvironmentMismatch",
    "Keepalive",
    "LaunchError",
    "OpenEnvError",
    "ProtocolError",
    "ServerError",
    "Session",
    "SessionClosed",
    "StepResult",
    "Timeout",
    "Timeouts",
    "TransportError",
    "http_url",
    "is_loopback",
]
