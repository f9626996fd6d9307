"""Lesson 7's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

import chess
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field

import openenv_lab
from openenv_lab.adapters import Spec
from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_07 as check
from tests.course.conftest import served
from tutorials.solutions import lesson_07 as solution


@pytest.fixture(scope="module")
def tasks():
    env = gym.make("openenv/chess", tasks="mate_in_1")
    tasks = env.unwrapped.tasks
    env.close()
    return tasks


def test_the_reference_answers_pass(tasks, capsys):
    env = gym.make("openenv/chess", tasks="mate_in_1")
    try:
        check.mate_in_one(solution.mate_in_one, tasks, env)
    finally:
        env.close()
    check.mate_in_two(solution.mate_in_two, tasks)
    assert capsys.readouterr().out.splitlines() == ["Exercise 1: correct", "Exercise 2: correct"]


def test_the_stalemate_traps_catch_a_search_that_counts_no_reply_as_forced():
    """The traps are what they say: a mate in two, where the first forcing-looking move stalemates."""
    for fen in check.STALEMATE_TRAPS:
        board = chess.Board(fen)
        first = next(
            m for m in board.legal_moves if check.forces_mate_in_two(fen, m.uci()) or _stalemates(board, m)
        )
        assert _stalemates(board, first)
        assert solution.mate_in_two(fen) is not None


def _stalemates(board, move):
    board.push(move)
    try:
        return board.is_stalemate()
    finally:
        board.pop()


def first_mover(fen, *, as_move=False, check_only=False):
    board = chess.Board(fen)
    for move in board.legal_moves:
        board.push(move)
        hit = board.is_check() if check_only else board.is_checkmate()
        board.pop()
        if hit:
            return move if as_move else move.uci()
    return None


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda fen: first_mover(fen, as_move=True), r"a chess.Move .*move.uci\(\)"),
        (
            lambda fen: first_mover(fen, check_only=True),
            "gives check but does not mate|a check is not a mate",
        ),
        (lambda fen: first_mover(fen) or next(iter(chess.Board(fen).legal_moves)).uci(), "return None"),
    ],
)
def test_mate_in_one_mistakes_are_named(tasks, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.mate_in_one(answer, tasks)


def mate_in_two(fen, *, any_reply=False, stalemate_counts=False):
    board = chess.Board(fen)
    for move in board.legal_moves:
        board.push(move)
        if board.is_checkmate():
            board.pop()
            return move.uci()
        replies = list(board.legal_moves)
        mated = []
        for reply in replies:
            board.push(reply)
            mated.append(solution.mate_in_one(board.fen()) is not None)
            board.pop()
        board.pop()
        forced = any(mated) if any_reply else all(mated)
        if forced and (replies or stalemate_counts):
            return move.uci()
    return None


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"any_reply": True}, "Every reply must allow a mate in one"),
        ({"stalemate_counts": True}, "stalemate, a draw"),
    ],
)
def test_mate_in_two_mistakes_are_named(tasks, mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.mate_in_two(lambda fen: mate_in_two(fen, **mistake), tasks)


@pytest.fixture(scope="module")
def tools_env() -> Iterator[gym.Env]:
    fleet = openenv_lab.serve("echo", mcp=True)
    env = gym.make("openenv/remote", base_url=fleet.urls[0])
    env.reset(seed=0)
    yield env
    env.close()
    fleet.stop()


def test_total_length_reference_passes(tools_env, capsys):
    check.total_length(solution.total_length, tools_env)
    assert capsys.readouterr().out == "Exercise 3: correct\n"


def joined(env, words):
    if not words:
        return 0
    _, _, _, _, info = env.step(env.unwrapped.tool_action("echo_with_length", message="".join(words)))
    return json.loads(info["tool_result"])["length"]


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda env, words: sum(len(word) for word in words), "it called no tool"),
        (joined, "one call per word"),
        (lambda env, words: solution.total_length(env, words) + len(words), "adding up to"),
    ],
)
def test_total_length_mistakes_are_named(tools_env, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.total_length(answer, tools_env)


class NimAction(Action):
    take: int


class NimObservation(Observation):
    pile: int = 0
    allowed: list[int] = Field(default_factory=list)


class NimEnvironment(Environment):
    """The lesson's Nim: 10 to 20 stones, take 1 to 3, a random opponent; who takes the last stone wins."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._pile, self._rng = 0, random.Random()

    def _observe(self, reward: float, done: bool, **metadata: Any) -> NimObservation:
        allowed = [] if done else [n for n in (1, 2, 3) if n <= self._pile]
        return NimObservation(pile=self._pile, allowed=allowed, reward=reward, done=done, metadata=metadata)

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> NimObservation:
        self._rng = random.Random(seed)
        self._pile = self._rng.randint(10, 20)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return self._observe(0.0, False, seed=seed)

    def step(self, action: NimAction, timeout_s: Any = None, **kwargs: Any) -> NimObservation:
        self._state.step_count += 1
        if action.take not in (1, 2, 3) or action.take > self._pile:
            return self._observe(-1.0, False, illegal=True)
        self._pile -= action.take
        if self._pile == 0:
            return self._observe(1.0, True)
        self._pile -= min(self._pile, self._rng.randint(1, 3))
        return self._observe(-1.0 if self._pile == 0 else 0.0, self._pile == 0)

    @property
    def state(self) -> State:
        return self._state


@pytest.fixture(scope="module")
def nim_url() -> Iterator[str]:
    with served(
        create_app(NimEnvironment, NimAction, NimObservation, env_name="nim", max_concurrent_envs=8)
    ) as url:
        yield url


def test_nim_reference_answers_pass(nim_url, capsys):
    nim = check.nim_spec(solution.NIM, nim_url)
    try:
        random_rate, policy_rate = check.nim_policy(solution.nim_policy, nim)
    finally:
        nim.close()
    assert policy_rate > random_rate
    assert capsys.readouterr().out.splitlines()[0] == "Exercise 4: correct"


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        (None, "still None"),
        (
            Spec(
                "nim",
                action="take",
                actions=[0, 1, 2],
                legal_actions="allowed",
                observation={"pile": spaces.Discrete(21)},
            ),
            "index 0 must mean one stone",
        ),
        (
            Spec("nim", action="take", actions=[1, 2, 3], observation={"pile": spaces.Discrete(21)}),
            "legal_actions='allowed'",
        ),
        (
            Spec(
                "nim",
                action="take",
                actions=[1, 2, 3],
                legal_actions="allowed",
                observation={"pile": spaces.Box(0, 20, shape=(), dtype=np.int64)},
            ),
            r"spaces.Discrete\(21\)",
        ),
    ],
)
def test_nim_spec_mistakes_are_named(nim_url, spec, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.nim_spec(spec, nim_url).close()


@pytest.fixture(scope="module")
def nim(nim_url) -> Iterator[gym.Env]:
    env = gym.make("openenv/remote", base_url=nim_url, spec=solution.NIM)
    yield env
    env.close()


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda obs: int(obs["pile"] % 4), "Action index 0 takes one stone"),
        (lambda obs: int(np.flatnonzero(obs["action_mask"])[-1]), "to leave a multiple of 4"),
        (lambda obs: 3, "return a legal action index"),
    ],
)
def test_nim_policy_mistakes_are_named(nim, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.nim_policy(answer, nim)


def test_the_nim_specs_mask_follows_the_pile_on_every_step_of_whole_games(nim):
    """Guards `GenericAdapter`'s mask from a Spec's ``legal_actions`` (mutation: a mask of all ones): on
    every step of whole games, mid-game included, taking n is legal exactly when n stones are left."""
    nim.action_space.seed(0)
    narrowed = 0
    for seed in range(12):
        obs, _ = nim.reset(seed=seed)
        done = False
        while not done:
            assert list(obs["action_mask"]) == [int(n <= obs["pile"]) for n in (1, 2, 3)], obs
            listed = nim.unwrapped.adapter.legal_actions()  # the server's own list
            assert list(obs["action_mask"]) == [int(n in listed) for n in (1, 2, 3)]
            # What MaskablePPO asks the env for (mutation: all True) is the observation's mask.
            assert nim.unwrapped.action_masks().tolist() == obs["action_mask"].astype(bool).tolist()
            narrowed += int(not obs["action_mask"].all())
            action = nim.action_space.sample(mask=obs["action_mask"].astype(np.int8))
            obs, _, terminated, truncated, _ = nim.step(action)
            done = terminated or truncated
    assert narrowed > 0  # piles of one or two stones came up: the mask had something to rule out
