"""The official OpenEnv environments, started from an unmodified copy of huggingface/OpenEnv.

`ROOT` is that copy: ``$OPENENV_LAB_CONFORMANCE`` if set, else ``shared/conformance/openenv-385de5eb``
beside this checkout (where the project's machines keep it). Outside those machines, point the variable
at a ``git clone https://github.com/huggingface/OpenEnv`` checked out at commit 385de5eb; tests that need
it are skipped, saying so, when it is not there.

`OfficialServer` runs one of its environments exactly as its README says (``python -m uvicorn
envs.<name>.server.app:app``, from the copy's root), on a free loopback port. Environments whose packages
are not the project's (`CATALOGUE`: OpenSpiel, dm_control, TextArena, ...) run with the Python of
``.venv-catalogue`` (scripts/catalogue_venv.py, ``$OPENENV_LAB_CATALOGUE_PYTHON``); without it their tests
skip, saying how to make it, except where ``$OPENENV_LAB_REQUIRE_CATALOGUE=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

COMMIT = "385de5eb"


def _root() -> Path | None:
    given = os.environ.get("OPENENV_LAB_CONFORMANCE")
    candidates = [Path(given)] if given else []
    here = Path(__file__).resolve().parent.parent
    candidates += [parent / "shared" / "conformance" / f"openenv-{COMMIT}" for parent in here.parents]
    for candidate in candidates:
        if (candidate / "envs").is_dir() and (candidate / "tests").is_dir():
            return candidate
    return None


ROOT = _root()
#: The official environments run with the catalogue venv's Python (scripts/catalogue_venv.py).
CATALOGUE = (
    "openspiel_env",
    "dm_control_env",
    "textarena_env",
    "reasoning_gym_env",
    "coding_env",
    "repl_env",
)
#: Environments whose modules import each other as a package (``from .models import``): run as
#: ``<name>.server.app:app`` from a folder where the copy's directory is that package (a link to it).
PACKAGED = ("textarena_env", "reasoning_gym_env", "coding_env", "repl_env")
#: Environments with a venv of their own beside the catalogue's (their pins clash with it).
OWN_VENVS = ("snake_env",)
#: Environments that import their modules from their own folder (``from models import``): run as
#: ``server.app:app`` from it.
STANDALONE = ("snake_env",)


def catalogue_python(name: str | None = None) -> str:
    """The catalogue venv's Python (or the venv of its own of an environment of `OWN_VENVS`), or skip
    (fail where it is required) saying how to make it."""
    given = os.environ.get("OPENENV_LAB_CATALOGUE_PYTHON") if name not in OWN_VENVS else None
    folder = ".venv-catalogue" + (f"-{name.removesuffix('_env')}" if name in OWN_VENVS else "")
    found = Path(given) if given else Path(__file__).resolve().parent.parent / folder / "bin" / "python"
    if found.exists():
        return str(found)
    why = f"no catalogue venv at {found}: make it with python scripts/catalogue_venv.py"
    if os.environ.get("OPENENV_LAB_REQUIRE_CATALOGUE") == "1":
        pytest.fail(why)
    pytest.skip(why)


MISSING = (
    "The official OpenEnv environments are not here: set OPENENV_LAB_CONFORMANCE to a checkout of "
    f"huggingface/OpenEnv at commit {COMMIT} (the project's machines keep one in shared/conformance/)"
)


def require() -> Path:
    """`ROOT`, or skip the calling test saying why."""
    if ROOT is None:
        pytest.skip(MISSING)
    return ROOT


class OfficialServer:
    """An official environment's server in a subprocess of its own, stopped by `stop` (or ``with``)."""

    def __init__(
        self, name: str, *, environment: dict[str, str] | None = None, startup: float = 90.0
    ) -> None:
        root = require()
        if name == "chess_env":
            pytest.importorskip(
                "moonfish", reason="the official chess_env plays with moonfish (pip install moonfish)"
            )
        if name == "atari_env":
            pytest.importorskip("ale_py", reason="the official atari_env needs ale-py")
        python = catalogue_python(name) if name in CATALOGUE or name in OWN_VENVS else sys.executable
        app, path, cwd = f"envs.{name}.server.app:app", str(root), root
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        if name in PACKAGED:
            self._folder = tempfile.TemporaryDirectory(prefix="openenv-lab-official-")
            (Path(self._folder.name) / name).symlink_to(root / "envs" / name, target_is_directory=True)
            app, path, cwd = f"{name}.server.app:app", self._folder.name, Path(self._folder.name)
        if name in STANDALONE:
            app, path, cwd = "server.app:app", str(root / "envs" / name), root / "envs" / name
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.name = name
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                python,
                "-m",
                "uvicorn",
                app,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": path, **(environment or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + startup
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"The official {name} exited at start:\n{self.process.stderr.read()[-3000:]}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"The official {name} did not answer /health within {startup:g} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()
        if self._folder is not None:
            self._folder.cleanup()

    def __enter__(self) -> OfficialServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
