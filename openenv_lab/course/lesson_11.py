"""Checks for lesson 11, policy gradients (``tutorials/11_policy_gradients.ipynb``).

REINFORCE with a baseline, actor-critic's TD advantages and PPO's clipped objective, on CartPole served over
OpenEnv. The checks work the numbers out themselves; the policy loss's check then trains a policy with the
answer's loss (the check's own returns and advantages around it) for 100 episodes and looks at the
returns of the last ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ._exercise import Exercise
from ._training import nn, one_thread, torch

__all__ = [
    "actor_critic",
    "advantages",
    "policy_loss",
    "ppo_clip_loss",
    "returns_to_go",
    "td_advantages",
    "train_reinforce",
]

CARTPOLE = "CartPole-v1"
GAMMA = 0.99
#: The policy loss check's training: episodes (four per update), and the mean return the last 20 must reach
#: (a random policy: about 22).
TRAIN_EPISODES = 100
GOOD_ENOUGH = 80.0


def actor_critic(hidden: int = 64) -> tuple[nn.Module, nn.Module]:
    """The lesson's networks for CartPole: the policy (4 observations in, 2 action logits out) and the
    critic (4 in, one value out)."""
    policy = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 2))
    critic = nn.Sequential(nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 1))
    return policy, critic


def _returns(rewards: list[float], gamma: float) -> list[float]:
    out, future = [], 0.0
    for reward in reversed(rewards):
        future = reward + gamma * future
        out.append(future)
    return out[::-1]


def returns_to_go(answer: Callable[..., Any]) -> None:
    """Exercise 1: ``answer(rewards, gamma)`` is each step's discounted return from that step on."""
    exercise = Exercise(1, "returns_to_go")
    for rewards, gamma in (([1.0, 1.0, 1.0], 0.9), ([0.0, 0.0, 1.0, 0.0, 2.0], 0.5), ([3.0], 0.99)):
        got = exercise.run(answer, list(rewards), gamma)
        try:
            got = [float(value) for value in got]
        except (TypeError, ValueError):
            exercise.fail(f"returns_to_go({rewards}, {gamma}) returned {got!r}; return one number per step.")
        expected = _returns(rewards, gamma)
        if len(got) == len(expected) and np.allclose(got, expected):
            continue
        call = f"returns_to_go({rewards}, {gamma})"
        said = f"{call} returned {np.round(got, 4).tolist()}, but it is {np.round(expected, 4).tolist()}."
        if np.allclose(got, _returns(rewards, 1.0)):
            exercise.fail(f"{said} Discount: each reward k steps ahead counts gamma**k.")
        forward = np.cumsum([r * gamma**k for k, r in enumerate(rewards)]).tolist()
        if np.allclose(got, forward) or np.allclose(got, np.cumsum(rewards)):
            exercise.fail(
                f"{said} It added the rewards before each step; the return from step t is the rewards from t "
                "on. Go backwards: G = reward + gamma * G, from the last step to the first."
            )
        if np.allclose(got, [expected[0]] * len(expected)):
            exercise.fail(
                f"{said} Each step gets the whole episode's return; an action changes only what comes after "
                "it, so step t's return starts at step t."
            )
        exercise.fail(f"{said} G_t = r_t + gamma * G_(t+1), with G after the last step 0.")
    exercise.passed()


def _advantages(
    returns: torch.Tensor, values: torch.Tensor, *, baseline: bool = True, normalise: bool = True
) -> torch.Tensor:
    a = (returns - values).detach() if baseline else returns.detach()
    return (a - a.mean()) / (a.std() + 1e-8) if normalise else a


def advantages(answer: Callable[..., Any]) -> None:
    """Exercise 2: ``answer(returns, values)``: ``returns - values``, normalised, without gradient."""
    exercise = Exercise(2, "advantages")
    generator = torch.Generator().manual_seed(2)
    returns = torch.rand(8, generator=generator) * 20
    values = (torch.rand(8, generator=generator) * 10).requires_grad_()
    got = exercise.run(answer, returns.clone(), values)
    exercise.require(
        isinstance(got, torch.Tensor) and tuple(got.shape) == (8,),
        f"it returned {type(got).__name__} {tuple(getattr(got, 'shape', ()))}; return a tensor, one "
        "advantage per step.",
    )
    exercise.require(
        not got.requires_grad,
        "the advantages carry a gradient back into the critic: the policy's loss must not train the critic. "
        "Detach the values (`values.detach()`); the critic learns from its own loss.",
    )
    expected = _advantages(returns, values)
    population = (returns - values).detach()
    population = (population - population.mean()) / (population.std(unbiased=False) + 1e-8)
    if torch.allclose(got, expected, atol=1e-5) or torch.allclose(got, population, atol=1e-5):
        exercise.passed()
        return
    if torch.allclose(got, _advantages(returns, values, normalise=False), atol=1e-5):
        exercise.fail(
            "these are returns - values, not normalised: subtract their mean and divide by their standard "
            "deviation (+ 1e-8), so that each update's step has the same scale whatever the rewards."
        )
    if torch.allclose(got, _advantages(returns, values, baseline=False), atol=1e-4):
        exercise.fail(
            "the critic's values are missing: the advantage is returns - values (the baseline), which says "
            "how much better than expected the action did; then normalise."
        )
    exercise.fail("advantage = returns - values.detach(), then (a - a.mean()) / (a.std() + 1e-8).")


def _policy_loss(log_probs: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    return -(log_probs * adv).mean()


def policy_loss(answer: Callable[..., Any]) -> list[float]:
    """Exercise 3: ``answer(log_probs, advantages)`` is REINFORCE's loss, ``-(log_probs * adv).mean()``.
    Then the check trains a policy with it (`train_reinforce`); returns the training episodes' returns."""
    exercise = Exercise(3, "policy_loss")
    generator = torch.Generator().manual_seed(3)
    log_probs = torch.log(torch.rand(8, generator=generator) * 0.9 + 0.05).requires_grad_()
    adv = torch.randn(8, generator=generator)
    got = exercise.run(answer, log_probs, adv.clone())
    exercise.require(
        isinstance(got, torch.Tensor) and got.dim() == 0,
        f"it returned {type(got).__name__} {tuple(getattr(got, 'shape', ()))}; return one number, the mean "
        "over "
        "the steps.",
    )
    exercise.require(
        got.requires_grad, "the loss has no gradient: keep log_probs as they are (no .detach())."
    )
    expected = float(_policy_loss(log_probs, adv).detach())
    value = float(got.detach())
    exercise.require_finite(value, "the loss")
    if abs(value - expected) > 1e-5:
        said = f"the loss is {expected:.4f}, it returned {value:.4f}."
        if abs(value + expected) < 1e-5:
            exercise.fail(
                f"{said} The wrong sign: optimisers minimise, and the policy must make actions with a "
                "positive "
                "advantage more likely, so minimise -(log_probs * advantages).mean()."
            )
        if abs(value - 8 * expected) < 1e-4:
            exercise.fail(
                f"{said} Take the mean over the steps, not the sum: the step size then does not grow with "
                "the batch."
            )
        exercise.fail(f"{said} loss = -(log_probs * advantages).mean().")
    with exercise.time_limit(), one_thread():
        returns = train_reinforce(lambda *args: exercise.run(answer, *args), episodes=TRAIN_EPISODES, seed=0)
    last = float(np.mean(returns[-20:]))
    exercise.require(
        last >= GOOD_ENOUGH,
        f"trained for {TRAIN_EPISODES} episodes with this loss, the last 20 balanced the pole {last:.0f} "
        "steps on "
        "average (a random policy: about 22): it does not learn yet.",
    )
    exercise.passed(
        f"trained for {TRAIN_EPISODES} episodes, the last 20 balanced the pole {last:.0f} steps on average"
    )
    return returns


def train_reinforce(
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    episodes: int = TRAIN_EPISODES,
    seed: int = 0,
    env: gym.Env | None = None,
    on_episode: Callable[[float, int], None] | None = None,
) -> list[float]:
    """REINFORCE with a learnt baseline on CartPole (the served one unless ``env`` is given): four episodes a
    batch, the policy's loss ``loss_fn(log_probs, advantages)`` plus the critic's squared error, one Adam
    step a batch. Returns each episode's return; ``on_episode(return, length)`` hears of each."""
    torch.manual_seed(seed)
    own = env is None
    env = env or gym.make("openenv/gymnasium", env_id=CARTPOLE)
    try:
        policy, critic = actor_critic()
        optimiser = torch.optim.Adam([*policy.parameters(), *critic.parameters()], lr=1e-2)
        env.reset(seed=seed)
        returns: list[float] = []
        while len(returns) < episodes:
            observations, actions, discounted = [], [], []
            for _ in range(min(4, episodes - len(returns))):
                obs, _ = env.reset()
                rewards: list[float] = []
                while True:
                    with torch.no_grad():
                        logits = policy(torch.as_tensor(obs, dtype=torch.float32))
                    action = int(torch.distributions.Categorical(logits=logits).sample())
                    observations.append(obs)
                    actions.append(action)
                    obs, reward, terminated, truncated, _ = env.step(action)
                    rewards.append(float(reward))
                    if terminated or truncated:
                        break
                discounted += _returns(rewards, GAMMA)
                returns.append(sum(rewards))
                if on_episode is not None:
                    on_episode(sum(rewards), len(rewards))
            obs_t = torch.as_tensor(np.array(observations), dtype=torch.float32)
            target = torch.as_tensor(discounted, dtype=torch.float32)
            values = critic(obs_t).squeeze(1)
            log_probs = torch.distributions.Categorical(logits=policy(obs_t)).log_prob(
                torch.as_tensor(actions)
            )
            loss = loss_fn(log_probs, _advantages(target, values)) + 0.5 * ((target - values) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        return returns
    finally:
        if own:
            env.close()


def _td(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    gamma: float,
    *,
    mask: bool = True,
) -> torch.Tensor:
    return rewards + gamma * (1.0 - terminated if mask else 1.0) * next_values - values


def td_advantages(answer: Callable[..., Any]) -> None:
    """Exercise 4: ``answer(rewards, values, next_values, terminated, gamma)``: the one-step TD errors."""
    exercise = Exercise(4, "td_advantages")
    generator = torch.Generator().manual_seed(4)
    rewards, values, next_values = (torch.rand(6, generator=generator) for _ in range(3))
    terminated = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    got = exercise.run(answer, rewards, values, next_values, terminated, GAMMA)
    exercise.require(
        isinstance(got, torch.Tensor) and tuple(got.shape) == (6,),
        f"it returned {type(got).__name__} {tuple(getattr(got, 'shape', ()))}; return a tensor, one per "
        "step.",
    )
    expected = _td(rewards, values, next_values, terminated, GAMMA)
    if torch.allclose(got, expected, atol=1e-6):
        exercise.passed()
        return
    said = f"the TD errors are {expected.numpy().round(3)}, it returned {got.detach().numpy().round(3)}."
    if torch.allclose(got, _td(rewards, values, next_values, terminated, GAMMA, mask=False), atol=1e-6):
        exercise.fail(
            f"{said} After a terminated step nothing follows: no gamma * V(s') there (multiply by 1 - "
            "terminated)."
        )
    if torch.allclose(got, -expected, atol=1e-6):
        exercise.fail(
            f"{said} The wrong sign: the advantage is the target minus the value, r + gamma V(s') - V(s)."
        )
    if torch.allclose(got, _td(rewards, values, next_values, terminated, 1.0), atol=1e-6):
        exercise.fail(f"{said} Discount the next value by gamma.")
    exercise.fail(f"{said} delta = r + gamma * (1 - terminated) * V(s') - V(s).")


def _clip(new: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, clip: float, **slip: Any) -> torch.Tensor:
    ratio = (
        (new - old)
        if slip.get("log")
        else torch.exp(old - new)
        if slip.get("inverted")
        else torch.exp(new - old)
    )
    clipped = torch.clamp(ratio, 1 - clip, 1 + clip) * adv
    if slip.get("clipped_only"):
        return -clipped.mean()
    if slip.get("max"):
        return -torch.max(ratio * adv, clipped).mean()
    return -torch.min(ratio * adv, clipped).mean()


def ppo_clip_loss(answer: Callable[..., Any]) -> None:
    """Exercise 5: ``answer(new_log_probs, old_log_probs, advantages, clip)`` is PPO's clipped loss."""
    exercise = Exercise(5, "ppo_clip_loss")
    old = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5, 0.2, 0.8]))
    # Ratios 1.5, 0.6, 1.1, 0.9 then 1.75, 0.5: inside and outside [0.8, 1.2], advantages of both signs.
    new = torch.log(torch.tensor([0.75, 0.3, 0.55, 0.45, 0.35, 0.4])).requires_grad_()
    adv = torch.tensor([1.0, -1.0, 2.0, -0.5, -1.0, 1.0])
    got = exercise.run(answer, new, old.clone(), adv.clone(), 0.2)
    exercise.require(
        isinstance(got, torch.Tensor) and got.dim() == 0 and got.requires_grad,
        "return the loss: one number (the mean over the steps) with a gradient in new_log_probs.",
    )
    expected = float(_clip(new, old, adv, 0.2).detach())
    value = float(got.detach())
    exercise.require_finite(value, "the loss")
    if abs(value - expected) < 1e-5:
        exercise.passed()
        return
    said = f"the loss is {expected:.4f}, it returned {value:.4f}."
    for slip, hint in (
        (
            {"clipped_only": True},
            "It used the clipped term alone: take the min of the unclipped and the clipped terms, so the "
            "clip only ever removes an incentive.",
        ),
        ({"max": True}, "Take the min of the two terms, not the max: the objective is a pessimistic bound."),
        (
            {"log": True},
            "The ratio is pi_new / pi_old = exp(new_log_probs - old_log_probs), not their difference.",
        ),
        (
            {"inverted": True},
            "The ratio is upside down: pi_new / pi_old = exp(new_log_probs - old_log_probs).",
        ),
    ):
        if abs(value - float(_clip(new, old, adv, 0.2, **slip).detach())) < 1e-5:
            exercise.fail(f"{said} {hint}")
    if abs(value + expected) < 1e-5:
        exercise.fail(
            f"{said} The wrong sign: PPO maximises the clipped objective, so the loss is its negative."
        )
    exercise.fail(f"{said} loss = -mean(min(ratio * A, clamp(ratio, 1 - clip, 1 + clip) * A)).")
