"""The echo server: the smallest useful OpenEnv environment, for first lessons, tests and benchmarks.

The action ``{"message": str}`` comes back as the observation ``{"echoed_message", "message_length"}``
with reward ``0.1 * len(message)``, the shape of OpenEnv's original ``echo_env`` (before it became an MCP
environment). An episode ends after ``max_steps`` messages (a truncation: nothing happened to end it).
It does so little that a benchmark on it measures the protocol and the client, not the environment.
``mcp=True`` (``openenv-lab serve echo --mcp``) serves the MCP tools of today's official ``echo_env``
instead: see `openenv_lab.servers.echo_tools`.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from pydantic import Field

from ._app import build_app
from ._base import Action, Observation, ServerEnvironment, State
from .catalogue import BUNDLED_SERVERS

__all__ = ["EchoAction", "EchoEnvironment", "EchoObservation", "make_app"]

#: The options and their ranges (the catalogue declares them once).
SPEC = BUNDLED_SERVERS["echo"]


class EchoAction(Action):
    message: str = Field(..., max_length=256, description="Any text, up to 256 characters")


class EchoObservation(Observation):
    # Bounded as the action is: a client sizes buffers from it (gymnasium's AsyncVectorEnv shares memory
    # for each text's whole length, 100 MiB per sub-environment for a string without a bound).
    echoed_message: str = Field("", max_length=256, description="The message, as it was sent")
    message_length: int = 0


class EchoEnvironment(ServerEnvironment):
    """Echoes each message; ``max_steps`` messages per episode."""

    NAME = "echo"

    def __init__(self, max_steps: int = 100) -> None:
        SPEC.check(max_steps=max_steps)
        super().__init__()
        self.max_steps = max_steps
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **unknown: Any
    ) -> EchoObservation:
        SPEC.refuse_unknown(unknown)
        SPEC.check(seed=seed)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(reward=0.0, metadata={"seed": seed} if seed is not None else {})

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        if self._state.step_count >= self.max_steps:
            raise ValueError("The episode is over; send a reset")
        self._update_state(step_count=self._state.step_count + 1)
        done = self._state.step_count >= self.max_steps
        return EchoObservation(
            echoed_message=action.message,
            message_length=len(action.message),
            reward=0.1 * len(action.message),
            done=done,
            metadata={"end_reason": "max_steps", "truncated": True} if done else {},
        )

    def describe(self) -> str:
        return "Echoes text messages back, with reward 0.1 per character: the smallest OpenEnv environment."


def make_app(max_steps: int = 100, max_sessions: int = 256, mcp: bool = False) -> Any:
    """The FastAPI app of the echo server; ``mcp=True`` serves its tools over MCP instead
    (`openenv_lab.servers.echo_tools`)."""
    if mcp:
        from .echo_tools import make_app as make_tools_app

        return make_tools_app(max_sessions=max_sessions)
    EchoEnvironment(max_steps)  # a bad option stops the server at start, not at the first step
    return build_app(
        functools.partial(EchoEnvironment, max_steps=max_steps),
        EchoAction,
        EchoObservation,
        State,
        env_name="echo",
        max_sessions=max_sessions,
    )
