"""Schemathesis, a fuzzer from the field, drives every route of each of our servers from its own OpenAPI
document: cases that follow the schema and cases that break it (wrong types, missing fields, huge and
odd values), each checked for a status the document declares, a body and headers that match it, no
500, no traceback, and no reply over the server's ``--max-reply-bytes``; meanwhile a session opened
before the fuzz must go on afterwards, as must ``/health``.

Two of Schemathesis's checks are left out, for reasons of the schema language, not of the servers: a
schema cannot say which strings are legal chess moves or FENs, or which Atari modes a game has, so valid
by the schema is not always accepted (``positive_data_acceptance``); and the framework's models read
JSON as pydantic's lax mode does (``false`` is a seed of 0), so not every value outside the schema is
refused (``negative_data_rejection``). The one 5xx a route may send by design, 501 from the task routes
of an environment without tasks and 504 from a step past ``--step-timeout``, is declared.
``OPENENV_LAB_FUZZ_EXAMPLES`` sets the examples per route.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")
requests = pytest.importorskip("requests")  # schemathesis's own HTTP client

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
)
from schemathesis.generation import GenerationMode  # noqa: E402

from openenv_lab.client import Session  # noqa: E402
from openenv_lab.launch import EmbeddedServer, shared_embedded_server  # noqa: E402
from openenv_lab.servers import DEFAULT_MAX_REPLY_BYTES, ServeOptions  # noqa: E402
from tests.fuzzing import TRACEBACK  # noqa: E402

EXAMPLES = int(os.environ.get("OPENENV_LAB_FUZZ_EXAMPLES", "100"))
#: The servers fuzzed: each family, echo with its MCP tools, and a bystander's first step on each.
FAMILIES = {
    "chess": ({}, {"move": "e2e4"}),
    "echo": ({}, {"message": "hi"}),
    "echo_mcp": ({"mcp": True}, {"tool_name": "echo_message", "arguments": {"message": "hi"}}),
    "finrl": ({}, {"actions": [0.0] * 5}),
    "atari": ({}, {"action_id": 0}),
    "gymnasium": ({"env_id": "MountainCarContinuous-v0"}, {"action": [0.5]}),  # a Box action's bounds
}
#: The 5xx statuses a route sends by design, and the routes that do.
BY_DESIGN = {501: "/{env_name}/", 504: "/step"}


def fuzz(url: str, headers: dict[str, str] | None = None) -> int:
    """Fuzz every operation of the server at ``url``; the number of cases sent."""
    schema = schemathesis.openapi.from_url(url + "/openapi.json", headers=headers or {}, timeout=30)
    with requests.Session() as session:  # closed here: a session left to the collector warns of its socket
        return _fuzz(schema, session, headers)


def _fuzz(schema: Any, session: Any, headers: dict[str, str] | None) -> int:
    sent = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        takes_input = bool(list(operation.iter_parameters()) or operation.get_request_payload_content_types())
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)[: 2 if takes_input else 1]:

            @settings(
                max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                nonlocal sent
                response = case.call(session=session, headers=headers, timeout=60)
                sent += 1
                status, body = response.status_code, response.content
                declared = BY_DESIGN.get(status)
                assert status < 500 or (declared is not None and declared in case.path), (status, body[:300])
                assert TRACEBACK not in body.decode("utf-8", "replace"), body[:300]
                assert len(body) <= DEFAULT_MAX_REPLY_BYTES
                case.validate_response(
                    response,
                    headers=headers,
                    excluded_checks=[not_a_server_error, positive_data_acceptance, negative_data_rejection],
                )

            check()
    return sent


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_schemathesis_finds_nothing_wrong_and_no_session_is_harmed(family):
    options, action = FAMILIES[family]
    url = shared_embedded_server(family.removesuffix("_mcp"), **options).start()
    with Session(url) as bystander:
        bystander.reset(seed=0)
        assert fuzz(url) >= EXAMPLES  # every operation, both modes: far more than EXAMPLES in all
        bystander.step(action)  # answered, not an error: the session outlived the fuzz
        assert httpx.get(url + "/health", timeout=10).json()["status"] == "healthy"


@pytest.mark.slow
def test_behind_a_token_the_document_declares_the_bearer_scheme_and_the_fuzz_passes_with_it():
    server = EmbeddedServer("echo", token="sesame", serve_options=ServeOptions())
    url = server.start()
    try:
        bearer = {"Authorization": "Bearer sesame"}
        document = httpx.get(url + "/openapi.json", headers=bearer, timeout=10).json()
        assert document["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
        for path, operations in document["paths"].items():
            for method, operation in operations.items():
                if (path, method) == ("/health", "get"):
                    assert "401" not in operation["responses"] and "security" not in operation
                else:
                    assert "401" in operation["responses"] and operation["security"] == [{"bearer": []}]
        assert httpx.get(url + "/openapi.json", timeout=10).status_code == 401
        assert fuzz(url, {"Authorization": "bearer sesame"}) > 0  # the scheme's name in any case (RFC 7235)
    finally:
        server.stop()
