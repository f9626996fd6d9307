"""TorchRL, Tianshou and RL Zoo run our ids through their own vector machinery, across episode ends; Minari's
DataCollector records them.

Tianshou 2.0 pins pandas below 3, which the main test environment's is not, so the loops run in a venv
of their own (``pip install "openenv-lab[atari,finrl]" torchrl tianshou rl_zoo3``; .ci/run makes it)
whose interpreter ``$OPENENV_LAB_RESEARCH_PYTHON`` names: tests/research_check.py, one library per test,
whose ``RESULT`` line these check.

What each library cannot do, and why (asserted below where it shows):

- TorchRL's batched ``GymEnv(id, num_envs=N)`` reads infos of numbers only (its info reader types each
  key from a first value; text has no dtype there), so those envs are made with ``text_info=False``; a
  ``ParallelEnv`` of single ``GymEnv``s reads no infos and takes the default. TorchRL's batched envs do
  not batch text actions, so echo runs as a single ``GymEnv``.
- Tianshou's policies take no text actions: echo's collector samples its action space itself
  (``collect(random=True)``), as it does for Atari, FinRL and echo alike.
- RL Zoo: Breakout's RAM and FinRL. Its algorithms take no action masks and Stable-Baselines3 no text
  actions, so not chess (an unmasked agent's illegal moves change nothing: its games do not end) or echo.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import run_check_script

PYTHON = os.environ.get("OPENENV_LAB_RESEARCH_PYTHON")
ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(700),
    pytest.mark.skipif(
        not PYTHON,
        reason="NO RESEARCH ENVIRONMENT: set OPENENV_LAB_RESEARCH_PYTHON to the python of a venv with "
        '`pip install -e ".[atari,finrl]" torchrl tianshou rl_zoo3 "minari[create,arrow]"` '
        "(.ci/run makes one)",
    ),
]


FAMILY_IDS = {"chess": "openenv/chess", "atari": "openenv/Breakout-ram-v5", "finrl": "openenv/finrl"}


def run(library: str) -> dict:
    return run_check_script(PYTHON, ROOT / "tests" / "research_check.py", library, timeout=660)


def test_torchrl_gymenv_parallelenv_and_a_collector_cross_episode_ends():
    report = run("torchrl")
    for family in ("chess", "atari", "finrl"):
        loops = report[family]
        assert loops["batched_ends"] >= 2 and loops["collected_ends"] >= 2, loops
        assert loops["collected"] == 480, loops
        keys = set(loops["batched_info_keys"])
        assert {"seed", "reward_missing"} <= keys, keys  # our infos, stacked into the TensorDict
    assert report["chess"]["illegal"] == 0  # the Q-network's choices honoured the mask
    assert "illegal_move" in report["chess"]["batched_info_keys"]
    assert {"lives", "episode_frame_number"} <= set(report["atari"]["batched_info_keys"])
    assert {"reward_components_market", "holdings"} <= set(report["finrl"]["batched_info_keys"])
    assert report["echo"]["single_ends"] >= 2, report["echo"]


def test_tianshou_collectors_fill_its_buffer_and_its_trainer_trains_dqn():
    report = run("tianshou")
    for family in ("chess", "atari", "finrl", "echo"):
        for kind in ("dummy", "subproc"):
            loops = report[family][kind]
            assert loops["steps"] >= 600 and loops["episodes"] >= 1, (family, kind, loops)
    # Every key of our infos reached the buffer (Tianshou refuses NaNs there: a None would have stopped it).
    assert {"fen", "end_reason", "illegal_move"} <= set(report["chess"]["dummy"]["info_keys"])
    assert {"date", "end_reason", "reward_components"} <= set(report["finrl"]["subproc"]["info_keys"])
    dqn = report["dqn"]
    assert dqn["env_steps"] >= 400 and dqn["gradient_steps"] > 0 and dqn["episodes"] >= 2, dqn
    assert dqn["q_finite"], dqn


def test_rl_zoo_trains_on_our_ids_with_gym_packages():
    report = run("rl_zoo")
    assert set(report) == {"ppo openenv/Breakout-ram-v5", "ppo openenv/finrl"}
    for name, run_ in report.items():
        assert run_["returncode"] == 0, run_["output"]
        assert run_["episodes"] >= 2, (name, run_["episodes"], run_["output"])  # its Monitor logged ends
        assert len(run_["models"]) == 1 and run_["models"][0].endswith(".zip"), run_["models"]


def test_minaris_data_collector_records_our_infos_and_loads_them_back():
    report = run("minari")
    for family in ("chess", "atari", "finrl"):
        collected = report[family]
        assert collected["episodes"] == 2 and collected["steps"] >= 2, collected
        assert collected["info_lengths_match"], collected  # one info per observation, every step alike
        assert collected["env_id"] == FAMILY_IDS[family]
    assert {"fen", "illegal_move", "end_reason"} <= set(report["chess"]["info_keys"])
    assert {"lives", "episode_frame_number"} <= set(report["atari"]["info_keys"])
    assert {"date", "portfolio_value", "reward_components"} <= set(report["finrl"]["info_keys"])
