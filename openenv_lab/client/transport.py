"""How the requests of many sessions travel at once: the `Transport` contract, and `DirectTransport`.

A vector environment's N sessions are driven as one, the way EnvPool drives its pool: `Transport.send`
puts requests on the wire and returns at once, `Transport.receive` hands back replies as they come, and a
synchronous step is nothing but the two in a row. Two transports implement the contract:

- `DirectTransport` (here): sessions of `ThreadDriver`\\ s (`SyncChannel`\\ s) to servers of this
  machine, written and read by the calling thread itself, with no event loop in the path;
- `openenv_lab.client.loop.LoopTransport`: sessions of `LoopDriver`\\ s anywhere (`AsyncSession`\\ s,
  or `BatchedSession`\\ s of a `Channel`), driven by an asyncio event loop in a background thread.

Each groups its requests by connection and sends one message per connection (`ThreadDriver.submit`).

`openenv_lab.client.pool.open_pool` places the sessions on servers and picks the transport.

The rules both keep: a reply arrives as a `StepResult`, or as the `OpenEnvError` its request met (the
server's error message, or a timeout that closed the session); every error says which session
(``env_index``) and server it concerns; a failure of a connection, or an interrupt (Ctrl+C) while
replies are on their way, closes the transport, since a late reply could no longer be matched to its
request; a transport is driven by one thread at a time.
"""

from __future__ import annotations

import collections
import select
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ._protocol import StepResult
from .drivers import ThreadDriver
from .errors import OpenEnvError, SessionClosed, Timeout

__all__ = ["DirectTransport", "Reply", "Request", "Transport"]

#: A request for one session: ``("reset", keyword arguments)``, ``("step", the action's JSON)`` or
#: ``("state", {})``.
Request = tuple[str, dict[str, Any]]
#: What a request gets back: the observation (the state, for ``"state"``), or the error it met (an
#: `OpenEnvError` naming its session, or, for a request that could not even be written, such as an action
#: JSON cannot carry, that error).
Reply = StepResult | dict[str, Any] | Exception


class Transport(Protocol):
    """N sessions, numbered 0..N-1, whose requests go out together and whose replies come back as they
    come. See the module docstring for the rules."""

    #: The server of each session (its base URL), by session number.
    urls: Sequence[str]

    @property
    def closed(self) -> bool:
        """Whether the sessions are closed (by `close`, or after a failure)."""
        ...

    @property
    def pending(self) -> int:
        """Requests sent whose replies have not been received."""
        ...

    def send(self, requests: Mapping[int, Request]) -> None:
        """Send one request per session named, without waiting for the replies.

        Raises (after closing the transport) if the requests could not all be sent.
        """
        ...

    def receive(self, timeout: float) -> dict[int, Reply]:
        """Wait (at most ``timeout`` seconds) until replies arrive, and return every reply in by then.

        Raises `Timeout` (after closing the transport) if none came in time, and the error of a
        connection that failed.
        """
        ...

    def close(self) -> None:
        """End every session and free their slots on the servers. Safe to call more than once, from any
        thread (a finalizer)."""
        ...


class DirectTransport:
    """The `Transport` over sessions of `ThreadDriver`\\ s on loopback (`SyncChannel`\\ s, `Session`\\ s):
    one message per connection and ``send``, read back by the calling thread (``select`` over the
    connections' sockets when several have messages in flight).

    Example:
        >>> from openenv_lab.client.batch import SyncChannel
        >>> from openenv_lab.client.transport import DirectTransport
        >>> from openenv_lab.launch import EmbeddedServer
        >>> with EmbeddedServer("echo") as server:
        ...     channel = SyncChannel(server.base_url, "/ws/batch", 2)
        ...     transport = DirectTransport(channel.sessions)
        ...     transport.send({0: ("reset", {"seed": 0}), 1: ("reset", {"seed": 1})})
        ...     replies = transport.receive(timeout=10.0)
        ...     transport.close()
        >>> sorted(replies), replies[0].observation["message_length"]
        ([0, 1], 0)
    """

    def __init__(self, seats: Sequence[Any]) -> None:
        self.seats = list(seats)
        self.urls = [seat.base_url for seat in self.seats]
        # The sessions of each batch in flight on each channel and what each asked, oldest first (replies
        # come in that order).
        self._batches: dict[ThreadDriver, collections.deque[list[tuple[int, str]]]] = {
            seat.channel: collections.deque() for seat in self.seats
        }
        self._pending = 0

    @property
    def closed(self) -> bool:
        return all(channel.closed for channel in self._batches)

    @property
    def pending(self) -> int:
        return self._pending

    def send(self, requests: Mapping[int, Request]) -> None:
        by_channel: dict[ThreadDriver, list[int]] = {}
        for i in requests:
            by_channel.setdefault(self.seats[i].channel, []).append(i)
        for channel, ids in by_channel.items():
            entries = [(self.seats[i].index, *requests[i]) for i in ids]
            try:
                channel.submit(entries)
            except BaseException as exc:  # sent in part, or interrupted: no reply can be placed now
                self._fail(exc, ids[0])
                raise
            self._batches[channel].append([(i, requests[i][0]) for i in ids])
            self._pending += len(ids)

    def receive(self, timeout: float) -> dict[int, Reply]:
        waiting = [channel for channel, batches in self._batches.items() if batches]
        if not waiting:
            raise SessionClosed("No request is in flight: the sessions were closed, or nothing was sent")
        channel = waiting[0] if len(waiting) == 1 else self._first_with_reply(waiting, timeout)
        asked = self._batches[channel][0]  # taken off once its replies are in
        try:
            replies = channel.receive()
        except BaseException as exc:  # the connection failed, or Ctrl+C: these replies are lost
            self._fail(exc, asked[0][0])
            raise
        self._batches[channel].popleft()
        self._pending -= len(asked)
        results: dict[int, Reply] = {}
        try:
            for (i, kind), reply in zip(asked, replies, strict=True):
                try:
                    results[i] = channel.read(kind, reply)
                except OpenEnvError as exc:  # this session's request failed; the others are fine
                    results[i] = exc.concerning(i, self.urls[i])
        except BaseException as exc:  # Ctrl+C with replies read but not handed over: nothing adds up now
            self._fail(exc, asked[0][0])
            raise
        return results

    def close(self) -> None:
        self._pending = 0
        interrupted: BaseException | None = None
        for channel in list(self._batches):
            try:
                channel.close()
            except Exception:  # best effort: the rest still close
                pass
            except BaseException as exc:  # Ctrl+C: the rest still close, then it is raised
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted

    def _first_with_reply(self, channels: list[ThreadDriver], timeout: float) -> ThreadDriver:
        deadline = time.monotonic() + timeout
        while True:
            for channel in channels:
                if channel.has_reply():
                    return channel
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise Timeout(f"No reply from the servers within {timeout:g} s; closed every session")
            try:
                # In short slices: a keepalive thread may read a reply off a socket (has_reply sees it).
                readable, _, _ = select.select(channels, [], [], min(remaining, 0.05))
            except (OSError, ValueError):  # a channel closed meanwhile: has_reply says so next time round
                continue
            for channel in readable:
                if channel.poll():  # a whole reply came, not just a ping or part of a message
                    return channel

    def _fail(self, exc: BaseException, i: int) -> None:
        """Name session ``i`` in ``exc`` (an `OpenEnvError`), then close everything."""
        if isinstance(exc, OpenEnvError):
            exc.concerning(i, self.urls[i])
        self.close()

    def __repr__(self) -> str:
        return f"<DirectTransport {len(self.seats)} sessions on {len(self._batches)} channel(s)>"
