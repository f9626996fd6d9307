"""Every number our servers take has a range, declared once beside its option; outside it, a reset, a
server start or a ``serve`` flag is refused at once, with an error that names the option, the value and
the range. The two reported cases (an Atari ``frameskip`` of 500 million that ran one step for 71 s on
the event loop, a preprocessing ``screen_size`` that asked for a 90 GB screen) come first."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import httpx
import pytest

import openenv_lab
from openenv_lab import cli
from openenv_lab.client import ServerError, Session
from openenv_lab.launch import shared_embedded_server
from openenv_lab.preprocessing import RANGES as PREPROCESSING_RANGES
from openenv_lab.preprocessing import SERVER_SETTINGS, Preprocessing
from openenv_lab.ranges import Range
from openenv_lab.servers import BUNDLED_SERVERS, SERVE_RANGES, ServeOptions

#: (server, reset body, the option the refusal must name, the range it must state)
REFUSED = [
    ("atari", {"frameskip": 500_000_000}, "frameskip", "a whole number from 1 to 100"),
    ("atari", {"frameskip": 1, "preprocessing": {"screen_size": 300_000}}, "screen_size", "from 1 to 512"),
    ("atari", {"frameskip": 1, "preprocessing": {"screen_size": [1, 30_000_000]}}, "screen_size", "512"),
    ("atari", {"frameskip": 1, "preprocessing": {"noop_max": 10**9}}, "noop_max", "from 0 to 1,000"),
    ("atari", {"frameskip": 1, "preprocessing": {"frame_skip": 10**6}}, "frame_skip", "from 1 to 100"),
    ("atari", {"max_num_frames_per_episode": 2**40}, "max_num_frames_per_episode", "2,147,483,647"),
    ("atari", {"repeat_action_probability": 1.5}, "repeat_action_probability", "a number from 0 to 1"),
    ("atari", {"mode": 10**12}, "mode", "pong has no mode 1000000000000; its modes are 0, 1"),
    ("atari", {"frameskip": 2.5}, "frameskip", "a whole number"),
    ("atari", {"seed": 2**70}, "seed", "from 0 to 18,446,744,073,709,551,615"),
    ("chess", {"max_moves": 10**12}, "max_moves", "from 1 to 100,000"),
    ("chess", {"opponent_depth": 10**6}, "opponent_depth", "from 1 to 30"),
    ("chess", {"gamma": 2}, "gamma", "a number from 0 to 1"),
    ("chess", {"split": "mate_in_1", "index": 10**12}, "index", "is outside mate_in_1 (0 to "),
    ("chess", {"agent_color": "green"}, "agent_color", "one of white, black, random"),
    ("finrl", {"seed": 2**65}, "seed", "from 0"),
    ("finrl", {"split": "future"}, "split", "one of train, trade, all"),
    ("finrl", {"random_start": "yes"}, "random_start", "true or false"),
    ("echo", {"seed": 2**64}, "seed", "from 0"),
]


@pytest.fixture(scope="module")
def servers() -> dict[str, str]:
    return {name: shared_embedded_server(name).start() for name in ("atari", "chess", "finrl", "echo")}


#: Numbers bounded otherwise than by a range, and by what.
BOUNDED_OTHERWISE = {
    ("chess", "index"): "the size of its split (chess_tasks.TaskSet.get_task)",
    ("atari", "mode"): "the game's own modes (ALE's getAvailableModes)",
    ("atari", "difficulty"): "the game's own difficulties (ALE's getAvailableDifficulties)",
}


def test_every_number_a_server_takes_has_a_range():
    for spec in BUNDLED_SERVERS.values():
        for option in (*spec.options, *spec.reset_options):
            if option.type in (int, float) and (spec.name, option.name) not in BOUNDED_OTHERWISE:
                assert option.range is not None, f"{spec.name}'s {option.name} has no range"
            assert option.default is None or option.check(option.default) is None  # defaults fit
    assert {"noop_max", "frame_skip", "screen_size"} <= set(PREPROCESSING_RANGES) <= set(SERVER_SETTINGS)
    numeric = {
        f.name for f in dataclasses.fields(ServeOptions) if f.name not in ("log_level", "inline_steps")
    }
    assert numeric | {"max_sessions"} == set(SERVE_RANGES)
    for field in dataclasses.fields(ServeOptions):
        if field.name in SERVE_RANGES and field.default is not None:
            assert SERVE_RANGES[field.name].contains(field.default), field.name
    defaults = Preprocessing()
    assert all(
        PREPROCESSING_RANGES[name].contains(getattr(defaults, name)) for name in ("noop_max", "frame_skip")
    )


def test_a_range_holds_numbers_of_its_kind_only():
    whole, real = Range(1, 100), Range(0, 1, integer=False)
    assert whole.contains(1) and whole.contains(100) and not whole.contains(0) and not whole.contains(101)
    assert not whole.contains(2.0) and not whole.contains(True) and not whole.contains("3")
    assert real.contains(0) and real.contains(0.5) and real.contains(1)
    for bad in (math.nan, math.inf, -math.inf, False, None, [0.5]):
        assert not real.contains(bad), bad
    with pytest.raises(ValueError, match=r"^gamma must be a number from 0 to 1, got nan$"):
        real.check("gamma", math.nan)
    with pytest.raises(ValueError, match="low end"):
        Range(2, 1)


@pytest.mark.parametrize(
    ("server", "body", "option", "allowed"), REFUSED, ids=[f"{c[0]}-{c[2]}" for c in REFUSED]
)
def test_a_reset_outside_a_range_is_a_400_that_names_the_option_and_its_range(
    servers, server, body, option, allowed
):
    url = servers[server]
    response = httpx.post(url + "/reset", json=body, timeout=30)
    assert response.status_code == 400, (response.status_code, response.text[:300])
    detail = response.json()["detail"]
    assert option in detail and allowed in detail, detail
    assert httpx.get(url + "/health", timeout=10).json()["status"] == "healthy"


def test_over_websocket_the_refusal_is_an_error_message_and_the_session_goes_on(servers):
    with Session(servers["atari"]) as session:
        with pytest.raises(
            ServerError, match=r"frameskip must be a whole number from 1 to 100, got 500000000"
        ):
            session.reset(frameskip=500_000_000)
        assert session.reset(frameskip=4, obs_type="ram").observation is not None  # the session is usable


def test_gym_make_with_an_option_out_of_range_fails_at_once_with_the_servers_words(servers):
    with pytest.raises(
        openenv_lab.ServerError, match="frameskip must be a whole number from 1 to 100"
    ) as refused:
        gym.make("openenv/atari", base_url=servers["atari"], obs_type="ram", frameskip=500_000_000)
    assert "No environment was made" in str(refused.value)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["serve", "atari", "--frameskip", "500000000"], "expected a whole number from 1 to 100"),
        (["serve", "chess", "--gamma", "nan"], "expected a number from 0 to 1"),
        (["serve", "finrl", "--hmax", "0"], "expected a whole number from 1 to 1,000,000,000"),
        (["serve", "echo", "--max-steps", "-3"], "expected a whole number from 1"),
        (["serve", "echo", "--max-batch", "100000"], "expected a whole number from 1 to 10,000"),
        (["serve", "echo", "--max-message-bytes", "10"], "expected a whole number from 1,024"),
        (["serve", "echo", "--ping-interval", "0"], "expected a number from 0.01"),
        (["serve", "echo", "--idle-timeout", "inf"], "expected a number from 0.01 to 10,000,000 (or 0)"),
    ],
)
def test_a_serve_flag_outside_its_range_stops_the_command_at_once(capsys, argv, words):
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2
    assert words in capsys.readouterr().err


def test_a_server_refuses_constructor_arguments_outside_their_ranges():
    """What the command line refuses, a server built from Python refuses too (the same declarations)."""
    with pytest.raises(ValueError, match="hmax must be a whole number from 1"):
        BUNDLED_SERVERS["finrl"].make_app(hmax=0)
    with pytest.raises(ValueError, match="max_steps must be a whole number from 1"):
        BUNDLED_SERVERS["echo"].make_app(max_steps=0)
    with pytest.raises(ValueError, match="max_batch must be a whole number from 1 to 10,000"):
        ServeOptions(max_batch=10**9)
