"""Lesson 3's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

import time
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_03 as check
from tutorials.solutions import lesson_03 as solution


@pytest.fixture(scope="module")
def chess_envs() -> Iterator[gym.vector.VectorEnv]:
    envs = gym.make_vec("openenv/chess", num_envs=4, agent_color="white", max_moves=20)
    yield envs
    envs.close()


@pytest.fixture(scope="module")
def echo_envs() -> Iterator[gym.vector.VectorEnv]:
    envs = gym.make_vec("openenv/echo", num_envs=2, max_steps=3)
    yield envs
    envs.close()


def test_the_reference_answers_pass(chess_envs, echo_envs, capsys):
    rate = check.steps_per_second(solution.steps_per_second, chess_envs)
    check.count_finished(solution.count_finished, echo_envs, "hi")
    assert rate > 0
    assert capsys.readouterr().out.splitlines() == ["Exercise 1: correct", "Exercise 2: correct"]


def rate(envs, steps, *, per_env=True, masked=True, extra_steps=0, seconds_per_step=False):
    obs, _ = envs.reset()
    start = time.perf_counter()
    for _ in range(steps + extra_steps):
        actions = np.array(
            [envs.single_action_space.sample(mask=m) if masked and m.any() else 0 for m in obs["action_mask"]]
        )
        obs, *_ = envs.step(actions)
    elapsed = time.perf_counter() - start
    taken = steps * (envs.num_envs if per_env else 1)
    return elapsed / taken if seconds_per_step else taken / elapsed


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"per_env": False}, r"vector steps per second.*steps \* envs.num_envs"),
        ({"masked": False}, "not legal there"),
        ({"extra_steps": 1}, "step exactly `steps` times"),
        ({"seconds_per_step": True}, "seconds per step"),
    ],
)
def test_steps_per_second_mistakes_are_named(chess_envs, mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.steps_per_second(lambda envs, steps: rate(envs, steps, **mistake), chess_envs)


def test_a_rate_timed_over_part_of_the_loop_is_refused(chess_envs):
    def half_timed(envs, steps):
        obs, _ = envs.reset()
        start = time.perf_counter()
        elapsed = 0.0
        for step in range(steps):
            actions = np.array(
                [envs.single_action_space.sample(mask=m) if m.any() else 0 for m in obs["action_mask"]]
            )
            obs, *_ = envs.step(actions)
            if step == steps // 4:
                elapsed = time.perf_counter() - start
        return steps * envs.num_envs / elapsed

    with pytest.raises(NotYetRight, match="Time the loop"):
        check.steps_per_second(half_timed, chess_envs)


def finished(envs, steps, action, *, truncations=True, any_env=False, extra_steps=0):
    count = 0
    for _ in range(steps + extra_steps):
        _, _, terminated, truncated, _ = envs.step(tuple(action for _ in range(envs.num_envs)))
        ended = terminated | truncated if truncations else terminated
        count += int(ended.any()) if any_env else int(ended.sum())
    return count


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"truncations": False}, r"count `terminations \| truncations`"),
        ({"any_env": True}, r"not `.any\(\)`"),
        ({"extra_steps": -1}, "step exactly `steps` times"),
    ],
)
def test_count_finished_mistakes_are_named(echo_envs, mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.count_finished(
            lambda envs, steps, action: finished(envs, steps, action, **mistake), echo_envs, "hi"
        )
