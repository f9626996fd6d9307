"""The official OpenEnv tests of the environments we also serve, run against our servers.

huggingface/OpenEnv's ``tests/test_chess_environment.py`` tests its chess environment class directly
(``envs.chess_env.server.chess_environment.ChessEnvironment``, the models from ``envs.chess_env``), and
``tests/test_websockets.py`` starts ``envs.echo_env.server.app`` with uvicorn and drives it with the
official echo client (``envs.echo_env.client``). Here a package of that name hands them our classes and
our app instead (the official client is loaded from the official copy, unmodified), and the files run
unmodified. Each test that fails is one where we differ on purpose; `DIFFERENCES` says why (the README
lists them too).
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.conformance import require

pytestmark = pytest.mark.slow

#: Official tests our servers fail on purpose, and why.
DIFFERENCES = {
    "test_chess_environment.py::TestTemporalDiscounting::test_earlier_moves_get_less_credit": (
        "in self-play our server rewards the mover (+1 for the mating move); the official one scores "
        "every move from the colour it gave the agent (-1 there)"
    ),
}

CHESS_SHIM = {
    "envs/__init__.py": "",
    "envs/chess_env/__init__.py": (
        "from openenv_lab.servers.chess import ChessAction, ChessObservation, ChessState\n"
    ),
    "envs/chess_env/server/__init__.py": "",
    "envs/chess_env/server/chess_environment.py": "from openenv_lab.servers.chess import ChessEnvironment\n",
}


def echo_shim() -> dict[str, str]:
    """Our MCP echo server where the official tests import and start theirs; their client, unmodified."""
    client = require() / "envs" / "echo_env" / "client.py"
    return {
        "envs/__init__.py": "",
        "envs/echo_env/__init__.py": "",
        "envs/echo_env/client.py": (
            "import importlib.util\n"
            f"_spec = importlib.util.spec_from_file_location('official_echo_client', {str(client)!r})\n"
            "_module = importlib.util.module_from_spec(_spec)\n"
            "_spec.loader.exec_module(_module)\n"
            "EchoEnv = _module.EchoEnv\n"
        ),
        "envs/echo_env/server/__init__.py": "",
        "envs/echo_env/server/app.py": (
            "from openenv_lab.servers.echo_tools import make_app\n\napp = make_app()\n"
        ),
        "envs/echo_env/server/echo_environment.py": (
            "from openenv_lab.servers.echo_tools import EchoToolsEnvironment as EchoEnvironment\n"
        ),
    }


def run_official(
    test_file: str, shim: Path, files: dict[str, str], select: str | None = None
) -> dict[str, str]:
    """Run one official test file with ``envs`` resolving to ``shim`` (made of ``files``), only the tests
    ``select`` picks (pytest's ``-k``); each test's outcome by id."""
    for relative, text in files.items():
        path = shim / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    report = shim / "report.xml"
    official = str(require() / "tests" / test_file)
    options = [
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--rootdir",
        str(shim),
        "--junitxml",
        str(report),
    ]
    if select is not None:
        options += ["-k", select]
    subprocess.run(
        [sys.executable, "-m", "pytest", official, *options],
        cwd=shim,
        env={"PYTHONPATH": str(shim), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{test_file}::{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes[name] = "skipped" if case.find("skipped") is not None else ("failed" if failed else "passed")
    return outcomes


def test_the_official_chess_tests_pass_on_our_chess_environment_but_for_the_listed_differences(tmp_path):
    outcomes = run_official("test_chess_environment.py", tmp_path, CHESS_SHIM)
    assert len(outcomes) >= 20  # the file ran
    failed = {name for name, outcome in outcomes.items() if outcome == "failed"}
    assert failed == set(DIFFERENCES), {name: outcomes[name] for name in failed ^ set(DIFFERENCES)}


# Runs alone (conftest.py's SOLO group): its servers have 10 s to start.
def test_the_official_websocket_tests_of_echo_pass_on_our_mcp_echo_server(tmp_path):
    """Smoke, HTTP protocol, WebSocket client and echo tests: all but those of connect4 (another env) and
    the concurrency ones the file itself skips."""
    outcomes = run_official(
        "test_websockets.py", tmp_path, echo_shim(), select="not connect4 and not Connect4"
    )
    ran = {name: outcome for name, outcome in outcomes.items() if outcome != "skipped"}
    assert len(ran) >= 15, outcomes  # the file ran: 4 smoke, 5 HTTP, 4 client, 2 echo
    assert {name for name, outcome in ran.items() if outcome == "failed"} == set(), outcomes
    assert any("call_tool" in name or "echo_with_length" in name for name in ran)
