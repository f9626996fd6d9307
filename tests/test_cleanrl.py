"""CleanRL's single-file agents, unmodified, on our ids, as a researcher runs them.

The scripts are CleanRL's own (``shared/clients/cleanrl-fe8d8a0`` beside this checkout, or
``$OPENENV_LAB_CLIENTS``; never copied into the project): ``python ppo.py --env-id openenv_lab:openenv/...``,
which imports the package through gymnasium's ``module:id`` form and builds gymnasium's own
``SyncVectorEnv`` of ``RecordEpisodeStatistics`` envs over it. A ``sitecustomize`` on the path only
watches: it writes a line each time one of those wrappers sees an episode end, so the test knows the run
crossed episode ends (the scripts print episodes only under gymnasium 0.29's ``final_info``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

COMMIT = "fe8d8a0"
HERE = Path(__file__).resolve().parent

WATCHER = """
import os
import gymnasium as gym

_step = gym.wrappers.RecordEpisodeStatistics.step


def step(self, action):
    result = _step(self, action)
    if result[2] or result[3]:
        with open(os.environ["EPISODES"], "a") as episodes:
            episodes.write(f"{self.unwrapped.spec.id} {self.episode_count}\\n")
    return result


gym.wrappers.RecordEpisodeStatistics.step = step
"""


def clients() -> Path:
    """CleanRL's scripts; skipped where they are not (failed where ``$OPENENV_LAB_CLIENTS`` names them)."""
    given = os.environ.get("OPENENV_LAB_CLIENTS")
    candidates = [Path(given)] if given else []
    candidates += [parent / "shared" / "clients" for parent in HERE.parents]
    for candidate in candidates:
        if (candidate / f"cleanrl-{COMMIT}" / "ppo.py").is_file():
            return candidate / f"cleanrl-{COMMIT}"
    if given:
        pytest.fail(f"OPENENV_LAB_CLIENTS={given} has no cleanrl-{COMMIT}/ppo.py")
    pytest.skip("CleanRL's scripts are not beside this checkout (set OPENENV_LAB_CLIENTS)")


def installed(module: str) -> None:
    """Skip unless ``module`` is installed: looked up, not imported here (the script imports it in its own
    process). Importing tyro in a test worker can fail: at import it hashes every value of ``builtins``,
    and a doctest run before in the same worker leaves its last value there as ``_`` (a tuple of lists is
    unhashable)."""
    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        found = None
    if found is None:
        pytest.skip(f"{module} is not installed (it comes with the dev extra)")


def run_script(script: str, tmp_path: Path, *arguments: str) -> tuple[str, list[str]]:
    """Run one of CleanRL's scripts from its folder's copy, in ``tmp_path`` (its ``runs/`` go there); its
    output and the episode ends the watcher saw."""
    installed("tyro")
    installed("torch.utils.tensorboard")
    watcher = tmp_path / "watcher"
    watcher.mkdir()
    (watcher / "sitecustomize.py").write_text(WATCHER)
    episodes = tmp_path / "episodes.txt"
    done = subprocess.run(
        [sys.executable, str(clients() / script), *arguments],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(watcher), "EPISODES": str(episodes)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, episodes.read_text().splitlines() if episodes.exists() else []


def test_ppo_trains_on_an_atari_ram_id_across_episode_ends(tmp_path):
    """``ppo.py`` takes only an id: ``openenv/Breakout-ram-v5`` gives it RAM observations (``Box(128,)``)
    and ALE's v5 settings, as ``ALE/Breakout-ram-v5`` would. Two envs of 512 steps each: Breakout's
    random episodes are shorter than that."""
    stdout, ends = run_script(
        "ppo.py",
        tmp_path,
        "--env-id",
        "openenv_lab:openenv/Breakout-ram-v5",
        "--total-timesteps",
        "1024",
        "--num-envs",
        "2",
        "--num-steps",
        "512",
        "--num-minibatches",
        "4",
        "--update-epochs",
        "1",
        "--seed",
        "1",
    )
    assert "SPS:" in stdout  # an update ran
    assert len(ends) >= 2 and {end.split()[0] for end in ends} == {"openenv/Breakout-ram-v5"}, ends
    assert any((tmp_path / "runs").iterdir())  # its TensorBoard logs, where it writes them
