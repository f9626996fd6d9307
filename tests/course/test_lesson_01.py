"""Lesson 1's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

import gymnasium as gym
import pytest

import openenv_lab
from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_01 as check
from tutorials.solutions import lesson_01 as solution


def test_the_reference_answers_pass(echo_url, capsys):
    check.echo_reward(solution.echo_reward, echo_url)
    env, chess_env = gym.make("openenv/echo", max_steps=5), gym.make("openenv/chess", max_moves=10)
    try:
        check.play_random_episode(solution.play_random_episode, env, chess_env)
    finally:
        env.close()
        chess_env.close()
    assert capsys.readouterr().out.splitlines() == ["Exercise 1: correct", "Exercise 2: correct"]


def returns_the_reply(url, message):
    with openenv_lab.Session(url) as session:
        session.reset()
        return session.step({"message": message})


def returns_the_reset_reward(url, message):
    with openenv_lab.Session(url) as session:
        return session.reset().reward or 0.0


def sends_the_bare_message(url, message):
    with openenv_lab.Session(url) as session:
        session.reset()
        return session.step(message).reward


def unwritten(url, message):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (returns_the_reply, "whole reply"),
        (returns_the_reset_reward, "what the reset pays"),
        (sends_the_bare_message, r"session.step\(\{'message': message\}\)"),
        (unwritten, "not written yet"),
    ],
)
def test_echo_reward_mistakes_are_named(echo_url, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.echo_reward(answer, echo_url)


def episode(env, seed, *, seed_actions=True, use_mask=True, stop_on_truncation=True, count_reset=False):
    obs, _ = env.reset(seed=seed)
    if seed_actions:
        env.action_space.seed(seed)
    steps, total, done = int(count_reset), 0.0, False
    while not done:
        mask = obs.get("action_mask") if use_mask and isinstance(obs, dict) else None
        action = env.action_space.sample(mask=mask) if mask is not None else env.action_space.sample()
        obs, reward, terminated, truncated, _ = env.step(action)
        steps += 1
        total += reward
        done = terminated or (truncated and stop_on_truncation)
    return steps, total


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"seed_actions": False}, r"env.action_space.seed\(seed\)"),
        ({"use_mask": False}, r"not legal in that position.*mask=obs\['action_mask'\]"),
        ({"stop_on_truncation": False}, "`terminated` OR `truncated`"),
        ({"count_reset": True}, "the reset is not a step"),
    ],
)
def test_play_random_episode_mistakes_are_named(mistake, hint):
    env, chess_env = gym.make("openenv/echo", max_steps=5), gym.make("openenv/chess", max_moves=10)
    try:
        with pytest.raises(NotYetRight, match=hint):
            check.play_random_episode(lambda env, seed: episode(env, seed, **mistake), env, chess_env)
    finally:
        env.close()
        chess_env.close()
