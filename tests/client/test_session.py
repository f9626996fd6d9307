"""Our client against real servers on loopback: the official framework's, hand-written peers, and ours."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time

import pytest

from openenv_lab.client import (
    CapacityError,
    Client,
    ConnectError,
    ProtocolError,
    ServerError,
    Session,
    SessionClosed,
    Timeout,
    Timeouts,
)
from openenv_lab.launch import EmbeddedServer
from tests.conftest import HANG
from tests.peers.raw_servers import (
    GarbageServer,
    LegacyServer,
    MuteServer,
    NotOpenEnvServer,
    ScriptedServer,
    SilentServer,
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_episode_on_an_official_environment(official_grid_world):
    """The official grid_world_env, unmodified: the agent walks from (0, 0) to the goal at (4, 4)."""
    with Session(official_grid_world) as session:
        first = session.reset()
        assert (first.observation["x"], first.observation["y"]) == (0, 0)
        assert first.reward == 0.0 and first.done is False
        result = session.step({"action": "DOWN"})
        assert (result.observation["x"], result.observation["y"]) == (1, 0)
        assert result.reward == pytest.approx(-0.1) and result.done is False
        for action in ("DOWN", "DOWN", "DOWN", "RIGHT", "RIGHT", "RIGHT", "RIGHT"):
            result = session.step({"action": action})
        assert result.observation["message"] == "You found the goal!"
        assert result.done is True and result.reward == 1.0
        assert session.state()["step_count"] == 8
        assert session.bytes_sent > 0 and session.bytes_received > 0


def test_the_framework_sends_metadata_nested_and_at_the_top(framework_counter):
    with Session(framework_counter) as session:
        session.reset(episode_id="ep-1")
        result = session.step({"delta": 4})
        assert result.metadata == {"step": 1}  # sent nested and at the top level by openenv 0.10
        assert session.state() == {"episode_id": "ep-1", "step_count": 1}


def test_reset_kwargs_reach_the_environment(framework_counter):
    with Session(framework_counter) as session:
        assert session.reset(start=7).observation["value"] == 7


def test_validation_error_keeps_the_session_open(official_grid_world):
    with Session(official_grid_world) as session:
        session.reset()
        with pytest.raises(ServerError) as caught:
            session.step({"action": "SIDEWAYS"})
        assert caught.value.code == "VALIDATION_ERROR"
        assert "action" in str(caught.value)
        assert not session.closed
        assert session.step({"action": "RIGHT"}).observation["y"] == 1
        assert session.state()["step_count"] == 1  # the invalid step did not count


def test_capacity_error_names_the_numbers_and_frees_on_close(official_echo):
    """The official echo_env with room for two sessions: the third is refused, then let in."""
    first = Session(official_echo)
    second = Session(official_echo)
    try:
        with pytest.raises(CapacityError) as caught:
            Session(official_echo)
        assert caught.value.max_sessions == 2
        assert caught.value.active_sessions == 2
        assert official_echo.split("//")[1] in str(caught.value)
    finally:
        first.close()
    # The slot is released once the server has seen the close.
    for _ in range(50):
        try:
            third = Session(official_echo)
            break
        except CapacityError:
            time.sleep(0.05)
    else:
        pytest.fail("closing a session did not free its slot")
    third.close()
    second.close()


def test_no_server_is_a_connect_error_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectError) as caught:
        Session(url, timeouts=Timeouts(connect=2.0))
    assert url.replace("http", "ws") in str(caught.value)
    assert "openenv-lab serve NAME' (chess, atari, finrl or echo)" in str(caught.value)


def test_a_server_that_never_answers_the_upgrade_is_a_connect_timeout():
    # A socket that listens but never reads: TCP connects, the WebSocket handshake never completes.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(ConnectError, match=r"within 0\.5 s"):
            Session(url, timeouts=Timeouts(connect=0.5))


def test_not_an_openenv_server_is_a_protocol_error():
    with NotOpenEnvServer() as server, pytest.raises(ProtocolError, match=r"404.*OpenEnv"):
        Session(server.url)


def test_silent_server_times_out_and_closes_the_session():
    with SilentServer() as server:
        session = Session(server.url, timeouts=Timeouts(request=0.3, close=0.5))
        with pytest.raises(Timeout, match=r"did not reply within 0\.3 s") as caught:
            session.reset()
        assert isinstance(caught.value, TimeoutError)
        assert session.closed
        with pytest.raises(SessionClosed):
            session.step({})


def test_legacy_envelopes_and_odd_rewards():
    with LegacyServer() as server, Session(server.url) as session:
        session.reset()
        rewards = [session.step({}).reward for _ in range(4)]
        assert rewards == [1.0, 1.0, None, 0.5]
        assert session.step({}).metadata == {}


def test_works_inside_a_running_event_loop(framework_counter):
    """As in a Jupyter kernel, where an asyncio loop is already running on this thread."""

    async def inside_the_loop() -> int:
        with Session(framework_counter) as session:
            session.reset()
            return session.step({"delta": 2}).observation["value"]

    assert asyncio.run(inside_the_loop()) == 2


@pytest.mark.slow
def test_server_death_mid_episode_is_session_closed():
    with EmbeddedServer("chess") as server:
        session = Session(server.base_url, timeouts=Timeouts(request=10.0))
        first = session.reset(seed=1, agent_color="white")
        session.step({"move": first.observation["legal_moves"][0]})
        os.kill(server._process.pid, signal.SIGKILL)
        with pytest.raises(SessionClosed, match="episode in progress is lost"):
            session.step({"move": "e2e4"})
        assert session.closed


def test_client_info_calls(official_grid_world):
    with Client(official_grid_world) as client:
        assert client.health() == {"status": "healthy"}
        schema = client.schema()
        assert set(schema["action"]["properties"]) == {"action", "metadata"}
        assert client.metadata()["name"] == "GridWorldEnvironment"
        assert client.capacity() is None  # the official server has no /capacity route
        with pytest.raises(ProtocolError, match="404"):
            client.get("/no-such-route")


def test_client_against_no_server():
    with Client(f"http://127.0.0.1:{free_port()}", timeouts=Timeouts(connect=1.0)) as client:
        with pytest.raises(ConnectError):
            client.health()
        with pytest.raises(ConnectError, match=r"did not become healthy within 0\.3 s"):
            client.wait_until_healthy(0.3)


def test_a_garbled_first_reply_closes_the_connection_at_once():
    with GarbageServer() as server:
        with pytest.raises(ProtocolError, match="not JSON"):
            Session(server.url)
        # The client hung up even though the exception (and its traceback) may live on.
        assert server.closed.wait(5)


def test_a_garbled_reply_mid_session_drops_it_and_says_so_afterwards():
    """A reply that is not JSON leaves the stream untrusted: the session is closed, and the next request
    says it was dropped after a failure (not merely that it is closed)."""

    async def garble_the_reset(ws) -> None:
        await ws.recv()  # the opening state request
        await ws.send(json.dumps({"type": "state", "data": {"step_count": 0}}))
        await ws.recv()
        await ws.send("{not json")
        await ws.wait_closed()

    with ScriptedServer(garble_the_reset) as server:
        session = Session(server.url, timeouts=Timeouts(request=5, close=1))
        with pytest.raises(ProtocolError, match="not JSON"):
            session.reset()
        assert session.closed and server.closed.wait(5)
        with pytest.raises(SessionClosed, match=r"was dropped after a request failed.*open a new one"):
            session.step({})


@pytest.mark.parametrize(
    ("status", "advice"), [(401, "Authorization"), (403, "credentials"), (503, "still starting")]
)
def test_refusals_of_the_upgrade_say_what_to_do(status, advice):
    with NotOpenEnvServer(status) as server, pytest.raises(ConnectError, match=advice):
        Session(server.url)


def test_numpy_values_in_requests_are_plain_json(framework_counter):
    import numpy as np

    with Session(framework_counter) as session:
        assert session.reset(start=np.int64(3)).observation["value"] == 3
        assert session.step({"delta": np.int32(2)}).observation["value"] == 5


@pytest.mark.timeout(20)
def test_waiting_for_health_keeps_to_its_own_deadline():
    # A socket that accepts but never answers: each /health attempt must give up when the wait does.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", timeouts=Timeouts(request=60))
        with pytest.raises(ConnectError, match="did not become healthy"):
            client.wait_until_healthy(0.5)
        client.close()


@pytest.mark.slow
def test_an_interrupted_request_closes_the_session(hanging_counter):
    # Ctrl+C while a step runs: its reply, read later, would pass for the reply to the next request.
    session = Session(hanging_counter)
    session.reset()

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            session.step({"delta": HANG})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert session.closed
    with pytest.raises(SessionClosed, match="open a new one"):
        session.step({"delta": 1})


def test_an_interrupt_while_the_request_is_sent_closes_the_session():
    # The server stops reading: a large step blocks in the send, where Ctrl+C lands. Part of the message
    # may have gone, or all of it with its reply to follow: either way the session cannot go on.
    with MuteServer(answer_first=True) as server:
        session = Session(server.url, timeouts=Timeouts(request=30))

        def interrupt(*_):
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # encoding the message takes a few ms, sending it forever
        try:
            with pytest.raises(KeyboardInterrupt):
                session.step({"message": "x" * (8 * 1024 * 1024)})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert session.closed


def test_a_client_remembering_reads_each_route_once_and_hands_out_copies(chess_url, monkeypatch):
    client = Client(chess_url)
    fetched = []
    fetch = client._fetch
    monkeypatch.setattr(client, "_fetch", lambda path, *args: fetched.append(path) or fetch(path, *args))
    with client.remembering():
        first = client.schema()
        first["action"] = "edited"
        second = client.schema()
        client.metadata()
    assert fetched == ["/schema", "/metadata"]
    assert second["action"] != "edited"  # a copy: the caller's edit did not reach the memory
    client.schema()
    assert fetched == ["/schema", "/metadata", "/schema"]  # outside the block, asked again
    client.close()
