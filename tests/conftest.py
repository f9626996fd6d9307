"""Shared fixtures: real servers on loopback, started once per test session.

- ``official_counter`` / ``official_kitchen`` / ``official_chess``: environments served by the official
  ``openenv`` framework (tests/peers/official_app.py), for conformance of our client.
- ``chess_url``: our chess server, as the embedded launcher runs it for ``gym.make("openenv/chess")``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_lab.client import Client
from openenv_lab.launch import shared_embedded_server, stop_embedded_servers
from tests.helpers import read_line

PEERS = Path(__file__).parent / "peers"
# Scripts run in subprocesses, not test modules (rllib_check.py: by an interpreter with RLlib).
collect_ignore = ["peers/official_app.py", "rllib_check.py"]


class PeerServer:
    """An official-framework server in a subprocess; stops when the test session ends."""

    def __init__(self, env: str, max_sessions: int, *, quiet: bool = False, **environment: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PEERS / "official_app.py"), env, "--max-sessions", str(max_sessions)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else None,
            text=True,
            env={**os.environ, **environment},
        )
        line = read_line(self.process, timeout=60)
        if not line.startswith("LISTENING "):
            self.process.kill()
            raise RuntimeError(f"peer server {env} did not start: {line!r}")
        self.url = line.split()[1]
        with Client(self.url) as client:
            client.wait_until_healthy(60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture(scope="session")
def official_counter() -> Iterator[str]:
    server = PeerServer("counter", max_sessions=2)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def hanging_counter() -> Iterator[str]:
    """The official-framework counter for tests that stall steps (a ``delta`` of `HANG`): a stalled step
    holds its session's slot for a minute, so these tests get a server of their own with room to spare."""
    # quiet: when a stalled step ends, the framework logs a traceback for the client that left meanwhile
    server = PeerServer("counter", max_sessions=12, quiet=True)
    yield server.url
    server.stop()


#: The counter's ``delta`` that stalls a step for a minute (tests/peers/official_app.py).
HANG = 1000


@pytest.fixture(scope="session")
def official_kitchen() -> Iterator[str]:
    server = PeerServer("kitchen", max_sessions=8)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def official_chess() -> Iterator[str]:
    server = PeerServer("officialchess", max_sessions=8)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def official_chess_short() -> Iterator[str]:
    """The official-style chess server with a 16 half-move limit: most games end at the limit."""
    server = PeerServer("officialchess", max_sessions=4, OFFICIAL_CHESS_MAX_MOVES="16")
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def chess_url() -> Iterator[str]:
    server = shared_embedded_server("chess")
    assert server.base_url is not None
    yield server.base_url
    stop_embedded_servers()
