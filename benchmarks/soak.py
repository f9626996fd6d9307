"""Soak: many sessions for a long time against each server family; steps, errors and server memory.

For each family (echo, chess, Atari, FinRL) one embedded server holds ``--sessions`` sessions for
``--minutes``: half on one vector env over ``/ws/batch``, half on a vector env of plain ``/ws``
connections (``multiplex=False``), which is closed and opened again every ``--churn`` seconds so session
creation and teardown soak too. Episodes end and start again by themselves (autoreset). Any exception is
counted as an error (the env is then opened again, and the soak goes on). The server's resident memory is
read (psutil) after a warm-up and at the end: a leak shows as growth that long runs multiply.

Then the limits: with 50 idle TCP connections held open (half an HTTP request each, as slowloris sends),
the median round trip of a normal session, beside the same without them.

    python benchmarks/soak.py                        # 10 minutes per family, 64 sessions (~42 min)
    python benchmarks/soak.py --minutes 0.2 --quick  # seconds, for smoke tests
    python benchmarks/soak.py --json results/soak.json

Targets: 0 errors, server memory growth under 10% from warm-up to end, and the slowloris ratio near 1.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil

import openenv_lab  # noqa: F401  # registers openenv/* ids
from openenv_lab.client import Session
from openenv_lab.launch import EmbeddedServer

FAMILIES: dict[str, dict[str, Any]] = {
    "echo": {"id": "openenv/echo", "options": {}},
    "chess": {"id": "openenv/chess", "options": {}},
    "atari": {"id": "openenv/atari", "options": {"game": "pong"}},
    "finrl": {"id": "openenv/finrl", "options": {}},
}


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process in MiB (psutil), or None when it cannot be read."""
    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


def actions(envs: gym.vector.VectorEnv, obs: Any, rng: np.random.Generator) -> Any:
    """Random legal actions (masked where the env has a mask)."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in obs["action_mask"]])
    return envs.action_space.sample()


class Driver:
    """One vector env that keeps stepping, reopened after an error or when it is its turn to churn."""

    def __init__(self, family: str, url: str, num_envs: int, multiplex: bool, seed: int) -> None:
        self.family, self.url, self.num_envs, self.multiplex = family, url, num_envs, multiplex
        self.rng = np.random.default_rng(seed)
        self.steps = self.errors = self.episodes = self.reopened = 0
        self.first_error: str | None = None
        self.envs: gym.vector.VectorEnv | None = None
        self.obs: Any = None

    def open(self) -> None:
        spec = FAMILIES[self.family]
        self.envs = gym.make_vec(
            spec["id"], num_envs=self.num_envs, base_url=self.url, multiplex=self.multiplex, **spec["options"]
        )
        self.envs.action_space.seed(int(self.rng.integers(1 << 31)))
        self.obs, _ = self.envs.reset(seed=int(self.rng.integers(1 << 31)))

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None

    def step(self) -> None:
        try:
            if self.envs is None:
                self.open()
            assert self.envs is not None
            self.obs, _, terminated, truncated, _ = self.envs.step(actions(self.envs, self.obs, self.rng))
            self.steps += self.num_envs
            self.episodes += int(np.sum(terminated | truncated))
        except Exception as exc:  # counted, reported, and the soak goes on
            self.errors += 1
            if self.first_error is None:
                where = traceback.extract_tb(exc.__traceback__)[-1]
                self.first_error = (
                    f"{type(exc).__name__}: {exc}"[:300] + f" (at {where.filename}:{where.lineno})"
                )
            try:
                self.close()
            except Exception:
                self.envs = None

    def churn(self) -> None:
        self.close()
        self.reopened += 1


def soak(family: str, minutes: float, sessions: int, churn_s: float, warmup_s: float) -> dict[str, Any]:
    half = max(1, sessions // 2)
    with EmbeddedServer(family, max_sessions=sessions + half) as server:  # room for a churned env's overlap
        assert server.pid is not None and server.base_url is not None
        batched = Driver(family, server.base_url, half, True, seed=1)
        plain = Driver(family, server.base_url, sessions - half, False, seed=2)
        drivers = (batched, plain)
        started = time.monotonic()
        rss_start = None
        last_churn = started
        deadline = started + 60 * minutes
        while time.monotonic() < deadline:
            for driver in drivers:
                driver.step()
            now = time.monotonic()
            if rss_start is None and now - started >= warmup_s:
                rss_start = rss_mib(server.pid)
                steps_at_warmup = sum(d.steps for d in drivers)
            if now - last_churn >= churn_s:
                plain.churn()
                last_churn = now
        elapsed = time.monotonic() - started
        for driver in drivers:
            driver.close()
        rss_end = rss_mib(server.pid)
        if rss_start is None:
            rss_start, steps_at_warmup = rss_end, 0
    steps = sum(d.steps for d in drivers)
    growth = None if not rss_start or rss_end is None else 100 * (rss_end - rss_start) / rss_start
    return {
        "sessions": sessions,
        "seconds": round(elapsed, 1),
        "steps": steps,
        "steps_per_s": round(steps / elapsed, 1),
        "episodes": sum(d.episodes for d in drivers),
        "errors": sum(d.errors for d in drivers),
        "first_error": batched.first_error or plain.first_error,
        "reopened": plain.reopened,
        "server_rss_mib_after_warmup": None if rss_start is None else round(rss_start, 1),
        "server_rss_mib_at_end": None if rss_end is None else round(rss_end, 1),
        "rss_growth_pct": None if growth is None else round(growth, 2),
        "steps_after_warmup": steps - steps_at_warmup,
    }


def round_trips_ms(url: str, count: int) -> list[float]:
    with Session(url) as session:
        session.reset(seed=0)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            session.state()
            times.append(1e3 * (time.perf_counter() - started))
    return times


def slowloris(idle_connections: int, count: int) -> dict[str, Any]:
    """A normal session's round trips with and without ``idle_connections`` half-open requests."""
    with EmbeddedServer("chess") as server:
        assert server.base_url is not None
        host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
        alone = statistics.median(round_trips_ms(server.base_url, count))
        held = []
        try:
            for k in range(idle_connections):
                sock = socket.create_connection((host, int(port)), timeout=10)
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" if k % 2 else b"GET /ws HTTP/1.1\r\nUpg")
                held.append(sock)
            beside = statistics.median(round_trips_ms(server.base_url, count))
        finally:
            for sock in held:
                sock.close()
    return {
        "idle_connections": idle_connections,
        "median_round_trip_ms_alone": round(alone, 3),
        "median_round_trip_ms_beside_idle": round(beside, 3),
        "ratio": round(beside / alone, 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="per family (default: %(default)g)")
    parser.add_argument("--sessions", type=int, default=64, help="per family (default: %(default)d)")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    parser.add_argument("--churn", type=float, default=30.0, help="seconds between reopenings")
    parser.add_argument("--quick", action="store_true", help="8 sessions, short warm-up: a smoke test")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    args = parser.parse_args(argv)
    sessions = 8 if args.quick else args.sessions
    warmup_s = 2.0 if args.quick else 60.0
    churn_s = 3.0 if args.quick else args.churn
    results: dict[str, Any] = {"soak": {}, "slowloris": None}
    print(
        f"Soak: {sessions} sessions per family, {args.minutes:g} min each (memory from after {warmup_s:g} s)"
    )
    header = f"{'family':<7}{'steps':>11}{'steps/s':>10}{'episodes':>10}{'errors':>8}"
    print(header + f"{'reopened':>10}{'RSS start':>11}{'RSS end':>9}{'growth':>8}")
    for family in args.families.split(","):
        row = soak(family, args.minutes, sessions, churn_s, warmup_s)
        results["soak"][family] = row
        start, end, growth = (
            row[k] for k in ("server_rss_mib_after_warmup", "server_rss_mib_at_end", "rss_growth_pct")
        )
        print(
            f"{family:<7}{row['steps']:>11,}{row['steps_per_s']:>10,.0f}{row['episodes']:>10,}{row['errors']:>8}"
            f"{row['reopened']:>10}{start:>8.1f}MiB{end:>6.1f}MiB{growth:>7.1f}%"
        )
        if row["first_error"]:
            print(f"        first error: {row['first_error']}")
    results["slowloris"] = slowloris(50, 50 if args.quick else 500)
    loris = results["slowloris"]
    print(
        f"\nSlowloris: a session's median round trip {loris['median_round_trip_ms_alone']:.2f} ms alone, "
        f"{loris['median_round_trip_ms_beside_idle']:.2f} ms beside {loris['idle_connections']} idle "
        f"connections ({loris['ratio']:.2f}x)"
    )
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))
        print(f"Results written to {path}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
