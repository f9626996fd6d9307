"""The README's examples and commands are true."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from openenv_lab.adapters.chess import TERMINAL_REASONS
from openenv_lab.client.spaces import SPACE_URL_VARIABLE
from openenv_lab.launch import EmbeddedServer
from tests.conformance import OfficialServer

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    prelude = "import gymnasium as gym\nimport openenv_lab\n"
    with tempfile.TemporaryDirectory() as scratch:  # examples may write files (runs/...): not in the repo
        return subprocess.run(
            [sys.executable, "-c", prelude + code],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=scratch,
            env={**os.environ, **(env or {})},
        )


@pytest.mark.slow
def test_the_first_example_plays_a_game_to_the_end():
    out = run_python(python_blocks()[0])
    assert out.returncode == 0, out.stderr
    reason, result, reward = out.stdout.split()
    assert reason in TERMINAL_REASONS | {"move_limit"}
    assert result in {"1-0", "0-1", "1/2-1/2"}
    assert float(reward) in {-1.0, 0.0, 1.0}


def _examples() -> list:
    """The examples after the first, by index; "ray" in the id of those that start Ray (conftest.py runs them
    on the worker of the other Ray tests)."""
    return [
        pytest.param(index, id=f"{index}-ray" if 'engine="ray"' in code else str(index))
        for index, code in enumerate(python_blocks())
        if index
    ]


@pytest.mark.slow
@pytest.mark.parametrize("index", _examples())
def test_every_other_example_runs(index):
    code = python_blocks()[index]
    if "openenv_lab.rllib" in code:
        pytest.skip("runs with RLlib's gymnasium, in tests/test_rllib.py (tests/rllib_check.py)")
    servers = []
    env: dict[str, str] = {}
    try:
        if 'space="openenv/echo_env"' in code:  # no network: our MCP echo server stands in for the Space
            servers.append(EmbeddedServer("echo", mcp=True))
            env = {SPACE_URL_VARIABLE: servers[-1].start(), "HF_TOKEN": ""}
        if 'engine="ray"' in code:  # every Ray node on 127.0.0.1: traffic stays on loopback
            pytest.importorskip("ray")
            env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        if "127.0.0.1:8000" in code:  # the remote example: the official connect4_env it names
            servers.append(OfficialServer("connect4_env"))
            code = code.replace("http://127.0.0.1:8000", servers[-1].url)
            code += "\nassert env.action_space == gym.spaces.Discrete(7), env.action_space"
            code += "\nassert sorted(env.observation_space.spaces) == ['action_mask', 'board']"
        if "127.0.0.1:8001" in code:  # the spec example: the official maze_env it names
            servers.append(OfficialServer("maze_env"))
            code = code.replace("http://127.0.0.1:8001", servers[-1].url)
        out = run_python(code, env)
    finally:
        for server in servers:
            server.stop()
    assert out.returncode == 0, out.stderr


def test_ci_runs_the_readmes_test_command():
    extracted = subprocess.run(
        [
            "awk",
            "/<!-- test-command/{found=1; next} found && /^```bash/{grab=1; next} grab && /^```/{exit} grab",
            "README.md",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.strip()
    assert re.search(r" && \.venv/bin/python -m pytest -n \d+$", extracted), (
        extracted
    )  # .ci/run splits it there
    assert "awk '/<!-- test-command" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("command", ["openenv-lab play chess --games 3", 'pip install -q -e ".[dev]"'])
def test_the_setup_commands_are_there(command):
    assert command in README
