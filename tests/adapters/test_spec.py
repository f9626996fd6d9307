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
        (1, [0]),  # one action is a game too (mutation: a count must be above 1)
        (np.int64(2), [0, 1]),
        (["left", "right"], ["left", "right"]),
        ((1, 2, 3), [1, 2, 3]),
        (None, None),
    ],
)
def test_a_count_or_a_list_of_values_is_taken(actions, values):
    assert Spec("game", actions=actions).action_values() == values


def test_a_declared_action_space_excludes_declared_values():
    import numpy as np
    from gymnasium import spaces

    with pytest.raises(ValueError, match=r"declare the action.s values \(actions=\) or its space, not both"):
        Spec("both", actions=3, action_space=spaces.Box(-1, 1, (1,), np.float64))
    with pytest.raises(ValueError, match="action_space must be a gymnasium space"):
        Spec("odd", action_space=[-1, 1])


def test_the_official_openspiel_and_dm_control_specs_read_the_instance_from_its_state():
    """What a session's state says (the official servers' own fields) picks the exact spec; a game or a
    state the table does not know keeps the general one (None)."""
    import numpy as np
    from gymnasium import spaces

    from openenv_lab.adapters.spec import SPECS

    openspiel, dm_control = SPECS["openspiel"], SPECS["dm_control"]
    game = openspiel.from_state({"game_name": "tic_tac_toe", "num_players": 2})
    assert game.name == "openspiel/tic_tac_toe" and game.action_values() == list(range(9))
    assert game.legal_actions == "legal_actions" and game.action == "action_id"
    assert game.description == "OpenSpiel's tic_tac_toe: 9 action ids, the legal ones listed"
    assert game.matches(["openspiel_env"]) and game.matches(["OpenSpielEnvironment"])
    assert openspiel.from_state({"game_name": "go"}) is None and openspiel.from_state({}) is None
    assert openspiel.from_state({"game_name": ["tic_tac_toe"]}) is None  # not a name: the general spec
    task = dm_control.from_state(
        {
            "domain_name": "walker",
            "task_name": "walk",
            "action_spec": {"shape": [6], "minimum": [-1.0] * 6, "maximum": [1.0] * 6},
            "observation_spec": {"height": {"shape": []}, "velocity": {"shape": [9]}},
        }
    )
    assert task.name == "dm_control/walker/walk" and task.action == "values"
    assert task.description == "dm_control's walker/walk: the spaces its state gives"
    assert task.matches(["DMControlEnvironment"])
    assert task.action_space == spaces.Box(-1.0, 1.0, (6,), np.float64)
    assert task.observation["observations"] == spaces.Dict(
        {
            "height": spaces.Box(-np.inf, np.inf, (), np.float64),
            "velocity": spaces.Box(-np.inf, np.inf, (9,), np.float64),
        }
    )
    assert dm_control.from_state({"episode_id": "x", "step_count": 0}) is None  # HTTP /state's fields only
    walker = {"shape": [6], "minimum": [-1.0] * 6, "maximum": [1.0] * 6}
    assert dm_control.from_state({"action_spec": walker, "observation_spec": {}}) is None
    assert dm_control.from_state({"observation_spec": {"height": {"shape": []}}}) is None
    # dm_env's bounds need only broadcast to the shape: one number for every element, or a row of a grid.
    task = dm_control.from_state(
        {
            "action_spec": {"shape": [2, 3], "minimum": -2.0, "maximum": [0.5, 1.0, 2.0]},
            "observation_spec": {"height": {"shape": []}},
        }
    )
    assert task.action_space == spaces.Box(
        np.full((2, 3), -2.0), np.array([[0.5, 1.0, 2.0]] * 2), (2, 3), np.float64
    )


def test_whole_actions_are_all_dicts_and_name_no_action_field():
    with pytest.raises(ValueError, match="all whole actions"):
        Spec("x", actions=[{"action": "wait"}, "water"])
    with pytest.raises(ValueError, match="leave action= unset"):
        Spec("x", action="action", actions=[{"action": "wait"}])
    spec = Spec("x", actions=[{"action": "wait"}, {"action": "water", "x": 0, "y": 0}])
    assert spec.action_values()[1] == {"action": "water", "x": 0, "y": 0}


def test_the_official_wildfire_spec_reads_the_grid_from_its_state():
    from openenv_lab.adapters.spec import SPECS

    grid = SPECS["wildfire"].from_state({"width": 3, "height": 2, "step_count": 0})
    assert grid.name == "wildfire/3x2" and grid.action is None
    values = grid.action_values()
    assert len(values) == 1 + 2 * 3 * 2 and values[0] == {"action": "wait"}
    assert values[1] == {"action": "water", "x": 0, "y": 0} and values[2] == {
        "action": "water",
        "x": 1,
        "y": 0,
    }
    assert values[-1] == {"action": "break", "x": 2, "y": 1}
    assert SPECS["wildfire"].from_state({"episode_id": "x"}) is None  # HTTP /state's fields only
    assert SPECS["wildfire"].from_state({"width": 0, "height": 2}) is None
    assert SPECS["wildfire"].from_state({"width": 2, "height": 0}) is None
    one = SPECS["wildfire"].from_state({"width": 1, "height": 1})  # the smallest grid is a grid
    assert one.action_values() == [
        {"action": "wait"},
        {"action": "water", "x": 0, "y": 0},
        {"action": "break", "x": 0, "y": 0},
    ]
    assert one.description == "wildfire on a 1x1 grid: wait, or water or a firebreak on one cell"
    assert one.matches(["wildfire_env"])


def test_server_names_match_without_case():
    spec = Spec("x", servers=("MazeEnvironment",))
    assert spec.matches(["mazeenvironment"]) and spec.matches(["MAZEENVIRONMENT", "other"])
    assert not spec.matches(["Maze"]) and not spec.matches([])
