"""MCP tool environments: a server's tools as a gymnasium action space, and a tool's outcome as data.

An MCP environment (openenv's ``MCPEnvironment``, e.g. the official ``echo_env``) takes one action,
``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``, and lists its tools with JSON-RPC
``tools/list`` (``POST /mcp``). The generic adapter then makes the action space a ``OneOf`` with one
``Dict`` per tool, the tool's required arguments typed from its ``inputSchema``: an action is
``(tool_index, {"argument": value, ...})``. Why this space: sampling it gives calls that are valid for
their tool (a random agent, ``check_env``), each argument has the space its JSON schema says (the same
schema TRL reads from a tool's signature), and ``env.unwrapped.tool_action("echo_message",
message="hi")`` builds one by name and keyword arguments, the way an LLM's tool call arrives. Optional
arguments keep the tool's defaults.

A call is checked against the tool's schema before it is sent (a clear ``ValueError`` otherwise), and a
tool that fails answers with data, not an exception: ``info["tool_error"]`` says what went wrong, the
episode goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gymnasium import spaces

from ..client import Client, ProtocolError
from ..optional_imports import hidden_module
from .schema import Field, field_for

__all__ = ["Tool", "Tools"]


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its name, description and JSON Schema of arguments, and its arguments' fields."""

    name: str
    description: str
    input_schema: dict[str, Any]
    fields: dict[str, Field]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


class Tools(Sequence[dict[str, Any]]):
    """A server's MCP tools (``env.unwrapped.tools``: each a dict of ``name``, ``description`` and
    ``input_schema``), and the action space that calls them."""

    def __init__(self, listed: list[dict[str, Any]]) -> None:
        self.tools: list[Tool] = []
        for entry in listed:
            schema = entry.get("inputSchema") or entry.get("input_schema") or {}
            defs = schema.get("$defs", {})
            required = list(schema.get("required", ()))
            properties = schema.get("properties", {})
            fields = {
                name: field_for(properties.get(name, {}), None, defs, f"{entry['name']}.{name}", action=True)
                for name in required
            }
            self.tools.append(Tool(str(entry["name"]), str(entry.get("description") or ""), schema, fields))
        if not self.tools:
            raise ProtocolError("This MCP environment lists no tools: there is nothing to act with")
        self.names = [tool.name for tool in self.tools]
        self.action_space = spaces.OneOf(
            [spaces.Dict({k: f.space for k, f in t.fields.items()}) for t in self.tools]
        )

    @staticmethod
    def are_in(action_schema: dict[str, Any]) -> bool:
        """Whether an action schema is MCP's ``CallToolAction`` (a constant ``type`` of ``call_tool``)."""
        properties = action_schema.get("properties", {})
        return "tool_name" in properties and properties.get("type", {}).get("const") == "call_tool"

    @classmethod
    def listed_by(cls, client: Client) -> Tools:
        """The tools the server at ``client`` lists (``tools/list`` over ``POST /mcp``)."""
        result = client.mcp("tools/list")
        listed = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(listed, list):
            raise ProtocolError(f"{client.base_url} answered tools/list with {result!r}", url=client.base_url)
        return cls(listed)

    def call(self, action: Any) -> dict[str, Any]:
        """The action JSON (``call_tool``) of an action of `action_space`, checked against its schema."""
        index, values = action
        tool = self.tools[int(index)]
        arguments = {name: field.encode(values[name]) for name, field in tool.fields.items()}
        _check(tool, arguments)
        return {"type": "call_tool", "tool_name": tool.name, "arguments": arguments}

    def action(self, name: str, **arguments: Any) -> tuple[int, dict[str, Any]]:
        """The action calling tool ``name`` with ``arguments`` (each given as JSON would carry it)."""
        if name not in self.names:
            raise ValueError(f"There is no tool {name!r}; the server's tools are {', '.join(self.names)}")
        index = self.names.index(name)
        tool = self.tools[index]
        _check(tool, arguments)
        unknown = set(arguments) - set(tool.fields)
        if unknown:
            raise ValueError(
                f"{name} takes {sorted(tool.fields) or 'no required arguments'} through the action space; "
                f"{sorted(unknown)} would be dropped (optional arguments keep the tool's defaults)"
            )
        return index, {key: tool.fields[key].decode(value) for key, value in arguments.items()}

    def outcome(self, raw: dict[str, Any]) -> dict[str, Any]:
        """What a tool call came back with, for ``info``: ``tool_name``, ``tool_result`` (the tool's value:
        text as it came, anything else as JSON text) and ``tool_error`` (what went wrong: the tool's own
        error or the framework's); a key is left out where there is nothing to say (the info schema then
        gives it ``""``)."""
        result = raw.get("result")
        error = raw.get("error")
        info: dict[str, Any] = {}
        if raw.get("tool_name") is not None:
            info["tool_name"] = raw["tool_name"]
        value = result
        if isinstance(result, dict):
            value = result.get("data", result.get("structured_content"))
            if result.get("is_error"):
                texts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict)]
                info["tool_error"] = " ".join(texts) or "the tool reported an error"
        if value is not None:
            info["tool_result"] = value if isinstance(value, str) else json.dumps(value, default=str)
        if isinstance(error, dict):
            info["tool_error"] = f"{error.get('error_type', 'error')}: {error.get('message', '')}"
        return info

    def describe(self, action: Any) -> str:
        index, values = action
        tool = self.tools[int(index)]
        arguments = {name: field.encode(values[name]) for name, field in tool.fields.items()}
        return f"{tool.name}({json.dumps(arguments, default=str)})"

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [tool.as_dict() for tool in self.tools[index]]
        return self.tools[index].as_dict()

    def __len__(self) -> int:
        return len(self.tools)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (tool.as_dict() for tool in self.tools)

    def __repr__(self) -> str:
        return f"<Tools {', '.join(self.names)}>"


def _check(tool: Tool, arguments: dict[str, Any]) -> None:
    """Refuse, before anything is sent, arguments that do not match the tool's JSON Schema."""
    with hidden_module("rfc3987_syntax"):  # an optional format check whose import takes seconds
        import jsonschema

    try:
        jsonschema.validate(arguments, tool.input_schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "the arguments"
        raise ValueError(
            f"{tool.name}: {where}: {exc.message} (its schema: {json.dumps(tool.input_schema)})"
        ) from None
