"""Fleets: several copies of one bundled server, each its own process on a free loopback port.

One multi-session server runs every session on one event loop, so it uses one CPU core at most. A fleet
spreads sessions over N processes: ``make_vec(..., base_urls=fleet.urls)`` opens the vector env's
sessions round-robin over them. A classroom can also give each student group its own server.

Everything a fleet starts is an `EmbeddedServer`, so it needs nothing but pip (Binder, Colab) and inherits
their lifetime rules: the servers stop with `Fleet.stop`, at interpreter exit, and by themselves when this
process dies. A watcher thread notices a server that exits on its own: it is reported (a warning, and
`Fleet.crashes`) and, with ``restart=True``, started again on the same port, so URLs stay valid.
"""

from __future__ import annotations

import atexit
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..client import Client, LaunchError, OpenEnvError, Timeouts
from .embedded import EmbeddedServer

__all__ = ["Crash", "Fleet", "serve"]


@dataclass(frozen=True)
class Crash:
    """A fleet server that exited without being asked to."""

    replica: int
    url: str
    returncode: int | None
    log_tail: str
    restarted: bool


class Fleet:
    """``replicas`` copies of a bundled server on free loopback ports, started and stopped together.

    Args:
        name: a bundled server, e.g. ``"chess"``.
        replicas: how many server processes.
        max_sessions: sessions each server accepts (default: the server's own).
        restart: start a server again (same port) when it exits on its own.
        startup_timeout: seconds each server may take to become healthy.
        watch_interval: seconds between the watcher's checks for exited servers.
        **options: the server's options, the same for every replica.

    Example:
        >>> import gymnasium as gym
        >>> import openenv_lab
        >>> with openenv_lab.serve("chess", replicas=2) as fleet:          # doctest: +SKIP
        ...     envs = gym.make_vec("openenv/chess", num_envs=8, base_urls=fleet.urls)
        ...     fleet.capacity()
        [{'active_sessions': 4, 'max_sessions': 64}, {'active_sessions': 4, 'max_sessions': 64}]
    """

    def __init__(
        self,
        name: str,
        replicas: int = 2,
        *,
        max_sessions: int | None = None,
        restart: bool = False,
        startup_timeout: float = 60.0,
        watch_interval: float = 0.5,
        **options: Any,
    ) -> None:
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise ValueError(
                f"A fleet needs at least one replica (a whole number), got replicas={replicas!r}"
            )
        self.name = name
        self.restart = restart
        self.watch_interval = watch_interval
        # Validates the name and options before anything starts.
        self.servers = [
            EmbeddedServer(name, max_sessions=max_sessions, startup_timeout=startup_timeout, **options)
            for _ in range(replicas)
        ]
        self.crashes: list[Crash] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    # ------------------------------------------------------------------ lifetime

    def start(self) -> list[str]:
        """Start every server (in parallel) and return their URLs once all are healthy.

        If any server fails to start, the others are stopped too and the `LaunchError` says which failed.
        """
        self._stopping.clear()
        with ThreadPoolExecutor(max_workers=len(self.servers)) as pool:
            futures = [pool.submit(server.start) for server in self.servers]
            errors = [(i, f.exception()) for i, f in enumerate(futures) if f.exception() is not None]
        if errors:
            self.stop()
            replica, error = errors[0]
            raise LaunchError(
                f"{len(errors)} of {len(self.servers)} {self.name} servers failed to start; "
                f"replica {replica}: {error}"
            ) from error
        # Restarts reuse each server's port, so the URLs handed out stay valid.
        for server in self.servers:
            server.port = int(server.base_url.rsplit(":", 1)[1])
        _running.add(self)
        self._watcher = threading.Thread(target=_watch, args=(weakref.ref(self),), daemon=True)
        self._watcher.start()
        return self.urls

    def stop(self) -> None:
        """Stop every server. Safe to call twice."""
        self._stopping.set()
        with self._lock:
            for server in self.servers:
                server.stop()
        _running.discard(self)

    def __enter__(self) -> Fleet:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection

    @property
    def urls(self) -> list[str]:
        """The servers' base URLs, in replica order (for ``make_vec(..., base_urls=fleet.urls)``)."""
        return [server.base_url or f"http://127.0.0.1:{server.port}" for server in self.servers]

    @property
    def running(self) -> bool:
        """Whether every server is running."""
        return all(server.running for server in self.servers)

    def capacity(self, timeout: float = 5.0) -> list[dict[str, Any] | None]:
        """Each server's ``GET /capacity`` (active and maximum sessions); None for a server that is down."""
        answers: list[dict[str, Any] | None] = []
        for url in self.urls:
            try:
                with Client(url, timeouts=Timeouts(connect=timeout, request=timeout)) as client:
                    answers.append(client.capacity())
            except OpenEnvError:
                answers.append(None)
        return answers

    def check(self) -> list[Crash]:
        """Look for servers that exited on their own now; report them and restart them if asked."""
        found = []
        with self._lock:
            if self._stopping.is_set():
                return []
            for replica, server in enumerate(self.servers):
                if server.running or server.base_url is None:
                    continue
                url, code, log = server.base_url, server.returncode, server.logs()
                server.stop(timeout=0.5)  # release its pipes
                restarted = False
                if self.restart:
                    try:
                        server.start()
                        restarted = True
                    except LaunchError as exc:
                        log += f"\nrestart failed: {exc}"
                crash = Crash(replica, url, code, "\n".join(log.splitlines()[-10:]), restarted)
                self.crashes.append(crash)
                found.append(crash)
                what = "restarted on the same port" if restarted else "not restarted (restart=False)"
                warnings.warn(
                    f"{self.name} server {replica} at {url} exited with status {code}; {what}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return found

    def __len__(self) -> int:
        return len(self.servers)

    def __repr__(self) -> str:
        state = ", ".join(self.urls) if self.running else "stopped"
        return f"<Fleet {self.name} x{len(self.servers)} {state}>"


def serve(name: str, replicas: int = 1, **kwargs: Any) -> Fleet:
    """Start ``replicas`` copies of a bundled server and return the running `Fleet`.

    Keyword arguments are `Fleet`'s (``max_sessions``, ``restart``, ...) and the server's options.

    Example:
        >>> fleet = serve("chess", replicas=2, opponent="greedy")      # doctest: +SKIP
        >>> fleet.urls                                                # doctest: +SKIP
        ['http://127.0.0.1:41003', 'http://127.0.0.1:41005']
        >>> fleet.stop()                                              # doctest: +SKIP
    """
    fleet = Fleet(name, replicas, **kwargs)
    fleet.start()
    return fleet


def _watch(ref: weakref.ref[Fleet]) -> None:
    """The watcher thread: holds the fleet only weakly, so a dropped fleet can still be collected."""
    while True:
        fleet = ref()
        if fleet is None or fleet._stopping.is_set():
            return
        interval, stopping = fleet.watch_interval, fleet._stopping
        fleet.check()
        del fleet
        stopping.wait(interval)  # stop() wakes the watcher at once


_running: weakref.WeakSet[Fleet] = weakref.WeakSet()


@atexit.register
def _stop_fleets() -> None:
    for fleet in list(_running):
        fleet.stop()
