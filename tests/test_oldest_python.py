"""The oldest Python the README promises, 3.10: its set-up command, and the code that takes other paths there.

The suite runs on a newer Python. On 3.10 the idle close of a session connection waits in a task of its own
(there is no ``Task.uncancel`` to tell its cancellation from a server's), and the client's deadlines use
``asyncio.wait_for`` (there is no ``asyncio.timeout``). This runs, in a venv of Python 3.10 with the
package installed as the README says (``pip install -e .``) and the test tools, the README's command and
the tests of those paths. ``$OPENENV_LAB_PY310_PYTHON`` names that venv's python; .ci/run makes it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

PYTHON = os.environ.get("OPENENV_LAB_PY310_PYTHON")
ROOT = Path(__file__).parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not PYTHON,
        reason="NO PYTHON 3.10 ENVIRONMENT: set OPENENV_LAB_PY310_PYTHON to the python of a Python 3.10 venv "
        "with `pip install -e . pytest pytest-timeout hypothesis psutil` (.ci/run makes one)",
    ),
]


def run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_the_readme_command_plays_on_python_310():
    assert PYTHON is not None
    version = run(PYTHON, "-c", "import sys; print(sys.version_info[:2])", timeout=30)
    assert version.stdout.strip() == "(3, 10)", version.stdout + version.stderr
    # The README's first command, after its install: the venv's own openenv-lab script.
    played = run(str(Path(PYTHON).parent / "openenv-lab"), "play", "chess", "--games", "3", timeout=300)
    assert played.returncode == 0, played.stdout[-2000:] + played.stderr[-3000:]
    assert "Agent: " in played.stdout and " won, " in played.stdout


def test_the_idle_close_and_the_clients_deadlines_hold_on_python_310():
    assert PYTHON is not None
    tests = ["tests/client", "tests/servers/test_idle_close.py", "tests/servers/test_limits.py"]
    completed = run(
        PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests, timeout=540
    )
    assert completed.returncode == 0, completed.stdout[-5000:] + completed.stderr[-3000:]
    assert " passed" in completed.stdout and " failed" not in completed.stdout
