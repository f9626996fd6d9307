"""Lesson 9: planning and learning in a small world."""

from __future__ import annotations

import numpy as np


def action_values(P, V, s, gamma) -> np.ndarray:
    values = np.zeros(len(P[s]))
    for a, outcomes in P[s].items():
        for probability, s_next, reward, terminated in outcomes:
            future = 0.0 if terminated else gamma * V[s_next]  # nothing follows the end of an episode
            values[a] += probability * (reward + future)
    return values


def value_iteration(P, gamma, theta) -> np.ndarray:
    V = np.zeros(len(P))
    while True:
        new = np.array([action_values(P, V, s, gamma).max() for s in range(len(P))])
        if np.max(np.abs(new - V)) < theta:
            return new
        V = new


def q_learning_update(Q, s, a, reward, s_next, terminated, alpha, gamma) -> None:
    target = reward if terminated else reward + gamma * Q[s_next].max()
    Q[s, a] += alpha * (target - Q[s, a])


def q_learning_episode(env, Q, alpha, gamma, epsilon, rng) -> float:
    s, _ = env.reset()
    total = 0.0
    while True:
        a = int(rng.integers(Q.shape[1])) if rng.random() < epsilon else int(np.argmax(Q[s]))
        s_next, reward, terminated, truncated, _ = env.step(a)
        q_learning_update(Q, s, a, reward, s_next, terminated, alpha, gamma)  # terminated only
        total += reward
        if terminated or truncated:
            return total
        s = s_next


def sarsa_update(Q, s, a, reward, s_next, a_next, terminated, alpha, gamma) -> None:
    target = reward if terminated else reward + gamma * Q[s_next, a_next]
    Q[s, a] += alpha * (target - Q[s, a])
