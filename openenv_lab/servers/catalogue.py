"""The catalogue of our servers: which we bundle, what options each takes, and how to build its app.

Each server's options are declared here once, with their ranges (`openenv_lab.ranges`): the constructor
arguments (the ``serve`` flags), which of them a reset may change, and the options only a reset takes.
The servers check what they are sent against these declarations before doing any work
(`BundledServer.check`), the command line parses its flags with them, and ``docs/options.md`` is rendered
from them.

Importing it is cheap; the servers themselves (and ``openenv``) are imported only when an app is built,
normally in a server process of its own.

Example:
    >>> from openenv_lab.servers import BUNDLED_SERVERS
    >>> sorted(BUNDLED_SERVERS)
    ['atari', 'chess', 'echo', 'finrl', 'gymnasium']
    >>> [option.name for option in BUNDLED_SERVERS["chess"].options]
    ['opponent', 'agent_color', 'opponent_depth', 'max_moves', 'gamma']
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..market import DEFAULT_INDICATORS
from ..ranges import Range
from .chess_opponents import MAX_DEPTH, OPPONENTS

__all__ = ["BUNDLED_SERVERS", "SEED", "BundledServer", "ServerOption", "get_bundled_server"]


@dataclass(frozen=True)
class ServerOption:
    """One option of a bundled server: a keyword of its app factory and a ``--flag`` of the CLI (or, with
    ``flag=False``, an option only a reset takes); ``on_reset``: a reset may change it too."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    #: The numbers it may be (numeric options); None for text, yes/no and choices.
    range: Range | None = None
    on_reset: bool = False
    flag: bool = True

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


@dataclass(frozen=True)
class BundledServer:
    """A server we ship: its name, what it is, where its app factory lives, and its options."""

    name: str
    summary: str
    app_factory: str
    options: tuple[ServerOption, ...] = ()
    default_max_sessions: int = 64
    #: The largest WebSocket message the server reads (larger ones close the connection with 1009): a few
    #: times the largest legitimate one, a ``/ws/batch`` step of ``default_max_sessions`` sessions.
    max_message_bytes: int = 1 << 20
    #: What the server imports beyond openenv-lab's own dependencies: (module, its package on PyPI).
    requires: tuple[tuple[str, str], ...] = ()
    #: The openenv-lab extra that installs them.
    extra: str | None = None
    #: What a reset takes beyond ``seed``, ``episode_id`` and the ``options`` marked ``on_reset``.
    reset_only: tuple[ServerOption, ...] = ()

    @property
    def reset_options(self) -> tuple[ServerOption, ...]:
        """Every option a reset takes, with the seed first (``episode_id`` is any text)."""
        return (SEED, *(option for option in self.options if option.on_reset), *self.reset_only)

    def option(self, name: str) -> ServerOption:
        """The declaration of the option called ``name`` (a flag's or a reset's)."""
        for option in (*self.options, *self.reset_only, SEED):
            if option.name == name:
                return option
        raise KeyError(f"The {self.name} server has no option {name!r}")

    def refuse_unknown(self, names: Any) -> None:
        """A `ValueError` listing what a reset takes, when ``names`` has any it does not."""
        unknown = sorted(set(names))
        if unknown:
            takes = ", ".join(["seed", "episode_id", *(o.name for o in self.reset_options if o is not SEED)])
            raise ValueError(f"Unknown reset option(s) {unknown}; the {self.name} server takes {takes}")

    def check(self, **values: Any) -> None:
        """Check each value against its option's declaration: a `ValueError` that names the option, the
        value and what it may be, for the first that does not fit. ``None`` is "the default".

        Example:
            >>> BUNDLED_SERVERS["atari"].check(frameskip=500_000_000)
            Traceback (most recent call last):
            ...
            ValueError: frameskip must be a whole number from 1 to 100, got 500000000
        """
        for name, value in values.items():
            if value is not None:
                self.option(name).check(value)

    def defaults(self, **given: Any) -> dict[str, Any]:
        """Every option a server is made with (its ``serve`` flags): ``given`` where given, else the
        declared default; a name it does not take is a `ValueError` (the values are the server's to check).

        Example:
            >>> BUNDLED_SERVERS["echo"].defaults(max_steps=5)
            {'max_steps': 5, 'mcp': False}
        """
        known = [option.name for option in self.options]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"The {self.name} server has no option(s) {unknown}; it takes {sorted(known)}")
        return {option.name: given.get(option.name, option.default) for option in self.options}

    def missing(self) -> str | None:
        """What this install lacks to run the server, as a sentence that says what to install; None when
        nothing is missing (checked without importing anything).

        Example:
            >>> BUNDLED_SERVERS["chess"].missing() is None
            True
        """
        absent = [package for module, package in self.requires if importlib.util.find_spec(module) is None]
        if not absent:
            return None
        return (
            f"The {self.name} server needs {' and '.join(absent)}, which this install does not have: "
            f"pip install 'openenv-lab[{self.extra}]'"
        )

    def make_app(self, *, max_sessions: int | None = None, **options: Any) -> Any:
        """Build the server's FastAPI app (imports the server module and ``openenv``)."""
        needs = self.missing()
        if needs is not None:
            raise ImportError(needs)
        self.defaults(**options)  # an unknown name is refused before the server module is imported
        module_name, function_name = self.app_factory.split(":")
        factory = getattr(importlib.import_module(module_name), function_name)
        return factory(max_sessions=max_sessions or self.default_max_sessions, **options)


#: Our servers, by the name ``openenv-lab serve NAME`` and ``EmbeddedServer(NAME)`` take.
BUNDLED_SERVERS: dict[str, BundledServer] = {
    "echo": BundledServer(
        name="echo",
        summary="Echoes text messages: the smallest OpenEnv environment, for lessons and benchmarks.",
        app_factory="openenv_lab.servers.echo:make_app",
        options=(
            ServerOption("max_steps", int, 100, "messages per episode", range=Range(1, 1_000_000_000)),
            ServerOption(
                "mcp",
                bool,
                False,
                "serve MCP tools (echo_message, echo_with_length) as the official echo_env",
            ),
        ),
        default_max_sessions=256,
        max_message_bytes=2 << 20,  # 256 sessions x 256 characters, each escaped as up to 6 bytes
    ),
    "chess": BundledServer(
        name="chess",
        summary="Chess against a random, greedy, minimax or Stockfish opponent (official chess_env schema).",
        app_factory="openenv_lab.servers.chess:make_app",
        max_message_bytes=256 << 10,  # a move or a FEN per session
        options=(
            ServerOption("opponent", str, "random", "the opponent", OPPONENTS, on_reset=True),
            ServerOption(
                "agent_color",
                str,
                "random",
                "the agent's colour",
                ("white", "black", "random"),
                on_reset=True,
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
            ),
            ServerOption(
                "max_moves",
                int,
                500,
                "half-moves (both sides) before a game is cut as a draw",
                range=Range(1, 100_000),
                on_reset=True,
            ),
            ServerOption(
                "gamma",
                float,
                0.99,
                "discount of the discounted_rewards at a game's end",
                range=Range(0, 1, integer=False),
                on_reset=True,
            ),
        ),
        reset_only=(
            ServerOption("fen", str, None, "the starting position, in FEN", flag=False),
            ServerOption("split", str, None, "a task's split (with index): mate_in_1, ...", flag=False),
            ServerOption(
                "index", int, None, "a task's place in its split, from 0 to the split's size - 1", flag=False
            ),
        ),
    ),
    "atari": BundledServer(
        name="atari",
        summary="Atari 2600 games through the Arcade Learning Environment (official atari_env schema).",
        app_factory="openenv_lab.servers.atari:make_app",
        options=(
            ServerOption("game", str, "pong", "the game (any of ale-py's 108 ROMs)", on_reset=True),
            ServerOption(
                "obs_type", str, "rgb", "the observation", ("rgb", "grayscale", "ram"), on_reset=True
            ),
            ServerOption("frameskip", int, 4, "emulator frames per step", range=Range(1, 100), on_reset=True),
            ServerOption(
                "repeat_action_probability",
                float,
                0.0,
                "sticky-action probability",
                range=Range(0, 1, integer=False),
                on_reset=True,
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
            ),
        ),
        reset_only=(
            ServerOption("mode", int, None, "the game's mode: one of those the game has", flag=False),
            ServerOption(
                "difficulty", int, None, "the game's difficulty: one of those the game has", flag=False
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
        default_max_sessions=16,
        max_message_bytes=256 << 10,  # actions are integers; the reset's options are the largest
        requires=(("ale_py", "ale-py"),),  # OpenCV only for server-side preprocessing, which says so
        extra="atari",
    ),
    "gymnasium": BundledServer(
        name="gymnasium",
        summary="Any registered gymnasium environment (CartPole, FrozenLake...), its spaces in its /schema.",
        app_factory="openenv_lab.servers.gymnasium_env:make_app",
        max_message_bytes=1 << 20,  # one action per session: a few numbers for the small worlds
        options=(
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
    ),
    "finrl": BundledServer(
        name="finrl",
        summary="FinRL-style stock trading on a CSV/Parquet or synthetic market (official finrl_env schema).",
        app_factory="openenv_lab.servers.finrl:make_app",
        max_message_bytes=4 << 20,  # one number per ticker per session, for data with many tickers
        requires=(("stockstats", "stockstats"),),
        extra="finrl",
        options=(
            ServerOption("data", str, "synthetic", "FinRL long-format CSV or Parquet file, or 'synthetic'"),
            ServerOption(
                "trade_start", str, "2021-01-01", "first day of the 'trade' split (earlier: 'train')"
            ),
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
            ServerOption(
                "hmax", int, 100, "shares traded by an action of 1.0", range=Range(1, 1_000_000_000)
            ),
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
        reset_only=(
            ServerOption("split", str, "train", "the days traded", ("train", "trade", "all"), flag=False),
            ServerOption("random_start", bool, False, "start on a random day of the split", flag=False),
        ),
    ),
}


def get_bundled_server(name: str) -> BundledServer:
    """The bundled server called ``name``, or a `ValueError` listing the ones that exist."""
    try:
        return BUNDLED_SERVERS[name]
    except KeyError:
        shipped = ", ".join(sorted(BUNDLED_SERVERS))
        raise ValueError(f"There is no bundled server called {name!r}; openenv_lab ships {shipped}") from None
