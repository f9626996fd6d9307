"""The client's speed levers, each measured on this machine: what it would save and what it would cost.

`ceilings.py` sets our client beside the raw one (a client that only sends, reads and parses JSON) and
splits our client's CPU per env step into stages. This script measures the levers that could shrink those
stages, on replies captured from our own servers (``make_vec 16``: echo, FinRL, chess):

- **JSON parsers**: pydantic's (the client's), orjson and the standard library, on each family's batch
  reply as our servers write it, in us per env step; and what orjson does with an integer beyond 64 bits
  (the reason it is not the client's parser), with what a scan for such integers would cost;
- **the work beyond the wire**: per env step, our adapters' decoding of the replies into arrays, our
  batched infos and gymnasium's batching of the observations, against gymnasium's own ``SyncVectorEnv``
  batching the very same transitions (its sub-environments replaying them, nothing else): the price of
  gymnasium's semantics (arrays, masks, infos as gymnasium builds them) in gymnasium's own implementation;
- **batch decoding** (FinRL): sixteen state vectors as one ``np.array`` against sixteen ``np.asarray``;
- **N=1**: one env stepping ``openenv/echo`` alone, in gymnasium's ``SyncVectorEnv(1)``, and in our vector
  env (one message a step, and ``multiplex=False``: the event loop), steps per second and the main
  thread's CPU per step, rounds alternated, medians;
- **cold start**: ``import openenv_lab`` in a new process (the most a lazy top-level package could save
  a server process, which imports the package before its server), against an embedded server's whole
  start.

    python benchmarks/levers.py                    # a minute or two
    python benchmarks/levers.py --quick            # seconds, for smoke tests
    python benchmarks/levers.py --json benchmarks/results/levers.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import SyncVectorEnv
from gymnasium.vector.utils import concatenate
from pydantic_core import from_json, to_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stamp import commit  # noqa: E402  # benchmarks/, this script's folder

import openenv_lab  # noqa: E402, F401  # registers openenv/*
from openenv_lab.envs.infos import batch_infos  # noqa: E402
from openenv_lab.files import write_text_atomically  # noqa: E402
from openenv_lab.launch import EmbeddedServer, shared_embedded_server  # noqa: E402

N = 16
FAMILIES = ("echo", "finrl", "chess")


def per_call_us(fn: Callable[[], Any], number: int) -> float:
    """The median over three timings of ``fn``'s time per call, in microseconds."""
    return statistics.median(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def captured(family: str) -> tuple[Any, list[Any]]:
    """A ``make_vec 16`` env of ``family`` after three steps, and the replies of its last step (StepResults,
    as its sub-environments read them)."""
    envs = gym.make_vec(
        f"openenv/{family}", N, vectorization_mode="vector_entry_point", base_url=_server(family)
    )
    envs.reset(seed=0)
    results: list[Any] = []
    read = envs.unwrapped._result

    def spy(i: int, kind: str, result: Any) -> Any:
        results.append((i, result))
        return read(i, kind, result)

    envs.unwrapped._result = spy
    rng = np.random.default_rng(0)
    for _ in range(3):
        del results[:]
        masks = envs.unwrapped.call("action_masks") if family == "chess" else None
        if masks is None:
            envs.step(envs.action_space.sample())
        else:
            envs.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
    envs.unwrapped._result = read
    return envs, [result for _, result in sorted(results, key=lambda pair: pair[0])]


_SERVERS: dict[str, str] = {}


def _server(family: str) -> str:
    if family not in _SERVERS:
        _SERVERS[family] = shared_embedded_server(family).base_url
    return _SERVERS[family]


def batch_reply(results: list[Any]) -> bytes:
    """The batch message a server sends for these replies, written as our servers write JSON."""
    envelopes = [
        {
            "type": "observation",
            "data": {"observation": r.observation, "reward": r.reward, "done": r.done},
        }
        for r in results
    ]
    return to_json({"type": "batch", "data": envelopes})


def parsers(reply: bytes, number: int) -> dict[str, float]:
    import orjson

    return {
        "pydantic": per_call_us(lambda: from_json(reply), number) / N,
        "orjson": per_call_us(lambda: orjson.loads(reply), number) / N,
        "json": per_call_us(lambda: json.loads(reply), max(1, number // 4)) / N,
        "scan for 19+ digits": per_call_us(lambda: re.search(rb"\d{19}", reply), number) / N,
    }


def beyond_the_wire(envs: Any, results: list[Any], number: int) -> dict[str, float]:
    """Per env step (us): our decoding, infos and observation batching of ``results``, against
    gymnasium's SyncVectorEnv batching the same transitions."""
    unwrapped = envs.unwrapped
    episodes = unwrapped.episodes
    space = unwrapped.single_observation_space

    def decode() -> list[Any]:
        return [ep.adapter.decode(r, ep.sent) for ep, r in zip(episodes, results, strict=True)]

    transitions = decode()
    infos = list(enumerate(t.info for t in transitions))
    observations = [t.observation for t in transitions]
    out = unwrapped._observations
    ours = {
        "decode": per_call_us(decode, number) / N,
        "batched infos": per_call_us(lambda: batch_infos(infos, N), number) / N,
        "observations batched": per_call_us(lambda: concatenate(space, observations, out), number) / N,
    }
    ours["ours, together"] = sum(ours.values())
    replay = SyncVectorEnv(
        [_replaying(t, space, unwrapped.single_action_space) for t in transitions],
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )
    replay.reset()
    actions = replay.action_space.sample()
    ours["gymnasium SyncVectorEnv, the same transitions"] = (
        per_call_us(lambda: replay.step(actions), number) / N
    )
    replay.close()
    return ours


def _replaying(transition: Any, observation_space: Any, action_space: Any) -> Callable[[], gym.Env]:
    class Replay(gym.Env):
        """Answers every step with one transition, already decoded: nothing but gymnasium's batching."""

        def __init__(self) -> None:
            self.observation_space, self.action_space = observation_space, action_space

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
            return transition.observation, transition.info

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
            return transition.observation, float(transition.reward), False, False, transition.info

    return Replay


def batch_decoding(results: list[Any], number: int) -> dict[str, float]:
    states = [r.observation["state"] for r in results]
    return {
        "one np.asarray per env": per_call_us(
            lambda: [np.asarray(s, dtype=np.float32) for s in states], number
        )
        / N,
        "one np.array for the batch": per_call_us(lambda: np.array(states, dtype=np.float32), number) / N,
    }


def n_one(rounds: int, steps: int) -> dict[str, dict[str, float]]:
    url = _server("echo")
    makers = {
        "gym.make (one env)": lambda: gym.make("openenv/echo", base_url=url),
        "SyncVectorEnv(1) over it": lambda: SyncVectorEnv([lambda: gym.make("openenv/echo", base_url=url)]),
        "make_vec 1": lambda: gym.make_vec(
            "openenv/echo", 1, base_url=url, vectorization_mode="vector_entry_point"
        ),
        "make_vec 1, multiplex=False (event loop)": lambda: gym.make_vec(
            "openenv/echo", 1, base_url=url, vectorization_mode="vector_entry_point", multiplex=False
        ),
    }
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    for _ in range(rounds):
        for name, make in makers.items():
            env = make()
            samples[name].append(_rate(env, steps, vector="make (one env)" not in name))
            env.close()
    return {
        name: {
            "steps_per_s": statistics.median(r for r, _ in rows),
            "main_thread_cpu_us": statistics.median(c for _, c in rows),
        }
        for name, rows in samples.items()
    }


def _rate(env: Any, steps: int, vector: bool) -> tuple[float, float]:
    env.reset(seed=0)
    action = env.action_space.sample()

    def play(count: int) -> None:
        for _ in range(count):
            _, _, terminated, truncated, _ = env.step(action)
            if not vector and (terminated or truncated):
                env.reset()

    play(max(10, steps // 10))
    wall, cpu = time.perf_counter(), time.thread_time()
    play(steps)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return steps / wall, cpu / steps * 1e6


COLD = """
import time
start = time.perf_counter()
import openenv_lab
print(time.perf_counter() - start)
"""


def cold_start(repeats: int) -> dict[str, float]:
    rows: list[float] = []
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", COLD], capture_output=True, text=True, timeout=120, cwd=ROOT, check=True
        )
        rows.append(float(done.stdout))
    starts = []
    for _ in range(repeats):
        started = time.perf_counter()
        server = EmbeddedServer("echo")
        server.start()
        starts.append(time.perf_counter() - started)
        server.stop()
    return {
        "import openenv_lab_s": statistics.median(rows),
        "embedded echo server start_s": statistics.median(starts),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny numbers, for smoke tests")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    number, rounds, steps, repeats = (20, 1, 50, 1) if args.quick else (2000, 3, 2000, 3)
    report: dict[str, Any] = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "n": N,
        "parsers_us_per_env": {},
        "beyond_the_wire_us_per_env": {},
    }
    import orjson

    report["orjson_on_a_big_integer"] = repr(orjson.loads(b"[-9223372036854775809]")[0])
    for family in FAMILIES:
        envs, results = captured(family)
        report["parsers_us_per_env"][family] = parsers(batch_reply(results), number)
        report["beyond_the_wire_us_per_env"][family] = beyond_the_wire(envs, results, number)
        if family == "finrl":
            report["batch_decoding_us_per_env"] = batch_decoding(results, number)
        envs.close()
    report["n_one"] = n_one(rounds, steps)
    report["cold_start"] = cold_start(repeats)

    print(f"JSON parsers, us per env step (make_vec {N} batch replies)")
    for family, row in report["parsers_us_per_env"].items():
        print(f"  {family:6s} " + "  ".join(f"{k} {v:6.2f}" for k, v in row.items()))
    print(f"  orjson reads -9223372036854775809 as {report['orjson_on_a_big_integer']}")
    print("\nBeyond the wire, us per env step: ours vs gymnasium batching the same transitions")
    for family, row in report["beyond_the_wire_us_per_env"].items():
        print(f"  {family:6s} " + "  ".join(f"{k} {v:6.2f}" for k, v in row.items()))
    print(
        "\nFinRL states, us per env step: "
        + "  ".join(f"{k} {v:.2f}" for k, v in report["batch_decoding_us_per_env"].items())
    )
    print("\nN=1, openenv/echo: steps per second (main thread CPU per step, us)")
    for name, row in report["n_one"].items():
        print(f"  {name:42s} {row['steps_per_s']:8,.0f}   ({row['main_thread_cpu_us']:.0f})")
    c = report["cold_start"]
    print(
        f"\nCold start: import openenv_lab {c['import openenv_lab_s']:.2f} s in a new process (the most a "
        f"lazy package could save a server process); an embedded echo server starts in "
        f"{c['embedded echo server start_s']:.2f} s"
    )
    if args.json:
        write_text_atomically(args.json, json.dumps(report, indent=2) + "\n", what="the results")
        print(f"Results written to {args.json}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
