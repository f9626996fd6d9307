"""Fuzzed WebSocket messages never break our servers: every reply is strict JSON, no traceback leaks, no
session is left behind, and a fresh client is served afterwards.

Each example is one connection to ``/ws`` or ``/ws/batch`` of a server family, carrying a sequence of
messages drawn by hypothesis (`tests.fuzzing`): valid requests in any order (a step before any reset, a
close in the middle), requests with one value replaced, batches with holes, repeats and unknown
sessions, any JSON, any text, binary frames. ``OPENENV_LAB_FUZZ_EXAMPLES`` sets the examples per route;
``benchmarks/fuzz.py`` runs 10,000+ and counts what the servers answered.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openenv_lab.client import Client, Session
from openenv_lab.launch import shared_embedded_server
from tests.fuzzing import WS_VALID, batch_messages, exchange, ws_messages
from tests.helpers import wait_for

EXAMPLES = int(os.environ.get("OPENENV_LAB_FUZZ_EXAMPLES", "100"))


@pytest.fixture(scope="module")
def servers() -> dict[str, str]:
    options = {"echo_mcp": {"mcp": True}}
    return {
        family: shared_embedded_server(family.removesuffix("_mcp"), **options.get(family, {})).start()
        for family in WS_VALID
    }


@pytest.mark.slow
@pytest.mark.parametrize("family", list(WS_VALID))
@pytest.mark.parametrize("route", ["/ws", "/ws/batch?sessions=2"])
def test_fuzzed_websocket_messages_never_break_the_server(servers, family, route):
    url = servers[family]
    messages = ws_messages(WS_VALID[family]) if route == "/ws" else batch_messages(WS_VALID[family], 2)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(sequence=st.lists(messages, min_size=1, max_size=6))
    def check(sequence):
        exchange(url, route, sequence)  # asserts every reply and close is clean

    check()
    assert wait_for(lambda: Client(url).capacity()["active_sessions"] == 0, 15)  # nothing left behind
    with Session(url) as session:  # and a fresh client is served
        session.reset(seed=0)


@pytest.mark.parametrize("route", ["/ws", "/ws/batch?sessions=1"])
def test_an_infinite_seed_is_refused_in_strict_json(servers, route):
    # found by the fuzz: the echo env reported its seed in metadata, and /ws/batch wrote Infinity back;
    # a seed is now a whole number in range, so the reply is an error, itself strict JSON
    reset = '{"type": "reset", "data": {"seed": Infinity}}'
    if route != "/ws":
        reset = '{"type": "batch", "data": [{"session": 0, "type": "reset", "data": {"seed": Infinity}}]}'
    assert exchange(servers["echo"], route, [reset]) == [
        "error EXECUTION_ERROR" if route == "/ws" else "batch"
    ]
