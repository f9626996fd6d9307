"""Fleets of local servers: started together, used by vector envs, watched for crashes, never left running."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

import openenv_lab
from openenv_lab.client import Client, LaunchError, Session
from openenv_lab.launch import Fleet
from tests.helpers import alive, read_line, wait_for


@pytest.mark.slow
def test_a_fleet_serves_a_vector_env_and_stops_with_one_call():
    fleet = openenv_lab.serve("chess", replicas=3, opponent="greedy")
    try:
        urls = fleet.urls
        assert len(set(urls)) == 3 and fleet.running
        pids = [server.pid for server in fleet.servers]
        assert len(set(pids)) == 3
        envs = gym.make_vec("openenv/chess", num_envs=6, base_urls=urls, max_moves=6)
        obs, _ = envs.reset(seed=0)
        # Round-robin over the fleet: two sessions on each server.
        assert [c["active_sessions"] for c in fleet.capacity()] == [2, 2, 2]
        for _ in range(8):  # past the move limit: every sub-env ends and resets
            actions = [np.flatnonzero(mask)[0] if mask.any() else 0 for mask in obs["action_mask"]]
            obs, *_ = envs.step(np.array(actions))
        envs.close()
        assert [c["active_sessions"] for c in fleet.capacity()] == [0, 0, 0]
    finally:
        fleet.stop()
    assert not fleet.running
    assert wait_for(lambda: not any(alive(pid) for pid in pids))
    for url in urls:
        with pytest.raises(openenv_lab.ConnectError):
            Session(url)
    fleet.stop()  # twice is fine


@pytest.mark.slow
def test_a_crashed_server_is_reported_and_restarted_on_the_same_url():
    with Fleet("echo", replicas=2, restart=True, watch_interval=0.1) as fleet:
        urls = list(fleet.urls)
        victim = fleet.servers[1]
        old_pid = victim.pid
        with pytest.warns(RuntimeWarning, match=r"echo server 1 at .* exited with status -9; restarted"):
            os.kill(old_pid, signal.SIGKILL)
            assert wait_for(lambda: fleet.crashes, timeout=20)
        crash = fleet.crashes[0]
        assert (crash.replica, crash.url, crash.returncode, crash.restarted) == (1, urls[1], -9, True)
        assert wait_for(lambda: victim.running and victim.pid != old_pid, timeout=30)
        assert fleet.urls == urls
        with Client(urls[1]) as client:
            assert client.health()["status"] == "healthy"
        session = Session(urls[1])
        assert session.reset().observation is not None
        session.close()


@pytest.mark.slow
def test_without_restart_a_crash_is_reported_and_the_server_stays_down():
    with Fleet("echo", replicas=2, watch_interval=0.1) as fleet:
        fleet.servers[0]._process.kill()
        with pytest.warns(RuntimeWarning, match="not restarted"):
            assert wait_for(lambda: fleet.check() or fleet.crashes, timeout=20)
        assert fleet.crashes[0].restarted is False
        assert fleet.capacity()[0] is None and fleet.capacity()[1] is not None


@pytest.mark.slow
def test_a_fleet_that_cannot_start_stops_what_it_started():
    fleet = Fleet("chess", replicas=2, opponent_depth=0, startup_timeout=60)
    with pytest.raises(
        LaunchError,
        match=r"(?s)2 of 2 chess servers failed to start.*opponent-depth: expected a whole number from 1",
    ):
        fleet.start()
    assert not any(server.running for server in fleet.servers)


def test_bad_fleet_arguments_are_value_errors():
    for bad in (0, "2", 1.5):
        with pytest.raises(ValueError, match="at least one replica"):
            Fleet("chess", replicas=bad)
    with pytest.raises(ValueError, match="no option"):
        Fleet("chess", replicas=2, colour="white")


KILLED_PARENT = textwrap.dedent(
    """
    import time, openenv_lab
    fleet = openenv_lab.serve("echo", replicas=2)
    print(" ".join(str(s.pid) for s in fleet.servers), flush=True)
    time.sleep(600)
    """
)


@pytest.mark.slow
def test_fleet_servers_die_with_a_killed_parent():
    """A kernel that dies runs no exit handlers: each server notices its parent is gone and exits."""
    parent = subprocess.Popen([sys.executable, "-c", KILLED_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(pid) for pid in read_line(parent, timeout=120).split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
    finally:
        parent.kill()
        parent.wait()
    assert wait_for(lambda: not any(alive(pid) for pid in pids), timeout=15)


@contextlib.contextmanager
def fleet_cli(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``openenv-lab serve echo --port 0 --replicas 2 ARGS``: the process and its replicas' URLs; Ctrl+C
    at the end of the block must stop it with status 0 (it is killed if it did not)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_lab", "serve", "echo", "--port", "0", "--replicas", "2", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # As from a terminal: Ctrl+C is not ignored (a child inherits an ignored SIGINT from its parent,
        # e.g. from a CI runner that started the suite in the background).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        header = read_line(process, timeout=120)
        assert header.startswith("2 echo servers"), header or "no output"
        # Printed right after the header (which may have buffered them already): plain reads cannot hang.
        yield process, [process.stdout.readline().strip() for _ in range(2)]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_cli_serves_replicas_until_interrupted():
    with fleet_cli() as (_, urls):
        for url in urls:
            with Client(url) as client:
                assert client.health()["status"] == "healthy"
    for url in urls:
        with pytest.raises(openenv_lab.ConnectError):
            Session(url)


@pytest.mark.slow
def test_cli_replicas_get_every_flag_of_serve():
    """``serve --replicas`` once passed only --max-sessions and the environment's options on: each flag is
    checked here on each replica, by what the server does where a client can see it (the token, the
    session and batch limits, the message limit, the environment's option), and by its command line for
    the rest (log level, pings, idle timeout)."""
    import psutil

    flags = {
        "--max-sessions": "5",
        "--max-sessions-per-client": "1",
        "--max-batch": "3",
        "--max-message-bytes": "70000",
        "--idle-timeout": "45",
        "--ping-interval": "7",
        "--log-level": "info",
        "--max-steps": "2",
    }
    args = ["--token-from-env", *(part for flag in flags.items() for part in flag)]
    with fleet_cli(*args, env=dict(os.environ, OPENENV_LAB_TOKEN="fleet-secret")) as (process, urls):
        headers = {"Authorization": "Bearer fleet-secret"}
        for url in urls:
            with pytest.raises(openenv_lab.ConnectError, match="needs credentials"):  # the token is required
                Session(url)
            with Client(url, headers=headers) as client:
                capacity = client.capacity()
            assert (capacity["max_sessions"], capacity["max_batch"]) == (5, 3)
            with Session(url, headers=headers) as session:
                with pytest.raises(openenv_lab.ServerError, match="--max-sessions-per-client"):
                    Session(url, headers=headers)
                session.reset()
                assert session.step({"message": "a"}).done is False
                assert session.step({"message": "b"}).done is True  # --max-steps 2
            # The slot comes back once the server has ended the session (after the close, not with it).
            assert wait_for(lambda url=url: Client(url, headers=headers).capacity()["active_sessions"] == 0)
            with (
                Session(url, headers=headers) as session,
                pytest.raises(openenv_lab.OpenEnvError, match=r"1009|too big|larger"),
            ):  # --max-message-bytes 70000 closes the connection with 1009
                session.step({"message": "x" * 80_000})
        replicas = psutil.Process(process.pid).children()
        assert len(replicas) == 2
        for replica in replicas:
            line = replica.cmdline()
            for flag, value in flags.items():
                given = line[line.index(flag) + 1]
                assert given == value or float(given) == float(value), (flag, line)
            assert "--token-from-env" in line
            assert "fleet-secret" not in " ".join(line), "the token travels in the environment only"


@pytest.mark.slow
def test_when_one_replica_fails_to_start_the_others_are_stopped():
    import psutil

    def our_servers():
        return {p.pid for p in psutil.Process().children() if "openenv_lab" in " ".join(p.cmdline())}

    before = our_servers()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        fleet = Fleet("echo", replicas=2)
        fleet.servers[1].port = taken.getsockname()[1]  # already in use
        with pytest.raises(LaunchError, match="1 of 2 echo servers failed to start; replica 1"):
            fleet.start()
    assert not any(server.running for server in fleet.servers)
    assert wait_for(lambda: our_servers() <= before)


@pytest.mark.slow
def test_a_fleet_given_a_token_requires_it_even_on_loopback_and_its_own_requests_carry_it(monkeypatch):
    import httpx

    monkeypatch.delenv("OPENENV_LAB_TOKEN", raising=False)
    with openenv_lab.serve("echo", replicas=2, token="s3cret") as fleet:
        assert fleet.headers == {"Authorization": "Bearer s3cret"}
        assert all(httpx.get(f"{url}/schema", timeout=5).status_code == 401 for url in fleet.urls)
        assert [c["active_sessions"] for c in fleet.capacity()] == [0, 0]
        for base_urls in (fleet.urls, fleet):  # the fleet's URLs, or the fleet: its token goes along
            envs = gym.make_vec("openenv/remote", num_envs=2, base_urls=base_urls)
            envs.reset(seed=0)
            envs.close()
        # The token reaches the servers through their environment, not their command line.
        assert all("s3cret" not in " ".join(server.command()) for server in fleet.servers)


def test_token_from_env_without_the_variable_is_one_clear_sentence(monkeypatch):
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_LAB_TOKEN"}
    out = subprocess.run(
        [sys.executable, "-m", "openenv_lab", "serve", "echo", "--token-from-env"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode != 0 and "set $OPENENV_LAB_TOKEN to the token" in out.stderr
