"""Stable-Baselines3 on the native vector env: SB3's semantics, its wrappers, MaskablePPO, clear refusals.

The reference is SB3's own ``DummyVecEnv`` over our single envs, on the same seeds and actions.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecMonitor, VecNormalize

import openenv_lab  # noqa: F401
from openenv_lab.sb3 import SB3VecEnv, make_vec_env


def first_legal(obs):
    return np.array([int(np.flatnonzero(mask)[0]) for mask in obs["action_mask"]])


def test_steps_match_sb3s_dummy_vec_env_over_single_envs_episode_ends_included():
    options = {"max_moves": 6, "opponent": "random"}
    ours = make_vec_env("openenv/chess", n_envs=2, **options)
    dummy = DummyVecEnv([lambda: gym.make("openenv/chess", **options) for _ in range(2)])
    try:
        ours.seed(7)
        dummy.seed(7)
        obs_ours, obs_dummy = ours.reset(), dummy.reset()
        ended = 0
        for _ in range(12):
            for key in obs_dummy:
                np.testing.assert_array_equal(obs_ours[key], obs_dummy[key])
            actions = first_legal(obs_dummy)
            obs_ours, rewards_ours, dones_ours, infos_ours = ours.step(actions)
            obs_dummy, rewards_dummy, dones_dummy, infos_dummy = dummy.step(actions)
            np.testing.assert_array_equal(rewards_ours, rewards_dummy)
            np.testing.assert_array_equal(dones_ours, dones_dummy)
            for mine, theirs in zip(infos_ours, infos_dummy, strict=True):
                assert mine.get("TimeLimit.truncated") == theirs.get("TimeLimit.truncated")
                if "terminal_observation" in theirs:
                    ended += 1
                    for key, value in theirs["terminal_observation"].items():
                        np.testing.assert_array_equal(mine["terminal_observation"][key], value)
        assert ended >= 2  # six half-moves a game: the comparison crossed episode ends
        assert ours.reset_infos[0] and isinstance(ours.reset_infos[0], dict)
    finally:
        ours.close()
        dummy.close()


@pytest.mark.slow
def test_maskable_ppo_trains_on_chess_through_env_method_action_masks():
    venv = make_vec_env("openenv/chess", n_envs=2, max_moves=20)
    try:
        venv.reset()
        masks = np.stack(venv.env_method("action_masks"))
        assert masks.shape == (2, 4672) and masks.any(axis=1).all()
        assert venv.has_attr("action_masks") and len(venv.get_attr("action_masks", indices=[1])) == 1
        model = MaskablePPO("MultiInputPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, verbose=0)
        before = [parameter.detach().clone() for parameter in model.policy.parameters()]
        model.learn(16)
        assert model.num_timesteps >= 16
        # It learned from what it played (mutation guarded: learn() that never updates the policy).
        after = list(model.policy.parameters())
        assert any(not torch.equal(old, new) for old, new in zip(before, after, strict=True))
    finally:
        venv.close()


def test_it_composes_with_vec_monitor_vec_normalize_and_vec_frame_stack():
    venv = VecFrameStack(VecNormalize(VecMonitor(make_vec_env("openenv/finrl", n_envs=2))), n_stack=3)
    try:
        obs = venv.reset()
        single = venv.unwrapped.observation_space.shape
        assert obs.shape == (2, single[0] * 3)
        for _ in range(3):
            obs, rewards, _, _ = venv.step(np.zeros((2, *venv.action_space.shape), np.float32))
        assert np.isfinite(obs).all() and rewards.shape == (2,)
        model = PPO("MlpPolicy", venv, n_steps=8, batch_size=16, n_epochs=1, verbose=0)
        model.learn(16)
    finally:
        venv.close()


def test_spaces_sb3_cannot_take_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="SB3 cannot take the observation space's 'echoed_message' part"):
        make_vec_env("openenv/echo", n_envs=1)


def test_it_needs_same_step_autoreset_and_our_vector_env():
    envs = gym.make_vec("openenv/finrl", num_envs=1)
    try:
        with pytest.raises(ValueError, match="autoreset_mode='same_step'"):
            SB3VecEnv(envs)
    finally:
        envs.close()
    with pytest.raises(TypeError, match="drives openenv_lab's vector env"):
        SB3VecEnv(gym.make_vec("CartPole-v1", num_envs=1, vectorization_mode="sync"))
