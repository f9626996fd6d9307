"""Checks for lesson 9, planning and learning in a small world (``tutorials/09_planning_and_q_learning``).

Dynamic programming on FrozenLake's model, then Q-learning and SARSA on CliffWalking, served over OpenEnv
(``openenv/gymnasium``). The checks work the right numbers out themselves: the Bellman backup, value
iteration's fixed point, each TD update. The episode exercise is replayed step by step from what the
watched environment saw, and then trained briefly: the check looks at where its greedy policy walks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from ._exercise import Exercise, WatchedEnv

__all__ = [
    "action_values",
    "greedy_return",
    "lake_model",
    "q_learning_episode",
    "q_learning_update",
    "sarsa_update",
    "value_iteration",
]

#: The lake of the dynamic-programming exercises (4 x 4, slippery: an action goes where it points a third
#: of the time, and to either side otherwise).
LAKE = "FrozenLake-v1"
#: The cliff of the Q-learning and SARSA exercises: 4 x 12, -1 a step, -100 and back to the start for a
#: step off the cliff; the goal ends the episode.
CLIFF = "CliffWalking-v1"
#: Steps before a cliff episode is truncated, in the checks and the lesson: every episode ends.
CLIFF_STEPS = 100
GAMMA = 0.99
ALPHA = 0.5
#: The training the episode check gives the answer: episodes, exploration, and the greedy return it must
#: reach (the shortest path is 13 steps, -13; the path along the top edge, 17).
TRAIN_EPISODES = 300
EPSILON = 0.1
GOOD_ENOUGH = -17.0

Model = dict[int, dict[int, list[tuple[float, int, float, bool]]]]


def lake_model(**kwargs: Any) -> Model:
    """FrozenLake's model from gymnasium: ``P[s][a]`` lists ``(probability, next_state, reward,
    terminated)``, one tuple per place the action may lead. ``kwargs`` go to ``gym.make``."""
    env = gym.make(LAKE, **kwargs)
    try:
        return env.unwrapped.P  # type: ignore[attr-defined, no-any-return]
    finally:
        env.close()


def _backup(
    P: Model,
    V: np.ndarray,
    s: int,
    gamma: float,
    *,
    stop_at_end: bool = True,
    weighted: bool = True,
    first_only: bool = False,
) -> np.ndarray:
    """Each action's expected reward plus discounted next value (the variants: the mistakes)."""
    values = []
    for a in range(len(P[s])):
        outcomes = P[s][a][:1] if first_only else P[s][a]
        total = 0.0
        for p, s_next, r, terminated in outcomes:
            future = 0.0 if terminated and stop_at_end else gamma * V[s_next]
            total += (p if weighted and not first_only else 1.0) * (r + future)
        values.append(total)
    return np.array(values)


def _sweeps(P: Model, gamma: float, theta: float, combine: Callable[[np.ndarray], float]) -> np.ndarray:
    V = np.zeros(len(P))
    while True:
        new = np.array([combine(_backup(P, V, s, gamma)) for s in range(len(P))])
        if np.max(np.abs(new - V)) < theta:
            return new
        V = new


def _as_array(exercise: Exercise, got: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    if isinstance(got, tuple):
        exercise.fail(f"it returned a tuple; return {what} alone, an array of shape {shape}.")
    try:
        array = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        exercise.fail(f"it returned {got!r}; return {what}, an array of shape {shape}.")
    exercise.require(array.shape == shape, f"it returned shape {array.shape}; {what} has shape {shape}.")
    exercise.require_finite(array, what)
    return array


def action_values(answer: Callable[..., Any]) -> None:
    """Exercise 1: ``answer(P, V, s, gamma)`` is the value of each action in ``s`` under the values ``V``."""
    exercise = Exercise(1, "action_values")
    P = lake_model()
    V = np.random.default_rng(9).random(len(P))  # values nowhere near right: every slip changes the sum
    for s in (14, 0, 6):  # beside the goal, the start, beside two holes
        got = _as_array(exercise, exercise.run(answer, P, V.copy(), s, 0.9), (4,), "one value per action")
        expected = _backup(P, V, s, 0.9)
        if np.allclose(got, expected, atol=1e-9):
            continue
        said = (
            f"action_values(P, V, {s}, 0.9) returned {np.round(got, 4)}, but it is {np.round(expected, 4)}."
        )
        if np.allclose(got, _backup(P, V, s, 0.9, stop_at_end=False)):
            exercise.fail(
                f"{said} An outcome that ends the episode (a hole, the goal: `terminated`) has no future: "
                "count its reward alone, without gamma * V[next]."
            )
        if np.allclose(got, _backup(P, V, s, 1.0)):
            exercise.fail(f"{said} Discount the next state's value: gamma * V[next].")
        if np.allclose(got, _backup(P, V, s, 0.9, first_only=True)):
            exercise.fail(
                f"{said} Only the first outcome of each action was counted: on slippery ice an action may "
                "lead to three squares. Sum over every (probability, next, reward, terminated) in P[s][a]."
            )
        if np.allclose(got, _backup(P, V, s, 0.9, weighted=False)):
            exercise.fail(f"{said} Weight each outcome by its probability: p * (reward + ...).")
        exercise.fail(
            f"{said} For each action a: the sum over P[s][a] of p * (reward + gamma * V[next]), with no "
            "V[next] where the outcome is terminated."
        )
    exercise.passed()


def value_iteration(answer: Callable[..., Any]) -> np.ndarray:
    """Exercise 2: ``answer(P, gamma, theta)`` is the optimal state values; returns the check's own."""
    exercise = Exercise(2, "value_iteration")
    P = lake_model()
    expected = _sweeps(P, GAMMA, 1e-12, np.max)
    got = _as_array(exercise, exercise.run(answer, P, GAMMA, 1e-10), (len(P),), "V, one value per state")
    if np.allclose(got, expected, atol=1e-6):
        exercise.passed(f"V(start) = {expected[0]:.3f}")
        return expected
    if np.allclose(got, _sweeps(P, GAMMA, 1e-12, np.mean), atol=1e-4):
        exercise.fail(
            "these are the values of the random policy (each action equally likely): the optimal values "
            "take the best action, the max over the action values, not their mean."
        )
    change = max(abs(np.max(_backup(P, got, s, GAMMA)) - got[s]) for s in range(len(P)))
    if change > 1e-6:
        exercise.fail(
            f"one more sweep would still change V by {change:.2g}. Repeat the sweeps until the largest "
            "change of a whole sweep is below theta; then V no longer moves (the Bellman optimality equation "
            "holds)."
        )
    exercise.fail(f"V(start) should be {expected[0]:.4f}, got {got[0]:.4f}.")


def _td_update(
    Q: np.ndarray,
    s: int,
    a: int,
    r: float,
    s_next: int,
    a_next: int | None,
    terminated: bool,
    *,
    alpha: float = ALPHA,
    gamma: float = GAMMA,
    next_value: str = "",
    stop_at_end: bool = True,
    sign: float = 1.0,
) -> float:
    """The updated ``Q[s, a]``; ``a_next`` None is Q-learning, an action SARSA (the rest: the mistakes)."""
    kind = next_value or ("max" if a_next is None else "taken")
    future = {
        "max": Q[s_next].max(),
        "taken": Q[s_next, a_next],
        "same": Q[s_next, a],
        "mean": Q[s_next].mean(),
    }
    bootstrap = 0.0 if terminated and stop_at_end else gamma * future[kind]
    return float(Q[s, a] + sign * alpha * (r + bootstrap - Q[s, a]))


#: (s, a, reward, s_next, a_next, terminated) of the update checks: a step up from the start, a step off
#: the cliff (-100 and back to the start: the episode goes on), the step down into the goal.
UPDATE_CASES = ((36, 0, -1.0, 24, 1, False), (25, 2, -100.0, 36, 0, False), (35, 2, -1.0, 47, 3, True))


def _check_update(exercise: Exercise, answer: Callable[..., Any], sarsa: bool) -> None:
    rng = np.random.default_rng(exercise.number)
    for s, a, r, s_next, a_next, terminated in UPDATE_CASES:
        Q = rng.normal(size=(48, 4))
        before = Q.copy()
        args = (s, a, r, s_next, a_next) if sarsa else (s, a, r, s_next)
        returned = exercise.run(answer, Q, *args, terminated, ALPHA, GAMMA)
        call = f"{exercise.name}(Q, {', '.join(map(str, args))}, terminated={terminated}, {ALPHA}, {GAMMA})"
        if np.array_equal(Q, before, equal_nan=True):
            if isinstance(returned, np.ndarray) and returned.shape == Q.shape:
                exercise.fail(
                    f"{call} returned a new table and left Q as it was: update Q in place "
                    "(`Q[s, a] += ...`), since the training loop goes on with the same Q."
                )
            exercise.fail(f"{call} left Q as it was: update Q[s, a] in place, `Q[s, a] += alpha * (...)`.")
        exercise.require_finite(Q, "Q")
        moved = [tuple(map(int, index)) for index in np.argwhere(before != Q)]
        exercise.require(
            moved == [(s, a)],
            f"{call} changed Q at {moved}: only Q[s, a] = Q[{s}, {a}], the pair just tried, changes.",
        )
        case = (s, a, r, s_next, a_next if sarsa else None, terminated)
        expected = _td_update(before, *case)
        if abs(Q[s, a] - expected) > 1e-9:
            said = f"{call} set Q[{s}, {a}] to {Q[s, a]:.4f}, but it is {expected:.4f}."
            exercise.fail(_update_hint(said, float(Q[s, a]), before, case, sarsa))
    exercise.passed()


def _update_hint(said: str, got: float, before: np.ndarray, case: tuple[Any, ...], sarsa: bool) -> str:
    """What the wrong update most likely did, from the variants that give ``got``."""

    def slip(**variant: Any) -> bool:
        return abs(got - _td_update(before, *case, **variant)) < 1e-9

    if slip(stop_at_end=False):
        return (
            f"{said} When the step is `terminated` nothing follows: the target is the reward alone. "
            "(`truncated` is different: the world would have gone on, so the target keeps gamma * Q there; "
            "the training loop passes `terminated` only.)"
        )
    if sarsa and slip(next_value="max"):
        return (
            f"{said} That is Q-learning's target (the best next action). SARSA's target uses the next "
            "action the policy actually takes: Q[s_next, a_next]."
        )
    if not sarsa and any(slip(next_value=kind) for kind in ("same", "mean")):
        return (
            f"{said} Q-learning's target takes the best action in s_next, whatever is played next: "
            "`Q[s_next].max()`."
        )
    if slip(alpha=1.0):
        return (
            f"{said} It replaced Q[s, a] by the target: move it only a step alpha toward the target, "
            "`Q[s, a] += alpha * (target - Q[s, a])`."
        )
    if slip(sign=-1.0):
        return f"{said} The wrong sign: move Q[s, a] toward the target, `+= alpha * (target - Q[s, a])`."
    if slip(gamma=1.0):
        return f"{said} Discount the next value: reward + gamma * ...."
    return f"{said} The target is reward + gamma * (the next value), or the reward alone if terminated."


def q_learning_update(answer: Callable[..., Any]) -> None:
    """Exercise 3: ``answer(Q, s, a, reward, s_next, terminated, alpha, gamma)`` updates ``Q`` in place."""
    _check_update(Exercise(3, "q_learning_update"), answer, sarsa=False)


def sarsa_update(answer: Callable[..., Any]) -> None:
    """Exercise 5: ``answer(Q, s, a, reward, s_next, a_next, terminated, alpha, gamma)``, in place."""
    _check_update(Exercise(5, "sarsa_update"), answer, sarsa=True)


def _cliff(max_episode_steps: int = CLIFF_STEPS) -> gym.Env:
    return gym.make("openenv/gymnasium", env_id=CLIFF, max_episode_steps=max_episode_steps)


def greedy_return(env: gym.Env, Q: np.ndarray, *, seed: int = 0) -> tuple[float, int]:
    """The return and length of one episode played greedily from ``Q`` (ties: the lowest action)."""
    s, _ = env.reset(seed=seed)
    total, steps = 0.0, 0
    while True:
        s, reward, terminated, truncated, _ = env.step(int(np.argmax(Q[s])))
        total, steps = total + float(reward), steps + 1
        if terminated or truncated:
            return total, steps


def _replay(
    watched: WatchedEnv, Q0: np.ndarray, *, truncation_ends: bool = False, skip_last: bool = False
) -> np.ndarray:
    """``Q0`` after the right updates of the watched env's first episode (the variants: the mistakes)."""
    Q = Q0.copy()
    states, actions = watched.observations[0], watched.actions[0]
    for t, a in enumerate(actions[:-1] if skip_last else actions):
        terminated, truncated = watched.endings[t]
        ends = terminated or (truncated and truncation_ends)
        s, s_next = int(states[t]), int(states[t + 1])
        Q[s, a] = _td_update(Q, s, int(a), watched.rewards[t], s_next, None, ends)
    return Q


def q_learning_episode(answer: Callable[..., Any]) -> None:
    """Exercise 4: ``answer(env, Q, alpha, gamma, epsilon, rng)`` plays one episode of Q-learning, updating
    ``Q`` after each step, and returns the episode's return.

    The check replays a short episode (truncated after 20 steps) with the right updates, plays one with
    ``epsilon=1`` to see it explore, then trains the answer for `TRAIN_EPISODES` episodes on the cliff and
    plays the greedy policy. The cliff is served by the embedded gymnasium server.
    """
    exercise = Exercise(4, "q_learning_episode")
    with exercise.time_limit():
        _check_one_episode(exercise, answer)
        env = _cliff()
        try:
            Q = np.zeros((48, 4))
            rng = np.random.default_rng(0)
            for _ in range(TRAIN_EPISODES):
                exercise.run(answer, env, Q, ALPHA, GAMMA, EPSILON, rng)
            exercise.require_finite(Q, "Q")
            walked, steps = greedy_return(env, Q)
        finally:
            env.close()
    exercise.require(
        walked >= GOOD_ENOUGH,
        f"after {TRAIN_EPISODES} episodes the greedy policy's return is {walked:g} ({steps} steps): it "
        "has not learnt the way to the goal (-13 at best). Check that each step updates the state it left "
        "and moves on to the state it reached (s = s_next).",
    )
    exercise.passed(f"after {TRAIN_EPISODES} episodes the greedy policy reaches the goal in {steps} steps")


def _played(exercise: Exercise, answer: Callable[..., Any], Q0: np.ndarray, epsilon: float) -> WatchedEnv:
    """One episode of the answer's on a fresh watched cliff, truncated after 20 steps."""
    watched = WatchedEnv(_cliff(20), exercise)
    try:
        exercise.run(answer, watched, Q0.copy(), ALPHA, GAMMA, epsilon, np.random.default_rng(4))
    finally:
        watched.close()
    return watched


def _greedy_steps(watched: WatchedEnv, Q0: np.ndarray) -> list[bool]:
    """For each step of the first episode, whether its action was the argmax of Q as it was then."""
    Q, greedy = Q0.copy(), []
    states = watched.observations[0]
    for t, a in enumerate(watched.actions[0]):
        s = int(states[t])
        greedy.append(int(a) == int(np.argmax(Q[s])))
        Q[s, a] = _td_update(
            Q, s, int(a), watched.rewards[t], int(states[t + 1]), None, watched.endings[t][0]
        )
    return greedy


def _check_one_episode(exercise: Exercise, answer: Callable[..., Any]) -> None:
    Q0 = np.random.default_rng(4).normal(size=(48, 4))
    Q0[:, 0] += 3.0  # "up" is best everywhere: the walk keeps to the top rows until it is truncated
    Q = Q0.copy()
    watched = WatchedEnv(_cliff(20), exercise)
    try:
        got = exercise.run(answer, watched, Q, ALPHA, GAMMA, 0.0, np.random.default_rng(4))
    finally:
        watched.close()
    exercise.require(
        len(watched.actions) == 1,
        f"it reset the env {len(watched.actions)} times: play one episode, one reset at its start.",
    )
    exercise.require(bool(watched.actions[0]), "it took no step: play the episode until it ends.")
    terminated, truncated = watched.endings[-1]
    exercise.require(
        terminated or truncated, "it stopped before the episode ended: play until `terminated or truncated`."
    )
    exercise.require_finite(Q, "Q")
    expected_return = sum(watched.rewards)
    exercise.require(
        isinstance(got, (int, float, np.floating)) and abs(float(got) - expected_return) < 1e-9,
        f"it returned {got!r}; return the episode's return, the sum of its rewards ({expected_return:g}).",
    )
    if not np.allclose(Q, _replay(watched, Q0)):
        if truncated and np.allclose(Q, _replay(watched, Q0, truncation_ends=True)):
            exercise.fail(
                "at the last step, where the episode was truncated (cut short after 20 steps), it passed "
                "`terminated or truncated` to the update. Pass `terminated` alone: a truncated episode's "
                "next state still has a future, so the target keeps gamma * max Q[s_next]."
            )
        if np.allclose(Q, _replay(watched, Q0, skip_last=True)):
            exercise.fail(
                "it did not update Q after the last step: update after every step, the last one too."
            )
        exercise.fail(
            "Q after the episode is not what Q-learning's updates give: after each step call "
            "q_learning_update(Q, s, a, reward, s_next, terminated, alpha, gamma), then go on from "
            "s = s_next. (If Exercise 3's check does not pass yet, start there.)"
        )
    greedy = _greedy_steps(watched, Q0)
    if not all(greedy):
        exercise.fail(
            f"with epsilon=0 every action is greedy, np.argmax(Q[s]), but step {greedy.index(False) + 1}'s "
            "was not."
        )
    share = float(np.mean(_greedy_steps(_played(exercise, answer, Q0, 1.0), Q0)))
    exercise.require(
        share < 0.7,
        f"with epsilon=1 every action should be random, but {share:.0%} of them were the greedy one. "
        "Explore with probability epsilon: `if rng.random() < epsilon: a = int(rng.integers(4))`.",
    )
