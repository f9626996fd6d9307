"""The opponents our chess server can play against the agent, weakest first.

- ``random``: a uniformly random legal move;
- ``greedy``: mates in one when it can, otherwise takes the most valuable material it can (ties at random);
- ``minimax``: alpha-beta search ``depth`` plies deep on material and piece placement (ties at random);
- ``stockfish``: the Stockfish engine at a fixed search depth, when its binary is installed
  (``apt install stockfish``, ``brew install stockfish``, or ``OPENENV_LAB_STOCKFISH=/path/to/stockfish``);
- ``none``: no opponent; the agent plays both sides.

All randomness comes from the ``random.Random`` handed to ``choose``, which the server seeds from
``reset(seed=...)``, so a seeded episode replays move for move. Stockfish with a depth limit and one
thread is deterministic too.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Sequence
from typing import Protocol

import chess

from ..options import MAX_DEPTH, OPPONENTS

__all__ = [
    "MAX_DEPTH",
    "OPPONENTS",
    "STAND_INS",
    "STOCKFISH_MISSING",
    "Opponent",
    "find_stockfish",
    "make_opponent",
]

#: Names the official chess_env takes, played here by our own engine: moonfish (a Python engine that is
#: not a dependency of ours) by our minimax at the same depth.
STAND_INS = {"moonfish": "minimax"}
STOCKFISH_MISSING = (
    "opponent='stockfish' needs the Stockfish engine, which was not found: install it "
    "(apt install stockfish, brew install stockfish) or set OPENENV_LAB_STOCKFISH to its path"
)

_VALUES = {
    chess.PAWN: 100,
    chess.KNIGHT: 320,
    chess.BISHOP: 330,
    chess.ROOK: 500,
    chess.QUEEN: 900,
    chess.KING: 0,
}
_MATE = 100_000
_INFINITY = 10 * _MATE  # below any mate score, however deep the mate


class Opponent(Protocol):
    """Chooses the opponent's reply in a position where the opponent is to move.

    ``legal_moves``, when the caller has them already, are the position's legal moves in python-chess's
    order (``list(board.legal_moves)``): an opponent may use them instead of generating them again, and
    must choose exactly as it would from the board alone.
    """

    name: str

    def choose(
        self, board: chess.Board, rng: random.Random, legal_moves: Sequence[chess.Move] | None = None
    ) -> chess.Move: ...

    def close(self) -> None: ...


class RandomOpponent:
    name = "random"

    def choose(
        self, board: chess.Board, rng: random.Random, legal_moves: Sequence[chess.Move] | None = None
    ) -> chess.Move:
        return rng.choice(list(board.legal_moves) if legal_moves is None else legal_moves)

    def close(self) -> None:
        pass


class GreedyOpponent:
    name = "greedy"

    def choose(
        self, board: chess.Board, rng: random.Random, legal_moves: Sequence[chess.Move] | None = None
    ) -> chess.Move:
        best: list[chess.Move] = []
        best_score = -_MATE
        for move in board.legal_moves if legal_moves is None else legal_moves:
            score = _capture_value(board, move)
            board.push(move)
            if board.is_checkmate():
                score = _MATE
            board.pop()
            if score > best_score:
                best, best_score = [move], score
            elif score == best_score:
                best.append(move)
        return rng.choice(best)

    def close(self) -> None:
        pass


class MinimaxOpponent:
    """Negamax with alpha-beta pruning, captures searched first; evaluation = material + placement."""

    name = "minimax"

    def __init__(self, depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"opponent_depth must be at least 1, got {depth}")
        self.depth = depth

    def choose(
        self, board: chess.Board, rng: random.Random, legal_moves: Sequence[chess.Move] | None = None
    ) -> chess.Move:
        moves = _ordered(board, legal_moves)
        best: list[chess.Move] = []
        alpha = -_INFINITY
        for move in moves:
            board.push(move)
            # A window just below alpha keeps scores equal to the best exact, to break ties at random.
            score = -self._negamax(board, self.depth - 1, -_INFINITY, -alpha + 1)
            board.pop()
            if score > alpha:
                best, alpha = [move], score
            elif score == alpha:
                best.append(move)
        return rng.choice(best)

    def _negamax(self, board: chess.Board, depth: int, alpha: int, beta: int) -> int:
        if board.is_checkmate():
            return -_MATE - depth  # prefer quicker mates
        if board.is_stalemate() or board.is_insufficient_material():
            return 0
        if depth == 0:
            return _evaluate(board)
        for move in _ordered(board):
            board.push(move)
            score = -self._negamax(board, depth - 1, -beta, -alpha)
            board.pop()
            if score >= beta:
                return score
            alpha = max(alpha, score)
        return alpha

    def close(self) -> None:
        pass


class StockfishOpponent:
    name = "stockfish"

    def __init__(self, path: str, depth: int = 2) -> None:
        import chess.engine

        self.depth = max(1, depth)
        self._limit = chess.engine.Limit(depth=self.depth)
        self._engine = chess.engine.SimpleEngine.popen_uci(path)
        self._engine.configure({"Threads": 1})

    def choose(
        self, board: chess.Board, rng: random.Random, legal_moves: Sequence[chess.Move] | None = None
    ) -> chess.Move:
        move = self._engine.play(board, self._limit).move
        if move is None:
            raise RuntimeError("Stockfish returned no move")
        return move

    def close(self) -> None:
        self._engine.quit()


def find_stockfish() -> str | None:
    """The Stockfish binary: ``$OPENENV_LAB_STOCKFISH``, ``stockfish`` on PATH, or Debian's /usr/games."""
    explicit = os.environ.get("OPENENV_LAB_STOCKFISH")
    if explicit:
        return explicit if os.path.exists(explicit) else None
    return shutil.which("stockfish") or (
        "/usr/games/stockfish" if os.path.exists("/usr/games/stockfish") else None
    )


def make_opponent(name: str, depth: int = 2) -> Opponent | None:
    """Build the opponent called ``name`` (one of `OPPONENTS`); ``None`` for ``"none"``."""
    if name == "random":
        return RandomOpponent()
    if name == "greedy":
        return GreedyOpponent()
    if name in ("minimax", "moonfish"):
        return MinimaxOpponent(depth)
    if name == "stockfish":
        path = find_stockfish()
        if path is None:
            raise ValueError(STOCKFISH_MISSING)
        return StockfishOpponent(path, depth)
    if name == "none":
        return None
    raise ValueError(f"Unknown opponent {name!r}; choose one of {', '.join(OPPONENTS)}")


def _capture_value(board: chess.Board, move: chess.Move) -> int:
    value = 0
    if board.is_en_passant(move):
        value = _VALUES[chess.PAWN]
    else:
        captured = board.piece_type_at(move.to_square)
        if captured is not None:
            value = _VALUES[captured]
    if move.promotion:
        value += _VALUES[move.promotion] - _VALUES[chess.PAWN]
    return value


def _ordered(board: chess.Board, legal_moves: Sequence[chess.Move] | None = None) -> list[chess.Move]:
    """Legal moves, most valuable captures and promotions first (better pruning)."""
    moves = board.legal_moves if legal_moves is None else legal_moves
    return sorted(moves, key=lambda move: -_capture_value(board, move))


# Bonus for pieces near the centre, by square (a1..h8): 0 on the rim, up to 30 in the middle.
_CENTRALITY = [
    int(10 * (3.5 - max(abs(3.5 - chess.square_file(s)), abs(3.5 - chess.square_rank(s)))))
    for s in chess.SQUARES
]


def _evaluate(board: chess.Board) -> int:
    """Material plus centralisation of minor pieces and pawns, from the side to move's view."""
    score = 0
    for piece_type, value in _VALUES.items():
        if piece_type == chess.KING:
            continue
        white = board.pieces_mask(piece_type, chess.WHITE)
        black = board.pieces_mask(piece_type, chess.BLACK)
        score += value * (chess.popcount(white) - chess.popcount(black))
        if piece_type in (chess.PAWN, chess.KNIGHT, chess.BISHOP):
            score += sum(_CENTRALITY[s] for s in chess.scan_forward(white))
            score -= sum(_CENTRALITY[s] for s in chess.scan_forward(black))
    return score if board.turn == chess.WHITE else -score
