"""Checks for lesson 12, GRPO for a language model (``tutorials/12_grpo.ipynb``).

A tiny language model whose words are CliffWalking's moves writes a plan; the plans of a group are played
at once on a vector env of CliffWalking served over OpenEnv, and GRPO trains the model from their rewards.
The checks work the numbers out themselves; the loss's check then trains the lesson's model with the
answer's loss for `TRAIN_STEPS` groups and compares the groups' mean reward at the end with the start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ._exercise import Exercise
from ._training import nn, one_thread, torch

__all__ = [
    "PlanModel",
    "distance_to_goal",
    "group_advantages",
    "grpo_loss",
    "log_probs",
    "make_envs",
    "plan_rewards",
    "sample_plans",
    "train_grpo",
]

CLIFF = "CliffWalking-v1"
#: The model's words: CliffWalking's actions 0-3, and the token that starts every plan.
MOVES = "URDL"
START = 4
#: Moves in a plan (the shortest path to the goal takes 13), plans in a group.
PLAN_LENGTH = 15
GROUP = 16
#: The loss check's training: groups, and how much the mean reward must rise (from about -45 at first).
TRAIN_STEPS = 100
RISE = 10.0


class PlanModel(nn.Module):
    """A tiny recurrent language model over the moves: the start token and moves in, each next move's
    logits out (about 19,000 parameters).

    Example:
        >>> model = PlanModel()
        >>> model(torch.full((2, 1), START)).shape  # two plans, one token so far, four moves
        torch.Size([2, 1, 4])
    """

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(len(MOVES) + 1, 32)
        self.rnn = nn.GRU(32, hidden, batch_first=True)
        self.head = nn.Linear(hidden, len(MOVES))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(tokens))
        return self.head(hidden)  # type: ignore[no-any-return]


def sample_plans(model: nn.Module, group: int = GROUP, length: int = PLAN_LENGTH) -> torch.Tensor:
    """``group`` plans sampled from ``model``: tokens of shape ``(group, 1 + length)``, the start token "
    "first."""
    tokens = torch.full((group, 1), START)
    with torch.no_grad():
        for _ in range(length):
            move = torch.distributions.Categorical(logits=model(tokens)[:, -1]).sample()
            tokens = torch.cat([tokens, move[:, None]], dim=1)
    return tokens


def log_probs(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Each move's log-probability under ``model``: shape ``(group, length)``."""
    logits = model(tokens[:, :-1])
    return torch.log_softmax(logits, dim=-1).gather(2, tokens[:, 1:, None]).squeeze(2)


def make_envs(group: int = GROUP) -> gym.vector.VectorEnv:
    """The group's cliffs: a vector env of CliffWalking served over OpenEnv, one sub-environment a plan."""
    return gym.make_vec("openenv/gymnasium", num_envs=group, env_id=CLIFF)


def distance_to_goal(states: Any) -> np.ndarray:
    """Steps from each state to the goal (bottom right), walls and cliff aside: the Manhattan distance."""
    row, col = np.divmod(np.asarray(states), 12)
    return np.abs(3 - row) + np.abs(11 - col)  # type: ignore[no-any-return]


def _rewards(
    envs: gym.vector.VectorEnv,
    moves: np.ndarray,
    *,
    keep_after_end: bool = False,
    penalise_all: bool = False,
    distance: bool = True,
) -> np.ndarray:
    """Each plan's reward (the variants: the mistakes)."""
    states, _ = envs.reset()
    total = np.zeros(len(moves))
    ended = np.zeros(len(moves), dtype=bool)
    last = states
    for t in range(moves.shape[1]):
        last, reward, terminated, truncated, _ = envs.step(moves[:, t])
        total += reward if keep_after_end else np.where(ended, 0.0, reward)
        states = np.where(ended, states, last)
        ended |= terminated | truncated
    if not distance:
        return total
    if penalise_all:
        return total - 2.0 * distance_to_goal(last)
    return np.where(ended, total, total - 2.0 * distance_to_goal(states))


def plan_rewards(answer: Callable[..., Any], *, envs: gym.vector.VectorEnv | None = None) -> None:
    """Exercise 1: ``answer(envs, moves)``: each plan's return, less twice its distance to the goal when
    it does not get there. ``moves``: an integer array ``(group, length)``."""
    exercise = Exercise(1, "plan_rewards")
    own = envs is None
    envs = envs or make_envs(4)
    try:
        plans = [
            "RRR" + "U" * 12,  # off the cliff three times, then up against the top wall
            "URRRRRRRRRRRDLL",  # the goal in 13 moves; the last two play a new episode
            "UUUURRRRRRRRRRR",  # along the top, short of the goal
            "RDLURRRRRRRRRRR",  # off the cliff, then along the second row
        ]
        moves = np.array([[MOVES.index(m) for m in plan] for plan in plans])
        expected = _rewards(envs, moves)
        got = exercise.run(answer, envs, moves.copy())
        try:
            got = np.asarray(got.detach() if isinstance(got, torch.Tensor) else got, dtype=float)
        except (TypeError, ValueError):
            exercise.fail(f"it returned {got!r}; return one reward per plan.")
        exercise.require(got.shape == (4,), f"it returned shape {got.shape}; one reward per plan: (4,) here.")
        if np.allclose(got, expected):
            exercise.passed(f"rewards {expected.tolist()} for plans {plans}")
            return
        said = f"for the plans {plans} the rewards are {expected.tolist()}; it returned {got.tolist()}."
        if np.allclose(got, _rewards(envs, moves, keep_after_end=True)):
            exercise.fail(
                f"{said} It kept counting after a plan's episode ended: the vector env resets that sub-env "
                "automatically, and the moves after the end play a new episode. Keep a `done` flag per plan "
                "and add nothing once it is set."
            )
        if np.allclose(got, _rewards(envs, moves, distance=False)):
            exercise.fail(
                f"{said} A plan that does not reach the goal also loses 2 x `check.distance_to_goal(state)`."
            )
        if np.allclose(got, _rewards(envs, moves, penalise_all=True)):
            exercise.fail(
                f"{said} A plan that reached the goal loses nothing for distance; and once its episode "
                "ended, "
                "the vector env's observation is the start of a new episode, not where the plan got to."
            )
        exercise.fail(
            f"{said} reward = the sum of the rewards until the episode ends, minus 2 x the distance left."
        )
    finally:
        if own:
            envs.close()


def _advantages(rewards: torch.Tensor, *, centre: bool = True, eps: float = 1e-4) -> torch.Tensor:
    centred = rewards - rewards.mean() if centre else rewards
    return centred / (rewards.std() + eps)


def group_advantages(answer: Callable[..., Any]) -> None:
    """Exercise 2: ``answer(rewards)``: a group's rewards less their mean, over their standard deviation."""
    exercise = Exercise(2, "group_advantages")
    rewards = torch.tensor([-45.0, -17.0, -117.0, -20.0, -13.0, -30.0])
    got = exercise.run(answer, rewards.clone())
    exercise.require(
        isinstance(got, torch.Tensor) and tuple(got.shape) == (6,),
        f"it returned {type(got).__name__} {tuple(getattr(got, 'shape', ()))}; return a tensor, one "
        "advantage "
        "per plan.",
    )
    expected = _advantages(rewards)
    population = (rewards - rewards.mean()) / (rewards.std(unbiased=False) + 1e-4)
    if not (torch.allclose(got, expected, atol=1e-4) or torch.allclose(got, population, atol=1e-4)):
        said = f"the advantages are {expected.numpy().round(3)}; it returned {got.numpy().round(3)}."
        if torch.allclose(got, _advantages(rewards, centre=False), atol=1e-4):
            exercise.fail(
                f"{said} Subtract the group's mean first: an advantage says better or worse than the group."
            )
        exercise.fail(f"{said} (rewards - rewards.mean()) / (rewards.std() + 1e-4).")
    same = exercise.run(answer, torch.full((4,), -17.0))
    exercise.require_finite(
        same.detach().numpy() if isinstance(same, torch.Tensor) else same,
        "the advantages of a group whose rewards are all equal (their standard deviation is 0: add 1e-4)",
    )
    exercise.require(
        torch.allclose(torch.as_tensor(same, dtype=torch.float32), torch.zeros(4)),
        "a group whose rewards are all equal teaches nothing: its advantages are all 0.",
    )
    exercise.passed()


def _loss(
    new: torch.Tensor,
    old: torch.Tensor,
    ref: torch.Tensor,
    adv: torch.Tensor,
    clip: float,
    beta: float,
    **slip: Any,
) -> torch.Tensor:
    ratio = torch.exp(old - new) if slip.get("inverted") else torch.exp(new - old)
    a = adv[:, None]
    surrogate = (
        torch.clamp(ratio, 1 - clip, 1 + clip) * a
        if slip.get("clipped_only")
        else torch.min(ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a)
    )
    kl = torch.exp(ref - new) - (ref - new) - 1
    sign = -1.0 if slip.get("kl_sign") else 1.0
    return -(surrogate - sign * beta * kl).mean()


def grpo_loss(answer: Callable[..., Any]) -> list[float]:
    """Exercise 3: ``answer(log_probs, old_log_probs, ref_log_probs, advantages, clip, beta)`` is GRPO's
    loss. Then the check trains the lesson's model with it (`train_grpo`); returns the mean rewards."""
    exercise = Exercise(3, "grpo_loss")
    generator = torch.Generator().manual_seed(12)
    old = torch.log(torch.rand(4, 5, generator=generator) * 0.8 + 0.1)
    new = (old + 0.4 * torch.randn(4, 5, generator=generator)).requires_grad_()
    ref = old + 0.2 * torch.randn(4, 5, generator=generator)
    adv = torch.tensor([1.2, -0.4, -1.1, 0.3])
    got = exercise.run(answer, new, old.clone(), ref.clone(), adv.clone(), 0.2, 0.04)
    exercise.require(
        isinstance(got, torch.Tensor) and got.dim() == 0 and got.requires_grad,
        "return the loss: one number (the mean over the plans' moves) with a gradient in log_probs.",
    )
    expected = float(_loss(new, old, ref, adv, 0.2, 0.04).detach())
    value = float(got.detach())
    exercise.require_finite(value, "the loss")
    if abs(value - expected) > 1e-5:
        said = f"the loss is {expected:.5f}, it returned {value:.5f}."
        for slip, hint in (
            ({"kl_sign": True}, "The KL term keeps the model near the reference: the loss adds + beta * KL."),
            ({"clipped_only": True}, "Take the min of the unclipped and clipped terms, as PPO does."),
            ({"inverted": True}, "The ratio is exp(log_probs - old_log_probs)."),
        ):
            if abs(value - float(_loss(new, old, ref, adv, 0.2, 0.04, **slip).detach())) < 1e-5:
                exercise.fail(f"{said} {hint}")
        if abs(value - float(_loss(new, old, ref, adv, 0.2, 0.0).detach())) < 1e-5:
            exercise.fail(f"{said} The KL penalty is missing: + beta * (exp(ref - new) - (ref - new) - 1).")
        exercise.fail(
            f"{said} Each move gets its plan's advantage (advantages[:, None]); loss = -mean(min(ratio * A, "
            "clamp(ratio, 1 - clip, 1 + clip) * A) - beta * KL)."
        )
    with exercise.time_limit(), one_thread():
        means = train_grpo(lambda *args: exercise.run(answer, *args), steps=TRAIN_STEPS, seed=0)
    first, last = float(np.mean(means[:10])), float(np.mean(means[-10:]))
    exercise.require(
        last >= first + RISE,
        f"trained for {TRAIN_STEPS} groups with this loss, the mean reward went from {first:.1f} to "
        f"{last:.1f}: "
        "it does not learn yet.",
    )
    exercise.passed(f"trained for {TRAIN_STEPS} groups, the mean reward rose from {first:.1f} to {last:.1f}")
    return means


def train_grpo(
    loss_fn: Callable[..., torch.Tensor],
    *,
    steps: int = TRAIN_STEPS,
    seed: int = 0,
    envs: gym.vector.VectorEnv | None = None,
    on_group: Callable[[float], None] | None = None,
    clip: float = 0.2,
    beta: float = 0.04,
) -> list[float]:
    """GRPO on the lesson's model: each step samples a group of plans, plays them (the served cliffs unless
    ``envs`` is given), and takes two gradient steps of ``loss_fn(log_probs, old, ref, advantages, clip,
    beta)``. Returns each group's mean reward; ``on_group(mean)`` hears of each."""
    torch.manual_seed(seed)
    own = envs is None
    envs = envs or make_envs()
    try:
        model, reference = PlanModel(), PlanModel()
        reference.load_state_dict(model.state_dict())
        optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
        means = []
        for _ in range(steps):
            tokens = sample_plans(model, envs.num_envs)
            rewards = torch.as_tensor(_rewards(envs, tokens[:, 1:].numpy()), dtype=torch.float32)
            advantages = _advantages(rewards)
            with torch.no_grad():
                old, ref = log_probs(model, tokens), log_probs(reference, tokens)
            for _ in range(2):
                loss = loss_fn(log_probs(model, tokens), old, ref, advantages, clip, beta)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            means.append(float(rewards.mean()))
            if on_group is not None:
                on_group(means[-1])
        return means
    finally:
        if own:
            envs.close()
