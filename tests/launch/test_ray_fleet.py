"""Fleets on Ray: a real three-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head
without CPUs and two worker nodes), every node on 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, as
Ray does on macOS): CI allows traffic on loopback only.

Replicas land on different nodes and bind the address Ray reports for theirs; requests without the
fleet's token are refused; a killed replica is the documented error on its sub-environments and comes
back on the same URL; `stop` leaves no actor, placement group or server process behind.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import httpx
import psutil
import pytest

import openenv_lab
from openenv_lab.client import Client, ConnectError, LaunchError, SessionClosed
from tests.helpers import wait_for

ray = pytest.importorskip("ray", reason='the Ray fleet needs Ray: pip install "ray[default]"')

# Every test that starts a Ray cluster runs on one worker under xdist (one cluster at a time here).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every node on 127.0.0.1
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    yield nodes
    ray.shutdown()
    cluster.shutdown()


def server_processes() -> list[psutil.Process]:
    """Our bundled servers that this test's Ray cluster runs (what a fleet starts, one per replica): the
    cluster's processes descend from this one, so other tests' servers on the machine are not counted."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            line = process.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if "openenv_lab" in line and "serve" in line and "--exit-with-parent" in line:
            found.append(process)
    return found


def test_replicas_on_different_nodes_each_bound_to_its_nodes_address(cluster):
    with openenv_lab.serve("echo", replicas=2, engine="ray") as fleet:
        nodes = {node["NodeID"]: node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
        placed = [server.node_id for server in fleet.servers]
        assert len(set(placed)) == 2 and set(placed) <= set(nodes)
        for server, url in zip(fleet.servers, fleet.urls, strict=True):
            assert url == f"http://{nodes[server.node_id]}:{server.port}"
        assert "on Ray" in repr(fleet)

        # make_vec over the fleet's URLs, in the process holding the fleet: its token goes with them.
        envs = gym.make_vec("openenv/remote", num_envs=4, base_urls=fleet.urls)
        try:
            envs.reset(seed=0)
            for _ in range(20):
                envs.step(envs.action_space.sample())
            assert [answer["active_sessions"] for answer in fleet.capacity()] == [2, 2]
        finally:
            envs.close()
        # ... or over the fleet itself.
        envs = gym.make_vec("openenv/remote", num_envs=2, base_urls=fleet)
        envs.reset(seed=1)
        envs.close()


def test_placing_and_starting_replicas_show_their_waits(cluster, monkeypatch, capsys):
    from openenv_lab import progress

    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)  # any wait shows
    with openenv_lab.serve("echo", replicas=2, engine="ray", progress=True):
        pass
    shown = capsys.readouterr().err
    assert "Waiting for Ray to place 2 bundles of {CPU: 1}" in shown, shown
    assert "Waiting for 2 echo servers to start on Ray" in shown, shown


def test_requests_without_the_fleets_token_are_refused(cluster, monkeypatch):
    monkeypatch.delenv("OPENENV_LAB_TOKEN", raising=False)
    with openenv_lab.serve("echo", replicas=1, engine="ray") as fleet:
        url = fleet.urls[0]
        assert httpx.get(f"{url}/schema", timeout=5).status_code == 401
        wrong = {"Authorization": "Bearer not-the-token"}
        assert httpx.post(f"{url}/reset", json={}, headers=wrong, timeout=5).status_code == 401
        with pytest.raises(ConnectError, match="token") as refused:
            gym.make_vec("openenv/remote", num_envs=1, base_urls=[url], token="not-the-token")
        assert refused.value.status in (401, 403)
        assert fleet.capacity() != [None]  # the fleet's own requests carry it
        with Client(url, headers=fleet.headers) as client:
            assert client.health()["status"] == "healthy"
        # From another process or node: token= (or $OPENENV_LAB_TOKEN).
        envs = gym.make_vec("openenv/remote", num_envs=1, base_url=url, token=fleet.token)
        envs.reset(seed=0)
        envs.close()


def test_a_killed_replica_is_the_documented_error_and_comes_back_on_its_url(cluster):
    with openenv_lab.serve("echo", replicas=2, engine="ray", restart=True, watch_interval=0.2) as fleet:
        urls = fleet.urls
        envs = gym.make_vec("openenv/remote", num_envs=2, base_urls=fleet)
        try:
            envs.reset(seed=0)
            with pytest.warns(RuntimeWarning, match="server 0 .* is gone .*restarted on the same port"):
                ray.kill(fleet.servers[0].actor)
                with pytest.raises(SessionClosed) as raised:
                    for _ in range(50):
                        envs.step(envs.action_space.sample())
                        time.sleep(0.1)
                assert raised.value.env_index == 0 and raised.value.server_url == urls[0]
                assert wait_for(lambda: fleet.crashes, timeout=60), "the fleet to notice the killed replica"
        finally:
            envs.close()
        crash = fleet.crashes[0]
        assert (crash.replica, crash.url, crash.restarted) == (0, urls[0], True)
        assert fleet.urls == urls and fleet.running
        envs = gym.make_vec("openenv/remote", num_envs=2, base_urls=fleet)
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        envs.close()


def test_stop_leaves_no_actor_group_or_server_behind(cluster):
    before = {process.pid for process in server_processes()}
    fleet = openenv_lab.serve("chess", replicas=2, engine="ray")
    started = {process.pid for process in server_processes()} - before
    assert len(started) == 2
    actors = [server.actor for server in fleet.servers]
    group = fleet.placement.group.id.hex()
    fleet.stop()
    fleet.stop()  # twice is fine
    assert not fleet.running
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.status.remote(), timeout=30)
    assert wait_for(lambda: ray.util.placement_group_table()[group]["state"] == "REMOVED", timeout=30), (
        "the placement group should be removed"
    )
    assert wait_for(lambda: not any(psutil.pid_exists(pid) for pid in started), timeout=30), (
        "the replicas' server processes should exit"
    )


def test_what_the_cluster_lacks_is_named_before_anything_waits(cluster):
    started = time.monotonic()
    with pytest.raises(LaunchError, match=r"needs \{GPU: 1\}.*has \{GPU: 0\}"):
        openenv_lab.serve("echo", replicas=1, engine="ray", resources={"GPU": 1})
    with pytest.raises(
        LaunchError, match=r"did not give 3 bundles of \{CPU: 1\} \(STRICT_SPREAD\) within 2 s"
    ):
        openenv_lab.serve("echo", replicas=3, engine="ray", strategy="STRICT_SPREAD", placement_timeout=2)
    assert time.monotonic() - started < 60
    assert not [g for g in ray.util.placement_group_table().values() if g["state"] not in ("REMOVED",)]
    with pytest.raises(ValueError, match="engine must be"):
        openenv_lab.Fleet("echo", engine="kubernetes")
    with pytest.raises(ValueError, match="resources= are Ray's"):
        openenv_lab.Fleet("echo", resources={"CPU": 1})
