"""Every option of our servers, declared once: its name, type, default, range and help, whether a reset
may change it, and whether a curriculum may (the spaces stay the same).

The servers check what they are sent against these declarations (`openenv_lab.servers.catalogue`), the
command line makes its flags from them, ``docs/options.md`` is rendered from them, and the adapters read
the names of their reset options here. Below the servers and the adapters, so that both can import it;
it imports no server and no ``openenv``.

Example:
    >>> from openenv_lab.options import OPTIONS, curriculum_names
    >>> [option.name for option in OPTIONS["chess"]]
    ['opponent', 'agent_color', 'opponent_depth', 'max_moves', 'gamma']
    >>> curriculum_names("atari")
    ('repeat_action_probability', 'max_num_frames_per_episode', 'mode', 'difficulty')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .market import DEFAULT_INDICATORS
from .ranges import Range

__all__ = [
    "MAX_DEPTH",
    "OPPONENTS",
    "OPTIONS",
    "RESET_ONLY",
    "SEED",
    "ServerOption",
    "curriculum_names",
    "option_flags",
    "option_text",
]

#: The chess server's opponents ("none": the agent plays both sides).
OPPONENTS = ("random", "greedy", "minimax", "moonfish", "stockfish", "none")
#: The deepest search each searching opponent accepts (minimax at depth 4 takes about a second).
MAX_DEPTH = {"minimax": 4, "moonfish": 4, "stockfish": 30}


@dataclass(frozen=True)
class ServerOption:
    """One option of a bundled server: a keyword of its app factory and a ``--flag`` of the CLI (or, with
    ``flag=False``, an option only a reset takes); ``on_reset``: a reset may change it too;
    ``curriculum``: a vector env's ``set_attr`` may change it between episodes (the spaces stay the same)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    #: The numbers it may be (numeric options); None for text, yes/no and choices.
    range: Range | None = None
    on_reset: bool = False
    flag: bool = True
    curriculum: bool = False

    def check(self, value: Any) -> None:
        """Raise a `ValueError` naming the option, the value and what it may be, unless ``value`` fits."""
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        if self.range is not None:
            self.range.check(self.name, value)
        elif self.type is bool and not isinstance(value, bool):
            raise ValueError(f"{self.name} must be true or false, got {value!r}")
        elif self.type is dict and self.flag and not isinstance(value, Mapping):
            raise ValueError(
                f"{self.name} must be an object (a dict; on the command line, JSON), got {value!r}"
            )

    def describe(self) -> str:
        """What values it takes, in words (the docs' column)."""
        if self.choices is not None:
            return "one of " + ", ".join(f"`{choice}`" for choice in self.choices)
        if self.range is not None:
            return str(self.range)
        kinds = {bool: "true or false", str: "text", dict: "true, or an object", int: "a whole number"}
        if self.type is dict and self.flag:
            return "an object (on the command line, JSON)"
        return kinds.get(self.type, self.type.__name__)


def option_text(value: Any) -> str:
    """An option's value as a command line writes it: an object as JSON (keys sorted), the rest as text.

    Example:
        >>> option_text({"is_slippery": False, "map_name": "8x8"}), option_text(3)
        ('{"is_slippery":false,"map_name":"8x8"}', '3')
    """
    if isinstance(value, Mapping):
        return json.dumps(dict(value), sort_keys=True, separators=(",", ":"))
    return str(value)


def option_flags(options: Mapping[str, Any]) -> list[str]:
    """The ``serve`` flags that give a server these options (``max_steps=3`` is ``--max-steps 3``)."""
    flags: list[str] = []
    for name, value in options.items():
        flags += ["--" + name.replace("_", "-"), option_text(value)]
    return flags


#: Every server's reset takes a seed: gymnasium's seeds are non-negative and fit 64 bits.
SEED = ServerOption(
    "seed", int, None, "seeds the episode's randomness", range=Range(0, 2**64 - 1), flag=False
)


#: Each server's options: keywords of its app factory and ``--flags`` of ``openenv-lab serve``.
OPTIONS: dict[str, tuple[ServerOption, ...]] = {
    "echo": (
        ServerOption("max_steps", int, 100, "messages per episode", range=Range(1, 1_000_000_000)),
        ServerOption(
            "mcp",
            bool,
            False,
            "serve MCP tools (echo_message, echo_with_length) as the official echo_env",
        ),
    ),
    "chess": (
        ServerOption("opponent", str, "random", "the opponent", OPPONENTS, on_reset=True, curriculum=True),
        ServerOption(
            "agent_color",
            str,
            "random",
            "the agent's colour",
            ("white", "black", "random"),
            on_reset=True,
            curriculum=True,
        ),
        ServerOption(
            "opponent_depth",
            int,
            2,
            "search depth of the searching opponents (at most "
            + ", ".join(f"{depth} for {name}" for name, depth in MAX_DEPTH.items())
            + ")",
            range=Range(1, max(MAX_DEPTH.values())),
            on_reset=True,
            curriculum=True,
        ),
        ServerOption(
            "max_moves",
            int,
            500,
            "half-moves (both sides) before a game is cut as a draw",
            range=Range(1, 100_000),
            on_reset=True,
            curriculum=True,
        ),
        ServerOption(
            "gamma",
            float,
            0.99,
            "discount of the discounted_rewards at a game's end",
            range=Range(0, 1, integer=False),
            on_reset=True,
            curriculum=True,
        ),
    ),
    "atari": (
        ServerOption("game", str, "pong", "the game (any of ale-py's 108 ROMs)", on_reset=True),
        ServerOption("obs_type", str, "rgb", "the observation", ("rgb", "grayscale", "ram"), on_reset=True),
        ServerOption("frameskip", int, 4, "emulator frames per step", range=Range(1, 100), on_reset=True),
        ServerOption(
            "repeat_action_probability",
            float,
            0.0,
            "sticky-action probability",
            range=Range(0, 1, integer=False),
            on_reset=True,
            curriculum=True,
        ),
        ServerOption(
            "full_action_space",
            bool,
            False,
            "all 18 actions instead of the game's minimal set",
            on_reset=True,
        ),
        ServerOption(
            "max_num_frames_per_episode",
            int,
            108_000,
            "frames before an episode is cut (0: none)",
            range=Range(0, 2**31 - 1),
            on_reset=True,
            curriculum=True,
        ),
    ),
    "gymnasium": (
        ServerOption("env_id", str, "CartPole-v1", "the gymnasium id of the environment served"),
        ServerOption(
            "max_episode_steps",
            int,
            None,
            "steps before an episode is truncated (default: the id's own limit)",
            range=Range(1, 1_000_000_000),
        ),
        ServerOption(
            "env_kwargs",
            dict,
            None,
            'keyword arguments of gym.make, e.g. {"is_slippery": false} for FrozenLake',
        ),
    ),
    "finrl": (
        ServerOption("data", str, "synthetic", "FinRL long-format CSV or Parquet file, or 'synthetic'"),
        ServerOption("trade_start", str, "2021-01-01", "first day of the 'trade' split (earlier: 'train')"),
        ServerOption(
            "indicators", str, ",".join(DEFAULT_INDICATORS), "stockstats indicators, comma-separated"
        ),
        ServerOption(
            "initial_amount",
            float,
            1_000_000.0,
            "cash at the start of each episode",
            range=Range(1, 1e15, integer=False),
        ),
        ServerOption("hmax", int, 100, "shares traded by an action of 1.0", range=Range(1, 1_000_000_000)),
        ServerOption(
            "buy_cost_pct",
            float,
            0.001,
            "transaction cost of buying, as a fraction",
            range=Range(0, 0.99, integer=False),
        ),
        ServerOption(
            "sell_cost_pct",
            float,
            0.001,
            "transaction cost of selling, as a fraction",
            range=Range(0, 0.99, integer=False),
        ),
        ServerOption(
            "reward_scaling",
            float,
            1e-4,
            "reward = change in total assets x this",
            range=Range(0, 1e6, integer=False),
        ),
        ServerOption(
            "turbulence_threshold",
            float,
            None,
            "sell everything on days this turbulent",
            range=Range(0, 1e15, integer=False),
        ),
    ),
}

#: What a reset takes beyond ``seed``, ``episode_id`` and the `OPTIONS` marked ``on_reset``.
RESET_ONLY: dict[str, tuple[ServerOption, ...]] = {
    "chess": (
        ServerOption("fen", str, None, "the starting position, in FEN", flag=False),
        ServerOption("split", str, None, "a task's split (with index): mate_in_1, ...", flag=False),
        ServerOption(
            "index", int, None, "a task's place in its split, from 0 to the split's size - 1", flag=False
        ),
    ),
    "atari": (
        ServerOption(
            "mode", int, None, "the game's mode: one of those the game has", flag=False, curriculum=True
        ),
        ServerOption(
            "difficulty",
            int,
            None,
            "the game's difficulty: one of those the game has",
            flag=False,
            curriculum=True,
        ),
        ServerOption(
            "screen_encoding",
            str,
            "json",
            "how screens travel",
            ("json", "raw", "zlib", "delta"),
            flag=False,
        ),
        ServerOption(
            "preprocessing",
            dict,
            None,
            "gymnasium's AtariPreprocessing on the server: true, or its settings (below)",
            flag=False,
        ),
    ),
    "finrl": (
        ServerOption(
            "split", str, "train", "the days traded", ("train", "trade", "all"), flag=False, curriculum=True
        ),
        ServerOption(
            "random_start", bool, False, "start on a random day of the split", flag=False, curriculum=True
        ),
    ),
}


def curriculum_names(family: str) -> tuple[str, ...]:
    """The reset options of ``family`` a curriculum may change between episodes (the spaces stay the
    same): what a vector env's ``set_attr`` takes (`Adapter.reset_option_names`)."""
    declared = (*OPTIONS.get(family, ()), *RESET_ONLY.get(family, ()))
    return tuple(option.name for option in declared if option.curriculum)
