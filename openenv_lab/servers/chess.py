"""Our chess OpenEnv server: wire-compatible with the official ``chess_env``, with more to offer.

Same wire format as the official server: action ``{"move": "<uci>"}``; observation ``fen``, ``legal_moves``,
``is_check``, ``result`` plus ``done``/``reward``; rewards +1 win, -1 loss, 0 draw, -0.1 for an illegal or
unparseable move (which changes nothing and does not end the game). On top of that, at no cost to
compatibility:

- ``reset(seed=...)`` is honoured: the agent's colour (when random) and the opponent's choices replay
  exactly. The seed is echoed in the reset metadata so clients can tell it was applied;
- ``reset`` also takes ``fen`` (start position), ``agent_color`` (``white``/``black``/``random``),
  ``opponent`` (see `openenv_lab.servers.chess_opponents`), ``opponent_depth`` and ``max_moves``;
  an unknown option is an error rather than silently ignored;
- tasks (openenv 0.10's task API): verified mates in 1, 2 and 3 (`openenv_lab.servers.chess_tasks`),
  listed by the ``/chess/splits`` and ``/chess/tasks`` routes and started by ``reset(split=..., index=...)``.
  The agent plays the side to move against the episode's opponent (our minimax at depth 2 unless the
  reset names another); the episode ends with +1 when it mates within the task's ``n`` moves, or with 0
  and ``end_reason="out_of_moves"`` (``result`` ``"*"``) when its ``n``-th move has not mated. The reset
  metadata names the task (``task``: ``id``, ``split``, ``index``, ``mate_in``);
- many concurrent sessions on one server (``SUPPORTS_CONCURRENT_SESSIONS``);
- the metadata of every observation says why a game ended (``end_reason``: ``checkmate``, ``stalemate``,
  ``insufficient_material``, ``fifty_moves``, ``threefold_repetition``, ``seventyfive_moves``,
  ``fivefold_repetition``, or ``move_limit``), the opponent's reply (``opponent_move``), the agent's colour
  and the ply count;
- a step after the game ended is refused with an error instead of scoring another illegal move;
- as on the official server: ``state.step_count`` counts the half-moves of both sides since reset (an
  illegal move changes nothing, so it does not count), ``opponent="moonfish"`` is accepted (our minimax
  plays it, at the same depth: moonfish itself is not a dependency), ``opponent=None`` is self-play, and
  ``gamma`` (default 0.99) sets the discount of ``metadata["discounted_rewards"]`` at the end of a game
  (``gamma**(T-1-t)`` times the final reward for the agent's move ``t`` of ``T``); ``episode_id`` from
  ``reset`` is kept, as OpenEnv's validator expects.

One deliberate difference: in self-play (``opponent="none"``) the reward is the mover's (+1 for the move
that mates), where the official server scores every move from the colour it assigned the agent.

Rules: the game is drawn when a position occurs for the third time or the half-move clock reaches 100
(as on the official server; python-chess's "claimable" draws are not anticipated); ``max_moves``
(default 500) counts half-moves of both sides since reset, and reaching it ends the game as a draw with
``end_reason="move_limit"`` (a truncation, not a real end of the game).
"""

from __future__ import annotations

import collections
import functools
import random
import re
import uuid
from collections.abc import Hashable
from typing import Any

import chess
from pydantic import Field

from ._app import build_app
from ._base import Action, Observation, ServerEnvironment, State
from .catalogue import BUNDLED_SERVERS
from .chess_opponents import MAX_DEPTH, OPPONENTS, STOCKFISH_MISSING, Opponent, find_stockfish, make_opponent
from .chess_tasks import TASKS

__all__ = ["ChessAction", "ChessEnvironment", "ChessObservation", "ChessState", "make_app"]

ILLEGAL_MOVE_REWARD = -0.1
#: The options and their ranges (the catalogue declares them once).
SPEC = BUNDLED_SERVERS["chess"]
#: Who defends a task's position unless the reset names an opponent.
TASK_OPPONENT = "minimax"


class ChessAction(Action):
    """The agent's move."""

    move: str = Field(..., description="The move in UCI notation, e.g. 'e2e4', or 'e7e8q' to promote")


class ChessObservation(Observation):
    """The position the agent must move in (after the opponent's reply)."""

    fen: str = Field(default="", description="The position in FEN")
    legal_moves: list[str] = Field(default_factory=list, description="Legal moves in UCI notation")
    is_check: bool = Field(default=False, description="Whether the side to move is in check")
    result: str | None = Field(
        default=None, description="'1-0', '0-1' or '1/2-1/2' once the game is over, else null"
    )


class ChessState(State):
    """The whole game: position, both sides' moves, and the episode's settings."""

    fen: str = chess.STARTING_FEN
    current_player: str = "white"
    move_history: list[str] = Field(default_factory=list, description="Both sides' moves, in UCI")
    agent_color: str = "white"
    opponent: str = "random"
    ply: int = Field(default=0, description="Half-moves of both sides since reset")
    seed: int | None = None


class ChessEnvironment(ServerEnvironment):
    """One chess game per session against a configurable opponent.

    The constructor arguments are the server's defaults; every one of them can be changed per episode
    through ``reset``.
    """

    NAME = "chess"

    def __init__(self, **defaults: Any) -> None:
        """``defaults``: any of the server's options (its ``serve chess`` flags, declared in
        `openenv_lab.servers.BUNDLED_SERVERS`), which each reset can change. ``opponent=None`` is the
        official server's self-play (``"none"``)."""
        super().__init__()
        if defaults.get("opponent", "") is None:
            defaults["opponent"] = "none"
        if defaults.get("agent_color", "") is None:
            defaults["agent_color"] = "random"
        self._defaults = SPEC.defaults(**defaults)
        _check_options(**self._defaults)
        opponent_depth, gamma = self._defaults["opponent_depth"], self._defaults["gamma"]
        self._gamma = gamma  # the official server's name for it
        self._agent_moves = 0
        self._opponent: Opponent | None = None  # built on first use: Stockfish is a process
        self._opponent_key: tuple[str, int] = ("none", opponent_depth)
        self._rng = random.Random()
        self._board = chess.Board()
        self._legal: list[chess.Move] = []  # the legal moves of self._board, in python-chess's order
        self._seen: collections.Counter[Hashable] = collections.Counter()  # positions since reset
        self._repeated = 1  # how many times the current position has occurred since reset
        self._state = ChessState()
        self._max_moves = self._defaults["max_moves"]
        self._end_reason: str | None = None
        self._result: str | None = None
        self._task_moves: int | None = None  # the agent's moves left to mate in, during a task
        # Like the official server, a new environment is ready to play without a reset (HTTP /step).
        self.reset()

    # ------------------------------------------------------------------ OpenEnv interface

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        fen: str | None = None,
        agent_color: str | None = None,
        opponent: str | None = None,
        opponent_depth: int | None = None,
        max_moves: int | None = None,
        gamma: float | None = None,
        split: str | None = None,
        index: int | None = None,
        **unknown: Any,
    ) -> ChessObservation:
        SPEC.refuse_unknown(unknown)
        SPEC.check(seed=seed)
        task = _task(split, index, fen, agent_color, opponent)
        if task is not None:
            fen = task["fen"]
            agent_color = "white" if chess.Board(fen).turn == chess.WHITE else "black"
            opponent = opponent or TASK_OPPONENT
        settings = dict(self._defaults)
        for key, value in (
            ("agent_color", agent_color),
            ("opponent", opponent),
            ("opponent_depth", opponent_depth),
            ("max_moves", max_moves),
            ("gamma", gamma),
        ):
            if value is not None:
                settings[key] = value
        _check_options(
            settings["opponent"],
            settings["agent_color"],
            settings["opponent_depth"],
            settings["max_moves"],
            settings["gamma"],
        )
        self._gamma = float(settings["gamma"])
        self._agent_moves = 0

        board = _board_from_fen(fen)
        self._rng = random.Random(seed)
        colour = settings["agent_color"]
        if colour == "random":
            colour = self._rng.choice(("white", "black"))
        self._set_opponent(settings["opponent"], settings["opponent_depth"])
        self._board = board
        self._seen = collections.Counter((_position_key(board),))
        self._repeated = 1
        self._legal = list(board.generate_legal_moves())
        self._max_moves = settings["max_moves"]
        self._end_reason = None
        self._result = None
        self._state = ChessState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            fen=_fen(board),
            current_player=_colour_name(board.turn),
            agent_color=colour,
            opponent=settings["opponent"],
            seed=seed,
        )

        metadata: dict[str, Any] = {"agent_color": colour, "opponent": settings["opponent"]}
        if seed is not None:
            metadata["seed"] = seed
        self._task_moves = None
        if task is not None:
            self._task_moves = task["mate_in"]
            metadata["task"] = {key: task[key] for key in ("id", "split", "index", "mate_in")}
        self._check_game_over()
        agent_turn = chess.WHITE if colour == "white" else chess.BLACK
        if self._end_reason is None and self._has_opponent and board.turn != agent_turn:
            metadata["opponent_move"] = self._play_opponent()
            self._check_game_over()
        return self._observation(reward=0.0, metadata=metadata)

    def step(self, action: ChessAction, timeout_s: float | None = None, **kwargs: Any) -> ChessObservation:
        if self._end_reason is not None:
            raise ValueError(
                f"The game is over ({self._end_reason}, {self._result}); send a reset to start a new one"
            )
        metadata: dict[str, Any] = {"agent_color": self._state.agent_color}
        try:
            move = chess.Move.from_uci(action.move.strip())
        except ValueError:
            move = None
        if move is None or not self._board.is_legal(move):
            metadata["illegal_move"] = action.move
            return self._observation(reward=ILLEGAL_MOVE_REWARD, metadata=metadata)

        self._push(move)
        self._agent_moves += 1
        reward = self._check_game_over()
        if (
            self._end_reason is None
            and self._task_moves is not None
            and self._agent_moves >= self._task_moves
        ):
            self._end_reason, self._result = "out_of_moves", "*"  # the task's moves are spent without a mate
        if self._end_reason is None and self._has_opponent:
            try:
                metadata["opponent_move"] = self._play_opponent()
            except BaseException:
                # Never leave the agent to move the opponent's pieces: take the move back.
                self._pop()
                self._agent_moves -= 1
                raise
            reward = self._check_game_over()
        if self._end_reason is not None:
            moves = self._agent_moves
            metadata["discounted_rewards"] = [self._gamma ** (moves - 1 - t) * reward for t in range(moves)]
            metadata["gamma"] = self._gamma
        return self._observation(reward=reward, metadata=metadata)

    # ------------------------------------------------------------------ tasks (openenv's TaskProvider)

    def list_splits(self) -> list[dict[str, str]]:
        return TASKS.list_splits()

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return TASKS.list_tasks(split)

    def num_tasks(self, split: str) -> int:
        return TASKS.num_tasks(split)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        return TASKS.get_task(split, index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        return TASKS.get_task_range(split, start, stop)

    def step_waits_elsewhere(self) -> bool:
        return self._opponent_key[0] == "stockfish"  # a process of its own thinks

    def describe(self) -> str:
        return (
            f"Chess against a configurable opponent ({', '.join(OPPONENTS[:-1])} or {OPPONENTS[-1]}), "
            "wire-compatible with OpenEnv's chess_env, with seeded resets and concurrent sessions."
        )

    def close(self) -> None:
        if self._opponent is not None:
            self._opponent.close()
            self._opponent = None

    # ------------------------------------------------------------------ game mechanics

    @property
    def _has_opponent(self) -> bool:
        return self._opponent_key[0] != "none"

    def _set_opponent(self, name: str, depth: int) -> None:
        if (name, depth) != self._opponent_key:
            self.close()
            self._opponent_key = (name, depth)

    def _push(self, move: chess.Move) -> None:
        board = self._board
        board.push(move)
        key = _position_key(board)
        self._seen[key] += 1
        self._repeated = self._seen[key]
        self._legal = list(board.generate_legal_moves())
        self._state.move_history.append(move.uci())
        self._update_state(ply=self._state.ply + 1, step_count=self._state.ply + 1)

    def _pop(self) -> None:
        board = self._board
        self._seen[_position_key(board)] -= 1
        board.pop()
        self._repeated = self._seen[_position_key(board)]
        self._legal = list(board.generate_legal_moves())
        self._state.move_history.pop()
        self._update_state(ply=self._state.ply - 1, step_count=self._state.ply - 1)

    def _play_opponent(self) -> str:
        if self._opponent is None:
            self._opponent = make_opponent(*self._opponent_key)
        assert self._opponent is not None
        move = self._opponent.choose(self._board, self._rng, self._legal)
        self._push(move)
        return move.uci()

    def _check_game_over(self) -> float:
        """Set the end reason and result if the game just ended; the reward from the agent's view.

        The automatic endings are python-chess's ``Board.outcome()``, checked in its order, then the
        draws the official server adds (fifty moves, threefold repetition), then our move limit. They are
        worked out from the legal moves already listed and the positions counted since reset: ``outcome()``
        and ``is_repetition()`` would generate moves again and walk the whole game on every step.
        """
        board = self._board
        stuck = not self._legal
        repeated = self._repeated
        winner: chess.Color | None = None
        if stuck and board.is_check():
            reason, winner = "checkmate", not board.turn
        elif board.is_insufficient_material():
            reason = "insufficient_material"
        elif stuck:
            reason = "stalemate"
        elif board.halfmove_clock >= 150:
            reason = "seventyfive_moves"
        elif repeated >= 5:
            reason = "fivefold_repetition"
        elif board.halfmove_clock >= 100:
            reason = "fifty_moves"
        elif repeated >= 3:
            reason = "threefold_repetition"
        elif self._state.ply >= self._max_moves:
            reason = "move_limit"
        else:
            return 0.0
        self._end_reason = reason
        if winner is None:
            self._result = "1/2-1/2"
            return 0.0
        self._result = "1-0" if winner == chess.WHITE else "0-1"
        if not self._has_opponent:  # self-play: the reward is the mover's
            return 1.0
        agent = chess.WHITE if self._state.agent_color == "white" else chess.BLACK
        return 1.0 if winner == agent else -1.0

    def _observation(self, *, reward: float, metadata: dict[str, Any]) -> ChessObservation:
        board = self._board
        done = self._end_reason is not None
        fen = _fen(board)
        self._update_state(fen=fen, current_player=_colour_name(board.turn))
        metadata["ply"] = self._state.ply
        metadata["fullmove_number"] = board.fullmove_number
        metadata["halfmove_clock"] = board.halfmove_clock
        if done:
            metadata["end_reason"] = self._end_reason
        return ChessObservation(
            fen=fen,
            legal_moves=[] if done else [move.uci() for move in self._legal],
            is_check=board.is_check(),
            result=self._result if done else None,
            done=done,
            reward=reward,
            metadata=metadata,
        )


def _check_options(
    opponent: str, agent_color: str, opponent_depth: int, max_moves: int, gamma: float = 0.99
) -> None:
    if opponent not in OPPONENTS:
        raise ValueError(f"Unknown opponent {opponent!r}; choose one of {', '.join(OPPONENTS)}")
    SPEC.check(agent_color=agent_color, opponent_depth=opponent_depth, max_moves=max_moves, gamma=gamma)
    if opponent == "stockfish" and find_stockfish() is None:
        raise ValueError(STOCKFISH_MISSING)
    if opponent_depth > MAX_DEPTH.get(opponent, opponent_depth):
        raise ValueError(
            f"opponent_depth for {opponent} is at most {MAX_DEPTH[opponent]}, got {opponent_depth}"
        )


def _task(
    split: str | None, index: int | None, fen: str | None, agent_color: str | None, opponent: str | None
) -> dict[str, Any] | None:
    """The task a reset asks for (both ``split`` and ``index``), checked against the other options."""
    if split is None and index is None:
        return None
    if split is None or index is None:
        raise ValueError("A task is chosen by both split and index, e.g. reset(split='mate_in_2', index=0)")
    try:
        task = TASKS.get_task(split, index)
    except IndexError as exc:
        raise ValueError(str(exc)) from None
    if fen is not None:
        raise ValueError("A task sets the position: pass either fen or split and index, not both")
    colour = "white" if chess.Board(task["fen"]).turn == chess.WHITE else "black"
    if agent_color not in (None, "random", colour):
        raise ValueError(f"Task {task['id']} is played by {colour} (the side to move), not {agent_color}")
    if opponent in ("none",):
        raise ValueError("A task needs a defender: opponent='none' (self-play) cannot play one")
    return task


def _board_from_fen(fen: str | None) -> chess.Board:
    if fen is not None and not isinstance(fen, str):
        raise ValueError(f"fen must be a position in FEN (text), got {fen!r}")
    if fen is None:
        return chess.Board()
    try:
        board = chess.Board(fen)
    except ValueError as exc:
        raise ValueError(f"Invalid FEN {fen!r}: {exc}") from None
    if not board.is_valid():
        raise ValueError(f"FEN {fen!r} is not a legal chess position ({board.status()!r})")
    return board


def _position_key(board: chess.Board) -> Hashable:
    """What makes two positions the same for the repetition rules: pieces, side to move, castling rights
    and a legal en passant capture (python-chess's own transposition key, from its public attributes).
    Positions before an irreversible move can never have the key again, so counting keys since reset
    counts repetitions as ``Board.is_repetition`` does."""
    return (
        board.pawns,
        board.knights,
        board.bishops,
        board.rooks,
        board.queens,
        board.kings,
        board.occupied_co[chess.WHITE],
        board.occupied_co[chess.BLACK],
        board.turn,
        board.clean_castling_rights(),
        board.ep_square if board.has_legal_en_passant() else None,
    )


# The FEN letter of each piece, by piece bitboard: (white, black) as byte values.
_LETTERS = tuple(
    (ord(chess.piece_symbol(kind).upper()), ord(chess.piece_symbol(kind))) for kind in chess.PIECE_TYPES
)


@functools.lru_cache(maxsize=1 << 14)
def _fen_row(cells: str) -> str:
    """One rank of a FEN, from its eight cells ('.' for an empty square): runs of empty squares counted."""
    return "".join(str(len(run)) if run[0] == "." else run for run in re.findall(r"\.+|[^.]+", cells))


def _fen(board: chess.Board) -> str:
    """The text of ``board.fen()``, with the pieces read from their bitboards rather than square by square
    (python-chess's way, a large share of a step): most ranks are unchanged from one position to the next,
    so each rank's text is mostly a cache hit."""
    cells = bytearray(b"." * 64)
    white = board.occupied_co[chess.WHITE]
    masks = (board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings)
    for mask, (upper, lower) in zip(masks, _LETTERS, strict=True):
        while mask:
            low = mask & -mask
            cells[low.bit_length() - 1] = upper if low & white else lower
            mask ^= low
    text = cells.decode()
    placement = "/".join([_fen_row(text[start : start + 8]) for start in range(56, -8, -8)])
    square = board.ep_square
    en_passant = chess.SQUARE_NAMES[square] if square is not None and board.has_legal_en_passant() else "-"
    turn = "w" if board.turn == chess.WHITE else "b"
    clocks = f"{board.halfmove_clock} {board.fullmove_number}"
    return f"{placement} {turn} {board.castling_xfen()} {en_passant} {clocks}"


def _colour_name(colour: chess.Color) -> str:
    return "white" if colour == chess.WHITE else "black"


def make_app(max_sessions: int = 64, **options: Any) -> Any:
    """The FastAPI app of the chess server; ``options`` (its ``serve chess`` flags) are the defaults each
    reset can change."""
    factory = functools.partial(ChessEnvironment, **options)
    factory()  # fail now, at server start, on bad defaults (Stockfish missing, say)
    return build_app(
        factory,
        ChessAction,
        ChessObservation,
        ChessState,
        env_name="chess",
        max_sessions=max_sessions,
    )
