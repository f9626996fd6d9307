"""The echo server's tools over MCP: what the official ``echo_env`` became in openenv 0.10.

``openenv-lab serve echo --mcp`` (or ``DockerServer("echo", mcp=True)``) serves this instead of the
message-echo environment: two MCP tools, called through the step API (``{"type": "call_tool",
"tool_name": ..., "arguments": {...}}`` and ``{"type": "list_tools"}``), through JSON-RPC at
``POST /mcp``, and over the WebSocket (``{"type": "mcp"}``), all three served by openenv's framework
from the tools declared here:

- ``echo_message(message)`` returns the message;
- ``echo_with_length(message)`` returns ``{"message": message, "length": len(message)}``.

Every tool call counts as a step (``state.step_count``), and a reset starts again from 0, as on the
official server (``--max-steps`` does not apply), so the official echo client (``MCPToolClient``) and the
official websocket tests drive it unchanged. A message longer than 256 characters (the tools' schemas say
so) is a tool error, returned as data. Episodes never end by themselves: the caller decides when a
conversation is over.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import Field

from ._app import build_app, import_openenv_server
from ._base import Observation, ServerEnvironment, State
from .catalogue import BUNDLED_SERVERS

__all__ = ["EchoToolsEnvironment", "make_app"]

#: The options and their ranges (the catalogue declares them once).
SPEC = BUNDLED_SERVERS["echo"]

_env_server = import_openenv_server()
MAX_LENGTH = 256
#: The tools' argument: its schema (``maxLength``) lets clients check a message before sending it.
Message = Annotated[str, Field(max_length=MAX_LENGTH, description="Any text")]


class EchoToolsEnvironment(_env_server.MCPEnvironment, ServerEnvironment):
    """Echo as MCP tools (two of them); every call is a step."""

    NAME = "echo"

    def __init__(self) -> None:
        from fastmcp import FastMCP

        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        tools = FastMCP("openenv-lab-echo")

        @tools.tool
        def echo_message(message: Message) -> str:
            """Echo the message back."""
            self._count(message)
            return message

        @tools.tool
        def echo_with_length(message: Message) -> dict[str, Any]:
            """Echo the message back with its length in characters."""
            self._count(message)
            return {"message": message, "length": len(message)}

        super().__init__(tools)

    def _count(self, message: str) -> None:
        if len(message) > MAX_LENGTH:
            raise ValueError(f"message is {len(message)} characters long; the most is {MAX_LENGTH}")
        self._update_state(step_count=self._state.step_count + 1)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **unknown: Any) -> Observation:
        SPEC.refuse_unknown(unknown)
        SPEC.check(seed=seed)
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        metadata: dict[str, Any] = {"status": "ready", "tools": ["echo_message", "echo_with_length"]}
        if seed is not None:
            metadata["seed"] = seed
        return Observation(done=False, reward=0.0, metadata=metadata)

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError(
            "This echo server speaks MCP: send {'type': 'call_tool', 'tool_name': 'echo_message', "
            "'arguments': {'message': ...}} or {'type': 'list_tools'} (openenv-lab serve echo without --mcp "
            "takes {'message': ...})"
        )

    def describe(self) -> str:
        return "Echoes messages through two MCP tools, echo_message and echo_with_length (as echo_env)."


def make_app(max_sessions: int = 256) -> Any:
    """The FastAPI app of the MCP echo server."""
    return build_app(
        EchoToolsEnvironment,
        _env_server.CallToolAction,
        _env_server.CallToolObservation,
        State,
        env_name="echo",
        max_sessions=max_sessions,
    )
