"""Checks for lesson 4, writing and serving your own environment
(``tutorials/04_your_own_environment.ipynb``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from ._exercise import Exercise, WatchedEnv

__all__ = ["GUESS_LIMIT", "binary_search", "judge"]

#: Guesses per game in the lesson's number-guessing environment.
GUESS_LIMIT = 10
#: The most guesses a binary search over 0..100 needs: 2**7 > 101.
BINARY_SEARCH_GUESSES = 7
#: Seeds whose secret is at an end of the range (100 and 0, by the lesson's server's rule
#: ``random.Random(seed).randint(0, 100)``), where a search that does not step past its guess stalls.
EDGE_SEEDS = (139, 170)


def _rule(secret: int, guess: int, guesses: int) -> tuple[str, float, bool]:
    """The lesson's rules, as the exercise text states them."""
    if guess == secret:
        return "correct", 10.0, True
    return ("higher" if secret > guess else "lower"), -1.0, guesses >= GUESS_LIMIT


CASES = [
    (50, 30, 1),
    (50, 70, 2),
    (50, 50, 3),
    (0, 0, 1),
    (100, 99, 4),
    (7, 8, 9),
    (50, 10, GUESS_LIMIT),
    (50, 90, GUESS_LIMIT),
    (42, 42, GUESS_LIMIT),
]


def judge(answer: Callable[[int, int, int], Any]) -> None:
    """Exercise 1: ``answer(secret, guess, guesses)`` is ``(hint, reward, done)``."""
    exercise = Exercise(1, "judge")
    for secret, guess, guesses in CASES:
        hint, reward, done = _rule(secret, guess, guesses)
        got = exercise.run(answer, secret, guess, guesses)
        exercise.require(
            isinstance(got, tuple) and len(got) == 3,
            f"it returned {got!r}; return a triple `(hint, reward, done)`.",
        )
        call = f"judge({secret}, {guess}, {guesses})"
        if got[0] != hint:
            if {got[0], hint} == {"higher", "lower"}:
                exercise.fail(
                    f'{call} said {got[0]!r}. The hint tells the player where the secret is: "higher" when '
                    "the secret is above the guess."
                )
            exercise.fail(f"{call} gave the hint {got[0]!r}; the rules say {hint!r}.")
        if float(got[1]) != reward:
            exercise.fail(
                f"{call} paid {got[1]!r}; the rules pay {reward:+g}: +10 for the right number, -1 for any "
                "other guess (the last one included)."
            )
        if bool(got[2]) != done:
            if hint == "correct":
                exercise.fail(f"{call}: a correct guess ends the game, so done must be True.")
            if guesses == GUESS_LIMIT:
                exercise.fail(
                    f"{call}: the {GUESS_LIMIT}th guess is the last one, so done must be True (`guesses` "
                    "counts this guess)."
                )
            exercise.fail(f"{call}: after {guesses} guesses the game goes on, so done must be False.")
    exercise.passed()


def binary_search(
    answer: Callable[[gym.Env, int], Any], env: gym.Env, seeds: Sequence[int] = (*range(10), *EDGE_SEEDS)
) -> list[int]:
    """Exercise 2: ``answer(env, seed)`` wins a game by binary search and returns its number of guesses.

    Checked on each seed: the game was won, in at most 7 guesses, and the count returned is the number of
    steps the watcher saw. Returns the counts.
    """
    exercise = Exercise(2, "binary_search")
    counts = []
    for seed in seeds:
        watched = WatchedEnv(env, exercise)
        got = exercise.run(answer, watched, seed)
        exercise.require(
            seed in watched.reset_seeds, f"it never reset with the seed: `env.reset(seed={seed})`."
        )
        last_hint = (
            watched.last_observation.get("hint") if isinstance(watched.last_observation, dict) else None
        )
        exercise.require(
            last_hint == "correct",
            f"with seed {seed} the game ended without the right number after {watched.steps} guesses (last "
            f'hint {last_hint!r}). After "higher" the secret is above the guess: the next interval starts '
            'at guess + 1 (and ends at guess - 1 after "lower"), or the search can stall on one number.',
        )
        exercise.require(
            got == watched.steps,
            f"with seed {seed} it returned {got!r}, but it made {watched.steps} guesses: count every step, "
            "the correct guess included.",
        )
        exercise.require(
            watched.steps <= BINARY_SEARCH_GUESSES,
            f"with seed {seed} it took {watched.steps} guesses; halving 0..100 each time needs at most "
            f"{BINARY_SEARCH_GUESSES}. Guess the middle of the numbers still possible.",
        )
        counts.append(int(got))
    exercise.passed(f"guesses per game: {counts}")
    return counts
