"""Bad input over HTTP gets a 4xx with a JSON error, never a 500, and the server stays usable.

The reproductions of the reliability review first, then a property-based fuzz (hypothesis) of the
``/reset``, ``/step`` and task routes of our servers, over loopback: bodies made of arbitrary JSON
(infinities, NaN, huge integers, deep nesting), valid bodies with one value replaced, and raw bytes.
``OPENENV_LAB_FUZZ_EXAMPLES`` sets the examples per route (the suite's default keeps it to seconds).
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openenv_lab.launch import shared_embedded_server
from tests.fuzzing import TRACEBACK, bodies

EXAMPLES = int(os.environ.get("OPENENV_LAB_FUZZ_EXAMPLES", "100"))

REPRODUCTIONS = [
    ("/step", b'{"action": {"move": 1e309}}'),
    ("/reset", b'{"action": 5}'),
    ("/reset", b'{"seed": 1e400}'),
    ("/step", b'{"action": [1e309]}'),
    ("/reset", b'{"fen": "garbage"}'),
    ("/reset", b'{"split": "mate_in_1"}'),
    ("/reset", b'{"split": "mate_in_1", "index": 1e309}'),
    ("/chess/task", b'{"split": "nope", "index": 0}'),
    ("/chess/tasks", b'{"split": "nope"}'),
    ("/chess/task_range", b'{"split": "mate_in_1", "start": "a"}'),
    ("/step", b"not json at all"),
    ("/reset", b"[1, 2, 3]"),
]


@pytest.fixture(scope="module")
def servers() -> dict[str, str]:
    return {
        "chess": shared_embedded_server("chess").start(),
        "echo": shared_embedded_server("echo").start(),
        "finrl": shared_embedded_server("finrl").start(),
        "atari": shared_embedded_server("atari").start(),
        "echo_mcp": shared_embedded_server("echo", mcp=True).start(),
    }


def post(url: str, path: str, body: bytes) -> httpx.Response:
    return httpx.post(url + path, content=body, headers={"content-type": "application/json"}, timeout=30)


def refuse(constant: str) -> None:
    raise AssertionError(f"the reply holds {constant}, which is not JSON")


def assert_refused_cleanly(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:300])
    payload = json.loads(response.text, parse_constant=refuse)  # strict JSON: no Infinity or NaN tokens
    if response.status_code >= 400:
        assert "detail" in payload, payload
        assert TRACEBACK not in response.text  # the word alone may be an echo of the request's keys


@pytest.mark.slow
@pytest.mark.parametrize(("path", "body"), REPRODUCTIONS, ids=[f"{p} {b[:30]!r}" for p, b in REPRODUCTIONS])
def test_the_reported_bad_requests_get_a_4xx_with_json(servers, path, body):
    response = post(servers["chess"], path, body)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert_refused_cleanly(response)
    assert httpx.get(servers["chess"] + "/health", timeout=10).json()["status"] == "healthy"


def test_an_environments_refusal_says_why(servers):
    response = post(servers["chess"], "/reset", b'{"action": 5}')
    assert response.status_code == 400 and response.json()["error"] == "ValueError"
    assert "Unknown reset option(s) ['action']" in response.json()["detail"]


VALID = {
    "chess": {"/reset": {"seed": 1}, "/step": {"action": {"move": "e2e4"}}},
    "echo": {"/reset": {"seed": 1}, "/step": {"action": {"message": "hi"}}},
    "finrl": {"/reset": {"seed": 1}, "/step": {"action": {"actions": [0.1, 0, 0, 0, 0]}}},
    "atari": {"/reset": {"seed": 1}, "/step": {"action": {"action_id": 0}}},
    "echo_mcp": {
        "/reset": {},
        "/step": {
            "action": {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "x"}}
        },
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("family", list(VALID))
@pytest.mark.parametrize("path", ["/reset", "/step"])
def test_fuzzed_requests_never_get_a_5xx(servers, family, path):
    url = servers[family]

    @settings(
        max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(body=bodies(VALID[family][path]))
    def check(body: bytes) -> None:
        assert_refused_cleanly(post(url, path, body))

    check()
    assert httpx.get(url + "/health", timeout=10).json()["status"] == "healthy"


@pytest.mark.slow
def test_fuzzed_task_requests_never_get_a_5xx(servers):
    url = servers["chess"]
    valid = {"split": "mate_in_1", "index": 0, "start": 0, "stop": 3}

    routes = st.sampled_from(["/chess/task", "/chess/tasks", "/chess/num_tasks", "/chess/task_range"])

    @settings(max_examples=EXAMPLES, deadline=None)
    @given(path=routes, body=bodies(valid))
    def check(path: str, body: bytes) -> None:
        assert_refused_cleanly(post(url, path, body))

    check()
