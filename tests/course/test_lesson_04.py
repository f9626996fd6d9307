"""Lesson 4's checks: the reference answers pass, typical mistakes are named.

The guessing game is served as the lesson serves it: openenv's `create_app` and uvicorn in a thread.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_04 as check
from tests.course.conftest import served
from tutorials.solutions import lesson_04 as solution


class GuessAction(Action):
    guess: int = Field(..., ge=0, le=100)


class GuessObservation(Observation):
    hint: str = ""
    guesses: int = 0


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._secret = 0

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> GuessObservation:
        self._secret = random.Random(seed).randint(0, 100)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return GuessObservation(hint="start", reward=0.0, metadata={"seed": seed} if seed is not None else {})

    def step(self, action: GuessAction, timeout_s: Any = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        hint, reward, done = solution.judge(self._secret, action.guess, self._state.step_count)
        return GuessObservation(hint=hint, guesses=self._state.step_count, reward=reward, done=done)

    @property
    def state(self) -> State:
        return self._state


@pytest.fixture(scope="module")
def guess_env() -> Iterator[gym.Env]:
    app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=4)
    with served(app) as url:
        env = gym.make("openenv/remote", base_url=url)
        yield env
        env.close()


def test_the_reference_answers_pass(guess_env, capsys):
    check.judge(solution.judge)
    counts = check.binary_search(solution.binary_search, guess_env)
    assert all(1 <= n <= 7 for n in counts)
    assert capsys.readouterr().out.splitlines()[0] == "Exercise 1: correct"


def judge(secret, guess, guesses, *, reversed_hints=False, limit=10, wrong_pays=-1.0, correct_done=True):
    if guess == secret:
        return "correct", 10.0, correct_done
    above = secret > guess
    if reversed_hints:
        above = not above
    return ("higher" if above else "lower"), wrong_pays, guesses >= limit


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"reversed_hints": True}, '"higher" when the secret is above the guess'),
        ({"limit": 11}, "the 10th guess is the last one"),
        ({"limit": 9}, "the game goes on"),
        ({"wrong_pays": 0.0}, "-1 for any other guess"),
        ({"correct_done": False}, "a correct guess ends the game"),
    ],
)
def test_judge_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.judge(lambda secret, guess, guesses: judge(secret, guess, guesses, **mistake))


def search(env, seed, *, step_past=True, count_from=0, linear=False):
    low, high = 0, 100
    env.reset(seed=seed)
    guesses = count_from
    guess = -1
    while True:
        if linear:
            guess += 1
        else:
            guess = (low + high) // 2
        obs, _, terminated, truncated, _ = env.step(guess)
        guesses += 1
        if obs["hint"] == "correct" or terminated or truncated:
            return guesses
        if obs["hint"] == "higher":
            low = guess + 1 if step_past else guess
        else:
            high = guess - 1 if step_past else guess


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"count_from": -1}, "count every step"),
        ({"linear": True}, "ended without the right number"),
        ({"step_past": False}, "the next interval starts at guess \\+ 1"),
    ],
)
def test_binary_search_mistakes_are_named(guess_env, mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.binary_search(lambda env, seed: search(env, seed, **mistake), guess_env)
