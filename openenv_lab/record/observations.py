"""Observations in a recording (``RecordTrajectory(env, observations=True)``): each one flattened to bytes,
and the spaces as JSON, so a recording can be read back as the arrays an offline RL library trains on.

An observation is stored as the bytes of ``gymnasium.spaces.flatten(space, observation)`` (the dtype of
``flatten_space(space)``), in the row's ``observation`` column; the observation and action spaces are
stored, as JSON, in the recording's metadata (`openenv_lab.space_json`). Spaces of Box, Discrete,
MultiBinary, MultiDiscrete, Dict and Tuple are supported; a text observation (the echo server's) has no
array form and is refused when the recorder is made.

Example:
    >>> from gymnasium import spaces
    >>> space = spaces.Dict({"mask": spaces.MultiBinary(3), "x": spaces.Box(-1.0, 1.0, (2,))})
    >>> again = space_from_json(space_to_json(space))
    >>> again == space
    True
    >>> observation = {"mask": [1, 0, 1], "x": [0.5, -0.25]}
    >>> decoded = decode(again, encode(space, observation))
    >>> decoded["mask"].tolist(), decoded["x"].tolist()
    ([1, 0, 1], [0.5, -0.25])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import flatten, flatten_space, unflatten

from ..space_json import UnsupportedSpace, space_from_json, space_to_json

__all__ = ["check_storable", "decode", "encode", "space_from_json", "space_to_json"]


def check_storable(space: spaces.Space[Any], what: str = "observation") -> None:
    """Raise a clear error if observations of ``space`` cannot be stored as arrays."""
    try:
        space_to_json(space)
        flatten_space(space)
    except (UnsupportedSpace, NotImplementedError, TypeError) as exc:
        raise ValueError(
            f"This env's {what} space ({space}) is text or has no array form to record ({exc}); record "
            "without observations=True (the family's own columns still describe each step)"
        ) from None


def encode(space: spaces.Space[Any], observation: Any, dtype: np.dtype[Any] | None = None) -> bytes:
    """``observation`` flattened, as the bytes of the flat space's dtype (``dtype``, when the caller has
    it: a recorder works it out once, not at every step)."""
    dtype = flatten_space(space).dtype if dtype is None else dtype
    return np.asarray(flatten(space, observation), dtype=dtype).tobytes()


def decode(space: spaces.Space[Any], data: bytes) -> Any:
    """The observation that `encode` turned into ``data``."""
    return unflatten(space, np.frombuffer(data, dtype=flatten_space(space).dtype))
