"""What every lesson's checks share: the verdict (`NotYetRight`), and watchers that see what an answer did.

A watcher is a gymnasium wrapper handed to the student's function in place of the environment. It
counts the calls, remembers the seeds and the legal-action masks, and times the steps, so a check can
compare the answer with what actually happened instead of with the answer's own output.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

__all__ = ["Exercise", "NotYetRight", "WatchedEnv", "WatchedVectorEnv"]


class NotYetRight(AssertionError):
    """An exercise's answer is not right yet. The message says what went wrong and what to try.

    It is an `AssertionError`, so a notebook cell (and nbval, and pytest) stops on it as on a failed
    ``assert``.
    """


class Exercise:
    """One exercise of a lesson: runs the answer, fails with a hint, or says it is correct."""

    def __init__(self, number: int, name: str) -> None:
        self.number = number
        self.name = name

    def fail(self, hint: str) -> NoReturn:
        raise NotYetRight(f"Exercise {self.number} ({self.name}) is not right yet: {hint}")

    def require(self, condition: bool, hint: str) -> None:
        if not condition:
            self.fail(hint)

    def run(self, answer: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call the answer; an unwritten one, or a game stepped past its end, gets a hint."""
        try:
            return answer(*args, **kwargs)
        except NotImplementedError:
            self.fail(
                f"`{self.name}` is not written yet: replace `raise NotImplementedError` with your code."
            )
        except ResetNeeded:
            self.fail(
                "it stepped an episode that had already ended. An episode ends when `terminated` OR "
                "`truncated` is true (a limit cuts it short: that is `truncated`); stop, or reset, then."
            )

    def passed(self, detail: str = "") -> None:
        print(f"Exercise {self.number}: correct" + (f" ({detail})" if detail else ""))


def _legal(mask: np.ndarray, action: Any) -> bool:
    index = int(action)
    return 0 <= index < mask.size and bool(mask[index])


class WatchedEnv(gym.Wrapper):
    """A single environment that records what is done to it: seeds, actions, rewards, endings.

    ``strict_masks``: an action outside the observation's ``action_mask`` fails the exercise at once,
    with a hint (the environment would have played it as an illegal move).
    """

    def __init__(self, env: gym.Env, exercise: Exercise, *, strict_masks: bool = False) -> None:
        super().__init__(env)
        self.exercise = exercise
        self.strict_masks = strict_masks
        self.reset_seeds: list[int | None] = []
        self.steps = 0
        self.rewards: list[float] = []
        self.endings: list[tuple[bool, bool]] = []
        self.infos: list[dict[str, Any]] = []  # the steps' infos
        self.actions: list[list[Any]] = []  # per reset, the actions taken since
        self.last_observation: Any = None
        self.last_info: dict[str, Any] = {}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.reset_seeds.append(seed)
        self.actions.append([])
        observation, info = self.env.reset(seed=seed, options=options)
        self.last_observation, self.last_info = observation, info
        return observation, info

    def step(self, action: Any) -> Any:
        observation = self.last_observation
        if self.strict_masks and isinstance(observation, dict) and "action_mask" in observation:
            mask = np.asarray(observation["action_mask"])
            if mask.any() and not _legal(mask, action):
                self.exercise.fail(
                    f"action {action!r} is not legal in that position. Sample among the legal ones: "
                    "`env.action_space.sample(mask=obs['action_mask'])`."
                )
        result = self.env.step(action)
        observation, reward, terminated, truncated, info = result
        if self.actions:
            self.actions[-1].append(action)
        self.steps += 1
        self.rewards.append(float(reward))
        self.endings.append((bool(terminated), bool(truncated)))
        self.infos.append(info)
        self.last_observation, self.last_info = observation, info
        return result


class WatchedVectorEnv(gym.vector.VectorWrapper):
    """A vector environment that counts and times its steps, and checks actions against the masks."""

    def __init__(self, env: gym.vector.VectorEnv, exercise: Exercise, *, strict_masks: bool = False) -> None:
        super().__init__(env)
        self.exercise = exercise
        self.strict_masks = strict_masks
        self.resets = 0
        self.steps = 0
        self.step_seconds = 0.0
        self.endings = 0  # sub-environment episodes that ended (terminated or truncated)
        self.last_observation: Any = None

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:
        self.resets += 1
        observation, infos = self.env.reset(seed=seed, options=options)
        self.last_observation = observation
        return observation, infos

    def step(self, actions: Any) -> Any:
        observation = self.last_observation
        if self.strict_masks and isinstance(observation, dict) and "action_mask" in observation:
            for index, (mask, action) in enumerate(zip(observation["action_mask"], actions, strict=False)):
                if mask.any() and not _legal(np.asarray(mask), action):
                    self.exercise.fail(
                        f"sub-environment {index} got action {action!r}, which is not legal there. Sample "
                        "each one among its legal actions: `envs.single_action_space.sample(mask=m)` for "
                        "each row `m` of `obs['action_mask']`."
                    )
        start = time.perf_counter()
        result = self.env.step(actions)
        self.step_seconds += time.perf_counter() - start
        observation, _, terminations, truncations, _ = result
        self.steps += 1
        self.endings += int(np.logical_or(terminations, truncations).sum())
        self.last_observation = observation
        return result
