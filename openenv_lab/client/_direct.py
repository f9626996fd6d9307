"""A WebSocket client connection read in the thread that waits for the reply: `Session`'s loopback path.

websockets' synchronous client reads the socket in a thread of its own and hands each message to the
thread that called ``recv``. Over loopback that handoff is a noticeable share of a round trip
(``benchmarks/step_latency.py`` compares `Session` with a raw client on websockets' threaded one).
`DirectConnection` drives websockets' own sans-I/O protocol (``websockets.client.ClientProtocol``:
framing, masking, the opening and closing handshakes, ping replies) on a plain socket, and ``recv`` reads
that socket itself.

Between requests nobody reads the socket, so a small keepalive thread does what websockets' reader
thread would do for an idle connection: it answers the server's pings (servers close connections whose
pings go unanswered: uvicorn after 20 s), sends our own pings and fails the connection when their pongs
stop coming. It never waits for the lock that a request holds; a request answers pings itself.

Every socket operation has a deadline: reads the caller's timeout, sends ``send_timeout`` (a request's
message) or ``close_timeout`` (closing, and the keepalive thread's pings and pongs). A request interrupted
half-way (Ctrl+C) closes the connection, since the bytes on the wire can no longer be trusted.

`Session` uses this class for ``ws://`` URLs on loopback without compression (the embedded server, Docker
on this machine). Elsewhere the handoff is small beside the network, and websockets' client brings what
this class leaves out: TLS, proxies and compression.

The methods raise what websockets' synchronous client raises (``OSError``, ``TimeoutError``,
``InvalidStatus`` and other ``InvalidHandshake`` while opening; ``ConnectionClosed`` afterwards), so
callers map errors the same way for both.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import threading
import time
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosedError, InvalidHandshake
from websockets.frames import Frame, Opcode
from websockets.http11 import USER_AGENT, Response
from websockets.protocol import State
from websockets.uri import parse_uri

__all__ = ["DirectConnection"]

#: Bytes asked of the socket per read: an Atari screen as zlib bytes fits in one, a JSON one in a few.
_READ_SIZE = 1 << 18

#: The most the keepalive thread sleeps between looks at an idle connection, in seconds.
_LONGEST_TICK = 0.5


class DirectConnection:
    """One client WebSocket connection whose replies are read by the thread waiting for them.

    Not thread-safe for concurrent requests (one thread sends and receives, as `Session` does); the
    keepalive thread only touches the connection while no request holds it.

    Example:
        >>> import json
        >>> from openenv_lab.launch import shared_embedded_server
        >>> url = shared_embedded_server("echo").base_url.replace("http://", "ws://") + "/ws"
        >>> with DirectConnection.connect(url, open_timeout=5.0, close_timeout=5.0) as ws:
        ...     ws.send('{"type": "reset", "data": {"seed": 0}}')
        ...     reply = json.loads(ws.recv(timeout=5.0))
        >>> reply["type"], reply["data"]["reward"], reply["data"]["metadata"]
        ('observation', 0.0, {'seed': 0})
    """

    def __init__(
        self,
        sock: socket.socket,
        protocol: ClientProtocol,
        *,
        send_timeout: float | None,
        close_timeout: float,
        ping_interval: float | None,
        ping_timeout: float | None,
    ) -> None:
        self._sock = sock
        self._protocol = protocol
        self._send_timeout = send_timeout
        self._close_timeout = close_timeout
        self._ping_interval = ping_interval
        self._ping_timeout = ping_timeout
        self._lock = threading.Lock()
        self._messages: collections.deque[str] = collections.deque()
        self._fragments: list[bytes] = []
        self._ping: tuple[bytes, float] | None = None  # payload and time of our unanswered ping
        self._last_ping = time.monotonic()
        self._socket_closed = False
        self._timeout: float | None = sock.gettimeout()  # the socket's timeout as last set
        self._stopping = threading.Event()
        self._close_requested = False  # by close() called on the keepalive thread (a garbage collection)
        self._keepalive = threading.Thread(target=self._keep_alive, name="openenv-lab-keepalive", daemon=True)

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        open_timeout: float,
        close_timeout: float,
        send_timeout: float | None = None,
        ping_interval: float | None = None,
        ping_timeout: float | None = None,
        max_size: int | None = None,
        additional_headers: dict[str, str] | None = None,
    ) -> DirectConnection:
        """Open a TCP connection to ``url`` (``ws://`` only) and complete the WebSocket handshake.

        ``send_timeout`` bounds sending one message (None: as long as it takes, as websockets' client).
        """
        uri = parse_uri(url)
        if uri.secure:
            raise ValueError(f"DirectConnection speaks plain ws:// only, not {url}")
        deadline = time.monotonic() + open_timeout
        sock = socket.create_connection((uri.host, uri.port), timeout=open_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            protocol = ClientProtocol(uri, max_size=max_size)
            connection = cls(
                sock,
                protocol,
                send_timeout=send_timeout,
                close_timeout=close_timeout,
                ping_interval=ping_interval,
                ping_timeout=ping_timeout,
            )
            connection._handshake(additional_headers, deadline)
        except BaseException:
            sock.close()
            raise
        connection._keepalive.start()
        return connection

    # ------------------------------------------------------------------ requests

    def send(self, text: str) -> None:
        """Send one text message. Raises ``ConnectionClosed`` when the connection is closed or closing."""
        with self._lock:
            if self._protocol.state is not State.OPEN:
                raise self._closed_error()
            self._protocol.send_text(text.encode())
            try:
                self._flush(self._send_timeout)
            except BaseException:
                self._close_socket()  # part of a message may have gone: nothing that follows would parse
                raise

    def recv(self, timeout: float) -> str:
        """The next text message, waiting at most ``timeout`` seconds.

        Raises:
            TimeoutError: nothing arrived in time (the connection stays open).
            ConnectionClosed: the connection closed before a message arrived.
        """
        deadline = time.monotonic() + timeout
        wait = timeout  # the same value request after request: the socket's timeout stays as it is
        with self._lock:
            while not self._messages:
                if self._socket_closed:
                    raise self._closed_error()
                if wait <= 0:
                    raise TimeoutError(f"no message within {timeout:g} s")
                try:
                    self._read(wait)
                except TimeoutError:
                    raise
                except BaseException:
                    self._close_socket()  # interrupted mid-parse: the protocol's state is lost
                    raise
                wait = deadline - time.monotonic()
            return self._messages.popleft()

    def close(self) -> None:
        """Close the connection with the WebSocket closing handshake (waits at most ``close_timeout``).

        Safe to call more than once, and from any thread.
        """
        if threading.current_thread() is self._keepalive:
            # A garbage collection ran a finalizer here, maybe while this thread holds a lock that closing
            # takes: leave it to the keepalive loop, once it holds none.
            self._close_requested = True
            return
        deadline = time.monotonic() + self._close_timeout
        self._stopping.set()
        if self._keepalive.is_alive():
            self._keepalive.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._close(deadline)

    @property
    def closed(self) -> bool:
        """Whether the TCP connection is closed."""
        return self._socket_closed

    def has_message(self) -> bool:
        """Whether `recv` returns at once: a message is waiting (the keepalive thread may have read it),
        or the connection closed (which `recv` reports). Otherwise wait on `fileno` becoming readable."""
        return bool(self._messages) or self._socket_closed

    def poll(self) -> bool:
        """Process whatever has arrived, without waiting, then return `has_message`: after ``select``
        said the socket is readable, which may be a ping or part of a message rather than a whole one."""
        if not self._lock.acquire(blocking=False):  # a request or the keepalive thread is reading
            return self.has_message()
        try:
            while not self._socket_closed and not self._messages and self._readable():
                self._read(self._close_timeout)  # returns at once: something is there
        except TimeoutError:
            pass
        except BaseException:
            self._close_socket()  # interrupted mid-parse: the protocol's state is lost
            raise
        finally:
            self._lock.release()
        return self.has_message()

    def fileno(self) -> int:
        """The socket's file descriptor, for ``select`` over several connections (-1 once closed)."""
        return self._sock.fileno()

    def __enter__(self) -> DirectConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals (hold the lock)

    def _close(self, deadline: float) -> None:
        if self._socket_closed:
            return
        try:
            # A closing handshake that fails (a timeout, a broken peer) still ends in a closed socket.
            with contextlib.suppress(Exception):
                if self._protocol.state is State.OPEN:
                    self._protocol.send_close(1000)
                    self._flush(max(0.001, deadline - time.monotonic()))
                # The client waits for the server to close TCP once both sides have sent their close codes.
                while not self._socket_closed and (remaining := deadline - time.monotonic()) > 0:
                    self._read(remaining, send_timeout=remaining)
        finally:
            self._close_socket()

    def _handshake(self, headers: dict[str, str] | None, deadline: float) -> None:
        request = self._protocol.connect()
        if headers:
            request.headers.update(headers)
        request.headers.setdefault("User-Agent", USER_AGENT)
        self._protocol.send_request(request)
        self._flush(max(0.001, deadline - time.monotonic()))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("timed out while waiting for the handshake response")
            try:
                data = self._sock_recv(remaining)
            except TimeoutError:
                raise TimeoutError("timed out while waiting for the handshake response") from None
            except OSError:
                data = b""
            if data:
                self._protocol.receive_data(data)
            else:
                self._protocol.receive_eof()
            events = self._protocol.events_received()
            if self._protocol.handshake_exc is not None:
                raise self._protocol.handshake_exc
            if events and isinstance(events[0], Response):
                self._handle(events[1:])  # WebSocket data that came in the same read as the response
                self._flush(max(0.001, deadline - time.monotonic()))
                return
            if not data:
                raise InvalidHandshake("the server closed the connection during the handshake")

    def _read(self, timeout: float, send_timeout: float | None = None) -> None:
        """Read once from the socket (waiting at most ``timeout``), process what came and send what the
        protocol answers (pongs, a close), within ``send_timeout`` (default: the connection's)."""
        try:
            data = self._sock_recv(timeout)
        except TimeoutError:
            raise
        except OSError:  # reset by the peer: as good as an end of stream
            data = b""
        if data:
            self._protocol.receive_data(data)
            self._handle(self._protocol.events_received())
        else:
            self._protocol.receive_eof()
        self._flush(self._send_timeout if send_timeout is None else send_timeout)
        if not data or self._protocol.state is State.CLOSED:
            self._close_socket()

    def _set_timeout(self, timeout: float | None) -> None:
        if timeout != self._timeout:  # settimeout costs two system calls: skip it when unchanged
            self._sock.settimeout(timeout)
            self._timeout = timeout

    def _sock_recv(self, timeout: float) -> bytes:
        self._set_timeout(timeout)
        return self._sock.recv(_READ_SIZE)

    def _handle(self, events: list[Any]) -> None:
        for event in events:
            if not isinstance(event, Frame):
                continue
            opcode = event.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY or opcode is Opcode.CONT:
                if opcode is not Opcode.CONT:
                    self._fragments.clear()
                self._fragments.append(event.data)
                if event.fin:
                    data = b"".join(self._fragments) if len(self._fragments) > 1 else self._fragments[0]
                    self._fragments.clear()
                    self._messages.append(data.decode("utf-8", errors="replace"))
            elif opcode is Opcode.PONG and self._ping is not None and event.data == self._ping[0]:
                self._ping = None
            # Pings are answered by the protocol (the pong waits in data_to_send); closes likewise.

    def _flush(self, timeout: float | None) -> None:
        """Send what the protocol has queued, each write within ``timeout`` (None: no limit)."""
        writes = self._protocol.data_to_send()
        if not writes or self._socket_closed:
            return
        self._set_timeout(timeout)
        for data in writes:
            if data:
                try:
                    self._sock.sendall(data)
                except OSError:  # the peer is gone or stopped reading; reading will say how it ended
                    self._close_socket()
                    return
            else:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_WR)

    def _close_socket(self) -> None:
        if self._socket_closed:
            return
        self._socket_closed = True
        self._sock.close()
        with contextlib.suppress(Exception):  # a parser an interrupt broke raises StopIteration here
            self._protocol.receive_eof()  # marks the protocol CLOSED whatever state it was in
        self._protocol.data_to_send()

    def _closed_error(self) -> Exception:
        protocol = self._protocol
        if protocol.state is State.CLOSED:
            return protocol.close_exc
        # Closing: both close codes are known (and in which order they crossed), not yet the TCP close.
        return ConnectionClosedError(protocol.close_rcvd, protocol.close_sent, protocol.close_rcvd_then_sent)

    def _readable(self) -> bool:
        """Whether a read would return at once (data, or the end of the stream)."""
        self._set_timeout(0.0)
        try:
            self._sock.recv(1, socket.MSG_PEEK)  # b"" at the end of the stream: readable too
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            pass  # an error to collect: reading reports it
        return True

    # ------------------------------------------------------------------ keepalive thread

    def _keep_alive(self) -> None:
        ticks = [_LONGEST_TICK]
        if self._ping_interval is not None:
            ticks.append(self._ping_interval / 4)
        if self._ping_timeout is not None:
            ticks.append(self._ping_timeout / 4)
        tick = min(ticks)
        while not self._stopping.wait(tick) and not self._close_requested:
            if not self._lock.acquire(blocking=False):
                continue  # a request is reading the socket: it answers pings itself
            try:
                if self._socket_closed:
                    return
                self._idle_duties()
            except Exception:  # the next request reports what went wrong
                self._close_socket()
                return
            finally:
                self._lock.release()
        if self._close_requested:
            with self._lock:
                self._close(time.monotonic() + self._close_timeout)

    def _idle_duties(self) -> None:
        # Whatever arrived while nobody read: the server's pings, pongs to ours, a close.
        while not self._socket_closed and self._readable():
            self._read(self._close_timeout, send_timeout=self._close_timeout)
        if self._socket_closed:
            return
        now = time.monotonic()
        if self._ping is not None:
            if self._ping_timeout is not None and now - self._ping[1] > self._ping_timeout:
                self._protocol.fail(1011, "keepalive ping timeout")
                self._flush(self._close_timeout)
                self._close_socket()
        elif self._ping_interval is not None and now - self._last_ping >= self._ping_interval:
            payload = os.urandom(4)
            self._ping, self._last_ping = (payload, now), now
            self._protocol.send_ping(payload)
            self._flush(self._close_timeout)
