"""The chess adapter: AlphaZero-style spaces over the OpenEnv chess schema (ours or the official server).

Spaces:

- observation ``Dict(board=Box(0, 1, (19, 8, 8), float32), action_mask=MultiBinary(4672))``, both from
  the side to move's point of view (see `openenv_lab.adapters.chess_encoding`). The mask is ``int8`` so
  ``env.action_space.sample(mask=obs["action_mask"])`` works as it is;
- action ``Discrete(4672)``: ``from_square * 73 + plane``. `ChessAdapter.action_to_move` and
  `ChessAdapter.move_to_action` convert to and from UCI. ``env.action_masks()`` gives the boolean mask
  (the sb3-contrib ``MaskablePPO`` convention).

An action that is in the space but illegal in the position (its mask entry is 0) is sent anyway: the
server answers with the -0.1 illegal-move penalty, leaves the position as it was, and the game goes on
(``info["illegal_move"]`` is then true). Indices whose move would leave the board are sent as the null
move ``"0000"``, which is illegal too.

Episode endings: checkmate, stalemate, insufficient material and the draw rules end the game
(``terminated``); reaching the server's move limit is a cut (``truncated``). Our server names the
reason in ``metadata["end_reason"]``; for servers that do not (the official one) the reason is worked
out from the final position and the positions seen during the episode.

Info (`ChessAdapter.info_keys`, on every step): ``fen``, ``agent_color``, ``move`` (the agent's move as
sent, UCI), ``opponent_move``, ``illegal_move``, ``end_reason`` and ``result``, with ``""``, False and
``"*"`` where there is nothing to say yet. The legal moves (a list of any length) are not in it: the mask
is in the observation, and ``env.unwrapped.adapter.legal_moves`` lists them in UCI.

Rendering: ``"svg"`` returns python-chess's SVG board (shown as a picture by Jupyter), seen from the
agent's side, last move arrowed, king in check highlighted; ``"rgb_array"`` a 400x400x3 ``uint8``
picture drawn with Pillow; ``"ansi"`` the board as text with the FEN.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import chess
import chess.svg
import numpy as np
from gymnasium import spaces

from ..client import ProtocolError, StepResult
from ..options import curriculum_names
from .base import Adapter, Transition, base_info
from .chess_encoding import BOARD_SHAPE, NUM_ACTIONS, board_planes, index_to_uci, legal_mask, uci_to_index
from .info_schema import InfoKey

__all__ = ["ChessAdapter"]

#: End reasons that are a real end of the game under the rules of chess.
TERMINAL_REASONS = frozenset(
    {
        "checkmate",
        "stalemate",
        "insufficient_material",
        "seventyfive_moves",
        "fivefold_repetition",
        "fifty_moves",
        "threefold_repetition",
    }
)
#: End reasons that cut a game short: truncation. Any other reason (including ones a server invents,
#: such as a resignation) ends the game for good: termination.
TRUNCATION_REASONS = frozenset({"move_limit"})
_RESET_OPTIONS = curriculum_names("chess")


class ChessAdapter(Adapter):
    """Gymnasium spaces for OpenEnv chess servers.

    Args:
        opponent, agent_color, opponent_depth, max_moves, gamma: sent with every reset (our server honours
            them; the official server ignores them). ``None`` leaves the server's default. ``gamma``
            discounts the ``discounted_rewards`` the server puts in the metadata at a game's end.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = gym.make("openenv/chess", agent_color="white")
        >>> obs, info = env.reset(seed=0)
        >>> adapter = env.unwrapped.adapter
        >>> adapter.action_to_move(adapter.move_to_action("e2e4"))
        'e2e4'
        >>> bool(obs["action_mask"][adapter.move_to_action("e2e4")])
        True
        >>> env.close()
    """

    server_name: ClassVar[str | None] = "chess"
    family: ClassVar[str] = "chess"
    render_modes: ClassVar[tuple[str, ...]] = ("ansi", "rgb_array", "svg")
    #: -1 for a loss, +1 for a win, -0.1 for an illegal move, 0 otherwise.
    reward_range: ClassVar[tuple[float, float] | None] = (-1.0, 1.0)
    render_fps: ClassVar[int] = 2
    env_attributes: ClassVar[tuple[str, ...]] = ("action_masks",)
    reset_option_names: ClassVar[tuple[str, ...]] = _RESET_OPTIONS
    info_keys: tuple[InfoKey, ...] = (
        InfoKey("fen", "str", "the position, in FEN"),
        InfoKey("agent_color", "str", '"white" or "black": the side the agent plays'),
        InfoKey("move", "str", "the agent's move as sent, in UCI (`0000`: off the board)"),
        InfoKey("opponent_move", "str", "the opponent's reply, in UCI, where the server says"),
        InfoKey("illegal_move", "bool", "the agent's move was illegal: penalised, the position unchanged"),
        InfoKey("end_reason", "str", "why the game ended: `checkmate`, `stalemate`, `move_limit`..."),
        InfoKey("result", "str", "the result, `1-0`, `0-1` or `1/2-1/2`, at the end", neutral="*"),
    )

    def __init__(
        self,
        *,
        opponent: str | None = None,
        agent_color: str | None = None,
        opponent_depth: int | None = None,
        max_moves: int | None = None,
        gamma: float | None = None,
    ) -> None:
        _check_options(opponent, agent_color, opponent_depth, max_moves, gamma)
        values = (opponent, agent_color, opponent_depth, max_moves, gamma)
        self.reset_options = {k: v for k, v in zip(_RESET_OPTIONS, values, strict=True) if v is not None}
        self.observation_space = spaces.Dict(
            {
                "board": spaces.Box(0.0, 1.0, BOARD_SHAPE, dtype=np.float32),
                "action_mask": spaces.MultiBinary(NUM_ACTIONS),
            }
        )
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._fen = chess.STARTING_FEN
        self._white_to_move = True
        self._legal_list: list[str] = []
        self._last_move: str | None = None
        self._agent_color = "white"
        self._history: list[tuple[str, str | None]] = []

    # ------------------------------------------------------------------ conversions

    def check_reset_option(self, name: str, value: Any) -> None:
        _check_options(**{**dict.fromkeys(_RESET_OPTIONS), name: value})

    def move_to_action(self, uci: str) -> int:
        """The action index of a UCI move in the current position (legal or not)."""
        return uci_to_index(uci, self._white_to_move)

    def action_to_move(self, action: int) -> str:
        """The UCI move an action index stands for in the current position (``"0000"`` if off the board)."""
        return index_to_uci(int(action), self._white_to_move, self._legal_list)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the legal actions in the current position."""
        return legal_mask(self._legal_list, self._white_to_move).astype(bool)

    @property
    def legal_moves(self) -> list[str]:
        """The legal moves in the current position, in UCI, as the server listed them."""
        return list(self._legal_list)

    @property
    def board(self) -> chess.Board:
        """The current position as a python-chess board."""
        return chess.Board(self._fen)

    # ------------------------------------------------------------------ Adapter interface

    def encode_action(self, action: Any) -> dict[str, Any]:
        return {"move": self.action_to_move(action)}

    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        reset = sent is None
        move = None if sent is None else sent.get("move")
        raw = result.observation
        metadata = result.metadata
        fen = raw.get("fen")
        fields = fen.split() if isinstance(fen, str) else ()
        if len(fields) < 2:
            raise ProtocolError(f"A chess observation needs a 'fen' string; got fields {sorted(raw)}")
        legal_moves = raw.get("legal_moves") or []
        if reset:
            illegal = False
        elif "illegal_move" in metadata:
            illegal = True
        else:  # the official server says nothing, but penalises and keeps the position
            illegal = not result.done and fen == self._fen and (result.reward or 0.0) < 0.0

        # The game so far, only to tell a threefold repetition from a move-limit cut at the end.
        if reset:
            self._history = [(fen, None)]
            self._last_move = metadata.get("opponent_move")
        elif not illegal:
            self._history.append((fen, move))
            self._last_move = metadata.get("opponent_move") or move
        self._fen = fen
        self._white_to_move = fields[1] == "w"
        self._legal_list = list(legal_moves)  # ours: the user may change the lists in info
        if not result.done:
            self._agent_color = "white" if self._white_to_move else "black"

        info = base_info(result)
        info["fen"] = fen
        info["agent_color"] = self._agent_color
        if metadata.get("opponent_move") is not None:
            info["opponent_move"] = metadata["opponent_move"]
        if not reset:
            info["move"] = move
            info["illegal_move"] = illegal
        terminated = truncated = False
        if result.done:
            reason = metadata.get("end_reason") or self._infer_end_reason()
            truncated = reason in TRUNCATION_REASONS
            terminated = not truncated
            info["end_reason"] = reason
            if raw.get("result") is not None:
                info["result"] = raw["result"]
            if truncated and not legal_moves:
                # A game cut short (a move limit) ends in a position that still has moves, and a value
                # bootstrapped there needs them (a masked max over none is -inf); servers send none once a
                # game is over, so they come from the FEN.
                legal_moves = [legal.uci() for legal in chess.Board(fen).legal_moves]
                self._legal_list = list(legal_moves)
        observation = {
            "board": board_planes(fen),
            "action_mask": legal_mask(legal_moves, self._white_to_move),
        }
        reward = 0.0 if result.reward is None else result.reward
        return Transition(observation, reward, terminated, truncated, info)

    # ------------------------------------------------------------------ recording

    def describe_action(self, action: Any) -> str:
        """The move in UCI and, when legal, SAN: ``"g1f3 (Nf3)"``."""
        uci = self.action_to_move(action)
        if uci not in self._legal_list:
            return f"{uci} (illegal)"
        return f"{uci} ({chess.Board(self._fen).san(chess.Move.from_uci(uci))})"

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        ended = bool(info["end_reason"])  # the info's neutral values are the recording's nulls
        return {
            "fen": str(info["fen"]),
            "move": (info["move"] or None) if action is not None else None,
            "opponent_move": info["opponent_move"] or None,
            "agent_color": str(info["agent_color"]),
            "illegal_move": bool(info["illegal_move"]),
            "end_reason": info["end_reason"] or None,
            "result": info["result"] if ended else None,
        }

    # ------------------------------------------------------------------ rendering

    def render(self, mode: str) -> Any:
        board = self.board
        if mode == "ansi":
            last = f"\nlast move: {self._last_move}" if self._last_move else ""
            return f"{board.unicode(borders=True, empty_square='·')}\nFEN: {self._fen}{last}\n"
        if mode == "svg":
            lastmove = None
            if self._last_move and self._last_move != "0000":
                lastmove = chess.Move.from_uci(self._last_move)
            check = board.king(board.turn) if board.is_check() else None
            return chess.svg.board(
                board,
                orientation=self._agent_color == "white",
                lastmove=lastmove,
                check=check,
                size=360,
            )
        if mode == "rgb_array":
            return _draw_board(board, self._last_move, white_at_bottom=self._agent_color == "white")
        return super().render(mode)

    # ------------------------------------------------------------------ helpers

    def _infer_end_reason(self) -> str:
        """Why a game ended, for servers that do not say: from the final position and the history."""
        board = chess.Board(self._fen)
        outcome = board.outcome(claim_draw=False)
        if outcome is not None:
            return outcome.termination.name.lower()
        if board.halfmove_clock >= 100:
            return "fifty_moves"
        if max(self._repetitions().values(), default=0) >= 3:
            return "threefold_repetition"
        return "move_limit"

    def _repetitions(self) -> dict[str, int]:
        """How often each position occurred: those the server showed, and those after the agent's
        moves, which the server never shows (it answers after the opponent's reply)."""
        counts: dict[str, int] = {}
        previous: str | None = None
        for fen, agent_move in self._history:
            after_agent = None
            if previous is not None and agent_move and agent_move != "0000":
                board = chess.Board(previous)
                board.push_uci(agent_move)
                after_agent = _position_key(board.fen())
                counts[after_agent] = counts.get(after_agent, 0) + 1
            key = _position_key(fen)
            if key != after_agent:  # equal when the game ended on the agent's move
                counts[key] = counts.get(key, 0) + 1
            previous = fen
        return counts


def _position_key(fen: str) -> str:
    """The part of a FEN that decides repetitions: placement, side to move, castling, en passant."""
    return " ".join(fen.split()[:4])


# ---------------------------------------------------------------------------- rgb_array drawing

_SQUARE = 50
_LIGHT, _DARK = (240, 217, 181), (181, 136, 99)
_HIGHLIGHT = (205, 210, 106)
_GLYPHS = {"K": "♔", "Q": "♕", "R": "♖", "B": "♗", "N": "♘", "P": "♙"}


@functools.lru_cache(maxsize=1)
def _font() -> Any:
    from matplotlib import font_manager
    from PIL import ImageFont

    return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), int(_SQUARE * 0.8))


def _draw_board(board: chess.Board, last_move: str | None, *, white_at_bottom: bool) -> np.ndarray:
    """A (400, 400, 3) uint8 picture of the board, from the agent's side."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (8 * _SQUARE, 8 * _SQUARE))
    draw = ImageDraw.Draw(image)
    highlighted: set[int] = set()
    if last_move and last_move != "0000":
        move = chess.Move.from_uci(last_move)
        highlighted = {move.from_square, move.to_square}
    font = _font()
    flip = not white_at_bottom
    for square in chess.SQUARES:
        file, rank = chess.square_file(square), chess.square_rank(square)
        x = (7 - file if flip else file) * _SQUARE
        y = (rank if flip else 7 - rank) * _SQUARE
        colour = _LIGHT if (file + rank) % 2 else _DARK
        if square in highlighted:
            colour = _HIGHLIGHT
        draw.rectangle((x, y, x + _SQUARE - 1, y + _SQUARE - 1), fill=colour)
        piece = board.piece_at(square)
        if piece is not None:
            glyph = _GLYPHS[piece.symbol().upper()]
            fill, outline = ((255, 255, 255), (0, 0, 0)) if piece.color else ((0, 0, 0), (0, 0, 0))
            centre = (x + _SQUARE / 2, y + _SQUARE / 2)
            draw.text(centre, glyph, font=font, fill=fill, anchor="mm", stroke_width=1, stroke_fill=outline)
    return np.asarray(image, dtype=np.uint8).copy()


def _check_options(opponent: Any, agent_color: Any, opponent_depth: Any, max_moves: Any, gamma: Any) -> None:
    """Refuse, at make, options no chess server could take (the server checks the opponent's name)."""
    if opponent is not None and not isinstance(opponent, str):
        raise ValueError(f"opponent must be an opponent's name such as 'random', got {opponent!r}")
    if agent_color is not None and agent_color not in ("white", "black", "random"):
        raise ValueError(f"agent_color must be 'white', 'black' or 'random', got {agent_color!r}")
    for name, value in (("opponent_depth", opponent_depth), ("max_moves", max_moves)):
        if value is not None and (
            not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1
        ):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if gamma is not None and (
        isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma <= 1
    ):
        raise ValueError(f"gamma must be a discount factor in [0, 1], got {gamma!r}")
