"""What isolating sessions costs the fast path: steps on worker threads against steps on the event loop.

Our servers run every step on a worker thread of its session (``/ws``) or connection (``/ws/batch``), so a
step that is slow for a reason nobody predicted stalls no other session (`openenv_lab.servers._base`).
``serve --inline-steps`` runs them on the event loop instead, as our servers once did; each step on a
worker thread is also timed against the server's step time limit (``--step-timeout``, a timer per step),
which ``--step-timeout 0`` turns off. This script starts three servers of each family side by side, one of
each kind, and measures random-action steps per second
through ``gym.make_vec`` (16 envs: one ``/ws/batch`` message a step, so one hop for all 16) and through
one ``gym.make`` env (one ``/ws`` message and one hop a step), rounds alternated between the two servers,
medians:

    python benchmarks/isolation.py --json benchmarks/results/isolation.json
    python benchmarks/isolation.py --quick      # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stamp import stamp  # noqa: E402  # benchmarks/, this script's folder

import openenv_lab  # noqa: E402, F401  # registers openenv/*
from openenv_lab.files import write_text_atomically  # noqa: E402
from openenv_lab.launch import EmbeddedServer  # noqa: E402
from openenv_lab.servers import ServeOptions  # noqa: E402

FAMILIES = ("echo", "finrl", "chess")
SIZES = (16, 1)
MODES = {
    "threads": ServeOptions(),
    "inline": ServeOptions(inline_steps=True),
    "no_limit": ServeOptions(step_timeout=None),
}


def steps_per_second(env_id: str, url: str, num_envs: int, steps: int) -> float:
    """Random-action steps per second (env steps: ``num_envs`` per vector step), after a warm-up."""
    if num_envs == 1:
        envs: Any = gym.make(env_id, base_url=url)
        envs.action_space.seed(0)
        envs.reset(seed=0)
    else:
        envs = gym.make_vec(env_id, num_envs=num_envs, base_url=url)
        envs.action_space.seed(0)
        envs.reset(seed=0)
    try:
        actions = [envs.action_space.sample() for _ in range(steps + 20)]
        for action in actions[:20]:
            _step(envs, action, num_envs)
        started = time.perf_counter()
        for action in actions[20:]:
            _step(envs, action, num_envs)
        return steps * num_envs / (time.perf_counter() - started)
    finally:
        envs.close()


def _step(envs: Any, action: Any, num_envs: int) -> None:
    if num_envs == 1:
        *_, terminated, truncated, _ = envs.step(action)
        if terminated or truncated:
            envs.reset()
    else:
        envs.step(action)  # the vector env resets its sub-envs itself


def measure(steps: int, rounds: int) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        env_id = f"openenv/{family}"
        servers = {mode: EmbeddedServer(family, serve_options=options) for mode, options in MODES.items()}
        try:
            urls = {mode: server.start() for mode, server in servers.items()}
            for num_envs in SIZES:
                samples: dict[str, list[float]] = {mode: [] for mode in MODES}
                for _ in range(rounds):
                    for mode, url in urls.items():
                        samples[mode].append(steps_per_second(env_id, url, num_envs, steps))
                medians = {mode: statistics.median(values) for mode, values in samples.items()}
                rows[f"{family}, {num_envs} env{'s' if num_envs > 1 else ''}"] = {
                    **{f"{mode}_steps_per_s": round(value) for mode, value in medians.items()},
                    "threads_over_inline": round(medians["threads"] / medians["inline"], 3),
                    "threads_over_no_limit": round(medians["threads"] / medians["no_limit"], 3),
                }
                print(
                    f"{env_id:15} N={num_envs:2}  " + "  ".join(f"{m} {v:8,.0f}" for m, v in medians.items())
                )
        finally:
            for server in servers.values():
                server.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps, one round: for smoke tests")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    steps, rounds = (20, 1) if args.quick else (400, 5)
    report = {**stamp(), "steps": steps, "rounds": rounds, "rows": measure(steps, rounds)}
    print()
    heads = ("threads", "inline", "no limit")
    print(f"{'':18} " + " ".join(f"{h:>10}" for h in heads) + f" {'threads/inline':>15} {'limit cost':>11}")
    for name, row in report["rows"].items():
        print(
            f"{name:18} {row['threads_steps_per_s']:>10,} {row['inline_steps_per_s']:>10,} "
            f"{row['no_limit_steps_per_s']:>10,} {row['threads_over_inline']:>15.2f} "
            f"{row['threads_over_no_limit']:>11.2f}"
        )
    if args.json:
        write_text_atomically(args.json, json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
