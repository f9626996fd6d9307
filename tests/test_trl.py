"""`openenv_lab.trl.environment_factory`: classes TRL takes as ``environment_factory``, generated from
real servers (ours, and the official MCP ``echo_env``), and a GRPO run of two steps on CPU with one.

TRL reads a tool's schema with ``transformers.utils.get_json_schema``: every generated tool must pass it,
and the official echo's must say what its MCP ``tools/list`` says.
"""

from __future__ import annotations

import inspect
import warnings

import polars as pl
import pytest
from transformers.utils import get_json_schema

import openenv_lab
from openenv_lab.client import CapacityError, Client
from openenv_lab.launch import EmbeddedServer
from openenv_lab.record import load_trajectory
from openenv_lab.trl import EpisodeOver, environment_factory
from tests.conformance import OfficialServer
from tests.helpers import script_chat_model, tiny_chat_model

SCHOLAR = "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4"  # f3f7 mates


def tools_of(cls: type) -> dict[str, dict]:
    """The tools TRL finds on ``cls`` (its public functions but reset and get_reward), as TRL's schemas."""
    found = {
        name: get_json_schema(member)["function"]
        for name, member in inspect.getmembers(cls, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }
    assert sorted(found) == sorted(cls.tool_names)
    return found


def test_chess_gets_a_move_tool_and_plays_a_game_as_text():
    Chess = environment_factory("openenv/chess", opponent="random", agent_color="white")
    schema = tools_of(Chess)["move"]
    assert schema["parameters"]["properties"]["move"]["type"] == "string"
    assert schema["parameters"]["required"] == ["move"] and "UCI" in schema["description"]
    game = Chess()
    try:
        first = game.reset(seed=0, prompt=[{"role": "user", "content": "play"}], extra="ignored")
        assert first.startswith("You play white.") and "Legal moves: " in first and "e2e4" in first
        after = game.move(move="e2e4")
        assert "Your opponent played" in after and "4P3" in after
        with pytest.raises(ValueError, match=r"'e2e5' is not a legal move here; the legal moves are: .*d2d4"):
            game.move(move="e2e5")
        with pytest.raises(
            ValueError, match=r"move\(move: str\): unknown \['square'\] and missing \['move'\]"
        ):
            game.move(square="e4")
        with pytest.raises(ValueError, match=r"move must be text, got 5"):
            game.move(move=5)
        transcript = game.transcript
        assert transcript["call"].to_list() == ["reset", "move", "move", "move", "move"]
        assert transcript["error"].is_null().to_list() == [True, True, False, False, False]  # refused
        assert game.trajectory.table.height == 2  # the reset and the one move the env took
        assert transcript["prompt"][0] is not None
    finally:
        game.close()


def test_a_dataset_row_picks_the_position_and_the_episode_end_is_told_to_the_model():
    Chess = environment_factory("openenv/chess", opponent="random")
    game = Chess()
    try:
        text = game.reset(fen=SCHOLAR, agent_color="white", seed=1)  # dataset columns the env takes
        assert SCHOLAR in text
        last = game.move(move="f3f7")
        assert "The game is over: checkmate" in last and "return 1" in last
        assert game.get_reward() == 1.0
        with pytest.raises(EpisodeOver, match="The episode is over"):
            game.move(move="a2a3")
        game.reset(fen=SCHOLAR, agent_color="white")  # the same session, a new episode
        assert game.get_reward() == 0.0
        assert game.trajectory.table["episode"].unique().to_list() == [0, 1]
    finally:
        game.close()


def test_a_text_env_gets_one_tool_named_from_its_action_schema():
    Echo = environment_factory("openenv/echo", max_steps=2)
    schema = tools_of(Echo)["echo"]
    assert schema["parameters"]["properties"]["message"]["type"] == "string"
    echo = Echo()
    try:
        assert echo.reset() == "echoed_message: \nmessage_length: 0"
        assert echo.echo(message="hey") == "echoed_message: hey\nmessage_length: 3"
        assert "The episode is over" in echo.echo(message="you")
        assert echo.get_reward() == pytest.approx(0.6)
    finally:
        echo.close()


@pytest.mark.slow
def test_the_official_mcp_echo_tools_match_its_tools_list():
    with OfficialServer("echo_env") as server, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # it does not confirm seeds
        Echo = environment_factory("openenv/remote", base_url=server.url)
        schemas = tools_of(Echo)
        with Client(server.url) as client:
            listed = client.mcp("tools/list")["tools"]
        assert sorted(schemas) == sorted(tool["name"] for tool in listed)
        for tool in listed:
            schema = schemas[tool["name"]]
            summary = tool["description"].split("Args:")[0]
            assert schema["description"] == " ".join(summary.split())  # its docstring's summary
            wanted = tool["inputSchema"]
            assert schema["parameters"]["required"] == wanted["required"]
            for arg in wanted["required"]:
                assert schema["parameters"]["properties"][arg]["type"] == wanted["properties"][arg]["type"]
        echo = Echo()
        try:
            assert echo.reset() == "Ready: call a tool."
            assert echo.echo_with_length(message="Hello") == 'result: {"message": "Hello", "length": 5}'
            with pytest.raises(ValueError, match="message must be text"):
                echo.echo_message(message=3)
        finally:
            echo.close()


def test_environments_without_text_are_refused_naming_what_is_missing():
    with pytest.raises(ValueError, match=r"AtariAdapter's actions \(Discrete\(6\)\) have no form"):
        environment_factory("openenv/atari", game="pong")
    with pytest.raises(ValueError, match=r"FinRLAdapter's actions .* have no form"):
        environment_factory("openenv/finrl")


@pytest.mark.slow
def test_sessions_are_checked_against_the_servers_room_up_front():
    with EmbeddedServer("chess", max_sessions=2) as server:
        with pytest.raises(CapacityError, match="room for 2 more sessions, 1 short of the 3 rollouts"):
            environment_factory("openenv/chess", base_url=server.base_url, sessions=3)
        assert environment_factory("openenv/chess", base_url=server.base_url, sessions=2)
    # The embedded server is started with room for every rollout.
    Echo = environment_factory("openenv/echo", sessions=300)
    games = [Echo() for _ in range(3)]
    for game in games:
        game.reset()
    for game in games:
        game.close()


@pytest.mark.slow
def test_a_server_that_goes_away_fails_the_rollout_not_the_run(caplog):
    server = EmbeddedServer("chess")
    url = server.start()
    Chess = environment_factory("openenv/chess", base_url=url, failed_reward=-1.0, agent_color="white")
    game = Chess()
    try:
        game.reset(seed=0)
        server.stop()
        with pytest.raises(EpisodeOver, match=r"The environment failed .*this rollout is over"):
            game.move(move="e2e4")
        assert game.get_reward() == -1.0
        assert "the environment failed" in caplog.text
        assert game.transcript["call"].to_list()[-1] == "failure"
        text = game.reset(seed=1)  # a new session is tried: the server is still gone, so this one fails too
        assert text.startswith("The environment failed") and game.get_reward() == -1.0
    finally:
        game.close()
        server.stop()


def test_each_instance_records_its_episodes_for_the_viewer(tmp_path):
    Chess = environment_factory("openenv/chess", opponent="random", record=tmp_path / "games")
    game = Chess()
    try:
        game.reset(fen=SCHOLAR, agent_color="white")
        game.move(move="f3f7")
    finally:
        game.close()
    saved = load_trajectory(tmp_path / "games" / f"{game.index}.parquet")
    assert saved.table["action_label"].to_list()[-1] == "f3f7 (Qxf7#)"
    transcript = pl.read_parquet(tmp_path / "games" / f"{game.index}.transcript.parquet")
    assert transcript["call"].to_list() == ["reset", "move"]
    assert openenv_lab.show(saved) is not None  # the LLM's game, move by move


@pytest.mark.slow
def test_grpo_trains_two_steps_on_cpu_with_a_generated_environment(tmp_path):
    """Guards the rollout's path from a model's tool call to its reward (mutations: the tool never
    reaching the server, every rollout scored as failed): a model scripted to call ``move`` plays its
    move in every rollout, and the rewards logged are the games', not the failure value."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    failed = -1.0
    Chess = environment_factory(
        "openenv/chess", opponent="random", agent_color="white", sessions=4, failed_reward=failed
    )
    ask = "Play a move with the move tool."
    probe = Chess()
    positions = [probe.reset(seed=i) for i in range(4)]  # what TRL appends to each row's prompt
    tokenizer, model = tiny_chat_model([*positions, ask], width=32, layers=1)
    call = '<tool_call>\n{"name": "move", "arguments": {"move": "e2e4"}}\n</tool_call>'
    chats = [[{"role": "user", "content": ask + position}] for position in positions]
    script_chat_model(tokenizer, model, chats, call, tools=[probe.move])
    probe.close()
    rows = [{"prompt": [{"role": "user", "content": ask}], "seed": i} for i in range(4)]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=48,  # the scripted tool call, the position that comes back, and more
        learning_rate=1e-3,
        logging_steps=1,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        seed=0,
    )
    curve = openenv_lab.RewardCurve(redraw_every=0)
    trainer = GRPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=Chess,
        callbacks=[curve.trl_callback()],
    )
    assert trainer.reward_func_names == ["ChessEnvironment"]  # the environment owns the reward
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logged) == 2
    assert curve.steps == [1, 2] and curve.returns == [entry["reward"] for entry in logged]  # drawn live
    assert all(entry["reward"] != failed for entry in logged)  # the games' scores, not the failure value
    for environment in trainer._environment_pool[None]:
        calls = environment.transcript["call"].to_list()
        assert calls.count("reset") >= 1 and "move" in calls, calls  # the model's tool call was played
        environment.close()


@pytest.mark.slow
def test_rollouts_are_spread_over_a_fleet_and_carry_its_token(monkeypatch):
    monkeypatch.delenv("OPENENV_LAB_TOKEN", raising=False)
    with openenv_lab.serve("echo", replicas=2, token="fleet-token") as fleet:
        Echo = environment_factory("openenv/remote", base_urls=fleet, sessions=4)
        echoes = [Echo() for _ in range(4)]
        try:
            for echo in echoes:
                echo.reset()
            assert [c["active_sessions"] for c in fleet.capacity()] == [2, 2]  # round-robin, token sent
        finally:
            for echo in echoes:
                echo.close()
        with pytest.raises(CapacityError, match="short of the 600 rollouts"):
            environment_factory("openenv/remote", base_urls=fleet.urls, sessions=600)
