"""Settings for every test run, including the notebooks and tutorials that nbval executes.

Notebooks run in their smoke mode (tiny budgets, the same code path) and tutorials load their reference
solutions, so CI checks that the exercises' checks pass with correct answers. Kernels inherit these.
"""

import contextlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; `solo` tests then share the machine like the rest.
    fcntl = None  # type: ignore[assignment]

# RLlib (Ray 2.60) pins gymnasium 1.2.2: openenv_lab/rllib.py is tested in an environment of its own
# (tests/test_rllib.py); here its doctests are collected only where RLlib imports.
collect_ignore = [] if importlib.util.find_spec("tree") else ["openenv_lab/rllib.py"]  # tree: dm_tree

os.environ.setdefault("OPENENV_LAB_SMOKE", "1")
os.environ.setdefault("OPENENV_LAB_SOLUTIONS", "1")
# The course's checks stop an answer after 60 s on a student's machine; CI's workers share two cores.
os.environ.setdefault("OPENENV_LAB_CHECK_SECONDS", "600")
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


#: The group of the tests that run alone (see `WORKER_GROUPS`).
SOLO = "solo"

#: Tests that must share one pytest-xdist worker, by the start of their node ids: the Docker tests (the
#: images their module builds; ``prune`` removes every container of ours on the engine), the Ray tests (one
#: cluster at a time), the builds in the checkout (setuptools writes egg-info and build/ there), and the
#: official test files (they start servers on fixed ports: 8100-8102, 8200-8201). Each notebook is a group of
#: its own too (its cells share one kernel).
WORKER_GROUPS = {
    # Tests that run alone, while no other test runs on any worker (`taking_turns`), handed out last: each
    # server an official test_websockets.py starts has 10 s to answer, and when one misses that the file
    # reads the running server's stderr to its end and hangs. A start (openenv and gradio imports, 3-4 s
    # on an idle core) misses it on two cores shared by three workers.
    "tests/envs/test_official_suites.py::test_an_official_test_file_passes_against_its_official_server"
    "[test_websockets.py]": SOLO,
    "tests/servers/test_official_suite.py::test_the_official_websocket_tests_of_echo_pass_on_our_mcp_echo"
    "_server": SOLO,
    "tests/launch/test_docker.py::": "docker",
    "tests/launch/test_ray_fleet.py::": "ray",
    "tests/test_rllib.py::": "ray",
    "tests/test_benchmarks.py::test_the_ray_fleet_script": "ray",
    "tests/test_readme.py::test_every_other_example_runs[": None,  # below: only the ids that say "ray"
    "tests/test_package.py::": "checkout-build",
    "tests/test_client_install.py::test_a_client_only_install": "checkout-build",
    "tests/envs/test_official_suites.py::": "official-test-files",
    "tests/servers/test_official_suite.py::": "official-test-files",
}


#: The work units (groups, or modules of no group) that take longest, longest first, as measured in a full
#: run on the 2-core CI machine under -n 3 (from a few to ten minutes of worker time each). They are handed
#: out first, so that they overlap the many short units instead of ending the run alone while the other
#: workers idle; the rest follow in pytest-xdist's own order (most tests first). Only the order matters: a
#: unit missing here merely starts later. (`tests/test_ci.py` checks that each names collected tests.)
LONGEST_FIRST = (
    "ray",
    "tests/envs/test_official_envs.py",
    "tests/test_other_pythons.py",
    "tests/test_benchmarks.py",
    "docker",
    "tests/test_research_libraries.py",
    "checkout-build",
    "tests/widgets/test_browser.py",
    "tests/test_readme.py",
    "tests/servers/test_chess_tasks.py",
    "official-test-files",
)


def worker_group(nodeid: str) -> str | None:
    """The group whose tests one worker runs whole, or None for a test free to run on any worker."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    for start, group in WORKER_GROUPS.items():
        if nodeid.startswith(start):
            return group or ("ray" if nodeid.endswith("-ray]") else None)
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """With ``-n N`` (the README's test command), each test module goes whole to whichever worker is free,
    and so does each group of `worker_group`. (pytest-xdist's own ``loadgroup`` reads ``xdist_group``
    marks through node ids that pytest 9.2 no longer lets it change: pytest-xdist issue 1386.)"""
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            # A module's tests stay together too: its module-scoped servers then start once, not per worker.
            return worker_group(nodeid) or nodeid.split("::", 1)[0]

        def _assign_work_unit(self, node: Any) -> None:
            if not getattr(self, "_longest_first", False):  # once, before the first unit is handed out
                self._longest_first = True
                rank = {unit: place for place, unit in enumerate(LONGEST_FIRST)}
                units = sorted(self.workqueue.items(), key=lambda unit: rank.get(unit[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
            # The tests that run alone go last: early on, every other worker would idle while they wait for
            # the tests in flight to end and then run; at the end there is little left to wait for.
            if next(iter(self.workqueue), None) == SOLO and len(self.workqueue) > 1:
                self.workqueue.move_to_end(SOLO)
            super()._assign_work_unit(node)

    return Grouped(config, log)


@contextlib.contextmanager
def taking_turns(folder: Path, solo: bool) -> Iterator[None]:
    """Hold the machine for one test: shared by any number of ordinary tests, whole for a ``solo`` one.

    Two advisory locks in ``folder``, which every worker of the run sees. ``room`` is held shared by each
    ordinary test while it runs and whole by a solo one. ``door`` keeps a solo test from waiting forever
    behind a stream of ordinary ones: a solo test holds it whole while it waits for the room to empty,
    and an ordinary test passes through it (takes and drops it, shared) before it enters the room.
    """
    if fcntl is None:
        yield
        return
    with open(folder / "door.lock", "a") as door, open(folder / "room.lock", "a") as room:
        if solo:
            fcntl.flock(door, fcntl.LOCK_EX)
            fcntl.flock(room, fcntl.LOCK_EX)
        else:
            fcntl.flock(door, fcntl.LOCK_SH)
            fcntl.flock(door, fcntl.LOCK_UN)
            fcntl.flock(room, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            fcntl.flock(door, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under ``-n N``, a test of the `SOLO` group runs with no other test running on any worker; the
    others run side by side."""
    basetemp = item.config.getoption("basetemp", None)
    if "PYTEST_XDIST_WORKER" not in os.environ or not basetemp:
        yield
        return
    # pytest-xdist gives each worker a folder in the run's own: that one is shared by all of them.
    with taking_turns(Path(basetemp).parent, solo=worker_group(item.nodeid) == SOLO):
        yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    for folder in KERNELS_TMP:
        shutil.rmtree(folder, ignore_errors=True)
