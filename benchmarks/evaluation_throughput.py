"""Episodes per second of `openenv_lab.evaluate` on the native vector path vs a loop over one single env.

The same server (our echo server, ``max_steps`` messages an episode), the same policy (a constant
message), the same seeds, three ways:

- ``evaluate, n_envs=N``: our vector env's ``send``/``recv``, each session taking its next seed as soon
  as its episode ends;
- ``evaluate, n_envs=1``: the same code with one session (what the parallelism adds);
- ``loop over a single env``: what one writes by hand, ``gym.make`` once, then reset and step each seed.

Each is run ``--rounds`` times, alternating, and the best round counts (the machine is shared). Prints
episodes per second and the ratios to the loop.

    python benchmarks/evaluation_throughput.py               # N=16, seconds
    python benchmarks/evaluation_throughput.py --quick       # smoke test
    python benchmarks/evaluation_throughput.py --json results/evaluation.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openenv_lab  # noqa: E402
from openenv_lab.files import write_text_atomically  # noqa: E402
from openenv_lab.launch import EmbeddedServer  # noqa: E402


def policy(obs: Any) -> str:
    return "hi"


def by_evaluate(url: str, seeds: list[int], n_envs: int) -> float:
    started = time.perf_counter()
    result = openenv_lab.evaluate(
        policy, "openenv/echo", seeds=seeds, n_envs=n_envs, base_url=url, progress=False
    )
    elapsed = time.perf_counter() - started
    assert result.episodes["failed"].sum() == 0
    return len(seeds) / elapsed


def by_loop(url: str, seeds: list[int]) -> float:
    started = time.perf_counter()
    env = gym.make("openenv/echo", base_url=url)
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(policy(obs))
            done = terminated or truncated
    env.close()
    return len(seeds) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--max-steps", type=int, default=20, help="messages per echo episode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny numbers, for smoke tests")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.episodes, args.rounds, args.max_steps = 32, 1, 5
    seeds = list(range(args.episodes))
    ways = {
        f"evaluate, n_envs={args.n_envs}": lambda url: by_evaluate(url, seeds, args.n_envs),
        "evaluate, n_envs=1": lambda url: by_evaluate(url, seeds, 1),
        "loop over a single env": lambda url: by_loop(url, seeds),
    }
    best: dict[str, float] = dict.fromkeys(ways, 0.0)
    with EmbeddedServer("echo", max_steps=args.max_steps, max_sessions=max(64, args.n_envs)) as server:
        for _ in range(args.rounds):
            for name, way in ways.items():
                best[name] = max(best[name], way(server.base_url))
    loop = best["loop over a single env"]
    print(f"echo, {args.episodes} episodes of {args.max_steps} steps; best of {args.rounds} rounds")
    for name, rate in best.items():
        print(f"  {name:28s} {rate:10,.1f} episodes/s   {rate / loop:5.2f}x the loop")
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "settings": {key: getattr(args, key) for key in ("n_envs", "episodes", "max_steps", "rounds")},
        "episodes_per_s": best,
        "vs_loop": {name: rate / loop for name, rate in best.items()},
    }
    if args.json:
        write_text_atomically(args.json, json.dumps(report, indent=2) + "\n", what="the results")
        print(f"Results written to {args.json}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
