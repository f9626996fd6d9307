"""Step latency of ``gym.make("openenv/chess")`` against the raw protocol and the official client.

All the clients replay the *same* games on the *same* embedded server: the script first records the
moves of seeded games through our gymnasium env, then replays those seeds and moves through it, through
our `Session` alone, with a raw ``websockets`` client and with ``openenv``'s ``GenericEnvClient.sync()``.
The server does identical work for each, so the differences are the clients'. Rounds are interleaved to
spread machine noise evenly.

Also measured: cold ``gym.make`` (starting the embedded server) and warm ``gym.make`` (server running).

    python benchmarks/step_latency.py                 # about a minute
    python benchmarks/step_latency.py --quick         # a few seconds, for smoke tests
    python benchmarks/step_latency.py --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

Script = list[tuple[int, list[str]]]  # (seed, agent moves) per game


def record_games(env: gym.Env, games: int, max_steps: int) -> tuple[Script, list[float]]:
    """Play seeded random games through the gym env; return their moves and each env.step latency."""
    script: Script = []
    latencies: list[float] = []
    adapter = env.unwrapped.adapter
    for seed in range(games):
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        moves: list[str] = []
        for _ in range(max_steps):
            action = env.action_space.sample(mask=obs["action_mask"])
            moves.append(adapter.action_to_move(action))
            start = time.perf_counter()
            obs, _, terminated, truncated, _ = env.step(action)
            latencies.append(time.perf_counter() - start)
            if terminated or truncated:
                break
        script.append((seed, moves))
    return script, latencies


class GymReplayer:
    def __init__(self, env: gym.Env) -> None:
        self.env = env

    def replay(self, seed: int, moves: list[str]) -> list[float]:
        latencies = []
        adapter = self.env.unwrapped.adapter
        self.env.reset(seed=seed)
        for move in moves:
            action = adapter.move_to_action(move)
            start = time.perf_counter()
            self.env.step(action)
            latencies.append(time.perf_counter() - start)
        return latencies

    def close(self) -> None:
        pass


class SessionReplayer:
    """Our `Session` without gymnasium: on loopback it reads replies in this thread (``client/_direct.py``),
    where the raw client below (websockets' threaded sync client) hands each one over from its reader."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        from openenv_lab.client import Session

        self.options = options
        self.session = Session(url)

    def replay(self, seed: int, moves: list[str]) -> list[float]:
        latencies = []
        self.session.reset(seed=seed, **self.options)
        for move in moves:
            start = time.perf_counter()
            self.session.step({"move": move})
            latencies.append(time.perf_counter() - start)
        return latencies

    def close(self) -> None:
        self.session.close()


class RawReplayer:
    """The protocol by hand: json + websockets, nothing else."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        from websockets.sync.client import connect

        self.options = options
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(url.replace("http", "ws") + "/ws", max_size=None, compression=None, proxy=None)
        )

    def replay(self, seed: int, moves: list[str]) -> list[float]:
        latencies = []
        self.ws.send(json.dumps({"type": "reset", "data": {"seed": seed, **self.options}}))
        json.loads(self.ws.recv())
        for move in moves:
            start = time.perf_counter()
            self.ws.send(json.dumps({"type": "step", "data": {"move": move}}))
            json.loads(self.ws.recv())
            latencies.append(time.perf_counter() - start)
        return latencies

    def close(self) -> None:
        self._stack.close()


class OfficialReplayer:
    """openenv's own client, as its documentation uses it (GenericEnvClient(...).sync())."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        from openenv.core import GenericEnvClient

        self.options = options
        self.client = GenericEnvClient(base_url=url).sync()
        self.client.connect()

    def replay(self, seed: int, moves: list[str]) -> list[float]:
        latencies = []
        self.client.reset(seed=seed, **self.options)
        for move in moves:
            start = time.perf_counter()
            self.client.step({"move": move})
            latencies.append(time.perf_counter() - start)
        return latencies

    def close(self) -> None:
        self.client.close()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=8, help="seeded games in the script")
    parser.add_argument("--max-steps", type=int, default=60, help="agent moves per game at most")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved replays per client")
    parser.add_argument("--makes", type=int, default=20, help="warm gym.make calls to time")
    parser.add_argument("--quick", action="store_true", help="tiny numbers, for smoke tests")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.games, args.max_steps, args.rounds, args.makes = 2, 10, 1, 3

    import openenv_lab
    from openenv_lab.launch import stop_embedded_servers
    from openenv_lab.servers import import_openenv_server

    options = {"agent_color": "white", "opponent": "random"}
    cold_make, env = timed(lambda: gym.make("openenv/chess", **options))
    url = env.unwrapped.base_url
    warm_makes = []
    for _ in range(args.makes):
        seconds, other = timed(lambda: gym.make("openenv/chess", **options))
        warm_makes.append(seconds)
        other.close()

    script, _ = record_games(env, args.games, args.max_steps)
    import_openenv_server()  # the official client lives in openenv.core; import it before timing
    replayers = {
        "ours (gym.make env)": GymReplayer(env),
        "ours (Session, no gym)": SessionReplayer(url, options),
        "raw websockets": RawReplayer(url, options),
        "official GenericEnvClient": OfficialReplayer(url, options),
    }
    results: dict[str, list[float]] = {name: [] for name in replayers}
    names = list(replayers)
    # Interleave game by game, rotating who goes first, so machine noise falls evenly on all of them.
    for round_number in range(args.rounds):
        for game_number, (seed, moves) in enumerate(script):
            shift = (round_number + game_number) % len(names)
            for name in names[shift:] + names[:shift]:
                results[name].extend(replayers[name].replay(seed, moves))
    for replayer in replayers.values():
        replayer.close()
    env.close()
    stop_embedded_servers()

    steps = sum(len(moves) for _, moves in script)
    raw_median = statistics.median(results["raw websockets"])
    report: dict[str, Any] = {
        "benchmark": "step_latency",
        "openenv_lab": openenv_lab.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "steps_per_round": steps,
        "rounds": args.rounds,
        "cold_make_s": cold_make,
        "warm_make_median_ms": 1000 * statistics.median(warm_makes),
        "step": {
            name: {
                "median_us": 1e6 * statistics.median(values),
                "p95_us": 1e6 * percentile(values, 0.95),
                "vs_raw": statistics.median(values) / raw_median,
            }
            for name, values in results.items()
        },
    }
    print(f"openenv_lab {report['openenv_lab']} on Python {report['python']}, {report['machine']}")
    print(f"{steps} chess steps per round x {args.rounds} rounds, same seeds and moves for every client\n")
    print(f"{'client':<28}{'median us':>12}{'p95 us':>12}{'x raw':>8}")
    for name, row in report["step"].items():
        print(f"{name:<28}{row['median_us']:>12.0f}{row['p95_us']:>12.0f}{row['vs_raw']:>8.2f}")
    ours = report["step"]["ours (gym.make env)"]["median_us"]
    official = report["step"]["official GenericEnvClient"]["median_us"]
    print(f"\nours / official: {ours / official:.2f}")
    print(f"gym.make cold (starts the embedded server): {cold_make:.2f} s")
    print(f"gym.make warm (server running), median of {args.makes}: {report['warm_make_median_ms']:.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
