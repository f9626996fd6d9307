"""A venv for the official OpenEnv environments whose packages are not ours: ``.venv-catalogue``.

The conformance tests (tests/envs/test_official_envs.py) start each official environment from the
unmodified copy of huggingface/OpenEnv, with the PyPI packages its own ``pyproject.toml`` names. Most need
only what the project's venv has (openenv, numpy, ale-py, python-chess, moonfish); the ones listed in
`PACKAGES` need simulators, game engines or libraries of their own, installed here, in a venv of their
own so that their pins never touch the project's. The servers run with this venv's Python; our client, in the
project's venv, plays them over the wire, as a user's would.

    python scripts/catalogue_venv.py            # make or update .venv-catalogue and the venvs beside it
    python scripts/catalogue_venv.py --print    # print its Python's path, making it first if needed

The venv is made again only when `PACKAGES` change (a stamp file inside it holds the list it was made
with). ``$OPENENV_LAB_CATALOGUE_PYTHON`` pointed at its Python tells the tests where it is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-catalogue"
STAMP = VENV / "openenv-lab-catalogue.json"

#: What each environment run from this venv needs beyond openenv itself, as its pyproject.toml names it
#: (OpenSpiel's says pyspiel is built from source in its image; PyPI has had it as ``open_spiel`` since).
PACKAGES = {
    "openspiel_env": ["open_spiel==2.0.2"],
    "dm_control_env": ["dm_control==1.0.52", "mujoco==4.0.1"],
    "textarena_env": ["textarena==0.7.4", "nltk==3.10.4", "gradio==6.31.0"],
    "reasoning_gym_env": ["reasoning-gym==0.1.25"],
    # Its server imports smolagents' executor, which its pyproject leaves out.
    "coding_env": ["smolagents==1.26.0"],
    "repl_env": ["smolagents==1.26.0", "pypdf==7.1.1"],
}
#: The framework, at the version the project's tests pin (.ci/constraints.txt); pytest and gunicorn for
#: the official test files of tests/envs/ (which start their servers with gunicorn).
BASE = ["openenv==0.10.0", "numpy==2.4.6", "pytest==9.2.0", "gunicorn==27.0.1"]


#: Environments whose pins clash with the catalogue's, each in a venv of its own beside it
#: (``.venv-catalogue-<name>``): snake_env's marlenv needs gym 0.24, which needs numpy 1.
OWN_VENVS = {
    "snake": ["openenv==0.10.0", "gym==0.24.1", "marlenv==1.0.1", "numpy==1.26.4", "pillow==12.3.0"],
}


def wanted() -> list[str]:
    return sorted({*BASE, *(package for packages in PACKAGES.values() for package in packages)})


def folders() -> dict[Path, list[str]]:
    """Each venv this script makes, with its packages."""
    made = {VENV: wanted()}
    made.update({VENV.with_name(f"{VENV.name}-{name}"): sorted(p) for name, p in OWN_VENVS.items()})
    return made


def python_of(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def up_to_date(folder: Path, packages: list[str]) -> bool:
    try:
        stamp = folder / STAMP.name
        return json.loads(stamp.read_text()) == packages and python_of(folder).exists()
    except (OSError, ValueError):
        return False


def make(folder: Path = VENV, packages: list[str] | None = None) -> Path:
    """Make (or re-make) a venv when its packages differ from those wanted; its Python."""
    packages = wanted() if packages is None else packages
    if up_to_date(folder, packages):
        return python_of(folder)
    started = time.monotonic()
    if folder.exists():
        shutil.rmtree(folder)
    venv.EnvBuilder(with_pip=True).create(folder)
    # Compiled once, here, on every core (pip compiles one file at a time): where PYTHONDONTWRITEBYTECODE is
    # set, as on these machines, nothing compiled on import is kept, and every server start then compiles
    # openenv's and gradio's imports again: 10 s on a 2-core machine, the official test_websockets.py's
    # whole allowance for a start (it then hangs).
    command = [str(python_of(folder)), "-m", "pip", "install", "-q", "--no-compile", *packages]
    print("+", " ".join(command[2:]), flush=True)
    done = subprocess.run(command, check=False)
    if done.returncode == 0:  # a file some package ships in newer syntax fails to compile: it is left as is
        compiling = [str(python_of(folder)), "-m", "compileall", "-q", "-j", "0", str(folder / "lib")]
        subprocess.run(compiling, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)  # never leave a half-made venv that looks finished
        raise SystemExit(f"pip could not install {folder.name}'s packages (exit {done.returncode})")
    (folder / STAMP.name).write_text(json.dumps(packages) + "\n")
    print(f"Made {folder.name} in {time.monotonic() - started:.0f} s: {', '.join(packages)}", flush=True)
    return python_of(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the venv's Python (made first if needed)")
    args = parser.parse_args()
    python = make()
    for folder, packages in folders().items():
        if folder != VENV:
            make(folder, packages)
    if args.print:
        print(python)


if __name__ == "__main__":
    main()
