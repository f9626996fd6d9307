"""Checks for lesson 6, evaluating and comparing agents fairly (``tutorials/06_fair_evaluation.ipynb``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ..record import Trajectory
from ._exercise import Exercise, WatchedEnv

__all__ = ["evaluate", "mean_and_interval", "same_environment"]

Agent = Callable[[Any, dict[str, Any], np.random.Generator], Any]


def _episode(agent: Agent, env: gym.Env, seed: int) -> tuple[float, list[Any]]:
    """One episode as the exercise defines it (reset with the seed, the agent's own generator made from
    it): its return and its actions."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    total, done, actions = 0.0, False, []
    while not done:
        action = agent(obs, info, rng)
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        done = terminated or truncated
    return total, actions


def evaluate(
    answer: Callable[[Agent, gym.Env, Sequence[int]], Any],
    agent: Agent,
    env: gym.Env,
    seeds: Sequence[int] = range(6),
) -> list[float]:
    """Exercise 1: ``answer(agent, env, seeds)`` returns one episode's return per seed.

    Each episode is compared with the check's own episode on the same seed: the same actions (``agent``
    should draw from its generator, as the lesson's random agent does, so that a wrong generator shows
    even where the returns happen to agree) and the same return. Returns the returns.
    """
    exercise = Exercise(1, "evaluate")
    seeds = list(seeds)
    watched = WatchedEnv(env, exercise)
    got = exercise.run(answer, agent, watched, seeds)
    exercise.require(
        isinstance(got, (list, tuple, np.ndarray)) and len(got) == len(seeds),
        f"it returned {got!r}; return a list with one episode return per seed ({len(seeds)} here).",
    )
    exercise.require(
        watched.reset_seeds == seeds,
        f"it reset with seeds {watched.reset_seeds}; reset once per episode with that episode's seed "
        f"(`env.reset(seed=seed)`), for {seeds}.",
    )
    for index, seed in enumerate(seeds):
        expected, actions = _episode(agent, env, seed)
        if not _same_actions(watched.actions[index], actions):
            if index == 0:
                exercise.fail(
                    f"seed {seed}'s episode did not play the moves the agent makes with "
                    f"`np.random.default_rng({seed})`: give the agent a generator made from the episode's "
                    "seed, so the same seed replays the same episode."
                )
            exercise.fail(
                f"seed {seed}'s episode did not play the moves the agent makes with its own generator, while "
                f"seed {seeds[0]}'s did. Make a new generator for every episode, "
                "`np.random.default_rng(seed)`: one generator shared by all episodes makes each episode "
                "depend on the episodes before it."
            )
        exercise.require(
            abs(float(got[index]) - expected) < 1e-9,
            f"seed {seed}'s episode earned {expected:+g} in all, but it returned {got[index]:+g}: add up "
            "every reward of the episode, until `terminated or truncated`.",
        )
    exercise.passed()
    return [float(value) for value in got]


def _same_actions(first: list[Any], second: list[Any]) -> bool:
    return len(first) == len(second) and all(
        np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(first, second, strict=True)
    )


INTERVAL_CASES = ([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], [-2.5, 0.5, 4.0])


def mean_and_interval(answer: Callable[[Any], Any]) -> None:
    """Exercise 2: ``answer(values)`` is ``(mean, half-width of the 95% interval)``, Student's t interval:
    ``t.ppf(0.975, n - 1) * sd(ddof=1) / sqrt(n)``. Needs scipy (for the t quantiles)."""
    exercise = Exercise(2, "mean_and_interval")
    try:
        from scipy import stats
    except ImportError:
        exercise.fail("this check needs scipy for Student's t quantiles: pip install scipy")
    for values in INTERVAL_CASES:
        array = np.asarray(values)
        n = len(values)
        mean = float(array.mean())
        sample_sd, population_sd = float(array.std(ddof=1)), float(array.std(ddof=0))
        t = float(stats.t.ppf(0.975, n - 1))
        half = t * sample_sd / math.sqrt(n)
        got = exercise.run(answer, list(values))
        exercise.require(
            isinstance(got, tuple) and len(got) == 2,
            f"it returned {got!r}; return a pair `(mean, half_width)`.",
        )
        got_mean, got_half = float(got[0]), float(got[1])
        exercise.require(
            abs(got_mean - mean) < 1e-9, f"the mean of {values} is {mean:g}, it returned {got_mean:g}."
        )
        if abs(got_half - half) < 1e-9:
            continue
        call = f"for {values}"
        mistakes = {
            1.96 * sample_sd / math.sqrt(n): f"1.96 is the normal distribution's; with {n} values the mean "
            f"follows Student's t with n - 1 = {n - 1} degrees of freedom: t.ppf(0.975, n - 1) = {t:.3f}, "
            "a wider interval.",
            float(stats.t.ppf(0.975, n)) * sample_sd / math.sqrt(n): "Student's t has n - 1 degrees of "
            "freedom here, not n (one is spent on the mean).",
            float(stats.t.ppf(0.95, n - 1)) * sample_sd / math.sqrt(n): "a 95% interval leaves 2.5% in each "
            "tail: t.ppf(0.975, n - 1), not 0.95.",
            t * population_sd / math.sqrt(n): "the standard deviation must be the sample one: `ddof=1` "
            "(n - 1 in the denominator), since the values are a sample.",
            t * sample_sd / n: "the standard error divides by the square root of n, not by n.",
            2 * half: "that is the interval's whole width; return the half-width, t x sd / sqrt(n).",
            sample_sd / math.sqrt(n): "that is the standard error; a 95% interval is t.ppf(0.975, n - 1) "
            "standard errors each side.",
        }
        for wrong, hint in mistakes.items():
            if abs(got_half - wrong) < 1e-9:
                exercise.fail(f"{call} it returned the half-width {got_half:g}: {hint}")
        exercise.fail(
            f"{call} the half-width is {half:g}, it returned {got_half:g}: "
            "t.ppf(0.975, n - 1) x sd(ddof=1) / sqrt(n)."
        )
    exercise.passed()


def _variant(trajectory: Trajectory, **changes: Any) -> Trajectory:
    """The trajectory with some metadata changed (``server_version`` goes into ``server_metadata``)."""
    metadata = dict(trajectory.metadata)
    if "server_version" in changes:
        server = dict(metadata.get("server_metadata") or {})
        server["version"] = changes.pop("server_version")
        metadata["server_metadata"] = server
    metadata.update(changes)
    return Trajectory(trajectory.table, metadata)


def same_environment(
    answer: Callable[[Trajectory, Trajectory], Any], a: Trajectory, b: Trajectory, other: Trajectory
) -> None:
    """Exercise 3: ``answer(a, b)`` tells whether two recordings come from the same environment.

    ``a`` and ``b`` are recordings of one environment made with different options; ``other`` one of
    another environment. The check adds recordings of its own: ``a`` as if made later, on another server
    version, with another schema, and under another id.
    """
    exercise = Exercise(3, "same_environment")
    later = _variant(a, created="2100-01-01T00:00:00+00:00", env_kwargs={"max_moves": 7})
    same = [
        (b, "the same environment with other options (options are how you play it, not what it is)"),
        (later, "the same environment recorded at another time with other options"),
    ]
    different = [
        (other, f"{other.metadata.get('env_id')!r} against {a.metadata.get('env_id')!r}"),
        (_variant(a, server_version="999.0"), "the same id on another server version (the rules may differ)"),
        (_variant(a, schema_sha256="0" * 64), "the same id and version with another schema (other spaces)"),
        (_variant(a, env_id="openenv/elsewhere"), "another environment id, same server"),
    ]

    def verdict(trajectory: Trajectory) -> bool:
        result = exercise.run(answer, a, trajectory)
        exercise.require(
            isinstance(result, (bool, np.bool_)), f"it returned {result!r}; return True or False."
        )
        return bool(result)

    for trajectory, what in same:
        exercise.require(
            verdict(trajectory),
            f"it said False for {what}. Compare only the identity: `env_id`, the server's version and the "
            "schema hash; the rest of the metadata (options, time, package versions) changes between runs.",
        )
    for trajectory, what in different:
        exercise.require(
            not verdict(trajectory),
            f"it said True for {what}. All three must be equal: `env_id`, "
            "`metadata['server_metadata']['version']` and `metadata['schema_sha256']`.",
        )
    exercise.passed()
