"""Checks for lesson 5, rewards outside the environment (``tutorials/05_bring_your_own_reward.ipynb``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from ._exercise import Exercise, WatchedEnv

__all__ = ["capture_bonus", "material_balance"]

#: The lesson's piece values, by FEN letter (kings count nothing: both sides always have one).
VALUES = {"p": 1, "n": 3, "b": 3, "r": 5, "q": 9, "k": 0}

BALANCE_POSITIONS = (
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "4k3/8/8/8/8/8/8/3QK3 w - - 0 1",
    "4k3/8/8/8/8/8/8/R1N1KB2 w - - 0 1",
    "rnb1k3/pppp4/8/8/8/8/PP6/4K3 b - - 0 1",
)


def _material(fen: str, colour: str, values: dict[str, int] = VALUES) -> int:
    """``colour``'s material minus the other side's, read from the FEN's letters (capitals are white)."""
    white = black = 0
    for char in fen.split()[0]:
        if char.lower() in values:
            if char.isupper():
                white += values[char.lower()]
            else:
                black += values[char]
    return white - black if colour == "white" else black - white


def material_balance(answer: Callable[[str, str], Any]) -> None:
    """Exercise 1: ``answer(fen, colour)`` is ``colour``'s material minus the other side's."""
    exercise = Exercise(1, "material_balance")
    for fen in BALANCE_POSITIONS:
        for colour in ("white", "black"):
            expected = _material(fen, colour)
            got = exercise.run(answer, fen, colour)
            if got == expected:
                continue
            call = f"material_balance({fen!r}, {colour!r})"
            if expected and got == -expected:
                exercise.fail(
                    f"{call} returned {got}, the right size with the wrong sign: it is {colour}'s material "
                    f"minus the other side's (in a FEN, capital letters are white's pieces)."
                )
            if got == _material(fen, colour, {**VALUES, "p": 0}):
                exercise.fail(f"{call} returned {got}: the pawns are missing; each pawn counts 1.")
            exercise.fail(
                f"{call} returned {got!r}, but it is {expected}: pawns 1, knights and bishops 3, rooks 5, "
                "queens 9, kings nothing."
            )
    exercise.passed()


#: The check's game (the agent plays both sides): an illegal move (the environment pays -0.1 and the
#: position stays), the white rook takes the black queen, the black king takes the rook (a draw: kings only).
GAME_FEN = "3qk3/8/8/8/8/8/8/3RK3 w - - 0 1"
GAME_MOVES = ("e1e3", "d1d8", "e8d8")
SCALE = 0.02


def capture_bonus(
    answer: Callable[..., gym.Wrapper], *, make_env: Callable[[], gym.Env] | None = None
) -> None:
    """Exercise 2: ``answer(env, scale)`` is a wrapper adding ``scale`` times the agent's material change.

    The check plays its own game on a chess environment with ``opponent="none"`` (``make_env`` makes it;
    by default the embedded server's), with the agent white for the whole game.
    """
    exercise = Exercise(2, "CaptureBonus")
    base = (make_env or (lambda: gym.make("openenv/chess", opponent="none", agent_color="white")))()
    try:
        watched = WatchedEnv(base, exercise)  # below the answer's wrapper: sees the environment's rewards
        env = exercise.run(answer, watched, SCALE)
        _, info = env.reset(seed=0, options={"fen": GAME_FEN})
        before = info["fen"]
        adapter = base.unwrapped.adapter
        for number, move in enumerate(GAME_MOVES, start=1):
            _, reward, *_, info = env.step(adapter.move_to_action(move))
            env_reward = watched.rewards[-1]
            change = _material(info["fen"], "white") - _material(before, "white")
            expected = env_reward + SCALE * change
            if abs(reward - expected) > 1e-9:
                exercise.fail(_capture_hint(number, move, reward, expected, env_reward, change, info, before))
            before = info["fen"]
    finally:
        base.close()
    exercise.passed()


def _capture_hint(
    number: int,
    move: str,
    reward: float,
    expected: float,
    env_reward: float,
    change: int,
    info: dict[str, Any],
    before: str,
) -> str:
    said = (
        f"step {number} ({move}) should pay {expected:+.3f}: the environment's {env_reward:+.3f} plus "
        f"{SCALE} x {change:+d} (white's material change: the agent is white all game). "
        f"It paid {reward:+.3f}."
    )
    if abs(reward - SCALE * change) < 1e-9 and env_reward:
        return f"{said} Keep the environment's own reward in the sum: add the bonus to it."
    if abs(reward - (env_reward + SCALE * _material(info["fen"], "white"))) < 1e-9:
        return f"{said} Add the change of the balance over the step (after minus before), not the balance."
    colour = info.get("agent_color", "white")
    if colour != "white":
        theirs = _material(info["fen"], colour) - _material(before, "white")
        if abs(reward - (env_reward + SCALE * theirs)) < 1e-9:
            return (
                f"{said} The step's info says {colour!r}, the side to move; read the agent's colour once, "
                "at reset, and keep it for the episode."
            )
    if abs(reward - (env_reward + 0.01 * change)) < 1e-9:
        return f"{said} Use the wrapper's `scale`, not a fixed 0.01."
    return said
