"""Hugging Face Spaces, without network: a server on 127.0.0.1 stands in for the Space
(``$OPENENV_LAB_SPACE_URL``), our echo server behind a gate that behaves as the Hub does: a token checked
on every HTTP request and WebSocket upgrade, a sleeping Space answering 503 until it wakes, 404 for a
Space that does not exist. The real Hub is not exercised here."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest
import uvicorn

import openenv_lab  # noqa: F401 - registers the ids
from openenv_lab.client import ConnectError
from openenv_lab.client.spaces import SPACE_URL_VARIABLE, space_headers, space_image, space_url, split_space
from openenv_lab.launch import SpaceServer
from openenv_lab.servers.echo import make_app

TOKEN = "hf_standin_token"


class Gate:
    """ASGI middleware in front of the echo app: the Hub's answers for tokens, sleep and missing Spaces."""

    def __init__(self, app) -> None:
        self.app = app
        self.asleep_for = 0  # requests still answered 503 (the Space is waking up)
        self.missing = False
        self.seen: list[tuple[str, str, str | None]] = []  # (scope type, path, Authorization)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").decode() or None
        self.seen.append((scope["type"], scope["path"], auth))
        status = None
        if self.missing:
            status = 404
        elif self.asleep_for > 0:
            self.asleep_for -= 1
            status = 503
        elif auth != f"Bearer {TOKEN}":
            status = 401
        if status is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/html")]}
        )
        await send({"type": "http.response.body", "body": b"<html>Space unavailable</html>"})


@pytest.fixture(scope="module")
def standin() -> Iterator[tuple[Gate, str]]:
    gate = Gate(make_app())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(gate, log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield gate, f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def space(standin, monkeypatch) -> Gate:
    gate, url = standin
    monkeypatch.setenv(SPACE_URL_VARIABLE, url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    gate.asleep_for, gate.missing = 0, False
    gate.seen.clear()
    return gate


def test_space_names_resolve_as_the_hub_names_them(monkeypatch):
    monkeypatch.delenv(SPACE_URL_VARIABLE, raising=False)
    assert split_space("https://huggingface.co/spaces/Owner/My.Env") == ("Owner", "My.Env")
    assert space_url("Owner/My_Env.v2") == "https://owner-my-env-v2.hf.space"
    assert space_image("Owner/My_Env.v2") == "registry.hf.space/owner-my-env-v2:latest"
    monkeypatch.setenv(SPACE_URL_VARIABLE, "http://127.0.0.1:9/{subdomain}")
    assert space_url("Owner/My_Env") == "http://127.0.0.1:9/owner-my-env"
    for bad in ("owner", "owner/name/extra", "/name", "", None, "own er/name"):
        with pytest.raises(ValueError, match="owner/name"):
            split_space(bad)


def test_the_token_comes_from_hf_token_unless_given_or_refused(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert space_headers(None) == {"Authorization": "Bearer hf_env"}
    assert space_headers("hf_given") == {"Authorization": "Bearer hf_given"}
    assert space_headers(False) == {}
    assert space_headers(None, {"authorization": "Basic x"}) == {"authorization": "Basic x"}
    with pytest.raises(ValueError, match="token"):
        space_headers("  ")


def test_a_space_plays_with_the_token_on_every_request_and_websocket(space, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with gym.make("openenv/remote", space="someone/echo_env") as env:
        assert env.unwrapped.base_url.startswith("http://127.0.0.1:")
        env.reset(seed=0)
        _, reward, *_ = env.step("hello")
    assert reward == pytest.approx(0.5)
    kinds = {kind for kind, _, _ in space.seen}
    assert kinds == {"http", "websocket"}
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in space.seen)


def test_a_vector_env_on_a_space_sends_the_token_too(space):
    envs = gym.make_vec("openenv/remote", num_envs=2, space="someone/echo_env", token=TOKEN)
    try:
        envs.reset(seed=0)
        envs.step(("a", "bb"))
    finally:
        envs.close()
    assert sum(kind == "websocket" for kind, _, _ in space.seen) >= 1
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in space.seen)


@pytest.mark.slow
def test_a_sleeping_space_is_waited_for(space):
    space.asleep_for = 3
    with gym.make("openenv/remote", space="someone/echo_env", token=TOKEN) as env:
        env.reset()
    assert [path for _, path, _ in space.seen[:4]] == ["/health"] * 4


def test_a_space_that_does_not_wake_says_how_long_it_waited(space):
    space.asleep_for = 10_000
    started = time.monotonic()
    with pytest.raises(ConnectError, match=r"did not wake up within 1 s \(last answer: HTTP 503\)"):
        SpaceServer("someone/echo_env", token=TOKEN, wake_timeout=1.0).start()
    assert time.monotonic() - started < 10


@pytest.mark.slow
@pytest.mark.parametrize("where", ["a name that does not resolve", "a refused connection"])
def test_a_hub_that_cannot_be_reached_fails_within_the_connect_timeout_saying_so(monkeypatch, where):
    if where == "a name that does not resolve":
        monkeypatch.setenv(SPACE_URL_VARIABLE, "http://{subdomain}.invalid")  # RFC 2606: never resolves
        # The resolver's answer for it, given here: no DNS query leaves this machine.
        resolve = socket.getaddrinfo

        def getaddrinfo(host, *args, **kwargs):
            if str(host).endswith(".invalid"):
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return resolve(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    else:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # nothing listens there once closed
        monkeypatch.setenv(SPACE_URL_VARIABLE, f"http://127.0.0.1:{port}/{{subdomain}}")
    started = time.monotonic()
    with pytest.raises(
        ConnectError, match=r"^The Hugging Face Hub cannot be reached from this machine: "
    ) as error:
        gym.make("openenv/remote", space="someone/echo_env")
    assert time.monotonic() - started < 20  # the connect timeout (10 s), not wake_timeout (300 s)
    assert "base_url=" in str(error.value) and 'launcher="docker"' in str(error.value)


@pytest.mark.slow
def test_a_waking_space_shows_its_wait_then_answers(space, capsys):
    space.asleep_for = 3  # three 503s, two seconds apart: a wait that lasts
    with gym.make("openenv/remote", space="someone/echo_env", token=TOKEN, progress=True) as env:
        env.reset(seed=0)
    shown = capsys.readouterr().err
    assert "Waiting for the Space someone/echo_env to wake up" in shown and "HTTP 503" in shown
    space.asleep_for = 3
    SpaceServer("someone/echo_env", token=TOKEN).start()  # by default: nobody watches a test
    assert capsys.readouterr().err == ""


def test_a_missing_space_and_a_refused_token_say_so(space):
    space.missing = True
    with pytest.raises(ConnectError, match=r"not found.*or it is private and no token was sent"):
        gym.make("openenv/remote", space="someone/no_such_env")
    space.missing = False
    with pytest.raises(ConnectError, match=r"refused the token \(HTTP 401\)"):
        gym.make("openenv/remote", space="someone/echo_env", token="hf_wrong")


def test_hf_token_is_never_sent_to_a_url_typed_by_the_user(space, standin, monkeypatch):
    _, url = standin
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(ConnectError, match=r"needs credentials\. Pass token="):
        gym.make("openenv/remote", base_url=url)
    assert all(auth is None for _, _, auth in space.seen)
    with gym.make("openenv/remote", base_url=url, token=TOKEN) as env:  # given explicitly: sent
        env.reset()


def test_running_a_spaces_image_needs_trust_and_no_prompt(space):
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        gym.make("openenv/remote", space="someone/echo_env", launcher="docker")
    with pytest.raises(ValueError, match="drop base_url"):
        gym.make("openenv/remote", space="someone/echo_env", base_url="http://127.0.0.1:1")
