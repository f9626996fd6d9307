"""The ``openenv/*`` environment ids, registered with gymnasium when ``openenv_lab`` is imported.

The family ids are unversioned (``openenv/chess``), as users write them, so ``gym.make`` resolves them
with no version warning. Beside them, ids that say everything a script that only takes an id needs
(`id_table`, listed in ``docs/ids.md``): each Atari game of the Atari-57 benchmark under ALE's and
gymnasium's names (``openenv/Pong-v5``, ``openenv/Pong-ram-v5``, ``openenv/PongNoFrameskip-v4``,
``openenv/Pong-ramNoFrameskip-v4``, with ALE's settings for each), chess against each opponent
(``openenv/chess-minimax``) and FinRL's splits (``openenv/finrl-trade``); a user's own arguments
override an id's.

``gym.make_vec(id, num_envs=N)`` gives the native `OpenEnvVectorEnv` (one process, N concurrent
sessions); ``vectorization_mode="sync"`` or ``"async"`` still give gymnasium's own.
Without importing the package first, ``gym.make("openenv_lab:openenv/chess")`` imports it and then
makes the environment.

Each id's entry point is a `FamilyEntryPoint`, whose ``metadata`` states that family's render modes:
gymnasium reads them before making the env (to wrap ``render_mode="human"`` in ``HumanRendering`` where
the family draws pictures, and to warn about modes it lacks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from ..adapters import ADAPTERS
from ..options import OPPONENTS
from .env import OpenEnvEnv

__all__ = ["ATARI_57", "ENV_IDS", "FamilyEntryPoint", "RegisteredId", "id_table", "register_envs"]

#: Environment id -> adapter family (see `openenv_lab.adapters.ADAPTERS`).
ENV_IDS: dict[str, str] = {
    "openenv/atari": "atari",
    "openenv/chess": "chess",
    "openenv/echo": "echo",
    "openenv/finrl": "finrl",
    "openenv/gymnasium": "gymnasium",
    "openenv/remote": "remote",
}


#: The 57 games of the Atari-57 benchmark (Mnih et al., 2015; Badia et al., 2020), as ALE names them.
ATARI_57 = (
    "Alien", "Amidar", "Assault", "Asterix", "Asteroids", "Atlantis", "BankHeist", "BattleZone",
    "BeamRider", "Berzerk", "Bowling", "Boxing", "Breakout", "Centipede", "ChopperCommand",
    "CrazyClimber", "Defender", "DemonAttack", "DoubleDunk", "Enduro", "FishingDerby", "Freeway",
    "Frostbite", "Gopher", "Gravitar", "Hero", "IceHockey", "Jamesbond", "Kangaroo", "Krull",
    "KungFuMaster", "MontezumaRevenge", "MsPacman", "NameThisGame", "Phoenix", "Pitfall", "Pong",
    "PrivateEye", "Qbert", "Riverraid", "RoadRunner", "Robotank", "Seaquest", "Skiing", "Solaris",
    "SpaceInvaders", "StarGunner", "Surround", "Tennis", "TimePilot", "Tutankham", "UpNDown", "Venture",
    "VideoPinball", "WizardOfWor", "YarsRevenge", "Zaxxon",
)  # fmt: skip

#: ALE's id variants of a game, with the settings each name stands for in ALE and gymnasium: v5 plays
#: with sticky actions (0.25) and 4 frames a step, at most 108,000 frames an episode; NoFrameskip-v4 one
#: frame a step, no sticky actions (the setting DeepMind-style wrappers such as ``AtariPreprocessing``
#: expect), at most 400,000 frames.
ATARI_VARIANTS: dict[str, dict[str, Any]] = {
    "{game}-v5": {"obs_type": "rgb", "frameskip": 4, "repeat_action_probability": 0.25},
    "{game}-ram-v5": {"obs_type": "ram", "frameskip": 4, "repeat_action_probability": 0.25},
    "{game}NoFrameskip-v4": {"obs_type": "rgb", "frameskip": 1, "repeat_action_probability": 0.0},
    "{game}-ramNoFrameskip-v4": {"obs_type": "ram", "frameskip": 1, "repeat_action_probability": 0.0},
}
_FRAME_LIMITS = {"v5": 108_000, "v4": 400_000}
#: The chess opponents an id names (``openenv/chess-<opponent>``): all but "none" (`openenv_lab.options`).
CHESS_OPPONENTS = tuple(name for name in OPPONENTS if name != "none")
#: FinRL's splits an id names (``openenv/finrl-<split>``).
FINRL_SPLITS = ("train", "trade")


@dataclass(frozen=True)
class RegisteredId:
    """One registered id: its family and the keyword arguments it stands for (a user's own override them)."""

    env_id: str
    family: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The arguments as ``gym.make`` takes them: ``game="pong", obs_type="ram", ...``."""
        return ", ".join(f"{name}={value!r}" for name, value in self.kwargs.items())


def id_table() -> list[RegisteredId]:
    """Every ``openenv/*`` id, from the tables above: the families' own ids, then the ids that choose.

    Example:
        >>> rows = {row.env_id: row for row in id_table()}
        >>> rows["openenv/Pong-ramNoFrameskip-v4"].kwargs["frameskip"]
        1
        >>> rows["openenv/Pong-v5"].kwargs["repeat_action_probability"]
        0.25
        >>> rows["openenv/chess-minimax"].kwargs, rows["openenv/finrl-trade"].kwargs
        ({'opponent': 'minimax'}, {'split': 'trade'})
    """
    from ..adapters.atari import game_id

    rows = [RegisteredId(env_id, family) for env_id, family in ENV_IDS.items()]
    for game in ATARI_57:
        for pattern, settings in ATARI_VARIANTS.items():
            frames = _FRAME_LIMITS[pattern.rsplit("-", 1)[1]]
            kwargs = {"game": game_id(game), **settings, "max_num_frames_per_episode": frames}
            rows.append(RegisteredId(f"openenv/{pattern.format(game=game)}", "atari", kwargs))
    rows += [RegisteredId(f"openenv/chess-{name}", "chess", {"opponent": name}) for name in CHESS_OPPONENTS]
    rows += [RegisteredId(f"openenv/finrl-{split}", "finrl", {"split": split}) for split in FINRL_SPLITS]
    return rows


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
gymnasium = FamilyEntryPoint("gymnasium")
remote = FamilyEntryPoint("remote")


def register_envs() -> None:
    """Register every ``openenv/*`` id of `id_table` with gymnasium (idempotent)."""
    for row in id_table():
        if row.env_id in gym.registry:
            continue
        gym.register(
            id=row.env_id,
            entry_point=f"openenv_lab.envs.registration:{row.family}",
            vector_entry_point="openenv_lab.envs.vector:OpenEnvVectorEnv",
            kwargs={"adapter": row.family, **row.kwargs},
        )
