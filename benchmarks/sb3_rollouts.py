"""Stable-Baselines3 through `openenv_lab.sb3` vs SB3's own ``DummyVecEnv`` and ``SubprocVecEnv``.

All three drive the same sessions of one server of ours (chess, FinRL) with N sub-environments:

- ``openenv_lab.sb3``: our vector env as SB3's ``VecEnv`` (one message per step for all N sessions);
- ``DummyVecEnv``: N single envs stepped one after the other in this process (what SB3's
  ``make_vec_env`` builds);
- ``SubprocVecEnv``: N single envs, one process each.

Two numbers per row: environment steps per second through ``VecEnv.step`` with random actions (the
collection path alone), and of a PPO ``learn`` of ``--steps`` steps per env (one epoch, one minibatch, so
mostly collection), with the ratios to ``SubprocVecEnv``.

    python benchmarks/sb3_rollouts.py              # N=16, about two minutes
    python benchmarks/sb3_rollouts.py --quick      # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import openenv_lab  # noqa: F401  # registers openenv/*
from openenv_lab.launch import EmbeddedServer
from openenv_lab.sb3 import make_vec_env

FAMILIES = {
    "chess": {"id": "openenv/chess", "policy": "MultiInputPolicy", "options": {"max_moves": 200}},
    "finrl": {"id": "openenv/finrl", "policy": "MlpPolicy", "options": {}},
}


def _single(env_id: str, url: str, options: dict[str, Any]) -> Any:
    def make() -> gym.Env:

        return gym.make(env_id, base_url=url, **options)

    return make


def venvs(name: str, url: str, n: int) -> dict[str, Any]:
    spec = FAMILIES[name]
    single = _single(spec["id"], url, spec["options"])
    return {
        "openenv_lab.sb3": lambda: make_vec_env(spec["id"], n_envs=n, base_url=url, **spec["options"]),
        "DummyVecEnv": lambda: DummyVecEnv([single] * n),
        "SubprocVecEnv": lambda: SubprocVecEnv([single] * n),
    }


def step_rate(venv: VecEnv, steps: int) -> float:
    venv.seed(0)
    venv.reset()
    venv.action_space.seed(0)
    actions = [np.stack([venv.action_space.sample() for _ in range(venv.num_envs)]) for _ in range(steps)]
    venv.step(actions[0])  # warm up
    started = time.perf_counter()
    for batch in actions:
        venv.step(batch)
    return steps * venv.num_envs / (time.perf_counter() - started)


def learn_rate(venv: VecEnv, policy: str, steps: int) -> float:
    n = venv.num_envs
    model = PPO(
        policy, venv, n_steps=steps, batch_size=steps * n, n_epochs=1, device="cpu", verbose=0, seed=0
    )
    started = time.perf_counter()
    model.learn(total_timesteps=steps * n)
    return steps * n / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny numbers, for smoke tests")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=64, help="steps per env for each measurement")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    n, steps = (2, 8) if args.quick else (args.envs, args.steps)
    results: dict[str, Any] = {"num_envs": n, "steps_per_env": steps, "families": {}}
    print(f"SB3 with N={n}: environment steps per second (ratio to SubprocVecEnv)")
    print(f"{'':<8}{'VecEnv':<18}{'step':>10}{'x':>7}{'PPO learn':>12}{'x':>7}")
    for name in FAMILIES:
        with EmbeddedServer(name, max_sessions=3 * n) as server:
            assert server.base_url is not None
            rows: dict[str, dict[str, float]] = {}
            for label, make in venvs(name, server.base_url, n).items():
                venv = make()
                try:
                    rows[label] = {
                        "step_per_s": step_rate(venv, steps),
                        "learn_per_s": learn_rate(venv, FAMILIES[name]["policy"], steps),
                    }
                finally:
                    venv.close()
            base = rows["SubprocVecEnv"]
            for label, row in rows.items():
                row["step_vs_subproc"] = row["step_per_s"] / base["step_per_s"]
                row["learn_vs_subproc"] = row["learn_per_s"] / base["learn_per_s"]
                print(
                    f"{name:<8}{label:<18}{row['step_per_s']:>10,.0f}{row['step_vs_subproc']:>6.2f}x"
                    f"{row['learn_per_s']:>12,.0f}{row['learn_vs_subproc']:>6.2f}x"
                )
            results["families"][name] = rows
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
