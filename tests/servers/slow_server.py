"""A test server whose steps take as long as the action asks: ``{"seconds": 10, "burn": true}`` keeps the
CPU busy for 10 s (Python bytecode, so the GIL is taken and given back as any pure-Python environment
does), ``"burn": false`` sleeps. Built like our servers (`ServerEnvironment`, `build_app`) and run like
them (uvicorn's sans-I/O WebSockets, pings every ``--ping-interval`` seconds), so it stands for an
environment whose steps are slow for a reason nobody predicted.

    python -m tests.servers.slow_server --ping-interval 1   # prints its URL, then serves until killed
    python -m tests.servers.slow_server --inline-steps      # steps on the event loop, as serve's flag
    python -m tests.servers.slow_server --step-timeout 2    # a step over 2 s ends its session, as serve's

Its app is wrapped in `SessionLimits`, as ``run_server`` wraps our servers' (the step time limit ends a
WebSocket connection through it).
"""

from __future__ import annotations

import argparse
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

#: Where each environment writes, when it is closed, how many steps it had finished and whether it was in
#: the middle of one (``--closed-log``).
CLOSED_LOG = Path(os.devnull)


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
        closed = stepping = False

        def __init__(self) -> None:
            super().__init__()
            self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **_: Any) -> SlowObservation:
            self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
            return SlowObservation(reward=0.0)

        def step(self, action: SlowAction, timeout_s: float | None = None, **_: Any) -> SlowObservation:
            if self.closed:
                raise RuntimeError("a step of a closed environment")
            started = time.perf_counter()
            seconds = min(max(action.seconds, 0.0), 60.0)
            self.stepping = True
            if action.burn:
                while time.perf_counter() - started < seconds:
                    sum(range(1000))
            else:
                time.sleep(seconds)
            self.stepping = False
            self._update_state(step_count=self._state.step_count + 1)
            return SlowObservation(reward=0.0, took=time.perf_counter() - started)

        def close(self) -> None:
            self.closed = True
            with CLOSED_LOG.open("a") as log:  # what a test reads: never closed in the middle of a step
                mid_step = " MID-STEP" if self.stepping else ""
                log.write(f"closed after {self._state.step_count} steps{mid_step}\n")

    return build_app(SlowEnvironment, SlowAction, SlowObservation, State, env_name="slow", max_sessions=8)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--ping-interval", type=float, default=20.0)
    parser.add_argument("--inline-steps", action="store_true")
    parser.add_argument("--step-timeout", type=float, default=None)
    parser.add_argument("--closed-log", type=Path, default=None)
    args = parser.parse_args()
    from openenv_lab.servers import Limits
    from openenv_lab.servers._base import ServerEnvironment
    from openenv_lab.servers._limits import SessionLimits

    global CLOSED_LOG
    CLOSED_LOG = args.closed_log or CLOSED_LOG
    ServerEnvironment.inline_steps = args.inline_steps
    ServerEnvironment.step_timeout = args.step_timeout
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(
        SessionLimits(make_app(), Limits(idle_timeout=None)),
        log_level="warning",
        ws="websockets-sansio",
        ws_ping_interval=args.ping_interval,
        ws_ping_timeout=args.ping_interval,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
