"""A server reachable from other machines requires its token on every request.

Bound to 0.0.0.0 and reached at 127.0.0.1 only (CI machines allow traffic on loopback alone): HTTP
without the token gets 401 with JSON and no session opens over the WebSocket; the right token (given, or
from ``$OPENENV_LAB_TOKEN``) plays; a loopback server needs none unless given one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import gymnasium as gym
import httpx
import pytest

import openenv_lab  # noqa: F401 - registers the ids
from openenv_lab.client import ConnectError, Session
from openenv_lab.client.spaces import SERVER_TOKEN_VARIABLE
from openenv_lab.servers._auth import TOKEN_VARIABLE, needs_token
from tests.helpers import serve_cli


def serve(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    return serve_cli("echo", *args)


@pytest.fixture(scope="module")
def exposed() -> Iterator[tuple[str, str]]:
    process, banner = serve("--host", "0.0.0.0")
    try:
        url = banner[0].split(" listening on ")[1].split()[0]
        token = next(line.split("token: ")[1] for line in banner if line.startswith("token: "))
        yield url, token
    finally:
        process.terminate()
        process.wait(10)


def test_the_variable_names_agree_and_loopback_is_told_apart():
    assert TOKEN_VARIABLE == SERVER_TOKEN_VARIABLE
    assert not needs_token("127.0.0.1") and not needs_token("::1") and not needs_token("localhost")
    assert needs_token("0.0.0.0") and needs_token("192.168.1.4") and needs_token("example.org")


@pytest.mark.slow
def test_without_the_token_every_request_but_health_is_refused(exposed):
    url, token = exposed
    for path in ("/schema", "/metadata", "/capacity", "/state", "/docs", "/openapi.json", "/Health"):
        response = httpx.get(url + path, timeout=10)
        assert response.status_code == 401 and "token" in response.json()["detail"], path
    for path in ("/reset", "/step", "/health"):  # /health is open to GET only
        response = httpx.post(url + path, json={}, timeout=10)
        assert response.status_code == 401, path
    wrong = httpx.get(url + "/schema", headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401
    # Load balancers and Docker or Kubernetes probes call /health bare: it answers, and says only that.
    bare = httpx.get(url + "/health", timeout=10)
    assert bare.status_code == 200 and bare.json() == {"status": "healthy"}
    assert httpx.head(url + "/health", timeout=10).status_code == 401
    with pytest.raises(ConnectError, match="needs credentials") as refused:
        Session(url, headers={"Authorization": f"Bearer {token}x"})
    assert refused.value.status in (401, 403)
    with pytest.raises(ConnectError, match=r"needs credentials\. Pass token="):
        gym.make("openenv/remote", base_url=url)


def test_the_token_plays_given_or_from_the_environment(exposed, monkeypatch):
    url, token = exposed
    with gym.make("openenv/remote", base_url=url, token=token) as env:
        env.reset(seed=0)
        assert env.step("hi")[1] == pytest.approx(0.2)
    envs = gym.make_vec("openenv/remote", num_envs=3, base_url=url, token=token)
    envs.reset(seed=0)
    envs.step(("a", "b", "c"))
    envs.close()
    monkeypatch.setenv(SERVER_TOKEN_VARIABLE, token)
    with gym.make("openenv/remote", base_url=url) as env:
        env.reset()


@pytest.mark.slow
def test_a_loopback_server_needs_a_token_only_when_given_one():
    process, banner = serve("--token", "sesame")
    try:
        url = banner[0].split(" listening on ")[1].split()[0]
        assert len(banner) == 1  # nothing generated, nothing printed
        assert httpx.get(url + "/schema", timeout=10).status_code == 401
        for header in ("Bearer sesame", "bearer sesame", "BEARER  sesame"):  # RFC 7235: any case
            ok = httpx.get(url + "/schema", headers={"Authorization": header}, timeout=10)
            assert ok.status_code == 200 and "action" in ok.json(), header
        for header in ("Basic sesame", "Bearersesame", "sesame", "Bearer sesam"):
            refused = httpx.get(url + "/schema", headers={"Authorization": header}, timeout=10)
            assert refused.status_code == 401, header
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_no_token_serves_anyone_and_says_so():
    process, banner = serve("--host", "0.0.0.0", "--no-token")
    try:
        url = banner[0].split(" listening on ")[1].split()[0]
        assert any("--no-token" in line for line in banner)
        assert httpx.get(url + "/health", timeout=10).json()["status"] == "healthy"
    finally:
        process.terminate()
        process.wait(10)
