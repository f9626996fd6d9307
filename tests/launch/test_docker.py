"""Docker: our image built without a registry, full games through launcher="docker", isolation, cleanup.

Everything here runs against a real Docker engine (`.ci/run` installs and starts one, and makes the base
image with scripts/offline-base-image.sh). Where no engine can run (a laptop without Docker), the tests
that need one are skipped with the reason; where one can, `.ci/run` sets ``OPENENV_LAB_REQUIRE_DOCKER=1``
and a missing engine or base image fails them instead. The "Docker is not running" error is tested
everywhere, against a socket that is not there.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import httpx
import numpy as np
import pytest

import openenv_lab
from openenv_lab.adapters.chess import TERMINAL_REASONS
from openenv_lab.client import LaunchError
from openenv_lab.launch import DockerServer, build_image
from openenv_lab.launch.docker import LABEL, NOT_RUNNING, _docker, default_image
from tests.helpers import read_line, wait_for

BASE_IMAGE = os.environ.get("OPENENV_LAB_DOCKER_BASE_IMAGE")
#: Set by .ci/run where an engine can run: then its absence is a failure, not a reason to skip.
REQUIRED = os.environ.get("OPENENV_LAB_REQUIRE_DOCKER") == "1"
NO_ENGINE = "unix:///nonexistent/docker.sock"

# Building the first image (in the first test's fixture) takes minutes. With the overlay2 storage driver a
# container starts in seconds; with vfs (.ci/run's fallback) each start copies the image, most of a minute.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def skip_unless_required(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (OPENENV_LAB_REQUIRE_DOCKER=1: this machine can run Docker, so it must)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def engine():
    try:
        return _docker()
    except LaunchError as exc:
        skip_unless_required(
            f"NO DOCKER ENGINE, Docker tests skipped: {exc} .ci/run installs docker.io and starts dockerd; "
            "locally: apt-get install docker.io && dockerd --storage-driver=overlay2 &"
        )


@pytest.fixture(scope="module")
def chess_image(engine):
    """Our chess image, built by `openenv-lab docker build` on the offline base image.

    Always built: an image of the same tag left by an earlier checkout holds other code (Docker's layer
    cache makes the build quick when nothing changed).
    """
    tag = default_image("chess")
    if BASE_IMAGE is None:
        skip_unless_required(
            "NO BASE IMAGE, Docker tests skipped: set OPENENV_LAB_DOCKER_BASE_IMAGE to an image with Python "
            f"{sys.version_info.major}.{sys.version_info.minor} (scripts/offline-base-image.sh makes one)"
        )
    out = subprocess.run(
        [sys.executable, "-m", "openenv_lab", "docker", "build", "chess", "--base-image", BASE_IMAGE],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"built {tag}" in out.stdout and "[1/2] gathering wheels" in out.stdout  # progress is shown
    return tag


@pytest.fixture(scope="module")
def atari_image(engine, chess_image):
    """Our Atari image, built after the chess image: only its last layer (the server's name) is new.

    The tag first names a stand-in (as an image of an older version would): the build removes it rather
    than leaving it untagged on disk."""
    tag = default_image("atari")
    with contextlib.suppress(Exception):
        engine.images.remove(tag, force=True)
    stand_in = stand_in_image(engine, tag)
    lines: list[str] = []
    assert build_image("atari", base_image=BASE_IMAGE, progress=lines.append) == tag
    assert f"removed the image {tag} had before ({stand_in.id.removeprefix('sha256:')[:12]})" in lines
    with pytest.raises(docker_errors().ImageNotFound):
        engine.images.get(stand_in.id)
    atari, chess = engine.images.get(tag), engine.images.get(chess_image)
    assert atari.attrs["Parent"] == chess.attrs["Parent"], (
        "the atari image should share every layer but the last with the chess image (if the chess image "
        "predates this checkout, rebuild it: openenv-lab docker build chess)\n" + "\n".join(lines[-30:])
    )
    assert atari.attrs["Config"]["Env"].count("OPENENV_LAB_SERVER=atari") == 1
    return tag


def docker_errors():
    import docker.errors

    return docker.errors


def stand_in_image(engine, tag: str):
    """A one-label image on the base image, tagged ``tag``."""
    dockerfile = f"FROM {BASE_IMAGE}\nLABEL openenv-lab.test=stand-in\n"
    image, _ = engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return image


def containers(engine, **filters):
    return engine.containers.list(all=True, filters={"label": LABEL, **filters})


def test_a_full_game_through_launcher_docker(engine, chess_image):
    env = gym.make("openenv/chess", launcher="docker", agent_color="white", opponent="greedy", max_moves=30)
    container = env.unwrapped.launcher.container
    try:
        obs, info = env.reset(seed=0)
        done, steps = False, 0
        while not done:
            action = env.action_space.sample(mask=obs["action_mask"])
            obs, _, terminated, truncated, info = env.step(action)
            done, steps = terminated or truncated, steps + 1
        assert info["end_reason"] in TERMINAL_REASONS | {"move_limit"}
        assert truncated == (info["end_reason"] == "move_limit")
        assert steps >= 5

        # Isolation defaults.
        container.reload()
        host = container.attrs["HostConfig"]
        assert host["Privileged"] is False and host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"]
        assert not container.attrs["Mounts"] and not host["Binds"]
        assert [b["HostIp"] for b in container.ports["8000/tcp"]] == ["127.0.0.1"]
        assert container.attrs["Config"]["User"] == "65534:65534"
        assert container.labels[LABEL] == "1" and container.labels[f"{LABEL}.server"] == "chess"
        # The server listens on 0.0.0.0 inside the container: it requires the token the launcher gave it.
        assert httpx.get(env.unwrapped.base_url + "/schema", timeout=10).status_code == 401
        headers = env.unwrapped.launcher.headers
        assert httpx.get(env.unwrapped.base_url + "/health", headers=headers, timeout=10).status_code == 200
    finally:
        env.close()
    assert not containers(engine, id=container.id), "close() must remove the container"


def test_limits_environment_and_server_options(engine, chess_image):
    with DockerServer(
        "chess", memory="512m", cpus=0.5, environment={"OPENENV_LAB_TEST": "1"}, opponent="greedy"
    ) as server:
        attrs = server.container.attrs
        assert attrs["HostConfig"]["Memory"] == 512 * 2**20
        assert attrs["HostConfig"]["NanoCpus"] == 500_000_000
        assert "OPENENV_LAB_TEST=1" in attrs["Config"]["Env"]
        assert "HOME=/tmp" in attrs["Config"]["Env"]  # the image's own, nothing from this process
        assert not any(v.startswith("PYTEST_") for v in attrs["Config"]["Env"])
        assert attrs["Args"][-2:] == ["--opponent", "greedy"]
        # A launcher object: the env starts (here: reuses) it and leaves stopping it to its owner.
        env = gym.make("openenv/chess", launcher=server)
        obs, _ = env.reset(seed=3)
        assert obs["action_mask"].any() and env.unwrapped.base_url == server.base_url
        env.close()
        assert server.running
        container_id = server.container.id
    assert not containers(engine, id=container_id)


def test_any_openenv_image_through_openenv_remote(engine, chess_image, monkeypatch, capsys):
    from openenv_lab import progress

    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)  # any start shows its wait
    engine.images.get(chess_image).tag("someone/chess-env", "latest")
    try:
        env = gym.make("openenv/remote", image="someone/chess-env:latest", progress=True)
        try:
            assert "Waiting for the container of someone/chess-env:latest to start" in capsys.readouterr().err
            assert "legal_moves" in env.observation_space.spaces
            obs, _ = env.reset(seed=0)
            assert obs["legal_moves"]
        finally:
            env.close()
    finally:
        engine.images.remove("someone/chess-env:latest")


SPACE_IMAGE = "registry.hf.space/someone-chess-env:latest"


def test_a_spaces_image_runs_here_when_trusted(engine, chess_image, monkeypatch):
    """``space=..., launcher="docker"`` and ``openenv-lab docker run --space``: the Space's image (here our
    chess image tagged as the Hub names it, since the tests have no network) through our DockerServer."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    engine.images.get(chess_image).tag(*SPACE_IMAGE.rsplit(":", 1))
    try:
        env = gym.make("openenv/remote", space="someone/Chess_Env", launcher="docker", trust_remote_code=True)
        try:
            assert env.unwrapped.launcher.image == SPACE_IMAGE
            env.reset(seed=0)
            assert env.unwrapped.base_url.startswith("http://127.0.0.1:")
        finally:
            env.close()

        command = [sys.executable, "-m", "openenv_lab", "docker", "run", "--space", "someone/chess_env"]
        refused = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and "--trust-remote-code" in refused.stderr
        process = subprocess.Popen([*command, "--trust-remote-code"], stdout=subprocess.PIPE, text=True)
        try:
            line = read_line(process, timeout=180)
            assert line.startswith(SPACE_IMAGE + " at http://127.0.0.1:"), line
            url = line.split(" at ")[1].split()[0]
            token = line.split("token ")[1].split()[0]  # the container's server requires it
            with openenv_lab.client.Client(url, headers={"Authorization": f"Bearer {token}"}) as client:
                assert client.health()["status"] == "healthy"
        finally:
            process.send_signal(signal.SIGINT)
            assert process.wait(60) == 0
        assert not [c for c in containers(engine) if SPACE_IMAGE in c.image.tags]
    finally:
        engine.images.remove(SPACE_IMAGE)


def test_a_spaces_image_that_cannot_be_pulled_says_so(engine):
    with pytest.raises(
        LaunchError, match=r"registry\.hf\.space/nobody-no-such-env:latest' is not here and could not"
    ):
        gym.make("openenv/remote", space="nobody/no_such_env", launcher="docker", trust_remote_code=True)


def test_a_port_in_use_is_replaced_by_a_free_one(engine, chess_image):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.warns(UserWarning, match=f"Port {port} is in use"):
            server = DockerServer("chess", host_port=port)
            url = server.start()
        try:
            assert not url.endswith(f":{port}")
            with openenv_lab.Client(url, headers=server.headers) as client:
                assert client.health()["status"] == "healthy"
        finally:
            server.stop()


def test_a_container_that_fails_to_start_shows_its_logs(engine, chess_image):
    with pytest.raises(
        LaunchError, match=r"(?s)exited with status 2.*--opponent-depth: expected a whole number from 1 to 30"
    ):
        DockerServer("chess", opponent_depth=0).start()
    assert not [
        c for c in containers(engine) if c.labels.get(f"{LABEL}.owner", "").endswith(f":{os.getpid()}")
    ]


def test_a_missing_image_says_how_to_build_it(engine):
    with pytest.raises(
        LaunchError, match=r"openenv-lab/echo:.* not found\. Build it with `openenv-lab docker"
    ):
        DockerServer("echo", startup_timeout=5).start()
    with pytest.raises(LaunchError, match="'nobody/no-such-env:1' not found"):
        gym.make("openenv/remote", image="nobody/no-such-env:1")


CONTAINER_SCRIPT = textwrap.dedent(
    """
    import sys, time, gymnasium as gym, openenv_lab
    env = gym.make("openenv/chess", launcher="docker")
    print(env.unwrapped.launcher.container.id, flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
    """
)


def test_containers_go_at_exit_and_prune_removes_a_killed_process_leftovers(engine, chess_image):
    out = subprocess.run(
        [sys.executable, "-c", CONTAINER_SCRIPT, "exit"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert not containers(engine, id=out.stdout.strip()), "interpreter exit must remove the container"

    process = subprocess.Popen(
        [sys.executable, "-c", CONTAINER_SCRIPT, "hang"], stdout=subprocess.PIPE, text=True
    )
    try:
        container_id = read_line(process, timeout=300).strip()
        assert container_id
    finally:
        process.kill()
        process.wait()
    assert containers(engine, id=container_id), "SIGKILL runs no exit handler: the container is left"
    pruned = subprocess.run(
        [sys.executable, "-m", "openenv_lab", "docker", "prune"], capture_output=True, text=True, timeout=120
    )
    assert pruned.returncode == 0, pruned.stderr
    assert container_id[:12] in pruned.stdout
    assert wait_for(lambda: not containers(engine, id=container_id), timeout=30)


def test_atari_vector_env_in_one_container(engine, atari_image):
    envs = gym.make_vec("openenv/atari", num_envs=2, launcher="docker", game="pong")
    container = envs.unwrapped._owned_launcher.container
    try:
        assert envs.single_observation_space.shape == (210, 160, 3)
        assert len(set(envs.unwrapped.base_urls)) == 1
        obs, infos = envs.reset(seed=[1, 2])
        assert obs.shape == (2, 210, 160, 3) and obs.dtype.name == "uint8" and obs.any()
        for _ in range(5):
            obs, *_, infos = envs.step(envs.action_space.sample())
        assert infos["lives"].shape == (2,) and infos["episode_frame_number"].min() > 0
    finally:
        envs.close()
    assert not containers(engine, id=container.id), "close() must remove the vector env's container"


def test_finrl_built_on_first_use_and_a_server_with_room_for_n_sessions(
    engine, atari_image, monkeypatch, capsys
):
    """``build=True`` builds the missing image, with progress when asked (cheaply: the install layer is
    shared)."""
    tag = default_image("finrl")
    with contextlib.suppress(Exception):
        engine.images.remove(tag, force=True)
    if BASE_IMAGE is not None:
        monkeypatch.setenv("OPENENV_LAB_DOCKER_BASE_IMAGE", BASE_IMAGE)
    with DockerServer("finrl", build=True, max_sessions=2, progress=True) as server:
        out = capsys.readouterr().out
        assert "[1/2] gathering wheels" in out and f"Successfully tagged {tag}" in out
        assert "Using cache" in out
        assert server.command()[:2] == ["--max-sessions", "2"]
        with openenv_lab.Client(server.base_url, headers=server.headers) as client:
            assert client.get("/capacity")["max_sessions"] == 2
        with pytest.raises(openenv_lab.CapacityError, match="1 short"):
            gym.make_vec("openenv/finrl", num_envs=3, launcher=server)
        envs = gym.make_vec("openenv/finrl", num_envs=2, launcher=server)
        try:
            obs, infos = envs.reset(seed=0)
            assert obs.shape == (2, *envs.single_observation_space.shape)
            _, rewards, *_, infos = envs.step(envs.action_space.sample())
            assert np.isfinite(rewards).all() and (infos["portfolio_value"] > 0).all()
        finally:
            envs.close()
        assert server.running, "a launcher object is its owner's to stop"


def test_no_engine_is_one_clear_sentence(monkeypatch):
    """Runs wherever the SDK is installed: the SDK is pointed at a socket that does not exist."""
    pytest.importorskip("docker", reason="without the SDK the sentence is the next test's")
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    with pytest.raises(LaunchError) as caught:
        gym.make("openenv/chess", launcher="docker")
    assert str(caught.value).startswith(NOT_RUNNING)
    assert "Traceback" not in str(caught.value)
    with pytest.raises(LaunchError, match="Docker is not running"):
        build_image("chess", progress=None)
    out = subprocess.run(
        [sys.executable, "-m", "openenv_lab", "docker", "prune"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DOCKER_HOST": NO_ENGINE},
    )
    assert out.returncode == 1 and "Docker is not running" in out.stderr and "Traceback" not in out.stderr


def test_without_the_sdk_the_error_says_what_to_install(monkeypatch):
    """Runs everywhere: the SDK is hidden (an import of it fails), here and in the CLI's process."""
    monkeypatch.setitem(sys.modules, "docker", None)
    install = r"needs the Docker SDK: pip install 'openenv-lab\[docker\]'"
    with pytest.raises(LaunchError, match=install):
        gym.make("openenv/chess", launcher="docker")
    with pytest.raises(LaunchError, match=install):
        build_image("chess", progress=None)
    hidden = "import runpy, sys; sys.modules['docker'] = None; "
    hidden += "runpy.run_module('openenv_lab', run_name='__main__')"
    out = subprocess.run(
        [sys.executable, "-c", hidden, "docker", "prune"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1 and "pip install 'openenv-lab[docker]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_launcher_arguments_are_checked():
    with pytest.raises(ValueError, match="base_url names a running server"):
        gym.make("openenv/chess", base_url="http://127.0.0.1:9", launcher="docker")
    with pytest.raises(ValueError, match="launcher must be"):
        gym.make("openenv/chess", launcher="kubernetes")
    with pytest.raises(ValueError, match="base_urls names running servers"):
        gym.make_vec("openenv/chess", num_envs=2, base_urls=["http://127.0.0.1:9"], launcher="docker")
    with pytest.raises(ValueError, match="launcher must be"):
        gym.make_vec("openenv/chess", num_envs=2, launcher="kubernetes")
    with pytest.raises(ValueError, match=r"Options \['max_sessions'\] apply to our own servers"):
        DockerServer(image="someone/env:1", max_sessions=4)
    with pytest.raises(ValueError, match="no option"):
        DockerServer("chess", colour="white")
    with pytest.raises(ValueError, match="apply to our own servers"):
        DockerServer(image="someone/env:1", opponent="greedy")


def test_the_clean_copy_an_image_is_built_from_builds_a_wheel(tmp_path):
    """Runs everywhere (no engine): `build_image` gathers wheels from a copy of the checkout with only
    what a build reads; a file pyproject.toml names (the license, the files shipped beside the package)
    missing from that copy fails every image build."""
    from openenv_lab.launch.docker import _clean_copy

    source = _clean_copy(Path(openenv_lab.__file__).resolve().parent.parent, tmp_path / "source")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "out"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert list((tmp_path / "out").glob("openenv_lab-*.whl"))
