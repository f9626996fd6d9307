"""Lesson 11: policy gradients."""

from __future__ import annotations

import torch


def returns_to_go(rewards, gamma) -> list[float]:
    returns, future = [], 0.0
    for reward in reversed(rewards):  # from the last step back: G_t = r_t + gamma * G_(t+1)
        future = reward + gamma * future
        returns.append(future)
    return returns[::-1]


def advantages(returns, values):
    a = returns - values.detach()  # the baseline: how much better than the critic expected
    return (a - a.mean()) / (a.std() + 1e-8)


def policy_loss(log_probs, advantages):
    return -(log_probs * advantages).mean()  # minimised: raises the log-probability where A > 0


def td_advantages(rewards, values, next_values, terminated, gamma):
    return rewards + gamma * (1.0 - terminated) * next_values - values


def ppo_clip_loss(new_log_probs, old_log_probs, advantages, clip):
    ratio = torch.exp(new_log_probs - old_log_probs)
    clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * advantages
    return -torch.min(ratio * advantages, clipped).mean()
