"""The Pythons the README promises beyond the suite's own: the oldest, 3.10, and the newest this machine has.

The suite runs on Python 3.11 with the versions `.ci/constraints.txt` pins. Two other venvs, made by .ci/run
with the package installed as the README says (``pip install -e .``, plus extras where noted) and the test
tools, run the README's command and the tests most likely to break there:

- **3.10** (``$OPENENV_LAB_PY310_PYTHON``): the idle close of a session connection waits in a task of its
  own (there is no ``Task.uncancel`` to tell its cancellation from a server's), and the client's deadlines
  use ``asyncio.wait_for`` (there is no ``asyncio.timeout``): the client, idle-close and limits tests.
- **the newest** (``$OPENENV_LAB_NEWEST_PYTHON``, 3.12 or later), with the newest versions pip finds for it,
  as a fresh install gets them (the Atari and FinRL extras included): the gym layer's tests (spaces,
  batched infos, vector envs, adapters), where a new numpy or gymnasium would show first.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
#: Which venv -> the variable that names its python, and what it is.
VENVS = {
    "3.10": ("OPENENV_LAB_PY310_PYTHON", "Python 3.10 with `pip install -e .`"),
    "newest": ("OPENENV_LAB_NEWEST_PYTHON", "Python 3.12 or later with `pip install -e '.[atari,finrl]'`"),
}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def python(which: str) -> str:
    variable, venv = VENVS[which]
    found = os.environ.get(variable)
    if not found:
        pytest.skip(
            f"NO {which.upper()} PYTHON ENVIRONMENT: set {variable} to the python of a venv of {venv} and "
            "pytest pytest-timeout hypothesis psutil (.ci/run makes one)"
        )
    return found


def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def pytest_in(interpreter: str, *tests: str) -> None:
    completed = run(
        interpreter, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests, timeout=540
    )
    assert completed.returncode == 0, completed.stdout[-5000:] + completed.stderr[-3000:]
    assert " passed" in completed.stdout and " failed" not in completed.stdout


@pytest.mark.parametrize("which", list(VENVS))
def test_the_readme_command_plays(which):
    interpreter = python(which)
    version = run(interpreter, "-c", "import sys; print(*sys.version_info[:2])", timeout=30)
    major, minor = map(int, version.stdout.split())
    expected = (major, minor) == (3, 10) if which == "3.10" else (major, minor) >= (3, 12)
    assert expected, version.stdout
    # The README's first command, after its install: the venv's own openenv-lab script.
    played = run(str(Path(interpreter).parent / "openenv-lab"), "play", "chess", "--games", "3", timeout=300)
    assert played.returncode == 0, played.stdout[-2000:] + played.stderr[-3000:]
    assert "Agent: " in played.stdout and " won, " in played.stdout


def test_the_idle_close_and_the_clients_deadlines_hold_on_python_310():
    pytest_in(
        python("3.10"), "tests/client", "tests/servers/test_idle_close.py", "tests/servers/test_limits.py"
    )


def test_the_gym_layer_holds_on_the_newest_python():
    pytest_in(python("newest"), "-m", "not slow", "tests/envs", "tests/adapters")
