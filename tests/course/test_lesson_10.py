"""Lesson 10's checks: the reference answers pass (the loss's check trains a DQN with it on the served
CartPole), and typical mistakes are named."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_10 as check
from tutorials.solutions import lesson_10 as solution


def test_the_reference_answers_pass(capsys):
    check.replay_buffer(solution.ReplayBuffer)
    check.td_targets(solution.td_targets)
    returns = check.dqn_loss(solution.dqn_loss)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == [f"Exercise {n}: correct" for n in (1, 2, 3)]
    assert len(returns) > 10 and max(returns) > 100  # the training run's episodes, for a curve


class NeverOverwrites(solution.ReplayBuffer):
    def add(self, obs, action, reward, next_obs, terminated):
        if self.added < self.capacity:
            super().add(obs, action, reward, next_obs, terminated)
        else:
            self.added += 1


class SamplesEmptyRows(solution.ReplayBuffer):
    def sample(self, batch_size, rng):
        i = rng.integers(self.capacity, size=batch_size)
        arrays = (self.obs, self.actions, self.rewards, self.next_obs, self.terminated)
        return tuple(torch.as_tensor(array[i]) for array in arrays)


class MixesRows(solution.ReplayBuffer):
    def sample(self, batch_size, rng):
        arrays = (self.obs, self.actions, self.rewards, self.next_obs, self.terminated)
        return tuple(torch.as_tensor(array[rng.integers(len(self), size=batch_size)]) for array in arrays)


class ReturnsArrays(solution.ReplayBuffer):
    def sample(self, batch_size, rng):
        return tuple(np.asarray(t) for t in super().sample(batch_size, rng))


class Unwritten:
    def __init__(self, capacity, obs_dim):
        pass

    def add(self, *transition):
        raise NotImplementedError


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (NeverOverwrites, "write over the oldest"),
        (SamplesEmptyRows, "sample among the stored transitions only"),
        (MixesRows, "a sampled row mixes transitions"),
        (ReturnsArrays, r"should be a torch.float32 tensor of shape \(64, 4\)"),
        (Unwritten, "is not written yet"),
    ],
)
def test_replay_buffer_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.replay_buffer(answer)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda r, q, t, g: r + g * q.max(dim=1).values, "its target is the reward alone"),
        (lambda r, q, t, g: r + g * (1 - t) * q.mean(dim=1), "not the mean"),
        (lambda r, q, t, g: r + (1 - t) * q.max(dim=1).values, "Discount the next value by gamma"),
        (lambda r, q, t, g: r + g * (1 - t) * q.max(), r"target = reward \+ gamma"),
        (lambda r, q, t, g: (r + g * (1 - t) * q.max(dim=1).values).numpy(), "return a tensor"),
    ],
)
def test_td_targets_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.td_targets(answer)


def loss(*, online=False, max_not_taken=False, mse=False, attached=False, mean_over=False):
    def dqn_loss(q_net, target_net, batch, gamma):
        obs, actions, rewards, next_obs, terminated = batch
        values = q_net(obs)
        taken = values.max(1).values if max_not_taken else values.gather(1, actions[:, None]).squeeze(1)
        next_q = (q_net if online else target_net)(next_obs)
        targets = solution.td_targets(rewards, next_q if attached else next_q.detach(), terminated, gamma)
        if mean_over:
            return F.smooth_l1_loss(taken, targets, reduction="none")
        return (F.mse_loss if mse else F.smooth_l1_loss)(taken, targets)

    return dqn_loss


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"online": True}, "The targets come from target_net"),
        ({"max_not_taken": True}, "the value of the action taken"),
        ({"mse": True}, "Use the Huber loss"),
        ({"attached": True}, "the gradient reaches target_net"),
        ({"mean_over": True}, "return the loss, one number"),
    ],
)
def test_dqn_loss_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.dqn_loss(loss(**mistake))


def test_a_loss_that_is_right_on_one_batch_but_does_not_learn_is_refused(monkeypatch):
    """The training half: a loss whose value is right but whose gradient is cut learns nothing."""
    right = solution.dqn_loss
    calls = []

    def frozen(q_net, target_net, batch, gamma):
        value = right(q_net, target_net, batch, gamma)
        calls.append(1)
        if len(calls) == 1:
            return value  # the first call: the check's own batch
        return value.detach().requires_grad_()  # no gradient reaches q_net: it never changes

    monkeypatch.setattr(check, "TRAIN_STEPS", 1500)
    with pytest.raises(NotYetRight, match="it does not learn yet"):
        check.dqn_loss(frozen)
