"""The benchmark scripts run (in their --quick mode) and report what they claim to measure.

They are never used to assert speed: timings on shared machines are too noisy for that. One run of the
harness exercises all the scripts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def run(
    script: str, *args: str, json_path: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """Run ``benchmarks/<script>`` with ``args`` and ``--json json_path``; its output and its report."""
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args, "--json", str(json_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    return completed, json.loads(json_path.read_text())


@pytest.mark.slow
def test_the_harness_runs_every_benchmark_and_writes_json(tmp_path):
    completed, report = run("harness.py", "--quick", json_path=tmp_path / "all.json", timeout=900)
    assert "x raw" in completed.stdout and "ours/async" in completed.stdout

    latency = report["step_latency"]
    assert set(latency["step"]) == {
        "ours (gym.make env)",
        "ours (Session, no gym)",
        "raw websockets",
        "official GenericEnvClient",
    }
    assert latency["step"]["raw websockets"]["vs_raw"] == 1.0
    assert latency["cold_make_s"] > 0 and latency["warm_make_median_ms"] > 0

    vector = report["vector_throughput"]["results"]
    assert set(vector) == {"echo", "chess"}
    assert "ours/loop" in completed.stdout and vector["echo"]["4"]["make_vec (loop)"]["steps_per_s"] > 0
    row = vector["echo"]["4"]["make_vec (ours)"]
    assert row["steps_per_s"] > 0 and row["client_cpu_us_per_step"] > 0
    assert "server_cpu_us_per_step" in row  # psutil reads it on the build machines
    assert vector["chess"]["4"]["send/recv (ours)"]["steps_per_s"] > 0
    assert "send/recv (ours)" not in vector["echo"]["1"]  # nothing to overlap with one env

    throughput = report["env_throughput"]
    assert set(throughput["atari_steps_per_s"]) == {
        "in-process ALE/Pong-v5",
        "openenv/atari, screen deltas",
        "openenv/atari, zlib screens",
        "openenv/atari, raw screens",
        "openenv/atari, JSON screens",
        "openenv/echo: the round trip alone",
    }
    assert all(rate > 0 for rate in throughput["finrl_steps_per_s"].values())
    assert "openenv/echo: the round trip alone" in throughput["finrl_steps_per_s"]
    assert "openenv/finrl, make_vec of 16" in throughput["finrl_steps_per_s"]
    assert 0 < throughput["ceilings"]["atari_vs_in_process"] < 1
    assert 0 < throughput["ceilings"]["finrl_vs_environment_class"] < 1

    fleet = report["fleet"]["results"]["chess"]
    assert set(fleet["throughput"]) == {"1", "2"}
    assert all(row["steps_per_s"] > 0 for row in fleet["throughput"].values())
    assert set(fleet["start_to_first_step_s"]) == {"1", "2"} and "vs one server" in completed.stdout

    # The ceilings script runs here only: a run of its own would take CI as long again.
    check_ceilings(report["ceilings"], completed.stdout)


@pytest.mark.slow
def test_the_soak_script_reports_steps_errors_memory_and_slowloris(tmp_path):
    args = ("--quick", "--minutes", "0.1", "--families", "echo,chess")
    _, report = run("soak.py", *args, json_path=tmp_path / "soak.json", timeout=300)
    assert set(report["soak"]) == {"echo", "chess"}
    for row in report["soak"].values():
        assert row["steps"] > 0 and row["errors"] == 0, row["first_error"]
        assert row["reopened"] >= 1 and row["server_rss_mib_at_end"] > 0
    assert report["slowloris"]["idle_connections"] == 50 and report["slowloris"]["ratio"] > 0


@pytest.mark.slow
def test_the_fuzz_script_counts_both_directions(tmp_path):
    completed, report = run("fuzz.py", "--examples", "3", json_path=tmp_path / "fuzz.json", timeout=600)
    assert "chess /ws/batch" in report["server"] and "atari POST /step" in report["server"]
    assert report["server_examples"] >= 3 * len(report["server"])
    assert set(report["client"]) == {"single env", "vector env, /ws/batch", "vector env, /ws"}
    assert "no property failed" in completed.stdout


@pytest.mark.slow
def test_the_sb3_script_compares_ours_with_dummy_and_subproc(tmp_path):
    _, report = run("sb3_rollouts.py", "--quick", json_path=tmp_path / "sb3.json", timeout=600)
    for rows in report["families"].values():
        assert set(rows) == {"openenv_lab.sb3", "DummyVecEnv", "SubprocVecEnv"}
        assert rows["SubprocVecEnv"]["step_vs_subproc"] == 1.0
        assert all(row["step_per_s"] > 0 and row["learn_per_s"] > 0 for row in rows.values())
        ceiling = rows["openenv_lab.sb3"]["server_ceiling_per_s"]  # None: too few steps to tick the CPU clock
        assert ceiling is None or ceiling > rows["SubprocVecEnv"]["step_per_s"] / 100


@pytest.mark.slow
def test_the_ray_fleet_script_compares_a_ray_fleet_with_a_local_one(tmp_path):
    pytest.importorskip("ray")
    completed, report = run("ray_fleet.py", "--quick", json_path=tmp_path / "ray_fleet.json", timeout=300)
    row = report["results"]["echo"]
    assert row["ray_nodes_used"] == 2  # one replica per worker node
    assert row["steps_per_s"]["ray"] > 0 and row["steps_per_s"]["local"] > 0
    assert row["ray_vs_local"] == row["steps_per_s"]["ray"] / row["steps_per_s"]["local"]
    assert "Ray/local" in completed.stdout


@pytest.mark.slow
def test_the_trl_tools_script_puts_a_tool_call_beside_a_generation(tmp_path):
    args = ("--calls", "3", "--turns", "1", "--tokens", "4")
    completed, report = run("trl_tools.py", *args, json_path=tmp_path / "trl_tools.json", timeout=300)
    assert report["environment"]["tool_call_s"] > 0 and report["environment"]["reset_s"] > 0
    share = report["environment_share"]["smoke model (CPU)"]
    seconds = report["generation_s"]["smoke model (CPU)"]
    assert share == report["environment"]["tool_call_s"] / (report["environment"]["tool_call_s"] + seconds)
    assert "environment share" in completed.stdout


def check_ceilings(report: dict[str, Any], stdout: str) -> None:
    """``benchmarks/ceilings.py``'s report (one --quick round): each target beside its ceiling and its raw
    pair, the transport, and the server's and client's breakdowns, each figure made of the named rows."""
    rates = {name: row["steps_per_s"] for name, row in report["rates"].items()}
    # Each target's raw pair: its family's raw server and client, the raw client's empty round trip of the
    # same shape (its own ceiling), and the same client on our server (the split of ours vs raw).
    shapes = {
        "Pong, one env": ("atari", "one env", "ALE/Pong-v5 in process"),
        "FinRL, one env": ("finrl", "one env", "FinRL class"),
        "FinRL, make_vec 16": ("finrl", "16 steps a message", "FinRL class"),
        "chess, make_vec 16": ("chess", "16 steps a message", "chess class"),
    }
    assert set(report["targets"]) == set(shapes)
    for name, row in report["targets"].items():
        assert row["of_ceiling"] == row["steps_per_s"] / row["ceiling_per_s"] and 0 < row["target"] < 1
        assert row["vs_raw"] == row["steps_per_s"] / row["raw_per_s"]  # the raw server played the same env
        assert row["raw_of_ceiling"] == row["raw_per_s"] / row["ceiling_per_s"]
        family, shape, work = shapes[name]
        assert row["raw_per_s"] == rates[f"raw {family}, {shape}"]
        trip = rates[f"raw echo, {shape}"]
        assert row["raw_ceiling_per_s"] == pytest.approx(1 / (1 / rates[work] + 1 / trip))
        assert row["raw_of_raw_ceiling"] == row["raw_per_s"] / row["raw_ceiling_per_s"]
        same_client = rates[f"raw client, our server: {family}, {shape}"]
        assert row["servers_same_client"] == same_client / row["raw_per_s"]
        assert row["clients_same_server"] == row["steps_per_s"] / same_client
        # One round (--quick): its shares are the medians', so the rounds' lowest and highest are those.
        assert row["of_ceiling_rounds"] == pytest.approx([row["of_ceiling"]] * 2)
        assert row["raw_of_raw_ceiling_rounds"] == pytest.approx([row["raw_of_raw_ceiling"]] * 2)
    transport = report["transport"]
    assert transport["vs_raw"] == transport["echo_make_vec_per_s"] / transport["raw_batched_per_s"]
    ours_batched = rates["raw client, our server: echo, 16 steps a message"]
    assert transport["servers_same_env"] == ours_batched / rates["raw echo-env, 16 steps a message"]
    raw_batched = rates["raw websockets, 16 steps a message"]
    assert transport["raw_echo_env_of_raw"] == rates["raw echo-env, 16 steps a message"] / raw_batched
    assert transport["vs_raw_rounds"] == pytest.approx([transport["vs_raw"]] * 2)
    assert transport["raw_echo_env_of_raw_rounds"] == pytest.approx([transport["raw_echo_env_of_raw"]] * 2)
    for family in ("echo", "finrl", "chess", "atari"):  # the raw client played our servers too
        assert report["rates"][f"raw client, our server: {family}, one env"]["steps_per_s"] > 0
    assert set(report["server_breakdown_us"]) == {"echo", "chess", "atari", "finrl"}
    for row in report["server_breakdown_us"].values():
        keys = ("env_us", "serialisation_us", "transport_us", "out_of_process_us", "framework_us")
        assert sum(row[key] for key in keys) == pytest.approx(row["server_cpu_us"])
        # The raw server's CPU is read from a clock of 10 ms ticks: a quick run may read 0.
        assert row["out_of_process_us"] >= 0 and row["raw_server_cpu_us"] >= 0
    for name, family in (("echo", "echo"), ("openenv/finrl", "finrl"), ("openenv/chess", "chess")):
        # The stages' client beside the raw client playing the same (our) server.
        raw_client = report["rates"][f"raw client, our server: {family}, 16 steps a message"]
        assert (
            report["raw_client_on_our_server_cpu_us"][f"{name}, make_vec 16"] == raw_client["client_cpu_us"]
        )
    for stages in report["client_breakdown_us"].values():  # each stage timed where it runs
        assert all(us >= 0 for us in stages.values()) and stages["adapters: JSON to arrays"] > 0
        assert stages["batched infos"] > 0 and stages["requests: JSON, framing, sent"] > 0
        assert stages["replies: read from the socket"] > 0
    assert "Against the ceiling" in stdout and "against their own ceiling" in stdout


@pytest.mark.slow
def test_the_evaluation_script_compares_evaluate_with_a_loop(tmp_path):
    _, report = run(
        "evaluation_throughput.py", "--quick", json_path=tmp_path / "evaluation.json", timeout=300
    )
    assert report["vs_loop"]["loop over a single env"] == 1.0
    assert all(rate > 0 for rate in report["episodes_per_s"].values())


@pytest.mark.slow
def test_the_install_script_reports_the_largest_dependencies(tmp_path):
    _, report = run("install_cost.py", "--quick", json_path=tmp_path / "install.json", timeout=300)
    row = report["installs"]["this environment"]
    assert len(row["largest"]) == 5 and row["largest"][0]["mib"] >= row["largest"][-1]["mib"]
    assert row["import_s"] > 0 and row["first_observation_s"] > 0


@pytest.mark.slow
def test_the_notebook_memory_script_samples_the_kernel_and_its_servers(tmp_path):
    _, report = run("notebook_memory.py", "--quick", json_path=tmp_path / "memory.json", timeout=300)
    (row,) = report["notebooks"]
    smoke = row["smoke"]
    # The lesson starts an embedded echo server: the kernel and its server process tree, not the kernel alone.
    assert smoke["processes"] >= 2 and 100 < smoke["peak_mib"] < report["binder_mib"]
    assert smoke["cut_cells"] == [] and report["commit"] and report["cpus"] >= 1


def test_a_target_reads_met_then_reachable_then_above_and_every_verdict_has_its_words():
    saved = list(sys.path)
    sys.path[:0] = [str(BENCHMARKS), str(BENCHMARKS.parent / "scripts")]
    try:
        import render_benchmarks
        from reach import reach, target_reach
    finally:
        sys.path[:] = saved
    assert reach(ours=0.9, raw=0.1, target=0.9) == "met"  # ours at the target meets it, whatever raw does
    assert reach(ours=0.89, raw=0.9, target=0.9) == "reachable"
    assert reach(ours=0.89, raw=0.89, target=0.9) == "above"
    # A run's rounds on both sides of the target: at the edge, whichever side the median fell on.
    assert reach(ours=0.6, raw=0.84, target=0.9, raw_rounds=(0.74, 0.94)) == "edge"
    assert reach(ours=0.6, raw=0.5, target=0.9, raw_rounds=(0.5, 0.9)) == "edge"  # a round at the target
    assert reach(ours=0.6, raw=0.95, target=0.9, raw_rounds=(0.9, 0.99)) == "reachable"
    assert reach(ours=0.6, raw=0.85, target=0.9, raw_rounds=(0.8, 0.89)) == "above"
    assert reach(ours=0.92, raw=0.5, target=0.9, ours_rounds=(0.88, 0.95)) == "edge"
    assert reach(ours=0.92, raw=0.5, target=0.9, ours_rounds=(0.9, 0.95)) == "met"
    assert reach(ours=0.92, raw=0.5, target=0.9, ours_rounds=(0.9, 0.95), raw_rounds=(0.4, 0.95)) == "met"
    assert set(render_benchmarks._REACH_COLUMN) == {"met", "reachable", "edge", "above"}
    # Rows as a report holds them: each share with its rounds' lowest and highest.
    row = {"of_ceiling": 0.6, "of_ceiling_rounds": [0.55, 0.65], "raw_of_raw_ceiling": 0.84, "target": 0.9}
    assert target_reach({**row, "raw_of_raw_ceiling_rounds": [0.74, 0.94]}) == "edge"
    assert target_reach({**row, "raw_of_raw_ceiling_rounds": [0.8, 0.88]}) == "above"

    def transport(ours: float, raw: float, raw_rounds: list[float]) -> dict[str, Any]:
        return {
            "vs_raw": ours,
            "vs_raw_rounds": [ours, ours],
            "raw_echo_env_of_raw": raw,
            "raw_echo_env_of_raw_rounds": raw_rounds,
            "target": 0.8,
        }

    assert "ours meets" in render_benchmarks._echo_env_reach(transport(0.8, 0.5, [0.5, 0.5]))
    assert "within reach" in render_benchmarks._echo_env_reach(transport(0.3, 0.85, [0.85, 0.85]))
    assert "above this machine" in render_benchmarks._echo_env_reach(transport(0.3, 0.5, [0.5, 0.5]))
    edge = render_benchmarks._echo_env_reach(transport(0.3, 0.78, [0.7, 0.85]))
    assert "at the edge" in edge and "(rounds 0.70-0.85)" in edge


def test_a_share_is_the_median_of_the_rounds_own_shares_with_its_lowest_and_highest():
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import ceilings
    finally:
        sys.path[:] = saved

    class Rates(dict):  # steps per second by measurement: 1,000 for every one the test does not set
        def __missing__(self, name: str) -> float:
            return 1000.0

    # FinRL make_vec 16 against its ceiling (its class, and echo make_vec 16), round by round: shares 0.2,
    # 0.6 and 1.6. The medians' own ratio (result 200 of a ceiling from 1,000 and 1,000) would say 0.4.
    rounds = [
        Rates({"openenv/finrl, make_vec 16": 100.0}),
        Rates({"openenv/finrl, make_vec 16": 300.0}),
        Rates({"openenv/finrl, make_vec 16": 200.0, "FinRL class": 250.0, "echo, make_vec 16": 250.0}),
    ]
    targets, transport = ceilings.summarise(rounds)
    finrl = targets["FinRL, make_vec 16"]
    assert finrl["of_ceiling"] == pytest.approx(0.6)
    assert finrl["of_ceiling_rounds"] == pytest.approx([0.2, 1.6])
    assert finrl["steps_per_s"] == 200.0  # each figure the median of its rounds
    # The raw pair: 1,000 steps/s of a ceiling from its class and its own echo trip (1,000): 500, or 200.
    assert finrl["raw_of_raw_ceiling_rounds"] == pytest.approx([2.0, 5.0])
    # The transport: echo make_vec 16 of the raw baseline's 1,000, round by round 1, 1 and 0.25.
    assert transport["vs_raw"] == 1.0 and transport["vs_raw_rounds"] == [0.25, 1.0]


@pytest.mark.slow
def test_the_levers_script_measures_each_lever_beside_its_alternative(tmp_path):
    _, report = run("levers.py", "--quick", json_path=tmp_path / "levers.json", timeout=600)
    for family in ("echo", "finrl", "chess"):
        parsers = report["parsers_us_per_env"][family]
        assert {"pydantic", "orjson", "json", "scan for 19+ digits"} == set(parsers)
        assert all(us > 0 for us in parsers.values())
        beyond = report["beyond_the_wire_us_per_env"][family]
        parts = ("decode", "batched infos", "observations batched")
        assert beyond["ours, together"] == pytest.approx(sum(beyond[k] for k in parts))
        assert beyond["gymnasium SyncVectorEnv, the same transitions"] > 0
    # Why orjson is not the client's parser: an integer beyond 64 bits comes back a float.
    assert report["orjson_on_a_big_integer"] == "-9.223372036854776e+18"
    decoding = set(report["batch_decoding_us_per_env"])
    assert decoding == {"one np.asarray per env", "one np.array for the batch"}
    assert len(report["n_one"]) == 4 and all(row["steps_per_s"] > 0 for row in report["n_one"].values())
    cold = report["cold_start"]
    assert 0 < cold["import openenv_lab_s"] < cold["embedded echo server start_s"]


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("OPENENV_LAB_RESEARCH_PYTHON"),
    reason="NO RESEARCH ENVIRONMENT: set OPENENV_LAB_RESEARCH_PYTHON (.ci/run makes .venv-research)",
)
def test_the_research_libraries_benchmark_measures_each_library_over_ours_and_ales(tmp_path):
    path = tmp_path / "libraries.json"
    completed = subprocess.run(
        [
            os.environ["OPENENV_LAB_RESEARCH_PYTHON"],
            str(BENCHMARKS / "libraries.py"),
            "--quick",
            "--json",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    report = json.loads(path.read_text())
    rates = report["steps_per_s"]
    assert set(rates) == {
        "gymnasium SyncVectorEnv",
        "gymnasium AsyncVectorEnv",
        "gym.make_vec (ours)",
        "Stable-Baselines3 DummyVecEnv",
        "TorchRL GymEnv(num_envs)",
        "Tianshou Collector, SubprocVectorEnv",
    }
    for library, row in rates.items():
        assert set(row) == {
            "openenv/Breakout-ram-v5",
            "ALE/Breakout-v5, RAM",
            "openenv/finrl",
            "openenv/chess",
        }
        for env_id, rate in row.items():
            if library == "gym.make_vec (ours)" and env_id.startswith("ALE/"):
                assert rate is None  # ALE's own vector env preprocesses: not the same work
            else:
                assert rate > 0, (library, env_id)


def quick_report(script: str, folder: Path) -> dict:
    """The JSON report of ``benchmarks/<script> --quick``, which must exit 0."""
    path = folder / "report.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    return json.loads(path.read_text())


@pytest.mark.slow
def test_the_isolation_benchmark_measures_threads_against_inline_steps_for_each_family(tmp_path):
    rows = quick_report("isolation.py", tmp_path)["rows"]
    assert set(rows) == {
        f"{family}, {n}" for family in ("echo", "finrl", "chess") for n in ("16 envs", "1 env")
    }
    for row in rows.values():
        assert row["threads_steps_per_s"] > 0 and row["inline_steps_per_s"] > 0
        assert row["threads_over_inline"] == pytest.approx(
            row["threads_steps_per_s"] / row["inline_steps_per_s"], rel=0.01
        )
        assert row["no_limit_steps_per_s"] > 0  # worker threads without the step time limit's timer
        assert row["threads_over_no_limit"] == pytest.approx(
            row["threads_steps_per_s"] / row["no_limit_steps_per_s"], rel=0.01
        )


@pytest.mark.slow
def test_the_recording_benchmark_times_saves_and_memory_from_first_to_last(tmp_path):
    report = quick_report("recording.py", tmp_path)
    assert set(report["rows"]) == {
        f"{run}, {n}" for run in ("chess", "Atari screens") for n in ("1 env", "16 envs")
    }
    for row in report["rows"].values():
        assert row["episodes"] >= report["episodes"] and len(row["buckets"]) == report["episodes"] // 100
        assert row["first_save_ms"] > 0 and row["last_save_ms"] > 0 and row["first_rss_mb"] > 0
        assert row["median_last_over_first"] > 0 and row["buckets"][0]["median_save_ms_per_episode"] > 0
        assert row["save_last_over_first"] == pytest.approx(
            row["last_save_ms"] / row["first_save_ms"], rel=0.02
        )
