"""What the fuzz tests share with ``benchmarks/fuzz.py``: strategies for hostile input, both directions.

Server side: JSON values of every awkward kind (infinities, NaN, huge integers, deep nesting), valid
requests with one value replaced, and sequences of WebSocket messages in any order (a step before any
reset, a close in the middle, a batch with holes or repeated sessions).

Client side: `HostileServer`, a server that stands in front of a real one of ours on loopback and
answers our client with the real replies, mutated as a plan drawn by hypothesis says: garbage text,
other JSON, NaN and Infinity, a field of the wrong type, a truncated message, an enormous one, a binary
frame, a late reply, no reply, a close, or a frame cut off mid-message.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import httpx
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Response
from websockets.sync.client import connect as sync_connect

import openenv_lab  # noqa: F401  # registers openenv/*
from openenv_lab.client import OpenEnvError, Timeouts

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value where another value could go."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            found += _paths(value, (*prefix, k))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of JSON ``value`` with the value at ``path`` replaced by ``new``."""
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


def mutated(valid: Any) -> st.SearchStrategy[Any]:
    """``valid`` (a JSON object) with one value at any depth replaced by arbitrary JSON, or a key added."""
    places = [*_paths(valid), ("unexpected",)]
    return st.builds(replaced, st.just(valid), st.sampled_from(places), json_values)


def bodies(valid: Any) -> st.SearchStrategy[bytes]:
    """HTTP bodies: arbitrary JSON, ``valid`` mutated, or raw bytes."""
    return (
        json_values.map(lambda v: json.dumps(v, allow_nan=True).encode())
        | mutated(valid).map(lambda v: json.dumps(v, allow_nan=True).encode())
        | st.binary(max_size=200)
    )


def ws_messages(valid: dict[str, Any]) -> st.SearchStrategy[str | bytes]:
    """One WebSocket message for ``/ws``: a valid request (``valid`` maps a type to its data), one
    mutated, any JSON, any text, or a binary frame."""
    requests = [
        {"type": kind} if data is None else {"type": kind, "data": data} for kind, data in valid.items()
    ]
    requests.append({"type": "close"})
    return (
        st.sampled_from(requests).map(json.dumps)
        | st.sampled_from(requests).flatmap(mutated).map(lambda v: json.dumps(v, allow_nan=True))
        | json_values.map(lambda v: json.dumps(v, allow_nan=True))
        | st.text(max_size=60)
        | st.binary(max_size=60)
    )


def batch_messages(valid: dict[str, Any], sessions: int) -> st.SearchStrategy[str | bytes]:
    """One WebSocket message for ``/ws/batch?sessions=N``: batches with entries for any sessions (holes,
    repeats, indices out of range), entries mutated, or anything ``ws_messages`` sends."""
    entry = st.builds(
        lambda session, kind: {"session": session, "type": kind, "data": valid.get(kind)},
        st.integers(min_value=-1, max_value=sessions),
        st.sampled_from([*valid, "close"]),
    )
    entries = st.lists(entry | entry.flatmap(mutated), max_size=sessions + 1)
    batch = entries.map(lambda e: json.dumps({"type": "batch", "data": e}, allow_nan=True))
    return batch | ws_messages(valid)


#: Valid WebSocket requests of each server family: ``type`` -> ``data`` (None: no ``data``).
WS_VALID: dict[str, dict[str, Any]] = {
    "chess": {"reset": {"seed": 1}, "step": {"move": "e2e4"}, "state": None},
    "echo": {"reset": {"seed": 1}, "step": {"message": "hi"}, "state": None},
    "finrl": {"reset": {"seed": 1}, "step": {"actions": [0.1, 0, 0, 0, 0]}, "state": None},
    "atari": {"reset": {"seed": 1}, "step": {"action_id": 0}, "state": None},
    "echo_mcp": {
        "reset": {},
        "step": {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "x"}},
        "state": None,
        "mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
    },
}

#: The close codes a server may end a fuzzed connection with: normal (after a close, or a fatal error
#: it reported), policy (a limit), message too big.
CLEAN_CLOSES = frozenset({1000, 1008, 1009})
REPLY_TYPES = frozenset({"observation", "state", "error", "batch", "mcp"})


#: How a Python traceback starts: a reply must never hold one (unless the request itself did).
TRACEBACK = "Traceback (most recent call last)"


def _strict(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def reply_label(raw: str | bytes) -> str:
    """Check one server reply (strict JSON, a known type, no traceback) and say what it was."""
    assert isinstance(raw, str), f"a binary reply: {raw[:100]!r}"
    assert TRACEBACK not in raw, raw[:500]
    value = json.loads(raw, parse_constant=_strict)
    assert isinstance(value, dict) and value.get("type") in REPLY_TYPES, raw[:300]
    if value["type"] == "batch":
        entries = value.get("data")
        assert isinstance(entries, list), raw[:300]
        for entry in entries:
            assert isinstance(entry, dict) and entry.get("type") in REPLY_TYPES, raw[:300]
    if value["type"] == "error":
        return f"error {value.get('data', {}).get('code')}"
    return str(value["type"])


def exchange(url: str, route: str, sequence: list[str | bytes], timeout: float = 10.0) -> list[str]:
    """Send ``sequence`` over one connection to ``route``, checking each reply; what came back, in order.

    Every message but a close must get a reply within ``timeout``; the server may end the connection,
    with a clean code only.
    """
    seen = []
    target = "ws" + url.removeprefix("http") + route
    with sync_connect(target, open_timeout=10, max_size=None) as ws:
        for message in sequence:
            try:
                ws.send(message)
                raw = ws.recv(timeout=timeout)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                assert code in CLEAN_CLOSES, f"closed with {code} after {message!r:.200}"
                seen.append(f"closed {code}")
                return seen
            except TimeoutError:
                raise AssertionError(f"no reply within {timeout:g} s to {message!r:.200}") from None
            seen.append(reply_label(raw))
    return seen


# ---------------------------------------------------------------------------------------- client side

#: What `HostileServer` may do with a reply instead of passing it on.
MUTATIONS = (
    "pass",
    "garbage",
    "json",
    "retype",
    "nan",
    "truncate",
    "huge",
    "binary",
    "late",
    "silence",
    "close",
    "cut",
)


@dataclass(frozen=True)
class Mutation:
    """What to do with one reply (``kind``), with what it needs (text, a value, a fraction, a code)."""

    kind: str
    value: Any = None
    fraction: float = 0.5
    code: int = 1000

    def __repr__(self) -> str:
        return f"Mutation({self.kind!r}, {self.value!r:.60}, {self.fraction:.2f}, {self.code})"


mutations = st.builds(
    Mutation,
    kind=st.sampled_from(MUTATIONS),
    value=json_values | st.text(max_size=80),
    fraction=st.floats(min_value=0.0, max_value=1.0),
    code=st.sampled_from([1000, 1001, 1008, 1011, 4000]),
)
#: Plans: what happens to each reply in turn (HTTP answers pass untouched unless ``http`` mutates them).
plans = st.lists(mutations, min_size=1, max_size=8)


@dataclass
class _Plan:
    replies: collections.deque[Mutation] = field(default_factory=collections.deque)
    http: collections.deque[Mutation] = field(default_factory=collections.deque)


class HostileServer:
    """A server on loopback in front of ``upstream`` (a real server of ours) that mutates its replies.

    HTTP GETs are answered with the upstream's reply (mutated by the ``http`` plan, else untouched);
    WebSocket messages are passed to an upstream connection of the same route, and its replies are
    mutated by the plan, one `Mutation` per reply, then passed on untouched once the plan is spent.

    Example:
        >>> from openenv_lab.client import Session
        >>> from openenv_lab.launch import shared_embedded_server
        >>> with HostileServer(shared_embedded_server("echo").base_url) as hostile:
        ...     hostile.plan([Mutation("garbage", "not json")])  # the reply to the session's first request
        ...     Session(hostile.url)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        openenv_lab.client.errors.ProtocolError: ...
    """

    #: Seconds a "late" reply waits (under the client timeouts the tests use).
    LATE = 0.1
    #: Size of a "huge" reply.
    HUGE = 2 << 20

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._plan = _Plan()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="hostile-server", daemon=True)
        self.url = ""

    def plan(self, replies: list[Mutation], http: list[Mutation] | None = None) -> None:
        """What to do with the next replies (WebSocket) and HTTP answers, in order."""
        with self._lock:
            self._plan = _Plan(collections.deque(replies), collections.deque(http or []))

    def _next(self, kind: str) -> Mutation:
        with self._lock:
            queue = self._plan.http if kind == "http" else self._plan.replies
            return queue.popleft() if queue else Mutation("pass")

    def __enter__(self) -> HostileServer:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the hostile server did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:  # an unclosed loop is a ResourceWarning in whichever later test collects it
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with httpx.AsyncClient(timeout=10) as http:
            self._http = http
            async with serve(
                self._session, "127.0.0.1", 0, process_request=self._answer_http, max_size=None
            ) as server:
                port = server.sockets[0].getsockname()[1]
                self.url = f"http://127.0.0.1:{port}"
                self._started.set()
                await self._stop.wait()

    async def _answer_http(self, connection: ServerConnection, request: Any) -> Response | None:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        upstream = await self._http.get(self.upstream + request.path)
        body = upstream.content
        status = upstream.status_code
        mutation = self._next("http")
        if mutation.kind != "pass":
            status, body = _mutate_http(mutation, status, body)
        headers = Headers(  # this server answers one HTTP request per connection, and says so
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ]
        )
        return Response(status, "", headers, body)

    async def _session(self, client: ServerConnection) -> None:
        target = "ws" + self.upstream.removeprefix("http") + client.request.path
        try:
            async with connect(target, max_size=None, open_timeout=10) as upstream:
                async for message in client:
                    await upstream.send(message)
                    reply = await upstream.recv()
                    if not await self._reply(client, self._next("ws"), reply):
                        return
        except Exception:  # the client left, or the upstream refused: end this connection
            with contextlib.suppress(Exception):
                await client.close()

    async def _reply(self, client: ServerConnection, mutation: Mutation, reply: str | bytes) -> bool:
        """Send ``reply`` as ``mutation`` says; False when the connection is to end."""
        text = reply if isinstance(reply, str) else reply.decode("utf-8", "replace")
        kind = mutation.kind
        if kind == "silence":
            return True
        if kind == "close":
            await client.close(mutation.code, "hostile close")
            return False
        if kind == "cut":  # a frame header announcing more bytes than follow, then the TCP connection ends
            client.transport.write(b"\x81\x7e\x01\x00" + text.encode()[:100])
            client.transport.abort()
            return False
        if kind == "late":
            await asyncio.sleep(self.LATE)
        elif kind == "binary":
            await client.send(text.encode())
            return True
        await client.send(_mutate_text(mutation, text))
        return True


def _mutate_text(mutation: Mutation, text: str) -> str:
    kind = mutation.kind
    if kind in ("pass", "late"):
        return text
    if kind == "garbage":
        return str(mutation.value)
    if kind == "json":
        return json.dumps(mutation.value, allow_nan=True)
    if kind == "truncate":
        return text[: int(len(text) * mutation.fraction)]
    if kind == "huge":
        return '{"type": "observation", "data": "' + "x" * HostileServer.HUGE + '"}'
    try:
        value = json.loads(text)
    except ValueError:
        return text
    places = _paths(value)
    if not places:
        return text
    place = random.Random(mutation.fraction).choice(places)
    new = float("nan") if kind == "nan" else mutation.value
    if kind == "nan" and mutation.code % 2:
        new = float("inf") if mutation.fraction > 0.5 else float("-inf")
    return json.dumps(replaced(value, place, new), allow_nan=True)


def _mutate_http(mutation: Mutation, status: int, body: bytes) -> tuple[int, bytes]:
    if mutation.kind == "close":
        return 500 + mutation.code % 4, b'{"detail": "hostile"}'
    if mutation.kind in ("silence", "cut"):
        return 404, b"not here"
    return status, _mutate_text(mutation, body.decode("utf-8", "replace")).encode()


#: The client's timeouts against a hostile server: short, so that a fuzz of silences stays quick.
TIMEOUTS = Timeouts(connect=1.0, request=0.3, close=0.3)


@dataclass(frozen=True)
class Outcome:
    """How one scenario ended: the documented error it raised (None: it worked), and how long its
    slowest call took beside the longest any call may take."""

    error: str | None
    slowest: float
    bound: float
    detail: str = ""


def _single(url: str, timed: Callable[..., Any]) -> None:
    env = timed(gym.make, "openenv/echo", base_url=url, timeouts=TIMEOUTS)
    try:
        timed(env.reset, seed=0)
        for word in ("a", "bc", "def"):
            timed(env.step, word)
    finally:
        timed(env.close)


def _vector(url: str, timed: Callable[..., Any], multiplex: bool) -> None:
    envs = timed(
        gym.make_vec, "openenv/echo", num_envs=2, base_url=url, timeouts=TIMEOUTS, multiplex=multiplex
    )
    try:
        timed(envs.reset, seed=0)
        for words in (("a", "b"), ("cd", "ef")):
            timed(envs.step, words)
    finally:
        timed(envs.close)


#: The ways the fuzz drives our client: a single env, a vector env over our batch route (the calling
#: thread reads it), and one over plain /ws connections (the event loop thread reads them).
SCENARIOS: dict[str, Callable[[str, Callable[..., Any]], None]] = {
    "single env": _single,
    "vector env, /ws/batch": lambda url, timed: _vector(url, timed, True),
    "vector env, /ws": lambda url, timed: _vector(url, timed, False),
}


def run_scenario(
    hostile: HostileServer, scenario: str, replies: list[Mutation], http: list[Mutation]
) -> Outcome:
    """Run ``scenario`` through ``hostile`` with the given plans; a non-documented exception propagates."""
    hostile.plan(replies, http)
    slowest = 0.0

    def timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal slowest
        started = time.monotonic()
        try:
            return call(*args, **kwargs)
        finally:
            slowest = max(slowest, time.monotonic() - started)

    # A call makes at most a few requests in a row (making an env: its HTTP reads, then the upgrade).
    bound = TIMEOUTS.connect + 4 * TIMEOUTS.request + TIMEOUTS.close + 1.5
    try:
        SCENARIOS[scenario](hostile.url, timed)
    except OpenEnvError as exc:
        return Outcome(type(exc).__name__, slowest, bound, str(exc)[:200])
    except ValueError as exc:  # documented too: an action outside the space the server's schema gave
        if "is not in the action space" not in str(exc):
            raise
        return Outcome("ValueError (action not in the space)", slowest, bound, str(exc)[:200])
    return Outcome(None, slowest, bound)
