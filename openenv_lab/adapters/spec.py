"""Specs: what the generic adapter cannot infer about an environment, declared in a few lines.

A server's ``/schema`` says which fields exist and their types, not how many values an integer action
takes, which observation field lists the legal actions, or the bounds of a board. A `Spec` says so, and
`openenv_lab.adapters.GenericAdapter` (``gym.make("openenv/remote", ...)``) builds its spaces with it: a
spec is the generic adapter configured, not a second mechanism. `SPECS` holds one for each official
OpenEnv environment of ``huggingface/OpenEnv``'s ``envs/`` that we test against; ``openenv/remote`` picks
the one whose ``servers`` names what the server reports of itself (its ``/metadata`` name, or its
``/list_environments`` name), and ``spec=`` chooses one by name or passes your own:

    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> from openenv_lab.adapters import Spec
    >>> connect4 = Spec(
    ...     "connect4",
    ...     action="column",                   # the action field
    ...     actions=7,                         # it takes the values 0..6: Discrete(7)
    ...     legal_actions="legal_actions",     # the observation lists the legal ones: a mask
    ...     observation={"board": spaces.Box(-1, 1, (6, 7), np.int64)},
    ... )
    >>> connect4.action_values()
    [0, 1, 2, 3, 4, 5, 6]

A spec may also hand a server to one of our family adapters (``family="chess"``: the official
``chess_env`` gets `openenv_lab.adapters.ChessAdapter`'s board planes and move encoding).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["SPECS", "Spec", "find_spec"]


@dataclass(frozen=True)
class Spec:
    """What an environment's schema does not say (see the module docstring).

    Args:
        name: what ``spec="..."`` calls it.
        servers: the names a server reports for which ``openenv/remote`` picks this spec by itself: its
            ``GET /metadata`` name (``"Connect4Environment"``) or its environment name
            (``"connect4_env"``, from ``GET /list_environments``).
        action: the action field; by default the schema's one required field.
        actions: the values the action takes: a count ``n`` (the integers ``0..n-1``) or the values
            themselves. The action space is then ``Discrete(len(values))``. Values that are dicts are
            whole actions (``{"action": "water", "x": 3, "y": 4}``), each sent as it is: then name no
            ``action`` field.
        legal_actions: the observation field that lists the legal action values; the observation then
            carries an ``action_mask`` in its place, and the env has ``action_masks()``.
        observation: the observation fields to keep: names (spaces inferred), or names with their spaces
            (None for inferred). None keeps every field.
        family: hand the server to one of our family adapters instead (``"chess"``, ``"atari"``).
        description: one line about the environment, for the docs' compatibility table.
        action_space: the action field's space, declared (a ``Box`` for a list of numbers whose shape and
            bounds the schema does not give), instead of ``actions``.
        from_state: for servers whose instances differ (OpenSpiel's games, dm_control's tasks): a function
            of what a session's ``state`` says after a reset (``{"game_name": "catch", ...}``) that
            returns the spec of that instance, or None to keep this one. The server's HTTP ``/state``
            carries only the base fields, so the adapter opens one short session to read it.
    """

    name: str
    servers: tuple[str, ...] = ()
    action: str | None = None
    actions: int | Sequence[Any] | None = None
    legal_actions: str | None = None
    observation: Mapping[str, spaces.Space[Any] | None] | Sequence[str] | None = None
    family: str | None = None
    description: str = ""
    action_space: spaces.Space[Any] | None = None
    from_state: Callable[[dict[str, Any]], Spec | None] | None = None

    def __post_init__(self) -> None:
        actions = self.actions
        if (
            actions is not None
            and not isinstance(actions, (int, np.integer))
            and not isinstance(actions, Sequence)
        ):
            raise ValueError(
                f"Spec {self.name!r}: actions must be a count or a list of values, got {actions!r}"
            )
        if isinstance(actions, (int, np.integer)) and (isinstance(actions, bool) or actions < 1):
            shown = actions if isinstance(actions, bool) else int(actions)  # not numpy's "np.int64(0)"
            raise ValueError(f"Spec {self.name!r}: actions must be a positive count, got {shown!r}")
        if isinstance(actions, (str, bytes)):
            raise ValueError(f"Spec {self.name!r}: actions must be a count or a list of values, not text")
        if isinstance(actions, Sequence) and any(isinstance(v, Mapping) for v in actions):
            if not all(isinstance(v, Mapping) for v in actions):
                raise ValueError(f"Spec {self.name!r}: actions are all whole actions (dicts) or none is")
            if self.action is not None:
                raise ValueError(
                    f"Spec {self.name!r}: whole actions (dicts) name their fields; leave action= unset"
                )
        if self.action_space is not None and actions is not None:
            raise ValueError(
                f"Spec {self.name!r}: declare the action's values (actions=) or its space, not both"
            )
        if self.action_space is not None and not isinstance(self.action_space, spaces.Space):
            raise ValueError(
                f"Spec {self.name!r}: action_space must be a gymnasium space, got {self.action_space!r}"
            )

    def action_values(self) -> list[Any] | None:
        """The values the action takes, in the order of the ``Discrete`` indices (None: not declared)."""
        if self.actions is None:
            return None
        if isinstance(self.actions, (int, np.integer)):
            return list(range(int(self.actions)))
        return list(self.actions)

    def observation_spaces(self) -> dict[str, spaces.Space[Any] | None] | None:
        """The observation fields to keep, each with its declared space or None (None: keep all)."""
        if self.observation is None:
            return None
        if isinstance(self.observation, Mapping):
            return dict(self.observation)
        return dict.fromkeys(self.observation)

    def matches(self, reported: Sequence[str]) -> bool:
        """Whether a server reporting these names is this spec's (names compared without case)."""
        mine = {name.lower() for name in self.servers}
        return any(name.lower() in mine for name in reported)


#: The number of distinct actions of the OpenSpiel games the official ``openspiel_env`` is documented
#: with (``pyspiel.load_game(name).num_distinct_actions()``); a game not listed gets the general spec.
OPENSPIEL_ACTIONS = {
    "2048": 4,
    "blackjack": 2,
    "catch": 3,
    "cliff_walking": 4,
    "connect_four": 7,
    "kuhn_poker": 2,
    "leduc_poker": 3,
    "tic_tac_toe": 9,
}
_OPENSPIEL_SERVERS = ("OpenSpielEnvironment", "openspiel_env")
_DM_CONTROL_SERVERS = ("DMControlEnvironment", "dm_control_env")
_WILDFIRE_SERVERS = ("WildfireEnvironment", "wildfire_env")


def _openspiel_game(state: dict[str, Any]) -> Spec | None:
    """The spec of the game a session of the official openspiel_env plays (its state names it)."""
    game = state.get("game_name")
    count = OPENSPIEL_ACTIONS.get(game) if isinstance(game, str) else None
    if count is None:
        return None
    return Spec(
        f"openspiel/{game}",
        servers=_OPENSPIEL_SERVERS,
        action="action_id",
        actions=count,
        legal_actions="legal_actions",
        description=f"OpenSpiel's {game}: {count} action ids, the legal ones listed",
    )


def _wildfire_grid(state: dict[str, Any]) -> Spec | None:
    """The wildfire spec of a session's grid (its state gives the width and height): waiting, or water or
    a firebreak on one cell, as whole actions (the schema's ``action`` is free text, ``x`` and ``y``
    unbounded integers)."""
    width, height = state.get("width"), state.get("height")
    if not (type(width) is int and type(height) is int and width > 0 and height > 0):
        return None
    cells = [(x, y) for y in range(height) for x in range(width)]
    orders = [{"action": "wait"}]
    orders += [{"action": order, "x": x, "y": y} for order in ("water", "break") for x, y in cells]
    return Spec(
        f"wildfire/{width}x{height}",
        servers=_WILDFIRE_SERVERS,
        actions=orders,
        description=f"wildfire on a {width}x{height} grid: wait, or water or a firebreak on one cell",
    )


def _dm_control_task(state: dict[str, Any]) -> Spec | None:
    """The spec of the dm_control task a session runs: its state gives the action's shape and bounds and
    each observation's shape (the schema has only ``list[float]`` and a free-form dict)."""
    action, observations = state.get("action_spec"), state.get("observation_spec")
    if not isinstance(action, dict) or not isinstance(observations, dict) or not observations:
        return None
    shape = tuple(int(n) for n in action["shape"])
    # dm_env's bounds need only broadcast to the shape: a task may give one number for every element.
    low = np.broadcast_to(np.asarray(action["minimum"], dtype=np.float64), shape)
    high = np.broadcast_to(np.asarray(action["maximum"], dtype=np.float64), shape)
    observed = spaces.Dict(
        {
            name: spaces.Box(-np.inf, np.inf, tuple(int(n) for n in spec["shape"]), np.float64)
            for name, spec in sorted(observations.items())
        }
    )
    task = f"{state.get('domain_name')}/{state.get('task_name')}"
    return Spec(
        f"dm_control/{task}",
        servers=_DM_CONTROL_SERVERS,
        action="values",
        action_space=spaces.Box(low, high, shape, np.float64),
        observation={"observations": observed},
        description=f"dm_control's {task}: the spaces its state gives",
    )


#: A spec for each official OpenEnv environment we test against, by name (`openenv/remote` picks one).
SPECS: dict[str, Spec] = {
    spec.name: spec
    for spec in (
        Spec(
            "connect4",
            servers=("Connect4Environment", "connect4_env"),
            action="column",
            actions=7,
            legal_actions="legal_actions",
            observation={"board": spaces.Box(-1, 1, (6, 7), np.int64)},
            description="Connect Four on a 6x7 board; -1 and the end of the game for a full column",
        ),
        Spec(
            "maze",
            servers=("MazeEnvironment", "maze_env"),
            action="action",
            actions=4,
            legal_actions="legal_actions",
            description="an 8x8 maze: moves that hit a wall are not legal; the exit is the goal",
        ),
        Spec(
            "grid_world",
            servers=("GridWorldEnvironment", "grid_world_env"),
            observation={
                "x": spaces.Box(0, 4, (), np.int64),
                "y": spaces.Box(0, 4, (), np.int64),
                "message": None,
            },
            description="a 5x5 grid, the goal at (4, 4)",
        ),
        Spec(
            "echo_mcp",
            servers=("EchoEnvironment", "echo_env"),
            description="MCP tools that echo a message (echo_message, echo_with_length)",
        ),
        Spec(
            "chess",
            servers=("ChessEnvironment", "chess_env"),
            family="chess",
            description="chess vs moonfish",
        ),
        Spec(
            "atari", servers=("AtariEnvironment", "atari_env"), family="atari", description="the ALE's games"
        ),
        Spec(
            "openspiel",
            servers=_OPENSPIEL_SERVERS,
            action="action_id",
            from_state=_openspiel_game,
            description="OpenSpiel's games; the game a session plays (its state) gives the action count",
        ),
        Spec(
            "snake",
            servers=("SnakeEnvironment", "snake_env"),
            action="action",
            actions=3,
            description="marlenv's snake seen from the snake: go on, turn left, turn right",
        ),
        Spec(
            "wildfire",
            servers=_WILDFIRE_SERVERS,
            action="action",
            from_state=_wildfire_grid,
            description="a wildfire to contain; the grid a session plays (its state) gives the actions",
        ),
        Spec(
            "dm_control",
            servers=_DM_CONTROL_SERVERS,
            action="values",
            from_state=_dm_control_task,
            description="dm_control's suite; the task a session runs (its state) gives the spaces",
        ),
    )
}


def find_spec(reported: Sequence[str]) -> Spec | None:
    """The spec of `SPECS` for a server reporting these names, if one is there."""
    for spec in SPECS.values():
        if spec.matches(reported):
            return spec
    return None
