"""Stable-Baselines3 through `openenv_lab.sb3` vs SB3's own ``DummyVecEnv`` and ``SubprocVecEnv``.

All three drive the same sessions of one server of ours (chess, FinRL) with N sub-environments:

- ``openenv_lab.sb3``: our vector env as SB3's ``VecEnv`` (one message per step for all N sessions);
- ``DummyVecEnv``: N single envs stepped one after the other in this process (what SB3's
  ``make_vec_env`` builds);
- ``SubprocVecEnv``: N single envs, one process each.

Two numbers per row: environment steps per second through ``VecEnv.step`` with random actions (the
collection path alone), and of a PPO ``learn`` of ``--steps`` steps per env (one epoch, one minibatch, so
mostly collection), with the ratios to ``SubprocVecEnv``. Last, the physical ceiling of any ``VecEnv``
over that one server: the steps per second its CPU per step allows (measured on its process during our
step measurement), the rate at which its core would do nothing else.

    python benchmarks/sb3_rollouts.py              # N=16, a few minutes
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
import psutil
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
    parser.add_argument("--steps", type=int, default=256, help="steps per env for each measurement")
    parser.add_argument("--rounds", type=int, default=3, help="step measurements per VecEnv (best kept)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    n, steps, rounds = (2, 8, 1) if args.quick else (args.envs, args.steps, args.rounds)
    results: dict[str, Any] = {"num_envs": n, "steps_per_env": steps, "rounds": rounds, "families": {}}
    print(f"SB3 with N={n}: environment steps per second, best of {rounds} (ratio to SubprocVecEnv)")
    print(f"{'':<8}{'VecEnv':<18}{'step':>10}{'x':>7}{'PPO learn':>12}{'x':>7}")
    for name in FAMILIES:
        with EmbeddedServer(name, max_sessions=3 * n) as server:
            assert server.base_url is not None
            rows: dict[str, dict[str, float]] = {}
            server_process = psutil.Process(server.pid)
            for label, make in venvs(name, server.base_url, n).items():
                venv = make()
                try:
                    before = sum(server_process.cpu_times()[:2])
                    rates = [step_rate(venv, steps) for _ in range(rounds)]  # the best: a shared machine
                    server_cpu = (sum(server_process.cpu_times()[:2]) - before) / rounds
                    step_per_s = max(rates)
                    rows[label] = {
                        "step_per_s": step_per_s,
                        "learn_per_s": learn_rate(venv, FAMILIES[name]["policy"], steps),
                        # The ceiling of any VecEnv over this one server: its core doing nothing else.
                        "server_ceiling_per_s": (steps + 1) * n / server_cpu if server_cpu > 0 else None,
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
            ceiling = rows["openenv_lab.sb3"]["server_ceiling_per_s"]
            if ceiling is not None:
                print(
                    f"{'':<8}{'(one server core)':<18}{ceiling:>10,.0f}"
                    f"{ceiling / base['step_per_s']:>6.2f}x  the ceiling: the server's CPU per step"
                )
            results["families"][name] = rows
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
