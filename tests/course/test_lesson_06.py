"""Lesson 6's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

import openenv_lab
from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_06 as check
from tutorials.solutions import lesson_06 as solution


def random_agent(obs, info, rng):
    return int(rng.choice(np.flatnonzero(obs["action_mask"])))


@pytest.fixture(scope="module")
def env() -> Iterator[gym.Env]:
    env = gym.make("openenv/chess", agent_color="white", max_moves=30)
    yield env
    env.close()


def recording(env_id, **options):
    recorder = openenv_lab.RecordTrajectory(gym.make(env_id, **options))
    obs, _ = recorder.reset(seed=0)
    mask = obs["action_mask"] if isinstance(obs, dict) and "action_mask" in obs else None
    recorder.step(recorder.action_space.sample(mask=mask))
    recorder.close()
    return recorder.trajectory


@pytest.fixture(scope="module")
def recordings():
    return (
        recording("openenv/chess"),
        recording("openenv/chess", opponent="greedy"),
        recording("openenv/echo"),
    )


def test_the_reference_answers_pass(env, recordings, capsys):
    returns = check.evaluate(solution.evaluate, random_agent, env)
    check.mean_and_interval(solution.mean_and_interval)
    check.same_environment(solution.same_environment, *recordings)
    assert len(returns) == 6
    assert capsys.readouterr().out.splitlines() == [f"Exercise {n}: correct" for n in (1, 2, 3)]


def evaluate(agent, env, seeds, *, shared_rng=False, unseeded_rng=False, seed_reset=True, as_mean=False):
    returns = []
    shared = np.random.default_rng(seeds[0])
    for seed in seeds:
        rng = shared if shared_rng else np.random.default_rng(None if unseeded_rng else seed)
        obs, info = env.reset(seed=seed if seed_reset else None)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(agent(obs, info, rng))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns)) if as_mean else returns


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"shared_rng": True}, "one generator shared by all episodes"),
        ({"unseeded_rng": True}, "a generator made from the episode's seed"),
        ({"seed_reset": False}, r"reset once per episode with that episode's seed"),
        ({"as_mean": True}, "one episode return per seed"),
    ],
)
def test_evaluate_mistakes_are_named(env, mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.evaluate(lambda agent, env, seeds: evaluate(agent, env, seeds, **mistake), random_agent, env)


def interval(values, *, ddof=1, root=True, quantile=None, whole=False):
    """Student's t interval, or one of the mistakes: ``quantile(n)`` in place of t.ppf(0.975, n - 1)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    n = len(values)
    q = quantile(n) if quantile else stats.t.ppf(0.975, n - 1)
    half = q * values.std(ddof=ddof) / (np.sqrt(n) if root else n)
    return float(values.mean()), float(2 * half if whole else half)


def t_quantile(level, degrees):
    from scipy import stats

    return lambda n: stats.t.ppf(level, degrees(n))


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"ddof": 0}, "ddof=1"),
        ({"root": False}, "square root of n"),
        ({"whole": True}, "the interval's whole width"),
        ({"quantile": lambda n: 1.0}, r"t.ppf\(0.975, n - 1\) standard errors each side"),
        (
            {"quantile": lambda n: 1.96},
            r"1.96 is the normal distribution's; with \d values .* degrees of freedom",
        ),
        ({"quantile": t_quantile(0.975, lambda n: n)}, "n - 1 degrees of freedom here, not n"),
        ({"quantile": t_quantile(0.95, lambda n: n - 1)}, r"2.5% in each tail"),
    ],
)
def test_mean_and_interval_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.mean_and_interval(lambda values: interval(values, **mistake))


def whole_metadata(a, b):
    return a.metadata == b.metadata


def options_too(a, b):
    return (a.metadata["env_id"], a.metadata["env_kwargs"]) == (
        b.metadata["env_id"],
        b.metadata["env_kwargs"],
    )


def id_only(a, b):
    return a.metadata["env_id"] == b.metadata["env_id"]


def id_and_version(a, b):
    def identity(t):
        return t.metadata["env_id"], t.metadata["server_metadata"]["version"]

    return identity(a) == identity(b)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (whole_metadata, "Compare only the identity"),
        (options_too, "Compare only the identity"),
        (id_only, "another server version"),
        (id_and_version, "another schema"),
        (lambda a, b: "yes", "return True or False"),
    ],
)
def test_same_environment_mistakes_are_named(recordings, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.same_environment(answer, *recordings)
