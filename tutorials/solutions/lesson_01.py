"""Lesson 1: the RL loop over a network."""

from __future__ import annotations

import gymnasium as gym

import openenv_lab


def echo_reward(url: str, message: str) -> float:
    with openenv_lab.Session(url) as session:
        session.reset()
        return session.step({"message": message}).reward


def play_random_episode(env: gym.Env, seed: int) -> tuple[int, float]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    steps, total, done = 0, 0.0, False
    while not done:
        mask = obs.get("action_mask") if isinstance(obs, dict) else None
        action = env.action_space.sample(mask=mask) if mask is not None else env.action_space.sample()
        obs, reward, terminated, truncated, _ = env.step(action)
        steps += 1
        total += reward
        done = terminated or truncated
    return steps, total
