"""Our environments' ``state`` after steps: the values a validated model would hold.

The environments set their state's fields without pydantic re-validating each assignment
(`ServerEnvironment._update_state`); this checks the result is still a valid model of the right values.
"""

from __future__ import annotations

import chess

from openenv_lab.servers.atari import AtariAction, AtariEnvironment
from openenv_lab.servers.chess import ChessAction, ChessEnvironment
from openenv_lab.servers.echo import EchoAction, EchoEnvironment
from openenv_lab.servers.finrl import FinRLAction, FinRLEnvironment, load_market


def _valid(state):
    """The state as a freshly validated model of its own dump: equal if every field has its type."""
    again = type(state).model_validate(state.model_dump())
    assert again == state
    assert {k: type(v) for k, v in again.model_dump().items()} == {
        k: type(v) for k, v in state.model_dump().items()
    }
    return again


def test_echo_and_atari_count_their_steps():
    echo = EchoEnvironment(max_steps=10)
    echo.reset()
    for _ in range(3):
        echo.step(EchoAction(message="hi"))
    assert _valid(echo.state).step_count == 3

    atari = AtariEnvironment()
    atari.reset(seed=0, screen_encoding="delta")
    for _ in range(4):
        atari.step(AtariAction(action_id=1))
    assert _valid(atari.state).step_count == 4


def test_chess_state_follows_the_board():
    env = ChessEnvironment(opponent="random")
    env.reset(seed=3)
    board = chess.Board()
    env.step(ChessAction(move="e2e4"))
    board.push_uci("e2e4")
    board.push_uci(env.state.move_history[-1])  # the opponent's reply
    state = _valid(env.state)
    assert (state.step_count, state.ply, state.fen) == (2, 2, board.fen())  # half-moves, as the official
    assert state.current_player == "white"
    env.step(ChessAction(move="e2e5"))  # illegal: a step that moves nothing, and counts nothing
    after = _valid(env.state)
    assert (after.step_count, after.ply, after.fen) == (2, 2, board.fen())


def test_finrl_state_tracks_the_day_and_date():
    env = FinRLEnvironment(load_market())
    env.reset()
    start = env.state.day
    for _ in range(5):
        observation = env.step(FinRLAction(actions=[0.1] * 5))
    state = _valid(env.state)
    assert (state.step_count, state.day, state.date) == (5, start + 5, observation.date)


def test_finrl_observations_are_what_validated_models_would_send():
    """FinRL's observations hold values of their declared types (state numbers as floats: 68.0, not 68)
    when they leave the lists of its simulator (`trade`, `state_list`), as numpy's arrays gave them."""
    env = FinRLEnvironment(load_market())
    observations = [env.reset(seed=3)]
    actions = [[1.0, 1.0, -0.5, 0.3, 1.0], [-1.0, 0.5, 0.25, -0.75, 0.0], [0.0] * 5]
    while not observations[-1].done:
        observations.append(env.step(FinRLAction(actions=actions[len(observations) % 3])))
    assert len(observations) > 10
    for observation in observations:
        again = _valid(observation)
        assert again.model_dump_json() == observation.model_dump_json()
        assert {type(number) for number in observation.state} == {float}
        assert observation.metadata["holdings"] == [int(h) for h in observation.state[6:11]]
