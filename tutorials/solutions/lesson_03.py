"""Lesson 3: vector environments."""

from __future__ import annotations

import time

import numpy as np


def steps_per_second(envs, steps: int) -> float:
    obs, _ = envs.reset()
    start = time.perf_counter()
    for _ in range(steps):
        actions = np.array(
            [envs.single_action_space.sample(mask=m) if m.any() else 0 for m in obs["action_mask"]]
        )
        obs, *_ = envs.step(actions)
    return steps * envs.num_envs / (time.perf_counter() - start)


def count_finished(envs, steps: int, action) -> int:
    finished = 0
    for _ in range(steps):
        _, _, terminations, truncations, _ = envs.step(tuple(action for _ in range(envs.num_envs)))
        finished += int(np.logical_or(terminations, truncations).sum())
    return finished
