"""Observations never leave their declared space: text and lists the schema does not bound have no upper
length in their space, samples of such text stay short, and where the schema does bound a field
(``maxLength``, ``maxItems``) the space has exactly that bound and more from a server is a `ProtocolError`
naming the field and both lengths.

Before: an unbounded string was ``UnicodeText(0, 65536)`` on both sides; a sampled action could be 65,536
characters long, a server echoing it sent back more, and the observation fell outside its space.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import openenv_lab  # noqa: F401 - registers the openenv/* ids
from openenv_lab.adapters.schema import SAMPLE_LENGTH, BoundedSequence, field_for
from openenv_lab.client import ProtocolError, StepResult
from openenv_lab.launch import shared_embedded_server
from tests.adapters.test_generic import adapter_for


class Say(BaseModel):
    message: str


class Heard(BaseModel):
    echoed: str
    short: str = Field(max_length=10)
    words: list[str] = Field(default_factory=list)
    few: list[str] = Field(default_factory=list, max_length=3)  # pydantic writes maxItems


def heard(**changes):
    return {"echoed": "hi", "short": "ok", "words": ["a"], "few": ["x"], **changes}


def test_an_unbounded_string_holds_any_length_and_samples_short_ones():
    adapter = adapter_for(Say, Heard, heard())
    echoed, message = adapter.observation_space["echoed"], adapter.action_space  # one field: its space
    assert repr(echoed) == repr(message) == "UnicodeText(0, None)"
    long = "é" * 300_000
    result = adapter.decode(StepResult(heard(echoed=long), 0.0, False, {}), {})
    assert result.observation in adapter.observation_space
    assert long in adapter.action_space  # any length the schema allows
    message.seed(0)
    lengths = [len(message.sample()) for _ in range(500)]
    assert max(lengths) <= SAMPLE_LENGTH and len(set(lengths)) > 50  # short, and not all one length


def test_a_bounded_string_has_exactly_its_bound_and_more_is_the_servers_error():
    adapter = adapter_for(Say, Heard, heard())
    assert repr(adapter.observation_space["short"]) == "UnicodeText(0, 10)"
    with pytest.raises(
        ProtocolError, match=r"short holds 11 characters, more than the schema's maxLength of 10"
    ):
        adapter.decode(StepResult(heard(short="x" * 11), 0.0, False, {}), {})


def test_a_bounded_list_has_exactly_its_bound_and_more_is_the_servers_error():
    adapter = adapter_for(Say, Heard, heard())
    few, words = adapter.observation_space["few"], adapter.observation_space["words"]
    assert isinstance(few, BoundedSequence) and few.max_length == 3
    assert type(words) is spaces.Sequence  # no bound in the schema, none in the space
    assert ("a", "b", "c") in few and ("a", "b", "c", "d") not in few
    few.seed(1)
    assert all(len(few.sample()) <= 3 for _ in range(200))
    with pytest.raises(ProtocolError, match=r"few holds 4 items, more than the schema's maxItems of 3"):
        adapter.decode(StepResult(heard(few=list("abcd")), 0.0, False, {}), {})
    many = adapter.decode(StepResult(heard(words=["w"] * 5_000), 0.0, False, {}), {})
    assert many.observation in adapter.observation_space


# --- any JSON a schema admits decodes into the declared space ------------------------------------------


@st.composite
def schemas_and_values(draw, depth: int = 0):
    """A JSON Schema of strings, numbers, lists and objects (bounded or not), with a value it admits."""
    kinds = ["string", "integer", "number", "boolean"] + (["array", "object"] if depth < 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "string":
        most = draw(st.none() | st.integers(0, 50))
        schema = {"type": "string"} | ({} if most is None else {"maxLength": most})
        return schema, draw(st.text(max_size=most if most is not None else 2_000))
    if kind == "integer":
        return {"type": "integer"}, draw(st.integers(-(2**31), 2**31 - 1))
    if kind == "number":
        return {"type": "number"}, draw(st.floats(allow_nan=False, allow_infinity=False))
    if kind == "boolean":
        return {"type": "boolean"}, draw(st.booleans())
    if kind == "array":
        item, _ = draw(schemas_and_values(depth + 1))
        if item.get("type") != "string":
            item = {"type": "string"} | {k: v for k, v in item.items() if k == "maxLength"}
        most = draw(st.none() | st.integers(0, 6))
        schema = {"type": "array", "items": item} | ({} if most is None else {"maxItems": most})
        size = most if most is not None else 20
        text = st.text(max_size=item.get("maxLength", 200))
        return schema, draw(st.lists(text, max_size=size))
    names = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True))
    fields = {name: draw(schemas_and_values(depth + 1)) for name in names}
    schema = {"type": "object", "properties": {n: s for n, (s, _) in fields.items()}}
    return schema, {n: v for n, (_, v) in fields.items()}


@settings(max_examples=300, deadline=None)
@given(first=schemas_and_values(), later=st.data())
def test_any_value_a_schema_admits_decodes_into_its_space(first, later):
    schema, value = first
    field = field_for(schema, value, {}, "obs", action=False)
    decoded = field.decode(value)
    assert field.space.contains(decoded), (schema, value, field.space)


# --- real servers that echo long input ----------------------------------------------------------------


@pytest.mark.slow
def test_a_server_that_echoes_long_input_stays_in_its_space(framework_parrot):
    """As TextArena's games do: the message comes back wrapped, in a list that grows. Masked-random play
    (the old failure: a 65,536-character sample came back longer than its field's space allowed)."""
    env = gym.make("openenv/remote", base_url=framework_parrot)
    try:
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            assert obs in env.observation_space
            terminated = truncated = False
            while not (terminated or truncated):
                obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                assert obs in env.observation_space
        long = "x" * 300_000
        env.reset(seed=9)
        obs, *_ = env.step(long)
        assert obs in env.observation_space and len(obs["prompt"]) > len(long)
        assert repr(env.observation_space["prompt"]) == "UnicodeText(0, None)"
        assert max(len(env.action_space.sample()) for _ in range(200)) <= SAMPLE_LENGTH
    finally:
        env.close()


@pytest.mark.slow
def test_our_echo_server_keeps_its_declared_bound_of_256():
    """Our echo server declares ``maxLength`` 256 for the message: the space says exactly that."""
    env = gym.make("openenv/remote", base_url=shared_embedded_server("echo").base_url)
    try:
        assert repr(env.action_space) == "UnicodeText(0, 256)"
        env.reset(seed=0)
        obs, *_ = env.step("y" * 256)
        assert obs in env.observation_space and obs["echoed_message"] == "y" * 256
        assert "y" * 257 not in env.action_space
    finally:
        env.close()
