"""`Spec`'s own arguments: what it refuses, with the sentence that says why, and what it accepts.

Guards the argument checks of ``Spec.__post_init__`` (mutations: each ``raise`` removed, or the bounds
loosened to accept zero, a negative count, a bool, text or a mapping)."""

from __future__ import annotations

import numpy as np
import pytest

from openenv_lab.adapters.spec import Spec


@pytest.mark.parametrize(
    ("actions", "says"),
    [
        (0, r"Spec 'game': actions must be a positive count, got 0"),
        (-3, r"Spec 'game': actions must be a positive count, got -3"),
        (True, r"Spec 'game': actions must be a positive count, got True"),
        (np.int64(0), r"Spec 'game': actions must be a positive count, got 0"),
        ("left right", r"Spec 'game': actions must be a count or a list of values, not text"),
        (b"01", r"Spec 'game': actions must be a count or a list of values, not text"),
        ({"left": 0}, r"Spec 'game': actions must be a count or a list of values, got \{'left': 0\}"),
        (2.5, r"Spec 'game': actions must be a count or a list of values, got 2.5"),
    ],
)
def test_actions_that_are_neither_a_positive_count_nor_a_list_are_refused(actions, says):
    with pytest.raises(ValueError, match=f"^{says}$"):
        Spec("game", actions=actions)


@pytest.mark.parametrize(
    ("actions", "values"),
    [
        (3, [0, 1, 2]),
        (np.int64(2), [0, 1]),
        (["left", "right"], ["left", "right"]),
        ((1, 2, 3), [1, 2, 3]),
        (None, None),
    ],
)
def test_a_count_or_a_list_of_values_is_taken(actions, values):
    assert Spec("game", actions=actions).action_values() == values
