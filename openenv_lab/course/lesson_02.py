"""Checks for lesson 2, spaces and adapters (``tutorials/02_spaces_and_adapters.ipynb``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import chess
import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..adapters.schema import field_for
from ._exercise import Exercise

__all__ = ["count_pieces", "legal_moves_from_mask", "space_kind"]

#: Positions the mask exercise is tried on (FEN, with both sides played by the agent): the start, a
#: position with promotions (four pieces each) and castling on both wings, and black to move.
MASK_POSITIONS = (
    chess.STARTING_FEN,
    "r3k2r/1P6/8/8/8/8/6p1/R3K2R w KQkq - 0 1",
    "r3k2r/1P6/8/8/8/8/6p1/R3K2R b KQkq - 0 1",
)
#: Positions the piece-count exercise is tried on: the start, unequal sides, and the same with black to
#: move (the planes are from the mover's side).
PIECE_POSITIONS = (
    chess.STARTING_FEN,
    "4k3/8/8/8/8/8/PPPP4/4K3 w - - 0 1",
    "4k3/8/8/8/8/8/PPPP4/4K3 b - - 0 1",
    "r3k3/pp6/8/8/8/8/5PPP/3QK2R b K - 0 1",
)


def _position(env: gym.Env, fen: str) -> tuple[Any, dict[str, Any]]:
    colour = "white" if chess.Board(fen).turn == chess.WHITE else "black"
    return env.reset(seed=0, options={"fen": fen, "agent_color": colour, "opponent": "none"})


def legal_moves_from_mask(answer: Callable[[Any, Any], Any], env: gym.Env) -> None:
    """Exercise 1: ``answer(adapter, obs)`` is the set of UCI moves the mask allows.

    ``env`` is a chess environment; the check plays positions of its own on it (``opponent="none"``).
    """
    exercise = Exercise(1, "legal_moves_from_mask")
    adapter = env.unwrapped.adapter
    for fen in MASK_POSITIONS:
        obs, _ = _position(env, fen)
        expected = {move.uci() for move in chess.Board(fen).legal_moves}  # the rules, not the adapter
        got = exercise.run(answer, adapter, obs)
        exercise.require(
            isinstance(got, Iterable) and not isinstance(got, (str, bytes, dict)),
            f"it returned {got!r}; return a set of UCI moves such as {{'e2e4', 'g1f3'}}.",
        )
        got = set(got)
        if got and all(isinstance(move, (int, np.integer)) for move in got):
            exercise.fail(
                "it returned action indices; turn each into UCI text with `adapter.action_to_move(action)`."
            )
        if len(got) > len(expected) and expected <= got:
            exercise.fail(
                f"it returned {len(got)} moves where {len(expected)} are legal: keep only the actions whose "
                "mask entry is True (`np.flatnonzero(obs['action_mask'])`)."
            )
        exercise.require(
            got == expected,
            f"in {fen} the legal moves are {sorted(expected)}; the answer missed {sorted(expected - got)} "
            f"and added {sorted(got - expected)}.",
        )
    exercise.passed()


def _counts(fen: str) -> tuple[int, int]:
    """(pieces of the side to move, pieces of the other side), counted from the FEN's letters."""
    placement, turn = fen.split()[:2]
    white = sum(char.isupper() for char in placement)
    black = sum(char.islower() for char in placement)
    return (white, black) if turn == "w" else (black, white)


def count_pieces(answer: Callable[[np.ndarray], Any], env: gym.Env) -> None:
    """Exercise 2: ``answer(board)`` is ``(mine, theirs)`` from the (19, 8, 8) planes."""
    exercise = Exercise(2, "count_pieces")
    for fen in PIECE_POSITIONS:
        obs, _ = _position(env, fen)
        mine, theirs = expected = _counts(fen)
        got = exercise.run(answer, obs["board"].copy())
        exercise.require(
            isinstance(got, tuple) and len(got) == 2,
            f"it returned {got!r}; return a pair of integers `(mine, theirs)`.",
        )
        got = (int(got[0]), int(got[1]))
        if got == expected:
            continue
        if got == (theirs, mine):
            exercise.fail(
                f"in {fen} it returned {got}, the two sides swapped: planes 0-5 hold the pieces of the side "
                "to move, planes 6-11 the opponent's (whoever is white)."
            )
        if got[0] > mine or got[1] > theirs:
            exercise.fail(
                f"in {fen} it returned {got}, more pieces than there are ({expected}): only planes 0-11 are "
                "pieces; 12-18 hold castling rights, en passant, whose move and the fifty-move counter."
            )
        exercise.fail(
            f"in {fen} the side to move has {mine} pieces and the other side {theirs}, but it returned "
            f"{got}: add up all six planes of each side (pawn, knight, bishop, rook, queen, king)."
        )
    exercise.passed()


def _kind(space: spaces.Space[Any]) -> str:
    """The name of the gymnasium space class a space is (``UnicodeText`` is a ``Text``)."""
    for cls in type(space).__mro__:
        if cls.__module__.startswith("gymnasium.spaces"):
            return cls.__name__
    return type(space).__name__


def space_kind(answer: Callable[[str], Any]) -> None:
    """Exercise 3: ``answer(json_type)`` names the space the generic adapter gives an unbounded field."""
    exercise = Exercise(3, "space_kind")
    hints = {
        "integer": "an integer field without bounds cannot be Discrete: how many values would it have? See "
        "what `field_for` in openenv_lab/adapters/schema.py does with an integer that lacks a bound.",
        "boolean": "a boolean is one of two values: which space holds a choice among n values?",
        "number": "which space holds real numbers (with or without bounds)?",
        "string": "which space holds text?",
    }
    for json_type, hint in hints.items():
        expected = _kind(field_for({"type": json_type}, None, {}, "field", action=False).space)
        got = exercise.run(answer, json_type)
        exercise.require(
            got == expected,
            f"for {json_type!r} it returned {got!r}, which is not the space the generic adapter uses: {hint}",
        )
    exercise.passed()
