"""Lesson 9's checks: the reference answers pass, typical mistakes are named, and answers that crash, loop
or diverge get a hint rather than a traceback from inside the check or a kernel that never answers."""

from __future__ import annotations

import numpy as np
import pytest

from openenv_lab.course import NotYetRight, _exercise
from openenv_lab.course import lesson_09 as check
from tutorials.solutions import lesson_09 as solution


def test_the_reference_answers_pass(capsys):
    check.action_values(solution.action_values)
    V = check.value_iteration(solution.value_iteration)
    check.q_learning_update(solution.q_learning_update)
    check.q_learning_episode(solution.q_learning_episode)
    check.sarsa_update(solution.sarsa_update)
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == [f"Exercise {n}: correct" for n in (1, 2, 3, 4, 5)]
    assert 0.5 < V[0] < 0.6  # the slippery lake's optimal value at the start, gamma 0.99


def action_values(P, V, s, gamma, *, stop_at_end=True, discount=True, weighted=True, first_only=False):
    values = np.zeros(4)
    for a in range(4):
        for p, s_next, reward, terminated in P[s][a][:1] if first_only else P[s][a]:
            future = 0.0 if terminated and stop_at_end else (gamma if discount else 1.0) * V[s_next]
            values[a] += (p if weighted and not first_only else 1.0) * (reward + future)
    return values


def crashes(P, V, s, gamma):
    return np.array([P[s][a][9] for a in range(4)])  # IndexError: P[s][a] has three outcomes


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda P, V, s, g: action_values(P, V, s, g, stop_at_end=False), "has no future"),
        (lambda P, V, s, g: action_values(P, V, s, g, discount=False), "Discount the next state's value"),
        (lambda P, V, s, g: action_values(P, V, s, g, first_only=True), "lead to three squares"),
        (
            lambda P, V, s, g: action_values(P, V, s, g, weighted=False),
            "Weight each outcome by its probability",
        ),
        (lambda P, V, s, g: action_values(P, V, s, g).max(), r"shape \(\); one value per action"),
        (crashes, "raised IndexError: list index out of range. The traceback above"),
    ],
)
def test_action_values_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.action_values(answer)


def one_sweep(P, gamma, theta):
    return np.array([solution.action_values(P, np.zeros(len(P)), s, gamma).max() for s in range(len(P))])


def mean_not_max(P, gamma, theta):
    V = np.zeros(len(P))
    while True:
        new = np.array([solution.action_values(P, V, s, gamma).mean() for s in range(len(P))])
        if np.max(np.abs(new - V)) < theta:
            return new
        V = new


def never_stops(P, gamma, theta):
    V, change = np.zeros(len(P)), 1.0
    while change > theta:  # `change` is never updated
        V = np.array([solution.action_values(P, V, s, gamma).max() for s in range(len(P))])


def diverges(P, gamma, theta):
    V = np.zeros(len(P))
    for _ in range(2000):
        V = np.array([solution.action_values(P, V, s, gamma).max() + 2.0 * V[s] for s in range(len(P))])
    return V


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (one_sweep, "one more sweep would still change V"),
        (mean_not_max, "values of the random policy"),
        (
            lambda P, gamma, theta: (solution.value_iteration(P, gamma, theta), None),
            "it returned a tuple; return V",
        ),
        (diverges, "holds (NaN|an infinity): the updates diverged"),
        (never_stops, "still running after 2 seconds"),
    ],
)
def test_value_iteration_mistakes_are_named(monkeypatch, answer, hint):
    monkeypatch.setattr(_exercise, "SECONDS", 2.0)
    with pytest.raises(NotYetRight, match=hint):
        check.value_iteration(answer)


def q_update(*, bootstrap_at_end=False, next_value="max", alpha_one=False, sign=1.0, new_table=False):
    def update(Q, s, a, reward, s_next, terminated, alpha, gamma):
        future = {"max": Q[s_next].max(), "same": Q[s_next, a], "mean": Q[s_next].mean()}[next_value]
        target = reward if terminated and not bootstrap_at_end else reward + gamma * future
        step = 1.0 if alpha_one else alpha
        if new_table:
            Q = Q.copy()
        Q[s, a] += sign * step * (target - Q[s, a])
        return Q

    return update


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"bootstrap_at_end": True}, "When the step is `terminated` nothing follows"),
        ({"next_value": "same"}, r"takes the best action in s_next"),
        ({"next_value": "mean"}, r"takes the best action in s_next"),
        ({"alpha_one": True}, "replaced Q\\[s, a\\] by the target"),
        ({"sign": -1.0}, "The wrong sign"),
        ({"new_table": True}, "returned a new table and left Q as it was"),
    ],
)
def test_q_learning_update_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.q_learning_update(q_update(**mistake))


def sarsa(*, bootstrap_at_end=False, q_learning=False):
    def update(Q, s, a, reward, s_next, a_next, terminated, alpha, gamma):
        future = Q[s_next].max() if q_learning else Q[s_next, a_next]
        target = reward if terminated and not bootstrap_at_end else reward + gamma * future
        Q[s, a] += alpha * (target - Q[s, a])

    return update


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"bootstrap_at_end": True}, "When the step is `terminated` nothing follows"),
        ({"q_learning": True}, "That is Q-learning's target"),
    ],
)
def test_sarsa_update_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.sarsa_update(sarsa(**mistake))


def episode(
    *,
    ends_at_truncation=False,
    stop_on_terminated_only=False,
    returns_last_reward=False,
    never_explores=False,
    stays_put=False,
):
    def q_learning_episode(env, Q, alpha, gamma, epsilon, rng):
        s, _ = env.reset()
        total = 0.0
        while True:
            explore = rng.random() < epsilon and not never_explores
            a = int(rng.integers(4)) if explore else int(np.argmax(Q[s]))
            s_next, reward, terminated, truncated, _ = env.step(a)
            ends = terminated or truncated if ends_at_truncation else terminated
            solution.q_learning_update(Q, s, a, reward, s_next, ends, alpha, gamma)
            total = reward if returns_last_reward else total + reward
            if terminated or (truncated and not stop_on_terminated_only):
                return total
            s = s if stays_put else s_next

    return q_learning_episode


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"ends_at_truncation": True}, "passed `terminated or truncated` to the update"),
        ({"stop_on_terminated_only": True}, "stepped an episode that had already ended"),
        ({"returns_last_reward": True}, "return the episode's return, the sum of its rewards"),
        ({"never_explores": True}, "with epsilon=1 every action should be random"),
        ({"stays_put": True}, "not what Q-learning's updates give"),
    ],
)
def test_q_learning_episode_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.q_learning_episode(episode(**mistake))
