"""Lesson 12's checks: the reference answers pass (the loss's check trains the lesson's model with GRPO on
the served cliffs), and typical mistakes are named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_12 as check
from tutorials.solutions import lesson_12 as solution


def test_the_reference_answers_pass(capsys):
    check.plan_rewards(solution.plan_rewards)
    check.group_advantages(solution.group_advantages)
    means = check.grpo_loss(solution.grpo_loss)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == [f"Exercise {n}: correct" for n in (1, 2, 3)]
    assert len(means) == check.TRAIN_STEPS and np.mean(means[-10:]) > np.mean(means[:10])


def rewards(*, after_end=False, no_distance=False, everyone_penalised=False):
    def plan_rewards(envs, moves):
        envs.reset()
        total, done = np.zeros(len(moves)), np.zeros(len(moves), dtype=bool)
        where = last = np.zeros(len(moves), dtype=int)
        for t in range(moves.shape[1]):
            last, reward, terminated, truncated, _ = envs.step(moves[:, t])
            total += reward if after_end else np.where(done, 0.0, reward)
            where = np.where(done, where, last)
            done |= terminated | truncated
        if no_distance:
            return total
        if everyone_penalised:
            return total - 2.0 * check.distance_to_goal(last)
        return np.where(done, total, total - 2.0 * check.distance_to_goal(where))

    return plan_rewards


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"after_end": True}, "It kept counting after a plan's episode ended"),
        ({"no_distance": True}, "also loses 2 x"),
        ({"everyone_penalised": True}, "A plan that reached the goal loses nothing"),
    ],
)
def test_plan_rewards_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.plan_rewards(rewards(**mistake))


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda r: r / (r.std() + 1e-4), "Subtract the group's mean first"),
        (lambda r: (r - r.mean()) / r.std(), "holds NaN"),
        (
            lambda r: (r - r.mean()) / (r.abs().max() + 1e-4),
            r"\(rewards - rewards.mean\(\)\) / \(rewards.std\(\) \+ 1e-4\)",
        ),
        (lambda r: ((r - r.mean()) / (r.std() + 1e-4)).tolist(), "return a tensor"),
    ],
)
def test_group_advantages_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.group_advantages(answer)


def loss(
    *,
    kl_sign=1.0,
    clipped_only=False,
    inverted=False,
    beta_zero=False,
    flat_advantages=False,
    log_of_ratio=False,
):
    def grpo_loss(new, old, ref, adv, clip, beta):
        ratio = torch.exp(old - new) if inverted else torch.exp(new - old)
        if log_of_ratio:
            ratio = torch.log(new - old)  # the log of a difference that can be negative: NaN
        a = adv.mean() if flat_advantages else adv[:, None]
        clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * a
        surrogate = clipped if clipped_only else torch.min(ratio * a, clipped)
        kl = torch.exp(ref - new) - (ref - new) - 1
        return -(surrogate - kl_sign * (0.0 if beta_zero else beta) * kl).mean()

    return grpo_loss


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"kl_sign": -1.0}, "keeps the model near the reference"),
        ({"clipped_only": True}, "Take the min of the unclipped and clipped terms"),
        ({"inverted": True}, r"The ratio is exp\(log_probs - old_log_probs\)"),
        ({"beta_zero": True}, "The KL penalty is missing"),
        ({"flat_advantages": True}, r"Each move gets its plan's advantage"),
        ({"log_of_ratio": True}, "the loss holds NaN: the updates diverged"),
    ],
)
def test_grpo_loss_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.grpo_loss(loss(**mistake))


def test_a_loss_right_on_one_batch_that_does_not_learn_is_refused(monkeypatch):
    calls = []

    def right_then_backwards(*args):
        calls.append(1)
        value = solution.grpo_loss(*args)
        return value if len(calls) == 1 else -value  # trains toward the worst plans

    monkeypatch.setattr(check, "TRAIN_STEPS", 40)
    with pytest.raises(NotYetRight, match="it does not learn yet"):
        check.grpo_loss(right_then_backwards)
