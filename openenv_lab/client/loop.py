"""`LoopTransport`: the `Transport` of sessions anywhere, driven by an asyncio event loop in a thread.

For servers elsewhere (TLS, proxies, other machines) and servers without our batch route: each session
is an `AsyncSession` (its own WebSocket to ``/ws``) or a `BatchedSession` of a `Channel` (one WebSocket
to ``/ws/batch`` for all of a server's sessions), both `LoopDriver`\\ s. One event loop in a daemon thread
(`LoopThread`) keeps them all: round trips to many servers overlap, keepalive pings are answered between
steps, and it works inside Jupyter's own running loop. ``send`` wakes the loop once for the whole batch;
each connection's requests go as one message and come back together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from .drivers import LoopDriver
from .errors import OpenEnvError, SessionClosed, Timeout
from .transport import Reply, Request

__all__ = ["LoopThread", "LoopTransport"]

T = TypeVar("T")


class LoopThread:
    """An asyncio event loop running in a daemon thread; `run` waits for a coroutine from any thread."""

    #: Seconds a cancelled coroutine of `run` may take to clean up.
    SETTLE = 5.0

    def __init__(self) -> None:
        try:  # uvloop's event loop does the same work in C, for less of the client's CPU per step
            import uvloop

            self.loop = uvloop.new_event_loop()
        except ImportError:
            self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="openenv-lab-vector", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.loop.run_forever()
        finally:  # stopped by `stop`
            self.loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait (at most ``timeout`` seconds) for its result.

        If the caller is interrupted (Ctrl+C) or gives up, the coroutine is cancelled, and its clean-up
        (closing what it opened) is given up to `SETTLE` seconds to finish before this raises.
        """
        finished = threading.Event()

        async def tracked() -> T:
            try:
                return await coroutine
            finally:
                finished.set()

        future = asyncio.run_coroutine_threadsafe(tracked(), self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            finished.wait(self.SETTLE)
            raise

    def stop(self) -> None:
        if self.loop.is_running():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.current_thread() is not self.thread:
                self.thread.join(5)


class LoopTransport:
    """The `Transport` over sessions of `LoopDriver`\\ s (`AsyncSession`\\ s, `BatchedSession`\\ s) on a
    `LoopThread`.

    Each request has its sessions' own timeout (``timeouts.request``), after which its session (or its
    channel) is dropped and the request's reply is the `Timeout`; `receive`'s own ``timeout`` only guards
    against a loop that stopped answering.
    """

    def __init__(self, loop: LoopThread, seats: Sequence[Any]) -> None:
        self.loop = loop
        self.seats = list(seats)
        self.urls = [seat.base_url for seat in self.seats]
        self._done: queue.SimpleQueue[tuple[list[int], list[Reply]]] = queue.SimpleQueue()
        self._tasks: set[asyncio.Task[None]] = set()  # touched on the loop's thread only
        self._pending = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        return self._pending

    def send(self, requests: Mapping[int, Request]) -> None:
        if self._closed:
            raise SessionClosed("The sessions are closed; open new ones.")
        items = [(i, *requests[i]) for i in requests]
        self._pending += len(items)
        self.loop.loop.call_soon_threadsafe(self._start, items)  # one wake-up for the whole batch

    def receive(self, timeout: float) -> dict[int, Reply]:
        try:
            ids, replies = self._done.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise Timeout(f"No reply from the servers within {timeout:g} s; closed every session") from None
        except BaseException:  # Ctrl+C while replies are on their way: they can no longer be placed
            self.close()
            raise
        results = dict(zip(ids, replies, strict=True))
        while True:  # whatever else has come in meanwhile
            try:
                ids, replies = self._done.get_nowait()
            except queue.Empty:
                break
            results.update(zip(ids, replies, strict=True))
        self._pending -= len(results)
        return results

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pending = 0
        try:
            if self.loop.loop.is_running():
                self.loop.run(self._shutdown(), timeout=self._close_budget())
        except (Exception, concurrent.futures.TimeoutError):  # best effort: the loop stops anyway
            pass
        finally:
            self.loop.stop()

    def replace(self, seats: Mapping[int, Any]) -> None:
        """Put new sessions in the places of sessions ``seats`` names (whose server failed), closing the
        old ones; no request of theirs may be in flight."""
        if self._closed:
            raise SessionClosed("The sessions are closed; open new ones.")
        old = [self.seats[i] for i in seats]
        for i, seat in seats.items():
            self.seats[i] = seat
            self.urls[i] = seat.base_url
        still_used = {seat.channel for seat in self.seats}
        idle = {seat.channel for seat in old} - still_used

        async def close_old() -> None:
            await asyncio.gather(*(channel.close() for channel in idle), return_exceptions=True)

        with contextlib.suppress(Exception, concurrent.futures.TimeoutError):
            self.loop.run(close_old(), timeout=self._close_budget())

    # ------------------------------------------------------------------ on the loop's thread

    def _start(self, items: list[tuple[int, str, dict[str, Any]]]) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        by_channel: dict[LoopDriver, list[tuple[int, str, dict[str, Any]]]] = {}
        for i, kind, payload in items:
            by_channel.setdefault(self.seats[i].channel, []).append((i, kind, payload))
        for channel, entries in by_channel.items():
            task = loop.create_task(self._exchange(channel, entries))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _exchange(self, channel: LoopDriver, entries: list[tuple[int, str, dict[str, Any]]]) -> None:
        """One message on ``channel`` for ``entries``' requests; its replies (or errors) go to `receive`."""
        ids = [i for i, _, _ in entries]
        replies: list[Reply] = []
        try:
            raw = await channel.request([(self.seats[i].index, kind, data) for i, kind, data in entries])
        except Exception as exc:  # the whole message failed: the connection, a timeout, a refusal, bad JSON
            if isinstance(exc, OpenEnvError):
                exc.concerning(ids[0], self.urls[ids[0]])
            replies = [exc] * len(ids)
        else:
            for (i, kind, _), reply in zip(entries, raw, strict=True):
                try:
                    replies.append(channel.read(kind, reply))
                except OpenEnvError as exc:
                    replies.append(exc.concerning(i, self.urls[i]))
        self._done.put((ids, replies))

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        # A channel's sessions close together: close each connection once.
        channels = {seat.channel for seat in self.seats}
        await asyncio.gather(*(channel.close() for channel in channels), return_exceptions=True)

    def _close_budget(self) -> float:
        timeouts = [seat.timeouts.close for seat in self.seats[:1]]
        return (timeouts[0] if timeouts else 5.0) + 5.0

    def __repr__(self) -> str:
        return f"<LoopTransport {len(self.seats)} sessions {'closed' if self._closed else 'open'}>"
