"""Lesson 12: GRPO for a language model."""

from __future__ import annotations

import numpy as np
import torch

from openenv_lab.course.lesson_12 import distance_to_goal


def plan_rewards(envs, moves):
    envs.reset()
    total = np.zeros(len(moves))
    done = np.zeros(len(moves), dtype=bool)
    where = np.zeros(len(moves), dtype=int)
    for t in range(moves.shape[1]):
        states, rewards, terminated, truncated, _ = envs.step(moves[:, t])
        total += np.where(done, 0.0, rewards)  # after its end, a plan's moves play a new episode: ignored
        where = np.where(done, where, states)
        done |= terminated | truncated
    return np.where(done, total, total - 2.0 * distance_to_goal(where))


def group_advantages(rewards):
    return (rewards - rewards.mean()) / (rewards.std() + 1e-4)


def grpo_loss(log_probs, old_log_probs, ref_log_probs, advantages, clip, beta):
    ratio = torch.exp(log_probs - old_log_probs)
    a = advantages[:, None]  # each move gets its plan's advantage
    surrogate = torch.min(ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a)
    kl = torch.exp(ref_log_probs - log_probs) - (ref_log_probs - log_probs) - 1  # k3: >= 0, unbiased
    return -(surrogate - beta * kl).mean()
