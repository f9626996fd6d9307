"""The catalogue of our servers: which we bundle, what options each takes, and how to build its app.

Each server's options are declared once, with their ranges, in `openenv_lab.options`: the constructor
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
from dataclasses import dataclass
from typing import Any

from ..options import OPTIONS, RESET_ONLY, SEED, ServerOption

__all__ = ["BUNDLED_SERVERS", "SEED", "BundledServer", "ServerOption", "get_bundled_server"]


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
        options=OPTIONS["echo"],
        default_max_sessions=256,
        max_message_bytes=2 << 20,  # 256 sessions x 256 characters, each escaped as up to 6 bytes
    ),
    "chess": BundledServer(
        name="chess",
        summary="Chess against a random, greedy, minimax or Stockfish opponent (official chess_env schema).",
        app_factory="openenv_lab.servers.chess:make_app",
        max_message_bytes=256 << 10,  # a move or a FEN per session
        options=OPTIONS["chess"],
        reset_only=RESET_ONLY["chess"],
    ),
    "atari": BundledServer(
        name="atari",
        summary="Atari 2600 games through the Arcade Learning Environment (official atari_env schema).",
        app_factory="openenv_lab.servers.atari:make_app",
        options=OPTIONS["atari"],
        reset_only=RESET_ONLY["atari"],
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
        options=OPTIONS["gymnasium"],
    ),
    "finrl": BundledServer(
        name="finrl",
        summary="FinRL-style stock trading on a CSV/Parquet or synthetic market (official finrl_env schema).",
        app_factory="openenv_lab.servers.finrl:make_app",
        max_message_bytes=4 << 20,  # one number per ticker per session, for data with many tickers
        requires=(("stockstats", "stockstats"),),
        extra="finrl",
        options=OPTIONS["finrl"],
        reset_only=RESET_ONLY["finrl"],
    ),
}


def get_bundled_server(name: str) -> BundledServer:
    """The bundled server called ``name``, or a `ValueError` listing the ones that exist."""
    try:
        return BUNDLED_SERVERS[name]
    except KeyError:
        shipped = ", ".join(sorted(BUNDLED_SERVERS))
        raise ValueError(f"There is no bundled server called {name!r}; openenv_lab ships {shipped}") from None
