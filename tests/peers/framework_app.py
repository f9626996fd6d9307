"""Test environments of our own, served by the official ``openenv`` framework (``create_app`` + uvicorn).

They give the client shapes no official environment has: a step that hangs, every JSON type, a room
of exactly N sessions. Nothing of openenv_lab is imported here. The official environments themselves
(tests/conformance.py) are what the client's conformance is tested against. Run as

    python tests/peers/framework_app.py counter --max-sessions 2

The script binds a free loopback port and prints ``LISTENING http://127.0.0.1:<port>`` once.

- ``counter``: add ``delta`` to a counter until it reaches ``target``; -0.01 per step, 1.0 at the target.
  A ``delta`` of `HANG` stalls the step for a minute (a stuck environment; the framework runs steps in a
  worker thread, so the server and its other sessions keep answering).
- ``dice``: ignores seeds, and rolls a die of its own at every reset and step, with a draw of 31 random bits
  beside it (a die alone repeats one time in six, and gymnasium's checker would then see a replay): no
  episode replays.
- ``kitchen``: every JSON type the generic adapter must map (enums, bounded ints, lists, nested and
  free-form objects, optional fields), with a ``null`` reward on reset and ``bool`` rewards on steps.
- ``liar``: breaks what the report card checks: an observation outside its own schema (a count the schema
  says is never negative), no reward on the second step of each episode (NaN, which the framework's JSON
  turns into null), and steps after the end of an episode accepted as if it went on.
- ``parrot``: echoes the player's message, wrapped, into a list of messages, as TextArena's games do:
  its text fields have no ``maxLength``, and what comes back is longer than what went in.
- ``pile``: Nim on a pile of ten, as OpenSpiel's games are served: the action is an ``action_id`` the
  schema does not bound, and the observation lists the legal ones; an illegal id is an error.
- ``tally``: a plain ``int`` action without bounds and nothing listing legal values; five steps an episode.
- ``ledger``: three steps an episode, and one way of breaking the state contract or the end of an episode
  per episode, named by the reset's ``fault`` (`LedgerEnvironment`): what the report card's state and
  after-the-end checks must each catch.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import socket
import sys
import threading
import time
import uuid
from typing import Any, Literal

sys.modules.setdefault("gradio", None)  # the web UI is not needed and its import costs seconds

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


class DiceAction(Action):
    guess: int = Field(..., ge=1, le=6)


class DiceObservation(Observation):
    roll: int = 0
    draw: int = Field(0, ge=0, le=2**31 - 1)


class DiceEnvironment(Environment):
    """Ignores seeds: every reset and step rolls a die of the process's own, so no episode replays."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._rng = random.SystemRandom()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> DiceObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return DiceObservation(roll=self._rng.randint(1, 6), draw=self._draw(), reward=0.0, done=False)

    def step(self, action: DiceAction, timeout_s: float | None = None, **kwargs: Any) -> DiceObservation:
        self._state.step_count += 1
        roll = self._rng.randint(1, 6)
        return DiceObservation(
            roll=roll, draw=self._draw(), reward=float(action.guess == roll), done=self._state.step_count >= 3
        )

    def _draw(self) -> int:
        return self._rng.randrange(2**31)

    @property
    def state(self) -> State:
        return self._state


class LiarAction(Action):
    move: int = Field(..., ge=0, le=1)


class LiarObservation(Observation):
    # The published schema says "minimum": 0; the model itself does not hold the server to it.
    count: int = Field(0, json_schema_extra={"minimum": 0}, description="never negative, the schema says")


class LiarEnvironment(Environment):
    """Three steps an episode; the last observation's count breaks the published schema, and a step after
    the end is answered as if the episode went on."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> LiarObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return LiarObservation(count=0, reward=0.0, done=False, metadata={"seed": seed})

    def step(self, action: LiarAction, timeout_s: float | None = None, **kwargs: Any) -> LiarObservation:
        self._state.step_count += 1
        done = self._state.step_count == 3  # and after the end: not done, as if it went on
        count = -1 if done else self._state.step_count  # -1: outside the published "minimum": 0
        reward = math.nan if self._state.step_count == 2 else 0.0  # no reward there
        return LiarObservation(count=count, reward=reward, done=done)

    @property
    def state(self) -> State:
        return self._state


class ShiftyAction(Action):
    move: int = Field(..., ge=0, le=1)


class ShiftyObservation(Observation):
    level: int = Field(0, description="a number, the schema says, and not an optional one")
    note: str = ""


class ShiftyEnvironment(Environment):
    """Four steps an episode; its second step's ``level`` is null, though the schema declares an integer
    that cannot be null (the model is built without validation, as a careless server would)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> ShiftyObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return ShiftyObservation(level=0, note="start", reward=0.0, done=False, metadata={"seed": seed})

    def step(self, action: ShiftyAction, timeout_s: float | None = None, **kwargs: Any) -> ShiftyObservation:
        self._state.step_count += 1
        count = self._state.step_count
        fields = {"note": f"step {count}", "reward": 1.0, "done": count == 4, "metadata": {}}
        if count == 2:
            return ShiftyObservation.model_construct(level=None, **fields)
        return ShiftyObservation(level=count, **fields)

    @property
    def state(self) -> State:
        return self._state


class ParrotAction(Action):
    message: str


class ParrotMessage(BaseModel):
    sender: int
    content: str


class ParrotObservation(Observation):
    prompt: str = ""
    messages: list[ParrotMessage] = Field(default_factory=list)


class ParrotEnvironment(Environment):
    """Says back what it heard, wrapped ("[Player 0] ..."), in a growing list of messages."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._messages: list[ParrotMessage] = []
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> ParrotObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._messages = [ParrotMessage(sender=-1, content="Say anything; I repeat it.")]
        return ParrotObservation(
            prompt="Say anything.", messages=list(self._messages), reward=0.0, done=False
        )

    def step(self, action: ParrotAction, timeout_s: float | None = None, **kwargs: Any) -> ParrotObservation:
        self._state.step_count += 1
        self._messages.append(ParrotMessage(sender=0, content=f"[Player 0] {action.message}"))
        return ParrotObservation(
            prompt=f"You said: {action.message}",
            messages=list(self._messages),
            reward=0.0,
            done=self._state.step_count >= 3,
        )

    @property
    def state(self) -> State:
        return self._state


class PileAction(Action):
    action_id: int  # no bounds: only the observation says which ids are legal


class PileObservation(Observation):
    pile: int = 10
    legal_actions: list[int] = Field(default_factory=list)


class PileEnvironment(Environment):
    """Take 1, 2 or 3 from the pile (no more than is left); the other side takes one after each move. Taking
    the last one wins (+1); the other side taking it loses (-1)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._pile = 10
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def _observe(self, reward: float, done: bool) -> PileObservation:
        legal = [] if done else list(range(1, min(3, self._pile) + 1))
        return PileObservation(pile=self._pile, legal_actions=legal, reward=reward, done=done)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> PileObservation:
        self._pile = 10
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return self._observe(0.0, False)

    def step(self, action: PileAction, timeout_s: float | None = None, **kwargs: Any) -> PileObservation:
        if action.action_id not in range(1, min(3, self._pile) + 1):
            raise ValueError(f"action_id {action.action_id} is not legal with {self._pile} left")
        self._state.step_count += 1
        self._pile -= action.action_id
        if self._pile == 0:
            return self._observe(1.0, True)
        self._pile -= 1
        return self._observe(-1.0 if self._pile == 0 else 0.0, self._pile == 0)

    @property
    def state(self) -> State:
        return self._state


class LedgerAction(Action):
    move: int = Field(..., ge=0, le=1)


class LedgerObservation(Observation):
    entries: int = 0


class UncountedState(BaseModel):
    """A state with an ``episode_id`` and no ``step_count``."""

    episode_id: str | None = None


class WordyState(BaseModel):
    """A state whose ``step_count`` is a word."""

    episode_id: str | None = None
    step_count: str = "none"


class LedgerEnvironment(Environment):
    """Three steps an episode (one with the fault ``"short"``), breaking one rule per episode, named by the
    reset's ``fault``:

    - ``"forgets-id"``: the state names an episode_id of its own, not the reset's; ``"drifts-id"``: it names
      the reset's until the first step, then one of its own;
    - ``"uncounted"``: the state has no ``step_count``; ``"counted-late"``: none until the first step;
      ``"wordy"``: its ``step_count`` is a word;
    - ``"stuck"``: the ``step_count`` stays 0; ``"double"``: it grows by two a step (an opponent's moves);
    - ``"no-state"``: reading the state fails (an error reply);
    - ``"short"``: a one-step episode; ``"done-again"``: a step after the end answers done again;
      ``"slow-after-end"``: a step after the end takes three seconds;
    - ``"picky"``: every step is refused (an error reply of over 300 characters), whatever the action.

    No fault (or any other): the contract kept, and a step after the end refused (an error reply). Each
    step rewards 1.0 in an episode whose reset names a fault, 0.0 in one that names none: what was sent with
    the resets shows in the returns. The fault ``"pays-seed"`` keeps the contract and rewards the reset's
    seed (0 without one) a step instead: which seeds were sent shows too.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._fault = ""
        self._seed = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> LedgerObservation:
        self._fault = str(kwargs.get("fault", ""))
        self._seed = seed or 0
        kept = str(uuid.uuid4()) if self._fault == "forgets-id" else episode_id or str(uuid.uuid4())
        self._state = State(episode_id=kept, step_count=0)
        return LedgerObservation(entries=0, reward=0.0, done=False, metadata={"seed": seed})

    def step(self, action: LedgerAction, timeout_s: float | None = None, **kwargs: Any) -> LedgerObservation:
        if self._fault == "picky":
            raise ValueError(f"move {action.move} is not to my taste, " + "no, " * 100)
        length = 1 if self._fault == "short" else 3
        if self._state.step_count >= length:  # after the end
            if self._fault == "done-again":
                return LedgerObservation(entries=length, reward=0.0, done=True)
            if self._fault == "slow-after-end":
                time.sleep(3)
            raise ValueError("the episode is over: reset first")
        self._state.step_count += 1
        if self._fault == "drifts-id":
            self._state.episode_id = str(uuid.uuid4())
        return LedgerObservation(
            entries=self._state.step_count,
            reward=float(self._seed) if self._fault == "pays-seed" else 1.0 if self._fault else 0.0,
            done=self._state.step_count == length,
        )

    @property
    def state(self) -> Any:
        if self._fault == "no-state":
            raise RuntimeError("the ledger is locked")
        episode_id, count = self._state.episode_id, self._state.step_count
        if self._fault == "uncounted" or (self._fault == "counted-late" and count == 0):
            return UncountedState(episode_id=episode_id)
        if self._fault == "wordy":
            return WordyState(episode_id=episode_id, step_count=["none", "one", "two", "three"][count])
        if self._fault == "stuck":
            return State(episode_id=episode_id, step_count=0)
        if self._fault == "double":
            return State(episode_id=episode_id, step_count=2 * count)
        return self._state


class TallyAction(Action):
    count: int


class TallyObservation(Observation):
    total: int = 0


class TallyEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._total = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TallyObservation:
        self._total = 0
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return TallyObservation(total=0, reward=0.0, done=False)

    def step(self, action: TallyAction, timeout_s: float | None = None, **kwargs: Any) -> TallyObservation:
        self._state.step_count += 1
        self._total += action.count
        reward = 1.0 if action.count % 2 == 0 else 0.0
        return TallyObservation(total=self._total, reward=reward, done=self._state.step_count >= 5)

    @property
    def state(self) -> State:
        return self._state


class NumpyEnvironment(TallyEnvironment):
    """Puts numpy's int64 in its reset's metadata, which the framework cannot serialise: every reset
    fails (as the official sumo_rl_env's does at the conformance commit, with gymnasium's ``Discrete.n``)."""

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TallyObservation:
        import numpy as np

        observation = super().reset(seed, episode_id, **kwargs)
        observation.metadata = {"phases": np.int64(4)}
        return observation


ENVS = {
    "numpy": (NumpyEnvironment, TallyAction, TallyObservation),
    "pile": (PileEnvironment, PileAction, PileObservation),
    "tally": (TallyEnvironment, TallyAction, TallyObservation),
    "liar": (LiarEnvironment, LiarAction, LiarObservation),
    "shifty": (ShiftyEnvironment, ShiftyAction, ShiftyObservation),
    "ledger": (LedgerEnvironment, LedgerAction, LedgerObservation),
    "parrot": (ParrotEnvironment, ParrotAction, ParrotObservation),
    "counter": (CounterEnvironment, CounterAction, CounterObservation),
    "kitchen": (KitchenEnvironment, KitchenAction, KitchenObservation),
    "dice": (DiceEnvironment, DiceAction, DiceObservation),
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
