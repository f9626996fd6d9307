"""The chess adapter fed the replies of a server that says nothing about why games end (the official one)."""

from __future__ import annotations

import chess
import pytest

from openenv_lab.adapters import ChessAdapter
from openenv_lab.client import ProtocolError, StepResult


def reply(board: chess.Board, *, done: bool = False, reward: float = 0.0) -> StepResult:
    return StepResult(
        observation={
            "fen": board.fen(),
            "legal_moves": [] if done else [m.uci() for m in board.legal_moves],
            "is_check": board.is_check(),
            "result": None,
        },
        reward=reward,
        done=done,
        metadata={},
    )


def play(
    adapter: ChessAdapter, board: chess.Board, pairs: list[tuple[str, str | None]], *, done_at_end: bool
):
    """Agent move then opponent reply, as the official server reports them (after the reply)."""
    transition = adapter.decode(reply(board), None)
    for i, (agent, opponent) in enumerate(pairs):
        sent = adapter.encode_action(adapter.move_to_action(agent))
        board.push_uci(agent)
        if opponent:
            board.push_uci(opponent)
        transition = adapter.decode(reply(board, done=done_at_end and i == len(pairs) - 1), sent)
    return transition


def test_threefold_repetition_is_inferred_as_termination():
    adapter = ChessAdapter()
    shuffle = [("g1f3", "g8f6"), ("f3g1", "f6g8")] * 2
    transition = play(adapter, chess.Board(), shuffle, done_at_end=True)
    assert transition.info["end_reason"] == "threefold_repetition"
    assert transition.terminated and not transition.truncated


def test_threefold_after_the_agents_own_move_counts_that_position():
    adapter = ChessAdapter()
    # The position after white's g1f3 (black to move, knight on f3) occurs three times, and only ever
    # right after the agent's move, which the server never shows: the game ends on that move.
    moves = [("g1f3", "g8f6"), ("f3d4", "f6g8"), ("d4f3", "g8f6"), ("f3h4", "f6g8"), ("h4f3", None)]
    board = chess.Board()
    transition = play(adapter, board, moves, done_at_end=True)
    assert board.is_repetition(3)
    assert transition.info["end_reason"] == "threefold_repetition"


def test_a_done_no_rule_explains_is_a_move_limit_truncation():
    adapter = ChessAdapter()
    transition = play(adapter, chess.Board(), [("e2e4", "e7e5"), ("d2d4", "d7d5")], done_at_end=True)
    assert transition.info["end_reason"] == "move_limit"
    assert transition.truncated and not transition.terminated


def test_checkmate_is_inferred_from_the_final_position():
    adapter = ChessAdapter()
    board = chess.Board("rnbqkbnr/pppp1ppp/8/4p3/8/5P2/PPPPP1PP/RNBQKBNR w KQkq - 0 2")
    transition = play(adapter, board, [("g2g4", "d8h4")], done_at_end=True)
    assert transition.info["end_reason"] == "checkmate"
    assert transition.terminated


def test_silent_illegal_move_is_detected():
    adapter = ChessAdapter()
    board = chess.Board()
    adapter.decode(reply(board), None)
    sent = adapter.encode_action(adapter.move_to_action("e2e5"))
    transition = adapter.decode(reply(board, reward=-0.1), sent)
    assert transition.info["illegal_move"] is True
    assert transition.reward == pytest.approx(-0.1)


def test_missing_reward_is_zero_and_flagged():
    adapter = ChessAdapter()
    result = reply(chess.Board())
    result.reward = None
    transition = adapter.decode(result, None)
    assert transition.reward == 0.0 and transition.info["reward_missing"] is True


def test_an_observation_without_fen_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="fen"):
        ChessAdapter().decode(StepResult({"board": "?"}, 0.0, False, {}), None)


def test_an_unknown_end_reason_is_a_termination_not_a_cut():
    adapter = ChessAdapter()
    adapter.decode(reply(chess.Board()), None)
    result = reply(chess.Board(), done=True)
    result.metadata = {"end_reason": "resignation"}
    transition = adapter.decode(result, {"move": "e2e4"})
    assert transition.terminated and not transition.truncated
