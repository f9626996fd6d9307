"""The examples and commands of the README and of the guide's pages (``docs/``) are true."""

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
#: The pages whose examples users copy and run as they are: the README, the quick start and the guide.
#: (The reference pages' snippets, in docs/infos.md or docs/recording.md, are parts of a longer program.)
PAGES = [ROOT / "README.md", ROOT / "docs" / "quickstart.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]


def python_blocks(path: Path = ROOT / "README.md") -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def all_examples() -> list[tuple[str, int, str]]:
    """``(page, index on the page, code)`` for every Python example of every page."""
    return [
        (path.relative_to(ROOT).as_posix(), index, code)
        for path in PAGES
        for index, code in enumerate(python_blocks(path))
    ]


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
    """Every example but the README's first, by page and index; "ray" in the id of those that start Ray
    (conftest.py runs them on the worker of the other Ray tests)."""
    return [
        pytest.param(code, id=f"{page}-{index}" + ("-ray" if 'engine="ray"' in code else ""))
        for page, index, code in all_examples()
        if (page, index) != ("README.md", 0)
    ]


def test_the_examples_are_found():
    pages = {page for page, _, _ in all_examples()}
    assert {"README.md", "docs/guide/chess.md", "docs/guide/any-server.md", "docs/quickstart.md"} <= pages


@pytest.mark.slow
@pytest.mark.parametrize("code", _examples())
def test_every_other_example_runs(code):
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


def test_the_readme_fits_on_a_few_screens():
    # The rest is on the site's pages (docs/guide/), which the README links to.
    assert len(README) <= 12_000, f"README.md has {len(README):,} characters: move a section to docs/guide/"
