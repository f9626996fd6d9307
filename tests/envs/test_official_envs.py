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
from tests.conformance import OfficialServer, require
from tests.helpers import info_signature

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
        "card": "not run: moonfish takes about a second a move from the opening",
    },
    "atari_env": {
        "adapter": AtariAdapter,
        "action": spaces.Discrete(6),
        "masked": False,
        "server": {"ATARI_OBS_TYPE": "ram", "ATARI_FRAMESKIP": "16"},
        "episodes_from": "Pong with RAM observations and 16 frames a step (a JSON screen costs ~30 ms)",
        "check_env": "fails: the official atari_env ignores reset(seed=...), so two seeded runs differ",
    },
    # Run with the catalogue venv's Python (tests/conformance.py): open_spiel, dm_control and mujoco,
    # textarena.
    "openspiel_env": {
        "adapter": GenericAdapter,
        "action": spaces.Discrete(3),
        "masked": True,
        "narrows": False,  # catch: every move is always legal
        "spec": "openspiel/catch",
        "episodes_from": "catch, the server's default game (its spec read from the session's state)",
        "check_env": "fails: the official openspiel_env ignores reset(seed=...), so the ball falls anywhere",
    },
    "openspiel_env (tic_tac_toe)": {
        "env": "openspiel_env",
        "server": {"OPENSPIEL_GAME": "tic_tac_toe"},
        "adapter": GenericAdapter,
        "action": spaces.Discrete(9),
        "masked": True,
        "spec": "openspiel/tic_tac_toe",
        "episodes_from": "tic_tac_toe against the server's random opponent",
        "check_env": "fails: the official openspiel_env ignores reset(seed=...), so its opponent's "
        "replies differ",
    },
    "wildfire_env": {
        "adapter": GenericAdapter,
        "action": spaces.Discrete(1 + 2 * 16 * 16),
        "masked": False,
        "spec": "wildfire/16x16",
        "episodes_from": "random orders: wait, or water or a firebreak on one of the 16x16 cells (the "
        "spec read from the session's state)",
        "check_env": "fails: the official wildfire_env ignores reset(seed=...), so the fire starts anywhere",
    },
    "textarena_env": {
        "adapter": GenericAdapter,
        "masked": False,
        # nltk's data is a download: the number game needs none of it.
        "server": {"TEXTARENA_ENV_ID": "GuessTheNumber-v0", "TEXTARENA_DOWNLOAD_NLTK": "0"},
        "episodes_from": "GuessTheNumber-v0 with random text for guesses, which the game echoes back",
    },
    "coding_env": {
        "adapter": GenericAdapter,
        "masked": False,
        "episodes": "the server never ends an episode (code runs until the agent stops): 50 steps of "
        "random text as code instead",
    },
    "repl_env": {
        "adapter": GenericAdapter,
        "masked": False,
        "server": {"REPL_MAX_ITERATIONS": "5"},
        "episodes_from": "random text as code, 5 steps an episode (REPL_MAX_ITERATIONS=5; 30 by default)",
    },
    # In a venv of its own (marlenv needs gym 0.24, which needs numpy 1), run from its own folder.
    "snake_env": {
        "adapter": GenericAdapter,
        "action": spaces.Discrete(3),
        "masked": False,
        "spec": "snake",
        "episodes_from": "random turns on marlenv's 20x20 grid",
        "check_env": "fails: the official snake_env takes no seed (marlenv's fruit falls anywhere)",
    },
    "reasoning_gym_env": {
        "adapter": GenericAdapter,
        "masked": False,
        "episodes_from": "the server's default dataset, one question an episode, answered with random "
        "text (scored 0)",
        "check_env": "fails: without a dataset_name, the official reasoning_gym_env ignores "
        "reset(seed=...) and serves its default dataset's next question",
    },
    "dm_control_env": {
        "adapter": GenericAdapter,
        "action": spaces.Box(-1.0, 1.0, (1,), np.float64),
        "masked": False,
        "server": {"MUJOCO_GL": "disable"},
        "spec": "dm_control/cartpole/balance",
        "episodes_wanted": 3,  # a thousand steps each
        "episodes_from": "cartpole/balance, the server's default task (its spaces from the session's state)",
        "check_env": "fails: the official dm_control_env seeds numpy's global generator, not the task's, "
        "so two seeded runs differ",
    },
}


#: The official environments not played here: why, and what a user with those means would do. Each is a
#: row of the compatibility table. "Not yet" means it could run here and is still to be tested.
ELSEWHERE: dict[str, tuple[str, str]] = {
    "agent_world_model_env": (
        "an LLM API (OPENENV_AWM_LLM_*) and the AgentWorldModel-1K dataset from the Hub",
        "run its image with those set, then openenv/remote at its URL",
    ),
    "browsergym_env": (
        "Playwright's Chromium and MiniWoB++ pages served beside it (not on PyPI)",
        "run its Docker image, then openenv/remote at its URL",
    ),
    "calendar_env": (
        "a WebSocket route: its server (started here with SQLAlchemy) answers HTTP /reset, /step and /mcp "
        "but has no /ws and no /schema, which openenv/remote speaks",
        "call its HTTP routes or its MCP endpoint directly (an MCP client)",
    ),
    "carla_env": ("the CARLA simulator (a GPU and a binary outside PyPI)", "run it beside a CARLA server"),
    "chat_env": (
        "a tokenizer downloaded from the Hub (transformers)",
        "run its image with the Hub reachable",
    ),
    "coding_tools_env": ("E2B cloud sandboxes (an API key and network)", "set E2B_API_KEY and run its image"),
    "dipg_safety_env": (
        "its dataset downloaded from the Hub (DIPG_DATASET_PATH)",
        "download the dataset, then run its image",
    ),
    "finqa_env": (
        "its dataset of SEC filings downloaded from the Hub",
        "run its image with the Hub reachable",
    ),
    "finrl_env": (
        "finrl 0.3.7's pinned stack (pandas 2.0, numpy 1.24) and market data from Yahoo (network)",
        "use openenv/finrl here (the same trading rules, offline data), or run its image",
    ),
    "git_env": ("a Gitea server (Docker)", "start Gitea and its image with docker compose"),
    "julia_env": ("a Julia installation (outside PyPI)", "run its Docker image"),
    "jupyter_env": ("E2B cloud sandboxes (an API key and network)", "set E2B_API_KEY and run its image"),
    "kernrl": ("a CUDA GPU (Triton kernels)", "run it on a machine with an NVIDIA GPU"),
    "openapp_env": (
        "BrowserGym, Playwright's Chromium and the OpenApps web apps served beside it",
        "run its Docker image",
    ),
    "opencode_env": ("E2B sandboxes and an LLM endpoint (network)", "run its image with those reachable"),
    "sumo_rl_env": (
        "a server that can reset: at this commit every reset fails, its metadata holding gymnasium's "
        "Discrete.n (numpy's int64), which pydantic cannot serialise (seen here with sumo-rl 1.4.5 and "
        "eclipse-sumo 1.28.0 from PyPI)",
        "run it once fixed upstream (int(self.env.action_space.n)); openenv_lab says the reset failed",
    ),
    "tbench2_env": (
        "Terminal-Bench tasks run in Docker containers, downloaded",
        "run it beside a Docker engine",
    ),
    "terminus_env": ("E2B cloud sandboxes (an API key and network)", "set E2B_API_KEY and run its image"),
    "websearch_env": ("a web search API (a key and network)", "run its image with its key set"),
}


def test_every_official_environment_is_played_here_or_says_why_not():
    """All of the conformance copy's environments: each is played above or listed with its reason (a new
    one in the copy fails this until it is one or the other)."""
    root = require()
    # Those with a server: the copy's unity_env is a README alone at this commit.
    present = {path.name for path in (root / "envs").iterdir() if (path / "server").is_dir()}
    assert len(present) == 33
    played = {expected.get("env", name) for name, expected in EXPECTED.items()}
    assert not played & set(ELSEWHERE), "an environment is both played and listed as not played"
    assert present == played | set(ELSEWHERE), (
        f"not accounted for: {sorted(present - played - set(ELSEWHERE))}; "
        f"gone from the copy: {sorted((played | set(ELSEWHERE)) - present)}"
    )
    for name, (reason, instead) in ELSEWHERE.items():
        record_row(name, {"runs_here": False, "needs": reason, "instead": instead})


def policy(env: gym.Env, obs: Any, masked: bool) -> Any:
    if masked:
        return env.action_space.sample(mask=np.asarray(obs["action_mask"], dtype=np.int8))
    return env.action_space.sample()


def mask_of_the_servers_list(env: gym.Env, info: dict[str, Any]) -> np.ndarray:
    """The mask the server's own ``legal_actions`` (the list as it came, unread by the adapter's mask)
    says: action ``i`` is legal when the value it sends is listed."""
    listed = {str(value) for value in env.unwrapped.adapter.legal_actions()}
    adapter = env.unwrapped.adapter
    return np.array([adapter.describe_action(i) in listed for i in range(env.action_space.n)], dtype=np.int8)


def report_card(url: str, expected: dict[str, Any]) -> str:
    """`openenv_lab.check`'s verdict on the server, in a few words (a short card: 3 episodes)."""
    if "card" in expected:
        return expected["card"]
    card = openenv_lab.check(url, validate=False, episodes=3, steps=10, max_episode_steps=200)
    failed = [check.name for check in card.checks if check.status == "fail"]
    for check in card.checks:  # every check ran, or says why not
        assert check.status in ("pass", "warn", "fail", "info", "skip") and check.detail
    return "passes" if card.passed else "fails: " + ", ".join(failed)


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
    server_name = expected.get("env", name)
    with OfficialServer(server_name, environment=expected.get("server")) as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # official servers do not confirm seeds
        env = gym.make("openenv/remote", base_url=server.url)
        adapter = env.unwrapped.adapter
        assert type(adapter) is expected["adapter"]
        if "spec" in expected:  # what the server says of the instance (its state) chose the spec
            assert adapter.spec.name == expected["spec"]
        if "action" in expected:
            assert env.action_space == expected["action"]
        env.action_space.seed(0)
        options = expected.get("reset_options")
        obs, info = env.reset(seed=0, options=options)
        assert env.observation_space.contains(obs)
        signature = info_signature(info)  # infos made to be stacked: the same keys and types throughout
        episodes, steps, started = 0, 0, time.perf_counter()
        limit = 50 if "episodes" in expected else None
        narrowed = 0  # steps whose mask ruled something out (a full column, a wall)
        # The Spec's mask from the server's legal_actions (the chess family reads its own FEN instead).
        spec_mask = expected["masked"] and expected["adapter"] is GenericAdapter
        wanted = expected.get("episodes_wanted", 20)
        while (episodes < wanted) if limit is None else (steps < limit):
            obs, reward, terminated, truncated, info = env.step(policy(env, obs, expected["masked"]))
            steps += 1
            assert env.observation_space.contains(obs) and np.isfinite(reward)
            assert info_signature(info) == signature, (steps, info)
            if spec_mask and not (terminated or truncated):
                # Guards the Spec's mask (mutation: a mask of all ones) on every step of whole games.
                np.testing.assert_array_equal(obs["action_mask"], mask_of_the_servers_list(env, info))
                if server_name == "connect4_env":  # the board agrees: a column is open while its top is
                    np.testing.assert_array_equal(obs["action_mask"], obs["board"][0] == 0)
                narrowed += int(not obs["action_mask"].all())
            if server_name == "echo_env":
                assert info["tool_error"] == "" and info["tool_result"] != ""
            if terminated or truncated:
                episodes += 1
                obs, info = env.reset(options=options)
                assert info_signature(info) == signature, ("reset", info)
        rate = steps / (time.perf_counter() - started)
        if spec_mask and expected.get("narrows", True):
            assert narrowed > 0, f"no step of {episodes} games ruled an action out: the mask went untested"

        try:
            check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)  # one session only
            checked = "passes"
        except AssertionError as exc:
            if "check_env" not in expected:
                raise
            assert "eterministic" in str(exc)  # the seed's replay differs: the server is not seeded
            checked = expected["check_env"]
        except openenv_lab.ServerError as exc:
            # check_env's random actions ignore the mask: against an unseeded opponent (tic-tac-toe's),
            # one of them may pick a cell the opponent's differing reply took, and the server refuses it.
            if "check_env" not in expected or not expected["masked"]:
                raise
            assert exc.code == "EXECUTION_ERROR", exc
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
        card = report_card(server.url, expected)

    record_row(
        name,
        {
            "adapter": type(adapter).__name__,
            "observation": str(env.observation_space),
            "action": str(env.action_space),
            "episodes": expected.get("episodes", f"{episodes} to their end"),
            "episodes_from": expected.get("episodes_from", "the server's reset"),
            "check_env": checked,
            "card": card,
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
        assert json.loads(info["tool_result"]) == {"message": "Hello", "length": 5}  # JSON text
        with pytest.raises(ValueError, match="There is no tool 'shout'"):
            env.unwrapped.tool_action("shout", message="hi")
        with pytest.raises(ValueError, match="echo_message: message: 3 is not of type 'string'"):
            env.unwrapped.tool_action("echo_message", message=3)
        env.close()


def test_wildfire_orders_reach_the_server_as_orders():
    """The wildfire spec's whole actions arrive as the orders they name: water on a cell spends one of
    the server's water drops and a firebreak one of its breaks, and a step's order reads back."""
    with OfficialServer("wildfire_env") as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=server.url, raw_info=True)
        adapter = env.unwrapped.adapter
        obs, _ = env.reset(seed=0)
        water = adapter.action_from_json({"action": "water", "x": 3, "y": 5})
        firebreak = adapter.action_from_json({"action": "break", "x": 4, "y": 5, "ignored": None})
        assert adapter.describe_action(water) == "{'action': 'water', 'x': 3, 'y': 5}"
        after, _, _, _, info = env.step(water)
        assert after["remaining_water"] == obs["remaining_water"] - 1
        assert after["remaining_breaks"] == obs["remaining_breaks"]
        assert info["raw_observation"]["remaining_water"] == after["remaining_water"]
        final, _, _, _, _ = env.step(firebreak)
        assert final["remaining_breaks"] == after["remaining_breaks"] - 1
        assert final["grid"][5 * 16 + 4] == 3  # the cell is a firebreak now (the grid's code 3)
        with pytest.raises(ValueError, match="is not one of this environment's 513 actions"):
            adapter.action_from_json({"action": "water", "x": 99, "y": 0})
        env.close()


def test_a_vector_env_reads_its_spec_from_its_own_sessions_state():
    """A vector env reads a `Spec.from_state` over the sessions it holds: dm_control's server has room
    for one session only, so asking another for its state would fail and leave the general spaces (a
    ``Sequence`` action no trainer takes); tic-tac-toe's two sessions each read their game."""
    with OfficialServer("dm_control_env", environment={"MUJOCO_GL": "disable"}) as server:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no "Could not read the state" fallback
            envs = gym.make_vec("openenv/remote", num_envs=1, base_url=server.url)
        assert envs.single_action_space == spaces.Box(-1.0, 1.0, (1,), np.float64)
        assert envs.unwrapped.adapters[0].spec.name == "dm_control/cartpole/balance"
        envs.reset(seed=0)
        obs, rewards, _, _, _ = envs.step(envs.action_space.sample())
        assert obs["observations"]["position"].shape == (1, 3) and rewards.shape == (1,)
        envs.close()
    with OfficialServer("openspiel_env", environment={"OPENSPIEL_GAME": "tic_tac_toe"}) as server:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            envs = gym.make_vec("openenv/remote", num_envs=2, base_url=server.url)
        assert envs.single_action_space == spaces.Discrete(9)
        assert [a.spec.name for a in envs.unwrapped.adapters] == ["openspiel/tic_tac_toe"] * 2
        envs.reset(seed=0)
        assert [mask.tolist() for mask in envs.call("action_masks")] == [[True] * 9] * 2  # an empty board
        envs.step(np.array([4, 4]))  # the centre, then the server's random opponent answers
        for mask in envs.call("action_masks"):
            assert not mask[4] and mask.sum() == 7
        envs.close()


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


def test_a_report_card_of_the_official_atari_env_checks_observations_without_the_screen():
    """The Atari adapter keeps the screen out of ``info["raw_observation"]`` (``raw_info=True``: it is the
    observation), and
    the official atari_env's /schema requires it: the card checks the observations without the fields
    the adapter leaves out (a mutation that dropped them failed the check here; our own Atari server's
    schema does not require the screen, so only an official server shows it)."""
    with OfficialServer("atari_env", environment={"ATARI_OBS_TYPE": "ram"}) as server:
        card = openenv_lab.check(
            "openenv/atari", base_url=server.url, validate=False, episodes=1, steps=5, max_episode_steps=5
        )
    assert card["observation schema"].status == "pass", card["observation schema"]
    assert card["observation schema"].detail == "6 observations match /schema"
