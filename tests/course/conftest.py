"""Fixtures of the course checks' tests: the lessons' environments, on the embedded servers."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
import uvicorn

import openenv_lab
from openenv_lab.launch import shared_embedded_server


@pytest.fixture(scope="module")
def echo_url() -> str:
    server = shared_embedded_server("echo")
    assert server.base_url is not None
    return server.base_url


@pytest.fixture
def chess_env() -> Iterator[gym.Env]:
    env = gym.make("openenv/chess", agent_color="white")
    yield env
    env.close()


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """An app of a lesson's own served as the lesson serves it (uvicorn in a thread); yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        openenv_lab.Client(url).wait_until_healthy(30)
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
