"""The CI's own machinery: `.ci/run`'s phase table (scripts/ci_phases.py), the README's commands it runs, and
the pytest-xdist grouping that keeps what cannot share a worker on one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import ci_phases  # noqa: E402

import conftest  # noqa: E402  (the root conftest.py: its worker groups)


def test_phases_are_read_in_the_order_they_started_and_a_torn_last_line_is_left_out(tmp_path):
    tsv = tmp_path / "phases.tsv"
    # b: CPU ticks not measured (no /proc/stat); d: measured; c: the run was killed while writing it
    tsv.write_text("b\t110\t400\t1\t-\t-\na\t100\t160\t0\nd\t120\t130\t0\t150\t200\nc\t12")
    phases = ci_phases.read(tsv)
    assert [(p.name, p.seconds, p.status, p.cpu_busy) for p in phases] == [
        ("a", 60, 0, None),
        ("b", 290, 1, None),
        ("d", 10, 0, 0.75),
    ]


def test_the_machines_cpu_ticks_are_read_as_the_ci_script_reads_them():
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat here")
    done = subprocess.run(
        ["bash", "-c", 'source <(sed -n "/^cpu_ticks() {/,/^}/p" .ci/run); cpu_ticks'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    busy, total = (int(value) for value in done.stdout.split())
    ours = ci_phases.cpu_ticks()
    assert ours is not None and 0 < busy <= total
    assert busy <= ours[0] and total <= ours[1]  # read a moment later: never less
    assert ours[1] - total < 100 * os.cpu_count()  # and of the same counters (within a second of ticks)


def test_the_table_says_when_each_phase_began_how_long_it_took_and_how_it_ended():
    phases = [
        ci_phases.Phase("venv: RLlib", 100, 190, 0),
        ci_phases.Phase("Colab tier", 101, 400, 1),
        ci_phases.Phase(ci_phases.TESTS, 400, 1600, 0),
    ]
    phases[2].cpu_busy = 0.964
    lines = ci_phases.table(phases, started=90, ended=1610, cpu_busy=0.9).splitlines()
    assert re.fullmatch(r"venv: RLlib +0:10 +1:30 +ok", lines[2])
    assert re.fullmatch(r"Colab tier +0:11 +4:59 +exit 1", lines[3])
    assert re.fullmatch(r"README's test command \(pytest\) +5:10 +20:00 +ok +96%", lines[4])
    assert re.fullmatch(r"before the tests +0:00 +5:10", lines[5])
    assert re.fullmatch(r"whole run +0:00 +25:20 +90%", lines[6])
    assert ci_phases.summary(phases, 90, 1610) == {
        "whole_run_s": 1520,
        "before_tests_s": 310,
        "tests_s": 1200,
    }


def test_a_run_that_never_reached_the_tests_has_no_test_time(tmp_path):
    tsv, out = tmp_path / "phases.tsv", tmp_path / "ci.json"
    tsv.write_text("wheel\t100\t110\t0\nvenv: RLlib\t110\t150\t2\n")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "ci_phases.py"),
            str(tsv),
            "--started",
            "95",
            "--cpu-started",
            "0 0",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "venv: RLlib" in done.stdout and "exit 2" in done.stdout
    data = json.loads(out.read_text())
    assert data["tests_s"] is None and data["before_tests_s"] == data["whole_run_s"]
    assert [phase["name"] for phase in data["phases"]] == ["wheel", "venv: RLlib"]
    assert data["phases"][1]["from_s"] == 15 and data["cpus"] >= 1
    if Path("/proc/stat").exists():  # since boot, against ticks of 0: a share all the same
        assert 0 < data["cpu_busy"] <= 1
    assert not list(tmp_path.glob(".*partial"))


def test_no_phases_is_an_error_that_names_the_file(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ci_phases.py"), str(tmp_path / "none.tsv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "none.tsv" in done.stderr


def test_the_readme_has_a_fast_tier_block_with_workers():
    match = ci_phases.FAST_TIER.search((ROOT / "README.md").read_text())
    assert match is not None
    assert re.fullmatch(r'\.venv/bin/python -m pytest tests -m "not slow" -n \d+', match.group(1))


def test_ci_records_a_failed_phase_and_still_prints_the_table(tmp_path):
    """`.ci/run`'s own helpers, sourced as they are: a phase that fails is recorded with its exit status,
    and the table is printed on the way out however the script ends."""
    source = (ROOT / ".ci" / "run").read_text()
    helpers = source[source.index("mkdir -p test-artifacts") : source.index("trap report_phases EXIT")]
    script = (
        "set -euo pipefail\ncd " + str(tmp_path) + "\nmkdir -p scripts\n"
        f"cp {ROOT / 'scripts' / 'ci_phases.py'} scripts/\n"
        + helpers
        + "trap report_phases EXIT\n"
        + 'timed "first" true\nin_background "second" bash -c "echo said; exit 3"\n'
        + 'waited second || echo "second failed"\ntimed "third" false\necho never\n'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--- second (exit 3)\nsaid\nsecond failed" in done.stdout and "never" not in done.stdout
    rows = [
        line.split("\t") for line in (tmp_path / "test-artifacts" / "ci-phases.tsv").read_text().splitlines()
    ]
    assert [(row[0], row[3]) for row in rows] == [("first", "0"), ("second", "3"), ("third", "1")]
    # The machine's CPU ticks over each phase: measured, though a phase shorter than a tick has no share.
    assert re.search(r"^third +0:\d\d +0:\d\d +exit 1( +\d+%)?$", done.stdout, re.M)
    assert all(len(row) == 6 and row[4].isdigit() and row[5].isdigit() for row in rows)
    assert (tmp_path / "test-artifacts" / "ci-phases.json").is_file()


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/launch/test_docker.py::test_launcher_arguments_are_checked", "docker"),
        ("tests/launch/test_ray_fleet.py::test_stop_leaves_no_actor_group_or_server_behind", "ray"),
        ("tests/test_rllib.py::test_ppo_trains_on_finrl_and_on_masked_chess_over_a_ray_fleet", "ray"),
        ("tests/test_benchmarks.py::test_the_ray_fleet_script_compares_a_ray_fleet_with_a_local_one", "ray"),
        ("tests/test_readme.py::test_every_other_example_runs[7-ray]", "ray"),
        ("tests/test_readme.py::test_every_other_example_runs[7]", None),
        (
            "tests/test_package.py::test_the_wheel_and_the_sdist_pass_twine_check_with_their_data_and_license",
            "checkout-build",
        ),
        (
            "tests/test_client_install.py::test_a_client_only_install_plays_remote_servers_and_names_what_an_embedded_one_needs",
            "checkout-build",
        ),
        ("tests/test_client_install.py::test_the_readme_names_every_package_of_the_client_install", None),
        (
            "tests/envs/test_official_suites.py::test_an_official_test_file_passes_against_its_official_server[test_websockets.py]",
            "solo",
        ),
        (
            "tests/envs/test_official_suites.py::test_an_official_test_file_passes_against_its_official_server[test_maze_environment.py]",
            "official-test-files",
        ),
        (
            "tests/servers/test_official_suite.py::test_the_official_websocket_tests_of_echo_pass_on_our_mcp_echo_server",
            "solo",
        ),
        ("notebooks/01_chess.ipynb::Cell 3", "notebooks/01_chess.ipynb"),
        ("tests/test_benchmarks.py::test_the_harness_runs_every_benchmark_and_writes_json", None),
        ("tests/test_machine.py::test_machine", None),
    ],
)
def test_what_cannot_share_a_worker_is_grouped_and_the_rest_is_not(nodeid, group):
    """Under ``-n N`` each group runs whole on one worker: a notebook's cells (one kernel), the Docker tests
    (shared images; prune), the Ray tests (one cluster at a time), the builds in the checkout, the official
    test files (fixed ports), and the tests that run alone. Everything else is free to go to any worker."""
    assert conftest.worker_group(nodeid) == group


@pytest.mark.slow
def test_every_grouped_test_exists():
    """A renamed test would silently leave its group: every start in the table matches a collected test."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    nodeids = [line for line in done.stdout.splitlines() if "::" in line]
    for start in conftest.WORKER_GROUPS:
        assert any(nodeid.startswith(start) for nodeid in nodeids), start
    assert any(conftest.worker_group(nodeid) == "ray" for nodeid in nodeids if "test_readme" in nodeid)
    units = {conftest.worker_group(nodeid) or nodeid.split("::", 1)[0] for nodeid in nodeids}
    missing = [unit for unit in conftest.LONGEST_FIRST if unit not in units]
    assert not missing, f"LONGEST_FIRST names units no test belongs to: {missing}"


@pytest.mark.slow
def test_a_group_runs_on_one_worker_and_each_module_on_one():
    """The scheduler as pytest-xdist runs it (three workers): the Docker tests that need no engine all on
    one worker, and each of two modules of no group whole on one of the others."""
    docker = [
        f"tests/launch/test_docker.py::{name}"
        for name in (
            "test_launcher_arguments_are_checked",
            "test_no_engine_is_one_clear_sentence",
            "test_without_the_sdk_the_error_says_what_to_install",
        )
    ]
    others = ["tests/test_machine.py", "tests/test_progress.py"]
    command = [sys.executable, "-m", "pytest", "-n", "3", "-v", "-p", "no:cacheprovider", *docker, *others]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    workers: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        found = re.match(r"\[(gw\d+)\] .*PASSED (\S+?)::", line)
        if found:
            workers.setdefault(found.group(2), set()).add(found.group(1))
    assert [len(workers[module]) for module in ("tests/launch/test_docker.py", *others)] == [1, 1, 1], workers
    assert len(set().union(*workers.values())) == 3, workers  # three units of work, three workers


@pytest.mark.slow
def test_the_longest_units_are_handed_out_first():
    """One worker, so the order it runs units in is the order they are handed out: the Docker group
    (in LONGEST_FIRST) before two modules of more tests, which pytest-xdist alone would hand out first."""
    docker = [
        f"tests/launch/test_docker.py::{name}"
        for name in ("test_launcher_arguments_are_checked", "test_no_engine_is_one_clear_sentence")
    ]
    others = ["tests/test_machine.py", "tests/test_progress.py"]
    command = [sys.executable, "-m", "pytest", "-n", "1", "-v", "-p", "no:cacheprovider", *others, *docker]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    ran = [m.group(1) for m in re.finditer(r"\[gw0\] .*PASSED (\S+?)::", done.stdout)]
    assert ran[:2] == ["tests/launch/test_docker.py"] * 2, ran
    assert "docker" in conftest.LONGEST_FIRST and len(ran) > 2 * len(docker)


SOLO_RUN = """
import json, os, time
import pytest

def spend(name):
    began = time.time()
    time.sleep(0.4)
    with open(os.environ["TIMES"], "a") as times:
        times.write(json.dumps([name, began, time.time()]) + "\\n")
"""


@pytest.mark.slow
def test_a_solo_test_runs_while_no_other_test_does(tmp_path):
    """Three workers, four modules of two ordinary tests and one module of two tests in the ``solo`` group
    (the root conftest.py's scheduler and hooks, the group added by a plugin of the test's own), all
    starting at once: the ordinary tests overlap one another, and none overlaps a solo one."""
    for index in range(4):
        body = "".join(f"\ndef test_{n}():\n    spend('{index}.{n}')\n" for n in range(2))
        (tmp_path / f"test_ordinary_{index}.py").write_text(SOLO_RUN + body)
    solo = "".join(f"\ndef test_alone_{n}():\n    spend('solo.{n}')\n" for n in range(2))
    (tmp_path / "test_solo.py").write_text(SOLO_RUN + solo)
    (tmp_path / "solo_setup.py").write_text(
        "import conftest\nconftest.WORKER_GROUPS['test_solo.py::'] = 'solo'\n"
    )
    times = tmp_path / "times.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "solo_setup",
            "-p",
            "conftest",
            "-n",
            "3",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}", "TIMES": str(times)},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    spans = {name: (began, ended) for name, began, ended in map(json.loads, times.read_text().splitlines())}
    assert len(spans) == 10, spans
    for name in ("solo.0", "solo.1"):
        alone = spans.pop(name)
        assert all(ended <= alone[0] or began >= alone[1] for began, ended in spans.values()), (alone, spans)
    ordered = sorted(spans.values())
    assert any(ordered[i + 1][0] < ordered[i][1] for i in range(len(ordered) - 1)), spans  # side by side


def test_the_readme_times_are_rendered_from_a_runs_phases():
    import render_benchmarks

    section = {
        "whole_run_s": 1500,
        "before_tests_s": 420,
        "tests_s": 1080,
        "fast_tier_s": 99,
        "phases": [
            {"name": "venv: README's install", "seconds": 150},
            {"name": ci_phases.TESTS, "seconds": 1080},
        ],
    }
    assert render_benchmarks.suite_times(section) == (
        "A clean clone's whole `.ci/run` took 25.0 min: 7.0 min to install every venv it tests with, side "
        "by side (the README's own install 2.5 min of it, the Colab tier's notebooks run meanwhile), then "
        "18.0 min for the test command above. The fast tier took 1.6 min."
    )
    del section["fast_tier_s"]
    assert render_benchmarks.suite_times(section).endswith("for the test command above.")


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--jobs", "0"], "--jobs must be at least 1, got 0"),
        (["--wheel", "/nowhere.whl"], "no wheel at /nowhere.whl"),
    ],
)
def test_the_colab_tier_refuses_bad_arguments_before_it_installs_anything(tmp_path, arguments, said):
    freeze = tmp_path / "pip-freeze.txt"
    freeze.write_text("ipywidgets==7.7.1\n")
    venv = tmp_path / "venv"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "colab_tier.py"),
            "--freeze",
            str(freeze),
            "--venv",
            str(venv),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.strip() == f"colab tier: {said}"
    assert not venv.exists()
