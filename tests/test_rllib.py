"""RLlib trains on our environments: PPO with two EnvRunners on a three-node Ray cluster against a Ray
fleet, for FinRL and for chess with legal-action masks (`openenv_lab.rllib`).

Ray 2.60's RLlib pins gymnasium 1.2.2, which the main test environment's gymnasium is not, so the
training runs in an environment of its own (``pip install -e ".[finrl,rllib]"`` with gymnasium 1.2.2;
.ci/run makes it) whose interpreter ``$OPENENV_LAB_RLLIB_PYTHON`` names: tests/rllib_check.py, whose one
``RESULT`` line this checks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import run_check_script

PYTHON = os.environ.get("OPENENV_LAB_RLLIB_PYTHON")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.skipif(
    not PYTHON,
    reason="NO RLLIB ENVIRONMENT: set OPENENV_LAB_RLLIB_PYTHON to the python of a venv with "
    '`pip install -e ".[finrl,rllib]"` (.ci/run makes one: RLlib pins gymnasium 1.2.2)',
)
def test_ppo_trains_on_finrl_and_on_masked_chess_over_a_ray_fleet():
    report = run_check_script(PYTHON, Path(__file__).parent / "rllib_check.py", timeout=840)
    assert report["doctest"]["failed"] == 0 and report["doctest"]["tried"] > 0
    assert "needs a Dict observation space" in report["unmasked_space_error"]
    for family in ("finrl", "chess"):
        run = report[family]
        assert run["env_steps"] >= 128, run  # one iteration's train batch was sampled
        assert run["runner_envs"] == ["OpenEnvVectorEnv"], run  # the plain id, our native vector env
        assert run["runner_nodes"] == 2, run  # one EnvRunner on each worker node
    readme = report["readme"]
    assert readme["returncode"] == 0, readme["stderr"]
    assert int(readme["stdout"].split()[-1]) >= 256, readme["stdout"]  # the guide's example trained
    legal = report["chess"]["legal"]
    assert legal["total"] >= 1000 and legal["legal"] == legal["total"], legal
