"""``gym.make("openenv/chess")`` end to end, on our embedded server and on the official chess_env."""

from __future__ import annotations

import warnings

import chess
import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded

import openenv_lab
from openenv_lab.client import Session
from tests.helpers import check_env_warnings


def play(env: gym.Env, seed: int) -> tuple[float, bool, bool, dict, int]:
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    total, steps = 0.0, 0
    while True:
        action = env.action_space.sample(mask=obs["action_mask"])
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps += 1
        if terminated or truncated:
            return total, terminated, truncated, info, steps


@pytest.mark.slow
def test_the_readme_loop_runs_a_full_game_with_no_warnings(chess_url):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("openenv/chess")
        obs, info = env.reset(seed=0)
        while True:
            action = env.action_space.sample(mask=obs["action_mask"])
            obs, _reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        env.close()
    assert info["end_reason"]
    assert terminated != truncated


def test_spaces(chess_url):
    env = gym.make("openenv/chess")
    assert env.action_space == gym.spaces.Discrete(4672)
    assert env.observation_space["board"].shape == (19, 8, 8)
    assert env.observation_space["action_mask"].dtype == np.int8
    obs, _ = env.reset(seed=1)
    assert obs in env.observation_space
    assert obs["action_mask"].sum() == 20  # 20 legal moves in the initial position, for either colour
    env.close()


def test_check_env_passes(chess_url):
    env = gym.make("openenv/chess")
    assert check_env_warnings(env.unwrapped) == []
    env.close()


def test_seeds_replay_whole_games_and_sequences(chess_url):
    env = gym.make("openenv/chess", opponent="greedy")
    assert play(env, seed=3) == play(env, seed=3)
    env.reset(seed=9)
    follow_ups = [env.reset()[1]["seed"] for _ in range(3)]
    env.reset(seed=9)
    assert [env.reset()[1]["seed"] for _ in range(3)] == follow_ups
    env.close()


def test_checkmate_terminates(chess_url):
    env = gym.make("openenv/chess", agent_color="white")
    scholar = "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4"
    env.reset(seed=0, options={"fen": scholar})
    action = env.unwrapped.adapter.move_to_action("f3f7")
    _, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["end_reason"] == "checkmate" and info["result"] == "1-0"
    env.close()


def test_move_limit_truncates(chess_url):
    env = gym.make("openenv/chess", max_moves=8)
    _, terminated, truncated, info, steps = play(env, seed=0)
    assert (terminated, truncated) == (False, True)
    assert info["end_reason"] == "move_limit"
    assert steps == 4
    env.close()


def test_a_game_cut_short_ends_in_a_position_whose_moves_the_mask_still_has(chess_url):
    """A truncated episode's last observation is a state like any other (a value bootstrapped there takes
    a max over its legal moves): the server sends no moves once a game is over, so they come from the FEN."""
    env = gym.make("openenv/chess", max_moves=8)
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, _, terminated, truncated, info = env.step(env.action_space.sample(mask=obs["action_mask"]))
    assert truncated and not terminated
    adapter = env.unwrapped.adapter
    legal = sorted(move.uci() for move in chess.Board(info["fen"]).legal_moves)
    assert legal and sorted(adapter.legal_moves) == legal
    assert sorted(adapter.action_to_move(i) for i in np.flatnonzero(obs["action_mask"])) == legal
    env.close()


def test_step_after_the_end_raises_instead_of_starting_a_new_game(chess_url):
    env = gym.make("openenv/chess", max_moves=2)
    play(env, seed=0)
    with pytest.raises(ResetNeeded, match=r"call env\.reset"):
        env.step(0)
    env.reset(seed=1)
    env.close()


def test_action_outside_the_space_is_refused_before_sending(chess_url):
    env = gym.make("openenv/chess")
    env.reset(seed=0)
    session: Session = env.unwrapped.session
    sent = session.bytes_sent
    for bad in (-1, 4672, "e2e4", 3.5):
        with pytest.raises((ValueError, AssertionError)):
            env.step(bad)
    assert session.bytes_sent == sent
    env.close()


def test_illegal_action_gets_the_servers_penalty(chess_url):
    env = gym.make("openenv/chess", agent_color="white")
    obs, _ = env.reset(seed=0)
    illegal = env.unwrapped.adapter.move_to_action("e2e5")
    assert obs["action_mask"][illegal] == 0
    obs2, reward, terminated, truncated, info = env.step(illegal)
    assert reward == pytest.approx(-0.1)
    assert info["illegal_move"] is True
    assert not (terminated or truncated)
    np.testing.assert_array_equal(obs2["board"], obs["board"])
    env.close()


def test_black_agent_moves_are_mirrored_and_legal(chess_url):
    env = gym.make("openenv/chess", agent_color="black")
    obs, info = env.reset(seed=0)
    assert info["agent_color"] == "black" and len(info["opponent_move"]) == 4  # white opened
    adapter = env.unwrapped.adapter
    legal = {adapter.action_to_move(a) for a in np.flatnonzero(obs["action_mask"])}
    assert legal == set(adapter.legal_moves)
    masks = env.get_wrapper_attr("action_masks")()  # how sb3-contrib reaches it through wrappers
    assert masks.dtype == bool and masks.sum() == len(legal)
    env.close()


def test_render_modes(chess_url):
    env = gym.make("openenv/chess", render_mode="svg")
    env.reset(seed=0)
    svg = env.render()
    assert svg.startswith("<svg") and hasattr(svg, "_repr_svg_")
    env.close()
    env = gym.make("openenv/chess", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (400, 400, 3) and frame.dtype == np.uint8
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 3  # squares and pieces, not a blank image
    env.close()
    env = gym.make("openenv/chess", render_mode="ansi", agent_color="white")
    env.reset(seed=0)
    text = env.render()
    assert "FEN: " + chess.STARTING_FEN in text
    env.close()


def test_unknown_render_mode_is_refused(chess_url):
    with pytest.raises(ValueError, match="render_mode"):
        openenv_lab.OpenEnvEnv("chess", render_mode="video")


def test_options_unknown_to_the_server_are_reported(chess_url):
    env = gym.make("openenv/chess")
    with pytest.raises(openenv_lab.ServerError, match="Unknown reset option"):
        env.reset(seed=0, options={"colour": "white"})
    env.reset(seed=0)  # the session is still usable
    env.close()


#: A king-and-queen endgame: the official chess_env's opponent (moonfish) answers fast here, and the game
#: ends within a few dozen moves (its move limit, 500 of the agent's moves, is the adapter's unit tests'
#: business: tests/adapters/test_chess_adapter.py).
ENDGAME = "k7/8/1K6/8/8/8/8/7Q b - - 0 1"


def end_reason_of(fen: str) -> str:
    """Why a game that ended at ``fen`` ended, by python-chess (repetition needs the history: the rest)."""
    board = chess.Board(fen)
    for reason, ended in (
        ("checkmate", board.is_checkmate()),
        ("stalemate", board.is_stalemate()),
        ("insufficient_material", board.is_insufficient_material()),
        ("fifty_moves", board.is_fifty_moves()),
    ):
        if ended:
            return reason
    return "threefold_repetition"


@pytest.mark.slow
def test_against_the_official_chess_env(official_chess):
    """The official server ignores seeds (warned once), and says nothing of illegal moves or of why a
    game ended: the adapter infers both."""
    env = gym.make("openenv/chess", base_url=official_chess)
    with pytest.warns(UserWarning, match="did not confirm"):
        obs, info = env.reset(seed=0, options={"fen": ENDGAME})
    listed = env.unwrapped.adapter.legal_moves
    assert set(listed) == {
        env.unwrapped.adapter.action_to_move(a) for a in np.flatnonzero(obs["action_mask"])
    }
    assert set(listed) == {move.uci() for move in chess.Board(info["fen"]).legal_moves}
    illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    _, reward, *_, info = env.step(illegal)
    assert reward == pytest.approx(-0.1) and info["illegal_move"] is True
    reasons = set()
    for seed in range(3):
        obs, info = env.reset(seed=seed, options={"fen": ENDGAME})
        env.action_space.seed(seed)
        terminated = truncated = False
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(
                env.action_space.sample(mask=obs["action_mask"])
            )
        assert info["end_reason"] == end_reason_of(info["fen"])
        assert terminated and not truncated  # every ending here is a rule of chess, none a limit
        reasons.add(info["end_reason"])
    assert reasons
    env.close()


@pytest.mark.slow
def test_a_cell_run_again_does_not_fail_on_a_full_server():
    """An env that nothing references any more (here: caught in a reference cycle, as a notebook's old
    objects can be) is collected when the server is full, which closes its session and frees the slot."""
    from openenv_lab.launch import EmbeddedServer

    with EmbeddedServer("chess", max_sessions=1) as server:
        first = gym.make("openenv/chess", base_url=server.base_url)
        first.unwrapped.loop_back = first  # a cycle: refcounting alone will not free it
        del first
        second = gym.make("openenv/chess", base_url=server.base_url)  # would be "server full" before
        second.reset(seed=0)
        with pytest.raises(openenv_lab.CapacityError):
            gym.make("openenv/chess", base_url=server.base_url)  # a live session is never taken away
        second.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"agent_color": "purple"}, "agent_color must be 'white', 'black' or 'random'"),
        ({"max_moves": -1}, "max_moves must be a positive integer"),
        ({"opponent_depth": "x"}, "opponent_depth must be a positive integer"),
        ({"opponent": 3}, "opponent must be an opponent's name"),
    ],
)
def test_options_no_server_could_take_fail_at_make(options, message):
    with pytest.raises(ValueError, match=message):
        gym.make("openenv/chess", launcher="docker", **options)  # refused before any server is started
