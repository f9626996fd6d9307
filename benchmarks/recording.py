"""What recording a long run costs: save time per episode and process memory, first thousand against last.

A recorder with ``path=...`` appends each finished episode's rows as a part (`openenv_lab.record.parts`),
so its cost per episode should not grow with what was recorded before, and its memory should stay flat.
This script plays random episodes through `RecordTrajectory` (one env) and `RecordVectorTrajectory`
(``gym.make_vec``, 16 envs) of chess (2 half-moves a game) and Atari (Breakout, RGB screens recorded as
PNG, 8 frames a game), times every save (the parts written and merged, `PartsWriter.append`) and reads
the process's resident memory (RSS) after each thousand episodes (the mean save time of a thousand, and
its typical save: the median save spread over the thousand, which the machine's other work moves less);
then the whole recording's final write
(``close()``) and the time `load_trajectory` takes to read it back. For scale, the same env's episodes
without a recorder are timed too.

    python benchmarks/recording.py --json benchmarks/results/recording.json   # 20,000 episodes a run
    python benchmarks/recording.py --quick                                    # seconds, for smoke tests
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stamp import stamp  # noqa: E402  # benchmarks/, this script's folder

import openenv_lab  # noqa: E402
from openenv_lab.files import write_text_atomically  # noqa: E402
from openenv_lab.record import parts as parts_module  # noqa: E402

RUNS = {
    "chess": ("openenv/chess", {"max_moves": 2, "opponent": "random"}),
    "Atari screens": ("openenv/atari", {"game": "breakout", "max_num_frames_per_episode": 8}),
}
SIZES = (1, 16)


class SaveClock:
    """Times every `PartsWriter.append` (a part, and a merge when one is due)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.saves: list[float] = []  # each save's seconds since the last bucket
        self._append = parts_module.PartsWriter.append
        clock = self

        def timed(writer: Any, rows: Any, metadata: Any) -> None:
            started = time.perf_counter()
            try:
                clock._append(writer, rows, metadata)
            finally:
                took = time.perf_counter() - started
                clock.seconds += took
                clock.saves.append(took)

        parts_module.PartsWriter.append = timed  # type: ignore[method-assign]

    def stop(self) -> None:
        parts_module.PartsWriter.append = self._append  # type: ignore[method-assign]


def play(envs: Any, num_envs: int, episodes: int, on_episodes: Any = None) -> None:
    """Random actions until ``episodes`` episodes have ended; ``on_episodes(n)`` after each step."""
    rng = np.random.default_rng(0)
    space = envs.single_action_space if num_envs > 1 else envs.action_space
    done = 0
    observation, _ = envs.reset(seed=0)
    while done < episodes:
        if num_envs == 1:
            _, _, terminated, truncated, _ = envs.step(_action(space, rng, observation))
            if terminated or truncated:
                done += 1
                observation, _ = envs.reset()
        else:
            actions = [_action(space, rng, _index(observation, i)) for i in range(num_envs)]
            observation, _, terminated, truncated, _ = envs.step(np.array(actions))
            done += int(np.logical_or(terminated, truncated).sum())
        if on_episodes is not None:
            on_episodes(done)


def _index(observation: Any, i: int) -> Any:
    return {key: value[i] for key, value in observation.items()} if isinstance(observation, dict) else None


def _action(space: Any, rng: np.random.Generator, observation: Any) -> int:
    if isinstance(observation, dict) and "action_mask" in observation:
        return int(rng.choice(np.flatnonzero(observation["action_mask"])))
    return int(rng.integers(space.n))


def make(env_id: str, options: dict[str, Any], num_envs: int) -> Any:
    return (
        gym.make(env_id, **options) if num_envs == 1 else gym.make_vec(env_id, num_envs=num_envs, **options)
    )


def measure(
    env_id: str, options: dict[str, Any], num_envs: int, episodes: int, bucket: int
) -> dict[str, Any]:
    process = psutil.Process()
    plain = make(env_id, options, num_envs)
    try:
        started = time.perf_counter()
        play(plain, num_envs, bucket)
        plain_ms = 1e3 * (time.perf_counter() - started) / bucket
    finally:
        plain.close()
    folder = Path(tempfile.mkdtemp(prefix="openenv-lab-recording-"))
    path = folder / "run.parquet"
    recorder_class = openenv_lab.RecordTrajectory if num_envs == 1 else openenv_lab.RecordVectorTrajectory
    clock = SaveClock()
    buckets: list[dict[str, float]] = []
    state = {"next": bucket, "saved": 0.0, "time": time.perf_counter()}

    def on_episodes(done: int) -> None:
        while done >= state["next"] and len(buckets) < episodes // bucket:
            now = time.perf_counter()
            saves = clock.saves or [0.0]
            buckets.append(
                {
                    "save_ms_per_episode": 1e3 * (clock.seconds - state["saved"]) / bucket,
                    # the typical save of the bucket, spread over its episodes: spikes from the machine's
                    # other work (a noisy 2-core box) move the mean, not this
                    "median_save_ms_per_episode": 1e3 * statistics.median(saves) * len(saves) / bucket,
                    "episode_ms": 1e3 * (now - state["time"]) / bucket,
                    "rss_mb": process.memory_info().rss / 2**20,
                }
            )
            clock.saves = []
            state.update(next=state["next"] + bucket, saved=clock.seconds, time=now)

    envs = recorder_class(make(env_id, options, num_envs), path=path)
    try:
        play(envs, num_envs, episodes, on_episodes)
        started = time.perf_counter()
        envs.close()
        close_s = time.perf_counter() - started
    finally:
        clock.stop()
    started = time.perf_counter()
    loaded = openenv_lab.load_trajectory(path)
    summary = loaded.summary()
    load_s = time.perf_counter() - started
    first, last = buckets[0], buckets[-1]
    result = {
        "episodes": summary.height,
        "rows": len(loaded),
        "file_mb": round(path.stat().st_size / 2**20, 2),
        "plain_episode_ms": round(plain_ms, 3),
        "first_save_ms": round(first["save_ms_per_episode"], 3),
        "last_save_ms": round(last["save_ms_per_episode"], 3),
        "save_last_over_first": round(last["save_ms_per_episode"] / first["save_ms_per_episode"], 3),
        "median_last_over_first": round(
            last["median_save_ms_per_episode"] / first["median_save_ms_per_episode"], 3
        ),
        "first_episode_ms": round(first["episode_ms"], 3),
        "last_episode_ms": round(last["episode_ms"], 3),
        "first_rss_mb": round(first["rss_mb"], 1),
        "last_rss_mb": round(last["rss_mb"], 1),
        "median_save_ms": round(statistics.median(b["save_ms_per_episode"] for b in buckets), 3),
        "close_s": round(close_s, 2),
        "load_summary_s": round(load_s, 2),
        "buckets": [{key: round(value, 3) for key, value in b.items()} for b in buckets],
    }
    for leftover in folder.iterdir():
        leftover.unlink()
    folder.rmdir()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000, help="episodes a run (default 20,000)")
    parser.add_argument("--quick", action="store_true", help="300 episodes a run, for smoke tests")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    episodes, bucket = (300, 100) if args.quick else (args.episodes, 1_000)
    rows: dict[str, dict[str, Any]] = {}
    for name, (env_id, options) in RUNS.items():
        for num_envs in SIZES:
            label = f"{name}, {num_envs} env{'s' if num_envs > 1 else ''}"
            rows[label] = row = measure(env_id, options, num_envs, episodes, bucket)
            print(
                f"{label:22} save/episode first {row['first_save_ms']:.2f} ms, "
                f"last {row['last_save_ms']:.2f} ms ({row['save_last_over_first']:.2f}x, median "
                f"{row['median_last_over_first']:.2f}x); "
                f"RSS {row['first_rss_mb']:.0f} -> {row['last_rss_mb']:.0f} MB; "
                f"close {row['close_s']:.1f} s; {row['rows']:,} rows, {row['file_mb']} MB",
                flush=True,
            )
    report = {**stamp(), "episodes": episodes, "bucket": bucket, "rows": rows}
    if args.json:
        write_text_atomically(args.json, json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
