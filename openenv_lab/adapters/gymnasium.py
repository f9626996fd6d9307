"""The adapter of our gymnasium server: a gymnasium environment played remotely, with its own spaces.

``gym.make("openenv/gymnasium", env_id="FrozenLake-v1")`` starts our server of that id
(`openenv_lab.servers.gymnasium_env`) on this machine, or plays the one at ``base_url``. The server's
state describes the environment's spaces exactly, so the env's spaces are equal to those of
``gym.make("FrozenLake-v1")``, and the same seeds give the same episodes. ``terminated`` and ``truncated``
are the environment's own (the server's metadata says which ended an episode).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..client import Client, EnvironmentMismatch, ProtocolError, StepResult
from ..space_json import space_from_json, value_from_json, value_to_json
from .base import Adapter, Transition, base_info

__all__ = ["GymnasiumAdapter"]


class GymnasiumAdapter(Adapter):
    """A gymnasium environment served by ``openenv-lab serve gymnasium`` (see the module docstring).

    Args:
        env_id: the gymnasium id to play (the embedded server is started for it; None: the server's
            default, in ``docs/options.md``); with ``base_url``, the id that server must be playing
            (None: whatever it plays).
        max_episode_steps: steps before an episode is truncated, for the embedded server (default: the
            id's own limit).
        env_kwargs: keyword arguments of ``gym.make(env_id, ...)`` on the server (FrozenLake's
            ``{"is_slippery": False}``); with ``base_url``, those that server must have been started with
            (None: whatever it has).

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = gym.make("openenv/gymnasium", env_id="FrozenLake-v1")
        >>> env.observation_space, env.action_space
        (Discrete(16), Discrete(4))
        >>> env.reset(seed=0)[0]
        np.int64(0)
        >>> env.close()
    """

    family = "gymnasium"
    server_name = "gymnasium"
    needs_probe = True
    probe_state = True
    identity_options = ("env_id", "env_kwargs")
    #: A reset without a seed continues the environment's own random stream, as in-process: the same
    #: episodes after the first seed, automatic resets included.
    derive_seeds = False

    def __init__(
        self,
        env_id: str | None = None,
        max_episode_steps: int | None = None,
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if env_kwargs is not None and not isinstance(env_kwargs, Mapping):
            raise TypeError(f"env_kwargs must be a dict of gym.make's keywords, got {env_kwargs!r}")
        self.env_id = env_id
        self.env_kwargs = None if env_kwargs is None else dict(env_kwargs)
        given = {"env_id": env_id, "max_episode_steps": max_episode_steps, "env_kwargs": self.env_kwargs}
        self.server_options = {name: value for name, value in given.items() if value is not None}

    def setup(
        self,
        client: Client,
        first: StepResult | None,
        state: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        described = state() if state is not None else {}
        if "action_space" not in described or "observation_space" not in described:
            raise ProtocolError(
                f"The server at {client.base_url} does not describe its spaces in its state: it is not "
                "openenv-lab's gymnasium server (for any other OpenEnv server: openenv/remote)",
                url=client.base_url,
            )
        served = described.get("env_id")
        if self.check_identity and self.env_id is not None and served != self.env_id:
            raise EnvironmentMismatch(
                f"The server at {client.base_url} plays {served!r}, not {self.env_id!r}: start one for "
                f"{self.env_id!r} (openenv-lab serve gymnasium --env-id {self.env_id}), or make the env "
                "with check_identity=False",
                asked=self.env_id,
                reported=served,
                url=client.base_url,
            )
        kwargs = described.get("env_kwargs", {})
        if self.check_identity and self.env_kwargs is not None and kwargs != self.env_kwargs:
            raise EnvironmentMismatch(
                f"The server at {client.base_url} plays {served!r} made with env_kwargs {kwargs!r}, not "
                f"{self.env_kwargs!r}: start one with them (openenv-lab serve gymnasium --env-id {served} "
                f"--env-kwargs '{json.dumps(self.env_kwargs)}'), or make the env with check_identity=False",
                asked=self.env_kwargs,
                reported=kwargs,
                url=client.base_url,
            )
        self.env_id, self.env_kwargs = served, kwargs
        self.action_space = space_from_json(described["action_space"])
        self.observation_space = space_from_json(described["observation_space"])

    def encode_action(self, action: Any) -> dict[str, Any]:
        return {"action": value_to_json(self.action_space, action)}

    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        try:
            observation = value_from_json(self.observation_space, result.observation.get("observation"))
        except ValueError as exc:
            raise ProtocolError(f"The server sent an observation outside its space: {exc}") from None
        metadata = result.metadata
        truncated = bool(metadata.get("truncated", False))
        terminated = bool(metadata.get("terminated", result.done and not truncated))
        return Transition(observation, result.reward or 0.0, terminated, truncated, base_info(result))
