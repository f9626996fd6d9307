"""Gymnasium's own environments served over OpenEnv (``openenv-lab serve gymnasium``), held against the
same environments played in-process: equal spaces, the same episodes from the same seeds, gymnasium's
``check_env``, its vector envs and ours, and a schema an OpenEnv client that knows nothing of gymnasium
reads into the same spaces.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import openenv_lab  # noqa: F401 - registers openenv/gymnasium
from openenv_lab.client import Client, EnvironmentMismatch, ServerError, Session
from openenv_lab.launch import EmbeddedServer
from openenv_lab.space_json import space_from_json, space_to_json, value_from_json, value_to_json

#: Discrete and Box, a Tuple observation, continuous actions, a world that learns in seconds.
IDS = ["FrozenLake-v1", "CliffWalking-v1", "CartPole-v1", "MountainCarContinuous-v0", "Blackjack-v1"]


def same(ours, theirs) -> bool:
    """Equal values of the same kind (integers stay integers, floats floats), in tuples too."""
    if isinstance(theirs, tuple):
        return isinstance(ours, tuple) and all(same(a, b) for a, b in zip(ours, theirs, strict=True))
    a, b = np.asarray(ours), np.asarray(theirs)
    return a.shape == b.shape and a.dtype.kind == b.dtype.kind and np.array_equal(a, b)


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_and_episodes_are_those_of_the_environment_in_process(env_id):
    ours, theirs = gym.make("openenv/gymnasium", env_id=env_id), gym.make(env_id)
    try:
        assert ours.observation_space == theirs.observation_space
        assert ours.action_space == theirs.action_space
        for seed in (0, 7):
            first, _ = ours.reset(seed=seed)
            expected, _ = theirs.reset(seed=seed)
            assert same(first, expected)
            theirs.action_space.seed(seed)
            for _ in range(300):  # at most: long episodes are compared over their first 300 steps
                action = theirs.action_space.sample()
                got, want = ours.step(action), theirs.step(action)
                assert same(got[0], want[0]), (got[0], want[0])
                assert got[1:4] == want[1:4]
                if want[2] or want[3]:
                    break
    finally:
        ours.close()
        theirs.close()


def test_truncation_is_the_environments_own():
    env = gym.make("openenv/gymnasium", env_id="CartPole-v1", max_episode_steps=5)
    try:
        env.reset(seed=0)  # from this start, pushing left keeps the pole up for more than 5 steps
        endings = [env.step(0)[2:4] for _ in range(5)]
        assert endings == [(False, False)] * 4 + [(False, True)]
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "CartPole-v1", "Blackjack-v1"])
def test_gymnasiums_env_checker_passes(env_id):
    env = gym.make("openenv/gymnasium", env_id=env_id)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_vector_envs_ours_and_gymnasiums():
    ours = gym.make_vec("openenv/gymnasium", num_envs=3, env_id="CartPole-v1")
    theirs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3)
    try:
        a, _ = ours.reset(seed=3)
        b, _ = theirs.reset(seed=3)
        np.testing.assert_array_equal(a, b)
        for _ in range(60):  # through the automatic resets of both
            actions = np.array([0, 1, 1])
            got, want = ours.step(actions), theirs.step(actions)
            np.testing.assert_array_equal(got[0], want[0])
            for ours_part, theirs_part in zip(got[1:4], want[1:4], strict=True):
                np.testing.assert_array_equal(ours_part, theirs_part)
    finally:
        ours.close()
        theirs.close()


def test_the_schema_alone_gives_the_same_discrete_spaces_to_a_generic_client():
    """``openenv/remote`` knows nothing of gymnasium: it reads the server's /schema."""
    with EmbeddedServer("gymnasium", env_id="FrozenLake-v1") as server:
        url = server.start()
        env = gym.make("openenv/remote", base_url=url)
        try:
            assert env.action_space == gym.spaces.Discrete(4)
            assert env.observation_space["observation"] == gym.spaces.Discrete(16)
        finally:
            env.close()


def test_bad_actions_and_ids_get_clear_errors():
    with EmbeddedServer("gymnasium", env_id="FrozenLake-v1") as server:
        url = server.start()
        with Session(url) as session:
            with pytest.raises(ServerError, match="reset"):  # no episode yet
                session.step({"action": 1})
            session.reset(seed=0)
            with pytest.raises(ServerError, match=r"not in the action space Discrete\(4\)"):
                session.step({"action": 9})
            assert session.step({"action": 1}).observation["observation"] in range(16)  # still open
        with pytest.raises(EnvironmentMismatch, match="plays 'FrozenLake-v1', not 'CartPole-v1'"):
            gym.make("openenv/gymnasium", env_id="CartPole-v1", base_url=url)
        assert Client(url).get("/state")["env_id"] == "FrozenLake-v1"
        env = gym.make("openenv/gymnasium", env_id="FrozenLake-v1", base_url=url)  # the one it plays
        assert env.observation_space == gym.spaces.Discrete(16)
        env.close()
    with pytest.raises(Exception, match="gymnasium cannot make 'NoSuchWorld-v0'"):
        EmbeddedServer("gymnasium", env_id="NoSuchWorld-v0").start()


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_and_values_survive_json(env_id):
    env = gym.make(env_id)
    for space in (env.observation_space, env.action_space):
        assert space_from_json(space_to_json(space)) == space
        space.seed(0)
        for _ in range(20):
            value = space.sample()
            assert same(value_from_json(space, value_to_json(space, value)), value)
    env.close()


def test_env_kwargs_make_the_environment_and_are_its_identity():
    """FrozenLake on ice that does not slip: the keywords reach gym.make, and a running server is checked."""
    ours = gym.make("openenv/gymnasium", env_id="FrozenLake-v1", env_kwargs={"is_slippery": False})
    theirs = gym.make("FrozenLake-v1", is_slippery=False)
    try:
        ours.reset(seed=3)
        theirs.reset(seed=3)
        for action in (2, 2, 1, 1, 1, 2):  # right, right, down, down, down, right: the goal
            (observation, *rest), (expected, *theirs_rest) = ours.step(action)[:4], theirs.step(action)[:4]
            assert same(observation, expected) and rest == theirs_rest  # rewards: 1.0 here, 1 there
        assert ours.unwrapped.adapter.env_kwargs == {"is_slippery": False}
        url = ours.unwrapped.base_url
        assert Client(url).get("/state")["env_kwargs"] == {"is_slippery": False}
        with pytest.raises(EnvironmentMismatch, match=r"made with env_kwargs \{'is_slippery': False\}"):
            gym.make("openenv/gymnasium", env_kwargs={"is_slippery": True}, base_url=url)
        same_ice = gym.make("openenv/gymnasium", env_kwargs={"is_slippery": False}, base_url=url)
        same_ice.close()
    finally:
        ours.close()
        theirs.close()


def test_env_kwargs_that_the_environment_does_not_take_are_named():
    with pytest.raises(Exception, match=r"cannot make 'FrozenLake-v1' with env_kwargs \{'slippery': False\}"):
        EmbeddedServer("gymnasium", env_id="FrozenLake-v1", env_kwargs={"slippery": False}).start()
    with pytest.raises(TypeError, match=r"env_kwargs must be a dict of gym\.make's keywords"):
        gym.make("openenv/gymnasium", env_id="FrozenLake-v1", env_kwargs="is_slippery=False")
