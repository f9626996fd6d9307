"""The generic adapter behind ``openenv/remote``: spaces for any OpenEnv server, from its ``/schema``, one
observation and, where they cannot be inferred, a few declared facts (a `Spec`).

How JSON Schema types become spaces is `openenv_lab.adapters.schema`'s table. On top of it:

- the observation space is a ``Dict`` of the observation's fields (``reward``, ``done`` and ``metadata``
  are not fields), or of the fields a spec keeps;
- the action space is the one required field's space when there is exactly one (``Discrete(4)`` for
  grid_world's ``{"action": "UP"|...}``), a ``Dict`` of the required fields otherwise; optional fields are
  left to the server's default unless named in ``action_fields``;
- legal actions: an observation field listing the legal values of the action (``legal_actions``, or the
  one a spec names) makes the action ``Discrete(n)`` over the action's ``n`` values, adds an
  ``action_mask`` (``MultiBinary(n)``, int8) to the observation in its place, and gives the env
  ``action_masks()`` for sb3-contrib's ``MaskablePPO``; ``n`` comes from the schema's bounds or a spec;
- an integer action without both bounds (where nothing says how many values it has) gets the widest
  honest space, `openenv_lab.adapters.schema.WideInteger` (samples stay small), and one warning naming the
  `Spec` that would make it an exact ``Discrete``; where the observation lists the legal values
  (``legal_actions``), `GenericAdapter.legal_actions` gives them and random play (`check`, ``evaluate``'s
  ``"masked-random"``) picks among them;
- MCP tool environments (an action ``{"type": "call_tool", "tool_name", "arguments"}``): see
  ``action_fields`` below, with the arguments as JSON text;
- infos (on every step, each of one type: `openenv_lab.adapters.info_schema`): each observation field
  whose schema is one scalar (a boolean, integer, number or string, optional or not) under its own name,
  and for MCP tool environments ``tool_name``, ``tool_result`` (text as it came, other values as JSON
  text) and ``tool_error``; lists, objects and the legal actions are not in them
  (``make(..., raw_info=True)`` adds the server's JSON as it came).

Specs for the official environments (`openenv_lab.adapters.spec.SPECS`) are picked by the name the server
reports; pass ``spec=`` to choose or write one. Why an episode ended: ``done`` is treated as termination,
unless the metadata says ``"truncated": true``; the original value of ``null`` fields:
``info["raw_observation"]`` has it (``raw_info=True``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from ..client import Client, EnvironmentMismatch, OpenEnvError, ProtocolError, StepResult
from .base import COMMON_INFO_KEYS, Adapter, Transition, base_info
from .info_schema import InfoKey
from .schema import (
    ENVELOPE_FIELDS,
    Field,
    JSONText,
    UnicodeText,
    bounds,
    declared_field,
    field_for,
    resolve,
    scalar_kind,
)
from .spec import SPECS, Spec, find_spec
from .tools import Tools

#: The info keys of an MCP tool environment.
TOOL_INFO_KEYS = (
    InfoKey("tool_name", "str", "the tool called"),
    InfoKey("tool_result", "str", "what the tool returned: text as it came, other values as JSON text"),
    InfoKey("tool_error", "str", "what went wrong: the tool's own error or the framework's"),
)

__all__ = ["LEGAL_ACTION_FIELDS", "EchoAdapter", "GenericAdapter", "JSONText", "UnicodeText", "legal_choice"]

#: Observation fields taken to list the legal actions when no spec names one.
LEGAL_ACTION_FIELDS = ("legal_actions", "legal_moves", "valid_actions", "available_actions")


class GenericAdapter(Adapter):
    """Spaces for any OpenEnv server, from its ``/schema``, its first observation and a `Spec`.

    Args:
        spec: a `Spec`, or the name of one in `openenv_lab.adapters.spec.SPECS` (``"connect4"``). By
            default the spec whose ``servers`` names what the server reports, if there is one.
        action_fields: the action fields to set (default: the required ones), e.g. for a server whose
            action has optional fields that matter.

    A server that is not the one ``spec`` is for is refused (`EnvironmentMismatch`) unless the env is made
    with ``check_identity=False``.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> from openenv_lab.launch import shared_embedded_server
        >>> env = gym.make("openenv/remote", base_url=shared_embedded_server("echo").base_url)
        >>> env.observation_space["message_length"], env.action_space
        (Box(-2147483648, 2147483647, (), int64), UnicodeText(0, 256))
        >>> env.close()
    """

    needs_probe: ClassVar[bool] = True
    probe_state: ClassVar[bool] = True
    render_modes: ClassVar[tuple[str, ...]] = ("ansi",)

    def __init__(
        self,
        *,
        spec: Spec | str | None = None,
        action_fields: list[str] | None = None,
    ) -> None:
        if isinstance(spec, str):
            if spec not in SPECS:
                raise ValueError(f"There is no spec called {spec!r}; there are {', '.join(sorted(SPECS))}")
            spec = SPECS[spec]
        if spec is not None and not isinstance(spec, Spec):
            raise TypeError(f"spec must be a Spec or the name of one, got {spec!r}")
        self.spec: Spec | None = spec
        self.action_field_names = list(action_fields) if action_fields is not None else None
        self.schema: dict[str, Any] = {}
        self.server_names: list[str] = []
        self.tools: Tools | None = None
        self.env_attributes: tuple[str, ...] = ()  # the legal-action mask or the tools, once known
        self._observation_fields: dict[str, Field] = {}
        self._actions: _Actions = _Fields({}, {})  # how actions become JSON: chosen by setup
        self._legal_field: str | None = None
        self._unbounded_action: str | None = None  # an integer action field the schema does not bound
        self._listed_field: str | None = None  # the observation's list of legal values for that field
        self._mask = np.zeros(0, dtype=np.int8)
        self._last: dict[str, Any] = {}

    # ------------------------------------------------------------------ setup

    def setup(
        self, client: Client, first: StepResult | None, state: Callable[[], dict[str, Any]] | None = None
    ) -> None:
        """Read the server's ``/schema`` and names, choose a spec and build the spaces. ``state`` reads the
        probed session's state (for a spec sized by it, `Spec.from_state`); None: a short session is
        opened to read it."""
        assert first is not None  # needs_probe
        self.schema = client.schema()
        for key in ("action", "observation"):
            if not isinstance(self.schema.get(key), dict):
                raise ProtocolError(
                    f"{client.base_url}/schema has no {key!r} JSON Schema; is it an OpenEnv server?",
                    url=client.base_url,
                )
        try:
            self.server_names = client.names()
        except OpenEnvError:  # a server without /metadata: nothing to match a spec with
            self.server_names = []
        self._choose_spec(client, state)
        tools = Tools.are_in(self.schema["action"])
        if tools:
            self.tools = Tools.listed_by(client)
            self.action_space = self.tools.action_space
            self._actions = _ToolCalls(self.tools)
            self.env_attributes = ("tools", "tool_action")
        try:
            if not tools:
                self._build_action_space(self.schema["action"])
            self._build_observation_space(first)
        except (TypeError, OverflowError, AttributeError, KeyError, IndexError) as exc:
            raise ProtocolError(  # parts of the wrong types (a ValueError is a spec that does not fit)
                f"{client.base_url}/schema cannot be read as spaces ({type(exc).__name__}: {exc})",
                url=client.base_url,
            ) from exc

    def _choose_spec(self, client: Client, state: Callable[[], dict[str, Any]] | None) -> None:
        url = client.base_url
        if self.spec is None:
            self.spec = find_spec(self.server_names)
        elif self.check_identity and self.spec.servers and not self.spec.matches(self.server_names):
            raise EnvironmentMismatch(
                f"spec={self.spec.name!r} is for {' or '.join(self.spec.servers)}, but the server at {url} "
                f"reports itself as {' / '.join(self.server_names) or 'nothing'}. Point at the right server, "
                "choose its spec, or pass check_identity=False if this is deliberate.",
                asked=self.spec.name,
                reported=self.server_names,
                url=url,
            )
        if self.spec is not None and self.spec.from_state is not None:
            self._resolve_spec(client, state)
        if self.spec is not None and self.spec.family is not None:
            raise ValueError(
                f"The spec {self.spec.name!r} hands this server to the {self.spec.family} adapter: make "
                f"the env with gym.make('openenv/{self.spec.family}', base_url=...) (openenv/remote does it "
                "by itself)"
            )

    def _resolve_spec(self, client: Client, read_state: Callable[[], dict[str, Any]] | None) -> None:
        """The spec of this instance, from what a session's state says (`Spec.from_state`)."""
        assert self.spec is not None and self.spec.from_state is not None
        try:
            # The session the env probed, reset just now; else a short session of our own.
            state = read_state() if read_state is not None else client.session_state(**self.reset_options)
        except OpenEnvError as exc:  # no room for one more session, say: the general spec still holds
            warnings.warn(
                f"Could not read the state of {client.base_url} for the spec {self.spec.name!r} "
                f"({type(exc).__name__}: {exc}); its spaces are the general ones",
                UserWarning,
                stacklevel=4,
            )
            return
        resolved = self.spec.from_state(state)
        if resolved is not None:
            self.spec = resolved

    def _build_observation_space(self, first: StepResult) -> None:
        schema = self.schema.get("reset_observation") or self.schema["observation"]
        defs = {**self.schema["observation"].get("$defs", {}), **schema.get("$defs", {})}
        properties = schema.get("properties", {})
        declared = self.spec.observation_spaces() if self.spec is not None else None
        self._legal_field = self._find_legal_field(properties)
        if self._unbounded_action is not None and [self._unbounded_action] == self._actions.fields():
            self._listed_field = next((name for name in LEGAL_ACTION_FIELDS if name in properties), None)
        fields: dict[str, Field] = {}
        names = [n for n in properties if n not in ENVELOPE_FIELDS]
        names += [n for n in first.observation if n not in properties and n not in ENVELOPE_FIELDS]
        for name in names:
            if name == self._legal_field or (declared is not None and name not in declared):
                continue
            path = f"observation.{name}"
            space = declared.get(name) if declared is not None else None
            if space is not None:
                fields[name] = declared_field(space, path)
            elif name == self._listed_field:  # as many legal ids as there are: a list of any length
                fields[name] = field_for(properties.get(name, {}), None, defs, path, action=False)
            else:
                fields[name] = field_for(
                    properties.get(name, {}), first.observation.get(name), defs, path, action=False
                )
        if declared is not None:
            missing = set(declared) - set(fields)
            if missing:
                raise ProtocolError(
                    f"The spec {self.spec.name!r} keeps observation fields {sorted(missing)} that this "  # type: ignore[union-attr]
                    f"server does not have; it has {sorted(names)}"
                )
        if self._legal_field is not None:
            count = len(self._actions.values or ())
            fields["action_mask"] = Field(
                spaces.MultiBinary(count), lambda v: v, lambda a: a, lambda: np.zeros(count, dtype=np.int8)
            )
            self.env_attributes = ("action_masks",)
        self._observation_fields = dict(sorted(fields.items()))
        self.observation_space = spaces.Dict({k: f.space for k, f in self._observation_fields.items()})
        self.info_keys = self._scalar_info_keys(names, properties, defs)
        if self._unbounded_action is not None:
            self._say_unbounded_integer()

    def _scalar_info_keys(
        self, names: list[str], properties: dict[str, Any], defs: dict[str, Any]
    ) -> tuple[InfoKey, ...]:
        """The info keys: the observation's scalar fields, as the schema types them (and the tools')."""
        keys = list(TOOL_INFO_KEYS) if self.tools is not None else []
        taken = {key.name for key in (*COMMON_INFO_KEYS, *keys)} | {"task"}
        for name in names:
            found = scalar_kind(properties.get(name, {}), defs)
            if (
                found is not None
                and name not in taken
                and name not in (self._legal_field, self._listed_field)
            ):
                kind, nullable = found
                meaning = f"the observation's {name!r}, as the server sent it"
                keys.append(InfoKey(name, kind, meaning, nullable=nullable))
        return tuple(keys)

    def legal_actions(self) -> list[Any]:
        """The legal values of the action as the last observation lists them (its ``legal_actions`` field,
        or the one a spec names), or ``[]`` where it lists none."""
        field = self._legal_field or self._listed_field
        listed = self._last.get(field) if field is not None else None
        return list(listed) if isinstance(listed, list) else []

    def _say_unbounded_integer(self) -> None:
        """One warning: the action's space is honest but wide, and the `Spec` that would make it exact."""
        name = self._unbounded_action
        listed = f", legal_actions={self._listed_field!r}" if self._listed_field is not None else ""
        random_play = (
            f"; random play picks from the observation's {self._listed_field!r} (adapter.legal_actions())"
            if self._listed_field is not None
            else ""
        )
        warnings.warn(
            f"The action field {name!r} is an integer without bounds in the server's schema: its space is "
            f"{self.action_space} (every int64 the schema allows; samples stay small){random_play}. For an "
            f"exact Discrete space{' with a mask' if listed else ''}, say how many values it takes: "
            f"gym.make('openenv/remote', ..., spec=Spec('mine', action={name!r}, actions=N{listed})).",
            UserWarning,
            stacklevel=2,
        )

    def _find_legal_field(self, properties: dict[str, Any]) -> str | None:
        """The observation field listing the legal actions: the spec's, or a conventional name (used when
        the action is one field with known values)."""
        named = self.spec.legal_actions if self.spec is not None else None
        if named is not None:
            if named not in properties:
                raise ProtocolError(
                    f"The spec {self.spec.name!r} names {named!r} as the legal actions, but the observation "  # type: ignore[union-attr]
                    f"has no such field: {sorted(properties)}"
                )
            if self._actions.values is None:
                raise ValueError(
                    f"The spec {self.spec.name!r} names legal actions but not the action's values: add "  # type: ignore[union-attr]
                    "actions=N (the count) or actions=[...] (the values)"
                )
            return named
        if self._actions.values is None:
            return None
        return next((name for name in LEGAL_ACTION_FIELDS if name in properties), None)

    def _build_action_space(self, schema: dict[str, Any]) -> None:
        """Choose how actions become JSON (`_Actions`), and the action space that goes with it."""
        defs = schema.get("$defs", {})
        properties = {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}
        required = set(schema.get("required", ()))
        constants = {}
        for name, node in properties.items():
            resolved = resolve(node, defs, frozenset())[0]
            if "const" in resolved:  # always sent as it is (e.g. MCP's "type": "call_tool")
                constants[name] = resolved["const"]
        values = self.spec.action_values() if self.spec is not None else None
        if values and all(isinstance(value, dict) for value in values):  # whole actions
            unknown = sorted({name for value in values for name in value} - set(properties))
            if unknown:
                raise ValueError(
                    f"Action fields {unknown} are not in the action schema: {sorted(properties)}"
                )
            self._actions = _Values(constants, None, values)
            self.action_space = spaces.Discrete(len(values))
            return
        if self.spec is not None and self.spec.action is not None:
            names = [self.spec.action]
        elif self.action_field_names is not None:
            names = list(self.action_field_names)
        else:
            candidates = [k for k in properties if k not in constants]
            names = [k for k in candidates if k in required] or candidates
        unknown = set(names) - set(properties)
        if unknown:
            raise ValueError(
                f"Action fields {sorted(unknown)} are not in the action schema: {sorted(properties)}"
            )
        declared = self.spec.action_space if self.spec is not None else None
        if (values is not None or declared is not None) and len(names) != 1:
            raise ValueError(
                f"The spec {self.spec.name!r} gives the action's values: name its one field, action=..."
            )  # type: ignore[union-attr]
        fields: dict[str, Field] = {}
        for name in names:
            constants.pop(name, None)
            node = resolve(properties[name], defs, frozenset())[0]
            if declared is not None:
                fields[name] = declared_field(declared, f"action.{name}")
            elif values is None:
                if _unbounded_integer(node):
                    self._unbounded_action = name
                fields[name] = field_for(properties[name], None, defs, f"action.{name}", action=True)
        if not names:
            raise ProtocolError(f"Cannot build an action space: the action schema has no fields ({schema})")
        if values is not None:
            self._actions = _Values(constants, names[0], values)
            self.action_space = spaces.Discrete(len(values))
        elif len(fields) == 1:
            self.action_space = fields[names[0]].space
            enum = node.get("enum")  # an enum action can be masked by its legal values too
            listed = (
                list(enum) if isinstance(self.action_space, spaces.Discrete) and enum is not None else None
            )
            self._actions = _Fields(constants, fields, listed)
        else:
            self._actions = _Fields(constants, fields)
            self.action_space = spaces.Dict({k: f.space for k, f in fields.items()})

    # ------------------------------------------------------------------ steps

    def encode_action(self, action: Any) -> dict[str, Any]:
        return self._actions.encode(action)

    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        raw = result.observation
        self._last = raw
        info = base_info(result)
        if self._legal_field is not None:
            self._mask = self._legal_mask(raw.get(self._legal_field) or [])
        for key in self.info_keys:
            if key.name in raw:
                info[key.name] = raw[key.name]
        observation = {}
        for name, field in self._observation_fields.items():
            if name == "action_mask" and self._legal_field is not None:
                observation[name] = self._mask.copy()
            elif raw.get(name) is None:
                observation[name] = field.empty()
            else:
                try:
                    observation[name] = field.decode(raw[name])
                except (TypeError, ValueError, OverflowError) as exc:  # the server broke its own schema
                    raise ProtocolError(
                        f"The server sent observation field {name!r} = {raw[name]!r:.80}, which its /schema "
                        f"does not allow ({exc})"
                    ) from None
        if self.tools is not None:
            info.update(self.tools.outcome(raw))
        truncated = result.done and result.metadata.get("truncated") is True
        terminated = result.done and not truncated
        reward = 0.0 if result.reward is None else result.reward
        return Transition(observation, reward, terminated, truncated, info)

    def action_masks(self) -> np.ndarray:
        """Boolean mask of the legal actions in the last observation (sb3-contrib's ``MaskablePPO``)."""
        return self._mask.astype(bool)

    def tool_action(self, name: str, **arguments: Any) -> Any:
        """The action that calls the MCP tool ``name`` with ``arguments`` (checked against its schema)."""
        if self.tools is None:
            raise AttributeError("This environment has no MCP tools")
        return self.tools.action(name, **arguments)

    def action_fields(self) -> list[str]:
        """The action schema's fields that this adapter's actions set, in order."""
        return self._actions.fields()

    def action_from_json(self, values: dict[str, Any]) -> Any:
        """The action of `action_space` that sends ``values`` (the action fields' JSON values, by name);
        a ``ValueError`` saying why if one does not fit its field."""
        try:
            return self._actions.from_json(values)
        except ProtocolError as exc:
            raise ValueError(str(exc)) from None

    def _legal_mask(self, legal: Any) -> np.ndarray:
        mask = np.zeros(len(self._actions.values or ()), dtype=np.int8)
        for value in legal:
            index = self._actions.index.get(_key(value))
            if index is None:
                raise ProtocolError(
                    f"The server lists {value!r} as a legal action, but the action takes "
                    f"{self._actions.values}: declare the values in a spec (actions=[...])"
                )
            mask[index] = 1
        return mask

    def describe_action(self, action: Any) -> str:
        described = self._actions.describe(action)
        return described if described is not None else super().describe_action(action)

    def trajectory_metadata(self) -> dict[str, Any]:
        return {
            "server_names": list(self.server_names),
            "spec": self.spec.name if self.spec is not None else None,
        }

    def render(self, mode: str) -> Any:
        if mode == "ansi":
            return json.dumps(self._last, indent=2, sort_keys=True, default=str) + "\n"
        return super().render(mode)


class _Actions:
    """How a `GenericAdapter`'s actions become the action JSON and back, for one kind of action (chosen
    once, at setup): values listed by a spec (`_Values`), fields of the schema (`_Fields`), MCP tool calls
    (`_ToolCalls`). ``values`` are those of a ``Discrete`` action, by index (its legal-action mask's order);
    ``index`` finds a value's index by its JSON."""

    def __init__(self, constants: dict[str, Any]) -> None:
        self.constants = constants  # fields sent as they are with every action (MCP's "type", say)
        self.values: list[Any] | None = None
        self.index: dict[str, int] = {}

    def fields(self) -> list[str]:
        """The action schema's fields that the actions set, in order."""
        raise NotImplementedError

    def encode(self, action: Any) -> dict[str, Any]:
        """The action JSON that ``action`` sends."""
        raise NotImplementedError

    def from_json(self, values: dict[str, Any]) -> Any:
        """The action that sends ``values``, or a ``ValueError`` (or `ProtocolError`) saying why none does."""
        raise NotImplementedError

    def describe(self, action: Any) -> str | None:
        """``action`` in words, where this kind says more than the adapter's default (None)."""
        if self.values is None:
            return None
        return str(self.values[int(action)])  # a Discrete over values (an enum's too): the value it sends

    def _listing(self, values: list[Any]) -> None:
        self.values = values
        self.index = {_key(v): i for i, v in enumerate(values)}


class _Values(_Actions):
    """A ``Discrete`` action over values a spec lists: values of one ``field``, or (``field=None``) whole
    actions, dicts of fields sent as they are."""

    def __init__(self, constants: dict[str, Any], field: str | None, values: list[Any]) -> None:
        super().__init__(constants)
        self.field = field
        self._listing(values)

    def fields(self) -> list[str]:
        return [self.field] if self.field is not None else []

    def encode(self, action: Any) -> dict[str, Any]:
        value = self.values[int(action)]  # type: ignore[index]
        return {**self.constants, **(value if self.field is None else {self.field: value})}

    def from_json(self, values: dict[str, Any]) -> Any:
        if self.field is None:
            sent = {name: value for name, value in values.items() if value is not None}
            if _key(sent) not in self.index:
                raise ValueError(f"{sent} is not one of this environment's {len(self.index)} actions")
            return self.index[_key(sent)]
        value = values[self.field]
        if _key(value) not in self.index:
            raise ValueError(f"{self.field} takes one of {self.values}, got {value!r}")
        return self.index[_key(value)]


class _Fields(_Actions):
    """Actions made of the schema's fields: the one field's value (with ``listed``, an enum's values, whose
    legal ones can be masked), or a dict of them."""

    def __init__(
        self, constants: dict[str, Any], fields: dict[str, Field], listed: list[Any] | None = None
    ) -> None:
        super().__init__(constants)
        self.by_name = fields
        self.single = next(iter(fields)) if len(fields) == 1 else None
        if listed is not None:
            self._listing(listed)

    def fields(self) -> list[str]:
        return list(self.by_name)

    def encode(self, action: Any) -> dict[str, Any]:
        payload = dict(self.constants)
        if self.single is not None:
            payload[self.single] = self.by_name[self.single].encode(action)
        else:
            for name, field in self.by_name.items():
                payload[name] = field.encode(action[name])
        return payload

    def from_json(self, values: dict[str, Any]) -> Any:
        if self.single is not None:
            return self._field_from_json(self.single, values)
        return {name: self._field_from_json(name, values) for name in self.by_name}

    def _field_from_json(self, name: str, values: dict[str, Any]) -> Any:
        """One field's value in its space, from its JSON value: a ``ValueError`` where the value is
        missing, outside the space, or would be sent as something else (3.5 as 3, say)."""
        if name not in values:
            raise ValueError(f"The action needs {name!r}; it was given {sorted(values)}")
        field, value = self.by_name[name], values[name]
        try:
            decoded = field.decode(value)
            fits = decoded in field.space and _same(field.encode(decoded), value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}={value!r} does not fit its space {field.space}: {exc}") from None
        if not fits:
            raise ValueError(f"{name}={value!r} does not fit its space {field.space}")
        return decoded


class _ToolCalls(_Actions):
    """MCP tool calls (`Tools`), which make their whole action JSON."""

    def __init__(self, tools: Tools) -> None:
        super().__init__({})
        self.tools = tools

    def fields(self) -> list[str]:
        return []

    def encode(self, action: Any) -> dict[str, Any]:
        return self.tools.call(action)

    def from_json(self, values: dict[str, Any]) -> Any:
        raise TypeError("This environment's actions are MCP tool calls: use tool_action(name, ...)")

    def describe(self, action: Any) -> str | None:
        return self.tools.describe(action)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _same(sent: Any, given: Any) -> bool:
    """Whether the JSON value an action sends is the one it was made from (numbers and arrays of numbers
    compared by value, so 1 and 1.0 are the same, 3 and 3.5 are not; anything else as Python compares it,
    since numpy would read [1, "a"] as ["1", "a"])."""
    try:
        a, b = np.asarray(sent), np.asarray(given)
        if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
            return a.shape == b.shape and bool(np.all(a == b))
    except ValueError:  # ragged lists: compared as they are
        pass
    return bool(sent == given)


def legal_choice(space: spaces.Space[Any], legal: list[Any] | None) -> Any:
    """One of the ``legal`` actions (`GenericAdapter.legal_actions`), drawn with ``space``'s generator,
    where ``space`` is an integer ``Box`` holding them (an action the schema does not bound); None
    otherwise."""
    if not legal or not isinstance(space, spaces.Box) or not np.issubdtype(space.dtype, np.integer):
        return None
    try:
        action = np.asarray(legal[int(space.np_random.integers(len(legal)))], dtype=space.dtype)
    except (TypeError, ValueError, OverflowError):  # not an integer: the list is of something else
        return None
    return action if space.contains(action) else None


def _unbounded_integer(node: dict[str, Any]) -> bool:
    """Whether a field's schema is an integer without both bounds."""
    kind = node.get("type")
    if kind != "integer" and not (isinstance(kind, list) and "integer" in kind):
        return False
    low, high = bounds(node, integer=True)
    return low is None or high is None


class EchoAdapter(GenericAdapter):
    """The generic adapter, with our echo server as its embedded server (``openenv/echo``).

    Its action space is `UnicodeText` (the message) and its observation a ``Dict`` with
    ``echoed_message`` and ``message_length``.
    """

    server_name: ClassVar[str | None] = "echo"
    #: 0.1 per character, of at most 256.
    reward_range: ClassVar[tuple[float, float] | None] = (0.0, 25.6)

    def __init__(self, *, max_steps: int | None = None) -> None:
        super().__init__()
        self.server_options = {"max_steps": max_steps} if max_steps is not None else {}
