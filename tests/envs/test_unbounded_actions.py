"""Servers whose integer action has no bounds in the schema (OpenSpiel's ``action_id``, a plain ``int``):
never refused. The action gets the widest honest space (`WideInteger`) and one warning naming the `Spec`
that would make it exact; where the observation lists the legal ids, random play picks among them, so
``check``, ``evaluate`` and TRL's factory work on such a server as on any other.

Real servers on the official framework (tests/peers/framework_app.py): ``pile`` (Nim served as OpenSpiel
serves its games: an illegal id is the server's error) and ``tally`` (a plain ``int``, nothing listed).
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import openenv_lab
from openenv_lab.adapters.schema import SAMPLE_SPAN, WideInteger
from openenv_lab.bench import random_action


def quietly(make, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make(*args, **kwargs)


def test_a_listed_action_id_plays_whole_games_choosing_among_the_legal_ones(framework_pile):
    with pytest.warns(UserWarning, match=r"'action_id' is an integer without bounds") as said:
        env = gym.make("openenv/remote", base_url=framework_pile)
    message = str(said[0].message)
    assert "random play picks from the observation's 'legal_actions' (adapter.legal_actions())" in message
    assert "spec=Spec('mine', action='action_id', actions=N, legal_actions='legal_actions')" in message
    try:
        assert env.action_space == WideInteger()
        # Kept, as a list of any length: nothing turned it into a mask.
        assert isinstance(env.observation_space["legal_actions"], gym.spaces.Sequence)
        obs, info = env.reset(seed=0)
        legal = env.unwrapped.adapter.legal_actions
        assert legal() == [1, 2, 3] and "legal_actions" not in info  # a list of any length: not stacked
        for _ in range(3):  # whole games, every move one the server listed
            terminated = False
            while not terminated:
                assert obs in env.observation_space
                action = random_action(env, obs, info)
                assert int(action) in legal()
                obs, reward, terminated, truncated, info = env.step(action)
                assert not truncated
            assert reward in (1.0, -1.0) and legal() == []
            obs, info = env.reset()
    finally:
        env.close()


def test_check_and_evaluate_work_on_it(framework_pile):
    card = quietly(openenv_lab.check, framework_pile, validate=False, episodes=4, steps=10)
    # Its episodes play to their ends on the listed ids; gymnasium's checker, which samples the space
    # itself, sends ids the server refuses: the honest verdict on a space wider than the game.
    assert card["episode endings"].status == "pass" and card["episode endings"].values["terminated"] == 4
    assert card["rewards sent"].status == "pass" and card["observation schema"].status == "pass"
    checked = card["gymnasium check_env"]
    assert checked.status == "fail" and "is not legal" in checked.detail, checked
    assert not card.passed
    result = quietly(
        openenv_lab.evaluate,
        "masked-random",
        "openenv/remote",
        base_url=framework_pile,
        episodes=6,
        n_envs=3,
        progress=False,
    )
    assert result.episodes.height == 6 and result.episodes["error"].null_count() == 6, result.episodes
    assert set(result.episodes["return"].to_list()) <= {1.0, -1.0}


def test_trl_factory_makes_a_tool_of_it(framework_pile):
    from openenv_lab.trl import EpisodeOver, environment_factory

    Pile = quietly(environment_factory, "openenv/remote", base_url=framework_pile, failed_reward=-5.0)
    pile = Pile()
    try:
        assert "legal_actions: [1, 2, 3]" in pile.reset()
        tool = next(name for name in dir(pile) if name.startswith("pile"))
        assert "pile: 6" in getattr(pile, tool)(action_id=3)  # 10 - 3, then the other side takes one
        with pytest.raises(EpisodeOver, match="action_id 9 is not legal with 6 left"):
            getattr(pile, tool)(action_id=9)  # the server's own refusal, told to the model
        assert pile.get_reward() == -5.0
    finally:
        pile.close()


def test_a_plain_int_without_a_list_samples_small_values_in_one_env_or_many(framework_tally):
    with pytest.warns(UserWarning, match=r"'count' is an integer without bounds") as said:
        env = gym.make("openenv/remote", base_url=framework_tally)
    assert "random play" not in str(said[0].message) and "actions=N))" in str(said[0].message)
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        for _ in range(5):
            action = env.action_space.sample()
            assert 0 <= int(action) < SAMPLE_SPAN
            _, reward, terminated, _, _ = env.step(action)
            assert reward == (1.0 if int(action) % 2 == 0 else 0.0)
        assert terminated
        env.reset()
        assert env.step(np.int64(2**40))[4]["total"] == 2**40  # any int64 is sent (the info's scalar)
        quietly(check_env, env.unwrapped, skip_render_check=True)
    finally:
        env.close()
    envs = quietly(gym.make_vec, "openenv/remote", num_envs=3, base_url=framework_tally)
    try:
        assert envs.action_space == WideInteger(shape=(3,))
        envs.reset(seed=0)
        actions = envs.action_space.sample()
        assert actions.shape == (3,) and ((actions >= 0) & (actions < SAMPLE_SPAN)).all()
        envs.step(actions)
    finally:
        envs.close()


def test_the_card_passes_check_env_with_warnings_and_sees_done_answered_again(
    framework_tally, framework_kitchen
):
    """The report card's branches no other test reaches (survivors of a mutmut pass over
    report_card.py): gymnasium's checker passing with warnings (kitchen's unbounded floats), in plain words,
    and a step after the end answered ``done`` again (tally counts on past its fifth step)."""
    kitchen = quietly(openenv_lab.check, framework_kitchen, validate=False, episodes=2, steps=5)
    checked = kitchen["gymnasium check_env"]
    assert checked.status == "warn", checked
    assert checked.detail.startswith("passes, with warnings: WARN: A Box observation space m"), checked
    assert "\x1b" not in checked.detail  # gymnasium's terminal colours left out
    card = quietly(openenv_lab.check, framework_tally, validate=False, episodes=2, steps=5)
    endings = card["episode endings"]
    assert endings.status == "pass" and endings.values["after_end"] == "answered done again"
    assert endings.detail == "2 terminated, 0 truncated; a step after the end was answered done again"
    assert card["gymnasium check_env"].detail == "passes" and card.passed
