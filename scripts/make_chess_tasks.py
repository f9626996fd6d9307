"""Make the chess server's task set (``openenv_lab/servers/chess_tasks.json``): verified mates in 1-3.

Positions are random endgames (a king and a few attacking pieces against a king with a few defenders,
either colour to move), kept when `openenv_lab.servers.chess_tasks.mates_exactly_in` proves a forced mate
in exactly ``n`` moves, until each split holds ``--per-split`` distinct positions. The seed fixes the
result, so running it again writes the same file:

    python scripts/make_chess_tasks.py            # 100 tasks per split, seed 0
    python scripts/make_chess_tasks.py --check    # exit 1 if the shipped file differs from a fresh run
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import chess
from tqdm import tqdm

from openenv_lab.files import write_text_atomically
from openenv_lab.servers.chess_tasks import SPLITS, mate_in, solutions

OUTPUT = Path(__file__).resolve().parent.parent / "openenv_lab" / "servers" / "chess_tasks.json"

# Attacking material (beside the king), from which each position draws one line.
ATTACKERS = ("QR", "RR", "QB", "QN", "RBN", "RB", "RN", "QP", "RRP", "QBN", "BBN", "QRP")
DEFENDERS = ("", "P", "PP", "N", "B", "PN", "PB", "R", "PPP")


def random_position(rng: random.Random) -> chess.Board | None:
    """A random legal position with the attacker (white before mirroring) to move, or None."""
    board = chess.Board(None)
    squares = list(chess.SQUARES)
    rng.shuffle(squares)
    pieces = [(chess.KING, chess.WHITE), (chess.KING, chess.BLACK)]
    pieces += [(chess.Piece.from_symbol(s).piece_type, chess.WHITE) for s in rng.choice(ATTACKERS)]
    pieces += [(chess.Piece.from_symbol(s).piece_type, chess.BLACK) for s in rng.choice(DEFENDERS)]
    for piece_type, colour in pieces:
        square = squares.pop()
        if piece_type == chess.PAWN and chess.square_rank(square) in (0, 7):
            return None
        board.set_piece_at(square, chess.Piece(piece_type, colour))
    board.turn = chess.WHITE
    if not board.is_valid() or board.is_check() or board.is_game_over():
        return None
    return board.mirror() if rng.random() < 0.5 else board  # black to move in half the tasks


def make(per_split: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    found: dict[int, list[dict[str, object]]] = {n: [] for n in SPLITS}
    seen: set[str] = set()
    with tqdm(total=per_split * len(SPLITS), desc="verified mates", unit="task") as progress:
        while any(len(tasks) < per_split for tasks in found.values()):
            board = random_position(rng)
            if board is None or board.epd() in seen:
                continue
            seen.add(board.epd())
            # The first depth with a forced mate is its exact depth. Deeper searches cost the most, so a
            # depth is searched only while it or a deeper split still needs tasks.
            depth = next(
                (
                    n
                    for n in SPLITS
                    if any(len(found[m]) < per_split for m in SPLITS if m >= n) and mate_in(board, n)
                ),
                None,
            )
            if depth is not None and len(found[depth]) < per_split:
                found[depth].append(
                    {"fen": board.fen(), "mate_in": depth, "solutions": solutions(board, depth)}
                )
                progress.update()
    return {
        "format": 1,
        "made_by": "scripts/make_chess_tasks.py",
        "seed": seed,
        "splits": {SPLITS[n]: found[n] for n in SPLITS},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-split", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing")
    args = parser.parse_args(argv)
    text = json.dumps(make(args.per_split, args.seed), indent=1) + "\n"
    if args.check:
        same = args.output.exists() and args.output.read_text(encoding="utf-8") == text
        print(f"{args.output}: {'up to date' if same else 'differs from a fresh run'}")
        return 0 if same else 1
    write_text_atomically(args.output, text, "the task set")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
