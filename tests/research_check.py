"""Research libraries' own loops over our ids: TorchRL, Tianshou, RL Zoo and Minari, as their users write
them.

Run by the interpreter of a venv that has them (``$OPENENV_LAB_RESEARCH_PYTHON``; .ci/run makes it:
Tianshou pins pandas below 3, which the main test environment's is not), one library per call:
``python tests/research_check.py torchrl``. It prints one ``RESULT {json}`` line that
tests/test_research_libraries.py checks: for each family, the episode ends each loop crossed and what
the library made of our spaces and infos. Nothing here wraps our envs: each loop gets ``gym.make``'s
ids (or our ids by name), the way the library's own docs build theirs.

The short episodes come from our ids' own options: chess with ``max_moves=5``, Breakout's RAM with a
frame limit, FinRL's trade split (223 days), echo with ``max_steps=5``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import openenv_lab  # noqa: F401 - registers the ids

#: Each family's id and the options that make its episodes short.
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "chess": ("openenv/chess", {"max_moves": 5}),
    "atari": ("openenv/Breakout-ram-v5", {"max_num_frames_per_episode": 400}),
    "finrl": ("openenv/finrl", {"split": "trade"}),
    "echo": ("openenv/echo", {"max_steps": 5}),
}


def torchrl_loops() -> dict[str, Any]:
    """TorchRL 0.14: ``GymEnv(id, num_envs=2)`` (gymnasium's AsyncVectorEnv inside, our infos read into
    the TensorDict), ``ParallelEnv`` of ``GymEnv(id)``, ``check_env_specs`` on each, and a ``Collector``."""
    import torch
    from torchrl.collectors import Collector, RandomPolicy
    from torchrl.envs import DTypeCastTransform, GymEnv, ParallelEnv, TransformedEnv
    from torchrl.envs.utils import check_env_specs
    from torchrl.modules import QValueActor

    def masked(env: Any) -> tuple[Any, Any]:
        """gymnasium's MultiBinary mask is int8 and TorchRL's QValueActor masks with bools: TorchRL's own
        cast makes it one, and a (tiny, untrained) Q-network picks among the legal moves."""
        env = TransformedEnv(env, DTypeCastTransform(torch.int8, torch.bool, in_keys=["action_mask"]))
        check_env_specs(env)
        net = torch.nn.Sequential(torch.nn.Flatten(-3), torch.nn.Linear(19 * 64, 4672))
        return env, QValueActor(net, in_keys=["board"], spec=env.action_spec, action_mask_key="action_mask")

    report: dict[str, Any] = {}
    for family in ("chess", "atari", "finrl"):
        env_id, options = FAMILIES[family]
        if family == "atari":
            # TorchRL makes every id with frameskip=frame_skip (1 unless told), ALE's as ours.
            options = {**options, "frame_skip": 4}
        started = time.perf_counter()
        # Batched: TorchRL's info reader types each key from its first value and stacks numbers only.
        batched = GymEnv(env_id, num_envs=2, text_info=False, **options)
        check_env_specs(batched)
        policy = None
        if family == "chess":
            batched, policy = masked(batched)
        rollout = batched.rollout(240, policy, break_when_any_done=False)
        stepped = rollout["next"].keys()  # a TensorDict iterates over its batch, not its keys
        info_keys = sorted(k for k in stepped if k not in ("observation", "done", "reward"))
        batched_ends = int(rollout["next", "done"].sum())
        batched.close()
        # ParallelEnv of single envs, and a collector driving it.
        parallel = ParallelEnv(2, functools.partial(GymEnv, env_id, **options))
        check_env_specs(parallel)
        if family == "chess":
            parallel, policy = masked(parallel)
        else:
            policy = RandomPolicy(parallel.full_action_spec)
        collector = Collector(parallel, policy, frames_per_batch=120, total_frames=480)
        collected = collected_ends = illegal = 0
        for batch in collector:
            collected += batch.numel()
            collected_ends += int(batch["next", "done"].sum())
            if family == "chess":
                chosen = batch["action"].bool() & ~batch["action_mask"]
                illegal += int(chosen.any(-1).sum())
        collector.shutdown()
        report[family] = {
            "batched_ends": batched_ends,
            "batched_info_keys": info_keys,
            "collected": collected,
            "collected_ends": collected_ends,
            "illegal": illegal,
            "seconds": round(time.perf_counter() - started, 1),
        }
    # Echo's action is text: a single GymEnv plays it (TorchRL's NonTensor spec); TorchRL's batched
    # machinery does not batch text actions (see the test's docstring).
    env_id, options = FAMILIES["echo"]
    single = GymEnv(env_id, **options)
    check_env_specs(single)
    rollout = single.rollout(12, break_when_any_done=False)
    report["echo"] = {"single_ends": int(rollout["next", "done"].sum()), "steps": rollout.numel()}
    single.close()
    return report


def tianshou_loops() -> dict[str, Any]:
    """Tianshou 2.0: its ``Collector`` over ``DummyVectorEnv`` and ``SubprocVectorEnv`` of ``gym.make``
    for each family, into its replay buffer (which refuses NaNs), and DQN trained by its
    ``OffPolicyTrainer`` on Breakout's RAM for a few hundred steps."""
    import torch
    from tianshou.algorithm import DQN
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Batch, Collector, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv, SubprocVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams
    from tianshou.utils.net.common import Net

    class LegalMoves(Policy):
        """Uniform among the legal actions the observation's ``action_mask`` allows (chess)."""

        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Any:
            mask = np.asarray(batch.obs.action_mask).astype(bool)
            scores = np.random.rand(*mask.shape)
            scores[~mask] = -np.inf
            return Batch(act=scores.argmax(-1))

    class RandomPolicy(Policy):
        """Never asked: the collector samples the action spaces itself (``random=True``)."""

        def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Any:
            raise AssertionError("collect(random=True) does not ask the policy")

    report: dict[str, Any] = {}
    for family, (env_id, options) in FAMILIES.items():
        report[family] = {}
        for name, kind in (("dummy", DummyVectorEnv), ("subproc", SubprocVectorEnv)):
            started = time.perf_counter()
            envs = kind([functools.partial(gym.make, env_id, **options) for _ in range(2)])
            buffer = VectorReplayBuffer(2000, len(envs))
            space = envs.action_space[0]
            if family == "chess":
                collector = Collector(LegalMoves(action_space=space), envs, buffer)
                collector.reset()
                stats = collector.collect(n_step=600)
            else:
                # The collector's own random actions (``random=True``: each env's action space samples);
                # the policy is not asked, and Tianshou's policies take no text actions (echo's).
                placeholder = gym.spaces.Discrete(1) if isinstance(space, gym.spaces.Text) else space
                collector = Collector(RandomPolicy(action_space=placeholder), envs, buffer)
                collector.reset()
                stats = collector.collect(n_step=600, random=True)
            episodes = int(stats.n_collected_episodes)
            sample, _ = buffer.sample(8)
            report[family][name] = {
                "steps": int(stats.n_collected_steps),
                "episodes": episodes,
                "info_keys": sorted(sample.info.keys()),
                "seconds": round(time.perf_counter() - started, 1),
            }
            envs.close()
    # DQN on Breakout's RAM, trained by Tianshou's off-policy trainer over SubprocVectorEnv.
    env_id, options = FAMILIES["atari"]
    train_envs = SubprocVectorEnv([functools.partial(gym.make, env_id, **options) for _ in range(2)])
    test_envs = DummyVectorEnv([functools.partial(gym.make, env_id, **options)])
    space = gym.make(env_id, **options)
    net = Net(state_shape=space.observation_space.shape, action_shape=space.action_space.n, hidden_sizes=[64])
    policy = DiscreteQLearningPolicy(model=net, action_space=space.action_space, eps_training=0.2)
    space.close()
    algorithm = DQN(policy=policy, optim=AdamOptimizerFactory(lr=1e-3), target_update_freq=50)
    train_collector = Collector(policy, train_envs, VectorReplayBuffer(2000, 2), exploration_noise=True)
    test_collector = Collector(policy, test_envs)
    started = time.perf_counter()
    result = algorithm.run_training(
        OffPolicyTrainerParams(
            training_collector=train_collector,
            test_collector=test_collector,
            max_epochs=2,
            epoch_num_steps=200,
            collection_step_num_env_steps=20,
            test_step_num_episodes=1,
            batch_size=32,
            show_progress=False,
        )
    )
    report["dqn"] = {
        "env_steps": int(result.train_step),
        "gradient_steps": int(result.update_step),
        "episodes": int(result.train_episode),
        "seconds": round(time.perf_counter() - started, 1),
        "q_finite": bool(torch.isfinite(next(net.parameters())).all()),
    }
    train_envs.close()
    test_envs.close()
    return report


#: RL Zoo runs: (algorithm, id, its hyperparameters in the zoo's own keys: a few hundred steps).
ZOO_RUNS = (
    ("ppo", "openenv/Breakout-ram-v5", "policy: 'MlpPolicy'", {"max_num_frames_per_episode": 400}),
    ("ppo", "openenv/finrl", "policy: 'MlpPolicy'", {"split": "trade"}),
)


def rl_zoo_loops() -> dict[str, Any]:
    """RL Zoo 2.9: ``python -m rl_zoo3.train --algo ppo --env openenv/Breakout-ram-v5 --gym-packages
    openenv_lab``, as its README trains any registered id (FinRL too); the episodes its Monitor files
    logged, and the model it saved. Not chess: the zoo's algorithms take no action masks (it has no
    MaskablePPO), and an unmasked agent's illegal moves change nothing, so its games do not end; not echo:
    Stable-Baselines3 takes no text actions."""
    report: dict[str, Any] = {}
    for algo, env_id, policy, env_kwargs in ZOO_RUNS:
        with tempfile.TemporaryDirectory() as folder:
            hyperparams = Path(folder) / "hyperparams.yml"
            hyperparams.write_text(
                f"{env_id}:\n  n_envs: 2\n  {policy}\n  n_timesteps: 512\n  n_steps: 128\n  batch_size: 64\n"
                f"  n_epochs: 1\n  env_kwargs: {json.dumps(env_kwargs)}\n"
            )
            started = time.perf_counter()
            command = [
                sys.executable,
                "-m",
                "rl_zoo3.train",
                "--algo",
                algo,
                "--env",
                env_id,
                "--gym-packages",
                "openenv_lab",
                "--conf-file",
                str(hyperparams),
                "--log-folder",
                folder,
                "--seed",
                "1",
                "--vec-env",
                "subproc",
                "--eval-freq",
                "-1",
            ]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=folder)
            models = sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*.zip"))
            monitors = list(Path(folder).rglob("*.monitor.csv"))
            report[f"{algo} {env_id}"] = {
                "returncode": done.returncode,
                "output": (done.stdout + done.stderr)[-3000:],
                "seconds": round(time.perf_counter() - started, 1),
                "models": models,
                "episodes": sum(max(0, len(m.read_text().splitlines()) - 2) for m in monitors),
            }
    return report


def minari_loops() -> dict[str, Any]:
    """Minari 0.5: its own ``DataCollector(env, record_infos=True)`` over chess, Breakout's RAM and FinRL,
    two episodes each, made into a dataset (arrow storage) and loaded back with ``minari.load_dataset``:
    the episodes, steps and info keys it kept."""
    import minari
    from minari import DataCollector

    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        os.environ["MINARI_DATASETS_PATH"] = folder
        for family in ("chess", "atari", "finrl"):
            env_id, options = FAMILIES[family]
            env = DataCollector(gym.make(env_id, **options), record_infos=True, data_format="arrow")
            env.action_space.seed(0)
            rng = np.random.default_rng(0)
            for episode in range(2):
                observation, _ = env.reset(seed=episode)
                done = False
                while not done:
                    if isinstance(observation, dict) and "action_mask" in observation:
                        action: Any = int(rng.choice(np.flatnonzero(observation["action_mask"])))
                    else:
                        action = env.action_space.sample()
                    observation, _, terminated, truncated, _ = env.step(action)
                    done = terminated or truncated
            env.create_dataset(dataset_id=f"openenv/{family}-collected-v0", algorithm_name="random")
            env.close()
            dataset = minari.load_dataset(f"openenv/{family}-collected-v0")
            episodes = list(dataset.iterate_episodes())
            report[family] = {
                "episodes": dataset.total_episodes,
                "steps": dataset.total_steps,
                "info_keys": sorted(episodes[0].infos),
                "info_lengths_match": all(
                    len(values) == len(episode.actions) + 1
                    for episode in episodes
                    for values in episode.infos.values()
                    if not isinstance(values, dict)
                ),
                "env_id": dataset.spec.env_spec.id,
            }
    return report


LOOPS = {"torchrl": torchrl_loops, "tianshou": tianshou_loops, "rl_zoo": rl_zoo_loops, "minari": minari_loops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", choices=sorted(LOOPS))
    library = parser.parse_args().library
    os.environ.setdefault("OPENENV_LAB_PROGRESS", "0")
    report = LOOPS[library]()
    print("RESULT " + json.dumps(report, default=str))


if __name__ == "__main__":
    main()
