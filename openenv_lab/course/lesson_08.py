"""Checks for lesson 8, evaluation and report cards (``tutorials/08_evaluation_and_report_cards.ipynb``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import chess
import numpy as np

from ..adapters.chess_encoding import board_planes, legal_mask, uci_to_index
from ._exercise import Exercise

__all__ = ["capture_greedy", "episodes_for_half_width"]

VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}

#: Positions the capture exercise is tried on, and what each one catches.
CAPTURE_POSITIONS = {
    # the queen (d1d5) or the rook (g1f3): the most valuable
    "4k3/8/8/3q4/8/5r2/8/3RK1N1 w - - 0 1": "value",
    # the same with black to move: the action index depends on whose turn it is
    "3rk1n1/8/5R2/8/3Q4/8/8/4K3 b - - 0 1": "turn",
    # en passant: the captured pawn is not on the square the move goes to
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2": "en passant",
    # the knight that could take the queen is pinned: only the king may move
    "4r1k1/8/8/8/3q4/8/4N3/4K3 w - - 0 1": "legal",
    # nothing to capture: the first legal move
    chess.STARTING_FEN: "no capture",
}


def _value(board: chess.Board, move: chess.Move) -> int:
    if board.is_en_passant(move):
        return VALUES[chess.PAWN]
    target = board.piece_at(move.to_square)
    return VALUES.get(target.piece_type, 0) if target else 0


def _observation(fen: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What the chess env gives for ``fen``: the planes and the mask, and an info with the FEN and moves."""
    board = chess.Board(fen)
    legal = [move.uci() for move in board.legal_moves]
    white = board.turn == chess.WHITE
    obs = {"board": board_planes(fen), "action_mask": legal_mask(legal, white)}
    return obs, {"fen": fen, "legal_moves": legal}


def capture_greedy(answer: Callable[[Any, dict[str, Any]], Any]) -> None:
    """Exercise 1: ``answer(obs, info)`` is the action index of the legal move that captures the most
    valuable piece (the first such in ``board.legal_moves``), or of the first legal move if none does."""
    exercise = Exercise(1, "capture_greedy")
    for fen, catches in CAPTURE_POSITIONS.items():
        board = chess.Board(fen)
        white = board.turn == chess.WHITE
        moves = list(board.legal_moves)
        best = max(moves, key=lambda m: _value(board, m))  # max keeps the first of equals
        expected = uci_to_index(best.uci(), white)
        obs, info = _observation(fen)
        got = exercise.run(answer, obs, dict(info))
        if isinstance(got, str):
            exercise.fail(
                f"for {fen} it returned the move {got!r}; return its action index: "
                "`uci_to_index(move.uci(), board.turn == chess.WHITE)`."
            )
        exercise.require(
            isinstance(got, (int, np.integer)) and not isinstance(got, bool),
            f"for {fen} it returned {got!r}; return an action index (an int).",
        )
        got = int(got)
        if got == expected:
            continue
        if not 0 <= got < obs["action_mask"].size or not obs["action_mask"][got]:
            if catches == "turn" and uci_to_index(best.uci(), True) == got:
                exercise.fail(
                    f"for {fen} (black to move) it returned the index of {best.uci()} as white would play "
                    "it. The index depends on whose turn it is: "
                    "`uci_to_index(uci, board.turn == chess.WHITE)`."
                )
            if catches == "legal":
                exercise.fail(
                    f"for {fen} it returned an action that is not legal (the knight is pinned to its king). "
                    "Choose among `board.legal_moves` (or the mask), not every move a piece could make."
                )
            exercise.fail(f"for {fen} it returned action {got}, which the mask says is not legal.")
        chosen = next((m for m in moves if uci_to_index(m.uci(), white) == got), None)
        if catches == "en passant":
            exercise.fail(
                f"for {fen} it returned {chosen}, but e5d6 takes a pawn en passant: the pawn taken is not on "
                "the square the move goes to (`board.is_en_passant(move)`), and it is worth 1."
            )
        if catches == "no capture":
            exercise.fail(
                f"for {fen} nothing can be captured, and it returned {chosen}: then play the first legal "
                f"move, {best.uci()} (`next(iter(board.legal_moves))`)."
            )
        exercise.fail(
            f"for {fen} it returned {chosen}, taking a piece worth {_value(board, chosen) if chosen else 0}, "
            f"but {best.uci()} takes one worth {_value(board, best)}: take the most valuable piece."
        )
    exercise.passed()


#: (standard deviation, half-width) pairs the sample-size exercise is tried on.
HALF_WIDTH_CASES = ((1.0, 0.1), (0.4, 0.05), (3.0, 0.5), (2.0, 2.0), (0.0, 0.1))


def episodes_for_half_width(answer: Callable[[float, float], Any]) -> None:
    """Exercise 2: ``answer(std, half_width)`` is the fewest episodes whose 95% interval of the mean is
    no wider than ``half_width`` each side: ``1.96 * std / sqrt(n) <= half_width``, at least one."""
    exercise = Exercise(2, "episodes_for_half_width")
    for std, half_width in HALF_WIDTH_CASES:
        exact = (1.96 * std / half_width) ** 2
        expected = max(1, math.ceil(exact))
        got = exercise.run(answer, std, half_width)
        call = f"episodes_for_half_width({std}, {half_width})"
        if isinstance(got, float) and not got.is_integer():
            exercise.fail(f"{call} returned {got}; episodes come whole: round up, `math.ceil`.")
        exercise.require(
            isinstance(got, (int, float, np.integer)) and not isinstance(got, bool),
            f"{call} returned {got!r}; return a number of episodes.",
        )
        if got == expected:
            continue
        if got in (math.floor(exact), round(exact)) and got < exact:
            exercise.fail(
                f"{call} returned {got}, which leaves the interval a bit wider than {half_width}: round up."
            )
        if got == max(1, math.ceil(1.96 * std / half_width)):
            exercise.fail(
                f"{call} returned {got}: the interval shrinks with the square root of n, so n grows with the "
                "square of 1.96 x std / half_width."
            )
        if got == max(1, math.ceil((std / half_width) ** 2)):
            exercise.fail(f"{call} returned {got}: a 95% interval is 1.96 standard errors each side.")
        if expected == 1 and got == 0:
            exercise.fail(f"{call} returned 0: even with no spread, it takes one episode to have a mean.")
        exercise.fail(f"{call} returned {got!r}, but it is {expected}: ceil((1.96 x std / half_width) ** 2).")
    exercise.passed()
