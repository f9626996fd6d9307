"""Envelope normalisation and error messages, on messages written as each server version sends them."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openenv_lab.client import CapacityError, ProtocolError, ServerError
from openenv_lab.client._protocol import (
    BATCH_WIRE,
    SESSION_WIRE,
    observation_data,
    parse_observation,
    parse_reply,
    reply_data,
    reset_message,
    step_message,
)
from openenv_lab.client._urls import http_url, is_loopback, ws_url
from tests.fuzzing import json_values


def observation(data: dict) -> str:
    return json.dumps({"type": "observation", "data": data})


def test_v010_metadata_nested_and_duplicated_is_read_once():
    raw = observation(
        {
            "observation": {"value": 1, "metadata": {"step": 3}},
            "reward": 0.5,
            "done": False,
            "metadata": {"step": 3},
        }
    )
    result = parse_observation(parse_reply(raw, expected="observation"))
    assert result.observation == {"value": 1}
    assert result.metadata == {"step": 3}
    assert result.reward == 0.5
    assert result.done is False


def test_v03_envelope_without_metadata():
    result = parse_observation(
        parse_reply(
            observation({"observation": {"value": 1}, "reward": 0.0, "done": True}), expected="observation"
        )
    )
    assert result.metadata == {}
    assert result.done is True


def test_metadata_only_nested_when_top_level_absent():
    data = {"observation": {"metadata": {"a": 1}}, "reward": None, "done": False}
    assert parse_observation(data).metadata == {"a": 1}


def test_http_style_null_metadata_falls_back_to_nested():
    data = {"observation": {"metadata": {"a": 1}}, "reward": 1.0, "done": False, "metadata": None}
    assert parse_observation(data).metadata == {"a": 1}


@pytest.mark.parametrize(
    ("wire", "expected"), [(True, 1.0), (False, 0.0), (1, 1.0), (-2, -2.0), (0.25, 0.25), (None, None)]
)
def test_reward_is_normalised(wire, expected):
    result = parse_observation({"observation": {}, "reward": wire, "done": False})
    assert result.reward == expected
    assert result.reward is None or type(result.reward) is float


@pytest.mark.parametrize(("wire", "expected"), [(True, True), (False, False), (1, True), (0, False)])
def test_done_is_normalised(wire, expected):
    assert parse_observation({"observation": {}, "reward": 0.0, "done": wire}).done is expected


def test_bad_done_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="done"):
        parse_observation({"observation": {}, "reward": 0.0, "done": "yes"})


@pytest.mark.parametrize(
    "message",
    [
        {"type": "observation", "data": {"observation": {"a": 1}, "reward": 0.5, "done": False}},
        {"type": "observation", "data": {"observation": {"a": 1}, "reward": 1, "done": 0}},
        {
            "type": "observation",
            "data": {
                "observation": {"metadata": {"a": 1}},
                "reward": None,
                "done": True,
                "metadata": {"b": 2},
            },
        },
        {"type": "observation", "data": {"observation": [1], "reward": 0.0, "done": False}},
        {"type": "observation", "data": {"observation": {}, "reward": "high", "done": False}},
        {"type": "observation", "data": None},
        {"type": "observation"},
        {"type": "error", "data": {"message": "boom", "code": "EXECUTION_ERROR"}},
        {"type": "state", "data": {}},
        [1, 2],
    ],
)
def test_a_batch_entry_is_read_as_reply_data_then_parse_observation_would(message):
    def outcome(read):
        try:
            return read(copy.deepcopy(message))
        except Exception as exc:  # the same error, with the same words
            return type(exc), str(exc)

    direct = outcome(lambda m: observation_data(m, url="ws://h/ws/batch"))
    general = outcome(
        lambda m: parse_observation(
            reply_data(m, expected="observation", url="ws://h/ws/batch"), url="ws://h/ws/batch"
        )
    )
    assert direct == general


def test_missing_reward_and_done_default():
    result = parse_observation({"observation": {}})
    assert result.reward is None
    assert result.done is False


def test_bad_reward_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="reward"):
        parse_observation({"observation": {}, "reward": "high", "done": False})


def test_capacity_error_carries_numbers_and_advice():
    raw = json.dumps(
        {
            "type": "error",
            "data": {
                "message": "Server at capacity: 2/2 sessions active. Cannot accept new connections.",
                "code": "CAPACITY_REACHED",
                "active_sessions": 2,
                "max_sessions": 2,
            },
        }
    )
    with pytest.raises(CapacityError) as caught:
        parse_reply(raw, expected="observation", url="ws://h/ws")
    error = caught.value
    assert (error.active_sessions, error.max_sessions) == (2, 2)
    assert error.code == "CAPACITY_REACHED"
    assert "2/2" in str(error) and "max-sessions" in str(error) and "ws://h/ws" in str(error)


def test_validation_error_lists_pydantic_locations():
    raw = json.dumps(
        {
            "type": "error",
            "data": {
                "message": "Invalid message",
                "code": "VALIDATION_ERROR",
                "errors": [{"type": "missing", "loc": ["move"], "msg": "Field required"}],
            },
        }
    )
    with pytest.raises(ServerError) as caught:
        parse_reply(raw, expected="observation")
    assert caught.value.code == "VALIDATION_ERROR"
    assert "move: Field required" in str(caught.value)
    assert caught.value.details["errors"][0]["loc"] == ["move"]


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '{"no": "type"}', '{"type": "state", "data": {}}'])
def test_unexpected_frames_are_protocol_errors(raw):
    with pytest.raises(ProtocolError):
        parse_reply(raw, expected="observation")


def test_frames_are_compact_json():
    assert reset_message({"seed": 1}) == '{"type":"reset","data":{"seed":1}}'
    assert step_message({"move": "e2e4"}) == '{"type":"step","data":{"move":"e2e4"}}'


def test_the_two_wire_formats_carry_the_same_requests():
    """/ws: one request a message, its reply as a list of one; /ws/batch: a request per session."""
    entries = [(0, "reset", {"seed": 1})]
    assert SESSION_WIRE.encode(entries) == reset_message({"seed": 1})
    assert SESSION_WIRE.encode([(0, "state", None)]) == '{"type":"state"}'
    batch = json.loads(BATCH_WIRE.encode([*entries, (1, "step", {"move": "e2e4"})]))
    assert batch == {
        "type": "batch",
        "data": [
            {"session": 0, "type": "reset", "data": {"seed": 1}},
            {"session": 1, "type": "step", "data": {"move": "e2e4"}},
        ],
    }
    reply = observation({"observation": {"v": 1}, "reward": 1, "done": False})
    (one,) = SESSION_WIRE.decode(reply, count=1, url="ws://x/ws")
    assert observation_data(one).reward == 1.0
    both = json.dumps({"type": "batch", "data": [json.loads(reply)] * 2})
    assert [observation_data(r).observation for r in BATCH_WIRE.decode(both, count=2)] == [{"v": 1}] * 2
    with pytest.raises(ProtocolError, match="not JSON"):
        SESSION_WIRE.decode("{", count=1, url="ws://x/ws")
    assert SESSION_WIRE.url("http://h:1", "/ws", 1) == "ws://h:1/ws"
    assert BATCH_WIRE.url("https://h", "/ws/batch", 3) == "wss://h/ws/batch?sessions=3"
    with pytest.raises(ValueError, match="holds one session"):
        SESSION_WIRE.url("http://h:1", "/ws", 2)


def test_nan_in_an_action_is_refused_before_sending():
    with pytest.raises(ValueError):
        step_message({"x": float("nan")})


@pytest.mark.parametrize(
    ("given", "http", "ws"),
    [
        ("localhost:8000", "http://localhost:8000", "ws://localhost:8000/ws"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000", "ws://127.0.0.1:8000/ws"),
        ("https://user-env.hf.space", "https://user-env.hf.space", "wss://user-env.hf.space/ws"),
        ("ws://host:1/prefix/ws", "http://host:1/prefix", "ws://host:1/prefix/ws"),
    ],
)
def test_urls(given, http, ws):
    assert http_url(given) == http
    assert ws_url(given) == ws


@pytest.mark.parametrize("bad", ["", "ftp://host", "http://"])
def test_bad_urls_are_value_errors(bad):
    with pytest.raises(ValueError):
        http_url(bad)


def test_loopback_detection():
    assert is_loopback("http://localhost:1")
    assert is_loopback("http://127.0.0.5:1")
    assert is_loopback("http://[::1]:1")
    assert not is_loopback("https://example.org")


JSON_DOCUMENTS = [
    '{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e400, "e": -0.0, "f": 0.1}',
    '{"big": 123456789012345678901234567890, "float": 123456789012345678901234567890.5}',
    '{"a": 1, "a": 2}',  # a repeated key: the last wins
    '{"s": "\\u00e9\\ud83d\\ude00", "lone": "\\ud800"}',  # pydantic's parser refuses the lone surrogate
    '[1, 2.5, true, false, null, "x", [], {}]',
    ' {"padded": 1}\n',
]


def _parsers():
    from pydantic_core import from_json

    return {"pydantic": from_json, "json-module": None}


@pytest.mark.parametrize("document", JSON_DOCUMENTS)
@pytest.mark.parametrize("parser", list(_parsers()))
def test_replies_decode_exactly_as_json_loads(document, parser, monkeypatch):
    from openenv_lab.client import _protocol

    monkeypatch.setattr(_protocol, "_fast_loads", _parsers()[parser])
    assert repr(_protocol._loads(document)) == repr(json.loads(document))
    assert repr(_protocol._loads(document.encode())) == repr(json.loads(document))


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans())
def test_any_document_decodes_as_json_loads_does(value, ascii_only):
    """The fuzzer's JSON values (NaN, infinities and integers beyond 64 bits among them, which only
    json.loads reads) come back as json.loads reads them."""
    from openenv_lab.client import _protocol

    document = json.dumps(value, ensure_ascii=ascii_only)
    assert repr(_protocol._loads(document)) == repr(json.loads(document))


@pytest.mark.parametrize("document", ["[1,]", "01", '{"a": 1} x', "", "nan"])
def test_documents_json_loads_refuses_are_refused(document):
    with pytest.raises(ProtocolError, match="not JSON"):
        parse_reply(document, expected="observation")


# Requests: pydantic's writer where it can, json.dumps' values and refusals everywhere.

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "\ud800"])  # look like the tokens; a lone surrogate
    | st.floats(width=32, allow_nan=False).map(np.float32)
    | st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64)
    | st.booleans().map(np.bool_)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        | st.lists(st.floats(allow_nan=False), max_size=5).map(np.array)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_requests_carry_what_json_dumps_would_and_refuse_what_it_refuses(value):
    from openenv_lab.client import _protocol

    try:
        expected = _protocol._strict_dumps(value)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            _protocol._dumps(value)
        return
    text = _protocol._dumps(value)
    assert repr(json.loads(text)) == repr(json.loads(expected))  # the same values, to the last bit


def test_requests_use_the_fast_writer_and_do_without_it(monkeypatch):
    from openenv_lab.client import _protocol

    action = {"actions": np.linspace(-1, 1, 5, dtype=np.float32)}
    assert _protocol._dumps(action) == '{"actions":[-1.0,-0.5,0.0,0.5,1.0]}'
    calls = []
    monkeypatch.setattr(_protocol, "_strict_dumps", lambda value: calls.append(value) or "{}")
    _protocol._dumps(action)
    assert calls == []  # pydantic wrote it
    _protocol._dumps({"message": "NaN"})  # the letters of a token: json.dumps decides
    assert calls == [{"message": "NaN"}]
    monkeypatch.setattr(_protocol, "_fast_dumps", None)  # the client-only install without pydantic
    _protocol._dumps(action)
    assert len(calls) == 2


def test_an_object_json_cannot_hold_is_refused_by_name():
    with pytest.raises(TypeError, match="object values cannot be sent to an OpenEnv server"):
        step_message({"x": object()})
    with pytest.raises(ValueError, match="Out of range float"):
        step_message({"x": [np.float32("inf")]})
