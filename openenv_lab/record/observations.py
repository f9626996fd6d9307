"""Observations in a recording (``RecordTrajectory(env, observations=True)``): each one flattened to bytes,
and the spaces as JSON, so a recording can be read back as the arrays an offline RL library trains on.

An observation is stored as the bytes of ``gymnasium.spaces.flatten(space, observation)`` (the dtype of
``flatten_space(space)``), in the row's ``observation`` column; the observation and action spaces are
stored, as JSON, in the recording's metadata. Spaces of Box, Discrete, MultiBinary, MultiDiscrete, Dict
and Tuple are supported; a text observation (the echo server's) has no array form and is refused when the
recorder is made.

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

__all__ = ["check_storable", "decode", "encode", "space_from_json", "space_to_json"]


def check_storable(space: spaces.Space[Any], what: str = "observation") -> None:
    """Raise a clear error if observations of ``space`` cannot be stored as arrays."""
    try:
        space_to_json(space)
        flatten_space(space)
    except (NotImplementedError, TypeError) as exc:
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


def space_to_json(space: spaces.Space[Any]) -> dict[str, Any]:
    """A JSON-able description of ``space`` (`space_from_json` makes it again)."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _plain(space.low),
            "high": _plain(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {key: space_to_json(inner) for key, inner in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(inner) for inner in space.spaces]}
    raise NotImplementedError(f"no JSON form for {type(space).__name__} spaces")


def space_from_json(description: dict[str, Any]) -> spaces.Space[Any]:
    """The space that `space_to_json` described."""
    kind = description["type"]
    if kind == "Box":
        dtype = np.dtype(description["dtype"])
        shape = tuple(description["shape"])
        low = np.broadcast_to(np.asarray(description["low"], dtype=np.float64), shape).astype(dtype)
        high = np.broadcast_to(np.asarray(description["high"], dtype=np.float64), shape).astype(dtype)
        return spaces.Box(low, high, shape, dtype)
    if kind == "Discrete":
        return spaces.Discrete(description["n"], start=description["start"])
    if kind == "MultiBinary":
        return spaces.MultiBinary(description["n"])
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(description["nvec"], start=description["start"])
    if kind == "Dict":
        return spaces.Dict({key: space_from_json(inner) for key, inner in description["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_json(inner) for inner in description["spaces"]])
    raise ValueError(f"Unknown space type {kind!r} in a recording's metadata")


def _plain(bound: np.ndarray) -> Any:
    """A Box bound as JSON: one number when all are equal, else the nested list (inf as a float)."""
    values = np.asarray(bound, dtype=np.float64)
    if values.size and np.all(values == values.flat[0]):
        return float(values.flat[0])
    return values.tolist()
