"""``gym.make("openenv/atari")``: screens, seeds and wrappers exactly as ``ALE/Pong-v5`` gives them."""

from __future__ import annotations

import ale_py
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

import openenv_lab
from openenv_lab.client import Session
from tests.helpers import check_env_warnings

gym.register_envs(ale_py)


@pytest.fixture(scope="module")
def pong():
    env = gym.make("openenv/atari", game="pong")
    yield env
    env.close()


@pytest.mark.slow
def test_spaces_and_info(pong):
    assert pong.observation_space == gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    assert pong.action_space == gym.spaces.Discrete(6)
    obs, info = pong.reset(seed=0)
    assert obs in pong.observation_space
    # ALE's keys, and only what stacks: no raw JSON unless asked (raw_info=True), no screen in it then
    assert list(info) == [
        "seed",
        "reward_missing",
        "lives",
        "episode_frame_number",
        "frame_number",
        "end_reason",
    ]
    assert info["end_reason"] == "" and info["seed"] == 0
    raw = gym.make("openenv/atari", game="pong", raw_info=True)
    _, info = raw.reset(seed=0)
    assert "screen" not in info["raw_observation"] and "screen_b64" not in info["raw_observation"]
    assert info["raw_observation"]["lives"] == info["lives"]
    raw.close()
    assert pong.unwrapped.get_action_meanings() == ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]


@pytest.mark.parametrize("sticky", [0.0, 0.25])
def test_same_seed_and_actions_give_ales_own_screens(sticky):
    ours = gym.make("openenv/atari", game="pong", repeat_action_probability=sticky)
    ale = gym.make("ALE/Pong-v5", repeat_action_probability=sticky)
    obs_ours, _ = ours.reset(seed=7)
    obs_ale, _ = ale.reset(seed=7)
    np.testing.assert_array_equal(obs_ours, obs_ale)
    rng = np.random.default_rng(0)
    for _ in range(150):
        action = int(rng.integers(6))
        a = ours.step(action)
        b = ale.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
    ours.close()
    ale.close()


def test_preprocessing_and_frame_stacking_match_ale():
    def wrapped(env_id: str, **kwargs) -> gym.Env:
        env = gym.make(env_id, frameskip=1, repeat_action_probability=0.25, **kwargs)
        return FrameStackObservation(AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84), 4)

    ours = wrapped("openenv/atari", game="pong")
    ale = wrapped("ALE/Pong-v5")
    obs_ours, _ = ours.reset(seed=3)
    obs_ale, _ = ale.reset(seed=3)
    assert obs_ours.shape == obs_ale.shape == (4, 84, 84)
    np.testing.assert_array_equal(obs_ours, obs_ale)
    for step in range(60):
        action = step % 6
        a = ours.step(action)
        b = ale.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
    ours.close()
    ale.close()


def test_screen_proxy_matches_ale_grayscale_and_ram():
    ours = gym.make("openenv/atari", game="breakout")
    ale = gym.make("ALE/Breakout-v5", repeat_action_probability=0.0)
    ours.reset(seed=1)
    ale.reset(seed=1)
    for step in range(30):
        ours.step(step % 4)
        ale.step(step % 4)
    np.testing.assert_array_equal(
        ours.unwrapped.ale.getScreenGrayscale(), ale.unwrapped.ale.getScreenGrayscale()
    )
    buffer = np.empty((210, 160, 3), np.uint8)
    ours.unwrapped.ale.getScreenRGB(buffer)
    np.testing.assert_array_equal(buffer, ale.unwrapped.ale.getScreenRGB())
    assert ours.unwrapped.ale.lives() == ale.unwrapped.ale.lives() > 0
    ours.close()
    ale.close()


@pytest.mark.parametrize(("obs_type", "shape"), [("grayscale", (210, 160)), ("ram", (128,))])
def test_other_observation_types(obs_type, shape):
    env = gym.make("openenv/atari", game="pong", obs_type=obs_type)
    reference = gym.make("ALE/Pong-v5", obs_type=obs_type, repeat_action_probability=0.0)
    assert env.observation_space.shape == shape
    obs, _ = env.reset(seed=0)
    expected, _ = reference.reset(seed=0)
    for _ in range(5):
        obs = env.step(2)[0]
        expected = reference.step(2)[0]
    np.testing.assert_array_equal(obs, expected)
    env.close()
    reference.close()


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["delta", "zlib", "raw"])
def test_every_screen_encoding_decodes_to_the_same_screens(encoding):
    plain = gym.make("openenv/atari", game="pong", screen_encoding="json", max_num_frames_per_episode=120)
    other = gym.make("openenv/atari", game="pong", screen_encoding=encoding, max_num_frames_per_episode=120)
    np.testing.assert_array_equal(plain.reset(seed=2)[0], other.reset(seed=2)[0])
    for step in range(45):  # the frame limit ends an episode after 30 steps: a reset in the middle
        a, b = plain.step(step % 6), other.step(step % 6)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
        if a[2] or a[3]:
            np.testing.assert_array_equal(plain.reset()[0], other.reset()[0])
    plain.close()
    other.close()


def test_screens_travel_as_deltas_by_default():
    pong = gym.make("openenv/atari", game="pong", raw_info=True)  # the wire's own fields
    _, info = pong.reset(seed=0)
    assert info["raw_observation"]["screen_encoding"] == "zlib"  # a new episode starts whole
    pong.step(0)  # Pong's first step draws the court: a whole screen
    for action in range(6):
        number = pong.step(action)[4]["frame_number"]
        _, _, _, _, info = pong.step(action)
        raw = info["raw_observation"]
        assert (raw["screen_encoding"], raw["screen_base"]) == ("delta", number)
    pong.close()


def test_a_delta_out_of_step_is_a_clear_error():
    env = gym.make("openenv/atari", game="pong")
    env.reset(seed=0)
    env.step(0)  # a whole screen (Pong draws its court)
    env.unwrapped.adapter._frame_number = -1  # as if a frame had been lost
    with pytest.raises(openenv_lab.ProtocolError, match=r"out of step\. Reset the env"):
        env.step(0)
    env.close()


def test_an_unknown_screen_encoding_fails_at_make():
    with pytest.raises(ValueError, match="screen_encoding must be one of auto, delta, zlib, raw, json"):
        gym.make("openenv/atari", game="pong", screen_encoding="png")


def test_compact_screens_are_small_on_the_wire(pong):
    pong.reset(seed=0)
    session: Session = pong.unwrapped.session
    before = session.bytes_received
    for _ in range(10):
        pong.step(0)
    assert (session.bytes_received - before) / 10 < 5_000  # JSON lists are ~450 KB per Pong screen


def test_frame_limit_truncates_and_game_over_terminates():
    env = gym.make("openenv/atari", game="pong", max_num_frames_per_episode=40)
    env.reset(seed=0)
    steps = 0
    while True:
        _, _, terminated, truncated, info = env.step(0)
        steps += 1
        if terminated or truncated:
            break
    assert (terminated, truncated, info["end_reason"], steps) == (False, True, "frame_limit", 10)
    env.close()


@pytest.mark.slow
def test_a_whole_game_of_pong_terminates(pong):
    pong.reset(seed=0)
    total, terminated, truncated = 0.0, False, False
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = pong.step(0)
        total += reward
    assert terminated and info["end_reason"] == "game_over"
    assert total == -21.0  # standing still loses every point


def test_check_env_passes():
    env = gym.make("openenv/atari", game="pong")
    assert check_env_warnings(env.unwrapped, skip_render_check=False) == []
    env.close()


def test_render_returns_the_screen():
    env = gym.make("openenv/atari", game="pong", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(env.render(), obs)
    env.close()


def test_unknown_game_fails_at_make_listing_the_games():
    with pytest.raises(
        openenv_lab.ServerError, match=r"Unknown game 'pongg'\. Did you mean 'pong'\? Available games: .*pong"
    ) as raised:
        gym.make("openenv/atari", game="pongg")
    said = str(raised.value)
    assert "failed its first reset, sent with {'game': 'pongg'" in said
    assert "check those options against the server's" in said and "No environment was made" in said


@pytest.mark.parametrize("name", ["ALE/Pong-v5", "Pong", "PongNoFrameskip-v4"])
def test_games_named_as_gymnasium_names_them(name):
    env = gym.make("openenv/atari", game=name)
    assert env.unwrapped.adapter.settings["game"] == "pong"
    env.close()


def test_a_mode_the_game_lacks_is_named_with_the_ones_it_has():
    with pytest.raises(openenv_lab.ServerError, match=r"pong has no mode 999; its modes are 0, 1"):
        gym.make("openenv/atari", game="pong", mode=999)


def test_action_out_of_range_is_refused_before_sending(pong):
    pong.reset(seed=0)
    sent = pong.unwrapped.session.bytes_sent
    with pytest.raises(ValueError, match="not in the action space"):
        pong.step(6)
    assert pong.unwrapped.session.bytes_sent == sent


def test_unseeded_resets_continue_the_emulators_stream():
    env = gym.make("openenv/atari", game="pong", repeat_action_probability=0.25)

    def run() -> list[float]:
        env.reset(seed=5)
        frames = []
        for _ in range(2):
            _, info = env.reset()
            assert info["seed"] == -1  # the episode sent no seed of its own
            frames.append(float(sum(env.step(i % 6)[0].sum() for i in range(40))))
        return frames

    assert run() == run()
    env.close()
