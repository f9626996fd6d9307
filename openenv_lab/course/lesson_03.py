"""Checks for lesson 3, vector environments and throughput (``tutorials/03_vector_envs.ipynb``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from ._exercise import Exercise, WatchedVectorEnv

__all__ = ["count_finished", "steps_per_second"]

#: Timer slack: the answer's clock and the check's read the same `time.perf_counter`, a few calls apart.
SLACK = 0.02


def steps_per_second(answer: Callable[[Any, int], Any], envs: gym.vector.VectorEnv, steps: int = 30) -> float:
    """Exercise 1: ``answer(envs, steps)`` steps ``steps`` times and returns environment steps per second.

    The rate cannot be checked against a fixed number (machines differ); it is checked against the
    steps the watcher saw and the time they took: at most every sub-environment's steps over the time
    spent inside ``step``, at least the same over the whole call. Returns the answer's rate.
    """
    exercise = Exercise(1, "steps_per_second")
    watched = WatchedVectorEnv(envs, exercise, strict_masks=True)
    start = time.perf_counter()
    rate = exercise.run(answer, watched, steps)
    whole = time.perf_counter() - start
    exercise.require(
        isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0,
        f"it returned {rate!r}; return a positive number of environment steps per second.",
    )
    exercise.require(
        watched.steps == steps,
        f"asked for {steps} steps, it called `envs.step` {watched.steps} times: step exactly `steps` times.",
    )
    env_steps = steps * envs.num_envs
    low = env_steps / whole * (1 - SLACK)  # the answer timed at most the whole call
    high = env_steps / watched.step_seconds * (1 + SLACK)  # and at least the steps themselves
    if low <= rate * envs.num_envs <= high and not low <= rate <= high:
        exercise.fail(
            f"{rate:.0f} is vector steps per second. Each vector step is {envs.num_envs} environment steps "
            "(one per sub-environment): count `steps * envs.num_envs`."
        )
    if low <= 1 / rate <= high:
        exercise.fail("it returned seconds per step; return steps per second (steps divided by the time).")
    exercise.require(
        low <= rate <= high,
        f"it returned {rate:.0f} env steps/s, but the {env_steps} environment steps took between "
        f"{watched.step_seconds:.3f} s (inside `step`) and {whole:.3f} s (the whole call), so the rate is "
        f"between {low:.0f} and {high:.0f}. Time the loop with `time.perf_counter()` before and after it.",
    )
    exercise.passed()
    return float(rate)


def count_finished(answer: Callable[[Any, int, Any], Any], envs: gym.vector.VectorEnv, action: Any) -> None:
    """Exercise 2: ``answer(envs, steps, action)`` counts the episodes that ended over ``steps`` steps.

    ``envs`` is a vector env whose episodes end within a few steps (the lesson's echo envs with
    ``max_steps=3``); the answer is compared with the endings the watcher counted.
    """
    exercise = Exercise(2, "count_finished")
    for steps in (7, 5):
        envs.reset(seed=0)
        watched = WatchedVectorEnv(envs, exercise)
        got = exercise.run(answer, watched, steps, action)
        exercise.require(
            watched.steps == steps,
            f"asked for {steps} steps, it called `envs.step` {watched.steps} times: step exactly `steps` "
            "times.",
        )
        if got == watched.endings:
            continue
        if got == 0:
            exercise.fail(
                f"it counted no endings, but {watched.endings} episodes ended. An episode that a limit cuts "
                "short ends too: count `terminations | truncations`, not `terminations` alone."
            )
        if got is not None and 0 < got < watched.endings:
            exercise.fail(
                f"it counted {got} endings, but {watched.endings} episodes ended: several sub-environments "
                "can end on the same step; add up `(terminations | truncations).sum()`, not `.any()`."
            )
        exercise.fail(f"in {steps} steps {watched.endings} episodes ended, but it returned {got!r}.")
    exercise.passed()
