"""The catalogue of our servers: which we bundle, what options each takes, and how to build its app.

Importing it is cheap; the servers themselves (and ``openenv``) are imported only when an app is built,
normally in a server process of its own.

Example:
    >>> from openenv_lab.servers import BUNDLED_SERVERS
    >>> sorted(BUNDLED_SERVERS)
    ['atari', 'chess', 'echo', 'finrl']
    >>> [option.name for option in BUNDLED_SERVERS["chess"].options]
    ['opponent', 'agent_color', 'opponent_depth', 'max_moves', 'gamma']
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from ..market import DEFAULT_INDICATORS
from .chess_opponents import OPPONENTS

__all__ = ["BUNDLED_SERVERS", "BundledServer", "ServerOption", "get_bundled_server"]


@dataclass(frozen=True)
class ServerOption:
    """One option of a bundled server: a keyword of its app factory and a ``--flag`` of the CLI."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None


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
        known = {option.name for option in self.options}
        unknown = set(options) - known
        if unknown:
            raise ValueError(
                f"The {self.name} server has no option(s) {sorted(unknown)}; it takes {sorted(known)}"
            )
        module_name, function_name = self.app_factory.split(":")
        factory = getattr(importlib.import_module(module_name), function_name)
        return factory(max_sessions=max_sessions or self.default_max_sessions, **options)


BUNDLED_SERVERS: dict[str, BundledServer] = {
    "echo": BundledServer(
        name="echo",
        summary="Echoes text messages: the smallest OpenEnv environment, for lessons and benchmarks.",
        app_factory="openenv_lab.servers.echo:make_app",
        options=(
            ServerOption("max_steps", int, 100, "messages per episode"),
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
            ServerOption(
                "opponent",
                str,
                "random",
                "the default opponent",
                OPPONENTS,
            ),
            ServerOption(
                "agent_color", str, "random", "the agent's default colour", ("white", "black", "random")
            ),
            ServerOption("opponent_depth", int, 2, "search depth of the minimax and stockfish opponents"),
            ServerOption("max_moves", int, 500, "half-moves (both sides) before a game is cut as a draw"),
            ServerOption("gamma", float, 0.99, "discount of the discounted_rewards at a game's end"),
        ),
    ),
    "atari": BundledServer(
        name="atari",
        summary="Atari 2600 games through the Arcade Learning Environment (official atari_env schema).",
        app_factory="openenv_lab.servers.atari:make_app",
        options=(
            ServerOption("game", str, "pong", "the default game (any of ale-py's 108 ROMs)"),
            ServerOption("obs_type", str, "rgb", "the default observation", ("rgb", "grayscale", "ram")),
            ServerOption("frameskip", int, 4, "emulator frames per step"),
            ServerOption("repeat_action_probability", float, 0.0, "sticky-action probability"),
            ServerOption(
                "full_action_space", bool, False, "all 18 actions instead of the game's minimal set"
            ),
            ServerOption(
                "max_num_frames_per_episode", int, 108_000, "frames before an episode is cut (0: none)"
            ),
        ),
        default_max_sessions=16,
        max_message_bytes=256 << 10,  # actions are integers; the reset's options are the largest
        requires=(("ale_py", "ale-py"),),  # OpenCV only for server-side preprocessing, which says so
        extra="atari",
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
            ServerOption("initial_amount", float, 1_000_000.0, "cash at the start of each episode"),
            ServerOption("hmax", int, 100, "shares traded by an action of 1.0"),
            ServerOption("buy_cost_pct", float, 0.001, "transaction cost of buying, as a fraction"),
            ServerOption("sell_cost_pct", float, 0.001, "transaction cost of selling, as a fraction"),
            ServerOption("reward_scaling", float, 1e-4, "reward = change in total assets x this"),
            ServerOption("turbulence_threshold", float, None, "sell everything on days this turbulent"),
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
