"""A server dying in a long run: by default a clear error; with ``on_failure="restart"`` the run goes on.

Real servers on loopback: a fleet of chess servers, one of which is killed with SIGKILL mid-run.
"""

from __future__ import annotations

import logging
import os
import signal

import gymnasium as gym
import numpy as np
import pytest

import openenv_lab  # noqa: F401  # registers openenv/*
from openenv_lab.client import SessionClosed, TransportError
from openenv_lab.launch import EmbeddedServer, Fleet
from tests.helpers import wait_for


def legal(obs, rng):
    return np.array([rng.choice(np.flatnonzero(mask)) for mask in obs["action_mask"]])


@pytest.fixture
def fleet():
    with Fleet("chess", replicas=2, restart=False) as servers:
        yield servers


def _kill(server: EmbeddedServer) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    assert wait_for(lambda: not server.running)


@pytest.mark.slow
@pytest.mark.parametrize("autoreset_mode", ["next_step", "same_step"])
def test_killing_one_replica_truncates_its_sub_environments_and_the_run_goes_on(
    fleet, caplog, autoreset_mode
):
    envs = gym.make_vec(
        "openenv/chess",
        num_envs=6,
        base_urls=fleet.urls,
        on_failure="restart",
        autoreset_mode=autoreset_mode,
        max_moves=400,
    )
    rng = np.random.default_rng(0)
    try:
        obs, _ = envs.reset(seed=0)
        on_first = [i for i, url in enumerate(envs.unwrapped.episodes) if url.base_url == fleet.urls[0]]
        assert on_first == [0, 2, 4]  # round-robin
        for _ in range(3):
            obs, *_ = envs.step(legal(obs, rng))
        _kill(fleet.servers[0])
        with caplog.at_level(logging.WARNING, logger="openenv_lab"):
            obs, rewards, terminated, truncated, infos = envs.step(legal(obs, rng))
        # SAME_STEP resets at once, on the new sessions: the ending step's info is then the final_info
        ending = infos if autoreset_mode == "next_step" else infos["final_info"]
        failed = ending["server_failed"]  # on every row: True where the server failed
        assert failed.tolist() == [True, False, True, False, True, False]
        assert truncated[failed].all() and not terminated[failed].any() and (rewards[failed] == 0).all()
        assert all(ending["server_error"][failed]) and "continue on" in caplog.text
        assert envs.unwrapped.restarts == 3
        assert {e.base_url for e in envs.unwrapped.episodes} == {fleet.urls[1]}
        if autoreset_mode == "same_step":
            assert infos["_final_obs"][failed].all()
        for _ in range(20):  # the run goes on, on the healthy replica, with legal moves for every board
            obs, rewards, terminated, truncated, infos = envs.step(legal(obs, rng))
            assert not infos["server_failed"].any() and set(infos["server_error"]) == {""}
        assert fleet.capacity()[1]["active_sessions"] == 6
    finally:
        envs.close()
    assert wait_for(lambda: fleet.capacity()[1]["active_sessions"] == 0)


@pytest.mark.slow
def test_by_default_a_dead_server_is_an_error_that_names_it(fleet):
    envs = gym.make_vec("openenv/chess", num_envs=4, base_urls=fleet.urls)
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=0)
    _kill(fleet.servers[1])
    with pytest.raises(TransportError) as failed:
        envs.step(legal(obs, rng))
    assert failed.value.server_url == fleet.urls[1] and failed.value.env_index in (1, 3)
    with pytest.raises(SessionClosed):
        envs.step(legal(obs, rng))


@pytest.mark.slow
def test_with_no_server_left_restart_gives_up_after_reconnect_within():
    with EmbeddedServer("chess") as server:
        envs = gym.make_vec(
            "openenv/chess", num_envs=2, base_url=server.base_url, on_failure="restart", reconnect_within=1.0
        )
        obs, _ = envs.reset(seed=0)
        _kill(server)
        with pytest.raises(TransportError):
            envs.step(legal(obs, np.random.default_rng(0)))
        with pytest.raises(SessionClosed, match="no server could take"):
            envs.step(legal(obs, np.random.default_rng(0)))


def test_on_failure_is_checked():
    with pytest.raises(ValueError, match="on_failure must be one of"):
        gym.make_vec("openenv/echo", num_envs=1, on_failure="retry")


@pytest.mark.slow
def test_a_replica_restarted_on_its_port_takes_its_sub_environments_back():
    with Fleet("echo", replicas=1, restart=True) as alone:
        envs = gym.make_vec("openenv/echo", num_envs=2, base_urls=alone.urls, on_failure="restart")
        try:
            envs.reset(seed=0)
            _kill(alone.servers[0])
            with pytest.warns(RuntimeWarning, match="restarted on the same port"):
                _, _, _, truncated, infos = envs.step(("a", "b"))
                assert wait_for(lambda: len(alone.crashes) == 1)
            assert truncated.all() and infos["server_failed"].all()
            obs, *_ = envs.step(("c", "d"))  # NEXT_STEP: the new sessions reset
            obs, *_ = envs.step(("e", "f"))
            assert list(obs["echoed_message"]) == ["e", "f"]
            assert {e.base_url for e in envs.unwrapped.episodes} == set(alone.urls)
        finally:
            envs.close()


def test_a_server_back_with_other_models_is_refused_and_one_back_as_it_was_plays_on():
    """The session is lost and the server at the URL comes back: as it was, the next reset plays on; with
    other action or observation models (another version, another environment), the reset raises
    EnvironmentMismatch rather than play it with the spaces made for the old one."""
    from openenv_lab.client import EnvironmentMismatch
    from tests.helpers import serve_cli

    process, banner = serve_cli("echo")
    url = banner[0].split(" listening on ")[1].split()[0]
    port = url.rsplit(":", 1)[1]
    env = gym.make("openenv/remote", base_url=url)
    try:
        env.reset(seed=0)
        for server in ("echo", "chess"):
            process.terminate()
            process.wait(10)
            process, _ = serve_cli(server, "--port", port)  # back on the same URL
            with pytest.raises(SessionClosed):
                env.step("hi")  # the old session is gone
            if server == "echo":
                env.reset(seed=1)
                assert env.step("hi")[1] > 0
            else:
                with pytest.raises(EnvironmentMismatch, match=r"now publishes other action or observation"):
                    env.reset(seed=2)
    finally:
        env.close()
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_a_vector_env_refuses_a_server_back_with_other_models_too():
    """The single env's policy holds for a vector env's reconnection (``on_failure="restart"``): a server
    back on its URL with other models is refused, and the env closes saying why."""
    from openenv_lab.client import EnvironmentMismatch
    from tests.helpers import serve_cli

    process, banner = serve_cli("echo")
    url = banner[0].split(" listening on ")[1].split()[0]
    envs = gym.make_vec("openenv/echo", num_envs=2, base_url=url, on_failure="restart", reconnect_within=30)
    try:
        envs.reset(seed=0)
        process.kill()
        process.wait(10)
        process, _ = serve_cli("chess", "--port", url.rsplit(":", 1)[1])  # back on the same URL
        with pytest.raises(EnvironmentMismatch, match=r"now publishes other action or observation"):
            envs.step(("a", "b"))
        with pytest.raises(SessionClosed, match="a server came back with other models"):
            envs.step(("c", "d"))
    finally:
        envs.close()
        process.terminate()
        process.wait(10)
