"""Lesson 10: DQN."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


class ReplayBuffer:
    def __init__(self, capacity, obs_dim):
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.capacity, self.added = capacity, 0

    def add(self, obs, action, reward, next_obs, terminated):
        i = self.added % self.capacity  # when full, write over the oldest
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.terminated[i] = next_obs, float(terminated)
        self.added += 1

    def __len__(self):
        return min(self.added, self.capacity)

    def sample(self, batch_size, rng):
        i = rng.integers(len(self), size=batch_size)  # among the stored transitions only
        arrays = (self.obs, self.actions, self.rewards, self.next_obs, self.terminated)
        return tuple(torch.as_tensor(array[i]) for array in arrays)


def td_targets(rewards, next_q, terminated, gamma):
    return rewards + gamma * (1.0 - terminated) * next_q.max(dim=1).values


def dqn_loss(q_net, target_net, batch, gamma):
    obs, actions, rewards, next_obs, terminated = batch
    taken = q_net(obs).gather(1, actions[:, None]).squeeze(1)  # Q(s, a) of the actions taken
    with torch.no_grad():  # the targets are fixed numbers for this step
        targets = td_targets(rewards, target_net(next_obs), terminated, gamma)
    return F.smooth_l1_loss(taken, targets)
