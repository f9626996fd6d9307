"""Lesson 5's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

import chess
import gymnasium as gym
import pytest

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_05 as check
from tutorials.solutions import lesson_05 as solution

VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}


def test_the_reference_answers_pass(capsys):
    check.material_balance(solution.material_balance)
    check.capture_bonus(solution.CaptureBonus)
    assert capsys.readouterr().out.splitlines() == ["Exercise 1: correct", "Exercise 2: correct"]


def balance(fen, colour, *, values=VALUES, always_white=False):
    board = chess.Board(fen)
    mine = chess.WHITE if colour == "white" or always_white else chess.BLACK
    return sum(v * (len(board.pieces(p, mine)) - len(board.pieces(p, not mine))) for p, v in values.items())


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"always_white": True}, "the wrong sign"),
        ({"values": {**VALUES, chess.PAWN: 0}}, "the pawns are missing"),
        ({"values": {**VALUES, chess.BISHOP: 4}}, "knights and bishops 3"),
    ],
)
def test_material_balance_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.material_balance(lambda fen, colour: balance(fen, colour, **mistake))


def bonus_wrapper(
    *, colour_each_step=False, balance_not_change=False, replace_reward=False, fixed_scale=False
):
    class Bonus(gym.Wrapper):
        def __init__(self, env, scale=0.01):
            super().__init__(env)
            self.scale = 0.01 if fixed_scale else scale

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            self.colour = info["agent_color"]
            self.material = balance(info["fen"], self.colour)
            return obs, info

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if colour_each_step:
                self.colour = info["agent_color"]
            material = balance(info["fen"], self.colour)
            bonus = self.scale * (material if balance_not_change else material - self.material)
            reward = bonus if replace_reward else reward + bonus
            self.material = material
            return obs, reward, terminated, truncated, info

    return Bonus


@pytest.mark.parametrize(
    ("mistake", "hint"),
    [
        ({"colour_each_step": True}, "read the agent's colour once, at reset"),
        ({"balance_not_change": True}, "the change of the balance"),
        ({"replace_reward": True}, "Keep the environment's own reward"),
        ({"fixed_scale": True}, "Use the wrapper's `scale`"),
    ],
)
def test_capture_bonus_mistakes_are_named(mistake, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.capture_bonus(bonus_wrapper(**mistake))


def test_a_wrapper_left_unwritten_is_refused():
    class Unwritten(gym.Wrapper):
        def __init__(self, env, scale=0.01):
            super().__init__(env)

    with pytest.raises(NotYetRight, match=r"step 2 \(d1d8\) should pay \+0.180"):
        check.capture_bonus(Unwritten)
