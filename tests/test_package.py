"""The package as users get it: the wheel and sdist build, pass ``twine check``, carry their data files;
a notebook's install cell, run as on Colab in a fresh venv, installs it by name (the wheel is what pip
finds) and from a git URL (this checkout's commit, as ``git+file://localhost/...``: pip's git path, as
for GitHub); and the
installed package plays chess on its embedded server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import install_cells  # noqa: E402

#: Runs a cell as Colab's kernel would: google.colab is imported there.
RUN_AS_COLAB = (
    "import sys, types; sys.modules['google.colab'] = types.ModuleType('google'); exec(sys.argv[1])"
)
#: Package data the code opens at run time (the chess tasks, the image's Dockerfile).
DATA = ("openenv_lab/servers/chess_tasks.json", "openenv_lab/launch/Dockerfile")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_wheel_and_the_sdist_pass_twine_check_with_their_data_and_license(dist):
    """Each carries LICENSE, CHANGELOG.md and CITATION.cff too."""
    (wheel,) = dist.glob("openenv_lab-*.whl")
    (sdist,) = dist.glob("openenv_lab-*.tar.gz")
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        fields = archive.read(metadata).decode()
    for path in DATA:
        assert path in names, f"the wheel lacks {path}"
    assert "License-Expression: BSD-3-Clause" in fields.splitlines()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), "the wheel lacks LICENSE"
    for path in ("CHANGELOG.md", "CITATION.cff"):  # installed under share/doc/openenv-lab
        assert any(name.endswith(f".data/data/share/doc/openenv-lab/{path}") for name in names), path
    for extra in ("sb3", "grpo", "train", "atari", "finrl", "notebooks"):
        assert f"Provides-Extra: {extra}" in fields.splitlines()
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for path in (*DATA, "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff"):
        assert path in members, f"the sdist lacks {path}"


def test_the_install_cell_installs_by_name_and_from_git_in_a_fresh_venv_and_it_plays(dist, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    cell = install_cells.render("tutorials/01_rl_loop_over_a_network.ipynb")
    for source, where in (("", {"PIP_FIND_LINKS": str(dist)}), (f"git+file://localhost{ROOT}", {})):
        # The package alone goes between the two (pip keeps an installed one): the dependencies stay.
        uninstall = [python, "-m", "pip", "uninstall", "-q", "-y", "openenv-lab"]
        subprocess.run(uninstall, capture_output=True, timeout=120, check=bool(source))
        done = subprocess.run(
            [python, "-c", RUN_AS_COLAB, cell],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, **where, "OPENENV_LAB_SOURCE": source},
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert done.stdout.strip().splitlines()[-1].startswith("installed openenv-lab"), done.stdout
        installed = (venv / "lib").glob("python3*/site-packages/openenv_lab-*.dist-info/direct_url.json")
        from_git = [path for path in installed if "git" in path.read_text()]
        assert bool(from_git) == bool(source), source or "by name"
    check = (
        "import importlib.resources as r, json, openenv_lab\n"
        "assert 'site-packages' in openenv_lab.__file__, openenv_lab.__file__\n"
        "tasks = json.loads(r.files('openenv_lab.servers').joinpath('chess_tasks.json').read_text())\n"
        "assert r.files('openenv_lab.launch').joinpath('Dockerfile').read_text().startswith('#')\n"
        "print('TASKS', len(tasks))\n"
    )
    done = subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) > 0
    play = subprocess.run(
        [str(venv / "bin" / "openenv-lab"), "play", "chess", "--games", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert play.returncode == 0, play.stdout[-2000:] + play.stderr[-3000:]
    assert re.search(r"Agent: \d+ won, \d+ drawn, \d+ lost", play.stdout), play.stdout
