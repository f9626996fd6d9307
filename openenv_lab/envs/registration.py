"""The ``openenv/*`` environment ids, registered with gymnasium when ``openenv_lab`` is imported.

Ids are unversioned (``openenv/chess``), as users write them, so ``gym.make`` resolves them with no
version warning. ``gym.make_vec(id, num_envs=N)`` gives the native `OpenEnvVectorEnv` (one process, N
concurrent sessions); ``vectorization_mode="sync"`` or ``"async"`` still give gymnasium's own.
Without importing the package first, ``gym.make("openenv_lab:openenv/chess")`` imports it and then
makes the environment.
"""

from __future__ import annotations

import gymnasium as gym

__all__ = ["ENV_IDS", "register_envs"]

#: Environment id -> adapter family (see `openenv_lab.adapters.ADAPTERS`).
ENV_IDS: dict[str, str] = {
    "openenv/atari": "atari",
    "openenv/chess": "chess",
    "openenv/echo": "echo",
    "openenv/finrl": "finrl",
    "openenv/remote": "remote",
}


def register_envs() -> None:
    """Register every ``openenv/*`` id with gymnasium (idempotent)."""
    for env_id, family in ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point="openenv_lab.envs.env:OpenEnvEnv",
            vector_entry_point="openenv_lab.envs.vector:OpenEnvVectorEnv",
            kwargs={"adapter": family},
        )
