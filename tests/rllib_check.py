"""RLlib against our environments on a real multi-node Ray cluster; run by tests/test_rllib.py with the
interpreter of an environment that has ``openenv-lab[rllib]`` (Ray 2.60's RLlib pins gymnasium 1.2.2,
which the main test environment's gymnasium is not), and printing one ``RESULT {json}`` line.

A Ray cluster of three nodes on 127.0.0.1 (``ray.cluster_utils.Cluster``): a head for the driver and
the learner, two worker nodes. Every worker registers our ids when it starts
(`openenv_lab.rllib.RUNTIME_ENV`), so the plain ids work in RLlib's fresh EnvRunner processes. For
FinRL and for chess (with `MaskedPPOTorchRLModule`): a Ray fleet of two replicas, PPO with two EnvRunners
stepping our native vector env (``vector_entry_point``) against it, one training iteration. Then chess's
trained module samples actions for real positions: all of them must be legal. Last, the guide's RLlib
example as it is.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every node on 127.0.0.1: loopback only

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.cluster_utils import Cluster
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

import openenv_lab
import openenv_lab.rllib
from openenv_lab.rllib import RUNTIME_ENV, MaskedPPOTorchRLModule


def train_once(env_id: str, fleet: openenv_lab.Fleet, module: type | None, **env_config: object) -> dict:
    config = (
        PPOConfig()
        .environment(env_id, env_config={"base_urls": fleet.urls, "token": fleet.token, **env_config})
        .env_runners(
            num_env_runners=2,
            num_envs_per_env_runner=2,
            num_cpus_per_env_runner=1,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .learners(num_learners=0)
    )
    if module is not None:
        config = config.rl_module(rl_module_spec=RLModuleSpec(module_class=module))
    algo = config.build_algo()
    try:
        started = time.perf_counter()
        result = algo.train()
        seconds = time.perf_counter() - started

        def describe(runner: object) -> tuple[str, str]:
            return type(runner.env.unwrapped).__name__, ray.get_runtime_context().get_node_id()

        runners = algo.env_runner_group.foreach_env_runner(describe, local_env_runner=False)
        outcome = {
            "env_steps": int(result["env_runners"]["num_env_steps_sampled"]),
            "seconds": seconds,
            "runner_envs": sorted({kind for kind, _ in runners}),
            "runner_nodes": len({node for _, node in runners}),
        }
        if module is not None:
            outcome["legal"] = legal_samples(algo, fleet)
        return outcome
    finally:
        algo.stop()


def legal_samples(algo: object, fleet: openenv_lab.Fleet) -> dict:
    """Sample actions from the trained module for real positions; count those the mask allows."""
    rl_module = algo.get_module()
    env = gym.make("openenv/chess", base_url=fleet.urls[0], token=fleet.token, opponent="random")
    legal = total = 0
    try:
        obs, _ = env.reset(seed=0)
        for _ in range(5):
            batch = {
                Columns.OBS: {
                    key: torch.as_tensor(np.repeat(value[None], 200, axis=0)) for key, value in obs.items()
                }
            }
            with torch.no_grad():
                logits = rl_module.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS]
            actions = torch.distributions.Categorical(logits=logits).sample().numpy()
            legal += int(obs["action_mask"][actions].sum())
            total += len(actions)
            obs, _, terminated, truncated, _ = env.step(int(actions[0]))
            if terminated or truncated:
                obs, _ = env.reset()
    finally:
        env.close()
    return {"legal": legal, "total": total}


def run_the_readme_example() -> dict:
    """The guide's RLlib example as it is, on a Ray of its own (every node on 127.0.0.1)."""
    pages = [
        Path(__file__).parent.parent / "README.md",
        *(Path(__file__).parent.parent / "docs").rglob("*.md"),
    ]
    [code] = [
        block
        for page in pages
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
        if "openenv_lab.rllib" in block
    ]
    completed = subprocess.run(
        [sys.executable, "-c", "import gymnasium as gym\nimport openenv_lab\n" + code],
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )
    return {
        "returncode": completed.returncode,
        "stdout": completed.stdout[-500:],
        "stderr": completed.stderr[-3000:],
    }


def main() -> int:
    failures, tried = doctest.testmod(openenv_lab.rllib)
    report: dict = {"doctest": {"failed": failures, "tried": tried}}
    try:
        MaskedPPOTorchRLModule(
            observation_space=gym.spaces.Box(0, 1, (3,)), action_space=gym.spaces.Discrete(3)
        )
    except ValueError as exc:
        report["unmasked_space_error"] = str(exc)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, runtime_env=RUNTIME_ENV, log_to_driver=False)
    try:
        for family, module, options in (
            ("finrl", None, {}),
            ("chess", MaskedPPOTorchRLModule, {"opponent": "random"}),
        ):
            with openenv_lab.serve(family, replicas=2, engine="ray", resources={"CPU": 0.5}) as fleet:
                report[family] = train_once(f"openenv/{family}", fleet, module, **options)
    finally:
        ray.shutdown()
        cluster.shutdown()
    report["readme"] = run_the_readme_example()
    print("RESULT " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
