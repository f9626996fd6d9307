"""The ``openenv/*`` environment ids, registered with gymnasium when ``openenv_lab`` is imported.

Ids are unversioned (``openenv/chess``), as users write them, so ``gym.make`` resolves them with no
version warning. ``gym.make_vec(id, num_envs=N)`` gives the native `OpenEnvVectorEnv` (one process, N
concurrent sessions); ``vectorization_mode="sync"`` or ``"async"`` still give gymnasium's own.
Without importing the package first, ``gym.make("openenv_lab:openenv/chess")`` imports it and then
makes the environment.

Each id's entry point is a `FamilyEntryPoint`, whose ``metadata`` states that family's render modes:
gymnasium reads them before making the env (to wrap ``render_mode="human"`` in ``HumanRendering`` where
the family draws pictures, and to warn about modes it lacks).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from ..adapters import ADAPTERS
from .env import OpenEnvEnv

__all__ = ["ENV_IDS", "FamilyEntryPoint", "register_envs"]

#: Environment id -> adapter family (see `openenv_lab.adapters.ADAPTERS`).
ENV_IDS: dict[str, str] = {
    "openenv/atari": "atari",
    "openenv/chess": "chess",
    "openenv/echo": "echo",
    "openenv/finrl": "finrl",
    "openenv/remote": "remote",
}


class FamilyEntryPoint:
    """What ``gym.make("openenv/<family>")`` calls: an `OpenEnvEnv` of that family.

    Example:
        >>> from openenv_lab.envs.registration import finrl
        >>> finrl.metadata["render_modes"]
        ['ansi']
    """

    def __init__(self, family: str) -> None:
        adapter = ADAPTERS[family]
        self.family = family
        self.metadata: dict[str, Any] = {
            "render_modes": list(adapter.render_modes),
            "render_fps": adapter.render_fps,
        }

    def __call__(self, **kwargs: Any) -> OpenEnvEnv:
        kwargs.setdefault("adapter", self.family)
        return OpenEnvEnv(**kwargs)

    def __repr__(self) -> str:
        return f"<FamilyEntryPoint {self.family}>"


atari = FamilyEntryPoint("atari")
chess = FamilyEntryPoint("chess")
echo = FamilyEntryPoint("echo")
finrl = FamilyEntryPoint("finrl")
remote = FamilyEntryPoint("remote")


def register_envs() -> None:
    """Register every ``openenv/*`` id with gymnasium (idempotent)."""
    for env_id, family in ENV_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=f"openenv_lab.envs.registration:{family}",
            vector_entry_point="openenv_lab.envs.vector:OpenEnvVectorEnv",
            kwargs={"adapter": family},
        )
