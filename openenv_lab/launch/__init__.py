"""Where a server is: started for you (embedded), or already running at a URL.

Every launcher has the same small interface, `Launcher`: ``start()`` returns the server's base URL
once it is healthy, ``stop()`` releases what ``start()`` acquired. `OpenEnvEnv` picks one from its
arguments: ``base_url=...`` means `RemoteServer`, nothing means the shared `EmbeddedServer` of the
environment family, ``launcher="docker"`` a `DockerServer`, ``space="owner/name"`` a `SpaceServer` (a
Hugging Face Space, woken up and waited for). `Fleet` (and `serve`) runs several copies
of a bundled server at once, on this machine or as Ray actors over a cluster (``engine="ray"``).
"""

from __future__ import annotations

from typing import Protocol

from ..client import http_url
from ..servers import get_bundled_server
from .docker import DockerServer, build_image, prune
from .embedded import EmbeddedServer, shared_embedded_server, stop_embedded_servers
from .fleet import Crash, Fleet, fleet_of, serve
from .space import SpaceServer

__all__ = [
    "Crash",
    "DockerServer",
    "EmbeddedServer",
    "Fleet",
    "Launcher",
    "RemoteServer",
    "SpaceServer",
    "build_image",
    "fleet_of",
    "max_sessions_for",
    "prune",
    "serve",
    "shared_embedded_server",
    "stop_embedded_servers",
]


class Launcher(Protocol):
    """Something that can provide an OpenEnv server's base URL."""

    def start(self) -> str: ...

    def stop(self) -> None: ...


class RemoteServer:
    """A server that is already running somewhere; ``start`` just returns its URL, ``stop`` does nothing.

    Example:
        >>> RemoteServer("localhost:8000").start()
        'http://localhost:8000'
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = http_url(base_url)

    def start(self) -> str:
        return self.base_url

    def stop(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<RemoteServer {self.base_url}>"


def max_sessions_for(server_name: str, sessions: int) -> int | None:
    """The ``max_sessions`` to start the bundled server ``server_name`` with, so that it holds ``sessions``
    sessions: None when its default room is enough (environments of a process then share one embedded
    server), else ``sessions``.

    Example:
        >>> max_sessions_for("chess", 8), max_sessions_for("atari", 32)
        (None, 32)
    """
    default = get_bundled_server(server_name).default_max_sessions
    return None if sessions <= default else sessions
