"""The two transports of many sessions (`DirectTransport`, `LoopTransport`) and `open_pool`, against real
servers: each keeps the rules of `openenv_lab.client.transport`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import time

import pytest

from openenv_lab.client import Client, SessionClosed, StepResult, Timeout, Timeouts
from openenv_lab.client import pool as pool_module
from openenv_lab.client.async_session import AsyncSession
from openenv_lab.client.batch import Channel, SyncChannel
from openenv_lab.client.loop import LoopThread, LoopTransport
from openenv_lab.client.pool import open_pool
from openenv_lab.client.transport import DirectTransport
from openenv_lab.launch import EmbeddedServer
from tests.conftest import HANG
from tests.peers.raw_servers import SilentBatchServer


@pytest.fixture(scope="module")
def echo():
    with EmbeddedServer("echo", max_sessions=12) as server:
        assert server.base_url is not None
        yield server.base_url


def receive_all(transport, count: int, timeout: float = 10.0) -> dict:
    replies: dict = {}
    while len(replies) < count:
        replies.update(transport.receive(timeout))
    return replies


def loop_transport(seats_factory):
    """A `LoopTransport` over the seats that ``seats_factory()`` (a coroutine) opens on its loop."""
    loop = LoopThread()
    return LoopTransport(loop, loop.run(seats_factory()))


def active(url: str) -> int:
    with Client(url) as client:
        return client.capacity()["active_sessions"]


def wait_until_no_sessions(url: str) -> None:
    deadline = time.monotonic() + 10
    while active(url):
        assert time.monotonic() < deadline, "the sessions were not closed"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["direct", "loop"])
def test_replies_come_back_for_the_sessions_that_were_sent(echo, kind, monkeypatch):
    monkeypatch.setattr(pool_module, "DIRECT_ON_LOOPBACK", kind == "direct")
    transport = open_pool([echo], 3)
    assert type(transport) is (DirectTransport if kind == "direct" else LoopTransport)
    transport.send({i: ("reset", {"seed": i}) for i in range(3)})
    assert transport.pending == 3
    resets = receive_all(transport, 3)
    transport.send({2: ("step", {"message": "abc"}), 0: ("step", {"message": "a"})})
    steps = receive_all(transport, 2)
    assert transport.pending == 0
    assert all(isinstance(r, StepResult) for r in (*resets.values(), *steps.values()))
    assert [resets[i].metadata["seed"] for i in range(3)] == [0, 1, 2]
    assert {i: r.observation["message_length"] for i, r in steps.items()} == {0: 1, 2: 3}
    assert active(echo) == 3
    transport.close()
    transport.close()  # twice is fine
    assert transport.closed
    wait_until_no_sessions(echo)


@pytest.mark.parametrize("kind", ["direct", "loop", "loop, one connection a session"])
def test_a_state_request_travels_beside_steps_and_comes_back_as_the_state(echo, kind, monkeypatch):
    """``("state", {})`` is how a vector env reads a session's state over the session itself (a
    `Spec.from_state` on a server with room for no other session); each reply is that session's state."""
    monkeypatch.setattr(pool_module, "DIRECT_ON_LOOPBACK", kind == "direct")
    transport = open_pool([echo], 2, multiplex=kind != "loop, one connection a session")
    transport.send({0: ("reset", {}), 1: ("reset", {})})
    receive_all(transport, 2)
    transport.send({0: ("step", {"message": "a"}), 1: ("state", {})})
    replies = receive_all(transport, 2)
    assert isinstance(replies[0], StepResult) and replies[1]["step_count"] == 0
    transport.send({0: ("state", {}), 1: ("state", {})})
    states = receive_all(transport, 2)
    assert [states[i]["step_count"] for i in range(2)] == [1, 0]
    assert states[0]["episode_id"] != states[1]["episode_id"]
    transport.close()


@pytest.mark.parametrize("kind", ["direct", "loop"])
def test_an_error_reply_names_its_session_and_leaves_the_others(echo, kind, monkeypatch):
    monkeypatch.setattr(pool_module, "DIRECT_ON_LOOPBACK", kind == "direct")
    transport = open_pool([echo], 2)
    transport.send({0: ("reset", {}), 1: ("reset", {})})
    receive_all(transport, 2)
    transport.send({0: ("step", {"nope": 1}), 1: ("step", {"message": "x"})})
    replies = receive_all(transport, 2)
    assert replies[0].code == "VALIDATION_ERROR" and replies[0].env_index == 0
    assert str(replies[0]).startswith(f"Sub-environment 0 (server {echo})")
    assert isinstance(replies[1], StepResult)
    transport.close()


def test_a_channel_sends_one_message_per_batch_beside_plain_sessions(echo):
    sent = []

    async def seats():
        channel = await Channel.open(echo, "/ws/batch", 3)
        original = channel.submit

        async def counting(entries):
            sent.append(len(entries))
            return await original(entries)

        channel.submit = counting  # type: ignore[method-assign]
        return [*channel.sessions, await AsyncSession.open(echo)]

    transport = loop_transport(seats)
    transport.send({i: ("reset", {}) for i in range(4)})
    receive_all(transport, 4)
    transport.send({i: ("step", {"message": "x" * (i + 1)}) for i in range(4)})
    steps = receive_all(transport, 4)
    transport.close()
    assert sent == [3, 3]  # one message for the channel's three sessions, per send
    assert [steps[i].observation["message_length"] for i in range(4)] == [1, 2, 3, 4]
    wait_until_no_sessions(echo)


def test_a_closed_session_on_the_loop_is_its_own_reply(framework_counter):
    async def seats():
        return [await AsyncSession.open(framework_counter) for _ in range(2)]

    transport = loop_transport(seats)
    transport.send({0: ("reset", {}), 1: ("reset", {})})
    receive_all(transport, 2)
    transport.loop.run(transport.seats[1].close())
    transport.send({0: ("step", {"delta": 10}), 1: ("step", {"delta": 1})})
    replies = receive_all(transport, 2)
    transport.close()
    assert replies[0].observation["value"] == 10 and replies[0].done
    assert isinstance(replies[1], SessionClosed) and replies[1].env_index == 1


def test_a_silent_channel_times_out_every_request_it_carries():
    with SilentBatchServer() as server:

        async def seats():
            channel = await Channel.open(
                server.url, "/ws/batch", 2, timeouts=Timeouts(request=0.3, close=0.5)
            )
            return channel.sessions

        transport = loop_transport(seats)
        started = time.monotonic()
        transport.send({0: ("step", {}), 1: ("step", {})})
        replies = receive_all(transport, 2)
        assert time.monotonic() - started < 5
        assert all(isinstance(r, Timeout) for r in replies.values()) and transport.seats[0].closed
        transport.send({1: ("step", {})})  # the channel is gone: the reply says so at once
        (late,) = receive_all(transport, 1).values()
        assert isinstance(late, SessionClosed)
        transport.close()


def test_a_silent_sync_channel_times_out_and_closes():
    with SilentBatchServer() as server:
        channel = SyncChannel(server.url, "/ws/batch", 2, timeouts=Timeouts(request=0.3, close=0.5))
        transport = DirectTransport(channel.sessions)
        transport.send({0: ("step", {}), 1: ("step", {})})
        with pytest.raises(Timeout, match=r"did not reply within 0\.3 s") as raised:
            transport.receive(5.0)
        assert raised.value.env_index == 0 and transport.closed


@pytest.mark.parametrize("kind", ["direct", "loop"])
def test_an_interrupt_while_replies_are_on_their_way_closes_the_transport(kind, hanging_counter):
    def interrupt(*_):
        raise KeyboardInterrupt

    with SilentBatchServer() as silent:
        if kind == "loop":  # the counter's step with delta HANG stalls for a minute

            async def seats():
                return [await AsyncSession.open(hanging_counter) for _ in range(3)]

            transport = loop_transport(seats)
            transport.send({i: ("reset", {}) for i in range(3)})
            receive_all(transport, 3)
            transport.send({i: ("step", {"delta": delta}) for i, delta in enumerate((1, HANG, 1))})
        else:  # the silent server never answers a batch after the channel's opening
            channel = SyncChannel(silent.url, "/ws/batch", 3, timeouts=Timeouts(request=30, close=0.5))
            transport = DirectTransport(channel.sessions)
            transport.send({i: ("step", {}) for i in range(3)})
        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        try:
            with pytest.raises(KeyboardInterrupt):
                receive_all(transport, 3, timeout=30)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert transport.closed and all(seat.closed for seat in transport.seats)


@pytest.mark.slow
def test_the_pool_spreads_sessions_round_robin_and_names_full_servers():
    with EmbeddedServer("echo", max_sessions=2) as a, EmbeddedServer("echo", max_sessions=3) as b:
        transport = open_pool([a.base_url, b.base_url], 5)
        assert transport.urls == [a.base_url, b.base_url, a.base_url, b.base_url, b.base_url]
        transport.close()
        with pytest.raises(Exception, match=r"num_envs=6 needs 6 sessions.*1 short"):
            open_pool([a.base_url, b.base_url], 6)
        wait_until_no_sessions(a.base_url)


def test_a_cancelled_opening_on_the_loop_closes_what_it_opened(echo):
    loop = LoopThread()
    opened: list[AsyncSession] = []

    async def open_then_wait():
        opened.append(await AsyncSession.open(echo))
        try:
            await asyncio.sleep(60)
        finally:
            await opened[0].close()

    with pytest.raises(concurrent.futures.TimeoutError):
        loop.run(open_then_wait(), timeout=0.5)
    assert opened and opened[0].closed  # its clean-up ran before run() gave up
    loop.stop()
    wait_until_no_sessions(echo)
