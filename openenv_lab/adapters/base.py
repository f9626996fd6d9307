"""The adapter interface: how one environment family's JSON maps to gymnasium spaces and back.

An adapter never opens a socket. `OpenEnvEnv` owns the session and hands the adapter what it needs:
the server's `Client` once at start (for ``/schema`` or ``/config``), then every `StepResult`. The
adapter turns an action from its ``action_space`` into the server's action JSON, and a server reply
into an observation of its ``observation_space`` plus the honest episode ending.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from ..client import Client, StepResult

__all__ = ["Adapter", "Transition"]


@dataclass(slots=True)
class Transition:
    """What `OpenEnvEnv.step` returns, before gymnasium's tuple."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class Adapter(ABC):
    """Maps one family of OpenEnv environments onto gymnasium.

    Subclasses set `server_name` (the bundled server the embedded launcher starts when no URL is
    given; ``None`` if there is none), `render_modes`, and implement the abstract methods.
    ``observation_space`` and ``action_space`` must be set by the end of `connect`.

    Info keys every adapter provides: ``raw_observation`` (the server's observation fields),
    ``metadata`` (the observation's metadata), and ``reward_missing=True`` when the server sent no reward
    (the reward is then 0.0).
    """

    server_name: ClassVar[str | None] = None
    #: The family's name in recorded trajectories; the trajectory viewer picks its renderer by it.
    family: ClassVar[str] = "generic"
    render_modes: ClassVar[tuple[str, ...]] = ()
    render_fps: ClassVar[int] = 4
    #: Whether ``reset()`` without a seed sends one drawn from the env's generator (see `OpenEnvEnv`).
    #: Families whose servers make seeding expensive (Atari reloads its ROM) continue the server's
    #: random stream instead, as their in-process counterparts do.
    derive_seeds: ClassVar[bool] = True
    #: Attributes of the adapter that the environment exposes as its own (``env.unwrapped.<name>``),
    #: for code written against a family's native environment (ALE's ``ale``, sb3-contrib's
    #: ``action_masks``).
    env_attributes: ClassVar[tuple[str, ...]] = ()

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    def connect(self, client: Client) -> None:  # noqa: B027 - optional hook
        """Called once, before the first reset, with the server's HTTP client (for ``/schema`` etc.)."""

    def probe(self, first: StepResult) -> None:  # noqa: B027 - optional hook
        """Called with the reply to a probing reset when `needs_probe` is true (spaces from data)."""

    needs_probe: ClassVar[bool] = False

    def server_options(self) -> dict[str, Any]:
        """Options for the bundled server this adapter starts when no ``base_url`` is given."""
        return {}

    def np_random(self, seed: int) -> np.random.Generator | None:
        """The env's generator after ``reset(seed=seed)``, when the family derives it its own way."""
        return None

    def reset_kwargs(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        """The keyword arguments to send with ``reset``: the seed, and ``options`` as they are."""
        kwargs: dict[str, Any] = dict(options or {})
        if seed is not None:
            kwargs["seed"] = seed
        return kwargs

    @abstractmethod
    def encode_action(self, action: Any) -> dict[str, Any]:
        """The server's action JSON for ``action`` (already checked to be in ``action_space``)."""

    @abstractmethod
    def decode(self, result: StepResult, *, reset: bool) -> Transition:
        """The gymnasium view of a server reply (to a reset when ``reset`` is true)."""

    def render(self, mode: str) -> Any:
        """The current frame in ``mode`` (one of `render_modes`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot render in mode {mode!r}")

    # ------------------------------------------------------------------ recording (openenv_lab.record)

    def describe_action(self, action: Any) -> str:
        """A readable form of ``action``, taken before it is sent (a chess move's UCI and SAN, say)."""
        if isinstance(action, np.ndarray):
            return json.dumps(np.round(action.astype(float), 4).tolist())
        return str(action)

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        """The family's own columns of a trajectory row: small values, never raw arrays.

        ``action`` is ``None`` on the row of a reset. The default keeps the raw observation as JSON.
        """
        return {"observation_json": json.dumps(info.get("raw_observation", {}), sort_keys=True, default=str)}

    def trajectory_metadata(self) -> dict[str, Any]:
        """What a viewer needs beside the rows (ticker names, action meanings...), saved with them."""
        return {}

    @staticmethod
    def base_info(result: StepResult) -> dict[str, Any]:
        """The info keys every adapter shares."""
        info: dict[str, Any] = {"raw_observation": result.observation, "metadata": result.metadata}
        if result.reward is None:
            info["reward_missing"] = True
        return info
