"""RLlib on our environments: fresh Ray workers that know the ids, and PPO with legal-action masks.

RLlib's EnvRunners are Ray actors in processes that never imported ``openenv_lab``, where gymnasium
does not know ``"openenv/..."`` ids (gymnasium 1.x has no plugin entry points). Two ways make them
known: write the id as ``"openenv_lab:openenv/finrl"`` (gymnasium imports the module first), or have
every Ray worker register them when it starts, with `RUNTIME_ENV` (``ray.init(runtime_env=RUNTIME_ENV)``,
the ``worker_process_setup_hook`` of Ray's runtime environments); then the plain id works everywhere.
With ``gym_env_vectorize_mode="vector_entry_point"`` each EnvRunner steps its sub-environments through
our native vector env.

Chess's actions are legal only where ``obs["action_mask"]`` says so. `MaskedPPOTorchRLModule` is RLlib's
default PPO module over the observation's other parts (flattened into one vector), whose logits are
pushed to the lowest float wherever the mask is 0: sampled actions are always legal, and PPO's
probabilities are those of the legal moves only.

Example:
    >>> import ray
    >>> from ray.rllib.algorithms.ppo import PPOConfig
    >>> from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    >>> from openenv_lab.rllib import RUNTIME_ENV, MaskedPPOTorchRLModule
    >>> # skipped: starts Ray; tests/test_rllib.py trains this
    >>> ray.init(runtime_env=RUNTIME_ENV)  # doctest: +SKIP
    >>> config = (
    ...     PPOConfig()
    ...     .environment("openenv/chess", env_config={"opponent": "random"})
    ...     .env_runners(num_env_runners=2, gym_env_vectorize_mode="vector_entry_point")
    ...     .rl_module(rl_module_spec=RLModuleSpec(module_class=MaskedPPOTorchRLModule))
    ... )
    >>> # skipped: minutes of training; tests/test_rllib.py runs it
    >>> config.build_algo().train()  # doctest: +SKIP

RLlib is an optional extra, ``pip install "openenv-lab[rllib]"`` (Ray 2.60's RLlib pins gymnasium 1.2.2).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

try:
    import torch
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
    from ray.rllib.core.columns import Columns
    from ray.rllib.utils.torch_utils import FLOAT_MIN
except ImportError as exc:  # an optional extra: say how to get it
    raise ImportError(
        f'openenv_lab.rllib needs RLlib and torch: pip install "openenv-lab[rllib]", in a venv of its own '
        f"(Ray 2.60's RLlib pins gymnasium 1.2.2) ({exc})"
    ) from exc

__all__ = ["MASK_KEY", "RUNTIME_ENV", "MaskedPPOTorchRLModule"]

#: Ray's runtime environment whose workers register our ids when they start.
RUNTIME_ENV: dict[str, Any] = {"worker_process_setup_hook": "openenv_lab.envs.register_envs"}

#: The observation part that says which actions are legal.
MASK_KEY = "action_mask"


class MaskedPPOTorchRLModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO module for a ``Dict`` observation with an ``action_mask`` part.

    The encoder sees the other parts, flattened and concatenated in the space's key order; the policy's
    logits are ``FLOAT_MIN`` wherever the mask is 0. The value function sees the same parts, not the
    mask. Give it with ``config.rl_module(rl_module_spec=RLModuleSpec(module_class=...))``.
    """

    def __init__(self, *args: Any, observation_space: gym.Space | None = None, **kwargs: Any) -> None:
        if not isinstance(observation_space, gym.spaces.Dict) or MASK_KEY not in observation_space.spaces:
            raise ValueError(
                f"MaskedPPOTorchRLModule needs a Dict observation space with an {MASK_KEY!r} part, got "
                f"{observation_space}: use RLlib's default module for environments without masks"
            )
        self.masked_space = observation_space
        self.parts = [key for key in observation_space.spaces if key != MASK_KEY]
        if not self.parts or not all(
            isinstance(observation_space.spaces[key], gym.spaces.Box) for key in self.parts
        ):
            raise ValueError(
                f"MaskedPPOTorchRLModule flattens the parts other than {MASK_KEY!r}, which must be Boxes: "
                f"got {observation_space}"
            )
        size = sum(int(np.prod(observation_space.spaces[key].shape)) for key in self.parts)
        flat = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        super().__init__(*args, observation_space=flat, **kwargs)

    def _unmasked(self, batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """The batch with the observation's parts as one flat vector per row, and the mask."""
        obs = batch[Columns.OBS]
        flat = torch.cat([obs[key].reshape(obs[key].shape[0], -1).float() for key in self.parts], dim=-1)
        return {**batch, Columns.OBS: flat}, obs[MASK_KEY]

    @staticmethod
    def _mask(output: dict[str, Any], mask: Any) -> dict[str, Any]:
        logits = output[Columns.ACTION_DIST_INPUTS]
        output[Columns.ACTION_DIST_INPUTS] = logits.masked_fill(mask.to(torch.bool).logical_not(), FLOAT_MIN)
        return output

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        unmasked, mask = self._unmasked(batch)
        return self._mask(super()._forward(unmasked, **kwargs), mask)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        unmasked, mask = self._unmasked(batch)
        return self._mask(super()._forward_train(unmasked, **kwargs), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        if embeddings is None:
            batch, _ = self._unmasked(batch)
        return super().compute_values(batch, embeddings)
