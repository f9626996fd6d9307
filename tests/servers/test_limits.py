"""Limits of our servers: the largest WebSocket message each family reads (sized to its traffic),
sessions per client address and per batch connection, idle sessions, vanished clients, and slowloris."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import gymnasium as gym
import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv_lab.client import Client, ServerError, Session, SessionClosed, Timeouts
from openenv_lab.servers import BUNDLED_SERVERS
from tests.helpers import read_line, serve_cli, stopped, wait_for


def test_each_family_reads_messages_of_its_size_and_no_larger_than_a_few_mib():
    for spec in BUNDLED_SERVERS.values():
        assert 64 << 10 <= spec.max_message_bytes <= 4 << 20, spec.name  # not the framework's 16 MiB


def _serve(*args: str) -> tuple[subprocess.Popen[str], str]:
    process, banner = serve_cli("chess", *args)
    return process, banner[0].split(" listening on ")[1].split()[0]


@pytest.mark.slow
@pytest.mark.parametrize("limit", [None, 4096])
def test_a_message_over_the_limit_closes_that_connection_only(limit):
    args = [] if limit is None else ["--max-message-bytes", str(limit)]
    process, url = _serve(*args)
    size = (limit or BUNDLED_SERVERS["chess"].max_message_bytes) + 1
    try:
        ws = url.replace("http://", "ws://") + "/ws"
        with connect(ws, max_size=None, open_timeout=10) as big:
            big.send(json.dumps({"type": "reset", "data": {"fen": "x" * size}}))
            with pytest.raises(ConnectionClosed) as closed:
                big.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big
        with connect(ws, open_timeout=10) as fair:  # a message under the limit is read as usual
            fair.send(json.dumps({"type": "reset", "data": {"fen": "x" * (size // 2)}}))
            assert "Invalid FEN" in fair.recv(timeout=10)
        with Session(url) as session:  # and the server serves everyone else
            assert session.reset(seed=0).observation["legal_moves"]
    finally:
        process.terminate()
        process.wait(10)


def _raw(url: str, route: str = "/ws", **options):
    return connect(url.replace("http://", "ws://") + route, open_timeout=10, **options)


def _active(url: str) -> int:
    return Client(url).capacity()["active_sessions"]


def _open_when_allowed(url: str, within: float = 10.0) -> Session:
    deadline = time.monotonic() + within
    while True:
        try:
            return Session(url)
        except ServerError as refused:
            if refused.code != "LIMIT_EXCEEDED" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.slow
def test_sessions_per_client_address_are_limited_and_the_refusal_says_which_limit():
    process, url = _serve("--max-sessions-per-client", "2")
    try:
        first, second = Session(url), Session(url)
        with pytest.raises(ServerError) as refused:
            Session(url)
        assert refused.value.code == "LIMIT_EXCEEDED"
        assert "--max-sessions-per-client" in str(refused.value) and "holds 2 sessions" in str(refused.value)
        with _raw(url, "/ws/batch?sessions=2") as batch:  # a batch connection counts all its sessions
            reply = json.loads(batch.recv(timeout=10))
        assert reply["data"]["limit"] == "per_client"
        first.close()  # a slot comes back once the server has ended the session
        third = _open_when_allowed(url)
        assert third.reset(seed=0).observation["legal_moves"]
        third.close()
        second.close()
        assert wait_for(lambda: _active(url) == 0)
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_a_batch_connection_holds_at_most_max_batch_sessions_and_vector_envs_split_over_several():
    process, url = _serve("--max-batch", "4")
    try:
        assert Client(url).capacity()["max_batch"] == 4
        with _raw(url, "/ws/batch?sessions=5") as too_many:
            reply = json.loads(too_many.recv(timeout=10))
        assert reply["data"]["code"] == "LIMIT_EXCEEDED" and "--max-batch" in reply["data"]["message"]
        envs = gym.make_vec("openenv/chess", num_envs=10, base_url=url)  # refused, unless split over 3
        try:
            envs.reset(seed=list(range(10)))
            _, rewards, _, _, _ = envs.step(envs.action_space.sample())
            assert len(rewards) == 10
            assert _active(url) == 10
        finally:
            envs.close()
        assert wait_for(lambda: _active(url) == 0)
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_an_idle_session_is_closed_and_its_slot_freed_while_a_busy_one_is_not():
    process, url = _serve("--idle-timeout", "1")
    try:
        idle, busy = Session(url), Session(url)
        idle.reset(seed=0)
        busy.reset(seed=0)
        for _ in range(8):  # 2.4 s of requests 0.3 s apart: never idle for a second
            time.sleep(0.3)
            busy.state()
        assert wait_for(lambda: _active(url) == 1)
        with pytest.raises(SessionClosed) as closed:
            idle.state()
        assert "idle" in str(closed.value) and "1001" in str(closed.value)
        assert busy.state() is not None
        busy.close()
    finally:
        process.terminate()
        process.wait(10)


_FREEZES = """
import os, signal, sys
from openenv_lab.client import Session
session = Session(sys.argv[1])
session.reset(seed=0)
print("open", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
"""


@pytest.mark.slow
def test_a_client_that_vanishes_without_closing_frees_its_slot_within_two_ping_intervals():
    process, url = _serve("--ping-interval", "1")
    client = subprocess.Popen([sys.executable, "-c", _FREEZES, url], stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(client, 60) == "open\n"
        assert wait_for(lambda: stopped(client.pid), 10)
        assert _active(url) == 1  # frozen, its connection still open, it answers no ping
        started = time.monotonic()
        assert wait_for(lambda: _active(url) == 0, 10)
        assert time.monotonic() - started < 8
        envs = gym.make_vec("openenv/chess", num_envs=2, base_url=url)
        with Session(url) as alive:
            alive.reset(seed=0)
            envs.reset(seed=0)
            time.sleep(3.5)  # idle clients that are alive answer the pings by themselves
            assert alive.state() is not None
            envs.step(envs.action_space.sample())
            envs.close()
    finally:
        client.kill()
        client.wait(10)
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_fifty_idle_tcp_connections_do_not_stop_a_normal_client():
    process, url = _serve()
    host, port = url.removeprefix("http://").split(":")
    idle = []
    try:
        for k in range(50):  # slowloris: half a request each, then silence
            sock = socket.create_connection((host, int(port)), timeout=10)
            start = b"GET /health HTTP/1.1\r\nHost: x\r\n" if k % 2 else b"GET /ws HTTP/1.1\r\nUpgrade: web"
            sock.sendall(start)
            idle.append(sock)
        with Session(url, timeouts=Timeouts(connect=10, request=10)) as session:
            session.reset(seed=0)
            for _ in range(20):
                move = session.state()  # a request that round-trips while the 50 hang
                assert move is not None
        assert Client(url).health()
    finally:
        for sock in idle:
            sock.close()
        process.terminate()
        process.wait(10)


def test_serve_options_refuse_what_no_server_could_honour_and_name_it():
    from openenv_lab.servers import ServeOptions

    for bad, name in [
        ({"max_batch": 0}, "max_batch"),
        ({"max_message_bytes": 1.5}, "max_message_bytes"),
        ({"max_sessions_per_client": True}, "max_sessions_per_client"),
        ({"idle_timeout": 0}, "idle_timeout"),
        ({"ping_interval": float("inf")}, "ping_interval"),
        ({"log_level": "loud"}, "log_level"),
    ]:
        with pytest.raises(ValueError, match=name):
            ServeOptions(**bad)
    assert ServeOptions().flags() == []  # the defaults need no flag
    assert ServeOptions(log_level="debug", ping_interval=5).flags() == [
        "--log-level",
        "debug",
        "--ping-interval",
        "5",
    ]


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"idle_timeout": None, "step_timeout": None},  # 0 on the command line: no limit
        {
            "log_level": "debug",
            "max_message_bytes": 2048,
            "max_sessions_per_client": 3,
            "max_batch": 4,
            "idle_timeout": 7.5,
            "ping_interval": 2.0,
            "step_timeout": 30.0,
            "max_reply_bytes": 4096,
            "inline_steps": True,
        },
    ],
)
def test_every_serve_option_is_a_flag_of_serve_and_comes_back_whole(options):
    """`ServeOptions` declares each flag once: what `flags()` writes, ``openenv-lab serve`` reads back."""
    import dataclasses

    from openenv_lab import cli
    from openenv_lab.servers import ServeOptions

    wanted = ServeOptions(**options)
    if options and len(options) > 2:
        assert set(options) == {field.name for field in dataclasses.fields(ServeOptions)}  # all of them
    for server in BUNDLED_SERVERS:
        args = cli._parser().parse_args(["serve", server, *wanted.flags()])
        assert cli._serve_options(args) == wanted


@pytest.mark.slow
def test_atari_refuses_a_reset_whose_screens_would_be_over_max_reply_bytes_before_the_work():
    """Atari knows a screen's size at reset: the reset is refused, naming the flag, and the session goes
    on."""
    pytest.importorskip("ale_py", reason="the Atari server needs ale-py (openenv-lab[atari])")
    process, banner = serve_cli("atari", "--max-reply-bytes", "300000")
    try:
        url = banner[0].split(" listening on ")[1].split()[0]
        with Session(url) as session:
            with pytest.raises(ServerError, match="--max-reply-bytes") as refused:
                session.reset(game="pong")  # an RGB screen as a JSON list: 403,200 bytes at most
            assert "about 407,296 bytes" in str(refused.value)
            small = session.reset(game="pong", screen_encoding="zlib")  # base64 of zlib: fits
            assert small.observation["screen_shape"] == [210, 160, 3]
            grey = session.reset(game="pong", obs_type="grayscale")  # 134,400 bytes at most: fits
            assert len(grey.observation["screen"]) == 210 * 160
        reply = httpx.post(url + "/reset", json={"game": "pong"}, timeout=30)
        assert reply.status_code == 400 and "--max-reply-bytes" in reply.json()["detail"], reply.text
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_any_other_reply_over_max_reply_bytes_is_an_error_in_its_place():
    """A reply whose size is known only once made: a REPLY_TOO_LARGE error (WebSocket), a 400 (HTTP)."""
    process, banner = serve_cli("echo", "--max-reply-bytes", "2048")
    try:
        url = banner[0].split(" listening on ")[1].split()[0]
        with _raw(url) as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            ws.recv(timeout=10)
            ws.send(json.dumps({"type": "step", "data": {"message": "é" * 1500}}))  # 3,000 bytes echoed
            error = json.loads(ws.recv(timeout=10))
            assert error["type"] == "error" and error["data"]["code"] == "REPLY_TOO_LARGE", error
            assert error["data"]["size"] > 2048 and "--max-reply-bytes" in error["data"]["message"]
            ws.send(json.dumps({"type": "step", "data": {"message": "short"}}))  # the session goes on
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        schema = httpx.get(url + "/openapi.json", timeout=10)  # an HTTP reply over the limit
        assert schema.status_code == 400 and "--max-reply-bytes" in schema.json()["detail"]
    finally:
        process.terminate()
        process.wait(10)
