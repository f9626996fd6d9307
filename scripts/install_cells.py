"""The first code cell of every notebook and tutorial: what it installs on Colab, written from one template.

Each notebook installs only what it uses (``EXTRAS`` below) and leaves Colab's own packages alone: numpy,
torch, ipywidgets 7 and the kernel stay as Colab ships them, which the Colab tier of ``.ci/run``
(``scripts/colab_tier.py``) checks. The GRPO notebooks are the one exception: TRL 1.x needs datasets>=4.7
and so pyarrow>=21, newer than Colab's; their cell says so and restarts the runtime once when the pyarrow
that Colab had already loaded was replaced.

    python scripts/install_cells.py            # rewrite the cells from the template
    python scripts/install_cells.py --check    # exit 1 if a notebook's cell differs (the tests run this)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: The extras each notebook installs on Colab (tutorials: the package alone).
EXTRAS = {
    "notebooks/01_chess.ipynb": "sb3",
    "notebooks/02_atari.ipynb": "atari,sb3",
    "notebooks/03_finrl.ipynb": "finrl,sb3",
    "notebooks/04_grpo.ipynb": "grpo",
    "notebooks/05_grpo_tools.ipynb": "grpo",
}
#: Notebooks whose install may replace a compiled package Colab has loaded (pyarrow, for TRL's datasets).
RESTARTS = {"notebooks/04_grpo.ipynb", "notebooks/05_grpo_tools.ipynb"}
GIT_URL = "git+https://github.com/openenv-lab/openenv_lab"

_HEAD = """\
# On Google Colab, install openenv_lab and what this notebook uses; anywhere else this cell does nothing.
# Colab's own packages stay as they are (numpy, torch, ipywidgets 7, the kernel); openenv needs newer
# huggingface_hub and certifi than Colab's, pure-Python packages, so no restart is needed for them.\
{restart_note}
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess{import_version}

    # From GitHub; OPENENV_LAB_SOURCE="" installs the released package instead, or name a wheel or a folder.
    SOURCE = os.environ.get("OPENENV_LAB_SOURCE", "{git_url}")
    REQUIREMENT = "{requirement}" + (f" @ {{SOURCE}}" if SOURCE else ""){pyarrow_before}
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--timeout", "30", "--retries", "2", REQUIREMENT],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        said = pip.stderr + pip.stdout
        offline = ("NewConnectionError", "name resolution", "unreachable", "timed out", "resolve host")
        if any(sign in said for sign in offline):
            raise SystemExit(
                f"Could not install {{REQUIREMENT}}: this runtime cannot reach the package index or GitHub."
                " Check its connection (Runtime > Disconnect and delete runtime), then run this cell again."
            )
        lines = [line.strip() for line in said.splitlines() if line.strip()] or ["no message"]
        reason = [line for line in lines if line.startswith("ERROR:")][-1:] or lines[-1:]
        raise SystemExit(f"pip could not install {{REQUIREMENT}}: {{reason[0]}}")
    print(f"installed {{REQUIREMENT}}")"""

_RESTART_NOTE = """
# TRL needs datasets>=4.7, and datasets needs pyarrow>=21, newer than Colab's: when Colab had already
# loaded its pyarrow, this cell restarts the runtime once (Colab reconnects); then run all cells again."""

_PYARROW_BEFORE = """
    pyarrow_before = version("pyarrow")"""

_RESTART = """
    if version("pyarrow") != pyarrow_before and "pyarrow" in sys.modules:
        print(f"pyarrow {pyarrow_before} -> {version('pyarrow')}: restarting the runtime once to load it;")
        print("when Colab has reconnected, run all cells again (this cell will not restart it again).")
        os.kill(os.getpid(), 9)"""


def render(notebook: str) -> str:
    """The install cell of ``notebook`` (a path relative to the repository's root)."""
    extras = EXTRAS.get(notebook, "")
    restarts = notebook in RESTARTS
    return _HEAD.format(
        restart_note=_RESTART_NOTE if restarts else "",
        git_url=GIT_URL,
        requirement=f"openenv-lab[{extras}]" if extras else "openenv-lab",
        pyarrow_before=_PYARROW_BEFORE if restarts else "",
        import_version="\n    from importlib.metadata import version" if restarts else "",
    ) + (_RESTART if restarts else "")


def notebooks() -> list[str]:
    """Every notebook and tutorial, relative to the root."""
    paths = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "tutorials").glob("*.ipynb"))
    return [path.relative_to(ROOT).as_posix() for path in paths]


def first_code_cell(nb: dict[str, Any]) -> dict[str, Any]:
    """The first code cell of a notebook read as JSON."""
    return next(cell for cell in nb["cells"] if cell["cell_type"] == "code")


def cell_source(cell: dict[str, Any]) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a cell differs")
    args = parser.parse_args(argv)
    stale = []
    for notebook in notebooks():
        path = ROOT / notebook
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = first_code_cell(nb)
        if cell_source(cell) == render(notebook):
            continue
        stale.append(notebook)
        if not args.check:  # as Jupyter saves it, so that only this cell's lines change
            cell["source"] = render(notebook).splitlines(keepends=True)
            text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("install cells differ from scripts/install_cells.py:", *stale, sep="\n  ", file=sys.stderr)
        return 1
    for notebook in stale:
        print(f"rewrote the install cell of {notebook}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
