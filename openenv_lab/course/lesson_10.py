"""Checks for lesson 10, DQN: a network in the table's place (``tutorials/10_dqn.ipynb``).

CartPole served over OpenEnv (``openenv/gymnasium``). The checks work each number out themselves: what a
replay buffer holds and hands out, the TD targets, the loss and where its gradient flows. The loss's check
then trains a DQN of its own with the answer's loss for a few thousand steps on the served CartPole, and
plays the greedy policy: a loss that is right learns to balance the pole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ._exercise import Exercise
from ._training import nn, one_thread, torch

__all__ = ["dqn_loss", "q_network", "replay_buffer", "td_targets", "train_dqn"]

CARTPOLE = "CartPole-v1"
GAMMA = 0.99
#: The loss check's training: environment steps, and the greedy return it must reach on average (a random
#: policy balances about 22 steps; the most is 500).
TRAIN_STEPS = 4000
GOOD_ENOUGH = 100.0

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def q_network(observations: int = 4, actions: int = 2, hidden: int = 64) -> nn.Module:
    """The lesson's Q-network: observations in, one value per action out (two hidden layers)."""
    return nn.Sequential(
        nn.Linear(observations, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, actions),
    )


class _ReplayBuffer:
    """The training run's replay buffer: the last ``capacity`` transitions, sampled uniformly."""

    def __init__(self, capacity: int, obs_dim: int) -> None:
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.capacity, self.added = capacity, 0

    def add(self, obs: Any, action: int, reward: float, next_obs: Any, terminated: bool) -> None:
        i = self.added % self.capacity
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.terminated[i] = next_obs, float(terminated)
        self.added += 1

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        i = rng.integers(len(self), size=batch_size)
        return (
            torch.as_tensor(self.obs[i]),
            torch.as_tensor(self.actions[i]),
            torch.as_tensor(self.rewards[i]),
            torch.as_tensor(self.next_obs[i]),
            torch.as_tensor(self.terminated[i]),
        )


def _rows(batch: Any) -> list[tuple[float, ...]]:
    obs = np.asarray(batch[0], dtype=float)
    return [tuple(row) for row in obs]


def replay_buffer(answer: Callable[..., Any]) -> None:
    """Exercise 1: ``answer(capacity, obs_dim)`` is a replay buffer with ``add``, ``sample`` and ``len``."""
    exercise = Exercise(1, "ReplayBuffer")
    rng = np.random.default_rng(1)
    buffer = exercise.run(answer, 3, 4)
    for step in range(2):
        exercise.run(
            buffer.add,
            np.full(4, step + 1, np.float32),
            step % 2,
            float(step),
            np.full(4, step + 2),
            step == 1,
        )
    exercise.require(len(buffer) == 2, f"after 2 transitions len(buffer) is {len(buffer)}; it should be 2.")
    batch = exercise.run(buffer.sample, 64, rng)
    exercise.require(
        isinstance(batch, tuple) and len(batch) == 5,
        "sample should return a tuple of five tensors: observations, actions, rewards, next observations, "
        "terminated.",
    )
    kinds = [
        ("observations", (64, 4), torch.float32),
        ("actions", (64,), torch.int64),
        ("rewards", (64,), torch.float32),
        ("next observations", (64, 4), torch.float32),
        ("terminated", (64,), torch.float32),
    ]
    for tensor, (what, shape, dtype) in zip(batch, kinds, strict=True):
        exercise.require(
            isinstance(tensor, torch.Tensor) and tuple(tensor.shape) == shape and tensor.dtype == dtype,
            f"the {what} should be a {dtype} tensor of shape {shape}, got "
            f"{getattr(tensor, 'dtype', type(tensor).__name__)} {tuple(getattr(tensor, 'shape', ()))}.",
        )
    seen = set(np.asarray(batch[0])[:, 0].tolist())
    exercise.require(
        seen <= {1.0, 2.0},
        f"with 2 transitions stored in room for 3, it sampled observations {sorted(seen)}: sample among the "
        "stored transitions only, `rng.integers(len(self), size=batch_size)`, not the whole array.",
    )
    exercise.require(seen == {1.0, 2.0}, "64 samples of 2 transitions should show both: sample uniformly.")
    first = np.asarray(batch[0])[:, 0] == 1.0
    together = [
        np.allclose(np.asarray(batch[1])[first], 0),
        np.allclose(np.asarray(batch[2])[first], 0.0),
        np.allclose(np.asarray(batch[3])[first], 2.0),
        np.allclose(np.asarray(batch[4])[first], 0.0) and np.allclose(np.asarray(batch[4])[~first], 1.0),
    ]
    exercise.require(
        all(together),
        "a sampled row mixes transitions: use the same indices for the five arrays, so each row is one "
        "transition (its observation, action, reward, next observation and terminated).",
    )
    for step in range(2, 5):
        exercise.run(buffer.add, np.full(4, step + 1, np.float32), 0, 0.0, np.full(4, step + 2), False)
    exercise.require(
        len(buffer) == 3, f"after 5 transitions in room for 3, len(buffer) is {len(buffer)}; it is 3."
    )
    seen = set(np.asarray(exercise.run(buffer.sample, 200, rng)[0])[:, 0].tolist())
    exercise.require(
        seen == {3.0, 4.0, 5.0},
        f"after 5 transitions in room for 3 it sampled observations {sorted(seen)}, but it holds the last "
        "three, 3, 4 and 5: when it is full, write over the oldest (`index = added % capacity`).",
    )
    exercise.passed()


def _targets(
    rewards: torch.Tensor, next_q: torch.Tensor, terminated: torch.Tensor, gamma: float, **slip: Any
) -> torch.Tensor:
    best = (
        next_q.mean(1)
        if slip.get("mean")
        else next_q.max(0).values
        if slip.get("dim0")
        else next_q.max(1).values
    )
    mask = 1.0 if slip.get("no_mask") else 1.0 - terminated
    return rewards + slip.get("gamma", gamma) * mask * best


def td_targets(answer: Callable[..., Any]) -> None:
    """Exercise 2: ``answer(rewards, next_q, terminated, gamma)`` is ``r + gamma (1 - terminated) max Q'``."""
    exercise = Exercise(2, "td_targets")
    generator = torch.Generator().manual_seed(2)
    rewards = torch.rand(6, generator=generator)
    next_q = torch.randn(6, 2, generator=generator)
    terminated = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    got = exercise.run(answer, rewards.clone(), next_q.clone(), terminated.clone(), GAMMA)
    exercise.require(
        isinstance(got, torch.Tensor) and tuple(got.shape) == (6,),
        f"it returned {type(got).__name__} of shape {tuple(getattr(got, 'shape', ()))}; return a tensor, one "
        "target per transition: shape (6,) for 6 transitions.",
    )
    expected = _targets(rewards, next_q, terminated, GAMMA)
    if torch.allclose(got, expected, atol=1e-6):
        exercise.passed()
        return
    said = f"the targets are {expected.numpy().round(3)}, it returned {got.detach().numpy().round(3)}."
    if torch.allclose(got, _targets(rewards, next_q, terminated, GAMMA, no_mask=True), atol=1e-6):
        exercise.fail(
            f"{said} Where a transition is terminated, nothing follows: its target is the reward alone. "
            "Multiply the next value by (1 - terminated)."
        )
    if torch.allclose(got, _targets(rewards, next_q, terminated, GAMMA, mean=True), atol=1e-6):
        exercise.fail(f"{said} Take the best next action's value, `next_q.max(dim=1).values`, not the mean.")
    if torch.allclose(got, _targets(rewards, next_q, terminated, 1.0), atol=1e-6):
        exercise.fail(f"{said} Discount the next value by gamma.")
    exercise.fail(f"{said} target = reward + gamma * (1 - terminated) * next_q.max(dim=1).values.")


def _loss(q_net: nn.Module, target_net: nn.Module, batch: Batch, gamma: float, **slip: Any) -> torch.Tensor:
    obs, actions, rewards, next_obs, terminated = batch
    values = q_net(obs)
    taken = values.max(1).values if slip.get("max") else values.gather(1, actions[:, None]).squeeze(1)
    with torch.no_grad():
        next_q = (q_net if slip.get("online") else target_net)(next_obs)
    targets = _targets(rewards, next_q, terminated, gamma)
    if slip.get("mse"):
        return nn.functional.mse_loss(taken, targets)
    return nn.functional.smooth_l1_loss(taken, targets)


def _batch(generator: torch.Generator) -> Batch:
    return (
        torch.randn(32, 4, generator=generator),
        torch.randint(0, 2, (32,), generator=generator),
        torch.ones(32),
        torch.randn(32, 4, generator=generator),
        (torch.rand(32, generator=generator) < 0.2).float(),
    )


def dqn_loss(answer: Callable[..., Any]) -> list[float]:
    """Exercise 3: ``answer(q_net, target_net, batch, gamma)`` is DQN's Huber loss, its gradient in
    ``q_net`` only. Then the check trains a DQN with it (`train_dqn`); returns that run's episode returns."""
    exercise = Exercise(3, "dqn_loss")
    generator = torch.Generator().manual_seed(3)
    torch.manual_seed(3)
    q_net, target_net = q_network(), q_network()  # two different networks, as after some training
    batch = _batch(generator)
    loss = exercise.run(answer, q_net, target_net, batch, GAMMA)
    exercise.require(
        isinstance(loss, torch.Tensor) and loss.dim() == 0,
        f"it returned {type(loss).__name__} {tuple(getattr(loss, 'shape', ()))}; return the loss, one number "
        "(a 0-dimensional tensor: the mean over the batch).",
    )
    exercise.require(
        loss.requires_grad, "the loss has no gradient: compute Q(s, a) with q_net, without torch.no_grad()."
    )
    q_net.zero_grad()
    target_net.zero_grad()
    loss.backward()
    leaked = any(p.grad is not None and p.grad.abs().sum() > 0 for p in target_net.parameters())
    exercise.require(
        not leaked,
        "the gradient reaches target_net: the targets are fixed numbers for this step. Compute them under "
        "`with torch.no_grad():` (or `.detach()` them).",
    )
    expected = _loss(q_net, target_net, batch, GAMMA).detach()
    got = float(loss.detach())
    exercise.require_finite(got, "the loss")
    if abs(got - float(expected)) > 1e-5:
        said = f"the loss is {float(expected):.5f}, it returned {got:.5f}."
        for slip, hint in (
            ({"online": True}, "The targets come from target_net, the slow copy, not from q_net."),
            (
                {"max": True},
                "Q(s, a) is the value of the action taken, `q_net(obs).gather(1, actions[:, None])`, "
                "not the max.",
            ),
            (
                {"mse": True},
                "Use the Huber loss, `torch.nn.functional.smooth_l1_loss`, as DQN does: a large TD error "
                "then does not blow up the gradient.",
            ),
        ):
            if abs(got - float(_loss(q_net, target_net, batch, GAMMA, **slip).detach())) < 1e-5:
                exercise.fail(f"{said} {hint}")
        exercise.fail(f"{said} Huber loss between Q(s, a) from q_net and the td_targets from target_net.")
    with exercise.time_limit(), one_thread():
        returns, greedy = train_dqn(lambda *args: exercise.run(answer, *args), steps=TRAIN_STEPS, seed=0)
    exercise.require(
        np.mean(greedy) >= GOOD_ENOUGH,
        f"trained for {TRAIN_STEPS} steps with this loss, the greedy policy balances {np.mean(greedy):.0f} "
        "steps on average (a random one, about 22): it does not learn yet.",
    )
    exercise.passed(
        f"trained for {TRAIN_STEPS} steps, the greedy policy balances {np.mean(greedy):.0f} steps on average"
    )
    return returns


def train_dqn(
    loss_fn: Callable[..., torch.Tensor],
    *,
    steps: int = TRAIN_STEPS,
    seed: int = 0,
    env: gym.Env | None = None,
    on_episode: Callable[[float, int], None] | None = None,
) -> tuple[list[float], list[float]]:
    """Train a DQN on CartPole (the served one unless ``env`` is given) with ``loss_fn(q_net, target_net,
    batch, gamma)``; return the training episodes' returns and five greedy episodes' returns.

    ε falls linearly from 1 to 0.05 over the first half of the steps; a gradient step on 64 transitions
    after each environment step once 500 are stored; the target network copies the online one every
    250 steps. ``on_episode(return, length)`` hears of each training episode (a `RewardCurve`'s
    ``add_episode``).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    own = env is None
    env = env or gym.make("openenv/gymnasium", env_id=CARTPOLE)
    try:
        q_net, target_net = q_network(), q_network()
        target_net.load_state_dict(q_net.state_dict())
        optimiser = torch.optim.Adam(q_net.parameters(), lr=1e-3)
        buffer = _ReplayBuffer(10_000, 4)
        returns: list[float] = []
        obs, _ = env.reset(seed=seed)
        total, length = 0.0, 0
        for step in range(steps):
            epsilon = max(0.05, 1.0 - step / (0.5 * steps))
            action = int(rng.integers(2)) if rng.random() < epsilon else _greedy(q_net, obs)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            buffer.add(obs, action, reward, next_obs, terminated)
            obs, total, length = next_obs, total + float(reward), length + 1
            if terminated or truncated:
                returns.append(total)
                if on_episode is not None:
                    on_episode(total, length)
                (obs, _), total, length = env.reset(), 0.0, 0
            if len(buffer) >= 500:
                loss = loss_fn(q_net, target_net, buffer.sample(64, rng), GAMMA)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            if step % 250 == 0:
                target_net.load_state_dict(q_net.state_dict())
        return returns, [_greedy_episode(env, q_net, 1000 + k) for k in range(5)]
    finally:
        if own:
            env.close()


def _greedy(q_net: nn.Module, obs: Any) -> int:
    with torch.no_grad():
        return int(q_net(torch.as_tensor(obs, dtype=torch.float32)).argmax())


def _greedy_episode(env: gym.Env, q_net: nn.Module, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    total = 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(_greedy(q_net, obs))
        total += float(reward)
        if terminated or truncated:
            return total
