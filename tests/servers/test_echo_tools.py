"""Our echo server's MCP tools (``serve echo --mcp``): the official MCP client, JSON-RPC at ``/mcp``, and
gymnasium's side of a tool environment (`openenv_lab.adapters.tools`), all against the real server."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from openenv.core.mcp_client import MCPToolClient

import openenv_lab  # noqa: F401 - registers the ids
from openenv_lab.client import Client, ServerError
from openenv_lab.launch import shared_embedded_server


@pytest.fixture(scope="module")
def echo_tools_url() -> str:
    server = shared_embedded_server("echo", mcp=True)
    return server.start()


def test_the_official_mcp_client_lists_and_calls_our_tools(echo_tools_url):
    with MCPToolClient(base_url=echo_tools_url).sync() as client:
        client.reset()
        assert sorted(tool.name for tool in client.list_tools()) == ["echo_message", "echo_with_length"]
        assert client.call_tool("echo_message", message="Hi") == "Hi"
        assert client.call_tool("echo_with_length", message="Hello") == {"message": "Hello", "length": 5}
        assert client.state().step_count == 2
        client.reset()
        assert client.state().step_count == 0


def test_json_rpc_at_mcp(echo_tools_url):
    with Client(echo_tools_url) as client:
        tools = client.mcp("tools/list")["tools"]
        assert {tool["name"] for tool in tools} == {"echo_message", "echo_with_length"}
        result = client.mcp("tools/call", {"name": "echo_with_length", "arguments": {"message": "abc"}})
        assert result["data"] == {"message": "abc", "length": 3}
        with pytest.raises(ServerError, match="MCP"):
            client.mcp("no/such/method")


def test_a_gymnasium_env_calls_the_tools_and_gets_errors_as_data(echo_tools_url):
    with gym.make("openenv/remote", base_url=echo_tools_url) as env:
        assert [tool["name"] for tool in env.unwrapped.tools] == ["echo_message", "echo_with_length"]
        env.reset(seed=0)
        _, _, terminated, truncated, info = env.step(env.unwrapped.tool_action("echo_message", message="Hey"))
        assert info["tool_result"] == "Hey" and info["tool_error"] == ""  # "": no error
        assert not (terminated or truncated)
        assert env.unwrapped.tools[0]["input_schema"]["properties"]["message"]["maxLength"] == 256
        with pytest.raises(ValueError, match="echo_message"):  # refused before anything is sent
            env.unwrapped.tool_action("echo_message", message="x" * 300)
        for _ in range(5):  # random calls are valid calls
            _, _, _, _, info = env.step(env.action_space.sample())
            assert info["tool_error"] == "", info


def test_a_vector_env_calls_the_tools_over_one_batch_connection(echo_tools_url):
    """The MCP environment's own step_async runs its tool calls on the event loop, where its MCP session
    lives: /ws/batch must leave it there (a plain step on a worker thread waited on that loop forever)."""
    envs = gym.make_vec("openenv/remote", num_envs=2, base_url=echo_tools_url)
    try:
        envs.reset(seed=0)
        action = envs.unwrapped.single_action_space.sample()
        for _ in range(3):
            *_, infos = envs.step([action, action])
            assert list(infos["tool_error"]) == ["", ""], infos
    finally:
        envs.close()


def test_a_failing_tool_answers_with_data_and_a_message_is_refused(echo_tools_url):
    with Client(echo_tools_url) as client, client.session() as session:
        session.reset()
        call = {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "x" * 300}}
        reply = session.step(call)
        assert reply.observation["result"] is None and not reply.done
        assert reply.observation["error"]["error_type"] in ("execution_error", "invalid_args")
        with pytest.raises(ServerError):
            session.step({"message": "hello"})  # the message-echo action: the other mode of the server


def test_tool_results_are_text(echo_tools_url):
    """An MCP tool env's ``tool_result``: text as it came, any other value as JSON text."""
    with gym.make("openenv/remote", base_url=echo_tools_url) as env:
        _, info = env.reset(seed=0)
        assert (info["tool_name"], info["tool_result"], info["tool_error"]) == ("", "", "")
        _, _, _, _, info = env.step(env.unwrapped.tool_action("echo_with_length", message="Hey"))
        assert json.loads(info["tool_result"]) == {"message": "Hey", "length": 3}
        assert info["tool_name"] == "echo_with_length"
