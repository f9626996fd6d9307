"""Shared fixtures: real servers on loopback, started once per test session.

- ``official_grid_world`` / ``official_echo`` / ``official_chess``: official OpenEnv environments, run
  unmodified from the conformance copy of huggingface/OpenEnv (tests/conformance.py; skipped, saying
  why, where that copy is absent), for our client's conformance.
- ``framework_counter`` / ``hanging_counter`` / ``framework_kitchen`` / ``framework_dice``: test
  environments of our own served by the official framework (tests/peers/framework_app.py), for what no
  official environment does (a step that hangs, every JSON type, a room of exactly two sessions, episodes
  that never replay).
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
from tests.conformance import OfficialServer
from tests.helpers import read_line

PEERS = Path(__file__).parent / "peers"
# Scripts run in subprocesses, not test modules (rllib_check.py: by an interpreter with RLlib).
collect_ignore = ["peers/framework_app.py", "rllib_check.py", "research_check.py"]


@pytest.fixture(scope="session", autouse=True)
def sb3_logs_stay_in_pytests_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """stable-baselines3 makes a folder in the system's temporary folder for every model it trains,
    unless ``SB3_LOGDIR`` names one: the tests' models, and those of the notebooks they run, use one
    in pytest's own temporary folder."""
    os.environ.setdefault("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))


class FrameworkServer:
    """A test environment on the official framework, in a subprocess; stops when the test session ends."""

    def __init__(self, env: str, max_sessions: int, *, quiet: bool = False, **environment: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PEERS / "framework_app.py"), env, "--max-sessions", str(max_sessions)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else None,
            text=True,
            env={**os.environ, **environment},
        )
        line = read_line(self.process, timeout=60)
        if not line.startswith("LISTENING "):
            self.process.kill()
            raise RuntimeError(f"framework server {env} did not start: {line!r}")
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
def framework_counter() -> Iterator[str]:
    server = FrameworkServer("counter", max_sessions=2)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def hanging_counter() -> Iterator[str]:
    """The framework counter for tests that stall steps (a ``delta`` of `HANG`): a stalled step
    holds its session's slot for a minute, so these tests get a server of their own with room to spare."""
    # quiet: when a stalled step ends, the framework logs a traceback for the client that left meanwhile
    server = FrameworkServer("counter", max_sessions=12, quiet=True)
    yield server.url
    server.stop()


#: The counter's ``delta`` that stalls a step for a minute (tests/peers/framework_app.py).
HANG = 1000


@pytest.fixture(scope="session")
def framework_dice() -> Iterator[str]:
    """A server whose episodes never replay: it ignores seeds and rolls dice of its own."""
    server = FrameworkServer("dice", max_sessions=16)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_numpy() -> Iterator[str]:
    """A server whose every reset fails: its metadata holds numpy's int64, which it cannot serialise."""
    server = FrameworkServer("numpy", max_sessions=2)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_kitchen() -> Iterator[str]:
    server = FrameworkServer("kitchen", max_sessions=8)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_liar() -> Iterator[str]:
    """A server that breaks what the report card checks (tests/peers/framework_app.py)."""
    server = FrameworkServer("liar", max_sessions=8)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_shifty() -> Iterator[str]:
    """A server that sends null for a number its schema declares (tests/peers/framework_app.py)."""
    server = FrameworkServer("shifty", max_sessions=8)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_ledger() -> Iterator[str]:
    """A server that breaks the state contract, or the end of an episode, as each reset asks."""
    server = FrameworkServer("ledger", max_sessions=8)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_parrot() -> Iterator[str]:
    """A server that echoes long input back, longer, as TextArena's games do."""
    server = FrameworkServer("parrot", max_sessions=2)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_pile() -> Iterator[str]:
    """Nim served as OpenSpiel's games are: an unbounded ``action_id``, the legal ones listed."""
    server = FrameworkServer("pile", max_sessions=16)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def framework_tally() -> Iterator[str]:
    """A plain ``int`` action without bounds, and nothing listing its legal values."""
    server = FrameworkServer("tally", max_sessions=16)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def official_grid_world() -> Iterator[str]:
    """The official grid_world_env (one session at a time, its app's default)."""
    with OfficialServer("grid_world_env") as server:
        yield server.url


@pytest.fixture(scope="session")
def official_echo() -> Iterator[str]:
    """The official echo_env (MCP tools), with room for two sessions (its ``MAX_CONCURRENT_ENVS``)."""
    with OfficialServer("echo_env", environment={"MAX_CONCURRENT_ENVS": "2"}) as server:
        yield server.url


@pytest.fixture(scope="session")
def official_chess() -> Iterator[str]:
    """The official chess_env: moonfish plays the other side (about a second a move from the opening
    here, so tests start it from endgames)."""
    with OfficialServer("chess_env") as server:
        yield server.url


@pytest.fixture(scope="session")
def chess_url() -> Iterator[str]:
    server = shared_embedded_server("chess")
    assert server.base_url is not None
    yield server.base_url
    stop_embedded_servers()
