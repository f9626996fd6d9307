"""openenv_lab: OpenEnv servers as gymnasium environments, with servers, widgets and notebooks to match.

Importing the package registers the ``openenv/*`` gymnasium ids: one per family, and ids that say all a
script that only takes an id needs (ALE's names for each Atari-57 game, chess against each opponent,
FinRL's splits; ``docs/ids.md`` lists them):

    >>> import gymnasium as gym
    >>> import openenv_lab
    >>> [env_id for env_id in gym.registry if env_id.startswith("openenv/")][:5]
    ['openenv/atari', 'openenv/chess', 'openenv/echo', 'openenv/finrl', 'openenv/gymnasium']
    >>> gym.spec("openenv/Pong-ram-v5").kwargs["obs_type"], gym.spec("openenv/chess-greedy").kwargs
    ('ram', {'adapter': 'chess', 'opponent': 'greedy'})

The layers, each knowing only the one below it (see ARCHITECTURE.md): `openenv_lab.client` (the wire),
`openenv_lab.adapters` (JSON <-> spaces), `openenv_lab.envs` (gymnasium), `openenv_lab.launch` (where a
server runs) and `openenv_lab.servers` (our own OpenEnv environments).
"""

import importlib as _importlib
from types import ModuleType as _ModuleType
from typing import Any as _Any

from .adapters import Adapter, ChessAdapter, GenericAdapter, Spec
from .bench import BenchReport, bench
from .client import (
    AsyncSession,
    CapacityError,
    Client,
    ConnectError,
    EnvironmentMismatch,
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
from .envs import OpenEnvEnv, OpenEnvVectorEnv
from .envs import register_envs as _register_envs
from .launch import DockerServer, EmbeddedServer, Fleet, RemoteServer, serve
from .version import __version__

_register_envs()

# Recording (polars) and widgets (ipywidgets, matplotlib) load on first use: `import openenv_lab` stays
# light for server processes and scripts that only step environments.
_LAZY = {
    "RecordTrajectory": ".record",
    "RecordVectorTrajectory": ".record",
    "Trajectory": ".record",
    "load_trajectory": ".record",
    "RewardCurve": ".widgets",
    "Evaluation": ".evaluation",
    "EvaluationComparison": ".evaluation",
    "compare": ".evaluation",
    "evaluate": ".evaluation",
    "ReportCard": ".report_card",
    "check": ".report_card",
    "show": ".widgets",
    "require_memory": ".machine",
}


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'openenv_lab' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What `__all__` documents (lazy names included) and the subpackages, nothing imported for ourselves."""
    modules = {name for name, value in globals().items() if isinstance(value, _ModuleType)}
    return sorted(set(__all__) | {name for name in modules if not name.startswith("_")})


__all__ = [
    "Adapter",
    "AsyncSession",
    "BenchReport",
    "CapacityError",
    "ChessAdapter",
    "Client",
    "ConnectError",
    "DockerServer",
    "EmbeddedServer",
    "EnvironmentMismatch",
    "Evaluation",
    "EvaluationComparison",
    "Fleet",
    "GenericAdapter",
    "Keepalive",
    "LaunchError",
    "OpenEnvEnv",
    "OpenEnvError",
    "OpenEnvVectorEnv",
    "ProtocolError",
    "RecordTrajectory",
    "RecordVectorTrajectory",
    "RemoteServer",
    "ReportCard",
    "RewardCurve",
    "ServerError",
    "Session",
    "SessionClosed",
    "Spec",
    "StepResult",
    "Timeout",
    "Timeouts",
    "Trajectory",
    "TransportError",
    "__version__",
    "bench",
    "check",
    "compare",
    "evaluate",
    "load_trajectory",
    "require_memory",
    "serve",
    "show",
]
