"""The adapter contract: how one environment family's JSON maps to gymnasium spaces and back.

An adapter translates; the environment (`openenv_lab.OpenEnvEnv`, `openenv_lab.OpenEnvVectorEnv`) does
everything else: it owns the sessions, checks actions against the space, handles seeds, knows when an
episode is over, batches sub-environments. An adapter never opens a socket.

What an adapter **declares** (data, read by the env):

======================  =================================================================================
``family``              its name in recordings (the viewer picks its renderer by it)
``server_name``         the bundled server started when no URL is given (None: there is none)
``render_modes``        what `render` can draw; ``render_fps`` how fast a replay plays
``needs_probe``         whether `setup` needs the reply to a first reset (spaces sized from data)
``probe_state``         whether `setup` also takes ``state``, which reads the probed session's state
``derive_seeds``        whether ``reset()`` without a seed sends one drawn from the env's generator
``env_attributes``      its attributes the env exposes as its own (ALE's ``ale``, ``action_masks``)
``reward_range``        the range every reward stays in, where the family's rules say (None: unknown)
``server_options``      options of the bundled server it starts (a dict)
``identity_options``    those of them a running server (``base_url``) is checked against, not refused for
``reset_options``       what every reset sends, before the seed and the user's ``options`` (a dict)
``reset_option_names``  the reset options a vector env's ``set_attr`` may change between episodes
``info_keys``           its infos' keys (`InfoKey`: type, neutral value, meaning), beside `COMMON_INFO_KEYS`
``raw_fields_left_out`` observation fields left out of ``info["raw_observation"]`` (the screen)
``observation_space``   set by `setup` (or before)
``action_space``        set by `setup` (or before)
======================  =================================================================================

What the env **sets** on it (the user's settings, and what the adapter may read between calls):

======================  =================================================================================
``check_identity``      refuse a server that reports another environment than asked
``raw_info``            add the server's JSON to every info (``raw_observation``, ``metadata``)
``text_info``           keep the infos' text keys and dicts (False: numbers only, for TorchRL)
``last_observation``    the observation fields of the last reply, set before each `decode`
======================  =================================================================================

What it **does**, in the order the env calls it; everything a call needs comes in as an argument:

1. ``setup(client, first)`` once, when the env is made: read what the server says about itself
   (``client.schema()``, ``client.get("/config")``) and, when `needs_probe`, the reply ``first`` to a
   reset sent with ``reset_options``; set the spaces. With `probe_state`, ``setup(client, first, state)``:
   ``state()`` reads that session's state.
2. ``decode(result, sent)`` for every reply: the gymnasium view of it (a `Transition`). ``sent`` is the
   action JSON the reply answers, or None when it answers a reset.
3. ``encode_action(action)`` before every step: the server's action JSON for an action already checked
   to be in ``action_space``. It may read what the last ``decode`` saw (a chess move's index depends on
   the side to move), and nothing else.

The infos ``decode`` makes go through the env's `openenv_lab.adapters.info_schema.InfoSchema` of
``info_keys``: whatever a key is missing or cannot hold becomes its neutral value, so every info has the
same keys and types from the reset on (the schema module says why).
4. ``render(mode)``: the last observation, drawn.

Optional: ``np_random(seed)`` (a family that derives its generator its own way), and for recordings
``describe_action``, ``record`` and ``trajectory_metadata``.

A declarative `openenv_lab.adapters.GenericAdapter` configured by the user is an adapter like any other:
the same contract, written in a few lines instead of a class.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from ..client import Client, StepResult
from .info_schema import InfoKey

__all__ = ["COMMON_INFO_KEYS", "REWARD_COMPONENTS", "Adapter", "Transition", "base_info", "reward_components"]


@dataclass(slots=True)
class Transition:
    """What `Adapter.decode` makes of a reply: gymnasium's step values (a reset's reward is ignored)."""

    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


#: The metadata key of named reward components: ``{name: number}``, parts of the step's reward.
REWARD_COMPONENTS = "reward_components"


#: The info keys of every environment, whatever its family (the env sets ``seed``).
COMMON_INFO_KEYS = (
    InfoKey(
        "seed",
        "int",
        "the seed this episode's reset sent; -1 where it sent none (Atari continues the server's random "
        "stream between episodes unless `reset(seed=...)` names one)",
        neutral=-1,
    ),
    InfoKey("reward_missing", "bool", "the server sent no reward (the step's reward is then 0.0)"),
)


def base_info(result: StepResult) -> dict[str, Any]:
    """The info keys every adapter shares but ``seed`` (`COMMON_INFO_KEYS`): ``reward_missing``, and
    ``reward_components`` (name -> float) when the metadata names the parts of the reward
    (`reward_components`; a family that declares that key keeps it)."""
    info: dict[str, Any] = {"reward_missing": result.reward is None}
    components = reward_components(result.metadata)
    if components:
        info[REWARD_COMPONENTS] = components
    return info


def reward_components(metadata: dict[str, Any]) -> dict[str, float]:
    """The named parts of a step's reward that a server puts in its observation metadata, under
    ``"reward_components"`` (``{"market": 0.8, "costs": -0.1}``): names with finite numbers; anything
    else there is ignored (``make(..., raw_info=True)`` shows it in ``info["metadata"]``).

    openenv 0.10 has no wire key of its own for this (its rubrics, RFC 004, score on the server and send
    only the total), so this is ours; our FinRL server uses it.

    Example:
        >>> reward_components({"reward_components": {"market": 1, "costs": -0.5, "note": "x"}})
        {'market': 1.0, 'costs': -0.5}
    """
    raw = metadata.get(REWARD_COMPONENTS)
    if not isinstance(raw, dict):
        return {}
    parts = {}
    for name, value in raw.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value):
            parts[str(name)] = float(value)
    return parts


def _finite(number: float) -> bool:
    """Whether a JSON number is finite as a float (an integer too large for one is not)."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


class Adapter(ABC):
    """Maps one family of OpenEnv environments onto gymnasium (see the module docstring: the contract).

    Subclasses set the declarations they need and implement `setup` (when the spaces come from the
    server), `encode_action` and `decode`.

    Example:
        >>> import gymnasium as gym, numpy as np
        >>> from gymnasium import spaces
        >>> import openenv_lab
        >>> from openenv_lab.adapters import Adapter, Transition, base_info
        >>> class EchoLength(Adapter):
        ...     '''Echo's message length as the observation, a message of n x's as the action.'''
        ...     server_name = "echo"
        ...     observation_space = spaces.Box(0, 10_000, (), np.int64)
        ...     action_space = spaces.Discrete(8)
        ...     def encode_action(self, action):
        ...         return {"message": "x" * int(action)}
        ...     def decode(self, result, sent):
        ...         length = np.int64(result.observation["message_length"])
        ...         return Transition(length, result.reward or 0.0, result.done, False, base_info(result))
        >>> env = openenv_lab.OpenEnvEnv(EchoLength)
        >>> _ = env.reset(seed=0)
        >>> int(env.step(3)[0])
        3
        >>> env.close()
    """

    server_name: ClassVar[str | None] = None
    family: ClassVar[str] = "generic"
    render_modes: ClassVar[tuple[str, ...]] = ()
    render_fps: ClassVar[int] = 4
    needs_probe: ClassVar[bool] = False
    #: Families whose servers make seeding expensive (Atari reloads its ROM) continue the server's
    #: random stream instead, as their in-process counterparts do.
    derive_seeds: ClassVar[bool] = True
    env_attributes: ClassVar[tuple[str, ...]] = ()
    #: The range every reward of the family stays in, where the family's rules say (``None``: unknown);
    #: `openenv_lab.check` holds the rewards it sees against it.
    reward_range: ClassVar[tuple[float, float] | None] = None
    #: Set by the env (``check_identity=``): whether `setup` and `decode` refuse a server that reports
    #: another environment than the one asked for (`openenv_lab.client.EnvironmentMismatch`).
    check_identity: bool = True

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    #: Options of the bundled server this adapter starts when no ``base_url`` is given.
    server_options: dict[str, Any] = {}  # noqa: RUF012 - read-only default; instances set their own
    #: The `server_options` that also name what a running server must be (the gymnasium server's
    #: ``env_id``): with ``base_url`` they are checked in `setup` rather than refused.
    identity_options: ClassVar[tuple[str, ...]] = ()
    #: What every reset sends, before the seed and the user's ``options``.
    reset_options: dict[str, Any] = {}  # noqa: RUF012 - read-only default; instances set their own
    #: Whether `setup` also takes ``state``, a function that reads the probed session's state (an
    #: adapter that needs what an instance says of itself; `needs_probe` adapters only).
    probe_state: ClassVar[bool] = False
    #: Observation fields left out of ``info["raw_observation"]`` (``raw_info=True``) to keep infos light
    #: (the screen, which is the observation itself): the report card's schema check does not look for them.
    raw_fields_left_out: ClassVar[tuple[str, ...]] = ()
    #: The keys of this family's infos, beside `COMMON_INFO_KEYS` (set in `setup` where they depend on the
    #: server: a FinRL server's number of stocks sizes ``holdings``).
    info_keys: tuple[InfoKey, ...] = ()
    #: Set by the env (``raw_info=``): whether each info also carries the server's JSON as it came.
    raw_info: bool = False
    #: Set by the env (``text_info=``): whether infos keep their text keys and dicts; False leaves
    #: numbers only (`InfoSchema.numbers_only`), what TorchRL's batched ``GymEnv`` can stack.
    text_info: bool = True
    #: The observation fields of the last reply (set by the env before `decode`).
    last_observation: dict[str, Any] = {}  # noqa: RUF012 - read-only default; the env sets its own
    #: The reset options a vector env's ``set_attr`` may change between episodes (a curriculum's next
    #: opponent or difficulty): each sub-environment sends the new value from its next reset on.
    reset_option_names: ClassVar[tuple[str, ...]] = ()

    def check_reset_option(self, name: str, value: Any) -> None:  # noqa: B027 - optional hook
        """Raise ``ValueError`` if no server of the family could take ``name=value`` (before any is set)."""

    def set_reset_option(self, name: str, value: Any) -> None:
        """Send ``name=value`` with every reset from now on (``None``: leave it to the server's default)."""
        if name not in self.reset_option_names:
            raise AttributeError(
                f"{name!r} is not a reset option of this family: {list(self.reset_option_names)}"
            )
        self.check_reset_option(name, value)
        options = dict(self.reset_options)
        if value is None:
            options.pop(name, None)
        else:
            options[name] = value
        self.reset_options = options

    def info_schema(self) -> tuple[InfoKey, ...]:
        """Every key of this environment's infos: `COMMON_INFO_KEYS`, then the family's `info_keys`."""
        return (*COMMON_INFO_KEYS, *self.info_keys)

    def setup(self, client: Client, first: StepResult | None) -> None:  # noqa: B027 - optional hook
        """Called once, when the env is made: ``client`` is the server's HTTP client, ``first`` the reply
        to a probing reset (when `needs_probe`, else None). Set the spaces here if they come from it."""

    @abstractmethod
    def encode_action(self, action: Any) -> dict[str, Any]:
        """The server's action JSON for ``action`` (already checked to be in ``action_space``)."""

    @abstractmethod
    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        """The gymnasium view of a reply; ``sent`` is the action JSON it answers (None: a reset's reply)."""

    def render(self, mode: str) -> Any:
        """The current observation drawn in ``mode`` (one of `render_modes`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot render in mode {mode!r}")

    def np_random(self, seed: int) -> np.random.Generator | None:
        """The env's generator after ``reset(seed=seed)``, when the family derives it its own way."""
        return None

    # ------------------------------------------------------------------ recording (openenv_lab.record)

    def describe_action(self, action: Any) -> str:
        """A readable form of ``action``, taken before it is sent (a chess move's UCI and SAN, say)."""
        if isinstance(action, np.ndarray):
            return json.dumps(np.round(action.astype(float), 4).tolist())
        return str(action)

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        """The family's own columns of a trajectory row: small values, never raw arrays.

        ``action`` is ``None`` on the row of a reset. The default keeps the server's observation as JSON.
        """
        return {"observation_json": json.dumps(self.last_observation, sort_keys=True, default=str)}

    def trajectory_metadata(self) -> dict[str, Any]:
        """What a viewer needs beside the rows (ticker names, action meanings...), saved with them."""
        return {}
