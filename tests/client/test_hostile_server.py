"""Our client against a hostile server: only documented exceptions, and never a wait past its timeouts.

`tests.fuzzing.HostileServer` stands in front of a real echo server on loopback and mutates its replies
(garbage, other JSON, NaN and Infinity, wrong types, truncated, enormous, binary, late, missing, a close,
a frame cut off mid-message) as a plan drawn by hypothesis says. Single envs, vector envs on our batch
route (driven by the calling thread) and on plain ``/ws`` connections (driven by the event loop) are
each made and stepped through it. Every call either works or raises an `OpenEnvError`, within its
timeouts. ``OPENENV_LAB_FUZZ_EXAMPLES`` sets the examples per case; ``benchmarks/fuzz.py`` runs 10,000+.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from openenv_lab.launch import shared_embedded_server
from tests.fuzzing import SCENARIOS, TIMEOUTS, HostileServer, Mutation, plans, run_scenario

EXAMPLES = int(os.environ.get("OPENENV_LAB_FUZZ_EXAMPLES", "100"))


@pytest.fixture(scope="module")
def hostile():
    with HostileServer(shared_embedded_server("echo").start()) as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_mutation_alone_is_survived_or_a_documented_error(hostile, scenario):
    for kind in ("pass", "garbage", "nan", "truncate", "huge", "binary", "late", "silence", "close", "cut"):
        outcome = run_scenario(hostile, scenario, [Mutation("pass"), Mutation(kind, "x")], [])
        assert outcome.slowest <= outcome.bound, (kind, outcome)
        if kind in ("pass", "late"):
            assert outcome.error is None, (kind, outcome)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_fuzzed_replies_give_only_documented_errors_within_the_timeouts(hostile, scenario):
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(replies=plans, http=plans)
    def check(replies, http):
        outcome = run_scenario(hostile, scenario, replies, http[:2] if len(http) > 6 else [])
        assert outcome.slowest <= outcome.bound, outcome

    check()


def test_the_timeouts_are_short_enough_for_a_fuzz():
    assert TIMEOUTS.request < 1 and TIMEOUTS.request > HostileServer.LATE


def test_an_observation_field_of_the_wrong_type_is_a_protocol_error(hostile):
    # found by the fuzz: echo's message_length as "" made the generic adapter raise ValueError
    replies = [Mutation("pass"), Mutation("pass"), Mutation("pass"), Mutation("retype", "", 0.82)]
    outcome = run_scenario(hostile, "single env", replies, [Mutation("pass")])
    assert outcome.error == "ProtocolError", outcome


def test_a_schema_whose_parts_have_the_wrong_types_is_a_protocol_error(hostile):
    # found by the fuzz at 3,400 examples: the generic adapter crashed reading such a /schema
    broken = {"action": {"properties": 5}, "observation": {"properties": None}, "state": {}}
    http = [Mutation("json", broken)] * 6  # whatever the env reads, it reads this
    outcome = run_scenario(hostile, "single env", [Mutation("pass")], http)
    assert outcome.error == "ProtocolError" and "cannot read" in outcome.detail, outcome
