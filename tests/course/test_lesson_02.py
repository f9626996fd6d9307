"""Lesson 2's checks: the reference answers pass, typical mistakes are named."""

from __future__ import annotations

import numpy as np
import pytest

from openenv_lab.course import NotYetRight
from openenv_lab.course import lesson_02 as check
from tutorials.solutions import lesson_02 as solution


def test_the_reference_answers_pass(chess_env, capsys):
    check.legal_moves_from_mask(solution.legal_moves_from_mask, chess_env)
    check.count_pieces(solution.count_pieces, chess_env)
    check.space_kind(solution.space_kind)
    assert capsys.readouterr().out.splitlines() == [f"Exercise {n}: correct" for n in (1, 2, 3)]


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda adapter, obs: set(np.flatnonzero(obs["action_mask"]).tolist()), "action indices"),
        (
            lambda adapter, obs: {adapter.action_to_move(a) for a in range(obs["action_mask"].size)},
            "keep only the actions whose mask entry is True",
        ),
        # Reading the mask as a list of moves (the first legal action only, say): moves go missing.
        (
            lambda adapter, obs: {adapter.action_to_move(int(np.argmax(obs["action_mask"])))},
            "the answer missed",
        ),
    ],
)
def test_legal_moves_from_mask_mistakes_are_named(chess_env, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.legal_moves_from_mask(answer, chess_env)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (lambda board: (int(board[6:12].sum()), int(board[0:6].sum())), "the two sides swapped"),
        (lambda board: (int(board[0:6].sum()) + 1, int(board[6:12].sum())), "more pieces than there are"),
        (lambda board: (int(board[0:5].sum()), int(board[6:11].sum())), "all six planes"),
    ],
)
def test_count_pieces_mistakes_are_named(chess_env, answer, hint):
    with pytest.raises(NotYetRight, match=hint):
        check.count_pieces(answer, chess_env)


def test_counting_every_plane_is_named(chess_env):
    with pytest.raises(NotYetRight, match="only planes 0-11 are pieces"):
        check.count_pieces(lambda board: (int(board[0:6].sum() + board[12:].sum()), 16), chess_env)


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        ({"integer": "Discrete"}, "how many values would it have"),
        ({"boolean": "MultiBinary"}, "choice among n values"),
        ({"string": "str"}, "which space holds text"),
    ],
)
def test_space_kind_mistakes_are_named(wrong, hint):
    answers = {"string": "Text", "number": "Box", "integer": "Box", "boolean": "Discrete", **wrong}
    with pytest.raises(NotYetRight, match=hint):
        check.space_kind(answers.__getitem__)
