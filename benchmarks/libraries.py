"""Steps per second each research library gets over our envs, beside the same library over ALE's.

Each library drives N envs through its own vector machinery with random actions: the collection path a
training run pays for, without the learning. Over ``openenv/Breakout-ram-v5`` (our Atari server,
embedded) and ``ALE/Breakout-v5`` with ``obs_type="ram"`` (ALE in the process: the same game and
settings), and over our
FinRL and chess, which have no local gymnasium twin:

- gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` (one process per env);
- Stable-Baselines3's ``DummyVecEnv``;
- TorchRL's ``GymEnv(id, num_envs=N)`` (gymnasium's ``AsyncVectorEnv`` inside; ``rollout``), with
  ``frame_skip=4`` for both Atari ids (TorchRL makes every id with ``frameskip=frame_skip``);
- Tianshou's ``Collector`` over ``SubprocVectorEnv`` (``collect(random=True)``);
- and ``gym.make_vec("openenv/...")``, our own vector env (one message per step for all N sessions).

A library that is not installed gets no row. Run it with the venv that has them (.ci/run makes
``.venv-research``):

    python benchmarks/libraries.py --json benchmarks/results/libraries.json
    python benchmarks/libraries.py --quick      # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

try:  # gymnasium 1.x registers ALE's ids only once ale_py says so
    import ale_py

    gym.register_envs(ale_py)
except ImportError:
    pass

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stamp import stamp  # noqa: E402  # benchmarks/, this script's folder

import openenv_lab  # noqa: E402, F401  # registers openenv/*
from openenv_lab.files import write_text_atomically  # noqa: E402

N = 4
#: Each env measured, by its id, with its options.
ENVS: dict[str, tuple[str, dict[str, Any]]] = {
    "openenv/Breakout-ram-v5": ("openenv/Breakout-ram-v5", {}),
    "ALE/Breakout-v5, RAM": ("ALE/Breakout-v5", {"obs_type": "ram"}),
    "openenv/finrl": ("openenv/finrl", {}),
    "openenv/chess": ("openenv/chess", {}),
}


def _makers(env_id: str, options: dict[str, Any]) -> list[Callable[[], gym.Env]]:
    return [functools.partial(gym.make, env_id, **options) for _ in range(N)]


def _random_steps(envs: Any, steps: int) -> float:
    """Steps per second of a gymnasium-style vector env (``step`` of one batch of actions); closes it."""
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        actions = [envs.action_space.sample() for _ in range(steps + 1)]
        envs.step(actions[0])  # warm up
        started = time.perf_counter()
        for batch in actions[1:]:
            envs.step(batch)
        return steps * N / (time.perf_counter() - started)
    finally:
        envs.close()


def gymnasium_sync(env_id: str, options: dict[str, Any], steps: int) -> float:
    return _random_steps(gym.vector.SyncVectorEnv(_makers(env_id, options)), steps)


def gymnasium_async(env_id: str, options: dict[str, Any], steps: int) -> float:
    return _random_steps(gym.vector.AsyncVectorEnv(_makers(env_id, options)), steps)


def make_vec(env_id: str, options: dict[str, Any], steps: int) -> float | None:
    if not env_id.startswith("openenv/"):
        return None  # ALE's own vector env preprocesses its screens: not the same work
    return _random_steps(gym.make_vec(env_id, num_envs=N, **options), steps)


def sb3_dummy(env_id: str, options: dict[str, Any], steps: int) -> float:
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv(_makers(env_id, options))
    try:
        venv.seed(0)
        venv.reset()
        venv.action_space.seed(0)
        actions = [np.stack([venv.action_space.sample() for _ in range(N)]) for _ in range(steps + 1)]
        venv.step(actions[0])
        started = time.perf_counter()
        for batch in actions[1:]:
            venv.step(batch)
        return steps * N / (time.perf_counter() - started)
    finally:
        venv.close()


def torchrl_gymenv(env_id: str, options: dict[str, Any], steps: int) -> float:
    from torchrl.envs import GymEnv

    extra = {"text_info": False} if env_id.startswith("openenv/") else {}
    if "Breakout" in env_id:
        extra["frame_skip"] = 4
    env = GymEnv(env_id, num_envs=N, **options, **extra)
    try:
        env.rollout(2, break_when_any_done=False)  # warm up
        started = time.perf_counter()
        env.rollout(steps, break_when_any_done=False)
        return steps * N / (time.perf_counter() - started)
    finally:
        env.close()


def tianshou_subproc(env_id: str, options: dict[str, Any], steps: int) -> float:
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Collector, VectorReplayBuffer
    from tianshou.env import SubprocVectorEnv

    class Unused(Policy):
        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Any:
            raise AssertionError("collect(random=True) does not ask the policy")

    envs = SubprocVectorEnv(_makers(env_id, options))
    try:
        collector = Collector(
            Unused(action_space=envs.action_space[0]), envs, VectorReplayBuffer(steps * N, N)
        )
        collector.reset()
        collector.collect(n_step=N, random=True)  # warm up
        started = time.perf_counter()
        collector.collect(n_step=steps * N, random=True)
        return steps * N / (time.perf_counter() - started)
    finally:
        envs.close()


#: Each library's loop, and the module it needs.
LIBRARIES: dict[str, tuple[Callable[[str, dict[str, Any], int], float | None], str]] = {
    "gymnasium SyncVectorEnv": (gymnasium_sync, "gymnasium"),
    "gymnasium AsyncVectorEnv": (gymnasium_async, "gymnasium"),
    "gym.make_vec (ours)": (make_vec, "gymnasium"),
    "Stable-Baselines3 DummyVecEnv": (sb3_dummy, "stable_baselines3"),
    "TorchRL GymEnv(num_envs)": (torchrl_gymenv, "torchrl"),
    "Tianshou Collector, SubprocVectorEnv": (tianshou_subproc, "tianshou"),
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny numbers, for smoke tests")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    steps = 20 if args.quick else 500
    os.environ.setdefault("OPENENV_LAB_PROGRESS", "0")
    report: dict[str, Any] = {**stamp(), "n": N, "steps_per_env": steps, "steps_per_s": {}}
    for library, (loop, module) in LIBRARIES.items():
        if importlib.util.find_spec(module) is None:
            print(f"{library}: not installed, skipped")
            continue
        row: dict[str, float | None] = {}
        for name, (env_id, options) in ENVS.items():
            rate = loop(env_id, options, steps)
            row[name] = None if rate is None else round(rate, 1)
            shown = "-" if rate is None else f"{rate:,.0f}"
            print(f"{library:40} {name:26} {shown:>10} steps/s", flush=True)
        report["steps_per_s"][library] = row
    if args.json:
        write_text_atomically(Path(args.json), json.dumps(report, indent=2) + "\n")
        print(f"\nResults written to {args.json}")
    return report


if __name__ == "__main__":
    main()
