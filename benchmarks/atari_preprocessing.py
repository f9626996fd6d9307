"""Atari with DeepMind-style preprocessing: the server computing it vs gymnasium's wrappers in process.

For N sub-environments of Pong (84x84 grayscale, 4-frame skip with max-pooling, 30 no-ops, a stack of
4, sticky actions as in ``ALE/Pong-v5``), environment steps per second of:

- ``make_vec (ours)``: ``gym.make_vec("openenv/atari", num_envs=N, preprocessing=True, frame_stack=4)``,
  the preprocessing done by one embedded server (one process: one core at most);
- ``make_vec, 2 servers``: the same over a fleet of two server processes (``openenv_lab.serve``), as
  many as this machine has cores;
- ``AsyncVectorEnv (ALE)``: gymnasium's ``AsyncVectorEnv`` over in-process ``ALE/Pong-v5`` +
  ``AtariPreprocessing`` + ``FrameStackObservation``, what users run today (one process per env);
- ``SyncVectorEnv (ALE)``: the same in this process, one env after the other.

Also the bytes a step carries from the server, preprocessed against the full screen (one session).

    python benchmarks/atari_preprocessing.py            # a minute or two
    python benchmarks/atari_preprocessing.py --quick    # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

import openenv_lab

gym.register_envs(ale_py)
STICKY = 0.25


def in_process() -> gym.Env:
    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=STICKY)
    return FrameStackObservation(AtariPreprocessing(env), 4)


def steps_per_second(envs: gym.vector.VectorEnv, steps: int) -> float:
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    for _ in range(3):  # warm up
        envs.step(rng.integers(0, 6, envs.num_envs))
    started = time.perf_counter()
    for _ in range(steps):
        envs.step(rng.integers(0, 6, envs.num_envs))
    rate = steps * envs.num_envs / (time.perf_counter() - started)
    envs.close()
    return rate


def bytes_per_step(steps: int, **options: Any) -> float:
    env = gym.make("openenv/atari", game="pong", repeat_action_probability=STICKY, **options)
    env.reset(seed=0)
    session = env.unwrapped.session
    before = session.bytes_received
    for _ in range(steps):
        env.step(0)
    per_step = (session.bytes_received - before) / steps
    env.close()
    return per_step


def run(sizes: list[int], steps: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for n in sizes:
        count = max(5, steps // n)
        options = {
            "game": "pong",
            "repeat_action_probability": STICKY,
            "preprocessing": True,
            "frame_stack": 4,
        }
        ours = gym.make_vec("openenv/atari", num_envs=n, **options)
        with openenv_lab.serve("atari", replicas=2) as fleet:
            two = gym.make_vec("openenv/atari", num_envs=n, base_urls=fleet.urls, **options)
            on_two = steps_per_second(two, count)
        results[str(n)] = {
            "make_vec (ours)": steps_per_second(ours, count),
            "make_vec, 2 servers": on_two,
            "AsyncVectorEnv (ALE)": steps_per_second(gym.vector.AsyncVectorEnv([in_process] * n), count),
            "SyncVectorEnv (ALE)": steps_per_second(gym.vector.SyncVectorEnv([in_process] * n), count),
        }
    wire = {
        "preprocessed (84x84, zlib)": bytes_per_step(50, preprocessing=True, frame_stack=4),
        "full screen, screen deltas": bytes_per_step(50, frameskip=4),
        "full screen, zlib": bytes_per_step(50, frameskip=4, screen_encoding="zlib"),
    }
    return {"steps_per_s": results, "bytes_per_step": wire}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,16")
    parser.add_argument("--steps", type=int, default=1600, help="environment steps per measurement (about)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps = "2", 20
    results = run([int(n) for n in args.sizes.split(",")], args.steps)
    report = {
        "benchmark": "atari_preprocessing",
        "openenv_lab": openenv_lab.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        **results,
    }
    print(f"openenv_lab {report['openenv_lab']}, Python {report['python']}, {report['cpus']} CPUs")
    print("\nPong, DeepMind preprocessing + a stack of 4: environment steps per second")
    names = list(next(iter(results["steps_per_s"].values())))
    print(f"{'N':>4}  " + "  ".join(f"{name:>22}" for name in names) + "  best of ours/async")
    for n, rates in results["steps_per_s"].items():
        ratio = max(rates["make_vec (ours)"], rates["make_vec, 2 servers"]) / rates["AsyncVectorEnv (ALE)"]
        print(f"{n:>4}  " + "  ".join(f"{rates[name]:>22.0f}" for name in names) + f"  {ratio:>18.2f}")
    print("\nBytes from the server per step")
    for name, size in results["bytes_per_step"].items():
        print(f"  {name:<30} {size:>10,.0f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
