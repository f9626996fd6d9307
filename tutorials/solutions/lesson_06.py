"""Lesson 6: fair evaluation."""

from __future__ import annotations

import numpy as np
from scipy import stats


def evaluate(agent, env, seeds) -> list[float]:
    returns = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(agent(obs, info, rng))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return returns


def mean_and_interval(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    n = len(values)
    t = stats.t.ppf(0.975, n - 1)  # Student's t: with few values, wider than the normal's 1.96
    return float(values.mean()), float(t * values.std(ddof=1) / np.sqrt(n))


def same_environment(a, b) -> bool:
    def identity(trajectory):
        metadata = trajectory.metadata
        return (
            metadata.get("env_id"),
            metadata.get("server_metadata", {}).get("version"),
            metadata.get("schema_sha256"),
        )

    return identity(a) == identity(b)
