"""`DirectConnection`, the loopback WebSocket that `Session` reads in the caller's thread, against real
servers: websockets' own server (scripted per test), a server that goes mute, and ours."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close, Frame, Opcode
from websockets.sync.client import ClientConnection

from openenv_lab.client import Keepalive, Session, SessionClosed, Timeouts
from openenv_lab.client._direct import DirectConnection
from openenv_lab.launch import EmbeddedServer
from tests.peers.raw_servers import MuteServer, ScriptedServer


@pytest.fixture(scope="module")
def echo_url():
    with EmbeddedServer("echo") as server:
        assert server.base_url is not None
        yield server.base_url


def ws(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


def connect(url: str, **options: float | None) -> DirectConnection:
    return DirectConnection.connect(ws(url), open_timeout=5.0, close_timeout=2.0, **options)  # type: ignore[arg-type]


async def echo(server_ws) -> None:
    async for message in server_ws:
        await server_ws.send(message)


@pytest.mark.slow
def test_loopback_sessions_use_it_and_compressed_ones_do_not(echo_url):
    with Session(echo_url) as direct, Session(echo_url, compression="deflate") as threaded:
        assert isinstance(direct._ws, DirectConnection)
        assert isinstance(threaded._ws, ClientConnection)
        replies = []
        for session in (direct, threaded):
            session.reset(seed=3)
            replies.append([session.step({"message": m}).observation for m in ("a", "bb", "ccc")])
        assert replies[0] == replies[1]
        assert replies[0][2]["echoed_message"] == "ccc"


@pytest.mark.slow
def test_the_servers_pings_are_answered_while_nobody_reads():
    # The server pings every 0.2 s and drops the connection when a pong takes over 1.5 s (the keepalive
    # thread looks every 0.5 s); the client sends no pings of its own and makes no request for 3 s.
    with ScriptedServer(echo, ping_interval=0.2, ping_timeout=1.5) as server:
        with connect(server.url, ping_interval=None, ping_timeout=None) as connection:
            time.sleep(3.0)
            connection.send("still there?")
            assert connection.recv(timeout=5.0) == "still there?"
        assert server.closed.wait(5) and server.close_codes == [1000]


def test_a_mute_server_is_noticed_by_our_pings_while_idle():
    with MuteServer() as server:
        connection = connect(server.url, ping_interval=0.1, ping_timeout=0.2)
        time.sleep(1.0)
        assert connection.closed  # the keepalive thread gave up on it
        started = time.monotonic()
        with pytest.raises(ConnectionClosed):
            connection.send("anyone?")
            connection.recv(timeout=30.0)
        assert time.monotonic() - started < 5.0  # said at once, not after the request timeout
        assert connection._protocol.close_sent is not None
        assert connection._protocol.close_sent.reason == "keepalive ping timeout"


def test_a_session_whose_server_went_mute_says_so_at_its_next_request():
    # The server goes mute after the session opened; our pings find out while the user is away.
    with MuteServer(answer_first=True) as server:
        session = Session(
            server.url, keepalive=Keepalive(interval=0.1, timeout=0.2), timeouts=Timeouts(request=30)
        )
        time.sleep(1.0)
        started = time.monotonic()
        with pytest.raises(SessionClosed, match="closed during the session"):
            session.step({"message": "hello"})
        assert time.monotonic() - started < 5.0
        assert session.closed


def test_fragmented_messages_are_put_back_together():
    async def fragments(server_ws) -> None:
        await server_ws.recv()
        await server_ws.send(['{"type": ', '"state", ', '"data": {"é": 1}}'])

    with ScriptedServer(fragments) as server, connect(server.url) as connection:
        connection.send("{}")
        assert json.loads(connection.recv(timeout=5.0)) == {"type": "state", "data": {"é": 1}}


def test_replies_sent_before_a_close_are_read_before_the_close_is_reported():
    async def explain_and_close(server_ws) -> None:
        await server_ws.recv()
        await server_ws.send("first")
        await server_ws.send("second")
        await server_ws.close(4000, "capacity reached")

    with ScriptedServer(explain_and_close) as server, connect(server.url) as connection:
        connection.send("go")
        assert [connection.recv(timeout=5.0), connection.recv(timeout=5.0)] == ["first", "second"]
        with pytest.raises(ConnectionClosed) as caught:
            connection.recv(timeout=5.0)
        assert (caught.value.rcvd.code, caught.value.rcvd.reason) == (4000, "capacity reached")
        with pytest.raises(ConnectionClosed):
            connection.send("more")


def test_a_timeout_leaves_the_connection_usable():
    async def slow(server_ws) -> None:
        message = await server_ws.recv()
        await server_ws.send(message)  # only after the client has stopped waiting once

    with ScriptedServer(slow) as server, connect(server.url) as connection:
        with pytest.raises(TimeoutError):
            connection.recv(timeout=0.2)
        connection.send("late")
        assert connection.recv(timeout=5.0) == "late"


def test_close_is_a_clean_closing_handshake_and_stops_the_keepalive_thread():
    with ScriptedServer(echo) as server:
        connection = connect(server.url, ping_interval=20.0, ping_timeout=20.0)
        keepalive = connection._keepalive
        assert keepalive.is_alive()
        connection.send("hello")
        assert connection.recv(timeout=5.0) == "hello"
        connection.close()
        connection.close()  # twice is fine
        assert connection.closed and not keepalive.is_alive()
        assert server.closed.wait(5) and server.close_codes == [1000]


def test_headers_reach_the_server():
    seen = {}

    async def record(server_ws) -> None:
        seen.update(server_ws.request.headers.raw_items())
        await echo(server_ws)

    with ScriptedServer(record) as server:
        connection = DirectConnection.connect(
            ws(server.url),
            open_timeout=5.0,
            close_timeout=2.0,
            additional_headers={"Authorization": "Bearer x"},
        )
        connection.close()
        assert server.closed.wait(5)
    assert server.errors == []
    assert seen["Authorization"] == "Bearer x"
    assert "websockets" in seen["User-Agent"].lower()  # the same User-Agent as websockets' own client


def test_requests_from_one_thread_while_the_keepalive_thread_runs(echo_url):
    # Many short requests with a keepalive thread ticking every 25 ms: replies never go astray.
    with Session(echo_url, keepalive=Keepalive(interval=0.1, timeout=5.0)) as session:
        session.reset(seed=0)
        stop = time.monotonic() + 1.0
        count = 0
        while time.monotonic() < stop:
            message = f"m{count}"
            result = session.step({"message": message})
            assert result.observation["echoed_message"] == message
            count += 1
            if result.done:
                session.reset()
        assert count > 10
        keepalive = session._ws._keepalive
    assert not keepalive.is_alive()


def test_a_large_message_after_the_keepalive_thread_looked_at_the_socket():
    # The keepalive thread peeks at the socket without blocking; a send that follows must still block
    # until a message larger than the socket buffers has gone.
    big = "x" * (16 * 1024 * 1024)
    with ScriptedServer(echo, max_size=None) as server:
        connection = connect(server.url, ping_interval=0.05, ping_timeout=5.0)
        with connection:
            time.sleep(0.3)
            connection.send(big)
            assert connection.recv(timeout=30.0) == big


@pytest.mark.slow
def test_a_send_after_the_keepalive_thread_read_has_the_request_timeout():
    # The server pings (read by the keepalive thread, with its own short timeouts), then stops reading for
    # 2 s; a 32 MB message must wait for it (send_timeout 30 s), not inherit the keepalive's timeouts.
    async def ping_then_stall(server_ws) -> None:
        await asyncio.sleep(0.1)
        await server_ws.ping()
        await asyncio.sleep(0.9)
        time.sleep(2.0)  # the server's event loop is busy
        message = await server_ws.recv()
        await server_ws.send(f"got {len(message)}")

    big = "x" * (32 * 1024 * 1024)
    with (
        ScriptedServer(ping_then_stall, max_size=None, ping_interval=None) as server,
        connect(server.url, send_timeout=30.0) as connection,
    ):
        time.sleep(0.8)
        connection.send(big)
        assert connection.recv(timeout=30.0) == f"got {len(big)}"


def test_close_called_on_the_keepalive_thread_does_not_deadlock():
    # A garbage collection can run a Session's finalizer on the keepalive thread, while that thread holds
    # the connection's lock: close() must not wait for it there, and the connection still gets closed.
    with ScriptedServer(echo) as server:
        connection = connect(server.url, ping_interval=0.1, ping_timeout=5.0)
        duties = connection._idle_duties

        def duties_then_a_finalizer():
            duties()
            connection.close()

        connection._idle_duties = duties_then_a_finalizer
        deadline = time.monotonic() + 10
        while not connection.closed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert connection.closed
        connection._keepalive.join(5)
        assert not connection._keepalive.is_alive() and not connection._lock.locked()
        assert server.closed.wait(5) and server.close_codes == [1000]  # a closing handshake, not a drop


def test_an_interrupt_inside_the_protocol_parser_still_closes_the_socket(echo_url):
    # Ctrl+C landing inside websockets' parser kills its generator; closing must still close the socket
    # (and raise nothing), so the interrupt reaches the user as a KeyboardInterrupt.
    session = Session(echo_url)
    connection = session._ws
    with pytest.raises(KeyboardInterrupt):
        connection._protocol.parser.throw(KeyboardInterrupt)
    session.close()
    assert connection.closed and connection._sock.fileno() == -1


def test_a_send_while_the_server_closes_says_connection_closed():
    # The server's close frame has been read (and answered) but its TCP close has not come yet: a send
    # then is refused with ConnectionClosed, whose close frames say who closed, and reading still works.
    async def explain_and_stay(server_ws) -> None:
        await server_ws.wait_closed()

    with ScriptedServer(explain_and_stay) as server, connect(server.url) as connection:
        with connection._lock:  # as if a request had just read the server's close frame
            close = Frame(Opcode.CLOSE, Close(1000, "bye").serialize())
            connection._protocol.receive_data(close.serialize(mask=False))
            connection._flush(5.0)
        with pytest.raises(ConnectionClosed) as caught:
            connection.send("more")
        assert caught.value.rcvd is not None and caught.value.rcvd.reason == "bye"
        with pytest.raises(ConnectionClosed):
            connection.recv(timeout=5.0)
