"""The client-only install (``requirements-client.txt``) in a fresh venv: it reaches a server elsewhere,
and asking it for an embedded server says what is missing instead of failing obscurely."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openenv_lab.launch import EmbeddedServer

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import importlib.util, sys
    import gymnasium as gym
    import numpy as np
    import openenv_lab

    assert importlib.util.find_spec("openenv") is None, "openenv must not be installed"
    env = gym.make("openenv/chess", base_url=sys.argv[1], agent_color="white")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    env.close()
    vector = gym.make_vec("openenv/chess", num_envs=2, base_url=sys.argv[1])
    vector.reset(seed=0)
    vector.close()
    try:
        gym.make("openenv/chess")
    except openenv_lab.LaunchError as exc:
        print("REFUSED", exc)
    print("STEPPED", info["fen"])
    """
)


@pytest.mark.slow
def test_a_client_only_install_plays_remote_servers_and_names_what_an_embedded_one_needs(tmp_path):
    venv = tmp_path / "client"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    for arguments in (["--no-deps", str(ROOT)], ["-r", str(ROOT / "requirements-client.txt")]):
        done = subprocess.run(
            [python, "-m", "pip", "install", "-q", *arguments], capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-3000:]
    with EmbeddedServer("chess") as server:
        done = subprocess.run(
            [python, "-c", SCRIPT, server.base_url], capture_output=True, text=True, timeout=180
        )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "STEPPED " in done.stdout
    assert "REFUSED The embedded chess server needs the openenv package" in done.stdout
    assert "Reach a server running elsewhere (base_url=" in done.stdout


def test_the_readme_names_every_package_of_the_client_install():
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "pip install --no-deps openenv-lab &&" in line)
    wanted = [
        re.split(r"[<>=~!]", line)[0].strip()
        for line in (ROOT / "requirements-client.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert wanted and command.split("pip install ")[-1].strip(" `").split() == wanted
