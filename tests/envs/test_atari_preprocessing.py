"""Atari preprocessing computed by the server (``preprocessing=``, ``frame_stack=``): the observations,
rewards and endings of gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation`` over ALE, on the
same seeds and actions, for single and vector envs."""

from __future__ import annotations

import ale_py
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import SyncVectorEnv
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

import openenv_lab  # noqa: F401  (registers the ids)

gym.register_envs(ale_py)

CASES = {
    "pong, defaults": ("pong", "ALE/Pong-v5", 0.25, {}, 4),
    "breakout, a life is an episode": (
        "breakout",
        "ALE/Breakout-v5",
        0.25,
        {"terminal_on_life_loss": True},
        4,
    ),
    "space invaders, RGB 3-skip 96x72 scaled": (
        "space_invaders",
        "ALE/SpaceInvaders-v5",
        0.0,
        {"frame_skip": 3, "screen_size": (96, 72), "grayscale_obs": False, "scale_obs": True, "noop_max": 8},
        2,
    ),
    "breakout, newaxis, no stack, no no-ops": (
        "breakout",
        "ALE/Breakout-v5",
        0.0,
        {"grayscale_newaxis": True, "noop_max": 0},
        None,
    ),
}


def reference(ale_id: str, sticky: float, settings: dict, stack: int | None) -> gym.Env:
    env = AtariPreprocessing(gym.make(ale_id, frameskip=1, repeat_action_probability=sticky), **settings)
    return FrameStackObservation(env, stack) if stack else env


def ours(game: str, sticky: float, settings: dict, stack: int | None, **options) -> gym.Env:
    return gym.make(
        "openenv/atari",
        game=game,
        repeat_action_probability=sticky,
        preprocessing=settings or True,
        frame_stack=stack,
        **options,
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_the_servers_preprocessing_matches_gymnasiums_wrappers(case):
    game, ale_id, sticky, settings, stack = CASES[case]
    a, b = ours(game, sticky, settings, stack), reference(ale_id, sticky, settings, stack)
    assert a.observation_space == b.observation_space
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    assert data_equivalence(obs_a, obs_b)
    rng = np.random.default_rng(0)
    endings = 0
    for _ in range(300):
        action = int(rng.integers(a.action_space.n))
        step_a, step_b = a.step(action), b.step(action)
        for x, y in zip(step_a[:4], step_b[:4], strict=True):
            assert data_equivalence(x, y)
        if step_a[2] or step_a[3]:
            endings += 1
            obs_a, _ = a.reset()
            obs_b, _ = b.reset()
            assert data_equivalence(obs_a, obs_b)
    if settings.get("terminal_on_life_loss"):
        assert endings >= 1  # the lost lives ended episodes on both sides
    a.close()
    b.close()


@pytest.mark.slow
def test_a_vector_env_preprocesses_on_the_server_too():
    game, ale_id, sticky, settings, stack = CASES["breakout, a life is an episode"]
    envs = gym.make_vec(
        "openenv/atari",
        num_envs=3,
        game=game,
        repeat_action_probability=sticky,
        preprocessing=settings,
        frame_stack=stack,
    )
    expected = SyncVectorEnv([lambda: reference(ale_id, sticky, settings, stack) for _ in range(3)])
    assert envs.single_observation_space == expected.single_observation_space
    obs_a, _ = envs.reset(seed=3)
    obs_b, _ = expected.reset(seed=3)
    assert data_equivalence(obs_a, obs_b)
    rng = np.random.default_rng(1)
    for _ in range(150):
        actions = rng.integers(envs.single_action_space.n, size=3)
        step_a, step_b = envs.step(actions), expected.step(actions)
        for x, y in zip(step_a[:4], step_b[:4], strict=True):
            assert data_equivalence(x, y)
    envs.close()
    expected.close()


def test_a_preprocessed_step_carries_a_few_kilobytes():
    env = ours("pong", 0.0, {}, 4)
    env.reset(seed=0)
    session = env.unwrapped.session
    before = session.bytes_received
    for _ in range(20):
        env.step(0)
    assert (session.bytes_received - before) / 20 < 4_000  # an 84x84 screen, zlib: not 210x160x3
    env.close()


def test_clipped_rewards_keep_the_unclipped_one_in_info():
    env = ours("pong", 0.0, {}, None, clip_reward=True)
    env.reset(seed=0)
    seen = set()
    for _ in range(400):
        _, reward, terminated, truncated, info = env.step(0)
        seen.add(reward)
        assert reward == float(np.sign(info["unclipped_reward"]))
        if terminated or truncated:
            break
    assert seen <= {-1.0, 0.0, 1.0} and -1.0 in seen  # the opponent scores against NOOP
    env.close()


def test_preprocessing_options_are_checked_before_a_server_is_asked():
    with pytest.raises(ValueError, match="frameskip"):
        gym.make("openenv/atari", preprocessing=True, frameskip=4)
    with pytest.raises(ValueError, match="Unknown preprocessing setting"):
        gym.make("openenv/atari", preprocessing={"screensize": 84})
    with pytest.raises(ValueError, match="frame_stack must be a positive integer"):
        gym.make("openenv/atari", preprocessing=True, frame_stack=0)


def test_the_full_screen_is_not_there_to_read_when_the_server_preprocesses():
    env = ours("pong", 0.0, {}, 4)
    env.reset(seed=0)
    assert env.unwrapped.ale.lives() == 0  # Pong keeps no lives; the count still comes through
    with pytest.raises(ValueError, match="preprocesses"):
        env.unwrapped.ale.getScreenRGB()
    frame = env.render() if env.render_mode else None
    assert frame is None
    env.close()


def test_gymnasiums_vector_wrappers_apply_on_top():
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    envs = RecordEpisodeStatistics(
        gym.make_vec("openenv/atari", num_envs=2, preprocessing=True, frame_stack=4)
    )
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 4, 84, 84)
    obs, *_ = envs.step(np.zeros(2, dtype=np.int64))
    assert obs.shape == (2, 4, 84, 84) and envs.episode_count == 0
    envs.close()
