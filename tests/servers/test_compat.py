"""Our chess server on the wire, judged by the official ``openenv`` package: its client and its validator."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from openenv_lab.client import Client, Keepalive, Session
from openenv_lab.launch import EmbeddedServer
from openenv_lab.servers import import_openenv_server

OFFICIAL_CHESS_FIELDS = {
    "action": {"move", "metadata"},
    "observation": {"fen", "legal_moves", "is_check", "result", "done", "reward", "metadata"},
}


def test_official_generic_client_plays_a_full_game(chess_url):
    import_openenv_server()
    from openenv.core import GenericEnvClient

    rng = random.Random(0)
    with GenericEnvClient(base_url=chess_url).sync() as client:
        result = client.reset(seed=4, agent_color="black")
        assert result.observation["fen"].split()[1] == "b"
        steps = 0
        while not result.done:
            result = client.step({"move": rng.choice(result.observation["legal_moves"])})
            steps += 1
        assert result.observation["result"] in {"1-0", "0-1", "1/2-1/2"}
        assert result.reward in {-1.0, 0.0, 1.0}
        state = client.state()
        assert state["step_count"] == len(state["move_history"]) >= steps  # half-moves, as the official


def test_schema_uses_the_official_field_names(chess_url):
    with Client(chess_url) as client:
        schema = client.schema()
    for model, fields in OFFICIAL_CHESS_FIELDS.items():
        assert set(schema[model]["properties"]) == fields
    assert schema["action"]["required"] == ["move"]
    assert {"fen", "move_history", "current_player"} <= set(schema["state"]["properties"])


def test_wire_frames_match_the_official_envelope(chess_url):
    with Session(chess_url) as session:
        first = session.reset(seed=0, agent_color="white")
        assert set(first.observation) == {"fen", "legal_moves", "is_check", "result"}
        assert first.metadata["seed"] == 0


def test_capacity_route_counts_sessions(chess_url):
    with Client(chess_url) as client:
        before = client.capacity()
        assert before["max_sessions"] == 64
        with Session(chess_url):
            assert client.capacity()["active_sessions"] == before["active_sessions"] + 1


def test_several_sessions_play_at_once(chess_url):
    sessions = [Session(chess_url) for _ in range(8)]
    try:
        fens = [s.reset(seed=i, agent_color="white").observation["fen"] for i, s in enumerate(sessions)]
        assert len(set(fens)) == 1
        replies = [s.step({"move": "e2e4"}).metadata["opponent_move"] for s in sessions]
        assert len(set(replies)) > 1  # independent, differently seeded opponents
    finally:
        for session in sessions:
            session.close()


def test_an_idle_session_is_kept_alive_by_pings(chess_url):
    # The server answers pings (uvicorn's sans-I/O WebSocket protocol, see servers/_run.py): a session
    # whose pings went unanswered would be closed by the client after 0.3 s.
    import time

    with Session(chess_url, keepalive=Keepalive(interval=0.1, timeout=0.3)) as session:
        session.reset(seed=0, agent_color="white")
        time.sleep(1.0)
        assert session.step({"move": "e2e4"}).metadata["opponent_move"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("server", "options"),
    [("chess", {}), ("atari", {}), ("finrl", {}), ("echo", {}), ("echo", {"mcp": True})],
)
def test_openenv_validate_passes_on_every_server_we_ship_under_the_1x_profile(server, options):
    """openenv's own runtime validation, unmodified, on each of our servers (and the MCP echo)."""
    with EmbeddedServer(server, **options) as running:
        completed = subprocess.run(
            [sys.executable, "-m", "openenv.cli", "validate", "--url", running.base_url, "--json"],
            capture_output=True,
            text=True,
            timeout=180,
        )
    report = json.loads(completed.stdout[completed.stdout.index("{") :])
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert report["passed"] and completed.returncode == 0, f"openenv validate failed: {failed}"
    assert report["standard_profile"] == "openenv-http/1.x"  # our OpenAPI states the HTTP API it implements


@pytest.fixture(scope="module")
def atari_url():
    from openenv_lab.launch import EmbeddedServer

    with EmbeddedServer("atari") as server:
        yield server.base_url


@pytest.mark.slow
def test_official_generic_client_plays_atari_with_json_frames(atari_url):
    import_openenv_server()
    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url=atari_url).sync() as client:
        result = client.reset()  # no options: the official client's defaults
        observation = result.observation
        assert observation["screen_shape"] == [210, 160, 3]
        assert len(observation["screen"]) == 210 * 160 * 3  # the official JSON list by default
        assert observation["legal_actions"] == [0, 1, 2, 3, 4, 5]
        for action_id in (0, 1, 2):
            result = client.step(
                {"action_id": action_id, "game_name": "pong", "obs_type": "rgb", "full_action_space": False}
            )
        assert result.done is False and result.reward == 0.0
        assert client.state()["step_count"] == 3


def test_atari_schema_keeps_the_official_fields(atari_url):
    with Client(atari_url) as client:
        schema = client.schema()
    assert {"action_id", "game_name", "obs_type", "full_action_space"} <= set(schema["action"]["properties"])
    assert {
        "screen",
        "screen_shape",
        "legal_actions",
        "lives",
        "episode_frame_number",
        "frame_number",
    } <= set(schema["observation"]["properties"])


@pytest.fixture(scope="module")
def finrl_url():
    from openenv_lab.launch import EmbeddedServer

    with EmbeddedServer("finrl") as server:
        yield server.base_url


@pytest.mark.slow
def test_official_generic_client_trades_on_our_finrl_server(finrl_url):
    import_openenv_server()
    from openenv.core import GenericEnvClient

    with Client(finrl_url) as http:
        config = http.get("/config")
    assert {"stock_dim", "initial_amount", "action_space", "state_space", "tech_indicators"} <= set(config)
    with GenericEnvClient(base_url=finrl_url).sync() as client:
        result = client.reset()
        assert len(result.observation["state"]) == config["state_space"]
        result = client.step({"actions": [0.5] * config["stock_dim"]})
        observation = result.observation
        assert set(observation) >= {"state", "portfolio_value", "date"}
        assert observation["state"][1 + config["stock_dim"]] == 50  # 0.5 * hmax shares of the first ticker
        assert result.done is False
