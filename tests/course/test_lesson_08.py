"""Lesson 8's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

import math

import chess
import pytest

from openenv_lab.adapters.chess_encoding import uci_to_index
from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_08 as check
from tutorials.solutions import lesson_08 as solution

VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}


def test_the_reference_answers_pass(capsys):
    check.capture_greedy(solution.capture_greedy)
    check.episodes_for_half_width(solution.episodes_for_half_width)
    assert capsys.readouterr().out.splitlines() == ["Exercise 1: correct", "Exercise 2: correct"]


def greedy(obs, info, *, lowest=False, as_uci=False, always_white=False, pseudo_legal=False, en_passant=True):
    board = chess.Board(info["fen"])
    moves = board.generate_pseudo_legal_moves() if pseudo_legal else board.legal_moves
    best, best_value = None, None
    for move in moves:
        target = board.piece_at(move.to_square)
        value = VALUES.get(target.piece_type, 0) if target else 0
        if en_passant and board.is_en_passant(move):
            value = 1
        better = best_value is None or (value < best_value if lowest and value else value > best_value)
        if better:
            best, best_value = move, value
    if as_uci:
        return best.uci()
    return uci_to_index(best.uci(), True if always_white else board.turn == chess.WHITE)


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"as_uci": True}, "return its action index"),
        ({"lowest": True}, "take the most valuable piece"),
        ({"always_white": True}, "depends on whose turn it is"),
        ({"pseudo_legal": True}, "the knight is pinned"),
        ({"en_passant": False}, "en passant"),
    ],
)
def test_capture_greedy_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.capture_greedy(lambda obs, info: greedy(obs, info, **mistake))


def test_a_policy_that_plays_anything_when_nothing_can_be_taken_is_named():
    def last_move_if_no_capture(obs, info):
        board = chess.Board(info["fen"])
        if not any(board.is_capture(m) for m in board.legal_moves):
            return uci_to_index(list(board.legal_moves)[-1].uci(), board.turn == chess.WHITE)
        return solution.capture_greedy(obs, info)

    with pytest.raises(NotYetRight, match="then play the first legal move"):
        check.capture_greedy(last_move_if_no_capture)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda std, hw: math.ceil(1.96 * std / hw), "square root of n"),
        (lambda std, hw: max(1, math.floor((1.96 * std / hw) ** 2)), "round up"),
        (lambda std, hw: (1.96 * std / hw) ** 2, "episodes come whole"),
        (lambda std, hw: max(1, math.ceil((std / hw) ** 2)), "1.96 standard errors"),
        (lambda std, hw: math.ceil((1.96 * std / hw) ** 2), "it takes one episode"),
    ],
)
def test_episodes_for_half_width_mistakes_are_named(answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.episodes_for_half_width(answer)
