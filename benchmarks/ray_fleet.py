"""A vector env over a Ray fleet vs over a local fleet of the same size, in one run.

The Ray fleet runs on a real Ray cluster on this machine (`ray.cluster_utils.Cluster`: a head without
CPUs and ``--replicas`` worker nodes of one CPU each, every node on 127.0.0.1), one replica per node
(``serve(..., engine="ray")``, each requiring the fleet's token); the local fleet is ``serve(...,
replicas=R)``. Same family, ``num_envs`` and steps; the two are measured alternately, ``--rounds`` times
each, and the best rate of each is kept (the machine is shared). Also: the seconds from `serve` to a
healthy fleet on each engine.

    python benchmarks/ray_fleet.py                  # echo and chess, about two minutes
    python benchmarks/ray_fleet.py --quick          # seconds, for smoke tests
    python benchmarks/ray_fleet.py --json results/ray_fleet.json
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

sys.path.insert(0, str(Path(__file__).parent))

from fleet import throughput  # the same measure as the local fleet benchmark

import openenv_lab
from openenv_lab.files import write_text_atomically


def measure(families: list[str], replicas: int, num_envs: int, steps: int, rounds: int) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every node on 127.0.0.1: loopback only
    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(replicas):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster_s = time.perf_counter() - started
    results: dict[str, Any] = {}
    try:
        for family in families:
            server = {"echo": "echo", "chess": "chess", "atari": "atari"}[family]
            started = time.perf_counter()
            ray_fleet = openenv_lab.serve(server, replicas=replicas, engine="ray")
            ray_start = time.perf_counter() - started
            started = time.perf_counter()
            local = openenv_lab.serve(server, replicas=replicas)
            local_start = time.perf_counter() - started
            rates: dict[str, list[float]] = {"ray": [], "local": []}
            try:
                nodes = len({s.node_id for s in ray_fleet.servers})
                for _ in range(rounds):
                    rates["ray"].append(throughput(family, ray_fleet.urls, num_envs, steps))
                    rates["local"].append(throughput(family, local.urls, num_envs, steps))
            finally:
                ray_fleet.stop()
                local.stop()
            best = {engine: max(values) for engine, values in rates.items()}
            results[family] = {
                "steps_per_s": best,
                "all_rounds": rates,
                "ray_vs_local": best["ray"] / best["local"],
                "ray_nodes_used": nodes,
                "start_s": {"ray": ray_start, "local": local_start},
            }
    finally:
        ray.shutdown()
        cluster.shutdown()
    return {"cluster_start_s": cluster_s, "results": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="echo,chess")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="echo only, few steps (a smoke test)")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    args = parser.parse_args(argv)
    families = ["echo"] if args.quick else args.families.split(",")
    steps, rounds = (20, 1) if args.quick else (args.steps, args.rounds)
    measured = measure(families, args.replicas, args.num_envs, steps, rounds)
    print(
        f"Ray fleet vs local fleet: {args.replicas} replicas, {args.num_envs} sub-environments, "
        f"{steps} steps, best of {rounds} (Ray cluster up in {measured['cluster_start_s']:.1f} s)"
    )
    header = f"{'family':<8} {'Ray steps/s':>12} {'local steps/s':>14} {'Ray/local':>10}"
    print(f"{header} {'start Ray/local s':>18}")
    for family, row in measured["results"].items():
        rates, start = row["steps_per_s"], row["start_s"]
        print(
            f"{family:<8} {rates['ray']:>12,.0f} {rates['local']:>14,.0f} {row['ray_vs_local']:>9.2f}x "
            f"{start['ray']:>9.1f}/{start['local']:.1f}"
        )
    if args.json:
        report = {
            "benchmark": "ray_fleet",
            "openenv_lab": openenv_lab.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "replicas": args.replicas,
            "num_envs": args.num_envs,
            "steps": steps,
            **measured,
        }
        write_text_atomically(args.json, json.dumps(report, indent=2), "the results")  # never half a file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
