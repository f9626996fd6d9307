"""Fleet replicas on Ray: each server is a Ray actor's child process, on the node Ray placed the actor.

``serve(name, replicas=N, engine="ray")`` asks the cluster for a placement group of N bundles (one per
replica, ``resources`` each, spread over the nodes by default), starts one `ServerActor` in each bundle,
and each actor runs our bundled server as an `EmbeddedServer` bound to its node's address (the one Ray
reports: the node's IP on a real cluster, 127.0.0.1 on a local test cluster). The fleet makes one token
and every replica requires it, wherever bound; `Fleet.headers` carries it, and ``make_vec(...,
base_urls=fleet)`` (or ``fleet.urls`` in the process that holds the fleet) sends it.

A replica whose server exits, or whose actor dies (its node lost, ``ray.kill``), is a `Crash` of the
fleet like a local one; with ``restart=True`` a new actor starts in the same bundle (so on the same node)
on the same port, so the fleet's URLs stay valid. `Fleet.stop` kills every actor and removes the
placement group. Ray is an optional dependency (``pip install "ray[default]"``), imported only here.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..client import LaunchError
from ..progress import Waiting
from ..servers import ServeOptions
from .embedded import EmbeddedServer

__all__ = ["RayPlacement", "RayServer", "ServerActor"]

#: Seconds to wait for a Ray call that should answer at once (an actor's status, its stop).
CALL_TIMEOUT = 10.0


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise LaunchError(
            'engine="ray" needs Ray: pip install "ray[default]" (and ray.init() to join a cluster)'
        ) from exc
    return ray


class ServerActor:
    """The body of a replica's Ray actor: one `EmbeddedServer` on the actor's node.

    Made a Ray actor class by `RayServer` (``ray.remote(ServerActor)``); every method answers at once but
    `start`, which waits for the server to be healthy.
    """

    def __init__(self, name: str, settings: dict[str, Any], options: dict[str, Any]) -> None:
        self.server = EmbeddedServer(name, **settings, **options)

    def start(self, port: int, attempts_for: float) -> tuple[str, str, str]:
        """Start the server on ``port`` (0: any) of this node's address; (URL, host, node id).

        A port just freed by a replica before this one may still be held for a moment: tried again for up
        to ``attempts_for`` seconds."""
        ray = _ray()
        self.server.host = ray.util.get_node_ip_address()
        self.server.port = port
        deadline = time.monotonic() + attempts_for
        while True:
            try:
                url = self.server.start()
                break
            except LaunchError:
                if port == 0 or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        return url, self.server.host, ray.get_runtime_context().get_node_id()

    def status(self) -> tuple[bool, int | None]:
        """Whether the server runs, and its exit status if it exited."""
        return self.server.running, self.server.returncode

    def logs(self) -> str:
        return self.server.logs()

    def pid(self) -> int | None:
        return self.server.pid

    def stop(self) -> None:
        self.server.stop()


class RayPlacement:
    """The fleet's placement group: ``replicas`` bundles of ``resources``, reserved before anything starts.

    Raises `LaunchError` naming what is missing when the cluster has no such resource at all, or cannot
    give the bundles within ``timeout`` seconds (never waits longer).
    """

    def __init__(
        self,
        replicas: int,
        resources: dict[str, float],
        strategy: str,
        timeout: float,
        progress: bool | None = None,
    ) -> None:
        self.replicas, self.resources, self.strategy, self.timeout = replicas, resources, strategy, timeout
        self.progress = progress
        self.group: Any = None

    def reserve(self) -> Any:
        ray = _ray()
        from ray.util.placement_group import placement_group, remove_placement_group

        if not ray.is_initialized():
            ray.init()  # a local Ray, as Ray's own first remote call would start
        total = ray.cluster_resources()
        absent = {key: need for key, need in self.resources.items() if total.get(key, 0) < need}
        if absent:
            raise LaunchError(
                f"The Ray cluster cannot place one replica: it needs {_show(self.resources)} but the "
                f"cluster has {_show({k: total.get(k, 0) for k in absent})} at most (of {_show(total)}); "
                "ask for less with resources=..., or add nodes that have it"
            )
        group = placement_group([dict(self.resources)] * self.replicas, strategy=self.strategy)
        what = f"Ray to place {self.replicas} bundles of {_show(self.resources)}"
        placed = group.ready()
        with Waiting(what, self.timeout, progress=self.progress) as waiting:
            ready: list[Any] = []
            while not ready and waiting.elapsed < self.timeout:
                ready, _ = ray.wait([placed], timeout=min(0.5, max(0.0, self.timeout - waiting.elapsed)))
                waiting.tick()
        if not ready:
            remove_placement_group(group)
            raise LaunchError(
                f"The Ray cluster did not give {self.replicas} bundles of {_show(self.resources)} "
                f"({self.strategy}) within {self.timeout:g} s: {_show(ray.available_resources())} free of "
                f"{_show(total)}; ask for fewer replicas or less per replica (resources=...), "
                "strategy='PACK' to share nodes, or add nodes"
            ) from None
        self.group = group
        return group

    def release(self) -> None:
        group, self.group = self.group, None
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):  # the cluster went away first: nothing left to remove
                remove_placement_group(group)


class RayServer:
    """One replica of a Ray fleet: a `ServerActor` in bundle ``bundle`` of ``placement``.

    It has the parts of `EmbeddedServer` a `Fleet` uses (``start``, ``stop``, ``running``, ``base_url``,
    ``port``, ``returncode``, ``logs``), so the fleet's watcher, crash reports and restarts are the same.
    """

    def __init__(
        self,
        name: str,
        placement: RayPlacement,
        bundle: int,
        *,
        token: str,
        max_sessions: int | None,
        startup_timeout: float,
        serve_options: ServeOptions | None,
        options: dict[str, Any],
    ) -> None:
        self.name, self.placement, self.bundle, self.token = name, placement, bundle, token
        self.startup_timeout = startup_timeout
        self._settings = {
            "max_sessions": max_sessions,
            "startup_timeout": startup_timeout,
            "token": token,
            "serve_options": serve_options,
        }
        self._options = dict(options)
        self.port = 0
        self.host: str | None = None
        self.node_id: str | None = None
        self.base_url: str | None = None
        self.actor: Any = None
        self._last_status: tuple[bool, int | None] = (False, None)
        self._last_logs = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self) -> str:
        """Start the replica's actor and server (same port as before, after a restart); its URL."""
        ray = _ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self.running and self.base_url is not None:
            return self.base_url
        self.stop()
        if self.placement.group is None:
            raise LaunchError("This Ray fleet's placement group is gone: start the fleet again")
        self.actor = (
            _actor_class(ray)
            .options(
                num_cpus=self.placement.resources.get("CPU", 0),
                num_gpus=self.placement.resources.get("GPU", 0),
                resources={k: v for k, v in self.placement.resources.items() if k not in ("CPU", "GPU")},
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    self.placement.group, placement_group_bundle_index=self.bundle
                ),
                max_restarts=0,  # the fleet restarts replicas itself, on the same port
            )
            .remote(self.name, self._settings, self._options)
        )
        try:
            url, self.host, self.node_id = ray.get(
                self.actor.start.remote(self.port, self.startup_timeout / 2),
                timeout=self.startup_timeout + 30,
            )
        except Exception as exc:
            self.stop()
            what = f"The {self.name} replica in bundle {self.bundle}"
            raise LaunchError(f"{what} did not start: {exc}") from exc
        self.port = int(url.rsplit(":", 1)[1])
        self.base_url = url
        self._last_status = (True, None)
        return url

    @property
    def running(self) -> bool:
        """Whether the actor answers and its server runs (asks the actor: one short Ray call)."""
        if self.actor is None:
            return False
        ray = _ray()
        try:
            self._last_status = ray.get(self.actor.status.remote(), timeout=CALL_TIMEOUT)
        except Exception:  # RayActorError (dead), GetTimeoutError (node lost): down
            self._last_status = (False, None)
        return self._last_status[0]

    @property
    def returncode(self) -> int | None:
        """The server's exit status if it exited and its actor still answers; None if the actor died."""
        return self._last_status[1]

    def logs(self) -> str:
        """The server's last lines, or what Ray says of a dead actor."""
        if self.actor is None:
            return self._last_logs
        ray = _ray()
        try:
            self._last_logs = ray.get(self.actor.logs.remote(), timeout=CALL_TIMEOUT)
        except Exception as exc:
            self._last_logs = f"the replica's Ray actor is gone: {type(exc).__name__}: {exc}"[:2000]
        return self._last_logs

    def stop(self, timeout: float = CALL_TIMEOUT) -> None:
        """Stop the server and kill the actor (a dead one is only forgotten)."""
        actor, self.actor = self.actor, None
        self.base_url = None
        if actor is None:
            return
        ray = _ray()
        with contextlib.suppress(Exception):  # already dead, or not answering: killed below either way
            ray.get(actor.stop.remote(), timeout=timeout)
        with contextlib.suppress(Exception):
            ray.kill(actor)


_ACTOR_CLASS: Any = None


def _actor_class(ray: Any) -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = ray.remote(ServerActor)
    return _ACTOR_CLASS


def _show(resources: dict[str, float]) -> str:
    """Resources as people read them: whole numbers whole, without Ray's per-node, memory and placement
    group entries."""
    shown = {
        k: (int(v) if float(v).is_integer() else v)
        for k, v in resources.items()
        if "node:" not in k and "memory" not in k and "_group_" not in k
    }
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(shown.items())) + "}"
