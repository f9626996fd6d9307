"""Settings for every test run, including the notebooks and tutorials that nbval executes.

Notebooks run in their smoke mode (tiny budgets, the same code path) and tutorials load their reference
solutions, so CI checks that the exercises' checks pass with correct answers. Kernels inherit these.
"""

import importlib.util
import os
import shutil
import tempfile

import pytest

# RLlib (Ray 2.60) pins gymnasium 1.2.2: openenv_lab/rllib.py is tested in an environment of its own
# (tests/test_rllib.py); here its doctests are collected only where RLlib imports.
collect_ignore = [] if importlib.util.find_spec("tree") else ["openenv_lab/rllib.py"]  # tree: dm_tree

os.environ.setdefault("OPENENV_LAB_SMOKE", "1")
os.environ.setdefault("OPENENV_LAB_SOLUTIONS", "1")
# No progress bars in tests (the kernels nbval runs would otherwise show waits; tests that check them ask).
os.environ.setdefault("OPENENV_LAB_PROGRESS", "0")


#: The kernels' own temporary folder, made when the first notebook starts (see pytest_runtest_setup).
KERNELS_TMP: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """nbval starts a notebook's kernel while setting up its first cell, and stops it without running its
    finalizers: the kernel gets a temporary folder of its own, removed when the session ends, so what a
    notebook makes there (its ``TemporaryDirectory``) does not stay behind in the system's."""
    if item.path.suffix != ".ipynb":
        yield
        return
    if not KERNELS_TMP:
        KERNELS_TMP.append(tempfile.mkdtemp(prefix="openenv-lab-kernels-"))
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = KERNELS_TMP[0]
    yield
    if before is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = before


def pytest_sessionfinish(session: pytest.Session) -> None:
    for folder in KERNELS_TMP:
        shutil.rmtree(folder, ignore_errors=True)
