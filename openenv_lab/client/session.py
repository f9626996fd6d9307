"""One OpenEnv session: a WebSocket to ``/ws`` that carries reset, step and state requests.

The session is synchronous, never asyncio, so it works the same in a script, in a worker thread and
inside a running Jupyter kernel (no "event loop is already running"). It sends one request at a time and
waits for its reply, as the protocol requires; it is not meant to be shared between threads. It is the
calling thread's driver (`openenv_lab.client.drivers.ThreadDriver`) on the ``/ws`` format.

What it must not do: know anything about gymnasium or any particular environment. It moves JSON
dictionaries and raises the errors of `openenv_lab.client.errors`.
"""

from __future__ import annotations

from .drivers import OneSession, SyncPlay, ThreadDriver

__all__ = ["Session"]


class Session(OneSession, SyncPlay, ThreadDriver):
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

    def __enter__(self) -> Session:
        return self
