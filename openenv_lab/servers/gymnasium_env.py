"""Any registered gymnasium environment as an OpenEnv server: ``openenv-lab serve gymnasium --env-id ID``.

The small worlds that learn in seconds (FrozenLake, CliffWalking, CartPole and their kind) are what the
methods' lessons need, and any researcher may want an existing gymnasium environment behind the OpenEnv
protocol. This server plays one, given by its gymnasium id, one instance per session:

- its ``/schema`` is made from the environment's spaces (`openenv_lab.space_json.json_schema`): the action
  is ``{"action": value}``, the observation ``{"observation": value}``, each value as JSON;
- its state says the spaces exactly (``action_space``, ``observation_space``, as
  `openenv_lab.space_json.space_to_json` writes them), so that ``gym.make("openenv/gymnasium",
  env_id=ID)`` has spaces equal to the environment's own;
- a reset's seed goes to the environment's ``reset``: the same seeds give the same episodes as the
  environment played in-process;
- ``done`` is ``terminated or truncated``, and the metadata says which (``terminated``, ``truncated``),
  with the environment's ``info`` as JSON.

The id is the server's, chosen by whoever starts it, never by a client.
"""

from __future__ import annotations

import functools
import re
import uuid
from typing import Annotated, Any

import gymnasium as gym
import numpy as np
from pydantic import AfterValidator, Field, WithJsonSchema, create_model
from pydantic_core import PydanticCustomError

from ..space_json import json_schema, space_to_json, value_from_json, value_to_json
from ._app import build_app
from ._base import Action, Observation, ServerEnvironment, State
from .catalogue import BUNDLED_SERVERS

__all__ = ["GymnasiumEnvironment", "GymnasiumState", "make_app", "models"]

#: The options and their ranges (the catalogue declares them once).
SPEC = BUNDLED_SERVERS["gymnasium"]
DEFAULT_ENV_ID: str = SPEC.option("env_id").default


class GymnasiumState(State):
    """The state of a session: the id it plays and its spaces, exactly (``space_to_json``)."""

    env_id: str = ""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    action_space: dict[str, Any] = Field(default_factory=dict)
    observation_space: dict[str, Any] = Field(default_factory=dict)


def make_env(
    env_id: str, max_episode_steps: int | None = None, env_kwargs: dict[str, Any] | None = None
) -> gym.Env[Any, Any]:
    """``gym.make(env_id, **env_kwargs)``, or a `ValueError` that says what ids or keywords there are."""
    SPEC.check(env_id=env_id, max_episode_steps=max_episode_steps, env_kwargs=env_kwargs)
    try:
        return gym.make(env_id, max_episode_steps=max_episode_steps, **(env_kwargs or {}))
    except gym.error.Error as exc:
        raise ValueError(
            f"gymnasium cannot make {env_id!r} ({exc}); see gymnasium.pprint_registry() for the ids there are"
        ) from None
    except TypeError as exc:  # a keyword the environment's constructor does not take
        raise ValueError(
            f"gymnasium cannot make {env_id!r} with env_kwargs {env_kwargs!r} ({exc}); see the "
            "environment's documentation for the keywords it takes"
        ) from None


def models(env_id: str, env: gym.Env[Any, Any]) -> tuple[type, type]:
    """The action and observation models of ``env``: one field each, whose schema is its space's."""
    name = re.sub(r"\W", "", env_id.split("/")[-1].split(":")[-1].rsplit("-v", 1)[0]) or "Gymnasium"
    action_space, observation_space = env.action_space, env.observation_space

    def in_space(value: Any) -> Any:
        # pydantic's own error type: a ValueError would travel in the error's context, which the
        # framework then cannot write as JSON.
        try:
            decoded = value_from_json(action_space, value)
        except (ValueError, TypeError) as exc:
            raise PydanticCustomError(
                "action_space",
                "not an action of {space}: {why}",
                {"space": str(action_space), "why": str(exc)},
            ) from None
        if not action_space.contains(decoded):
            raise PydanticCustomError(
                "action_space",
                "{value} is not in the action space {space}",
                {"value": repr(value), "space": str(action_space)},
            )
        return value

    action_model = create_model(
        f"{name}Action",
        __base__=Action,
        action=(
            Annotated[Any, WithJsonSchema(json_schema(action_space)), AfterValidator(in_space)],
            Field(..., description=f"An action of {action_space}"),
        ),
    )
    observation_model = create_model(
        f"{name}Observation",
        __base__=Observation,
        observation=(
            Annotated[Any, WithJsonSchema(json_schema(observation_space))],
            Field(None, description=f"An observation of {observation_space}"),
        ),
    )
    return action_model, observation_model


def as_json(value: Any) -> Any:
    """An ``info`` as JSON: numpy values as numbers and lists; what JSON cannot hold, as its text."""
    if isinstance(value, dict):
        return {str(key): as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


class GymnasiumEnvironment(ServerEnvironment):
    """One instance of a gymnasium environment, played over OpenEnv (see the module docstring)."""

    NAME = "gymnasium"

    def __init__(
        self,
        env_id: str = DEFAULT_ENV_ID,
        max_episode_steps: int | None = None,
        observation_model: type | None = None,
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.env = make_env(env_id, max_episode_steps, self.env_kwargs)
        self._observation = observation_model or models(env_id, self.env)[1]
        self._done = True  # until the first reset
        self._state = self._new_state(None)

    def _new_state(self, episode_id: str | None) -> GymnasiumState:
        return GymnasiumState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            env_id=self.env_id,
            env_kwargs=self.env_kwargs,
            action_space=space_to_json(self.env.action_space),
            observation_space=space_to_json(self.env.observation_space),
        )

    def reset(self, seed: int | None = None, episode_id: str | None = None, **unknown: Any) -> Any:
        SPEC.refuse_unknown(unknown)
        SPEC.check(seed=seed)
        observation, info = self.env.reset(seed=seed)
        self._done = False
        self._state = self._new_state(episode_id)
        metadata = {"info": as_json(info), **({"seed": seed} if seed is not None else {})}
        return self._observation(
            observation=value_to_json(self.env.observation_space, observation),
            reward=0.0,
            done=False,
            metadata=metadata,
        )

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if self._done:
            raise ValueError("The episode is over (or has not started); send a reset")
        value = value_from_json(self.env.action_space, action.action)
        observation, reward, terminated, truncated, info = self.env.step(value)
        self._done = bool(terminated or truncated)
        self._update_state(step_count=self._state.step_count + 1)
        return self._observation(
            observation=value_to_json(self.env.observation_space, observation),
            reward=float(reward),
            done=self._done,
            metadata={"terminated": bool(terminated), "truncated": bool(truncated), "info": as_json(info)},
        )

    def close(self) -> None:
        self.env.close()

    def describe(self) -> str:
        return f"gymnasium's {self.env_id}, served over OpenEnv by openenv_lab."


def make_app(
    env_id: str = DEFAULT_ENV_ID,
    max_episode_steps: int | None = None,
    max_sessions: int = 64,
    env_kwargs: dict[str, Any] | None = None,
) -> Any:
    """The FastAPI app serving ``env_id``; an id gymnasium cannot make stops it here, not at a reset."""
    probe = make_env(env_id, max_episode_steps, env_kwargs)
    action_model, observation_model = models(env_id, probe)
    probe.close()
    return build_app(
        functools.partial(
            GymnasiumEnvironment,
            env_id=env_id,
            max_episode_steps=max_episode_steps,
            observation_model=observation_model,
            env_kwargs=env_kwargs,
        ),
        action_model,
        observation_model,
        GymnasiumState,
        env_name="gymnasium",
        max_sessions=max_sessions,
    )
