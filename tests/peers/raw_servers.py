"""Hand-written servers on loopback for behaviour the official framework cannot produce.

- `LegacyServer` speaks the OpenEnv 0.3.x WebSocket protocol: no ``metadata`` anywhere, and rewards as
  ints, bools and ``null``, as older servers and Spaces still do.
- `SilentServer` accepts the WebSocket upgrade and then never answers (a hung environment).
- `GarbageServer` answers with text that is not JSON (a confused proxy, a wrong protocol).
- `NotOpenEnvServer` is a plain HTTP server answering 404 (or another status) to everything but the
  JSON routes it is given.
- `ScriptedServer` runs a test's own coroutine for each connection, with websockets' server options
  (e.g. its keepalive pings).
- `MuteServer` completes the WebSocket handshake and then never reads again, not even pings.

Each runs in a daemon thread of the test process and is a real server: the client under test opens
real TCP connections to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.server import serve
from websockets.frames import Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol


class _ThreadedWebSocketServer:
    def __init__(self, **serve_options: Any) -> None:
        self.url = ""
        self._serve_options = serve_options
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def __enter__(self) -> _ThreadedWebSocketServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with serve(self.handler, "127.0.0.1", 0, **self._serve_options) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()
            await self._stop.wait()

    async def handler(self, ws: Any) -> None:
        raise NotImplementedError


class LegacyServer(_ThreadedWebSocketServer):
    """OpenEnv 0.3-style replies; the reward of step n cycles through 1, True, None, 0.5."""

    REWARDS = (1, True, None, 0.5)

    async def handler(self, ws: Any) -> None:
        steps = 0
        async for raw in ws:
            message = json.loads(raw)
            kind = message["type"]
            if kind == "close":
                return
            if kind == "state":
                await ws.send(json.dumps({"type": "state", "data": {"episode_id": "e", "step_count": steps}}))
                continue
            if kind == "reset":
                steps = 0
                reply = {"observation": {"value": 0}, "reward": 0.0, "done": False}
            else:
                steps += 1
                reward = self.REWARDS[(steps - 1) % len(self.REWARDS)]
                reply = {"observation": {"value": steps}, "reward": reward, "done": steps >= 4}
            await ws.send(json.dumps({"type": "observation", "data": reply}))


class SilentServer(_ThreadedWebSocketServer):
    """Answers the first request (the client's opening state request), then nothing ever again."""

    async def handler(self, ws: Any) -> None:
        first = True
        async for _raw in ws:
            if first:
                await ws.send(json.dumps({"type": "state", "data": {"episode_id": None, "step_count": 0}}))
                first = False


class GarbageServer(_ThreadedWebSocketServer):
    """Accepts the WebSocket, answers the first request with text that is not JSON, and records when
    the client hangs up (``closed`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = threading.Event()

    async def handler(self, ws: Any) -> None:
        try:
            await ws.recv()
            await ws.send("this is not json")
            await ws.wait_closed()
        finally:
            self.closed.set()


class ScriptedServer(_ThreadedWebSocketServer):
    """Runs ``script(ws)`` for each connection; ``serve_options`` go to websockets' ``serve``.

    Whatever the script raises is kept in ``errors``, and each connection's close code lands in
    ``close_codes`` once it ends.
    """

    def __init__(self, script: Callable[[Any], Awaitable[None]], **serve_options: Any) -> None:
        super().__init__(**serve_options)
        self.script = script
        self.errors: list[BaseException] = []
        self.close_codes: list[int | None] = []
        self.closed = threading.Event()

    async def handler(self, ws: Any) -> None:
        try:
            await self.script(ws)
        except Exception as exc:  # kept for the test to look at
            self.errors.append(exc)
        finally:
            await ws.wait_closed()
            self.close_codes.append(ws.close_code)
            self.closed.set()


class MuteServer:
    """Completes the WebSocket handshake on each connection, then never reads it again: no replies, no
    pongs, no closing handshake (a frozen process, a dead link). With ``answer_first=True`` it first
    answers one request with an OpenEnv state (a `Session`'s opening request)."""

    def __init__(self, answer_first: bool = False) -> None:
        self.answer_first = answer_first

    def __enter__(self) -> MuteServer:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                sock, _ = self._listener.accept()
                protocol = ServerProtocol()
                while protocol.state is not State.OPEN:
                    data = sock.recv(65536)
                    if not data:
                        break
                    protocol.receive_data(data)
                    for request in protocol.events_received():
                        protocol.send_response(protocol.accept(request))
                    for out in protocol.data_to_send():
                        sock.sendall(out)
                if self.answer_first:
                    while not any(frame.opcode is Opcode.TEXT for frame in protocol.events_received()):
                        protocol.receive_data(sock.recv(65536))
                    protocol.send_text(json.dumps({"type": "state", "data": {"step_count": 0}}).encode())
                    for out in protocol.data_to_send():
                        sock.sendall(out)
                self._held.append(sock)

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for sock in self._held:
            sock.close()


class NotOpenEnvServer:
    """A plain HTTP server that answers every request with one status (404 by default), except the GET
    paths of ``routes``, answered with that JSON (a ``/schema`` no OpenEnv server would send, say)."""

    def __init__(self, status: int = 404, routes: dict[str, Any] | None = None) -> None:
        self.status = status
        self.routes = routes or {}

    def __enter__(self) -> NotOpenEnvServer:
        status, routes = self.status, self.routes

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path not in routes:
                    self.send_error(status)
                    return
                body = json.dumps(routes[self.path]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class SilentBatchServer(_ThreadedWebSocketServer):
    """A batch route that answers the first batch (the channel's opening state requests) with a state per
    entry, then nothing; or, with ``short=True``, answers every later batch with one reply too few."""

    def __init__(self, short: bool = False) -> None:
        super().__init__()
        self.short = short

    async def handler(self, ws: Any) -> None:
        first = True
        async for raw in ws:
            entries = json.loads(raw).get("data") or []
            if first or self.short:
                state = {"type": "state", "data": {"episode_id": None, "step_count": 0}}
                await ws.send(json.dumps({"type": "batch", "data": [state] * (len(entries) - (not first))}))
                first = False
