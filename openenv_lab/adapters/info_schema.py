"""Infos made to be stacked: each family's ``info`` keys, with a fixed type and a neutral value.

Research code stacks the infos of several environments, step after step: gymnasium's ``SyncVectorEnv``
and ``AsyncVectorEnv`` into one array per key, TorchRL into a TensorDict, Tianshou into a ``Batch`` and a
replay buffer. All of them need what ALE's infos give: the same keys on every step from the reset on,
each with one type. A server's JSON gives none of that (a field is null on one step and a number on the
next; keys come with an episode's end and go with the next reset; lists of any length), so no info of
ours carries it as it came. Each adapter declares its keys (`InfoKey`), and `InfoSchema.conform` makes
every info fit them:

- a key the reply says nothing about (an episode's ``end_reason`` before its end) takes the key's
  neutral value, documented with it (``""``, ``0``, ``False``, zeros);
- a value of another type (a null where a number was declared; a number the server sends as text) takes
  the neutral value too, with one warning naming the field: research code never sees a None where it
  saw a number;
- numbers come out as Python ``int``, ``float`` and ``bool`` (gymnasium batches each into an array of
  its own type), fixed-shape arrays as numpy arrays of their declared dtype, text only where it is the
  point (a FEN).

The server's own JSON stays one argument away: ``make(..., raw_info=True)`` adds it, unchanged, as
``info["raw_observation"]`` and ``info["metadata"]``. The other way, ``make(..., text_info=False)`` leaves
numbers only (`InfoSchema.numbers_only`: no text, each dict's numbers as keys of their own), which is
what TorchRL's batched ``GymEnv`` can stack: its info reader types each key from a first value, and text
has no dtype there. The tables in ``docs/infos.md`` are rendered from
these declarations (`markdown_table`).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KINDS", "InfoKey", "InfoSchema", "markdown_table"]

#: The types an info key may have.
KINDS = ("bool", "int", "float", "str", "array", "dict")

_MISSING = object()


@dataclass(frozen=True)
class InfoKey:
    """One ``info`` key: its name, its kind (one of `KINDS`), what it means and its neutral value.

    ``shape`` and ``dtype`` are an array's; ``keys`` the keys of a ``dict`` (each an `InfoKey`).
    ``nullable``: the server's schema allows ``null`` here, which then takes the neutral value unwarned.

    Example:
        >>> InfoKey("lives", "int", "lives left").neutral_value()
        0
        >>> InfoKey("holdings", "array", "shares held", shape=(2,), dtype="int64").neutral_value()
        array([0, 0])
    """

    name: str
    kind: str
    meaning: str
    neutral: Any = None
    shape: tuple[int, ...] = ()
    dtype: str = "float64"
    keys: tuple[InfoKey, ...] = ()
    nullable: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"InfoKey {self.name!r}: kind {self.kind!r} is not one of {KINDS}")

    def neutral_value(self) -> Any:
        """The value the key has where there is nothing to say (a fresh copy for arrays and dicts)."""
        if self.kind == "array":
            if self.neutral is not None:
                return np.array(self.neutral, dtype=self.dtype)
            return np.zeros(self.shape, dtype=self.dtype)
        if self.kind == "dict":
            return {key.name: key.neutral_value() for key in self.keys}
        if self.neutral is not None:
            return self.neutral
        return {"bool": False, "int": 0, "float": 0.0, "str": ""}[self.kind]

    def type_name(self) -> str:
        """The type as the docs write it: ``int``, ``float64 array (5,)``, ``dict``."""
        if self.kind == "array":
            return f"{self.dtype} array {self.shape}"
        return self.kind

    def fit(self, value: Any) -> Any:
        """``value`` as this key's type, or `_MISSING` where it does not fit."""
        kind = self.kind
        if kind == "float":
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
                try:
                    return float(value)
                except OverflowError:
                    return _MISSING
            return _MISSING
        if kind == "int":
            if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
                return int(value)
            if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
                return int(value)
            return _MISSING
        if kind == "bool":
            return bool(value) if isinstance(value, (bool, np.bool_)) else _MISSING
        if kind == "str":
            return value if isinstance(value, str) else _MISSING
        if kind == "array":
            try:
                array = np.asarray(value, dtype=self.dtype)
            except (TypeError, ValueError, OverflowError):
                return _MISSING
            return array if array.shape == self.shape else _MISSING
        return value if isinstance(value, dict) else _MISSING  # a dict: its keys are fitted by the schema


class InfoSchema:
    """The keys of one environment's infos, and what makes every info fit them.

    ``source`` names where the values come from, for the warnings (a server's URL, a family).

    Example:
        >>> schema = InfoSchema([InfoKey("lives", "int", "lives left"), InfoKey("end_reason", "str", "why")])
        >>> schema.conform({"lives": 3})
        {'lives': 3, 'end_reason': ''}
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as said:
        ...     warnings.simplefilter("always")
        ...     schema.conform({"lives": None, "end_reason": "game_over"})
        {'lives': 0, 'end_reason': 'game_over'}
        >>> "'lives'" in str(said[0].message)
        True
    """

    def __init__(self, keys: Iterable[InfoKey], source: str = "the server") -> None:
        self.keys = tuple(keys)
        names = [key.name for key in self.keys]
        if len(set(names)) != len(names):
            raise ValueError(f"An info schema names a key twice: {names}")
        self.source = source
        self._warned: set[str] = set()
        self._plan = _plan(self.keys)
        self._numbers = tuple(_numbers(self.keys))

    def names(self) -> list[str]:
        """The keys' names, in order."""
        return [key.name for key in self.keys]

    def conform(self, info: dict[str, Any]) -> dict[str, Any]:
        """A new info with exactly the schema's keys, each of its type (see the module docstring)."""
        return self._conform(self._plan, info, "")

    def _conform(self, plan: list[_Step], info: dict[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        get = info.get
        for name, exact, constant, key, inner in plan:
            value = get(name, _MISSING)
            if type(value) is exact:  # almost every value of almost every step: already of its type
                out[name] = value
            elif value is _MISSING or (value is None and key.nullable):  # nothing to say / a null allowed
                out[name] = constant if exact is not None else key.neutral_value()
            else:
                fitted = key.fit(value)
                if fitted is _MISSING:
                    self._say_misfit(prefix + name, key, value)
                    out[name] = constant if exact is not None else key.neutral_value()
                elif inner is not None:
                    out[name] = self._conform(inner, fitted, f"{prefix}{name}.")
                else:
                    out[name] = fitted
        return out

    def numbers_only(self, info: dict[str, Any]) -> dict[str, Any]:
        """A conformed ``info`` with its numbers only: its text keys left out, and each dict's numbers
        under keys of their own, ``{dict}_{key}`` (`number_keys` lists them).

        Example:
            >>> schema = InfoSchema([
            ...     InfoKey("date", "str", "the day"),
            ...     InfoKey("parts", "dict", "the reward's parts", keys=(InfoKey("costs", "float", "x"),)),
            ... ])
            >>> schema.numbers_only(schema.conform({"date": "2024-01-02", "parts": {"costs": -1.5}}))
            {'parts_costs': -1.5}
        """
        return {
            flat: info[name] if inner is None else info[name][inner] for flat, name, inner in self._numbers
        }

    def number_keys(self) -> list[str]:
        """The keys of `numbers_only`'s infos, in order."""
        return [flat for flat, _, _ in self._numbers]

    def _say_misfit(self, name: str, key: InfoKey, value: Any) -> None:
        if name in self._warned:
            return
        self._warned.add(name)
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        warnings.warn(
            f"{self.source} sent {name!r} = {shown}, which is not the {key.type_name()} its info key "
            f"holds: info[{key.name!r}] keeps its type, with {key.neutral_value()!r} where the value does "
            "not fit (said once; make the env with raw_info=True to see the server's JSON as it came)",
            stacklevel=5,
        )


#: One key's step of `InfoSchema.conform`: its name, the Python type its values already have when they
#: need no conversion (None for arrays and dicts, which always get one), its neutral value where that is
#: immutable, the key, and a dict's own plan.
_Step = tuple[str, "type | None", Any, InfoKey, "list[_Step] | None"]

_EXACT = {"bool": bool, "int": int, "float": float, "str": str}


def _plan(keys: tuple[InfoKey, ...]) -> list[_Step]:
    return [
        (
            key.name,
            _EXACT.get(key.kind),
            key.neutral_value() if key.kind in _EXACT else None,
            key,
            _plan(key.keys) if key.kind == "dict" else None,
        )
        for key in keys
    ]


def _numbers(keys: tuple[InfoKey, ...]) -> Iterable[tuple[str, str, str | None]]:
    """`InfoSchema.numbers_only`'s plan: (its key, the info's key, the dict's key or None)."""
    for key in keys:
        if key.kind == "dict":
            for inner in key.keys:
                if inner.kind not in ("str", "dict"):
                    yield f"{key.name}_{inner.name}", key.name, inner.name
        elif key.kind != "str":
            yield key.name, key.name, None


def markdown_table(keys: Iterable[InfoKey]) -> str:
    """A Markdown table of ``keys``: name, type, neutral value, meaning (a dict's keys below it)."""
    lines = ["| key | type | neutral value | meaning |", "| --- | --- | --- | --- |"]

    def row(key: InfoKey, name: str) -> None:
        if key.kind in ("array", "dict"):
            neutral = "zeros" if key.kind == "array" else ""
        else:
            value = key.neutral_value()
            neutral = json.dumps(value) if key.kind == "str" else repr(value)
        neutral = f"`{neutral}`" if neutral else ""
        lines.append(f"| `{name}` | {key.type_name()} | {neutral} | {key.meaning} |")
        for inner in key.keys:
            row(inner, f"{name}.{inner.name}")

    for key in keys:
        row(key, key.name)
    return "\n".join(lines)
