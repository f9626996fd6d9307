"""`open_pool`: N sessions of one environment placed on one or more servers, behind one `Transport`.

Placement reads each server's free slots (``GET /capacity`` on ours) and fills the servers round-robin,
never giving one more sessions than it has free; a server that does not report its capacity (an
official one) takes sessions until it refuses one, and the rest go to the others. When the servers
cannot hold N sessions the error says how many are missing and how to get them. Another client may take
a server's free slots between our reading and our opening them: then everything opened is closed and the
capacities are read again (`CAPACITY_READINGS` readings in all), so the slots go to servers with room.

Which transport carries the sessions: on servers with the batch route (ours, unless ``multiplex=False``)
a server's sessions share one WebSocket (or several, of at most the ``"max_batch"`` sessions the server
allows one connection); when every session is on such a server of this machine, the
calling thread drives them (`DirectTransport`, over `SyncChannel`\\ s); otherwise an event loop in a
background thread does (`LoopTransport`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

from ._config import Keepalive, Timeouts
from .async_session import AsyncSession
from .batch import BatchedSession, Channel, SyncBatchedSession, SyncChannel
from .errors import CapacityError, OpenEnvError
from .http import Client
from .loop import LoopThread, LoopTransport
from .transport import DirectTransport, Transport

__all__ = ["CAPACITY_READINGS", "open_pool", "reseat"]

#: How many times `open_pool` reads the servers' capacities when other clients take the slots it
#: counted on before it could open them.
CAPACITY_READINGS = 3

#: Whether sessions on this machine's servers may be driven by the calling thread (`DirectTransport`).
#: Benchmarks and tests turn it off to measure and test `LoopTransport` on the same servers.
DIRECT_ON_LOOPBACK = True


class _SlotsTaken(Exception):
    """A server refused sessions that its ``/capacity`` reading had said were free."""

    def __init__(self, error: CapacityError) -> None:
        super().__init__(str(error))
        self.error = error


def open_pool(
    base_urls: Sequence[str],
    size: int,
    *,
    multiplex: bool = True,
    timeouts: Timeouts | float | None = None,
    keepalive: Keepalive | None = None,
    headers: dict[str, str] | None = None,
    direct: bool = True,
) -> Transport:
    """Open ``size`` sessions over the servers ``base_urls`` and return the transport that drives them.

    Session ``i`` of the transport is the ``i``-th placed, round-robin over the servers in the order
    given. Every error names the server (and, once placed, the session) it concerns. ``direct=False``
    always gives a `LoopTransport` (whose sessions can be replaced one by one: `reseat`).

    Example:
        >>> from openenv_lab.client.pool import open_pool
        >>> from openenv_lab.launch import EmbeddedServer
        >>> with EmbeddedServer("echo") as server:
        ...     transport = open_pool([server.base_url], 3)
        ...     transport.send({i: ("reset", {"seed": i}) for i in range(3)})
        ...     replies = {}
        ...     while len(replies) < 3:
        ...         replies.update(transport.receive(timeout=10.0))
        ...     transport.close()
        >>> type(transport).__name__, sorted(replies)
        ('DirectTransport', [0, 1, 2])
    """
    if size < 1:
        raise ValueError(f"A pool holds at least one session, got {size}")
    options = {"timeouts": Timeouts.of(timeouts), "keepalive": keepalive, "headers": headers}
    order = list(dict.fromkeys(base_urls))
    for reading in range(1, CAPACITY_READINGS + 1):
        try:
            return _open_once(order, size, multiplex, options, direct)
        except _SlotsTaken as taken:
            if reading == CAPACITY_READINGS:
                error = taken.error
                busy = CapacityError(
                    f"{error.args[0]} Other clients took the free slots that GET /capacity reported, "
                    f"{CAPACITY_READINGS} times in a row: the servers are busy. Try again, or give this env "
                    "servers of its own.",
                    server_message=error.server_message,
                    active_sessions=error.active_sessions,
                    max_sessions=error.max_sessions,
                    details=error.details,
                    url=error.url,
                )
                if error.server_url is not None:
                    busy.concerning(error.env_index, error.server_url)
                raise busy from None
    raise AssertionError("unreachable")


def _open_once(
    order: list[str], size: int, multiplex: bool, options: dict[str, Any], direct: bool = True
) -> Transport:
    free: dict[str, int | None] = {}
    routes: dict[str, str] = {}
    batch: dict[str, int] = {}
    for url in order:
        reported, route, max_batch = _capacity(url, options)
        free[url] = reported
        if route is not None and multiplex:
            routes[url] = route
            batch[url] = max_batch or size
    options = {**options, "max_batch": batch}
    known = sum(n for n in free.values() if n is not None)
    if all(n is not None for n in free.values()):
        if known < size:
            raise _capacity_error(size, known, free)
        plan = _plan(order, dict(free), size)
        usable = all(url in routes and SyncChannel.usable(url) for url in plan)
        if direct and DIRECT_ON_LOOPBACK and usable:
            return _open_direct(plan, routes, options)
    loop = LoopThread()
    try:
        seats = loop.run(_open_on_loop(order, free, routes, size, options))
    except BaseException:
        loop.stop()
        raise
    return LoopTransport(loop, seats)


def reseat(
    transport: LoopTransport,
    ids: Sequence[int],
    base_urls: Sequence[str],
    *,
    within: float,
    multiplex: bool = True,
    timeouts: Timeouts | float | None = None,
    keepalive: Keepalive | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Give sessions ``ids`` of ``transport`` (whose server failed) new sessions on ``base_urls``.

    The servers are tried in the order given, each round: those that answer ``GET /capacity`` (within
    ``timeouts.connect``) with free slots take the sessions, as `open_pool` places them; when none can
    (all down, or a replica still restarting) the round is tried again until ``within`` seconds have
    passed, then the last error is raised. The old sessions are closed.
    """
    timeouts = Timeouts.of(timeouts)
    quick = Timeouts(connect=timeouts.connect, request=timeouts.connect, close=timeouts.close)
    options = {"timeouts": timeouts, "keepalive": keepalive, "headers": headers}
    deadline = time.monotonic() + within
    last: OpenEnvError | None = None
    while True:
        free: dict[str, int | None] = {}
        routes: dict[str, str] = {}
        batch: dict[str, int] = {}
        for url in dict.fromkeys(base_urls):
            try:
                reported, route, most = _capacity(url, {**options, "timeouts": quick})
            except OpenEnvError as exc:  # down, or not answering: try the others
                last = exc
                continue
            free[url] = reported
            if route is not None and multiplex:
                routes[url], batch[url] = route, most or len(ids)
        if free:
            try:
                seats = transport.loop.run(
                    _open_on_loop(list(free), free, routes, len(ids), {**options, "max_batch": batch})
                )
            except (OpenEnvError, _SlotsTaken) as exc:
                last = exc.error if isinstance(exc, _SlotsTaken) else exc
            else:
                transport.replace(dict(zip(ids, seats, strict=True)))
                return
        if time.monotonic() >= deadline:
            assert last is not None
            raise last
        time.sleep(0.25)


def _plan(order: list[str], free: dict[str, int | None], size: int) -> list[str]:
    """The server of each session, round-robin over those with free slots (all of them reported)."""
    plan: list[str] = []
    turn = 0
    while len(plan) < size:
        candidates = _with_room(order, free)
        url = candidates[turn % len(candidates)]
        turn += 1
        plan.append(url)
        free[url] -= 1  # type: ignore[operator]
    return plan


def _with_room(order: list[str], free: dict[str, int | None]) -> list[str]:
    return [url for url in order if free[url] is None or free[url] > 0]  # type: ignore[operator]


def _chunks(count: int, most: int) -> list[int]:
    """``count`` sessions as connections of at most ``most`` each, as even as can be."""
    connections = -(-count // most)
    return [count // connections + (k < count % connections) for k in range(connections)]


def _open_direct(plan: list[str], routes: dict[str, str], options: dict[str, Any]) -> DirectTransport:
    """`SyncChannel`\\ s to each server (one, or several of at most its ``max_batch``), opened by the calling
    thread; closed again if anything fails."""
    opened: dict[str, list[SyncBatchedSession]] = {url: [] for url in plan}
    channel_options = {k: v for k, v in options.items() if k != "max_batch"}
    try:
        for url in dict.fromkeys(plan):
            for count in _chunks(plan.count(url), options["max_batch"][url]):
                try:
                    channel = SyncChannel(url, routes[url], count, **channel_options)
                except CapacityError as exc:
                    raise _SlotsTaken(exc.concerning(plan.index(url), url)) from None  # type: ignore[arg-type]
                except OpenEnvError as exc:
                    raise exc.concerning(plan.index(url), url) from None
                opened[url].extend(channel.sessions)
    except BaseException:
        for seats in opened.values():
            for channel in dict.fromkeys(seat.channel for seat in seats):
                with contextlib.suppress(Exception):
                    channel.close()
        raise
    unused = {url: seats[::-1] for url, seats in opened.items()}
    return DirectTransport([unused[url].pop() for url in plan])


async def _open_on_loop(
    order: list[str],
    free: dict[str, int | None],
    routes: dict[str, str],
    size: int,
    options: dict[str, Any],
) -> list[AsyncSession | BatchedSession]:
    """Place ``size`` sessions, opening an `AsyncSession` at once on servers without the batch route (a
    refusal there moves the session on), then one `Channel` per server with the route."""
    slots: list[AsyncSession | str] = []  # a session, or the URL of a channel to open
    channels: dict[str, list[Channel]] = {}
    session_options = {k: v for k, v in options.items() if k != "max_batch"}
    turn = 0
    try:
        while len(slots) < size:
            candidates = _with_room(order, free)
            if not candidates:
                raise _capacity_error(size, len(slots), free)
            url = candidates[turn % len(candidates)]
            turn += 1
            if url in routes:
                slots.append(url)
            else:
                try:
                    slots.append(await AsyncSession.open(url, **session_options))
                except CapacityError:
                    free[url] = 0  # a server that does not report its capacity is full: use the others
                    continue
                except OpenEnvError as exc:
                    raise exc.concerning(len(slots), url) from None
            if free[url] is not None:
                free[url] -= 1  # type: ignore[operator]
        for url in routes:
            count = slots.count(url)
            if not count:
                continue
            channels[url] = []
            for part in _chunks(count, options["max_batch"][url]):
                try:
                    channels[url].append(await Channel.open(url, routes[url], part, **session_options))
                except CapacityError as exc:
                    raise _SlotsTaken(exc.concerning(slots.index(url), url)) from None  # type: ignore[arg-type]
                except OpenEnvError as exc:
                    raise exc.concerning(slots.index(url), url) from None
        unused = {url: [s for c in opened for s in c.sessions][::-1] for url, opened in channels.items()}
        return [unused[s].pop() if isinstance(s, str) else s for s in slots]
    except BaseException:
        for slot in slots:
            if isinstance(slot, AsyncSession):
                await slot.close()
        for opened in channels.values():
            for channel in opened:
                await channel.close()
        raise


def _capacity(url: str, options: dict[str, Any]) -> tuple[int | None, str | None, int | None]:
    """Free slots (None: the server does not say), batch route, and the most sessions one batch connection
    may hold (None: no limit said) of the server at ``url``."""
    with Client(url, timeouts=options["timeouts"], headers=options["headers"]) as client:
        try:
            capacity = client.capacity()
        except OpenEnvError as exc:
            raise exc.concerning(None, client.base_url) from None
    if capacity is None:
        return None, None, None
    route = capacity.get("batch_route")
    free = int(capacity["max_sessions"]) - int(capacity["active_sessions"])
    most = capacity.get("max_batch")
    most = most if isinstance(most, int) and not isinstance(most, bool) and most > 0 else None
    return free, route if isinstance(route, str) and route.startswith("/") else None, most


def _capacity_error(size: int, available: int, free: dict[str, int | None]) -> CapacityError:
    detail = ", ".join(f"{url}: {n or 'no'} free" for url, n in free.items())
    return CapacityError(
        f"num_envs={size} needs {size} sessions, but the servers hold only {available} more ({detail}): "
        f"{size - available} short. Start servers with more room ('openenv-lab serve NAME "
        "--max-sessions N'), add servers to base_urls=[...], or lower num_envs.",
        server_message="",
        active_sessions=None,
        max_sessions=available,
    )
