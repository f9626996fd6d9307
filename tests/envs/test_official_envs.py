"""Every official environment of the conformance copy of huggingface/OpenEnv, through ``openenv/remote`` with
default arguments: honest spaces, a random (masked) policy playing episodes to their end, gymnasium's
``check_env``, and a recording that replays.

Each test adds a row to the compatibility table (``benchmarks/results/compatibility.json``, rendered into
the README by ``scripts/render_benchmarks.py``) when ``OPENENV_LAB_COMPATIBILITY_JSON`` names the file.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import openenv_lab
from openenv_lab.adapters import AtariAdapter, ChessAdapter, GenericAdapter
from openenv_lab.render import trajectory_html
from tests.conformance import OfficialServer

pytestmark = pytest.mark.slow

#: The official chess_env's opponent (moonfish) searches about a second a move from the opening on
#: these machines: its episodes start from a position where the game ends within a few moves.
CHESS_ENDGAME = "k7/8/1K6/8/8/8/8/7Q b - - 0 1"

#: How each environment is expected to come through, and what the table says about it.
EXPECTED: dict[str, dict[str, Any]] = {
    "connect4_env": {"adapter": GenericAdapter, "action": spaces.Discrete(7), "masked": True},
    "maze_env": {"adapter": GenericAdapter, "action": spaces.Discrete(4), "masked": True},
    "grid_world_env": {"adapter": GenericAdapter, "action": spaces.Discrete(4), "masked": False},
    "echo_env": {
        "adapter": GenericAdapter,
        "masked": False,
        "episodes": "the server never ends an episode (an MCP tool env): 50 tool calls instead",
    },
    "chess_env": {
        "adapter": ChessAdapter,
        "action": spaces.Discrete(4672),
        "masked": True,
        "reset_options": {"fen": CHESS_ENDGAME},
        "episodes_from": "a king-and-queen endgame (moonfish takes ~1 s a move from the opening)",
        "check_env": "fails: the official chess_env ignores reset(seed=...) and draws the agent's colour",
    },
    "atari_env": {
        "adapter": AtariAdapter,
        "action": spaces.Discrete(6),
        "masked": False,
        "server": {"ATARI_OBS_TYPE": "ram", "ATARI_FRAMESKIP": "16"},
        "episodes_from": "Pong with RAM observations and 16 frames a step (a JSON screen costs ~30 ms)",
        "check_env": "fails: the official atari_env ignores reset(seed=...), so two seeded runs differ",
    },
}


def policy(env: gym.Env, obs: Any, masked: bool) -> Any:
    if masked:
        return env.action_space.sample(mask=np.asarray(obs["action_mask"], dtype=np.int8))
    return env.action_space.sample()


def mask_of_the_servers_list(env: gym.Env, info: dict[str, Any]) -> np.ndarray:
    """The mask the server's own ``legal_actions`` (as ``info`` carries it, unread by the adapter's mask)
    says: action ``i`` is legal when the value it sends is listed."""
    listed = {str(value) for value in info["legal_actions"]}
    adapter = env.unwrapped.adapter
    return np.array([adapter.describe_action(i) in listed for i in range(env.action_space.n)], dtype=np.int8)


def record_row(name: str, row: dict[str, Any]) -> None:
    target = os.environ.get("OPENENV_LAB_COMPATIBILITY_JSON")
    if not target:
        return
    path = Path(target)
    table = json.loads(path.read_text()) if path.exists() else {}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
    )
    table["when"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    table["commit"] = commit.stdout.strip() or None
    table["cpus"] = os.cpu_count()
    table.setdefault("environments", {})[name] = row
    path.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_an_official_environment_plays_through_openenv_remote(name):
    expected = EXPECTED[name]
    with OfficialServer(name, environment=expected.get("server")) as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # official servers do not confirm seeds
        env = gym.make("openenv/remote", base_url=server.url)
        adapter = env.unwrapped.adapter
        assert type(adapter) is expected["adapter"]
        if "action" in expected:
            assert env.action_space == expected["action"]
        env.action_space.seed(0)
        options = expected.get("reset_options")
        obs, _ = env.reset(seed=0, options=options)
        assert env.observation_space.contains(obs)
        episodes, steps, started = 0, 0, time.perf_counter()
        limit = 50 if "episodes" in expected else None
        narrowed = 0  # steps whose mask ruled something out (a full column, a wall)
        # The Spec's mask from the server's legal_actions (the chess family reads its own FEN instead).
        spec_mask = expected["masked"] and expected["adapter"] is GenericAdapter
        while (episodes < 20) if limit is None else (steps < limit):
            obs, reward, terminated, truncated, info = env.step(policy(env, obs, expected["masked"]))
            steps += 1
            assert env.observation_space.contains(obs) and np.isfinite(reward)
            if spec_mask and not (terminated or truncated):
                # Guards the Spec's mask (mutation: a mask of all ones) on every step of whole games.
                np.testing.assert_array_equal(obs["action_mask"], mask_of_the_servers_list(env, info))
                if name == "connect4_env":  # and the board's own word: a column is open while its top is
                    np.testing.assert_array_equal(obs["action_mask"], obs["board"][0] == 0)
                narrowed += int(not obs["action_mask"].all())
            if name == "echo_env":
                assert info["tool_error"] is None and info["tool_result"] is not None
            if terminated or truncated:
                episodes += 1
                obs, _ = env.reset(options=options)
        rate = steps / (time.perf_counter() - started)
        if spec_mask:
            assert narrowed > 0, f"no step of {episodes} games ruled an action out: the mask went untested"

        try:
            check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)  # one session only
            checked = "passes"
        except AssertionError as exc:
            if "check_env" not in expected:
                raise
            assert "eterministic" in str(exc)  # the seed's replay differs: the server is not seeded
            checked = expected["check_env"]

        recording = openenv_lab.RecordTrajectory(env)
        obs, _ = recording.reset(seed=1, options=options)
        for _ in range(30 if name != "echo_env" else 5):
            obs, _, terminated, truncated, _ = recording.step(policy(env, obs, expected["masked"]))
            if terminated or truncated:
                break
        trajectory = recording.trajectory
        viewer = openenv_lab.show(trajectory)
        assert viewer.trajectory.table.height == trajectory.table.height >= 2
        assert trajectory.metadata["server_metadata"]["name"]
        page = trajectory_html(trajectory)
        assert page.count('"step":') == trajectory.table.height
        recording.close()

    record_row(
        name,
        {
            "adapter": type(adapter).__name__,
            "observation": str(env.observation_space),
            "action": str(env.action_space),
            "episodes": expected.get("episodes", f"{episodes} to their end"),
            "episodes_from": expected.get("episodes_from", "the server's reset"),
            "check_env": checked,
            "replay": "records and replays",
            "steps_per_s": rate,
        },
    )


def test_an_mcp_tool_env_lists_its_tools_and_checks_calls_before_sending():
    with OfficialServer("echo_env") as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=server.url)
        tools = env.unwrapped.tools
        assert [tool["name"] for tool in tools] == ["echo_message", "echo_with_length"]
        assert tools[0]["input_schema"]["required"] == ["message"]
        env.reset(seed=0)
        _, _, _, _, info = env.step(env.unwrapped.tool_action("echo_with_length", message="Hello"))
        assert info["tool_result"] == {"message": "Hello", "length": 5}
        with pytest.raises(ValueError, match="There is no tool 'shout'"):
            env.unwrapped.tool_action("shout", message="hi")
        with pytest.raises(ValueError, match="echo_message: message: 3 is not of type 'string'"):
            env.unwrapped.tool_action("echo_message", message=3)
        env.close()


def test_a_spec_for_another_environment_is_refused_naming_both():
    with OfficialServer("maze_env") as server:
        with pytest.raises(
            openenv_lab.EnvironmentMismatch, match=r"spec='connect4' is for .*reports itself as"
        ):
            gym.make("openenv/remote", base_url=server.url, spec="connect4")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with pytest.raises(ValueError, match="not in the action schema"):  # allowed: then it does not fit
                gym.make("openenv/remote", base_url=server.url, spec="connect4", check_identity=False)


def test_official_connect4_trains_maskable_ppo_for_a_tiny_budget():
    sb3_contrib = pytest.importorskip("sb3_contrib")
    with OfficialServer("connect4_env") as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.wrappers.FlattenObservation(gym.make("openenv/remote", base_url=server.url))
        model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
        model.learn(128)
        obs, _ = env.reset(seed=0)
        action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks())
        assert env.unwrapped.action_masks()[int(action)]
        env.close()


def test_an_atari_game_the_server_does_not_run_is_refused_naming_both():
    with OfficialServer("atari_env", environment={"ATARI_OBS_TYPE": "ram"}) as server:
        with pytest.raises(
            openenv_lab.EnvironmentMismatch, match=r"game='breakout' was asked for.*'pong'"
        ) as raised:
            gym.make("openenv/atari", game="breakout", base_url=server.url)
        assert (raised.value.asked, raised.value.reported) == ("breakout", "pong")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            env = gym.make("openenv/atari", game="breakout", base_url=server.url, check_identity=False)
        assert env.unwrapped.adapter.served_game == "pong"
        env.close()
