"""The 8x8x73 move encoding and the board planes, checked against python-chess on many positions."""

from __future__ import annotations

import random

import chess
import numpy as np
import pytest

from openenv_lab.adapters.chess_encoding import (
    BOARD_SHAPE,
    NUM_ACTIONS,
    board_planes,
    index_to_uci,
    legal_mask,
    uci_to_index,
)


def random_positions(count: int, seed: int = 0) -> list[chess.Board]:
    """Positions from random games, including promotions, castling and en passant along the way."""
    rng = random.Random(seed)
    boards = []
    while len(boards) < count:
        board = chess.Board()
        for _ in range(rng.randrange(0, 160)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if not board.is_game_over():
            boards.append(board)
    return boards


PROMOTION_FEN = "8/P1k5/8/8/8/8/2K3p1/7N w - - 0 1"  # white and black pawns one step from promoting


@pytest.mark.parametrize(
    "board",
    [*random_positions(150), chess.Board(PROMOTION_FEN), chess.Board(PROMOTION_FEN.replace(" w ", " b "))],
)
def test_legal_moves_map_one_to_one_and_back(board):
    white = board.turn == chess.WHITE
    legal = {move.uci() for move in board.legal_moves}
    indices = {uci_to_index(uci, white) for uci in legal}
    assert len(indices) == len(legal), "two legal moves share an action index"
    assert all(0 <= i < NUM_ACTIONS for i in indices)
    for uci in legal:
        assert index_to_uci(uci_to_index(uci, white), white, legal) == uci
    mask = legal_mask(sorted(legal), white)
    assert mask.dtype == np.int8 and mask.shape == (NUM_ACTIONS,)
    assert set(np.flatnonzero(mask)) == indices


def test_promotions_queen_is_the_plain_move_underpromotions_have_planes():
    board = chess.Board(PROMOTION_FEN)
    legal = {m.uci() for m in board.legal_moves}
    assert {"a7a8q", "a7a8n", "a7a8b", "a7a8r"} <= legal
    queen = uci_to_index("a7a8q", True)
    assert queen == uci_to_index("a7a8", True)
    assert queen % 73 < 56  # a queen-like plane
    assert {uci_to_index(u, True) % 73 for u in ("a7a8n", "a7a8b", "a7a8r")} == {67, 68, 69}
    assert index_to_uci(queen, True, legal) == "a7a8q"
    assert index_to_uci(queen, True, frozenset()) == "a7a8"  # not legal: no promotion guessed
    assert index_to_uci(queen, True, sorted(legal)) == "a7a8q"  # any collection of moves will do


@pytest.mark.parametrize("white", [True, False])
def test_a_queen_promotion_is_added_exactly_to_the_moves_a_pawn_could_promote_with(white):
    last, before = (8, 7) if white else (1, 2)
    for index in range(NUM_ACTIONS):
        uci = index_to_uci(index, white)
        if uci == "0000" or len(uci) == 5:
            continue
        move = chess.Move.from_uci(uci)
        pawn_promotion = (
            chess.square_rank(move.from_square) + 1 == before
            and chess.square_rank(move.to_square) + 1 == last
            and abs(chess.square_file(move.from_square) - chess.square_file(move.to_square)) <= 1
        )
        expected = uci + "q" if pawn_promotion else uci
        assert index_to_uci(index, white, [uci + "q"]) == expected, uci


def test_black_moves_are_mirrored():
    assert uci_to_index("e2e4", True) == uci_to_index("e7e5", False) == 877
    assert uci_to_index("g1f3", True) == uci_to_index("g8f6", False)
    assert index_to_uci(877, False) == "e7e5"


def test_off_board_indices_decode_to_the_null_move():
    # From a1 (square 0) going west (direction 6) leaves the board.
    assert index_to_uci(0 * 73 + 6 * 7, True) == "0000"
    # On-board: 1456 queen-like + 336 knight + 66 under-promotion moves.
    assert sum(index_to_uci(i, True) != "0000" for i in range(NUM_ACTIONS)) == 1456 + 336 + 66


def test_unknown_move_is_a_value_error():
    with pytest.raises(ValueError, match="encoding can represent"):
        uci_to_index("a1a1", True)


@pytest.mark.parametrize("board", random_positions(40, seed=1))
def test_board_planes_match_python_chess(board):
    planes = board_planes(board.fen())
    assert planes.shape == BOARD_SHAPE and planes.dtype == np.float32
    mover = board.turn
    for square, piece in board.piece_map().items():
        rank, file = chess.square_rank(square), chess.square_file(square)
        if mover == chess.BLACK:
            rank = 7 - rank
        plane = piece.piece_type - 1 + (0 if piece.color == mover else 6)
        assert planes[plane, rank, file] == 1.0
    assert planes[:12].sum() == len(board.piece_map())
    assert planes[12].all() == board.has_kingside_castling_rights(mover)
    assert planes[13].all() == board.has_queenside_castling_rights(mover)
    assert planes[14].all() == board.has_kingside_castling_rights(not mover)
    assert planes[15].all() == board.has_queenside_castling_rights(not mover)
    # python-chess writes an en passant square into the FEN only when the capture is legal.
    assert planes[16].sum() == (1 if board.has_legal_en_passant() else 0)
    assert planes[17].all() == (mover == chess.WHITE)
    assert planes[18, 0, 0] == pytest.approx(min(board.halfmove_clock, 100) / 100)


def test_initial_position_looks_the_same_from_both_sides():
    white_view = board_planes(chess.STARTING_FEN)
    black_view = board_planes(chess.STARTING_FEN.replace(" w ", " b "))
    np.testing.assert_array_equal(white_view[:16], black_view[:16])
    assert white_view[17].all() and not black_view[17].any()


def test_en_passant_square_is_in_the_movers_frame():
    board = chess.Board()
    for uci in ("e2e4", "a7a6", "e4e5", "d7d5"):
        board.push_uci(uci)
    planes = board_planes(board.fen())  # white to move, target d6
    assert planes[16, 5, 3] == 1.0 and planes[16].sum() == 1
    board = chess.Board()
    for uci in ("a2a3", "e7e5", "a3a4", "e5e4", "d2d4"):
        board.push_uci(uci)
    planes = board_planes(board.fen())  # black to move, target d3: rank 6 from black's side
    assert planes[16, 5, 3] == 1.0 and planes[16].sum() == 1
