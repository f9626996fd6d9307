"""Chess positions and moves as arrays: the AlphaZero 8x8x73 move encoding and board planes.

Everything is seen from the side to move ("the mover"): when black is to move, ranks are mirrored, so
a policy learns one game instead of two. Moves are encoded as ``from_square * 73 + plane`` where
``from_square`` is 0..63 (a1=0, b1=1, ..., h8=63, seen from the mover's side) and the 73 planes are:

- 0..55: queen-like moves, ``direction * 7 + (distance - 1)`` with directions N, NE, E, SE, S, SW, W, NW.
  A pawn reaching the last rank this way promotes to a queen;
- 56..63: knight moves, in the order (1,2), (2,1), (2,-1), (1,-2), (-1,-2), (-2,-1), (-2,1), (-1,2) as
  (file delta, rank delta);
- 64..72: under-promotions, ``64 + 3 * direction + piece`` with direction capture-left, straight,
  capture-right (file delta -1, 0, +1) and piece knight, bishop, rook.

4672 = 64 * 73 indices in all; most are illegal in any given position (use the action mask). Indices whose
move would leave the board have no UCI form: they decode to ``"0000"`` (a null move, illegal).

Board planes (19, 8, 8), float32 in [0, 1], indexed ``[plane, rank, file]`` seen from the mover's side:
0-5 the mover's pawns, knights, bishops, rooks, queens, king; 6-11 the opponent's; 12-15 castling rights
(mover king side, mover queen side, opponent king side, opponent queen side, all-ones planes); 16 the en
passant target square; 17 all ones when white is to move; 18 the half-move clock / 100 (fifty-move rule).

This module is pure computation (no python-chess on the hot path): FEN text in, numpy arrays out.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

import numpy as np

__all__ = [
    "BOARD_SHAPE",
    "NUM_ACTIONS",
    "board_planes",
    "index_to_uci",
    "legal_mask",
    "uci_to_index",
]

NUM_ACTIONS = 64 * 73
BOARD_SHAPE = (19, 8, 8)

_DIRECTIONS = ((0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1))
_KNIGHT = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
_UNDERPROMOTION_PIECES = "nbr"
_FILES = "abcdefgh"


def _square_name(file: int, rank: int) -> str:
    return f"{_FILES[file]}{rank + 1}"


def _build_tables() -> tuple[list[list[str]], list[dict[str, int]], frozenset[int]]:
    """Index -> UCI and UCI -> index, for white to move (0) and black to move (1); and the indices whose
    move may be a pawn's queen promotion (the same for both: indices are seen from the mover's side)."""
    to_uci: list[list[str]] = [["0000"] * NUM_ACTIONS, ["0000"] * NUM_ACTIONS]
    to_index: list[dict[str, int]] = [{}, {}]
    promoting: set[int] = set()
    for colour in (0, 1):
        for square in range(64):
            file, rank = square % 8, square // 8
            targets: list[tuple[int, int, int, str]] = []  # (plane, file delta, rank delta, promotion)
            for d, (dx, dy) in enumerate(_DIRECTIONS):
                for distance in range(1, 8):
                    targets.append((d * 7 + distance - 1, dx * distance, dy * distance, ""))
            for k, (dx, dy) in enumerate(_KNIGHT):
                targets.append((56 + k, dx, dy, ""))
            for d, dx in enumerate((-1, 0, 1)):
                for p, piece in enumerate(_UNDERPROMOTION_PIECES):
                    targets.append((64 + 3 * d + p, dx, 1, piece))
            for plane, dx, dy, promotion in targets:
                to_file, to_rank = file + dx, rank + dy
                if not (0 <= to_file < 8 and 0 <= to_rank < 8):
                    continue
                if promotion and rank != 6:
                    continue  # under-promotions start on the mover's seventh rank
                # Un-mirror the ranks to get real squares when black is to move.
                real_from = rank if colour == 0 else 7 - rank
                real_to = to_rank if colour == 0 else 7 - to_rank
                uci = _square_name(file, real_from) + _square_name(to_file, real_to) + promotion
                index = square * 73 + plane
                to_uci[colour][index] = uci
                to_index[colour][uci] = index
                if not promotion and rank == 6 and to_rank == 7 and abs(dx) <= 1 and plane < 56:
                    to_index[colour][uci + "q"] = index  # a pawn's queen move: queen promotion
                    promoting.add(index)
    return to_uci, to_index, frozenset(promoting)


_TO_UCI, _TO_INDEX, _PROMOTING = _build_tables()


def uci_to_index(uci: str, white_to_move: bool) -> int:
    """The action index of a UCI move, for the given side to move.

    Example:
        >>> uci_to_index("e2e4", white_to_move=True)
        877
        >>> uci_to_index("e7e5", white_to_move=False)  # the same move from black's side
        877
    """
    try:
        return _TO_INDEX[0 if white_to_move else 1][uci]
    except KeyError:
        raise ValueError(f"{uci!r} is not a chess move that the 8x8x73 encoding can represent") from None


def index_to_uci(index: int, white_to_move: bool, legal_moves: Collection[str] = ()) -> str:
    """The UCI move of an action index; queen promotion is added when ``uci + "q"`` is in ``legal_moves``
    (looked at only for the moves from the seventh rank to the eighth that a pawn could make).

    Indices that leave the board give ``"0000"``.

    Example:
        >>> index_to_uci(877, white_to_move=True)
        'e2e4'
        >>> index_to_uci(uci_to_index("a7a8", True), True, legal_moves=["a7a8q", "a7a8n"])
        'a7a8q'
    """
    uci = _TO_UCI[0 if white_to_move else 1][index]
    if index in _PROMOTING and uci + "q" in legal_moves:
        return uci + "q"
    return uci


def legal_mask(legal_moves: list[str], white_to_move: bool) -> np.ndarray:
    """An ``int8`` mask over the 4672 actions, 1 where the move is legal."""
    table = _TO_INDEX[0 if white_to_move else 1]
    mask = bytearray(NUM_ACTIONS)  # filling bytes, then one view, is the cheapest way to a fresh array
    for uci in legal_moves:
        mask[table[uci]] = 1
    return np.frombuffer(mask, dtype=np.int8)


# Piece letter -> plane: the mover's pieces are planes 0-5, the opponent's 6-11 (index: white to move).
_PLANE_OF = (
    {c: i for i, c in enumerate("pnbrqk")} | {c: i + 6 for i, c in enumerate("PNBRQK")},
    {c: i for i, c in enumerate("PNBRQK")} | {c: i + 6 for i, c in enumerate("pnbrqk")},
)


_ONES = b"\x01" * 64


@functools.lru_cache(maxsize=1 << 16)
def _row_offsets(text: str, row: int, white_to_move: bool) -> tuple[int, ...]:
    """Flat indices into the (19, 8, 8) planes of the pieces of one FEN row (row 0 = rank 8).

    Cached: most rows of a position are unchanged from the previous position, so decoding a position
    is mostly eight cache hits.
    """
    rank = 7 - row if white_to_move else row
    plane_of = _PLANE_OF[white_to_move]
    offsets = []
    file = 0
    for char in text:
        if char.isdigit():
            file += int(char)
        else:
            offsets.append(plane_of[char] * 64 + rank * 8 + file)
            file += 1
    if file != 8:
        raise ValueError(f"Invalid FEN row {text!r}")
    return tuple(offsets)


def board_planes(fen: str) -> np.ndarray:
    """The (19, 8, 8) float32 planes of a FEN position, seen from the side to move."""
    fields = fen.split()
    white_to_move = len(fields) < 2 or fields[1] == "w"
    castling = fields[2] if len(fields) > 2 else "-"
    en_passant = fields[3] if len(fields) > 3 else "-"
    halfmove = int(fields[4]) if len(fields) > 4 else 0

    rows = fields[0].split("/")
    if len(rows) != 8:
        raise ValueError(f"Invalid FEN placement {fields[0]!r}")
    # Fill bytes, then convert once: much cheaper than many small numpy assignments.
    planes = bytearray(19 * 64)
    for row, text in enumerate(rows):
        for offset in _row_offsets(text, row, white_to_move):
            planes[offset] = 1
    own_k, own_q, their_k, their_q = "KQkq" if white_to_move else "kqKQ"
    for index, flag in zip((12, 13, 14, 15), (own_k, own_q, their_k, their_q), strict=True):
        if flag in castling:
            planes[index * 64 : (index + 1) * 64] = _ONES
    if en_passant != "-":
        file = _FILES.index(en_passant[0])
        rank = int(en_passant[1]) - 1
        planes[16 * 64 + (rank if white_to_move else 7 - rank) * 8 + file] = 1
    if white_to_move:
        planes[17 * 64 : 18 * 64] = _ONES
    array = np.frombuffer(planes, dtype=np.uint8).astype(np.float32).reshape(BOARD_SHAPE)
    array[18] = min(halfmove, 100) / 100.0
    return array
