"""The least a server can do over a WebSocket: the baselines of `ceilings.py`, with no framework at all.

A plain ``websockets`` server (uvloop where installed, as our servers use) answering OpenEnv's
``reset``/``step``/``state`` messages, and our ``batch`` messages (``/ws/batch``'s wire format: one reply
per entry, each entry's ``session`` its own environment), with nothing in between: no ASGI, no sessions,
no envelopes beyond the wire's own. Run as its own process, like a real server:

    python benchmarks/raw_server.py                # echo, from Python dicts: the transport's baseline
    python benchmarks/raw_server.py --env finrl    # finrl, chess, atari or echo-env: our environment classes

It prints ``LISTENING http://127.0.0.1:PORT pid N`` and serves until killed.

With ``--env``, each step does only what any OpenEnv server must: parse the message, validate the action
into the environment's action model, step the environment class our server runs (chess against its random
opponent, as the white player; Atari Pong sending screen deltas; FinRL on the default synthetic market;
``echo-env`` our ``EchoEnvironment``, where plain ``echo`` answers from dicts),
and serialise the observation into the reply, as the framework's ``serialize_observation`` does. What is
left between this and our server is what the framework and our extensions add; what is left between this
and the in-process ceiling is what the machine charges for a process boundary and a payload.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.asyncio.server import serve

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def echo_reply(entry: dict[str, Any]) -> dict[str, Any]:
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


def environment_replies(family: str) -> Callable[[dict[Any, Any], dict[str, Any]], dict[str, Any]]:
    """A function answering one message for ``family``, keeping each session's environment in a dict."""
    from openenv_lab.servers import import_openenv_server

    serialize = import_openenv_server().serialization.serialize_observation
    if family == "finrl":
        from openenv_lab.servers.finrl import FinRLAction, FinRLEnvironment, load_market

        market = load_market()
        make, action_model = (lambda: FinRLEnvironment(market)), FinRLAction
    elif family == "chess":
        from openenv_lab.servers.chess import ChessAction, ChessEnvironment

        make, action_model = (lambda: ChessEnvironment(opponent="random", agent_color="white")), ChessAction
    elif family == "atari":
        from openenv_lab.servers.atari import AtariAction, AtariEnvironment

        make, action_model = AtariEnvironment, AtariAction
    elif family == "echo-env":
        from openenv_lab.servers.echo import EchoAction, EchoEnvironment

        make, action_model = EchoEnvironment, EchoAction
    else:
        raise ValueError(f"no environment {family!r}: finrl, chess, atari or echo-env")

    def reply(envs: dict[Any, Any], entry: dict[str, Any]) -> dict[str, Any]:
        session = entry.get("session", 0)
        env = envs.get(session)
        if env is None:
            env = envs[session] = make()
        kind, data = entry.get("type"), entry.get("data") or {}
        if kind == "step":
            observation = env.step(action_model.model_validate(data))
        elif kind == "reset":
            observation = env.reset(**data)
        else:
            return {"type": "state", "data": env.state.model_dump()}
        return {"type": "observation", "data": serialize(observation)}

    return reply


def handler_for(family: str) -> Callable[[Any], Any]:
    from pydantic_core import to_json

    if family == "echo":

        def reply(envs: dict[Any, Any], entry: dict[str, Any]) -> dict[str, Any]:
            return echo_reply(entry)

    else:
        reply = environment_replies(family)

    async def handler(websocket: Any) -> None:
        envs: dict[Any, Any] = {}
        async for raw in websocket:
            message = json.loads(raw)
            if message.get("type") == "close":
                return
            if message.get("type") == "batch":
                answer = {"type": "batch", "data": [reply(envs, entry) for entry in message["data"]]}
            else:
                answer = reply(envs, message)
            await websocket.send(to_json(answer, inf_nan_mode="null").decode())

    return handler


async def main(family: str) -> None:
    handler = handler_for(family)
    # No pings: a benchmark client reads only while it measures, and answers nothing in between.
    async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"LISTENING http://127.0.0.1:{port} pid {os.getpid()}", flush=True)
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="echo", choices=("echo", "echo-env", "finrl", "chess", "atari"))
    args = parser.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        run(main(args.env))
    except KeyboardInterrupt:
        sys.exit(0)
