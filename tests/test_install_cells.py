"""The notebooks' install cells: one template (``scripts/install_cells.py``), each notebook's own extras,
and one clear sentence when pip cannot install, never a pip traceback.

The cells' success on Colab's stack is the Colab tier's to prove (``scripts/colab_tier.py``, run by
``.ci/run``); these tests run a cell as Colab would (``google.colab`` imported) where it must fail.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import colab_tier  # noqa: E402
import install_cells  # noqa: E402

RUN_AS_COLAB = (
    "import sys, types; sys.modules['google.colab'] = types.ModuleType('google.colab'); exec(sys.argv[1])"
)


def test_every_notebook_installs_through_the_template():
    assert install_cells.main(["--check"]) == 0


@pytest.mark.parametrize("notebook", install_cells.notebooks())
def test_each_notebook_installs_only_what_it_uses(notebook):
    cell = install_cells.render(notebook)
    extras = install_cells.EXTRAS.get(notebook)
    if notebook.startswith("tutorials/"):
        assert extras is None and '"openenv-lab"' in cell  # the lessons need the package alone
    else:
        assert f'"openenv-lab[{extras}]"' in cell
    assert "train" not in (extras or "") and "notebooks" not in (extras or "")  # no JupyterLab on Colab
    code = [c for c in json.loads((ROOT / notebook).read_text())["cells"] if c["cell_type"] == "code"]
    uses_trl = any(re.search(r"\btrl\b", "".join(c["source"])) for c in code[1:])
    assert ("grpo" in (extras or "")) == uses_trl
    assert ("os.kill(os.getpid(), 9)" in cell) == (notebook in install_cells.RESTARTS)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A new venv's python: nothing of ours installed, so pip must look for everything."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def _run_cell(python: str, notebook: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-c", RUN_AS_COLAB, install_cells.render(notebook)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


@pytest.mark.slow
def test_an_install_cell_that_cannot_reach_the_index_says_so_in_one_sentence(bare_python):
    index = f"http://127.0.0.1:{_closed_port()}/simple"
    done = _run_cell(
        bare_python,
        "notebooks/01_chess.ipynb",
        OPENENV_LAB_SOURCE="",  # the package's name: pip must ask the index
        PIP_INDEX_URL=index,
        PIP_EXTRA_INDEX_URL=index,
        PIP_FIND_LINKS=" ",
        PIP_NO_CACHE_DIR="1",
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Could not install openenv-lab[sb3]: this runtime cannot reach the package index or GitHub. "
        "Check its connection (Runtime > Disconnect and delete runtime), then run this cell again."
    ), done.stderr[-2000:]


@pytest.mark.slow
def test_an_install_cell_that_pip_refuses_names_pips_reason_in_one_line(bare_python, tmp_path):
    missing = tmp_path / "no-such-wheel.whl"
    done = _run_cell(
        bare_python, "tutorials/01_rl_loop_over_a_network.ipynb", OPENENV_LAB_SOURCE=missing.as_uri()
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("pip could not install openenv-lab @ file://") and "no-such-wheel" in line, line


def test_outside_colab_an_install_cell_does_nothing():
    done = subprocess.run(
        [sys.executable, "-c", install_cells.render("notebooks/04_grpo.ipynb")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENENV_LAB_SOURCE": "/nowhere"},
    )
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


# --- the Colab tier's rules ----------------------------------------------------------------------------


def test_colabs_list_is_read_by_name_and_version_url_lines_included(tmp_path):
    """torch, torchvision and torchaudio are URLs in Colab's list: read too, so that a cell replacing them
    is seen, and kept out of the venv's pins (this machine's CPU build stands in for torch)."""
    freeze = tmp_path / "pip-freeze.txt"
    freeze.write_text(
        "# a comment\nipywidgets==7.7.1\nhuggingface_hub==1.27.0\nPyYAML==6.0.3\n"
        "torch @ https://download.pytorch.org/whl/cpu/torch-2.11.0%2Bcpu-cp313-cp313-linux_x86_64.whl\n"
        "torchvision @ https://download.pytorch.org/whl/cpu/torchvision-0.26.0%2Bcpu-cp313-cp313-linux_x86_64.whl\n"
    )
    assert colab_tier.read_freeze(freeze) == {
        "ipywidgets": "7.7.1",
        "huggingface-hub": "1.27.0",
        "pyyaml": "6.0.3",
        "torch": "2.11.0",
        "torchvision": "0.26.0",
    }
    assert colab_tier.from_urls(freeze) == {"torch", "torchvision"}
    assert colab_tier.url_version(freeze, "torch") == "2.11.0"  # what this venv's CPU build stands in for


def test_a_cells_comment_must_name_every_colab_package_it_changes():
    cell = install_cells.render("notebooks/04_grpo.ipynb")
    changed = {"huggingface-hub": "1.33.0", "certifi": "2026.10.19", "datasets": "5.2.0", "pyarrow": "26.0.1"}
    assert colab_tier.unnamed_changes(cell, changed) == []  # huggingface_hub names huggingface-hub
    assert colab_tier.unnamed_changes(cell, {**changed, "fsspec": "2026.1.0"}) == ["fsspec"]
    plain = install_cells.render("tutorials/01_rl_loop_over_a_network.ipynb")
    assert colab_tier.unnamed_changes(plain, changed) == ["datasets", "pyarrow"]  # not this cell's to change
    code_only = "\n".join(line for line in plain.splitlines() if not line.lstrip().startswith("#"))
    assert colab_tier.unnamed_changes(code_only, {"certifi": "1"}) == ["certifi"]  # comments, not code


@pytest.mark.parametrize(
    ("change", "verdict"),
    [
        (colab_tier.Change("ipywidgets", "7.7.1", "7.7.1", "8.1.9"), "ipywidgets left 7.x"),
        (colab_tier.Change("ipywidgets", "7.7.1", "7.7.1", "7.8.5"), None),
        (colab_tier.Change("ipykernel", "6.17.1", "6.17.1", "7.4.0"), "Colab's kernel stack changed"),
        (colab_tier.Change("numpy", "2.1.3", "2.1.3", "2.4.6"), "a compiled package changed"),
        (colab_tier.Change("cryptography", "50.0.0", "50.0.0", "50.0.2", binary=True), "a compiled package"),
        (colab_tier.Change("huggingface-hub", "1.27.0", "1.27.0", "1.33.0"), None),  # pure Python
        (colab_tier.Change("pandas", "2.2.3", None, "2.2.3"), None),  # added at Colab's version
    ],
)
def test_the_tier_fails_on_compiled_kernel_and_widget_changes_only(change, verdict):
    if verdict is None:
        assert change.verdict is None
    else:
        assert change.verdict.startswith(verdict)


def test_the_notebooks_that_may_replace_pyarrow_install_last():
    order = colab_tier.groups()
    assert sorted(notebook for group in order for notebook in group) == sorted(install_cells.notebooks())
    last = order[-1]
    assert set(last) == install_cells.RESTARTS
    assert not any(set(group) & install_cells.RESTARTS for group in order[:-1])


def test_a_notebook_the_colab_tier_runs_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    """The tier stops each kernel without running its finalizers: what a notebook makes in its temporary
    folder (SB3's log folders, a ``TemporaryDirectory``), and the empty folder ipykernel's install leaves,
    go with the tier's own folder (before, three ``SB3-*`` folders were left behind by every CI run)."""
    import nbformat  # nbval's dependency, in the dev extra

    code = "import tempfile\nkept = tempfile.TemporaryDirectory()\nprint(tempfile.mkstemp()[1])"
    notebook = tmp_path / "litter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), notebook)
    outside = tmp_path / "tmp"
    outside.mkdir()
    monkeypatch.setenv("TMPDIR", str(outside))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() reads TMPDIR again
    seconds, error = colab_tier.execute(sys.executable, str(notebook))
    assert error is None and seconds > 0
    assert list(outside.iterdir()) == []
