"""Gymnasium spaces and their values as JSON, and each space as a JSON Schema.

A server that plays a gymnasium environment (``openenv-lab serve gymnasium ENV_ID``) describes the
environment's spaces exactly (`space_to_json`), so that a client builds the same spaces again
(`space_from_json`): equal to the environment's own, bounds and dtypes included. Values travel as JSON
(`value_to_json`, `value_from_json`), and `json_schema` gives each space the schema of its values, which the
server's ``/schema`` publishes for clients that read only that.

Supported: ``Discrete``, ``Box``, ``MultiDiscrete``, ``MultiBinary``, and ``Dict`` and ``Tuple`` of them.
Infinite bounds travel as the strings ``"inf"`` and ``"-inf"`` (JSON has no infinity).

Example:
    >>> import numpy as np
    >>> from gymnasium import spaces
    >>> low, high = np.array([-1, -np.inf], np.float32), np.array([1, np.inf], np.float32)
    >>> box = spaces.Box(low, high, dtype=np.float32)
    >>> space_to_json(box)
    {'type': 'Box', 'shape': [2], 'dtype': 'float32', 'low': [-1.0, '-inf'], 'high': [1.0, 'inf']}
    >>> space_to_json(spaces.Box(0, 255, (210, 160, 3), np.uint8))["high"]
    255
    >>> space_from_json(space_to_json(box)) == box
    True
    >>> value_to_json(box, np.array([0.5, 2.0], dtype=np.float32))
    [0.5, 2.0]
    >>> json_schema(spaces.Discrete(3, start=1))
    {'type': 'integer', 'minimum': 1, 'maximum': 3}
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = [
    "UnsupportedSpace",
    "json_schema",
    "space_from_json",
    "space_to_json",
    "value_from_json",
    "value_to_json",
]


class UnsupportedSpace(ValueError):
    """A space this module cannot describe (``Text``, ``Graph``, ``Sequence``, ``OneOf``, custom ones)."""


def _unsupported(space: Any) -> UnsupportedSpace:
    return UnsupportedSpace(
        f"{space!r} cannot travel as JSON here: only Discrete, Box, MultiDiscrete, MultiBinary, and Dict "
        "and Tuple of them"
    )


def _bounds(values: np.ndarray) -> Any:
    """Box bounds as JSON: one number when all are equal (an Atari screen's 100,800), else the nested
    list; infinities as strings."""
    flat = np.asarray(values).ravel()
    if flat.size and np.all(flat == flat[0]):
        return _bound(flat[0])
    return np.vectorize(_bound, otypes=[object])(values).tolist()


def _bound(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _unbound(values: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    """Bounds read back: numbers or ``"inf"``/``"-inf"`` (recordings written before also hold infinite
    floats), one for all or one each, in ``dtype``."""
    floats = np.vectorize(float, otypes=[np.float64])(np.asarray(values, dtype=object))
    return np.broadcast_to(floats, shape).astype(dtype)


def space_to_json(space: spaces.Space[Any]) -> dict[str, Any]:
    """A JSON description from which `space_from_json` builds an equal space."""
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bounds(space.low),
            "high": _bounds(space.high),
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {key: space_to_json(sub) for key, sub in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(sub) for sub in space.spaces]}
    raise _unsupported(space)


def space_from_json(description: dict[str, Any]) -> spaces.Space[Any]:
    """The space `space_to_json` described (a `ValueError` for a description it did not make)."""
    kind = description.get("type") if isinstance(description, dict) else None
    if kind == "Discrete":
        return spaces.Discrete(int(description["n"]), start=int(description.get("start", 0)))
    if kind == "Box":
        dtype = np.dtype(description["dtype"])
        shape = tuple(int(n) for n in description["shape"])
        low = _unbound(description["low"], dtype, shape)
        high = _unbound(description["high"], dtype, shape)
        return spaces.Box(low, high, shape, dtype)
    if kind == "MultiDiscrete":
        dtype = np.dtype(description.get("dtype", "int64"))
        return spaces.MultiDiscrete(
            np.asarray(description["nvec"], dtype=dtype), dtype=dtype, start=np.asarray(description["start"])
        )
    if kind == "MultiBinary":
        return spaces.MultiBinary(description["n"])
    if kind == "Dict":
        return spaces.Dict({key: space_from_json(sub) for key, sub in description["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_json(sub) for sub in description["spaces"]])
    raise ValueError(f"Unknown space type {kind!r}: not a description space_to_json wrote")


def value_to_json(space: spaces.Space[Any], value: Any) -> Any:
    """A value of ``space`` as JSON (numbers and lists; a ``Dict``'s as an object)."""
    if isinstance(space, spaces.Discrete):
        return int(value)
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.asarray(value).tolist()
    if isinstance(space, spaces.Dict):
        return {key: value_to_json(sub, value[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [value_to_json(sub, part) for sub, part in zip(space.spaces, value, strict=True)]
    raise _unsupported(space)


def value_from_json(space: spaces.Space[Any], value: Any) -> Any:
    """A JSON value as a value of ``space`` (its dtype and shape); a `ValueError` when it cannot be one."""
    if isinstance(space, spaces.Discrete):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected a whole number for {space}, got {value!r}")
        return np.int64(value)
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        try:
            array = np.asarray(value, dtype=space.dtype)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"expected numbers shaped {space.shape} for {space}, got {value!r}") from exc
        if array.shape != space.shape:
            raise ValueError(f"expected shape {space.shape} for {space}, got {array.shape}")
        return array
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise ValueError(f"expected an object with keys {sorted(space.spaces)}, got {value!r}")
        return {key: value_from_json(sub, value[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise ValueError(f"expected a list of {len(space.spaces)} values, got {value!r}")
        return tuple(value_from_json(sub, part) for sub, part in zip(space.spaces, value, strict=True))
    raise _unsupported(space)


def json_schema(space: spaces.Space[Any]) -> dict[str, Any]:
    """The JSON Schema of the values of ``space``: types, shapes (``minItems == maxItems``), and bounds
    where they are the same for every element and finite."""
    if isinstance(space, spaces.Discrete):
        return {"type": "integer", "minimum": int(space.start), "maximum": int(space.start + space.n - 1)}
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        integer = np.issubdtype(space.dtype, np.integer)
        item: dict[str, Any] = {"type": "integer" if integer else "number"}
        low, high = _uniform_bounds(space)
        if low is not None:
            item["minimum"] = low
        if high is not None:
            item["maximum"] = high
        for length in reversed(space.shape):
            item = {"type": "array", "items": item, "minItems": int(length), "maxItems": int(length)}
        return item
    if isinstance(space, spaces.Dict):
        return {
            "type": "object",
            "properties": {key: json_schema(sub) for key, sub in space.spaces.items()},
            "required": list(space.spaces),
            "additionalProperties": False,
        }
    if isinstance(space, spaces.Tuple):
        parts = [json_schema(sub) for sub in space.spaces]
        return {"type": "array", "prefixItems": parts, "minItems": len(parts), "maxItems": len(parts)}
    raise _unsupported(space)


def _uniform_bounds(space: spaces.Space[Any]) -> tuple[Any, Any]:
    if isinstance(space, spaces.MultiBinary):
        return 0, 1
    if isinstance(space, spaces.MultiDiscrete):
        low, high = space.start, space.start + space.nvec - 1
    else:
        low, high = space.low, space.high
    return _one(low), _one(high)


def _one(values: np.ndarray) -> Any:
    """The bound shared by every element, when there is one and it is finite (else None)."""
    flat = np.asarray(values).ravel()
    if flat.size == 0 or not np.all(flat == flat[0]):
        return None
    value = flat[0].item()
    return None if isinstance(value, float) and not math.isfinite(value) else value
