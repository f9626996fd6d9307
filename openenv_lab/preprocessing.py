"""The settings of DeepMind-style Atari preprocessing, shared by the server that computes it and the adapter
that asks for it.

They are the keyword arguments of gymnasium's ``AtariPreprocessing``. Those that need the emulator
(`SERVER_SETTINGS`: no-op starts, frame skipping with max-pooling, grayscale, the resize, a lost life as
the end of an episode) travel to the server with ``reset(preprocessing={...})``
(`openenv_lab.servers.atari_preprocessing`); the others (`CLIENT_SETTINGS`: scaling to [0, 1], a channel
axis) the adapter applies to what comes back (`openenv_lab.adapters.AtariAdapter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .ranges import Range

__all__ = ["CLIENT_SETTINGS", "RANGES", "SERVER_SETTINGS", "Preprocessing", "split_preprocessing"]

SERVER_SETTINGS = ("noop_max", "frame_skip", "screen_size", "terminal_on_life_loss", "grayscale_obs")
CLIENT_SETTINGS = ("scale_obs", "grayscale_newaxis")
#: What the numeric settings may be (`openenv_lab.ranges`): a reset's work grows with the no-ops, a
#: step's with the frames skipped, a reply's with the screen (each side of ``screen_size``; ALE's screen
#: is 160 x 210).
RANGES = {"noop_max": Range(0, 1000), "frame_skip": Range(1, 100), "screen_size": Range(1, 512)}


@dataclass(frozen=True)
class Preprocessing:
    """The settings of gymnasium's ``AtariPreprocessing`` that need the emulator (its defaults too)."""

    noop_max: int = 30
    frame_skip: int = 4
    #: (width, height), as OpenCV and the wrapper take it.
    screen_size: tuple[int, int] = (84, 84)
    terminal_on_life_loss: bool = False
    grayscale_obs: bool = True

    @classmethod
    def from_request(cls, value: Any) -> Preprocessing:
        """Read ``reset(preprocessing=...)``: ``True`` (the defaults) or a dict of the settings."""
        if value is True:
            return cls()
        if not isinstance(value, dict):
            raise ValueError(
                "preprocessing must be true or an object of AtariPreprocessing's settings (noop_max, "
                f"frame_skip, screen_size, terminal_on_life_loss, grayscale_obs); got {value!r}"
            )
        unknown = set(value) - set(SERVER_SETTINGS)
        if unknown:
            raise ValueError(
                f"Unknown preprocessing setting(s) {sorted(unknown)}; AtariPreprocessing's are "
                f"{', '.join((*SERVER_SETTINGS, *CLIENT_SETTINGS))}"
            )
        settings = {**cls().__dict__, **value}
        for name in ("noop_max", "frame_skip"):
            RANGES[name].check(f"preprocessing {name}", settings[name])
        size = settings["screen_size"]
        if _is_int(size):
            size = (size, size)
        if not (
            isinstance(size, (list, tuple))
            and len(size) == 2
            and all(RANGES["screen_size"].contains(s) for s in size)
        ):
            raise ValueError(
                f"preprocessing screen_size must be {RANGES['screen_size']}, or [width, height] of two, "
                f"got {size!r}"
            )
        for name in ("terminal_on_life_loss", "grayscale_obs"):
            if not isinstance(settings[name], bool):
                raise ValueError(f"preprocessing {name} must be true or false, got {settings[name]!r}")
        return cls(
            noop_max=settings["noop_max"],
            frame_skip=settings["frame_skip"],
            screen_size=(int(size[0]), int(size[1])),
            terminal_on_life_loss=settings["terminal_on_life_loss"],
            grayscale_obs=settings["grayscale_obs"],
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "screen_size": list(self.screen_size)}


def split_preprocessing(value: Any) -> tuple[Preprocessing | None, dict[str, bool]]:
    """``preprocessing=`` as a user gives it (None or False: none; True: gymnasium's defaults; a dict of
    ``AtariPreprocessing``'s keyword arguments) as the server's settings and the client's.

    Example:
        >>> server, client = split_preprocessing({"screen_size": 64, "scale_obs": True})
        >>> server.screen_size, client
        ((64, 64), {'scale_obs': True, 'grayscale_newaxis': False})
    """
    client = dict.fromkeys(CLIENT_SETTINGS, False)
    if value is None or value is False:
        return None, client
    if isinstance(value, dict):
        for name in CLIENT_SETTINGS:
            if name in value:
                if not isinstance(value[name], (bool, np.bool_)):
                    raise ValueError(f"preprocessing {name} must be True or False, got {value[name]!r}")
                client[name] = bool(value[name])
        value = {k: v for k, v in value.items() if k not in CLIENT_SETTINGS}
    return Preprocessing.from_request(value), client


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
