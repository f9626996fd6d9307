"""The benchmark scripts run (in their --quick mode) and report what they claim to measure.

They are never used to assert speed: timings on shared machines are too noisy for that.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


@pytest.mark.slow
def test_step_latency_quick(tmp_path):
    out = tmp_path / "latency.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "step_latency.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text())
    assert set(report["step"]) == {"ours (gym.make env)", "raw websockets", "official GenericEnvClient"}
    assert report["step"]["raw websockets"]["vs_raw"] == 1.0
    assert report["cold_make_s"] > 0 and report["warm_make_median_ms"] > 0
    assert "x raw" in completed.stdout


@pytest.mark.slow
def test_env_throughput_quick(tmp_path):
    out = tmp_path / "throughput.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "env_throughput.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text())
    assert set(report["atari_steps_per_s"]) == {
        "in-process ALE/Pong-v5",
        "openenv/atari, zlib frames",
        "openenv/atari, raw frames",
        "openenv/atari, JSON frames",
    }
    assert all(rate > 0 for rate in report["finrl_steps_per_s"].values())


@pytest.mark.slow
def test_the_harness_runs_everything_and_writes_json(tmp_path):
    out = tmp_path / "all.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "harness.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(out.read_text())
    assert {"step_latency", "vector_throughput", "env_throughput"} <= set(report)
    vector = report["vector_throughput"]["results"]
    assert set(vector) == {"echo", "chess"}
    row = vector["echo"]["4"]["make_vec (ours)"]
    assert row["steps_per_s"] > 0 and row["client_cpu_us_per_step"] > 0
    assert "server_cpu_us_per_step" in row  # /proc is there on the build machines
