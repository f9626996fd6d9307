"""Stable-Baselines3 on our native vector env: `SB3VecEnv` and `make_vec_env`.

SB3 trains on its own ``VecEnv`` type, and its ``make_vec_env`` builds a ``DummyVecEnv`` (one env after
the other, in the calling thread) or a ``SubprocVecEnv`` (a process per env) over single envs. Our vector
env steps every session at once over one message per server; `SB3VecEnv` is that env seen as an SB3
``VecEnv``, so PPO, A2C, DQN, SAC... and sb3-contrib's ``MaskablePPO`` collect rollouts through it, and it
composes with ``VecNormalize``, ``VecFrameStack`` and ``VecMonitor`` like any ``VecEnv``.

SB3's conventions are kept: an env whose episode ended is reset in the same step (its returned
observation is the new episode's first), the last observation of the ended episode is
``infos[i]["terminal_observation"]``, and ``infos[i]["TimeLimit.truncated"]`` says the episode was cut
rather than finished.
``env_method("action_masks")`` answers each sub-environment's legal-action mask (chess), which is what
``MaskablePPO`` asks for. SB3 is an optional extra: ``pip install "openenv-lab[sb3]"``.

Example:
    >>> from openenv_lab.sb3 import make_vec_env
    >>> from stable_baselines3 import PPO
    >>> venv = make_vec_env("openenv/finrl", n_envs=4)
    >>> model = PPO("MlpPolicy", venv, n_steps=16, batch_size=32, verbose=0).learn(64)
    >>> venv.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from .envs import OpenEnvVectorEnv
from .envs.infos import split_infos

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as exc:  # an optional extra: say how to get it
    raise ImportError(
        'openenv_lab.sb3 needs Stable-Baselines3: pip install "openenv-lab[sb3]" (or stable-baselines3)'
    ) from exc

__all__ = ["SB3VecEnv", "make_vec_env"]

#: The spaces SB3's policies take, as observations and as actions.
_OBSERVATION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict)
_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class SB3VecEnv(VecEnv):
    """An `OpenEnvVectorEnv` (made with ``autoreset_mode="same_step"``) as a Stable-Baselines3 ``VecEnv``.

    Args:
        envs: the vector env to drive; `make_vec_env` makes one for an id.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> from openenv_lab.sb3 import SB3VecEnv
        >>> venv = SB3VecEnv(gym.make_vec("openenv/chess", num_envs=2, autoreset_mode="same_step"))
        >>> obs = venv.reset()
        >>> obs["board"].shape, venv.env_method("action_masks")[0].shape
        ((2, 19, 8, 8), (4672,))
        >>> venv.close()
    """

    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        unwrapped = envs.unwrapped
        if not isinstance(unwrapped, OpenEnvVectorEnv):
            raise TypeError(f"SB3VecEnv drives openenv_lab's vector env; got {type(unwrapped).__name__}")
        if unwrapped.autoreset_mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                "SB3 resets an ended episode in the step that ended it: make the vector env with "
                "autoreset_mode='same_step' (openenv_lab.sb3.make_vec_env does)"
            )
        _check_space("observation", envs.single_observation_space, _OBSERVATION_SPACES)
        _check_space("action", envs.single_action_space, _ACTION_SPACES)
        self.envs = envs
        self._actions: Any = None
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)

    def reset(self) -> Any:
        seeds = None if all(seed is None for seed in self._seeds) else list(self._seeds)
        options = self._options[0] if self._options and self._options[0] else None
        obs, infos = self.envs.reset(seed=seeds, options=options)
        self.reset_infos = split_infos(infos, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, infos = self.envs.step(actions)
        dones = np.logical_or(terminated, truncated)
        per_env = split_infos(infos, self.num_envs)
        for i in range(self.num_envs):
            if dones[i]:  # SAME_STEP: the reset's info, with the ended episode's last info and observation
                final, final_obs = per_env[i].pop("final_info", {}), per_env[i].pop("final_obs", None)
                self.reset_infos[i] = per_env[i]
                per_env[i] = {**final, "terminal_observation": final_obs}  # SB3's name for final_obs
            # as SB3's own vector envs: whether the episode was cut rather than finished, on every step
            per_env[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, rewards.astype(np.float32), dones, per_env

    def close(self) -> None:
        self.envs.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        values = self.envs.get_attr(attr_name)
        return [values[i] for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        current = list(self.envs.get_attr(attr_name))
        for i in self._get_indices(indices):
            current[i] = value
        self.envs.set_attr(attr_name, current)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        results = self.envs.call(method_name, *method_args, **method_kwargs)
        return [results[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]  # sessions, not wrapped gymnasium envs

    def get_images(self) -> Sequence[np.ndarray | None]:
        frames = self.envs.render()
        return list(frames) if frames is not None else [None] * self.num_envs

    def _get_indices(self, indices: Any) -> Iterable[int]:
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, (int, np.integer)):
            return [int(indices)]
        return [int(i) for i in indices]


def make_vec_env(env_id: str, n_envs: int = 1, *, seed: int | None = None, **kwargs: Any) -> SB3VecEnv:
    """``gym.make_vec(env_id, num_envs=n_envs, autoreset_mode="same_step", **kwargs)`` as an SB3 ``VecEnv``
    (the name and the first arguments of SB3's own ``make_vec_env``, which builds a ``DummyVecEnv``)."""
    kwargs.setdefault("autoreset_mode", "same_step")
    envs = gym.make_vec(env_id, num_envs=n_envs, **kwargs)
    try:
        venv = SB3VecEnv(envs)
    except BaseException:  # refused (a space SB3 cannot take): free the sessions
        envs.close()
        raise
    if seed is not None:
        venv.seed(seed)
    return venv


def _check_space(what: str, space: spaces.Space[Any], allowed: tuple[type, ...]) -> None:
    if isinstance(space, spaces.Dict) and what == "observation":
        for key, inner in space.spaces.items():
            if not isinstance(inner, allowed) or isinstance(inner, spaces.Dict):
                raise ValueError(
                    f"SB3 cannot take the {what} space's {key!r} part, a {type(inner).__name__}: choose a "
                    "spec whose observation is made of Box/Discrete parts (openenv_lab.Spec)"
                )
        return
    if not isinstance(space, allowed):
        raise ValueError(
            f"SB3 cannot take a {type(space).__name__} {what} space (it takes "
            f"{', '.join(t.__name__ for t in allowed)}): give the env a spec that maps it to one of those "
            "(openenv_lab.Spec), or train it with a library that takes text (TRL)"
        )
