"""Steps per second of ``openenv/atari`` and ``openenv/finrl`` against the same environments in process.

Atari: Pong with frameskip 4 and no sticky actions, driven with the same actions through
``gym.make("openenv/atari")`` (screen deltas, the default; zlib; raw; the official JSON list) and through
ale-py's own ``gym.make("ALE/Pong-v5")`` in this process. FinRL: random actions on the synthetic market
through ``gym.make("openenv/finrl")``, against the trading simulator called directly, and against our
OpenEnv environment class called in process (the server's work without the network), and through a
vector env of 16 (``gym.make_vec``: all its environment steps counted). Both also run
``gym.make("openenv/echo")``, a server that does no work: its round trip is the least any remote step costs
on this machine, so each table ends with the best ratio a remote env could reach here (the in-process
work plus that round trip, against the work alone). One run, interleaved.

    python benchmarks/env_throughput.py            # about a minute
    python benchmarks/env_throughput.py --quick    # a few seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np

gym.register_envs(ale_py)


def steps_per_second(step: Callable[[int], Any], steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    return steps / (time.perf_counter() - start)


def gym_stepper(env: gym.Env, actions: np.ndarray) -> Callable[[int], Any]:
    def step(i: int) -> None:
        _, _, terminated, truncated, _ = env.step(actions[i % len(actions)])
        if terminated or truncated:
            env.reset()

    return step


ECHO = "openenv/echo: the round trip alone"
VECTOR_ENVS = 16
VECTOR = f"openenv/finrl, make_vec of {VECTOR_ENVS}"


def echo_env() -> tuple[gym.Env, list[Any]]:
    env = gym.make("openenv/echo")
    env.action_space.seed(0)
    return env, [env.action_space.sample() for _ in range(100)]


def ceiling(rates: dict[str, float], work: str) -> float:
    """The best steps/s ratio to ``work`` a remote env can reach here: its work plus an empty round trip."""
    return rates[ECHO] / (rates[ECHO] + rates[work])


def atari(steps: int, rounds: int) -> dict[str, float]:
    actions = np.random.default_rng(0).integers(0, 6, 1000)
    echo, echo_actions = echo_env()
    envs = {
        "in-process ALE/Pong-v5": gym.make("ALE/Pong-v5", repeat_action_probability=0.0),
        "openenv/atari, screen deltas": gym.make("openenv/atari", game="pong"),
        "openenv/atari, zlib screens": gym.make("openenv/atari", game="pong", screen_encoding="zlib"),
        "openenv/atari, raw screens": gym.make("openenv/atari", game="pong", screen_encoding="raw"),
        "openenv/atari, JSON screens": gym.make("openenv/atari", game="pong", screen_encoding="json"),
        ECHO: echo,
    }
    rates: dict[str, list[float]] = {name: [] for name in envs}
    for env in envs.values():
        env.reset(seed=0)
    for _ in range(rounds):
        for name, env in envs.items():
            # JSON screens are ~50x slower: fewer steps keep the run short without changing the rate.
            count = max(20, steps // 20) if "JSON" in name else steps
            stepper = gym_stepper(env, echo_actions if name == ECHO else actions)
            rates[name].append(steps_per_second(stepper, count))
    for env in envs.values():
        env.close()
    return {name: float(np.median(values)) for name, values in rates.items()}


def finrl(steps: int, rounds: int) -> dict[str, float]:
    from openenv_lab.market.trading import StockTradingSimulator
    from openenv_lab.servers.finrl import FinRLAction, FinRLEnvironment, load_market

    actions = np.random.default_rng(0).uniform(-1, 1, (1000, 5)).astype(np.float32)
    env = gym.make("openenv/finrl")
    echo, echo_actions = echo_env()
    market = load_market()
    simulator = StockTradingSimulator(market.splits["train"], market.config)
    environment = FinRLEnvironment(market)

    def simulate(i: int) -> None:
        if simulator.step(actions[i % len(actions)])[2]:
            simulator.reset()

    def environment_step(i: int) -> None:
        if environment.step(FinRLAction(actions=actions[i % len(actions)].tolist())).done:
            environment.reset()

    vector = gym.make_vec("openenv/finrl", num_envs=VECTOR_ENVS)
    batches = np.random.default_rng(1).uniform(-1, 1, (100, VECTOR_ENVS, 5)).astype(np.float32)

    def vector_step(i: int) -> None:
        if i % VECTOR_ENVS == 0:  # one vector step makes VECTOR_ENVS environment steps
            vector.step(batches[(i // VECTOR_ENVS) % len(batches)])

    runners = {
        "in-process simulator": simulate,
        "in-process OpenEnv environment class": environment_step,
        "openenv/finrl (gym.make)": gym_stepper(env, actions),
        ECHO: gym_stepper(echo, echo_actions),
        VECTOR: vector_step,
    }
    env.reset(seed=0)
    vector.reset(seed=0)
    echo.reset(seed=0)
    simulator.reset()
    environment.reset()
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, runner in runners.items():
            rates[name].append(steps_per_second(runner, steps))
    env.close()
    echo.close()
    vector.close()
    return {name: float(np.median(values)) for name, values in rates.items()}


def table(title: str, rates: dict[str, float], reference: str) -> None:
    print(f"\n{title}")
    print(f"{'':<40}{'steps/s':>10}{'x ' + reference:>28}")
    for name, rate in rates.items():
        print(f"{name:<40}{rate:>10.0f}{rate / rates[reference]:>28.2f}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 60, 1

    import openenv_lab
    from openenv_lab.launch import stop_embedded_servers

    atari_rates = atari(args.steps, args.rounds)
    finrl_rates = finrl(args.steps, args.rounds)
    stop_embedded_servers()
    report = {
        "benchmark": "env_throughput",
        "openenv_lab": openenv_lab.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "atari_steps_per_s": atari_rates,
        "finrl_steps_per_s": finrl_rates,
    }
    print(
        f"openenv_lab {report['openenv_lab']}, Python {report['python']}, {report['machine']}; one env each"
    )
    table("Atari (Pong, frameskip 4)", atari_rates, "in-process ALE/Pong-v5")
    print(
        f"{'best a remote env could do here (its work + the round trip)':<68}"
        f"{ceiling(atari_rates, 'in-process ALE/Pong-v5'):.2f}"
    )
    table("FinRL (5 tickers, synthetic market)", finrl_rates, "in-process simulator")
    work = "in-process OpenEnv environment class"
    ratio = finrl_rates["openenv/finrl (gym.make)"] / finrl_rates[work]
    print(f"{'openenv/finrl vs the in-process environment class':<68}{ratio:.2f}")
    print(f"{'best a remote env could do here vs the environment class':<68}{ceiling(finrl_rates, work):.2f}")
    label = f"{VECTOR} (all its steps) vs the class"
    print(f"{label:<68}{finrl_rates[VECTOR] / finrl_rates[work]:.2f}")
    report["ceilings"] = {
        "atari_vs_in_process": ceiling(atari_rates, "in-process ALE/Pong-v5"),
        "finrl_vs_environment_class": ceiling(finrl_rates, work),
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
