"""The least an echo server can do over a WebSocket: the baseline of `ceilings.py`, no framework at all.

A plain ``websockets`` server (uvloop where installed, as our servers use) that answers OpenEnv's
``reset``/``step``/``state`` messages with the echo environment's replies, and our ``batch`` messages
(``/ws/batch``'s wire format) with one reply per entry, built from Python dicts and ``json`` with nothing
in between: no pydantic, no sessions, no ASGI. Run as its own process, like a real server:

    python benchmarks/raw_echo_server.py   # prints "LISTENING http://127.0.0.1:PORT pid N", then serves
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from websockets.asyncio.server import serve


def reply(entry: dict[str, Any]) -> dict[str, Any]:
    kind, data = entry.get("type"), entry.get("data") or {}
    if kind == "state":
        return {"type": "state", "data": {"episode_id": None, "step_count": 0}}
    message = str(data.get("message", "")) if kind == "step" else ""
    return {
        "type": "observation",
        "data": {
            "observation": {"echoed_message": message, "message_length": len(message)},
            "reward": 0.1 * len(message),
            "done": False,
            "metadata": {},
        },
    }


async def handler(websocket: Any) -> None:
    async for raw in websocket:
        message = json.loads(raw)
        if message.get("type") == "close":
            return
        if message.get("type") == "batch":
            answer = {"type": "batch", "data": [reply(entry) for entry in message["data"]]}
        else:
            answer = reply(message)
        await websocket.send(json.dumps(answer, separators=(",", ":")))


async def main() -> None:
    async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"LISTENING http://127.0.0.1:{port} pid {os.getpid()}", flush=True)
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        run(main())
    except KeyboardInterrupt:
        sys.exit(0)
