"""A test server whose steps take as long as the action asks: ``{"seconds": 10, "burn": true}`` keeps the
CPU busy for 10 s (Python bytecode, so the GIL is taken and given back as any pure-Python environment
does), ``"burn": false`` sleeps. Built like our servers (`ServerEnvironment`, `build_app`) and run like
them (uvicorn's sans-I/O WebSockets, pings every ``--ping-interval`` seconds), so it stands for an
environment whose steps are slow for a reason nobody predicted.

    python -m tests.servers.slow_server --ping-interval 1   # prints its URL, then serves until killed
    python -m tests.servers.slow_server --inline-steps      # steps on the event loop, as serve's flag
"""

from __future__ import annotations

import argparse
import socket
import time
import uuid
from typing import Any


def make_app() -> Any:
    from openenv_lab.servers._app import build_app
    from openenv_lab.servers._base import Action, Observation, ServerEnvironment, State

    class SlowAction(Action):
        seconds: float = 0.0
        burn: bool = True

    class SlowObservation(Observation):
        took: float = 0.0

    class SlowEnvironment(ServerEnvironment):
        NAME = "slow"

        def __init__(self) -> None:
            super().__init__()
            self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> SlowObservation:
            self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
            return SlowObservation(reward=0.0)

        def step(self, action: SlowAction, timeout_s: float | None = None, **_: Any) -> SlowObservation:
            started = time.perf_counter()
            seconds = min(max(action.seconds, 0.0), 60.0)
            if action.burn:
                while time.perf_counter() - started < seconds:
                    sum(range(1000))
            else:
                time.sleep(seconds)
            self._update_state(step_count=self._state.step_count + 1)
            return SlowObservation(reward=0.0, took=time.perf_counter() - started)

    return build_app(SlowEnvironment, SlowAction, SlowObservation, State, env_name="slow", max_sessions=8)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--ping-interval", type=float, default=20.0)
    parser.add_argument("--inline-steps", action="store_true")
    args = parser.parse_args()
    if args.inline_steps:
        from openenv_lab.servers._base import ServerEnvironment

        ServerEnvironment.inline_steps = True
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        make_app(),
        log_level="warning",
        ws="websockets-sansio",
        ws_ping_interval=args.ping_interval,
        ws_ping_timeout=args.ping_interval,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
