"""Lesson 11's checks: the reference answers pass (the policy loss's check trains REINFORCE with it on the
served CartPole), and typical mistakes are named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_11 as check
from tutorials.solutions import lesson_11 as solution


def test_the_reference_answers_pass(capsys):
    check.returns_to_go(solution.returns_to_go)
    check.advantages(solution.advantages)
    returns = check.policy_loss(solution.policy_loss)
    check.td_advantages(solution.td_advantages)
    check.ppo_clip_loss(solution.ppo_clip_loss)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == [f"Exercise {n}: correct" for n in (1, 2, 3, 4, 5)]
    assert len(returns) == check.TRAIN_EPISODES and np.mean(returns[-20:]) > np.mean(returns[:20])


def forwards(rewards, gamma):
    return np.cumsum(rewards).tolist()


def whole_episode(rewards, gamma):
    return [solution.returns_to_go(rewards, gamma)[0]] * len(rewards)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda rewards, gamma: solution.returns_to_go(rewards, 1.0), "Discount"),
        (forwards, "It added the rewards before each step"),
        (whole_episode, "Each step gets the whole episode's return"),
        (lambda rewards, gamma: sum(rewards), "return one number per step"),
    ],
)
def test_returns_to_go_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.returns_to_go(answer)


def normalise(a):
    return (a - a.mean()) / (a.std() + 1e-8)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda returns, values: normalise(returns - values), "carry a gradient back into the critic"),
        (lambda returns, values: returns - values.detach(), "not normalised"),
        (lambda returns, values: normalise(returns), "the critic's values are missing"),
        (
            lambda returns, values: normalise(values.detach() - returns),
            r"advantage = returns - values.detach\(\)",
        ),
    ],
)
def test_advantages_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.advantages(answer)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda log_probs, adv: (log_probs * adv).mean(), "The wrong sign"),
        (lambda log_probs, adv: -(log_probs * adv).sum(), "Take the mean over the steps, not the sum"),
        (lambda log_probs, adv: -(log_probs.detach() * adv).mean(), "the loss has no gradient"),
        (lambda log_probs, adv: -(log_probs * adv), "return one number"),
    ],
)
def test_policy_loss_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.policy_loss(answer)


def test_a_policy_loss_right_on_one_batch_that_does_not_learn_is_refused(monkeypatch):
    calls = []

    def right_then_upside_down(log_probs, adv):
        calls.append(1)
        loss = solution.policy_loss(log_probs, adv)
        return loss if len(calls) == 1 else -loss  # trains toward the worst actions

    monkeypatch.setattr(check, "TRAIN_EPISODES", 40)
    with pytest.raises(NotYetRight, match="it does not learn yet"):
        check.policy_loss(right_then_upside_down)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda r, v, nv, t, g: r + g * nv - v, "After a terminated step nothing follows"),
        (lambda r, v, nv, t, g: v - (r + g * (1 - t) * nv), "The wrong sign"),
        (lambda r, v, nv, t, g: r + (1 - t) * nv - v, "Discount the next value"),
    ],
)
def test_td_advantages_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.td_advantages(answer)


def clip_loss(*, clipped_only=False, use_max=False, log_ratio=False, inverted=False, sign=-1.0):
    def ppo_clip_loss(new, old, adv, clip):
        ratio = new - old if log_ratio else torch.exp(old - new) if inverted else torch.exp(new - old)
        clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * adv
        if clipped_only:
            return sign * clipped.mean()
        return sign * (torch.max if use_max else torch.min)(ratio * adv, clipped).mean()

    return ppo_clip_loss


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"clipped_only": True}, "the clipped term alone"),
        ({"use_max": True}, "not the max"),
        ({"log_ratio": True}, "not their difference"),
        ({"inverted": True}, "The ratio is upside down"),
        ({"sign": 1.0}, "The wrong sign"),
    ],
)
def test_ppo_clip_loss_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.ppo_clip_loss(clip_loss(**mistake))
