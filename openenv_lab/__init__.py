"""openenv_lab: OpenEnv servers as gymnasium environments, with servers, widgets and notebooks to match.

Importing the package registers the ``openenv/*`` gymnasium ids:

    >>> import gymnasium as gym
    >>> import openenv_lab
    >>> sorted(env_id for env_id in gym.registry if env_id.startswith("openenv/"))
    ['openenv/atari', 'openenv/chess', 'openenv/echo', 'openenv/finrl', 'openenv/remote']

The layers, each knowing only the one below it (see ARCHITECTURE.md): `openenv_lab.client` (the wire),
`openenv_lab.adapters` (JSON <-> spaces), `openenv_lab.envs` (gymnasium), `openenv_lab.launch` (where a
server runs) and `openenv_lab.servers` (our own OpenEnv environments).
"""

from importlib.metadata import PackageNotFoundError, version

from .adapters import Adapter, ChessAdapter, GenericAdapter
from .bench import BenchReport, bench
from .client import (
    AsyncSession,
    CapacityError,
    Client,
    ConnectError,
    Keepalive,
    LaunchError,
    OpenEnvError,
    ProtocolError,
    ServerError,
    Session,
    SessionClosed,
    StepResult,
    Timeout,
    Timeouts,
    TransportError,
)
from .envs import OpenEnvEnv, OpenEnvVectorEnv, register_envs
from .launch import EmbeddedServer, RemoteServer

try:
    __version__ = version("openenv-lab")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

register_envs()

__all__ = [
    "Adapter",
    "AsyncSession",
    "BenchReport",
    "CapacityError",
    "ChessAdapter",
    "Client",
    "ConnectError",
    "EmbeddedServer",
    "GenericAdapter",
    "Keepalive",
    "LaunchError",
    "OpenEnvEnv",
    "OpenEnvError",
    "OpenEnvVectorEnv",
    "ProtocolError",
    "RemoteServer",
    "ServerError",
    "Session",
    "SessionClosed",
    "StepResult",
    "Timeout",
    "Timeouts",
    "TransportError",
    "__version__",
    "bench",
]
