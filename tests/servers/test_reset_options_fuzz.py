"""Every family's reset options, driven with values drawn from their types by hypothesis: in and just out of
their ranges, huge, negative, zero, NaN and infinities, the wrong type, long text and deep nesting. Over
a WebSocket session and over HTTP, each reset gets an observation or a clean error (never a 500, never a
traceback, never a reply over the server's ``--max-reply-bytes``), and a bystander session of the same
server, stepping all the while, is never refused, never dropped and never kept waiting for seconds.

The options come from the catalogue (`BundledServer.reset_options`), so an option added there is fuzzed
here with no change. The chess opponent ``stockfish`` is left out of the draws: its deepest search (30
plies, within its range) takes tens of seconds here, which is its documented cost, not a fault, and the
no-stall tests cover slow work. ``OPENENV_LAB_FUZZ_EXAMPLES`` sets the examples per family.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from openenv_lab.client import Session
from openenv_lab.launch import EmbeddedServer
from openenv_lab.preprocessing import RANGES as PREPROCESSING_RANGES
from openenv_lab.servers import BUNDLED_SERVERS, ServeOptions, ServerOption
from tests.fuzzing import TRACEBACK

EXAMPLES = int(os.environ.get("OPENENV_LAB_FUZZ_EXAMPLES", "100"))
#: A reply limit below Atari's largest screens (a 512 x 512 RGB screen as JSON is about 3 MB), so that
#: the fuzz meets refusals of size as well as of range.
MAX_REPLY = 1_000_000
#: Each family's first action, for the bystander.
ACTIONS = {
    "chess": None,  # a legal move of the position, chosen as it plays
    "echo": {"message": "hi"},
    "finrl": {"actions": [0.0] * 5},
    "atari": {"action_id": 0},
}
#: Values an option of any type may be sent instead of its own.
WRONG = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.just("x" * 20_000)
    | st.lists(st.integers(), max_size=4)
    | st.dictionaries(st.text(max_size=6), st.integers(), max_size=3)
    | st.integers(min_value=1, max_value=200).map(lambda depth: json.loads("[" * depth + "]" * depth))
)


def numbers(low: float, high: float, integer: bool) -> st.SearchStrategy[Any]:
    """In the range, at its ends and just past them, zero, negative and huge."""
    edges = [low, high, low - 1, high + 1, 0, -1, 2**63, 2**64, 10**30, -(10**30)]
    if integer:
        inside = st.integers(min_value=int(low), max_value=int(min(high, 2**64)))
        return inside | st.sampled_from([int(v) for v in edges])
    inside = st.floats(min_value=low, max_value=high)
    return inside | st.sampled_from([float(v) for v in edges] + [math.nan, math.inf, -math.inf, 1e-320])


def values(option: ServerOption) -> st.SearchStrategy[Any]:
    """Values for ``option``: those of its type (mostly), and any other."""
    if option.range is not None:
        own = numbers(option.range.low, option.range.high, option.range.integer)
    elif option.choices is not None:
        allowed = [c for c in option.choices if c != "stockfish"]
        own = st.sampled_from(allowed) | st.text(max_size=12)
    elif option.type is bool:
        own = st.booleans()
    elif option.type is int:  # bounded by something else (a game's modes, a split's size)
        own = st.integers(min_value=-3, max_value=40) | st.integers(min_value=-(2**70), max_value=2**70)
    elif option.name == "preprocessing":
        own = preprocessing()
    elif option.name == "game":
        own = st.sampled_from(["pong", "breakout", "space_invaders", "Pong", "pong-v5"]) | st.text(
            max_size=12
        )
    elif option.name == "split":
        own = st.sampled_from(["mate_in_1", "mate_in_2", "train", "nope"]) | st.text(max_size=12)
    else:  # text: a FEN, say
        own = st.sampled_from(["8/8/8/8/8/8/8/K6k w - - 0 1", "garbage"]) | st.text(max_size=80)
    return st.one_of(own, own, own, WRONG)  # mostly its own type: the range checks are the point


def preprocessing() -> st.SearchStrategy[Any]:
    size = numbers(PREPROCESSING_RANGES["screen_size"].low, PREPROCESSING_RANGES["screen_size"].high, True)
    settings_ = {
        "noop_max": numbers(PREPROCESSING_RANGES["noop_max"].low, PREPROCESSING_RANGES["noop_max"].high, True)
        | WRONG,
        "frame_skip": numbers(1, PREPROCESSING_RANGES["frame_skip"].high, True) | WRONG,
        "screen_size": size | st.lists(size, min_size=1, max_size=3) | WRONG,
        "terminal_on_life_loss": st.booleans() | WRONG,
        "grayscale_obs": st.booleans() | WRONG,
    }
    return st.fixed_dictionaries({}, optional=settings_) | WRONG


def reset_bodies(family: str) -> st.SearchStrategy[dict[str, Any]]:
    options = {option.name: values(option) for option in BUNDLED_SERVERS[family].reset_options}
    options["episode_id"] = st.text(max_size=20) | WRONG
    if family == "atari":  # preprocessing needs frameskip=1: draw it often, so preprocessing runs
        options["frameskip"] = st.just(1) | options["frameskip"]
    return st.fixed_dictionaries({}, optional=options)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    started = {
        family: EmbeddedServer(family, serve_options=ServeOptions(max_reply_bytes=MAX_REPLY))
        for family in ACTIONS
    }
    try:
        yield {family: server.start() for family, server in started.items()}
    finally:
        for server in started.values():
            server.stop()


class Bystander:
    """A session stepping in a thread of its own while the fuzz runs: every round trip timed, every
    failure kept."""

    def __init__(self, url: str, action: dict[str, Any] | None) -> None:
        self.session = Session(url)
        self.action = action
        self.round_trips: list[float] = []
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Bystander:
        self.session.reset(seed=0)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        self.session.close()

    def _run(self) -> None:
        result = self.session.reset(seed=0)
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                if result.done:
                    result = self.session.reset(seed=0)
                else:
                    action = self.action or {"move": result.observation["legal_moves"][0]}
                    result = self.session.step(action)
            except Exception as exc:  # kept, to fail the test with it
                self.failures.append(exc)
                return
            self.round_trips.append(time.perf_counter() - started)
            time.sleep(0.02)


def check_reply(raw: str | bytes) -> dict[str, Any]:
    assert len(raw) <= MAX_REPLY, len(raw)
    reply = json.loads(raw)
    assert reply["type"] in ("observation", "error"), reply
    if reply["type"] == "error":
        message = reply["data"]["message"]
        assert message and TRACEBACK not in message, message
    return reply


@pytest.mark.slow
@pytest.mark.parametrize("family", list(ACTIONS))
def test_reset_options_drawn_from_their_types_never_break_the_server_nor_harm_a_session(servers, family):
    url = servers[family]
    with (
        Bystander(url, ACTIONS[family]) as bystander,
        connect(url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=30) as ws,
    ):
        seen = {"observation": 0, "error": 0}
        largest = BUNDLED_SERVERS[family].max_message_bytes

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
            database=None,
        )
        @given(body=reset_bodies(family), over_http=st.booleans())
        def check(body: dict[str, Any], over_http: bool) -> None:
            message = json.dumps({"type": "reset", "data": body})
            assume(len(message) <= largest)  # larger ones close the connection, by design (test_limits)
            ws.send(message)
            seen[check_reply(ws.recv(timeout=120))["type"]] += 1
            if over_http:
                headers = {"content-type": "application/json"}  # NaN and Infinity as Python writes them
                response = httpx.post(url + "/reset", content=json.dumps(body), headers=headers, timeout=120)
                assert response.status_code < 500, (response.status_code, response.text[:300])
                assert len(response.content) <= MAX_REPLY and TRACEBACK not in response.text

        check()
    assert seen["observation"] and seen["error"], seen  # the draws reach both sides of the checks
    assert not bystander.failures, bystander.failures
    assert len(bystander.round_trips) >= 10, len(bystander.round_trips)
    # Unharmed: a round trip is milliseconds; a stalled server kept the official one waiting 71 s.
    assert max(bystander.round_trips) < 5, sorted(bystander.round_trips)[-5:]
