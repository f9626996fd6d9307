"""Lesson 4: your own environment."""

from __future__ import annotations


def judge(secret: int, guess: int, guesses: int) -> tuple[str, float, bool]:
    if guess == secret:
        return "correct", 10.0, True
    hint = "higher" if secret > guess else "lower"
    return hint, -1.0, guesses >= 10


def binary_search(env, seed: int) -> int:
    low, high = 0, 100
    env.reset(seed=seed)
    guesses = 0
    while True:
        guess = (low + high) // 2
        obs, _, terminated, truncated, _ = env.step(guess)
        guesses += 1
        if obs["hint"] == "correct" or terminated or truncated:
            return guesses
        if obs["hint"] == "higher":
            low = guess + 1
        else:
            high = guess - 1
