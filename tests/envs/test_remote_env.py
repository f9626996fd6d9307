"""``gym.make("openenv/remote", base_url=...)``: spaces inferred from /schema and the first observation."""

from __future__ import annotations

import json
import signal
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import openenv_lab  # noqa: F401
from openenv_lab.adapters.generic import UnicodeText
from openenv_lab.client import SessionClosed
from tests.conftest import HANG


@pytest.fixture
def kitchen(framework_kitchen):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the test server does not confirm seeds
        env = gym.make("openenv/remote", base_url=framework_kitchen)
    yield env
    env.close()


@pytest.mark.slow
def test_observation_space_is_inferred_field_by_field(kitchen):
    space = kitchen.observation_space
    assert isinstance(space, spaces.Dict)
    assert space["position"] == spaces.Box(-np.inf, np.inf, (3,), np.float64)
    assert space["grid"].shape == (2, 2) and space["grid"].dtype == np.int64
    assert space["flags"] == spaces.MultiBinary([2])
    assert isinstance(space["label"], UnicodeText)
    assert space["count"] == spaces.Discrete(10)
    assert space["temperature"] == spaces.Box(-np.inf, np.inf, (), np.float64)
    assert isinstance(space["inventory"], UnicodeText)  # free-form object: JSON text
    assert isinstance(space["history"], spaces.Sequence)
    assert isinstance(space["result"], UnicodeText)  # optional string
    assert set(space["nested"].spaces) == {"speed", "label"}
    assert space["mode"] == spaces.Discrete(2)
    assert space["alive"] == spaces.Discrete(2)
    assert set(space.spaces).isdisjoint({"reward", "done", "metadata"})


def test_action_space_keeps_required_fields_only(kitchen):
    space = kitchen.action_space
    assert set(space.spaces) == {"direction", "strength"}  # `note` has a default: left to the server
    assert space["direction"] == spaces.Discrete(3)
    assert space["strength"] == spaces.Box(0.0, 1.0, (), np.float64)


def test_an_episode_decodes_into_the_spaces(kitchen):
    obs, info = kitchen.reset(seed=0)
    assert obs in kitchen.observation_space
    assert info["reward_missing"] is True  # the server sends reward=null on reset
    assert obs["result"] == ""  # null (which the schema allows) becomes the empty value, in both
    assert info["result"] == "" and info["seed"] == 0
    steps = 0
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = kitchen.step({"direction": 1, "strength": np.array(0.5)})
        steps += 1
        assert obs in kitchen.observation_space
        assert isinstance(reward, float)
    assert steps == 5 and terminated and not truncated
    assert reward == 1.0  # a bool `true` on the wire
    assert json.loads(obs["inventory"]) == {"apples": 5}
    assert obs["label"].endswith("♞")
    assert obs["mode"] == 1  # index of "moving"


def test_counter_gets_a_scalar_action(framework_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=framework_counter, raw_info=True)
        assert env.action_space == spaces.Box(-1_000_000, 1_000_000, (), np.int64)
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step(np.array(10))
    assert int(obs["value"]) == 10 and terminated and reward == 1.0
    assert info["metadata"] == {"step": 1} and info["raw_observation"]["value"] == 10  # as it came
    env.close()


def test_check_env_passes_on_a_generic_server(framework_kitchen):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=framework_kitchen, disable_env_checker=True)
    env.unwrapped.spec.nondeterministic = True  # this server ignores seeds
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_ansi_render_shows_the_raw_observation(framework_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=framework_counter, render_mode="ansi")
        env.reset(seed=0)
    assert json.loads(env.render()) == {"target": 10, "value": 0}
    env.close()


def test_remote_needs_a_url():
    with pytest.raises(ValueError, match="base_url"):
        gym.make("openenv/remote")


def test_seed_warning_names_the_server_once(framework_counter):
    from openenv_lab.envs import _episode as env_module

    env_module._SEED_UNCONFIRMED.discard(framework_counter)
    env = gym.make("openenv/remote", base_url=framework_counter)
    with pytest.warns(UserWarning, match=framework_counter):
        env.reset(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.reset(seed=2)
    env.close()


def test_a_refused_action_says_what_is_wrong_with_it(framework_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=framework_counter)
        env.reset(seed=0)
    with pytest.raises(ValueError, match=r"its shape is \(3,\), the space's \(\)"):
        env.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(
        ValueError, match=r"its dtype is float64; pass np\.asarray\(action, dtype=np\.int64\)"
    ):
        env.step(np.array(1.5))
    with (
        pytest.raises(ValueError, match=r"\.\.\. \(2002 characters\) is not in the action space"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", UserWarning)  # gymnasium's own note on casting the text
        env.step("x" * 2000)  # a huge action is not copied whole into the message
    env.close()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM")
def test_an_interrupted_step_asks_for_a_reset_and_the_reset_works(hanging_counter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env = gym.make("openenv/remote", base_url=hanging_counter)
    env.reset(seed=0)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)  # Ctrl+C in a notebook while the step runs
    try:
        with pytest.raises(KeyboardInterrupt):
            env.step(np.array(HANG))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    with pytest.raises(SessionClosed, match=r"call reset\(\)"):
        env.step(np.array(1))
    env.reset(seed=0)  # a new session, and a new episode in it
    assert int(env.step(np.array(2))[0]["value"]) == 2
    env.close()


def test_a_server_whose_first_reset_fails_says_so_not_that_options_were_refused(framework_numpy):
    """No options were sent: the message says the server failed its first reset (in the server's own
    words) and not that options were refused, and nothing is left open (the server takes two sessions)."""
    from openenv_lab import ServerError

    for _ in range(3):  # more than the server's two sessions: each attempt closed its session
        with pytest.raises(ServerError, match="failed its first reset") as raised:
            gym.make("openenv/remote", base_url=framework_numpy)
        assert "numpy.int64" in str(raised.value) and "No environment was made" in str(raised.value)
        assert "no options were sent: the server cannot start an episode" in str(raised.value)
