"""Vector throughput: ``gym.make_vec("openenv/...")`` vs gymnasium's Sync/AsyncVectorEnv over single envs.

For the echo (protocol only), chess and Atari environments and N in {1, 4, 16, 64} sub-environments,
all on one embedded server: environment steps per second, client CPU time per environment step (this
process, all its threads) and server CPU time per environment step (the server process). gymnasium's
``AsyncVectorEnv`` starts one process per sub-environment, so it is measured up to N=16. "send/recv" is
our EnvPool-style API kept busy: all N sub-environments in flight, each ``recv`` takes the first half
that answered and sends them their next actions at once. "ours/N=1" compares with our vector env of one
session, "ours/lone" with a lone ``gym.make`` env (``SyncVectorEnv`` over one env). "make_vec (loop)" is
our vector env as it runs against servers elsewhere: the sessions' connection driven by an asyncio event
loop in a background thread, where on this machine the calling thread reads it itself (`SyncChannel`);
"ours/loop" compares the two.

    python benchmarks/vector_throughput.py            # a few minutes
    python benchmarks/vector_throughput.py --quick    # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import psutil

import openenv_lab
from openenv_lab.launch import EmbeddedServer

ENVS: dict[str, dict[str, Any]] = {
    "echo": {"id": "openenv/echo", "server": "echo", "options": {}},
    "chess": {"id": "openenv/chess", "server": "chess", "options": {"agent_color": "white"}},
    "atari": {"id": "openenv/atari", "server": "atari", "options": {"game": "pong"}},
}


def actions_for(
    name: str, envs: gym.vector.VectorEnv, obs: Any, rng: np.random.Generator, count: int | None = None
) -> Any:
    count = envs.num_envs if count is None else count
    if name == "echo":
        return tuple("hello" for _ in range(count))
    if name == "chess":
        return np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in obs["action_mask"]])
    return rng.integers(0, envs.single_action_space.n, count)


def server_cpu_seconds(pid: int) -> float | None:
    """CPU time of a process (user + system, all its threads) in seconds, or None when it cannot be read.

    On Linux it comes from the scheduler's own account in nanoseconds (``/proc/PID/task/*/schedstat``):
    psutil's ``cpu_times`` counts clock ticks (10 ms), which over a few hundred cheap steps is a
    resolution of over ten microseconds per step. (A thread that ends between two readings takes its time
    with it; the servers measured here keep theirs.) Elsewhere, psutil's ``cpu_times``.
    """
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # not Linux, or the process is gone
        tasks = []
    total, read = 0, False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stats:
                total += int(stats.read().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile (or no schedstat)
            continue
        read = True
    if read:
        return total / 1e9
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def timed(run: Callable[[], int], server_pid: int) -> dict[str, float]:
    """Run ``run`` (it returns the environment steps it made) and report rate and CPU per step."""
    server_before = server_cpu_seconds(server_pid)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    env_steps = run()
    wall = time.perf_counter() - wall_before
    cpu = time.process_time() - cpu_before
    server_after = server_cpu_seconds(server_pid)
    row = {"steps_per_s": env_steps / wall, "client_cpu_us_per_step": 1e6 * cpu / env_steps}
    if server_before is not None and server_after is not None:
        row["server_cpu_us_per_step"] = 1e6 * (server_after - server_before) / env_steps
    return row


def measure(
    name: str, make: Callable[[], gym.vector.VectorEnv], steps: int, server_pid: int
) -> dict[str, float]:
    envs = make()
    try:
        rng = np.random.default_rng(0)
        obs, _ = envs.reset(seed=0)
        for _ in range(3):  # warm up
            obs, *_ = envs.step(actions_for(name, envs, obs, rng))

        def run() -> int:
            nonlocal obs
            for _ in range(steps):
                obs, *_ = envs.step(actions_for(name, envs, obs, rng))
            return steps * envs.num_envs

        return timed(run, server_pid)
    finally:
        envs.close()


def measure_send_recv(name: str, make: Callable[[], Any], steps: int, server_pid: int) -> dict[str, float]:
    """Like `measure`, driving the vector env through ``send``/``recv`` with half the batch each time."""
    envs = make()
    try:
        rng = np.random.default_rng(0)
        half = max(1, envs.num_envs // 2)
        obs, _ = envs.reset(seed=0)
        envs.send(actions_for(name, envs, obs, rng))

        def cycle() -> int:
            obs, *_, infos = envs.recv(batch_size=half)
            ids = infos["env_id"]
            envs.send(actions_for(name, envs, obs, rng, len(ids)), env_ids=ids)
            return len(ids)

        for _ in range(3):  # warm up
            cycle()

        def run() -> int:
            env_steps = 0
            while env_steps < steps * envs.num_envs:
                env_steps += cycle()
            return env_steps

        row = timed(run, server_pid)
        envs.recv()
        return row
    finally:
        envs.close()


def makers(spec: dict[str, Any], url: str, n: int, async_limit: int) -> dict[str, Callable[[], Any]]:
    """How each contender builds its n sub-environments on the server at ``url``."""

    def single() -> gym.Env:
        return gym.make(spec["id"], base_url=url, **spec["options"])

    def ours() -> gym.vector.VectorEnv:
        return gym.make_vec(spec["id"], num_envs=n, base_url=url, **spec["options"])

    def on_the_loop() -> gym.vector.VectorEnv:
        from openenv_lab.client import pool

        pool.DIRECT_ON_LOOPBACK = False  # what a server on another machine gets
        try:
            return ours()
        finally:
            pool.DIRECT_ON_LOOPBACK = True

    contenders: dict[str, Callable[[], Any]] = {
        "make_vec (ours)": ours,
        "make_vec (loop)": on_the_loop,
        "SyncVectorEnv": lambda: gym.vector.SyncVectorEnv([single] * n),
    }
    if n <= async_limit:
        contenders["AsyncVectorEnv"] = lambda: gym.vector.AsyncVectorEnv([single] * n)
    return contenders


def run(sizes: list[int], steps: int, async_limit: int, names: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        spec = ENVS[name]
        with EmbeddedServer(spec["server"], max_sessions=max(sizes) * 2 + 4) as server:
            assert server.base_url is not None and server._process is not None
            for n in sizes:
                count = max(5, steps // n)
                contenders = makers(spec, server.base_url, n, async_limit)
                rows = {
                    contender: measure(name, make, count, server._process.pid)
                    for contender, make in contenders.items()
                }
                if n >= 2:
                    ours = contenders["make_vec (ours)"]
                    rows["send/recv (ours)"] = measure_send_recv(name, ours, count, server._process.pid)
                results.setdefault(name, {})[str(n)] = rows
    return results


def print_table(results: dict[str, Any]) -> None:
    for name, by_size in results.items():
        print(f"\n{name}: environment steps per second (client CPU / server CPU per step, microseconds)")
        columns = (
            "make_vec (ours)",
            "make_vec (loop)",
            "send/recv (ours)",
            "SyncVectorEnv",
            "AsyncVectorEnv",
        )
        print(
            f"{'N':>4}  "
            + "  ".join(f"{c:>26}" for c in columns)
            + "  ours/async  ours/N=1  ours/lone  ours/loop"
        )
        first = by_size[next(iter(by_size))]
        base = first["make_vec (ours)"]["steps_per_s"]
        # A lone gym.make env: SyncVectorEnv over one env, measured when the sizes start at 1.
        lone = first["SyncVectorEnv"]["steps_per_s"] if next(iter(by_size)) == "1" else None
        for n, rows in by_size.items():
            cells = []
            for key in columns:
                row = rows.get(key)
                if row is None:
                    cells.append(f"{'-':>26}")
                    continue
                server = row.get("server_cpu_us_per_step")
                cpu = (
                    f"{row['client_cpu_us_per_step']:.0f}/{server:.0f}"
                    if server is not None
                    else f"{row['client_cpu_us_per_step']:.0f}/?"
                )
                cells.append(f"{row['steps_per_s']:>10.0f} ({cpu:>12})")
            ours = rows["make_vec (ours)"]["steps_per_s"]
            vs_async = (
                f"{ours / rows['AsyncVectorEnv']['steps_per_s']:.2f}" if "AsyncVectorEnv" in rows else "-"
            )
            vs_lone = f"{ours / lone:.2f}" if lone else "-"
            vs_loop = ours / rows["make_vec (loop)"]["steps_per_s"]
            ratios = f"{vs_async:>10}  {ours / base:>8.2f}  {vs_lone:>9}  {vs_loop:>9.2f}"
            print(f"{n:>4}  {'  '.join(cells)}  {ratios}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,4,16,64")
    parser.add_argument("--steps", type=int, default=1600, help="environment steps per measurement (about)")
    parser.add_argument("--async-limit", type=int, default=16)
    parser.add_argument("--envs", default="echo,chess,atari")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps, args.async_limit, args.envs = "1,4", 40, 2, "echo,chess"
    sizes = [int(n) for n in args.sizes.split(",")]
    results = run(sizes, args.steps, args.async_limit, args.envs.split(","))
    report = {
        "benchmark": "vector_throughput",
        "openenv_lab": openenv_lab.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "results": results,
    }
    print(f"openenv_lab {report['openenv_lab']}, Python {report['python']}, {report['cpus']} CPUs")
    print_table(results)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
