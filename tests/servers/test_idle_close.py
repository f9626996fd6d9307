"""The idle close of `SessionLimits`, driven through its ASGI interface on a real event loop.

One timer per connection watches the waits for a client message (`_limits._Connection`); these tests pin
what that timer must get right: a long wait closes, a long step does not, a cancellation that is not the
timer's (a server stopping) is never taken for an idle close, and no timer outlives its connection.
The end-to-end idle close over a real server is in ``test_limits.py``.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest

from openenv_lab.servers import Limits
from openenv_lab.servers._limits import SessionLimits, _Connection

SECONDS = 0.2
SCOPE = {"type": "websocket", "path": "/ws", "client": ("127.0.0.1", 5000), "query_string": b""}


class Connection:
    """A client's side of one ASGI WebSocket connection: messages in through a queue (as uvicorn's
    receive is a queue's get), everything the app sends kept."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.incoming.put_nowait({"type": "websocket.connect"})
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def text(self, text: str) -> None:
        self.incoming.put_nowait({"type": "websocket.receive", "text": text})


def echo_app(*, work: float = 0.0, seen: list[Any] | None = None) -> Any:
    """An ASGI WebSocket app answering each text message after ``work`` seconds (a step), until a
    disconnect; it keeps what its ``receive`` returned in ``seen``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        if seen is not None:
            seen.append(receive)
        while True:
            message = await receive()
            if seen is not None:
                seen.append(message)
            if message["type"] == "websocket.disconnect":
                return
            await asyncio.sleep(work)
            await send({"type": "websocket.send", "text": message["text"]})

    return app


def middleware(app: Any) -> SessionLimits:
    return SessionLimits(app, Limits(idle_timeout=SECONDS))


def test_a_wait_longer_than_the_timeout_closes_with_1001_and_the_app_sees_a_disconnect():
    async def main() -> None:
        connection, seen = Connection(), []
        task = asyncio.create_task(
            middleware(echo_app(seen=seen))(SCOPE, connection.receive, connection.send)
        )
        await asyncio.sleep(SECONDS / 4)
        connection.text("hi")
        await asyncio.wait_for(task, 5 * SECONDS)
        assert seen[-1] == {"type": "websocket.disconnect", "code": 1001}
        close = connection.sent[-1]
        assert close["type"] == "websocket.close" and close["code"] == 1001 and "idle" in close["reason"]
        assert {"type": "websocket.send", "text": "hi"} in connection.sent

    asyncio.run(main())


def test_steady_messages_and_a_step_longer_than_the_timeout_keep_the_connection():
    async def main() -> None:
        connection = Connection()
        app = middleware(echo_app(work=1.5 * SECONDS))  # each step outlasts the timeout; no wait does
        task = asyncio.create_task(app(SCOPE, connection.receive, connection.send))
        for k in range(6):
            connection.text(str(k))
            await asyncio.sleep(0.6 * SECONDS)
        await asyncio.sleep(2 * SECONDS)  # the last step ends, then the app waits: now it is idle
        await asyncio.wait_for(task, 5 * SECONDS)
        answered = [m["text"] for m in connection.sent if m["type"] == "websocket.send"]
        assert answered == [str(k) for k in range(6)]  # every message answered, none dropped
        assert connection.sent[-1]["type"] == "websocket.close"

    asyncio.run(main())


def test_a_wait_from_another_task_is_timed_too():
    async def main() -> None:
        connection = Connection()

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            assert (await receive())["type"] == "websocket.connect"
            await send({"type": "websocket.accept"})
            connection.text("hi")
            assert (await receive())["type"] == "websocket.receive"  # the connection's task: watched
            waited = await asyncio.wait_for(asyncio.create_task(receive()), 5 * SECONDS)  # another task
            assert waited == {"type": "websocket.disconnect", "code": 1001}

        await asyncio.wait_for(middleware(app)(SCOPE, connection.receive, connection.send), 5 * SECONDS)
        assert connection.sent[-1]["type"] == "websocket.close" and connection.sent[-1]["code"] == 1001

    asyncio.run(main())


@pytest.mark.parametrize("also_expired", [False, True])
def test_a_cancellation_that_is_not_the_timers_is_never_taken_for_an_idle_close(also_expired, monkeypatch):
    if also_expired and not hasattr(asyncio.Task, "uncancel"):
        pytest.skip("Python 3.10 waits in a task of its own: there is no timer to race with")
    if also_expired:  # the server stops in the very loop iteration the idle timer fires
        check = _Connection._check

        def check_and_stop(self: _Connection) -> None:
            check(self)
            if self._expired:
                self._task.cancel()

        monkeypatch.setattr(_Connection, "_check", check_and_stop)

    async def main() -> None:
        connection = Connection()
        task = asyncio.create_task(middleware(echo_app())(SCOPE, connection.receive, connection.send))
        await asyncio.sleep(2 * SECONDS if also_expired else SECONDS / 4)
        task.cancel()  # cancelling an ended task does nothing: the test then fails below
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not any(m["type"] == "websocket.close" for m in connection.sent)

    asyncio.run(main())


def test_no_timer_outlives_its_connection():
    async def connect_and_leave() -> weakref.ref[Any]:
        connection, seen = Connection(), []
        task = asyncio.create_task(
            middleware(echo_app(seen=seen))(SCOPE, connection.receive, connection.send)
        )
        connection.text("hi")
        await asyncio.sleep(SECONDS / 4)
        connection.incoming.put_nowait({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(task, 5 * SECONDS)
        return weakref.ref(seen[0].__self__)  # the watcher whose receive the app was given

    async def main() -> None:
        watcher = await connect_and_leave()
        gc.collect()
        assert watcher() is None, "a timer still holds the ended connection's watcher"

    asyncio.run(main())
