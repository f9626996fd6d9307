"""`bench`: a quick health and speed check of any OpenEnv environment, local or remote.

``openenv_lab.bench("openenv/chess")`` (or ``openenv-lab bench chess --base-url URL``) plays random
actions for a while and reports what a user wants to know before training on a server: step latency
(p50/p95), bytes per step, how many sessions the server accepts, and whether it honours seeds.

Example:
    >>> import openenv_lab
    >>> report = openenv_lab.bench("openenv/echo", steps=20)
    >>> report.seeds_honoured, report.max_sessions
    (True, 256)
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import data_equivalence

from .adapters.generic import legal_choice
from .client import CapacityError, Client, OpenEnvError, Session

__all__ = ["BenchReport", "bench", "random_action"]

#: Sessions opened at most when a server does not report its capacity.
PROBE_LIMIT = 16


@dataclass
class BenchReport:
    """What `bench` measured. Latencies in milliseconds."""

    env_id: str
    base_url: str
    steps: int
    p50_ms: float
    p95_ms: float
    bytes_per_step: float
    max_sessions: int | None
    max_sessions_note: str
    seeds_honoured: bool
    seed_note: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        sessions = self.max_sessions if self.max_sessions is not None else "?"
        return (
            f"{self.env_id} at {self.base_url}\n"
            f"  step latency   p50 {self.p50_ms:.2f} ms, p95 {self.p95_ms:.2f} ms ({self.steps} steps)\n"
            f"  bytes per step {self.bytes_per_step:,.0f} (both directions)\n"
            f"  sessions       {sessions} ({self.max_sessions_note})\n"
            f"  seeds          {'honoured' if self.seeds_honoured else 'NOT honoured'} ({self.seed_note})"
        )


def bench(
    env_id: str, *, base_url: str | None = None, steps: int = 200, seed: int = 0, **options: Any
) -> BenchReport:
    """Measure ``env_id`` (``"openenv/chess"`` or just ``"chess"``) on its embedded server or ``base_url``."""
    if "/" not in env_id:
        env_id = f"openenv/{env_id}"
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the report says what the seed warning would
        env = gym.make(env_id, base_url=base_url, **{**options, "raw_info": True})  # seeds: the metadata
        try:
            unwrapped = env.unwrapped
            url = unwrapped.base_url
            honoured, seed_note = _seeds(env, seed)
            latencies, transferred = _latencies(env, steps, seed)
            max_sessions, note = _capacity(url, unwrapped.client)
        finally:
            env.close()
    return BenchReport(
        env_id=env_id,
        base_url=url,
        steps=steps,
        p50_ms=1e3 * float(np.percentile(latencies, 50)),
        p95_ms=1e3 * float(np.percentile(latencies, 95)),
        bytes_per_step=transferred / steps,
        max_sessions=max_sessions,
        max_sessions_note=note,
        seeds_honoured=honoured,
        seed_note=seed_note,
    )


def random_action(env: gym.Env, observation: Any, info: dict[str, Any] | None = None) -> Any:
    """A random action, among the legal ones where the observation has an ``action_mask``, or where the
    server lists them (`GenericAdapter.legal_actions`, for an integer action without bounds)."""
    if isinstance(observation, dict) and "action_mask" in observation and np.any(observation["action_mask"]):
        return env.action_space.sample(mask=np.asarray(observation["action_mask"], dtype=np.int8))
    listing = getattr(getattr(env.unwrapped, "adapter", None), "legal_actions", None)
    chosen = legal_choice(
        env.action_space, listing() if callable(listing) else (info or {}).get("legal_actions")
    )
    return chosen if chosen is not None else env.action_space.sample()


def _latencies(env: gym.Env, steps: int, seed: int) -> tuple[list[float], int]:
    session: Session = env.unwrapped.session
    env.action_space.seed(seed)
    observation, info = env.reset(seed=seed)
    latencies: list[float] = []
    transferred = 0
    while len(latencies) < steps:
        action = random_action(env, observation, info)
        before = session.bytes_sent + session.bytes_received
        start = time.perf_counter()
        observation, _, terminated, truncated, info = env.step(action)
        latencies.append(time.perf_counter() - start)
        transferred += session.bytes_sent + session.bytes_received - before
        if terminated or truncated:
            observation, info = env.reset()
            session = env.unwrapped.session
    return latencies, transferred


def _seeds(env: gym.Env, seed: int) -> tuple[bool, str]:
    """Reset twice with one seed and once with another, playing a few steps each time."""

    confirmed = []

    def trajectory(value: int) -> list[Any]:
        env.action_space.seed(value)
        observation, info = env.reset(seed=value)
        confirmed.append(info["metadata"].get("seed") == value)
        seen = [observation]
        for _ in range(5):
            observation, _, terminated, truncated, info = env.step(random_action(env, observation, info))
            seen.append(observation)
            if terminated or truncated:
                break
        return seen

    first, again = trajectory(seed), trajectory(seed)
    if not data_equivalence(first, again):
        return False, "the same seed gave different episodes"
    if all(confirmed):
        return True, "the same seed replays the episode, and the server confirms applying it"
    return True, "the same seed replayed the episode, but the server does not confirm seeds"


def _capacity(url: str, client: Client) -> tuple[int | None, str]:
    try:
        capacity = client.capacity()
    except OpenEnvError:
        capacity = None
    if capacity is not None:
        return int(capacity["max_sessions"]), f"{capacity['active_sessions']} in use, from GET /capacity"
    sessions: list[Session] = []
    try:
        while len(sessions) < PROBE_LIMIT:
            try:
                sessions.append(Session(url))
            except CapacityError as exc:
                total = exc.max_sessions if exc.max_sessions is not None else len(sessions) + 1
                return total, "found by opening sessions until the server refused"
        return None, f"accepted {PROBE_LIMIT} more sessions without refusing; the probe stopped there"
    finally:
        for session in sessions:
            session.close()
