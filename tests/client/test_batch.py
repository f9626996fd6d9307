"""`Channel`, `BatchedSession` and `SyncChannel`: many sessions over one WebSocket (``/ws/batch``), against
real servers."""

from __future__ import annotations

import asyncio
import select
import signal

import pytest

from openenv_lab.client import (
    CapacityError,
    Client,
    ProtocolError,
    ServerError,
    SessionClosed,
    Timeout,
    Timeouts,
)
from openenv_lab.client.batch import Channel, SyncChannel, read_observation
from openenv_lab.launch import EmbeddedServer
from tests.peers.raw_servers import SilentBatchServer


@pytest.fixture(scope="module")
def echo():
    with EmbeddedServer("echo", max_sessions=6) as server:
        assert server.base_url is not None
        yield server.base_url


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.mark.slow
def test_batched_sessions_play_like_sessions(echo):
    async def play():
        channel = await Channel.open(echo, "/ws/batch", 2)
        a, b = channel.sessions
        try:
            first = await a.reset(seed=3)
            await b.reset()
            stepped = await b.step({"message": "four"})
            state = await b.state()
            with pytest.raises(ServerError, match="VALIDATION_ERROR"):
                await a.step({"nope": 1})
            again = await a.step({"message": "ok"})  # a refused action leaves the session open
            return first, stepped, state, again
        finally:
            await channel.close()

    first, stepped, state, again = run(play())
    assert first.metadata == {"seed": 3}
    assert stepped.observation["message_length"] == 4 and stepped.reward == pytest.approx(0.4)
    assert state["step_count"] == 1
    assert again.observation["echoed_message"] == "ok"
    with Client(echo) as client:
        assert client.capacity()["active_sessions"] == 0


def test_opening_more_sessions_than_the_server_has_is_a_capacity_error(echo):
    async def attempt():
        await Channel.open(echo, "/ws/batch", 7)

    with pytest.raises(CapacityError, match="is full"):
        run(attempt())
    with Client(echo) as client:
        assert client.capacity()["active_sessions"] == 0


def test_a_silent_server_times_out_and_closes_the_channel():
    async def attempt():
        channel = await Channel.open(server.url, "/ws/batch", 2, timeouts=Timeouts(request=0.3, close=0.5))
        with pytest.raises(Timeout, match=r"did not reply within 0\.3 s"):
            await channel.sessions[0].step({})
        assert channel.closed
        with pytest.raises(SessionClosed):
            await channel.sessions[1].step({})
        await channel.close()

    with SilentBatchServer() as server:
        run(attempt())


def test_a_reply_with_the_wrong_number_of_entries_is_a_protocol_error():
    async def attempt():
        channel = await Channel.open(server.url, "/ws/batch", 2, timeouts=Timeouts(request=2, close=0.5))
        try:
            with pytest.raises(ProtocolError, match="answered a batch of 2 requests"):
                await channel.request([(0, "state", None), (1, "state", None)])
            return channel.closed
        finally:
            await channel.close()

    with SilentBatchServer(short=True) as server:
        assert run(attempt())


@pytest.mark.slow
def test_a_server_that_dies_fails_the_waiting_batch():
    async def attempt(url):
        channel = await Channel.open(url, "/ws/batch", 2, timeouts=Timeouts(request=10, close=0.5))
        await channel.sessions[0].reset()
        server.stop()
        with pytest.raises(SessionClosed, match="closed during the session"):
            await channel.sessions[0].step({"message": "x"})
        await channel.close()

    server = EmbeddedServer("echo")
    run(attempt(server.start()))


def test_an_action_that_cannot_be_sent_leaves_the_channel_usable(echo):
    async def play():
        channel = await Channel.open(echo, "/ws/batch", 1, timeouts=Timeouts(request=5))
        (session,) = channel.sessions
        try:
            await session.reset()
            with pytest.raises(ValueError):
                await session.step({"message": float("nan")})  # not JSON: never sent
            return (await session.step({"message": "still here"})).observation["message_length"]
        finally:
            await channel.close()

    assert run(play()) == 10


# ---------------------------------------------------------------- SyncChannel: the same, without asyncio


def test_a_sync_channel_plays_like_a_channel(echo):
    assert SyncChannel.usable(echo) and not SyncChannel.usable("https://example.org")
    channel = SyncChannel(echo, "/ws/batch", 2, timeouts=Timeouts(request=5))
    try:
        first, _ = channel.request([(0, "reset", {"seed": 3}), (1, "reset", {})])
        assert read_observation(first, channel.url).metadata == {"seed": 3}
        refused, stepped = channel.request([(0, "step", {"nope": 1}), (1, "step", {"message": "four"})])
        with pytest.raises(ServerError, match="VALIDATION_ERROR"):
            read_observation(refused, channel.url)
        assert read_observation(stepped, channel.url).observation["message_length"] == 4
        # Two batches in flight: their replies come back oldest first.
        channel.submit([(0, "step", {"message": "a"})])
        channel.submit([(0, "step", {"message": "bb"}), (1, "state", None)])
        assert channel.in_flight == 2
        (a,) = channel.receive()
        bb, state = channel.receive()
        assert read_observation(a, channel.url).observation["message_length"] == 1
        assert read_observation(bb, channel.url).observation["message_length"] == 2
        assert state["data"]["step_count"] == 1  # the refused step did not count
        with Client(echo) as client:
            assert client.capacity()["active_sessions"] == 2
    finally:
        channel.close()
    assert channel.closed and channel.has_reply() and channel.fileno() == -1
    with pytest.raises(SessionClosed, match="are closed"):
        channel.request([(0, "state", None)])
    with Client(echo) as client:
        assert client.capacity()["active_sessions"] == 0


def test_a_sync_channels_sessions_play_like_sessions(echo):
    with SyncChannel(echo, "/ws/batch", 2, timeouts=Timeouts(request=5)) as channel:
        a, b = channel.sessions
        assert a.reset(seed=3).metadata == {"seed": 3}
        b.reset()
        assert b.step({"message": "four"}).observation["message_length"] == 4
        with pytest.raises(ServerError, match="VALIDATION_ERROR"):
            a.step({"nope": 1})
        assert (a.state()["step_count"], b.state()["step_count"]) == (0, 1)
        assert repr(a) == f"<SyncBatchedSession 0 of <SyncChannel {channel.url} 2 sessions open>>"
    assert a.closed and b.closed
    with pytest.raises(SessionClosed, match="are closed; open new ones"):
        b.state()


def test_a_sync_channel_can_be_waited_on_with_select(echo):
    channel = SyncChannel(echo, "/ws/batch", 1)
    try:
        assert not channel.has_reply()
        channel.submit([(0, "reset", {})])
        readable, _, _ = select.select([channel], [], [], 5)
        assert readable == [channel]
        (reply,) = channel.receive()
        assert reply["type"] == "observation"
    finally:
        channel.close()


def test_a_sync_channel_for_more_sessions_than_the_server_has_is_a_capacity_error(echo):
    with pytest.raises(CapacityError, match="is full"):
        SyncChannel(echo, "/ws/batch", 7)
    with Client(echo) as client:
        assert client.capacity()["active_sessions"] == 0


def test_a_silent_server_times_out_the_sync_channel_and_closes_it():
    with SilentBatchServer() as server:
        channel = SyncChannel(server.url, "/ws/batch", 2, timeouts=Timeouts(request=0.3, close=0.5))
        with pytest.raises(Timeout, match=r"did not reply within 0\.3 s"):
            channel.request([(0, "step", {})])
        assert channel.closed and channel.in_flight == 0
        with pytest.raises(SessionClosed, match="dropped"):
            channel.request([(1, "step", {})])


def test_a_sync_channel_interrupted_while_waiting_is_dropped():
    def interrupt(*_):
        raise KeyboardInterrupt

    with SilentBatchServer() as server:
        channel = SyncChannel(server.url, "/ws/batch", 1, timeouts=Timeouts(request=5, close=0.5))
        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                channel.request([(0, "step", {})])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert channel.closed  # its reply, if it came, would pass for the next batch's
        with pytest.raises(SessionClosed, match="dropped"):
            channel.request([(0, "step", {})])


def test_a_sync_reply_with_the_wrong_number_of_entries_is_a_protocol_error():
    with SilentBatchServer(short=True) as server:
        channel = SyncChannel(server.url, "/ws/batch", 2, timeouts=Timeouts(request=2, close=0.5))
        with pytest.raises(ProtocolError, match="answered a batch of 2 requests"):
            channel.request([(0, "state", None), (1, "state", None)])
        assert channel.closed


@pytest.mark.slow
def test_a_server_that_dies_fails_the_sync_channel():
    server = EmbeddedServer("echo")
    channel = SyncChannel(server.start(), "/ws/batch", 2, timeouts=Timeouts(request=10, close=0.5))
    channel.request([(0, "reset", {})])
    server.stop()
    with pytest.raises(SessionClosed, match="closed during the session"):
        channel.request([(0, "step", {"message": "x"})])
    assert channel.closed


def test_an_action_that_cannot_be_sent_leaves_the_sync_channel_usable(echo):
    channel = SyncChannel(echo, "/ws/batch", 1, timeouts=Timeouts(request=5))
    try:
        channel.request([(0, "reset", {})])
        with pytest.raises(ValueError):
            channel.submit([(0, "step", {"message": float("nan")})])  # not JSON: never sent
        assert channel.in_flight == 0
        (reply,) = channel.request([(0, "step", {"message": "still here"})])
        assert read_observation(reply, channel.url).observation["message_length"] == 10
    finally:
        channel.close()
