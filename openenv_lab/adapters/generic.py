"""The generic adapter behind ``openenv/remote``: spaces inferred from ``/schema`` and one observation.

OpenEnv servers publish pydantic JSON Schemas for their action and observation models. They say which
fields exist and their types, but not the shapes of lists or the bounds of numbers, so the adapter
resets once when the environment is made and reads the first observation as well. How JSON types
become spaces:

============================================  ==========================================================
JSON Schema                                   gymnasium space (value in the observation/action)
============================================  ==========================================================
``enum`` of values                            ``Discrete(n)`` (the index into the enum)
``boolean``                                   ``Discrete(2)`` (0 or 1)
``integer`` with lower and upper bounds        ``Discrete(max - min + 1, start=min)`` (exclusive bounds too)
``integer`` otherwise                         ``Box(int64, shape=())``, bounds from the schema or +-2**31
``number``                                    ``Box(float64, shape=())``, bounds from the schema or +-inf
``string``                                    `UnicodeText` (any text up to ``maxLength``, default 65536)
list of numbers (any nesting)                 ``Box`` shaped like the first observation's value (empty
                                              then, or an action: ``minItems == maxItems`` or a ``Sequence``)
list of booleans                              ``MultiBinary`` shaped like the first observation's value
list of strings / of objects                  ``Sequence(UnicodeText)`` / ``Sequence(Dict)``
object with ``properties``                    ``Dict`` of its fields
object without properties, unions, unknown    `JSONText` holding the value as JSON (``json.loads`` it)
``const`` fields (e.g. MCP ``type``)          no space: the constant is sent as it is
optional (``anyOf [T, null]``)                T's space; ``null`` becomes its zero value (0, ``""``, zeros)
============================================  ==========================================================

The observation space is a ``Dict`` of the observation's fields (``reward``, ``done`` and ``metadata`` are
not fields). The action space is the one required field's space when there is exactly one (e.g.
``Discrete(4)`` for grid_world's ``{"action": "UP"|...}``), a ``Dict`` of the required fields otherwise;
optional fields are left to the server's default unless named in ``action_fields``. For MCP environments
(``{"type": "call_tool", "tool_name", "arguments"}``) that means
``gym.make("openenv/remote", base_url=..., action_fields=["tool_name", "arguments"])``, with the arguments
as JSON text.

What cannot be inferred, and what happens instead:

- lengths of list actions without ``minItems == maxItems``: a ``Sequence`` of the item space;
- numeric lists whose length changes during an episode: the first observation fixes the ``Box`` shape, and
  a later observation of another shape raises `ProtocolError` (write an adapter for such servers);
- bounds of numbers the schema does not bound: infinite (floats) or +-2**31 (integers);
- free-form objects, unions of several types, ragged lists and recursive models (a model inside
  itself): JSON text, as above;
- why an episode ended: ``done`` is treated as termination, unless the metadata says
  ``"truncated": true``; the original value of ``null`` fields: ``info["raw_observation"]`` has it.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from ..client import Client, ProtocolError, StepResult
from .base import Adapter, Transition, base_info

__all__ = ["EchoAdapter", "GenericAdapter", "JSONText", "UnicodeText"]

_INT_BOUND = 2**31
_MAX_TEXT = 65536
_ENVELOPE_FIELDS = frozenset({"metadata", "reward", "done"})


class UnicodeText(spaces.Text):
    """A ``Text`` space that accepts any string up to ``max_length`` (samples use printable ASCII).

    Gymnasium's ``Text`` only accepts characters from its charset; servers send arbitrary Unicode.

    Example:
        >>> "é ♞ {}" in UnicodeText(max_length=10)
        True
    """

    def __init__(self, max_length: int = _MAX_TEXT, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


@dataclass
class _Field:
    """One JSON value and its space: how to turn the JSON into a space value and back."""

    space: spaces.Space[Any]
    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]
    empty: Callable[[], Any]


class GenericAdapter(Adapter):
    """Spaces for any OpenEnv server, inferred from its ``/schema`` and its first observation.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = gym.make("openenv/remote", base_url="http://127.0.0.1:8000")   # doctest: +SKIP
        >>> env.observation_space                                             # doctest: +SKIP
        Dict('target': Box(-2147483648, 2147483647, (), int64), 'value': Box(...))
    """

    needs_probe: ClassVar[bool] = True
    render_modes: ClassVar[tuple[str, ...]] = ("ansi",)

    def __init__(self, *, action_fields: list[str] | None = None) -> None:
        self.action_field_names = list(action_fields) if action_fields is not None else None
        self.schema: dict[str, Any] = {}
        self._observation_fields: dict[str, _Field] = {}
        self._action_fields: dict[str, _Field] = {}
        self._action_constants: dict[str, Any] = {}
        self._single_action: str | None = None
        self._last: dict[str, Any] = {}

    def setup(self, client: Client, first: StepResult | None) -> None:
        assert first is not None  # needs_probe
        self.schema = client.schema()
        for key in ("action", "observation"):
            if not isinstance(self.schema.get(key), dict):
                raise ProtocolError(
                    f"{client.base_url}/schema has no {key!r} JSON Schema; is it an OpenEnv server?",
                    url=client.base_url,
                )
        self._build_action_space(self.schema["action"])
        self._build_observation_space(first)

    def _build_observation_space(self, first: StepResult) -> None:
        schema = self.schema.get("reset_observation") or self.schema["observation"]
        defs = {**self.schema["observation"].get("$defs", {}), **schema.get("$defs", {})}
        properties = schema.get("properties", {})
        fields = {}
        for name, node in properties.items():
            if name in _ENVELOPE_FIELDS:
                continue
            fields[name] = _field(
                node, first.observation.get(name), defs, f"observation.{name}", action=False
            )
        for name, value in first.observation.items():  # fields the schema did not declare
            if name not in fields and name not in properties and name not in _ENVELOPE_FIELDS:
                fields[name] = _field({}, value, defs, f"observation.{name}", action=False)
        self._observation_fields = dict(sorted(fields.items()))
        self.observation_space = spaces.Dict({k: f.space for k, f in self._observation_fields.items()})

    def _build_action_space(self, schema: dict[str, Any]) -> None:
        defs = schema.get("$defs", {})
        properties = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
        required = set(schema.get("required", ()))
        for name, node in properties.items():
            resolved = _resolve(node, defs, frozenset())[0]
            if "const" in resolved:  # always sent as it is (e.g. MCP's "type": "call_tool")
                self._action_constants[name] = resolved["const"]
        if self.action_field_names is not None:
            unknown = set(self.action_field_names) - set(properties)
            if unknown:
                raise ValueError(
                    f"action_fields {sorted(unknown)} are not in the action schema: {sorted(properties)}"
                )
            chosen = list(self.action_field_names)
        else:
            candidates = [k for k in properties if k not in self._action_constants]
            chosen = [k for k in candidates if k in required] or candidates
        for name in chosen:
            self._action_constants.pop(name, None)
            self._action_fields[name] = _field(properties[name], None, defs, f"action.{name}", action=True)
        if not self._action_fields:
            raise ProtocolError(f"Cannot build an action space: the action schema has no fields ({schema})")
        if len(self._action_fields) == 1:
            self._single_action = next(iter(self._action_fields))
            self.action_space = self._action_fields[self._single_action].space
        else:
            self.action_space = spaces.Dict({k: f.space for k, f in self._action_fields.items()})

    def encode_action(self, action: Any) -> dict[str, Any]:
        payload = dict(self._action_constants)
        if self._single_action is not None:
            payload[self._single_action] = self._action_fields[self._single_action].encode(action)
        else:
            for name, field in self._action_fields.items():
                payload[name] = field.encode(action[name])
        return payload

    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        raw = result.observation
        self._last = raw
        observation = {
            name: field.decode(raw[name]) if raw.get(name) is not None else field.empty()
            for name, field in self._observation_fields.items()
        }
        info = base_info(result)
        truncated = result.done and result.metadata.get("truncated") is True
        terminated = result.done and not truncated
        reward = 0.0 if result.reward is None else result.reward
        return Transition(observation, reward, terminated, truncated, info)

    def render(self, mode: str) -> Any:
        if mode == "ansi":
            return json.dumps(self._last, indent=2, sort_keys=True, default=str) + "\n"
        return super().render(mode)


# ---------------------------------------------------------------------------- schema -> _Field


class JSONText(UnicodeText):
    """Text holding one JSON value (for free-form objects and unions); samples are valid JSON.

    Example:
        >>> space = JSONText(sample_value={})
        >>> space.sample(), '{"a": [1, 2]}' in space, "{not json" in space
        ('{}', True, False)
    """

    def __init__(self, *, sample_value: Any = None, seed: Any = None) -> None:
        super().__init__(seed=seed)
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


class EchoAdapter(GenericAdapter):
    """The generic adapter, with our echo server as its embedded server (``openenv/echo``).

    Its action space is `UnicodeText` (the message) and its observation a ``Dict`` with
    ``echoed_message`` and ``message_length``.
    """

    server_name: ClassVar[str | None] = "echo"

    def __init__(self, *, max_steps: int | None = None) -> None:
        super().__init__()
        self.server_options = {"max_steps": max_steps} if max_steps is not None else {}


def _resolve(
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


def _field(
    node: dict[str, Any],
    sample: Any,
    defs: dict[str, Any],
    path: str,
    *,
    action: bool,
    expanding: frozenset[str] = frozenset(),
    nullable: bool = False,
) -> _Field:
    node, expanding = _resolve(node, defs, expanding)
    variants = node.get("anyOf") or node.get("oneOf")
    if variants:
        resolved = [_resolve(v, defs, expanding) for v in variants]
        non_null = [(v, refs) for v, refs in resolved if v.get("type") != "null"]
        if len(non_null) == 1:
            extra = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
            variant, refs = non_null[0]
            return _field(
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
        return _Field(spaces.Discrete(2), lambda v: int(bool(v)), lambda a: bool(a), lambda: 0)
    if kind == "integer":
        low, high = _bounds(node, integer=True)
        if low is not None and high is not None and high - low < 2**16:
            start = int(low)
            return _Field(
                spaces.Discrete(int(high - low + 1), start=start), int, lambda a: int(a), lambda: start
            )
        return _scalar(node, np.int64)
    if kind == "number":
        return _scalar(node, np.float64)
    if kind == "string":
        # `null` decodes to "", so a nullable string must accept the empty string.
        min_length = 0 if nullable else int(node.get("minLength", 0))
        space = UnicodeText(int(node.get("maxLength", _MAX_TEXT)), min_length=min_length)
        return _Field(space, str, str, str)
    if kind == "array":
        return _array(node, sample, defs, path, action=action, expanding=expanding)
    if kind == "object" and node.get("properties"):
        return _object(node, sample, defs, path, action=action, expanding=expanding)
    return _json_text({} if kind == "object" else None)


def _bounds(node: dict[str, Any], *, integer: bool) -> tuple[float | None, float | None]:
    """Inclusive bounds from ``minimum``/``maximum`` and the exclusive ``exclusiveMinimum``/``Maximum``."""
    low, high = node.get("minimum"), node.get("maximum")
    if node.get("exclusiveMinimum") is not None:
        bound = node["exclusiveMinimum"]
        low = math.floor(bound) + 1 if integer else float(np.nextafter(bound, np.inf))
    if node.get("exclusiveMaximum") is not None:
        bound = node["exclusiveMaximum"]
        high = math.ceil(bound) - 1 if integer else float(np.nextafter(bound, -np.inf))
    return low, high


def _enum(values: list[Any], path: str) -> _Field:
    index = {json.dumps(v, sort_keys=True): i for i, v in enumerate(values)}

    def decode(value: Any) -> int:
        try:
            return index[json.dumps(value, sort_keys=True)]
        except KeyError:
            raise ProtocolError(f"{path} = {value!r} is not one of the schema's values {values}") from None

    return _Field(spaces.Discrete(len(values)), decode, lambda a: values[int(a)], lambda: 0)


def _scalar(node: dict[str, Any], dtype: type) -> _Field:
    integer = np.issubdtype(dtype, np.integer)
    low, high = _bounds(node, integer=integer)
    if low is None:
        low = -_INT_BOUND if integer else -np.inf
    if high is None:
        high = _INT_BOUND - 1 if integer else np.inf
    space = spaces.Box(low=low, high=high, shape=(), dtype=dtype)
    to_json = int if integer else float
    return _Field(
        space,
        lambda v: np.asarray(v, dtype=dtype),
        lambda a: to_json(np.asarray(a).item()),
        lambda: np.zeros((), dtype=dtype),
    )


def _leaf_type(
    node: dict[str, Any], defs: dict[str, Any], expanding: frozenset[str]
) -> tuple[str | None, dict[str, Any]]:
    """The item type of a (possibly nested) array schema, and the innermost item schema."""
    while True:
        node, expanding = _resolve(node, defs, expanding)
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
) -> _Field:
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
        element = _field(item, None, defs, path + "[]", action=action, expanding=expanding)
        return _Field(
            spaces.Sequence(element.space, stack=True),
            lambda v: np.asarray(v, dtype=dtype),
            lambda a: np.asarray(a).tolist(),
            lambda: np.zeros((0,), dtype=dtype),
        )
    items = node.get("items", {})
    first = sample[0] if isinstance(sample, list) and sample else None
    element = _field(items, first, defs, path + "[]", action=action, expanding=expanding)
    return _Field(
        spaces.Sequence(element.space),
        lambda v: tuple(element.decode(x) for x in v),
        lambda a: [element.encode(x) for x in a],
        tuple,
    )


def _box(item: dict[str, Any], dtype: type, shape: tuple[int, ...], path: str, boolean: bool) -> _Field:
    if boolean:
        space: spaces.Space[Any] = spaces.MultiBinary(list(shape) if shape else 1)
    else:
        integer = np.issubdtype(dtype, np.integer)
        low, high = _bounds(item, integer=integer)
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

    return _Field(space, decode, lambda a: np.asarray(a).tolist(), lambda: np.zeros(shape, dtype=dtype))


def _object(
    node: dict[str, Any],
    sample: Any,
    defs: dict[str, Any],
    path: str,
    *,
    action: bool,
    expanding: frozenset[str],
) -> _Field:
    sample = sample if isinstance(sample, dict) else {}
    fields = {
        name: _field(child, sample.get(name), defs, f"{path}.{name}", action=action, expanding=expanding)
        for name, child in sorted(node["properties"].items())
    }
    return _Field(
        spaces.Dict({name: field.space for name, field in fields.items()}),
        lambda v: {n: f.decode(v[n]) if v.get(n) is not None else f.empty() for n, f in fields.items()},
        lambda a: {n: f.encode(a[n]) for n, f in fields.items()},
        lambda: {n: f.empty() for n, f in fields.items()},
    )


def _json_text(sample_value: Any) -> _Field:
    def encode(text: Any) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            raise ValueError(
                f"This action field takes JSON text (e.g. '{{\"key\": 1}}'), got {text!r}"
            ) from None

    return _Field(
        JSONText(sample_value=sample_value),
        lambda v: json.dumps(v, sort_keys=True),
        encode,
        lambda: json.dumps(sample_value),
    )
