"""Checks for lesson 1, the RL loop over a network (``tutorials/01_rl_loop_over_a_network.ipynb``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from ..client import ServerError, Session, StepResult
from ._exercise import Exercise, WatchedEnv

__all__ = ["echo_reward", "play_random_episode"]

#: Messages whose rewards the answer must get from the server (the empty one included).
MESSAGES = ("hello", "", "OpenEnv over a network")


def echo_reward(answer: Callable[[str, str], Any], url: str) -> None:
    """Exercise 1: ``answer(url, message)`` returns the reward the echo server pays for ``message``."""
    exercise = Exercise(1, "echo_reward", lets_through=(ServerError,))
    for message in MESSAGES:
        with Session(url) as session:  # what the server pays, asked on a session of our own
            session.reset()
            expected = session.step({"message": message}).reward
        try:
            got = exercise.run(answer, url, message)
        except ServerError as exc:
            exercise.fail(
                f"the server refused the step ({exc}). A step's action is the action's fields as a dict: "
                "`session.step({'message': message})`."
            )
        if isinstance(got, StepResult):
            exercise.fail("it returned the whole reply (a StepResult); return its reward: `result.reward`.")
        exercise.require(
            isinstance(got, (int, float)) and not isinstance(got, bool),
            f"it returned {got!r}, a {type(got).__name__}; return the reward, a float.",
        )
        if message and got == 0.0:
            exercise.fail(
                f"for {message!r} it returned 0.0, which is what the reset pays. Step with the message and "
                "return that step's reward."
            )
        exercise.require(
            abs(got - expected) < 1e-9,
            f"for {message!r} the server pays {expected}, but the answer returned {got}.",
        )
    exercise.passed()


def play_random_episode(
    answer: Callable[[gym.Env, int], Any], env: gym.Env, chess_env: gym.Env | None = None
) -> None:
    """Exercise 2: ``answer(env, seed)`` plays one random episode and returns ``(steps, total_reward)``.

    ``env`` is the lesson's echo environment; ``chess_env``, if given, one with legal-action masks.
    """
    exercise = Exercise(2, "play_random_episode")
    first = _episode(exercise, answer, env, seed=3)
    second = _episode(exercise, answer, env, seed=3)
    exercise.require(
        first == second,
        f"the same seed gave {first} and then {second}. Seed the action space as well as the reset "
        "(`env.action_space.seed(seed)`), so the same seed replays the same episode.",
    )
    if chess_env is not None:
        _episode(exercise, answer, chess_env, seed=0)
    exercise.passed()


def _episode(
    exercise: Exercise, answer: Callable[[gym.Env, int], Any], env: gym.Env, *, seed: int
) -> tuple[int, float]:
    watched = WatchedEnv(env, exercise, strict_masks=True)
    result = exercise.run(answer, watched, seed)
    exercise.require(
        isinstance(result, tuple) and len(result) == 2,
        f"it returned {result!r}; return a pair `(steps, total_reward)`.",
    )
    steps, total = result
    exercise.require(
        seed in watched.reset_seeds, f"it never reset with the seed: call `env.reset(seed={seed})` first."
    )
    exercise.require(
        bool(watched.endings) and any(watched.endings[-1]),
        "it stopped before the episode ended: keep stepping until `terminated or truncated`.",
    )
    exercise.require(
        steps == watched.steps,
        f"it returned {steps} steps but stepped the environment {watched.steps} times: count each "
        "`env.step` once (the reset is not a step).",
    )
    expected_total = sum(watched.rewards)
    exercise.require(
        abs(float(total) - expected_total) < 1e-9,
        f"the rewards the steps returned add up to {expected_total:g}, but it returned {total!r}: add up "
        "every step's reward.",
    )
    return int(steps), float(total)
