"""JSON Schema to gymnasium spaces: how the generic adapter reads a pydantic schema and a first value.

OpenEnv servers publish pydantic JSON Schemas for their action and observation models. They say which
fields exist and their types, but not the shapes of lists or the bounds of numbers, so a field's space
comes from its schema and, for lists, from the first observation's value. `field_for` returns a `Field`:
the space, and how to turn a JSON value into a space value and back. The mapping:

============================================  ==========================================================
JSON Schema                                   gymnasium space (value in the observation/action)
============================================  ==========================================================
``enum`` of values                            ``Discrete(n)`` (the index into the enum)
``boolean``                                   ``Discrete(2)`` (0 or 1)
``integer`` with lower and upper bounds        ``Discrete(max - min + 1, start=min)`` (exclusive bounds too)
``integer`` otherwise                         ``Box(int64, shape=())``, bounds from the schema or +-2**31;
                                              an action: `WideInteger` (every int64 the schema allows,
                                              samples small; see `openenv_lab.adapters.generic`)
``number``                                    ``Box(float64, shape=())``, bounds from the schema or +-inf
``string``                                    `UnicodeText` (any text up to ``maxLength``, or of any
                                              length without one; samples then stay short)
list of numbers (any nesting)                 ``Box`` shaped like the first observation's value (empty
                                              then, or an action: ``minItems == maxItems`` or a ``Sequence``)
list of booleans                              ``MultiBinary`` shaped like the first observation's value
list of strings / of objects                  ``Sequence(UnicodeText)`` / ``Sequence(Dict)``
object with ``properties``                    ``Dict`` of its fields
object without properties, unions, unknown    `JSONText` holding the value as JSON (``json.loads`` it)
``const`` fields (e.g. MCP ``type``)          no space: the constant is sent as it is
optional (``anyOf [T, null]``)                T's space; ``null`` becomes its zero value (0, ``""``, zeros)
============================================  ==========================================================

What cannot be inferred, and what happens instead: list actions without ``minItems == maxItems`` are a
``Sequence`` of the item space; numeric lists whose length changes during an episode are refused when
the length changes (`ProtocolError`); unbounded numbers get infinite (floats) or +-2**31 (integers)
bounds; free-form objects, unions of several types, ragged lists and recursive models travel as JSON
text. Where the schema bounds a string or a list (``maxLength``, ``maxItems``), the space has exactly that
bound, and a server that sends more raises `ProtocolError` naming the field and both lengths; where it
does not, neither does the space, so an observation never falls outside its space (a server echoing a
long message included).
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from ..client import ProtocolError

__all__ = [
    "ENVELOPE_FIELDS",
    "SAMPLE_LENGTH",
    "BoundedSequence",
    "Field",
    "JSONText",
    "UnicodeText",
    "WideInteger",
    "bounds",
    "declared_field",
    "field_for",
    "resolve",
    "scalar_kind",
]

_INT_BOUND = 2**31
_MAX_JSON = 100 * 1024 * 1024  # the largest message a session accepts (openenv_lab.client.session)
#: The longest text `UnicodeText.sample` makes for a field without ``maxLength``: what a server answers in
#: reasonable time (its ``contains`` still accepts any length).
SAMPLE_LENGTH = 256
#: How many values `WideInteger.sample` draws from: integers a server takes (an id, a count, a move).
SAMPLE_SPAN = 256
#: Keys of an observation that are the envelope's, not the environment's fields.
ENVELOPE_FIELDS = frozenset({"metadata", "reward", "done"})


def _length_left_open(mask: Any, probability: Any) -> bool:
    """Whether a ``Text``/``Sequence`` sample's (length, ...) mask leaves the length to the space."""
    given = mask if mask is not None else probability
    return given is None or given[0] is None


def _with_length(length: int, mask: Any, probability: Any) -> tuple[Any, Any]:
    """The sample's mask (or probability) with its length set, the rest of it kept."""
    if probability is not None:
        return mask, (length, probability[1])
    return (length, None if mask is None else mask[1]), probability


class UnicodeText(spaces.Text):
    """A ``Text`` space that accepts any string up to ``max_length`` (samples use printable ASCII).

    Gymnasium's ``Text`` only accepts characters from its charset; servers send arbitrary Unicode. With
    ``max_length=None`` (a schema without ``maxLength``) the space has no upper length: it holds any text
    a message can carry, and `sample` stays short (up to `SAMPLE_LENGTH` characters), since a server
    echoing or parsing a random megabyte answers slowly.

    Example:
        >>> "é ♞ {}" in UnicodeText(max_length=10)
        True
        >>> free = UnicodeText(seed=0)
        >>> free, "x" * 1_000_000 in free, len(free.sample()) <= SAMPLE_LENGTH
        (UnicodeText(0, None), True, True)
    """

    def __init__(self, max_length: int | None = None, *, min_length: int = 0, seed: Any = None) -> None:
        self.bounded = max_length is not None
        length = max_length if max_length is not None else max(_MAX_JSON, min_length)
        super().__init__(length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if not self.bounded and _length_left_open(mask, probability):
            top = max(self.min_length, SAMPLE_LENGTH)
            length = int(self.np_random.integers(self.min_length, top + 1))
            mask, probability = _with_length(length, mask, probability)
        return super().sample(mask, probability)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length if self.bounded else None})"


class WideInteger(spaces.Box):
    """Integers a schema does not bound on both sides: the widest integer ``Box`` (int64), as gymnasium's
    ``Box`` is for an unbounded float, narrowed only by the bound the schema gives.

    `contains` accepts every int64 in the bounds; `sample` draws from `SAMPLE_SPAN` values, ones a server
    takes: from the lower bound up, from the upper bound down, or ``0..SAMPLE_SPAN-1`` without either
    (gymnasium's ``Box`` would draw from the whole int64 range, numbers no server expects). Batched (vector
    envs), it stays a `WideInteger`.

    Example:
        >>> ids = WideInteger(low=0, seed=0)
        >>> ids, 2**62 in ids, -1 in ids, 0 <= int(ids.sample()) < SAMPLE_SPAN
        (WideInteger(0, None, ()), True, False, True)
    """

    def __init__(
        self,
        low: int | None = None,
        high: int | None = None,
        shape: tuple[int, ...] = (),
        *,
        seed: Any = None,
    ) -> None:
        widest = np.iinfo(np.int64)
        self.low_given, self.high_given = low, high
        super().__init__(
            low=widest.min if low is None else int(low),
            high=widest.max if high is None else int(high),
            shape=shape,
            dtype=np.int64,
            seed=seed,
        )

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        if mask is not None or probability is not None:
            raise ValueError("WideInteger.sample takes no mask: pick from the legal values instead")
        if self.low_given is not None:
            low = int(self.low_given)
            high = (
                low + SAMPLE_SPAN - 1
                if self.high_given is None
                else min(int(self.high_given), low + SAMPLE_SPAN - 1)
            )
        elif self.high_given is not None:
            high = int(self.high_given)
            low = high - SAMPLE_SPAN + 1
        else:
            low, high = 0, SAMPLE_SPAN - 1
        return self.np_random.integers(low, high + 1, size=self.shape, dtype=np.int64)

    def __repr__(self) -> str:
        return f"WideInteger({self.low_given}, {self.high_given}, {self.shape})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WideInteger) and (self.low_given, self.high_given, self.shape) == (
            other.low_given,
            other.high_given,
            other.shape,
        )

    __hash__ = None  # type: ignore[assignment]  # as gymnasium's spaces


@batch_space.register(WideInteger)
def _batch_wide_integer(space: WideInteger, n: int = 1) -> WideInteger:
    return WideInteger(space.low_given, space.high_given, (n, *space.shape), seed=deepcopy(space.np_random))


class BoundedSequence(spaces.Sequence):
    """A ``Sequence`` of at most ``max_length`` items (a schema's ``maxItems``), in `contains` and samples.

    Example:
        >>> pair = BoundedSequence(spaces.Discrete(3), max_length=2, seed=0)
        >>> (0, 1) in pair, (0, 1, 2) in pair, len(pair.sample()) <= 2
        (True, False, True)
    """

    def __init__(
        self, space: spaces.Space[Any], max_length: int, *, seed: Any = None, stack: bool = False
    ) -> None:
        super().__init__(space, seed=seed, stack=stack)
        self.max_length = max_length

    def contains(self, x: Any) -> bool:
        try:
            length = len(x)
        except TypeError:
            return False
        return length <= self.max_length and super().contains(x)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        if _length_left_open(mask, probability):  # gymnasium's geometric length, cut at the bound
            length = min(int(self.np_random.geometric(0.25)), self.max_length)
            mask, probability = _with_length(length, mask, probability)
        return super().sample(mask, probability)

    def __repr__(self) -> str:
        return f"BoundedSequence({self.feature_space}, max_length={self.max_length}, stack={self.stack})"


class JSONText(UnicodeText):
    """Text holding one JSON value (for free-form objects and unions); samples are valid JSON. Its length
    is bounded by the largest message a session accepts, not by `UnicodeText`'s default.

    Example:
        >>> space = JSONText(sample_value={})
        >>> space.sample(), '{"a": [1, 2]}' in space, "{not json" in space
        ('{}', True, False)
    """

    def __init__(self, *, sample_value: Any = None, seed: Any = None) -> None:
        super().__init__(_MAX_JSON, seed=seed)
        self.sample_value = sample_value

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return json.dumps(self.sample_value)

    def contains(self, x: Any) -> bool:
        if not super().contains(x):
            return False
        try:
            json.loads(x)
        except ValueError:
            return False
        return True

    def __repr__(self) -> str:
        return "JSONText()"


@dataclass
class Field:
    """One JSON value and its space: how to turn the JSON into a space value and back."""

    space: spaces.Space[Any]
    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]
    empty: Callable[[], Any]


def resolve(
    node: dict[str, Any], defs: dict[str, Any], expanding: frozenset[str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Follow local ``$ref``s; a reference already being expanded (a recursive model) resolves to ``{}``."""
    while "$ref" in node:
        ref = node["$ref"]
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith("#/") or name not in defs or ref in expanding:
            return {}, expanding  # unknown or recursive: JSON text
        expanding = expanding | {ref}
        node = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node, expanding


def _length(node: dict[str, Any], key: str, default: int) -> int:
    """A string length of a JSON Schema (``minLength``/``maxLength``), which must be a whole number."""
    value = node.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise ProtocolError(f"The schema's {key} is {value!r:.60}, not a whole number of characters")
    return int(value)


def field_for(
    node: dict[str, Any],
    sample: Any,
    defs: dict[str, Any],
    path: str,
    *,
    action: bool,
    expanding: frozenset[str] = frozenset(),
    nullable: bool = False,
) -> Field:
    node, expanding = resolve(node, defs, expanding)
    variants = node.get("anyOf") or node.get("oneOf")
    if variants:
        resolved = [resolve(v, defs, expanding) for v in variants]
        non_null = [(v, refs) for v, refs in resolved if v.get("type") != "null"]
        if len(non_null) == 1:
            extra = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
            variant, refs = non_null[0]
            return field_for(
                {**variant, **extra},
                sample,
                defs,
                path,
                action=action,
                expanding=refs,
                nullable=nullable or len(non_null) < len(resolved),
            )
        return _json_text(None)
    if "enum" in node:
        return _enum(list(node["enum"]), path)
    if "const" in node:
        return _enum([node["const"]], path)
    kind = node.get("type")
    if isinstance(kind, list):
        non_null = [k for k in kind if k != "null"]
        nullable = nullable or len(non_null) < len(kind)
        kind = non_null[0] if len(non_null) == 1 else None
    if kind == "boolean":
        return Field(spaces.Discrete(2), lambda v: int(bool(v)), lambda a: bool(a), lambda: 0)
    if kind == "integer":
        low, high = bounds(node, integer=True)
        if low is not None and high is not None and high - low < 2**16:
            start = int(low)
            return Field(
                spaces.Discrete(int(high - low + 1), start=start), int, lambda a: int(a), lambda: start
            )
        if action and (low is None or high is None):
            space = WideInteger(None if low is None else int(low), None if high is None else int(high))
            return Field(
                space,
                lambda v: np.asarray(v, dtype=np.int64),
                lambda a: int(np.asarray(a).item()),
                lambda: np.zeros((), dtype=np.int64),
            )
        return _scalar(node, np.int64)
    if kind == "number":
        return _scalar(node, np.float64)
    if kind == "string":
        # `null` decodes to "", so a nullable string must accept the empty string.
        min_length = 0 if nullable else _length(node, "minLength", 0)
        max_length = _length(node, "maxLength", 0) if node.get("maxLength") is not None else None
        space = UnicodeText(max_length, min_length=min_length)
        return Field(space, _bounded_text(path, max_length), str, str)
    if kind == "array":
        return _array(node, sample, defs, path, action=action, expanding=expanding)
    if kind == "object" and node.get("properties"):
        return _object(node, sample, defs, path, action=action, expanding=expanding)
    return _json_text({} if kind == "object" else None)


def _bounded_text(path: str, max_length: int | None) -> Callable[[Any], str]:
    """A string's decoder: where the schema bounds its length, longer text is the server's error."""
    if max_length is None:
        return str

    def decode(value: Any) -> str:
        text = str(value)
        if len(text) > max_length:
            raise ProtocolError(
                f"{path} holds {len(text):,} characters, more than the schema's maxLength of {max_length:,}"
            )
        return text

    return decode


def _sequence(space: spaces.Space[Any], node: dict[str, Any], *, stack: bool) -> spaces.Sequence:
    """A ``Sequence`` of ``space``, bounded where the schema says ``maxItems``."""
    if node.get("maxItems") is None:
        return spaces.Sequence(space, stack=stack)
    return BoundedSequence(space, int(node["maxItems"]), stack=stack)


def _bounded_list(path: str, node: dict[str, Any], decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A list's decoder: where the schema bounds its items (``maxItems``), more is the server's error."""
    most = node.get("maxItems")
    if most is None:
        return decode

    def checked(value: Any) -> Any:
        if len(value) > most:
            raise ProtocolError(
                f"{path} holds {len(value):,} items, more than the schema's maxItems of {most:,}"
            )
        return decode(value)

    return checked


def bounds(node: dict[str, Any], *, integer: bool) -> tuple[float | None, float | None]:
    """Inclusive bounds from ``minimum``/``maximum`` and the exclusive ``exclusiveMinimum``/``Maximum``."""
    low, high = node.get("minimum"), node.get("maximum")
    if node.get("exclusiveMinimum") is not None:
        bound = node["exclusiveMinimum"]
        low = math.floor(bound) + 1 if integer else float(np.nextafter(bound, np.inf))
    if node.get("exclusiveMaximum") is not None:
        bound = node["exclusiveMaximum"]
        high = math.ceil(bound) - 1 if integer else float(np.nextafter(bound, -np.inf))
    return low, high


def _enum(values: list[Any], path: str) -> Field:
    index = {json.dumps(v, sort_keys=True): i for i, v in enumerate(values)}

    def decode(value: Any) -> int:
        try:
            return index[json.dumps(value, sort_keys=True)]
        except KeyError:
            raise ProtocolError(f"{path} = {value!r} is not one of the schema's values {values}") from None

    return Field(spaces.Discrete(len(values)), decode, lambda a: values[int(a)], lambda: 0)


def _scalar(node: dict[str, Any], dtype: type) -> Field:
    integer = np.issubdtype(dtype, np.integer)
    low, high = bounds(node, integer=integer)
    if low is None:
        low = -_INT_BOUND if integer else -np.inf
    if high is None:
        high = _INT_BOUND - 1 if integer else np.inf
    space = spaces.Box(low=low, high=high, shape=(), dtype=dtype)
    to_json = int if integer else float
    return Field(
        space,
        lambda v: np.asarray(v, dtype=dtype),
        lambda a: to_json(np.asarray(a).item()),
        lambda: np.zeros((), dtype=dtype),
    )


_SCALAR_KINDS = {"boolean": "bool", "integer": "int", "number": "float", "string": "str"}


def scalar_kind(node: dict[str, Any], defs: dict[str, Any]) -> tuple[str, bool] | None:
    """The info kind (`openenv_lab.adapters.info_schema.KINDS`) of a field whose schema is one scalar
    (``bool``, ``int``, ``float``, ``str``; an enum of one JSON type), and whether the schema allows
    ``null`` for it; None for any other field.

    Example:
        >>> scalar_kind({"anyOf": [{"type": "integer"}, {"type": "null"}]}, {})
        ('int', True)
        >>> scalar_kind({"enum": ["UP", "DOWN"]}, {}), scalar_kind({"type": "array"}, {})
        (('str', False), None)
    """
    node, expanding = resolve(node, defs, frozenset())
    variants = node.get("anyOf") or node.get("oneOf")
    if variants:
        non_null = [v for v in variants if resolve(v, defs, expanding)[0].get("type") != "null"]
        inner = scalar_kind(non_null[0], defs) if len(non_null) == 1 else None
        return None if inner is None else (inner[0], inner[1] or len(non_null) < len(variants))
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        kinds = {_SCALAR_KINDS.get(_json_type(value)) for value in values if value is not None}
        kind = kinds.pop() if len(kinds) == 1 else None
        return None if kind is None else (kind, None in values)
    kind = node.get("type")
    nullable = False
    if isinstance(kind, list):
        non_null = [k for k in kind if k != "null"]
        nullable = len(non_null) < len(kind)
        kind = non_null[0] if len(non_null) == 1 else None
    found = _SCALAR_KINDS.get(kind) if isinstance(kind, str) else None
    return None if found is None else (found, nullable)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "other"


def _leaf_type(
    node: dict[str, Any], defs: dict[str, Any], expanding: frozenset[str]
) -> tuple[str | None, dict[str, Any]]:
    """The item type of a (possibly nested) array schema, and the innermost item schema."""
    while True:
        node, expanding = resolve(node, defs, expanding)
        if node.get("type") != "array":
            return node.get("type"), node
        node = node.get("items", {})


def _array(
    node: dict[str, Any],
    sample: Any,
    defs: dict[str, Any],
    path: str,
    *,
    action: bool,
    expanding: frozenset[str],
) -> Field:
    leaf, item = _leaf_type(node, defs, expanding)
    if leaf in ("number", "integer", "boolean"):
        dtype = {"number": np.float64, "integer": np.int64, "boolean": np.int8}[leaf]
        shape: tuple[int, ...] | None = None
        if isinstance(sample, list) and sample:
            try:
                shape = np.asarray(sample, dtype=dtype).shape
            except ValueError:  # ragged nested lists: no fixed shape
                return _json_text([])
        elif node.get("minItems") is not None and node.get("minItems") == node.get("maxItems"):
            shape = (int(node["minItems"]),)
        if shape is not None:
            return _box(item, dtype, shape, path, leaf == "boolean")
        # No length known (an action, or an empty first value): a variable-length sequence.
        element = field_for(item, None, defs, path + "[]", action=action, expanding=expanding)
        return Field(
            _sequence(element.space, node, stack=True),
            _bounded_list(path, node, lambda v: np.asarray(v, dtype=dtype)),
            lambda a: np.asarray(a).tolist(),
            lambda: np.zeros((0,), dtype=dtype),
        )
    items = node.get("items", {})
    first = sample[0] if isinstance(sample, list) and sample else None
    element = field_for(items, first, defs, path + "[]", action=action, expanding=expanding)
    return Field(
        _sequence(element.space, node, stack=False),
        _bounded_list(path, node, lambda v: tuple(element.decode(x) for x in v)),
        lambda a: [element.encode(x) for x in a],
        tuple,
    )


def _box(item: dict[str, Any], dtype: type, shape: tuple[int, ...], path: str, boolean: bool) -> Field:
    if boolean:
        space: spaces.Space[Any] = spaces.MultiBinary(list(shape) if shape else 1)
    else:
        integer = np.issubdtype(dtype, np.integer)
        low, high = bounds(item, integer=integer)
        if low is None:
            low = -_INT_BOUND if integer else -np.inf
        if high is None:
            high = _INT_BOUND - 1 if integer else np.inf
        space = spaces.Box(low=low, high=high, shape=shape, dtype=dtype)

    def decode(value: Any) -> np.ndarray:
        array = np.asarray(value, dtype=dtype)
        if array.shape != shape:
            raise ProtocolError(
                f"{path} changed shape from {shape} (first observation) to {array.shape}. The generic "
                "adapter needs fixed shapes; write an Adapter for this server (see openenv_lab.adapters)."
            )
        return array

    return Field(space, decode, lambda a: np.asarray(a).tolist(), lambda: np.zeros(shape, dtype=dtype))


def _object(
    node: dict[str, Any],
    sample: Any,
    defs: dict[str, Any],
    path: str,
    *,
    action: bool,
    expanding: frozenset[str],
) -> Field:
    sample = sample if isinstance(sample, dict) else {}
    fields = {
        name: field_for(child, sample.get(name), defs, f"{path}.{name}", action=action, expanding=expanding)
        for name, child in sorted(node["properties"].items())
    }
    return Field(
        spaces.Dict({name: field.space for name, field in fields.items()}),
        lambda v: {n: f.decode(v[n]) if v.get(n) is not None else f.empty() for n, f in fields.items()},
        lambda a: {n: f.encode(a[n]) for n, f in fields.items()},
        lambda: {n: f.empty() for n, f in fields.items()},
    )


def _json_text(sample_value: Any) -> Field:
    def encode(text: Any) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            raise ValueError(
                f"This action field takes JSON text (e.g. '{{\"key\": 1}}'), got {text!r}"
            ) from None

    return Field(
        JSONText(sample_value=sample_value),
        lambda v: json.dumps(v, sort_keys=True),
        encode,
        lambda: json.dumps(sample_value),
    )


def declared_field(space: spaces.Space[Any], path: str) -> Field:
    """The `Field` of a value whose space is declared (a `openenv_lab.adapters.Spec`'s), not inferred."""
    if isinstance(space, spaces.Box):
        shape, dtype = space.shape, space.dtype

        def decode(value: Any) -> np.ndarray:
            array = np.asarray(value, dtype=dtype)
            if array.shape != shape:
                raise ProtocolError(f"{path} has shape {array.shape}, but its declared space is {space}")
            return array

        return Field(space, decode, lambda a: np.asarray(a).tolist(), lambda: np.zeros(shape, dtype=dtype))
    if isinstance(space, spaces.Discrete):
        return Field(space, int, int, lambda: int(space.start))
    if isinstance(space, spaces.MultiBinary):
        return Field(
            space,
            lambda v: np.asarray(v, dtype=np.int8),
            lambda a: np.asarray(a).tolist(),
            lambda: np.zeros(space.shape, dtype=np.int8),
        )
    if isinstance(space, spaces.Text):
        return Field(space, str, str, str)
    if isinstance(space, spaces.Dict):
        parts = {name: declared_field(part, f"{path}.{name}") for name, part in space.spaces.items()}

        def decode_parts(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict) or set(value) != set(parts):
                shown = sorted(value) if isinstance(value, dict) else type(value).__name__
                raise ProtocolError(f"{path} has {shown}, but its declared space is {space}")
            return {name: part.decode(value[name]) for name, part in parts.items()}

        return Field(
            space,
            decode_parts,
            lambda a: {name: part.encode(a[name]) for name, part in parts.items()},
            lambda: {name: part.empty() for name, part in parts.items()},
        )
    raise TypeError(
        f"{path}: declare a Box, Discrete, MultiBinary, Text or Dict space (or None to infer), got {space}"
    )
