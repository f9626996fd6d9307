"""``/ws/batch`` on our servers: many sessions over one WebSocket, each reply what ``/ws`` would send."""

from __future__ import annotations

import json
import time

import pytest
from websockets.sync.client import connect

from openenv_lab.client import Client, Session
from openenv_lab.launch import EmbeddedServer


@pytest.fixture(scope="module")
def echo():
    with EmbeddedServer("echo", max_sessions=4) as server:
        assert server.base_url is not None
        yield server.base_url


def batch_socket(url: str, sessions: int):
    return connect(url.replace("http://", "ws://") + f"/ws/batch?sessions={sessions}")


def ask(ws, *entries) -> dict:
    data = [{"session": session, "type": kind, "data": payload} for session, kind, payload in entries]
    ws.send(json.dumps({"type": "batch", "data": data}))
    return json.loads(ws.recv(timeout=10))


def active(url: str) -> int:
    with Client(url) as client:
        return client.capacity()["active_sessions"]


def wait_for_active(url: str, expected: int) -> None:
    deadline = time.monotonic() + 5
    while active(url) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert active(url) == expected


@pytest.mark.slow
def test_capacity_names_the_route_and_counts_the_sessions(echo):
    with Client(echo) as client:
        assert client.capacity() == {
            "active_sessions": 0,
            "max_sessions": 4,
            "batch_route": "/ws/batch",
            "max_batch": 4,  # its max_sessions (at most the family's default, its messages' size)
        }
    with batch_socket(echo, 3) as ws:
        assert ask(ws, (0, "state", None))["type"] == "batch"
        assert active(echo) == 3
    wait_for_active(echo, 0)  # the sessions end with the connection


def test_replies_come_in_order_and_are_what_ws_would_send(echo):
    with batch_socket(echo, 2) as ws, Session(echo) as plain:
        reply = ask(ws, (1, "reset", {"seed": 5}), (0, "reset", {}))
        assert [r["type"] for r in reply["data"]] == ["observation", "observation"]
        assert reply["data"][0]["data"]["metadata"] == {"seed": 5}
        stepped = ask(ws, (0, "step", {"message": "hi"}), (1, "step", {"message": "there"}))["data"]
        plain.reset(seed=5)
        alone = plain.step({"message": "hi"})
        assert stepped[0]["data"]["observation"]["echoed_message"] == alone.observation["echoed_message"]
        assert stepped[0]["data"]["reward"] == alone.reward == pytest.approx(0.2)
        expected = {"metadata": {}, "echoed_message": "there", "message_length": 5}
        assert stepped[1]["data"]["observation"] == expected
        state = ask(ws, (1, "state", None))["data"][0]
        assert state["type"] == "state" and state["data"]["step_count"] == 1


def test_a_bad_entry_is_its_own_error_and_the_others_go_on(echo):
    with batch_socket(echo, 2) as ws:
        ask(ws, (0, "reset", {}), (1, "reset", {}))
        first, second = ask(ws, (0, "step", {"wrong": 1}), (1, "step", {"message": "ok"}))["data"]
        assert first["type"] == "error" and first["data"]["code"] == "VALIDATION_ERROR"
        assert second["type"] == "observation"
        unknown = ask(ws, (0, "jump", {}))["data"][0]
        assert unknown["data"]["code"] == "UNKNOWN_TYPE"
        refused = ask(ws, (0, "reset", {"colour": "red"}))["data"][0]  # the env's own error
        assert refused["data"]["code"] == "EXECUTION_ERROR" and "colour" in refused["data"]["message"]


def test_malformed_batches_are_one_error_and_the_connection_stays(echo):
    with batch_socket(echo, 1) as ws:
        reply = ask(ws, (3, "state", None))
        assert reply["type"] == "error" and "names no session" in reply["data"]["message"]
        ws.send("not json")
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "step", "data": {}}))
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "UNKNOWN_TYPE"
        assert ask(ws, (0, "reset", {}))["data"][0]["type"] == "observation"


def test_more_sessions_than_free_is_refused_and_nothing_is_kept(echo):
    with batch_socket(echo, 3) as held:
        ask(held, (0, "state", None))
        with batch_socket(echo, 2) as ws:
            refusal = json.loads(ws.recv(timeout=10))
        assert refusal["data"]["code"] == "CAPACITY_REACHED"
        assert "2 sessions asked" in refusal["data"]["message"]
        wait_for_active(echo, 3)  # the one it could open was given back
    with batch_socket(echo, 0) as ws:
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "VALIDATION_ERROR"


def test_a_batch_with_a_bad_session_runs_none_of_its_entries(echo):
    with batch_socket(echo, 2) as ws:
        ask(ws, (0, "reset", {}), (1, "reset", {}))
        refused = ask(ws, (0, "step", {"message": "a"}), (7, "step", {"message": "b"}))
        assert refused["type"] == "error" and "names no session" in refused["data"]["message"]
        twice = ask(ws, (1, "step", {"message": "a"}), (1, "step", {"message": "b"}))
        assert "appears twice" in twice["data"]["message"]
        states = ask(ws, (0, "state", None), (1, "state", None))["data"]
        assert [s["data"]["step_count"] for s in states] == [0, 0]  # nothing of either batch ran
        (empty,) = ask(ws, (0, "step", None))["data"]
        assert empty["data"]["code"] == "VALIDATION_ERROR" and "data" in empty["data"]["message"]


def test_batch_steps_keep_the_sessions_records_as_the_framework_would():
    """``/ws/batch`` writes each session's activity time and step count straight into the framework's
    session record (no validated assignment): they must be what ``/ws`` leaves, and the record valid."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from openenv_lab.servers import import_openenv_server
    from openenv_lab.servers._batch import register_batch_route
    from openenv_lab.servers.echo import EchoAction, EchoEnvironment, EchoObservation

    env_server = import_openenv_server()
    app = FastAPI()
    server = env_server.HTTPEnvServer(
        EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=2, env_name="echo"
    )
    register_batch_route(app, server, EchoAction)
    with TestClient(app) as client, client.websocket_connect("/ws/batch?sessions=2") as ws:

        def send(*entries):
            ws.send_text(json.dumps({"type": "batch", "data": [dict(e) for e in entries]}))
            return json.loads(ws.receive_text())

        send({"session": 0, "type": "reset", "data": {}}, {"session": 1, "type": "reset", "data": {}})
        records = list(server._session_info.values())
        before = [record.last_activity_at for record in records]
        for _ in range(3):
            send({"session": 0, "type": "step", "data": {"message": "hi"}})
        send({"session": 1, "type": "step", "data": {"message": "hi"}})
        send({"session": 1, "type": "reset", "data": {}})  # a reset is activity, not a step
        assert sorted(record.step_count for record in records) == [1, 3]
        assert all(record.last_activity_at > then for record, then in zip(records, before, strict=True))
        for record in records:  # the record as pydantic would have left it
            assert type(record).model_validate(record.model_dump()) == record
            assert type(record.last_activity_at) is float and type(record.step_count) is int
