"""The notebooks and tutorials as files: their shape, their badges, Binder's pins, and kernel robustness.

pytest's nbval plugin executes every notebook (see ``addopts`` in pyproject.toml); this module checks what
execution cannot: that the committed files stay reviewable (no outputs but the checked ones), that every
notebook opens on Colab and Binder from the README, that each exercise has a reference answer, and that a
notebook can be interrupted mid-training and re-run in the same kernel without leaving servers behind.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import signal
import sys
import threading
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TUTORIALS = sorted((ROOT / "tutorials").glob("*.ipynb"))
ALL = NOTEBOOKS + TUTORIALS
CHECK_MARK = "# NBVAL_CHECK_OUTPUT"


def _load(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _code(nb: nbformat.NotebookNode) -> list[str]:
    return [cell.source for cell in nb.cells if cell.cell_type == "code"]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_there_is_a_notebook_for_each_topic():
    names = [p.name for p in NOTEBOOKS]
    for topic in ("chess", "atari", "finrl", "grpo"):
        assert any(topic in name for name in names), f"no notebook named for {topic}: {names}"
    assert len(TUTORIALS) >= 6


@pytest.mark.parametrize("path", ALL, ids=_rel)
def test_notebook_is_valid_and_stored_without_run_outputs(path):
    nb = _load(path)
    nbformat.validate(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.source.startswith(CHECK_MARK):
            # nbval compares these; it needs an execution count to treat the outputs as a reference.
            assert cell.outputs and cell.execution_count is not None, f"{_rel(path)} cell {index}"
            assert all(out.output_type == "stream" for out in cell.outputs), f"{_rel(path)} cell {index}"
        else:
            assert not cell.outputs, f"{_rel(path)} cell {index} has stored outputs: strip them"
            assert cell.execution_count is None, f"{_rel(path)} cell {index}"


@pytest.mark.parametrize("path", ALL, ids=_rel)
def test_notebook_opens_on_colab_and_binder(path):
    nb = _load(path)
    rel = _rel(path)
    title = nb.cells[0]
    assert title.cell_type == "markdown" and title.source.startswith("# ")
    assert f"colab.research.google.com/github/openenv-lab/openenv_lab/blob/main/{rel}" in title.source
    assert f"labpath={urllib.parse.quote(rel, safe='')}" in title.source
    first_code = _code(nb)[0]
    assert '"google.colab" in sys.modules' in first_code, "the first code cell installs the package on Colab"
    assert "pip" in first_code and "openenv_lab" in first_code


@pytest.mark.parametrize("path", ALL, ids=_rel)
def test_notebook_ends_with_what_next(path):
    last = _load(path).cells[-1]
    assert last.cell_type == "markdown"
    assert re.search(r"next", last.source, re.IGNORECASE), f"{_rel(path)} should end with what to try next"


@pytest.mark.parametrize("path", ALL, ids=_rel)
def test_notebook_imports_the_package_that_registers_the_envs(path):
    # ruff's unused-import fix once removed it from two tutorials, and gym.make("openenv/...") broke.
    assert any(re.search(r"^import openenv_lab\b", src, re.MULTILINE) for src in _code(_load(path)))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_rel)
def test_notebooks_have_a_smoke_switch(path):
    source = "\n".join(_code(_load(path)))
    assert 'os.environ.get("OPENENV_LAB_SMOKE") == "1"' in source


def test_readme_lists_every_notebook_with_badges():
    """The worked notebooks in the README's table with their badges; the lessons linked from the README, and
    in the syllabus's table with theirs (the README stays short however many lessons there are)."""
    readme = (ROOT / "README.md").read_text()
    syllabus = (ROOT / "tutorials" / "README.md").read_text()
    for path in ALL:
        rel = _rel(path)
        listing = readme if path in NOTEBOOKS else syllabus
        if path in NOTEBOOKS:
            assert f"[`{rel}`]({rel})" in readme, f"README does not list {rel}"
        else:
            assert f"]({rel})" in readme, f"README does not link {rel}"
            assert f"]({path.name})" in syllabus, f"tutorials/README.md does not list {rel}"
        assert f"blob/main/{rel})" in listing
        assert f"labpath={urllib.parse.quote(rel, safe='')})" in listing


def _mistake_cases(lesson: str) -> dict[str, int]:
    """Test name -> number of parametrized cases, in ``tests/course/test_lesson_<lesson>.py``."""
    tree = ast.parse((ROOT / "tests" / "course" / f"test_lesson_{lesson}.py").read_text())
    cases = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("parametrize"):
                    cases[node.name] = len(decorator.args[1].elts)
    return cases


@pytest.mark.parametrize("path", TUTORIALS, ids=_rel)
def test_every_exercise_has_a_reference_answer_and_a_check_tested_on_mistakes(path):
    """Each ``### Exercise`` is three code cells: the student's (``# your code here``), the reference
    answer loaded for teachers and CI, and a call of the lesson's check (`openenv_lab.course`), whose
    tests feed it at least two typical mistakes."""
    cells = _load(path).cells
    lesson = re.match(r"(\d+)_", path.name).group(1)
    module = f"solutions.lesson_{lesson}"
    checks = importlib.import_module(f"openenv_lab.course.lesson_{lesson}")
    mistakes = _mistake_cases(lesson)
    solutions = (ROOT / "tutorials" / "solutions" / f"lesson_{lesson}.py").read_text()
    headings = [
        i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("### Exercise")
    ]
    assert headings, f"{_rel(path)} has no exercise"
    for number, heading in enumerate(headings, start=1):
        assert cells[heading].source.startswith(f"### Exercise {number}\n"), (
            f"exercise {number} of {_rel(path)}"
        )
        exercise, answer, check = [c.source for c in cells[heading + 1 :] if c.cell_type == "code"][:3]
        assert "# your code here" in exercise, f"exercise {number} of {_rel(path)}: no place for the answer"
        names = re.findall(r"^(?:def |class )?(\w+)\b(?:\(| *[:=])", exercise, re.MULTILINE)
        assert names, f"exercise {number} of {_rel(path)} defines nothing"
        assert answer.startswith("if SOLUTIONS:") and module in answer, f"exercise {number}'s answer cell"
        for name in names:
            assert name in answer, f"{name} is not loaded from {module}"
            assert re.search(rf"^(?:(?:def|class) )?{name}\b", solutions, re.MULTILINE), (
                f"{module} lacks {name}"
            )
        call = re.search(r"check\.(\w+)\((\w+)", check)
        assert call and call.group(2) in names, (
            f"exercise {number} of {_rel(path)} is not handed to its check"
        )
        assert hasattr(checks, call.group(1)), f"openenv_lab.course.lesson_{lesson} has no {call.group(1)}"
        cases = mistakes.get(f"test_{call.group(1)}_mistakes_are_named", 0)
        assert cases >= 2, f"check.{call.group(1)} is tested on {cases} mistakes (tests/course/)"


def _pinned(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{path.name}: {line} is not pinned"
        pins[req.name.lower().replace("_", "-")] = spec.version
    return pins


def test_binder_pins_every_dependency_the_notebooks_need():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = list(project["dependencies"])
    for extra in ("atari", "finrl", "sb3", "grpo", "notebooks"):
        needed += project["optional-dependencies"][extra]
    assert project["optional-dependencies"]["train"] == ["openenv-lab[sb3,grpo]"]
    binder = _pinned(ROOT / "binder" / "requirements.txt")
    constraints = _pinned(ROOT / ".ci" / "constraints.txt")
    for line in needed:
        req = Requirement(line)
        name = req.name.lower().replace("_", "-")
        if name == "openenv-lab":
            continue
        assert name in binder, f"binder/requirements.txt does not pin {name}"
        assert req.specifier.contains(binder[name], prereleases=True), f"binder pin of {name} breaks {line}"
        if name in constraints:
            assert binder[name] == constraints[name], f"binder and CI pin different {name} versions"
    post = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r'pip install .*"\.\[atari,finrl,train,notebooks\]"', post)
    assert (ROOT / "binder" / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"


# --- running in a real kernel --------------------------------------------------------------------------


def _server_processes(kernel_pid: int) -> set[int]:
    import psutil

    try:
        children = psutil.Process(kernel_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {p.pid for p in children if "openenv_lab" in " ".join(_cmdline(p))}


def _cmdline(process) -> list[str]:
    import psutil

    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_chess_notebook_survives_an_interrupt_and_reruns_in_the_same_kernel(monkeypatch):
    """Run it, interrupt a long training run, then run it all again in that kernel: no "server full",
    no servers piling up, none left after the kernel is gone."""
    import psutil
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    monkeypatch.setenv("OPENENV_LAB_SMOKE", "1")
    nb = _load(ROOT / "notebooks" / "01_chess.ipynb")
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    with client.setup_kernel():
        kernel_pid = client.km.provisioner.process.pid
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        first = _server_processes(kernel_pid)
        assert first, "the notebook should have started an embedded server in the kernel"

        # From the top again, with a training budget that would run for hours; interrupt it mid-way.
        training = next(i for i, c in enumerate(nb.cells) if "for episode in tqdm(" in c.source)
        for index, cell in enumerate(nb.cells[:training]):
            client.execute_cell(cell, index)
        client.kc.execute("TRAIN_EPISODES = 10**6", reply=False)
        pressed = threading.Event()

        def press_stop() -> None:
            # What Jupyter's stop button does, pressed again every 8 s as a user would if one press is
            # lost: Python drops a KeyboardInterrupt that lands in a finalizer run by the garbage collector
            # (the first run's envs are collected while this one trains). Between cells the kernel
            # ignores SIGINT, so a late press cannot hit the cells after this one.
            while not pressed.wait(8.0):
                os.kill(kernel_pid, signal.SIGINT)

        stopper = threading.Thread(target=press_stop, daemon=True)
        stopper.start()
        try:
            with pytest.raises(CellExecutionError, match="KeyboardInterrupt"):
                client.execute_cell(nb.cells[training], training)
        finally:
            pressed.set()
            stopper.join()

        client.kc.execute("TRAIN_EPISODES = 3", reply=False)
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        again = _server_processes(kernel_pid)
        assert len(again) <= len(first), f"servers piled up: {len(first)} after one run, {len(again)} now"
        survivors = [psutil.Process(pid) for pid in first | again if psutil.pid_exists(pid)]
    _, alive = psutil.wait_procs(survivors, timeout=15)
    assert not alive, f"servers outlived their kernel: {[p.pid for p in alive]}"
