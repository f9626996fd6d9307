"""Fleets: a vector env spread over N server processes vs all its sessions on one multi-session server.

One server runs every session on one event loop (one core at most); a fleet (`openenv_lab.serve(name,
replicas=N)`) gives each process its share. For the chess and Atari servers and N in {1, 2, 4}, with the
same number of sub-environments: environment steps per second and the ratio to N=1 (the one
multi-session server). Also the time from nothing to the first step: one embedded server, a fleet, and
a Docker container of our image (when an engine and the image are there: `openenv-lab docker build`).

    python benchmarks/fleet.py            # about a minute
    python benchmarks/fleet.py --quick    # seconds, for smoke tests
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
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from vector_throughput import ENVS, actions_for

import openenv_lab
from openenv_lab.client import LaunchError
from openenv_lab.launch import DockerServer, EmbeddedServer, serve


def throughput(name: str, urls: list[str], num_envs: int, steps: int) -> float:
    spec = ENVS[name]
    envs = gym.make_vec(spec["id"], num_envs=num_envs, base_urls=urls, **spec["options"])
    try:
        rng = np.random.default_rng(0)
        obs, _ = envs.reset(seed=0)
        for _ in range(3):  # warm up
            obs, *_ = envs.step(actions_for(name, envs, obs, rng))
        started = time.perf_counter()
        for _ in range(steps):
            obs, *_ = envs.step(actions_for(name, envs, obs, rng))
        return steps * num_envs / (time.perf_counter() - started)
    finally:
        envs.close()


def start_to_first_step(name: str, replicas: int | str) -> float:
    """Seconds from nothing running to the first step's answer, on a fresh server, fleet or container."""
    spec = ENVS[name]
    started = time.perf_counter()
    if replicas == "docker":
        server = DockerServer(spec["server"])
        urls = [server.start()]
    elif replicas == 1:
        server = EmbeddedServer(spec["server"])
        urls = [server.start()]
    else:
        server = serve(spec["server"], replicas=replicas)
        urls = server.urls
    try:
        headers = getattr(server, "headers", None)  # a container's server requires its token
        env = gym.make(spec["id"], base_url=urls[0], headers=headers, **spec["options"])
        obs, _ = env.reset(seed=0)
        env.step(env.action_space.sample(mask=obs["action_mask"]) if name == "chess" else 0)
        elapsed = time.perf_counter() - started
        env.close()
        return elapsed
    finally:
        server.stop()


def run(names: list[str], sizes: list[int], num_envs: int, steps: int, docker: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        spec = ENVS[name]
        rows = {}
        for replicas in sizes:
            with serve(spec["server"], replicas=replicas) as fleet:
                rows[str(replicas)] = {"steps_per_s": throughput(name, fleet.urls, num_envs, steps)}
        starts: dict[str, float | str] = {
            str(n): start_to_first_step(name, n) for n in sorted({1, max(sizes)})
        }
        if docker:
            try:
                starts["docker"] = start_to_first_step(name, "docker")
            except LaunchError as exc:  # no engine, or the image is not built
                starts["docker"] = f"not measured: {exc}".split("\n")[0]
        results[name] = {"throughput": rows, "start_to_first_step_s": starts}
    return results


def print_table(results: dict[str, Any], num_envs: int) -> None:
    for name, result in results.items():
        rows = result["throughput"]
        base = rows[next(iter(rows))]["steps_per_s"]
        print(f"\n{name}: {num_envs} sub-environments, environment steps per second")
        print(f"{'servers':>8}  {'steps/s':>9}  {'vs one server':>13}")
        for replicas, row in rows.items():
            print(f"{replicas:>8}  {row['steps_per_s']:>9.0f}  {row['steps_per_s'] / base:>13.2f}")
        starts = ", ".join(
            (f"{n} server(s) {s:.2f} s" if n != "docker" else f"a container {s:.2f} s")
            if isinstance(s, float)
            else f"{n}: {s}"
            for n, s in result["start_to_first_step_s"].items()
        )
        print(f"start to first step: {starts}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="chess,atari")
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100, help="vector steps per measurement")
    parser.add_argument("--no-docker", action="store_true", help="skip the container start measurement")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.envs, args.sizes, args.num_envs, args.steps, args.no_docker = "chess", "1,2", 4, 5, True
    sizes = [int(n) for n in args.sizes.split(",")]
    results = run(args.envs.split(","), sizes, args.num_envs, args.steps, docker=not args.no_docker)
    report = {
        "benchmark": "fleet",
        "openenv_lab": openenv_lab.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "num_envs": args.num_envs,
        "results": results,
    }
    print(f"openenv_lab {report['openenv_lab']}, Python {report['python']}, {report['cpus']} CPUs")
    print_table(results, args.num_envs)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
