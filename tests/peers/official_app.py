"""Small environments served by the *official* ``openenv`` framework (``create_app`` + uvicorn).

They are the reference our client is tested against: nothing of openenv_lab is imported here. Run as

    python tests/peers/official_app.py counter --max-sessions 2

The script binds a free loopback port and prints ``LISTENING http://127.0.0.1:<port>`` once.

- ``counter``: add ``delta`` to a counter until it reaches ``target``; -0.01 per step, 1.0 at the target.
  A ``delta`` of `HANG` stalls the step for a minute (a stuck environment; the framework runs steps in a
  worker thread, so the server and its other sessions keep answering).
- ``kitchen``: every JSON type the generic adapter must map (enums, bounded ints, lists, nested and
  free-form objects, optional fields), with a ``null`` reward on reset and ``bool`` rewards on steps.
- ``officialchess``: behaves like the official ``chess_env`` as documented (ignores ``seed``, random colour,
  random opponent, -0.1 for illegal moves without saying so, no end reason, steps after the end allowed);
  ``OFFICIAL_CHESS_MAX_MOVES`` sets its move limit (500 half-moves, both sides, by default).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import threading
import time
import uuid
from typing import Any, Literal

sys.modules.setdefault("gradio", None)  # the web UI is not needed and its import costs seconds

import chess  # noqa: E402
import uvicorn  # noqa: E402
from openenv.core.env_server import Action, Environment, Observation, State, create_app  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402


class CounterAction(Action):
    delta: int = Field(..., ge=-1_000_000, le=1_000_000, description="amount to add")


class CounterObservation(Observation):
    value: int = 0
    target: int = 10


HANG = 1000


class CounterEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._value = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CounterObservation:
        self._value = int(kwargs.get("start", 0))
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return CounterObservation(value=self._value, target=10, reward=0.0, done=False)

    def step(
        self, action: CounterAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CounterObservation:
        if action.delta == HANG:
            time.sleep(60)
        self._state.step_count += 1
        self._value += action.delta
        done = self._value == 10
        return CounterObservation(
            value=self._value,
            target=10,
            reward=1.0 if done else -0.01,
            done=done,
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


class Nested(BaseModel):
    speed: float = 0.0
    label: str = ""


class KitchenAction(Action):
    direction: Literal["left", "right", "stay"]
    strength: float = Field(..., ge=0.0, le=1.0)
    note: str | None = Field(default=None, description="optional, left to the server")


class KitchenObservation(Observation):
    position: list[float] = Field(default_factory=list)
    grid: list[list[int]] = Field(default_factory=list)
    flags: list[bool] = Field(default_factory=list)
    label: str = ""
    count: int = Field(default=0, ge=0, le=9)
    temperature: float = 0.0
    inventory: dict[str, int] = Field(default_factory=dict)
    history: list[str] = Field(default_factory=list)
    result: str | None = None
    nested: Nested = Field(default_factory=Nested)
    mode: Literal["idle", "moving"] = "idle"
    alive: bool = True


class KitchenEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._x = 0.0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> KitchenObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._x = 0.0
        return self._observe(reward=None, done=False)

    def step(
        self, action: KitchenAction, timeout_s: float | None = None, **kwargs: Any
    ) -> KitchenObservation:
        self._state.step_count += 1
        sign = {"left": -1.0, "right": 1.0, "stay": 0.0}[action.direction]
        self._x += sign * action.strength
        done = self._state.step_count >= 5
        return self._observe(reward=self._x > 0, done=done)

    def _observe(self, *, reward: Any, done: bool) -> KitchenObservation:
        n = self._state.step_count
        return KitchenObservation(
            position=[self._x, 0.0, 1.5],
            grid=[[n, 0], [0, n]],
            flags=[n % 2 == 0, True],
            label=f"step {n} ♞",
            count=min(n, 9),
            temperature=20.5 + n,
            inventory={"apples": n},
            history=[f"s{i}" for i in range(n)],
            result="over" if done else None,
            nested=Nested(speed=self._x, label="n"),
            mode="moving" if n else "idle",
            alive=not done,
            reward=reward,
            done=done,
        )

    @property
    def state(self) -> State:
        return self._state


class OfficialChessAction(Action):
    move: str


class OfficialChessObservation(Observation):
    fen: str = ""
    legal_moves: list[str] = Field(default_factory=list)
    is_check: bool = False
    result: str | None = None


class OfficialChessState(State):
    fen: str = ""
    move_history: list[str] = Field(default_factory=list)


class OfficialStyleChess(Environment):
    """What the official chess_env does, per its documentation (not its code): its end-of-game checks
    (mate, stalemate, insufficient material, fifty moves, the current position seen three times, the
    move limit counting both sides), -0.1 for illegal moves, and nothing in metadata about why."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.max_moves = int(os.environ.get("OFFICIAL_CHESS_MAX_MOVES", "500"))
        self.reset()

    def reset(self, fen: str | None = None) -> OfficialChessObservation:
        self._board = chess.Board(fen) if fen else chess.Board()
        self._rng = random.Random()
        self._agent = chess.WHITE if hash(uuid.uuid4()) % 2 == 0 else chess.BLACK
        self._plies = 0
        self._state = OfficialChessState(episode_id=str(uuid.uuid4()), step_count=0)
        if self._board.turn != self._agent and not self._over():
            self._push(self._rng.choice(list(self._board.legal_moves)))
        return self._observe(0.0)

    def _push(self, move: chess.Move) -> None:
        self._board.push(move)
        self._plies += 1
        self._state.step_count += 1
        self._state.move_history.append(move.uci())
        self._state.fen = self._board.fen()

    def step(self, action: OfficialChessAction, timeout_s: float | None = None, **kwargs: Any) -> Any:
        try:
            move = chess.Move.from_uci(action.move)
        except ValueError:
            return self._observe(-0.1)
        if not self._board.is_legal(move):
            return self._observe(-0.1)
        self._push(move)
        if not self._over():
            self._push(self._rng.choice(list(self._board.legal_moves)))
        return self._observe(self._reward())

    def _over(self) -> bool:
        board = self._board
        return (
            board.is_checkmate()
            or board.is_stalemate()
            or board.is_insufficient_material()
            or board.is_fifty_moves()
            or board.is_repetition(3)
            or self._plies >= self.max_moves
        )

    def _reward(self) -> float:
        if not self._board.is_checkmate():
            return 0.0
        return -1.0 if self._board.turn == self._agent else 1.0

    def _observe(self, reward: float) -> OfficialChessObservation:
        done = self._over()
        return OfficialChessObservation(
            fen=self._board.fen(),
            legal_moves=[m.uci() for m in self._board.legal_moves],
            is_check=self._board.is_check(),
            result=(self._board.result() if self._board.is_checkmate() else "1/2-1/2") if done else None,
            done=done,
            reward=reward,
            metadata={"fullmove_number": self._board.fullmove_number},
        )

    @property
    def state(self) -> OfficialChessState:
        return self._state


ENVS = {
    "counter": (CounterEnvironment, CounterAction, CounterObservation),
    "kitchen": (KitchenEnvironment, KitchenAction, KitchenObservation),
    "officialchess": (OfficialStyleChess, OfficialChessAction, OfficialChessObservation),
}


def _exit_at_stdin_eof() -> None:
    """The test process holds our stdin: when it goes away, so do we."""
    while sys.stdin.buffer.read(1024):
        pass
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("env", choices=sorted(ENVS))
    parser.add_argument("--max-sessions", type=int, default=1)
    args = parser.parse_args()
    env_cls, action_cls, observation_cls = ENVS[args.env]
    app = create_app(
        env_cls, action_cls, observation_cls, env_name=args.env, max_concurrent_envs=args.max_sessions
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"LISTENING http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    threading.Thread(target=_exit_at_stdin_eof, daemon=True).start()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
