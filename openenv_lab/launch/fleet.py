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
import secrets
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ..client import Client, LaunchError, OpenEnvError, Timeouts
from ..progress import Waiting
from ..servers import ServeOptions
from .embedded import EmbeddedServer

__all__ = ["Crash", "Fleet", "fleet_of", "serve"]


@dataclass(frozen=True)
class Crash:
    """A fleet server that exited without being asked to."""

    replica: int
    url: str
    returncode: int | None
    log_tail: str
    restarted: bool


class Fleet:
    """``replicas`` copies of a bundled server, started and stopped together: processes on free loopback
    ports of this machine (``engine="local"``), or Ray actors spread over a cluster's nodes
    (``engine="ray"``, see `openenv_lab.launch.ray_fleet`).

    Args:
        name: a bundled server, e.g. ``"chess"``.
        replicas: how many server processes.
        max_sessions: sessions each server accepts (default: the server's own).
        restart: start a server again (same port) when it exits on its own.
        startup_timeout: seconds each server may take to become healthy.
        watch_interval: seconds between the watcher's checks for exited servers.
        engine: ``"local"`` or ``"ray"``.
        token: the token every request must carry (`headers`). Local fleets: none unless given; Ray
            fleets: always one, made here unless given.
        resources: Ray resources of each replica (default ``{"CPU": 1}``); Ray only.
        strategy: the Ray placement strategy of the replicas' bundles (default ``"SPREAD"``: on as many
            nodes as can take them; ``"STRICT_SPREAD"``: each on its own node; ``"PACK"``); Ray only.
        placement_timeout: seconds to wait for the cluster to give the bundles; Ray only.
        progress: show a start that lasts (the bundles being placed, the replicas starting) as one
            progress line for the whole fleet (see `openenv_lab.progress`; by default where someone
            watches).
        serve_options: how each server process runs: its log level, message and session limits
            (`openenv_lab.servers.ServeOptions`; default: the server's own).
        **options: the server's options, the same for every replica.

    Example:
        >>> import gymnasium as gym
        >>> import openenv_lab
        >>> with openenv_lab.serve("chess", replicas=2) as fleet:
        ...     envs = gym.make_vec("openenv/chess", num_envs=8, base_urls=fleet.urls)
        ...     [(room["active_sessions"], room["max_sessions"]) for room in fleet.capacity()]
        ...     envs.close()
        [(4, 64), (4, 64)]
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
        engine: str = "local",
        token: str | None = None,
        resources: dict[str, float] | None = None,
        strategy: str = "SPREAD",
        placement_timeout: float = 60.0,
        progress: bool | None = None,
        serve_options: ServeOptions | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            raise ValueError(
                f"A fleet needs at least one replica (a whole number), got replicas={replicas!r}"
            )
        if engine not in ("local", "ray"):
            raise ValueError(f"engine must be 'local' or 'ray', got {engine!r}")
        if engine == "local" and resources is not None:
            raise ValueError("resources= are Ray's: pass engine='ray', or drop them")
        self.name = name
        self.engine = engine
        self.restart = restart
        self.watch_interval = watch_interval
        self.progress = progress
        self.startup_timeout = startup_timeout
        # Each replica is silent: the fleet shows one wait for all of them (`start`). Validates the name
        # and options before anything starts.
        self.servers: list[Any] = [
            EmbeddedServer(
                name,
                max_sessions=max_sessions,
                startup_timeout=startup_timeout,
                token=token,
                progress=False,
                serve_options=serve_options,
                **options,
            )
            for _ in range(replicas)
        ]
        self.placement: Any = None
        if engine == "ray":
            from .ray_fleet import RayPlacement, RayServer

            self.token: str | None = token or secrets.token_urlsafe(24)
            wanted = {"CPU": 1.0} if resources is None else _resources(resources)
            self.placement = RayPlacement(replicas, wanted, strategy, placement_timeout, progress)
            self.servers = [
                RayServer(
                    name,
                    self.placement,
                    bundle,
                    token=self.token,
                    max_sessions=max_sessions,
                    startup_timeout=startup_timeout,
                    serve_options=serve_options,
                    options=options,
                )
                for bundle in range(replicas)
            ]
        else:
            self.token = token
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
        if self.placement is not None and self.placement.group is None:
            self.placement.reserve()  # a LaunchError naming what the cluster lacks, before any wait
        count = len(self.servers)
        limit = self.startup_timeout + (30 if self.engine == "ray" else 0)
        what = f"{count} {self.name} server{'s' if count > 1 else ''} to start" + (
            " on Ray" if self.engine == "ray" else ""
        )
        with ThreadPoolExecutor(max_workers=count) as pool:
            futures = [pool.submit(server.start) for server in self.servers]
            with Waiting(what, limit, progress=self.progress) as waiting:
                while True:
                    done, _ = wait(futures, timeout=0.25)
                    if len(done) == count:
                        break
                    waiting.tick(f"{sum(f.exception() is None for f in done)} of {count} healthy")
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
            if self.placement is not None:
                self.placement.release()
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
        return [server.base_url or f"http://{server.host}:{server.port}" for server in self.servers]

    @property
    def headers(self) -> dict[str, str] | None:
        """What every request to the fleet's servers carries: its token (None: it has none)."""
        return None if self.token is None else {"Authorization": f"Bearer {self.token}"}

    @property
    def running(self) -> bool:
        """Whether every server is running."""
        return all(server.running for server in self.servers)

    def capacity(self, timeout: float = 5.0) -> list[dict[str, Any] | None]:
        """Each server's ``GET /capacity`` (active and maximum sessions); None for a server that is down."""
        answers: list[dict[str, Any] | None] = []
        for url in self.urls:
            try:
                timeouts = Timeouts(connect=timeout, request=timeout)
                with Client(url, timeouts=timeouts, headers=self.headers) as client:
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
                how = f"exited with status {code}" if code is not None else "is gone (process or Ray actor)"
                warnings.warn(
                    f"{self.name} server {replica} at {url} {how}; {what}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return found

    def __len__(self) -> int:
        return len(self.servers)

    def __repr__(self) -> str:
        state = ", ".join(self.urls) if self.running else "stopped"
        engine = " on Ray" if self.engine == "ray" else ""
        return f"<Fleet {self.name} x{len(self.servers)}{engine} {state}>"


def fleet_of(urls: Any) -> Fleet | None:
    """The running fleet of this process that serves every one of ``urls`` (a list of URLs, or a fleet
    itself), so that ``make_vec(..., base_urls=fleet.urls)`` carries its token; None if there is none."""
    if isinstance(urls, Fleet):
        return urls
    wanted = set(urls)
    for fleet in list(_running):
        if wanted <= set(fleet.urls):
            return fleet
    return None


def _resources(resources: dict[str, float]) -> dict[str, float]:
    if not isinstance(resources, dict) or not resources:
        raise ValueError(f"resources must be a dict of Ray resources, e.g. {{'CPU': 1}}, got {resources!r}")
    checked = {}
    for key, value in resources.items():
        if not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"resources: {key!r}: {value!r} is not a resource name and an amount")
        if not value >= 0:
            raise ValueError(f"resources: {key} must be at least 0, got {value}")
        checked[key] = float(value)
    return checked


def serve(name: str, replicas: int = 1, **kwargs: Any) -> Fleet:
    """Start ``replicas`` copies of a bundled server and return the running `Fleet`.

    Keyword arguments are `Fleet`'s (``max_sessions``, ``restart``, ...) and the server's options.

    Example:
        >>> fleet = serve("chess", replicas=2, opponent="greedy")
        >>> fleet.urls  # doctest: +ELLIPSIS
        ['http://127.0.0.1:...', 'http://127.0.0.1:...']
        >>> fleet.stop()

    On a Ray cluster (after ``ray.init(address=...)``), one replica per node where the nodes allow:

        >>> # skipped: needs a Ray cluster
        >>> fleet = serve("chess", replicas=4, engine="ray")  # doctest: +SKIP
        >>> # skipped: the same
        >>> envs = gym.make_vec("openenv/chess", num_envs=32, base_urls=fleet)  # doctest: +SKIP
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
