"""Many sessions over one WebSocket (``/ws/batch`` on openenv_lab's servers), for vector environments.

On OpenEnv's ``/ws`` each session is a connection, and a vector step of N sub-environments costs N
messages each way; the server's per-message work then bounds the throughput. Our servers also offer
``/ws/batch`` (announced by ``GET /capacity``), where one connection holds N sessions and one message
carries a request for each (see ``openenv_lab/servers/_batch.py`` for the format). A `Channel` is such
a connection on the event loop's driver, a `SyncChannel` the same on the calling thread's
(`openenv_lab.client.drivers`); their ``sessions`` (`BatchedSession`, `SyncBatchedSession`) play like
`AsyncSession` and `Session`.

Replies come back in the order the messages went out, so several batches may be in flight on one channel.
"""

from __future__ import annotations

from typing import Any

from . import _protocol
from ._config import Timeouts
from ._protocol import BATCH_WIRE, StepResult
from .drivers import AsyncPlay, LoopDriver, SyncPlay, ThreadDriver, direct_usable

__all__ = ["BatchedSession", "Channel", "SyncBatchedSession", "SyncChannel", "read_observation"]


class Channel(LoopDriver):
    """One WebSocket to a server's batch route, holding ``size`` sessions. Open it with `Channel.open`.

    Example:
        >>> import asyncio
        >>> from openenv_lab.client.batch import Channel
        >>> async def two_resets(url):
        ...     channel = await Channel.open(url, "/ws/batch", 2)
        ...     try:
        ...         replies = await channel.request([(0, "reset", {"seed": 0}), (1, "reset", {"seed": 1})])
        ...         return [reply["type"] for reply in replies]
        ...     finally:
        ...         await channel.close()
        >>> from openenv_lab.launch import shared_embedded_server
        >>> asyncio.run(two_resets(shared_embedded_server("echo").base_url))
        ['observation', 'observation']
    """

    def __init__(self, base_url: str, route: str, size: int, **options: Any) -> None:
        super().__init__(base_url, route, size, BATCH_WIRE, **options)
        self.sessions = [BatchedSession(self, i) for i in range(size)]


class SyncChannel(ThreadDriver):
    """`Channel` without asyncio: one WebSocket to a server's batch route, read by the calling thread.

    For ``ws://`` servers on this machine (`usable`), where the hand-over of each reply from an event-loop
    thread costs as much as the server's work for 16 cheap environments (``benchmarks/vector_throughput.py``).
    Batches go out with `submit` and their replies come back, oldest first, from `receive`; `request` does
    both. Any failure of the connection (a timeout, a close, an interrupt, a refused batch) closes the
    channel: replies still on their way could no longer be matched to their batches. Not thread-safe.

    Example:
        >>> from openenv_lab.client.batch import SyncChannel
        >>> from openenv_lab.launch import EmbeddedServer
        >>> with EmbeddedServer("echo") as server:
        ...     channel = SyncChannel(server.base_url, "/ws/batch", 2)
        ...     replies = channel.request([(0, "reset", {"seed": 0}), (1, "step", {"message": "hi"})])
        ...     channel.close()
        >>> [reply["data"]["observation"].get("message_length") for reply in replies]
        [0, 2]
    """

    def __init__(self, base_url: str, route: str, size: int, **options: Any) -> None:
        super().__init__(base_url, route, size, BATCH_WIRE, **options)
        self.sessions = [SyncBatchedSession(self, i) for i in range(size)]

    @staticmethod
    def usable(base_url: str) -> bool:
        """Whether the calling thread reads a `SyncChannel` to ``base_url`` itself (plain ``ws://`` to this
        machine), so that `DirectTransport` can wait on it."""
        return direct_usable(base_url)


class _ChannelSeat:
    """Session ``index`` of a channel: where a sub-environment's requests go."""

    def __init__(self, channel: Any, index: int) -> None:
        self.channel = channel
        self.index = index
        self.base_url: str = channel.base_url
        self.url: str = channel.url
        self.timeouts: Timeouts = channel.timeouts

    @property
    def closed(self) -> bool:
        return bool(self.channel.closed)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.index} of {self.channel!r}>"


class BatchedSession(AsyncPlay, _ChannelSeat):
    """Session ``index`` of a `Channel`: `AsyncSession`'s ``reset``/``step``/``state``/``close``, over the
    channel's connection. Closing one closes the whole channel (its sessions end together)."""

    channel: Channel

    async def close(self) -> None:
        await self.channel.close()


class SyncBatchedSession(SyncPlay, _ChannelSeat):
    """Session ``index`` of a `SyncChannel` (its channel does the talking, for all its sessions at once)."""

    channel: SyncChannel


def read_observation(reply: Any, url: str) -> StepResult:
    """One entry of a batch's replies as a `StepResult` (or the error it carries, raised)."""
    return _protocol.observation_data(reply, url=url)
