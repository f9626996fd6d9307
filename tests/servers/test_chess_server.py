"""The chess environment's rules, exercised in process (tests/servers/test_compat.py covers the wire)."""

from __future__ import annotations

import random

import chess
import pytest

from openenv_lab.servers.chess import ChessAction, ChessEnvironment
from openenv_lab.servers.chess_opponents import make_opponent
from tests.helpers import require_stockfish


def play_random_game(env: ChessEnvironment, seed: int, **reset_options) -> list[str]:
    rng = random.Random(seed)
    obs = env.reset(seed=seed, **reset_options)
    moves = [obs.fen]
    while not obs.done:
        obs = env.step(ChessAction(move=rng.choice(obs.legal_moves)))
        moves.append(obs.fen)
    return moves


def test_seeded_games_replay_exactly():
    env = ChessEnvironment()
    assert play_random_game(env, seed=5) == play_random_game(env, seed=5)
    assert play_random_game(env, seed=5) != play_random_game(env, seed=6)


def test_seed_is_echoed_and_random_colour_follows_it():
    env = ChessEnvironment()
    colours = {env.reset(seed=s).metadata["agent_color"] for s in range(20)}
    assert colours == {"white", "black"}
    first = env.reset(seed=11)
    assert first.metadata["seed"] == 11
    assert env.reset(seed=11).metadata["agent_color"] == first.metadata["agent_color"]
    assert "seed" not in env.reset().metadata


def test_black_agent_sees_the_opponents_first_move():
    obs = ChessEnvironment().reset(seed=0, agent_color="black")
    assert obs.fen.split()[1] == "b"
    assert obs.metadata["opponent_move"] in {m.uci() for m in chess.Board().legal_moves}
    assert obs.metadata["ply"] == 1


def test_illegal_and_unparseable_moves_cost_a_tenth_and_change_nothing():
    env = ChessEnvironment()
    before = env.reset(seed=0, agent_color="white")
    for move in ("e2e5", "hello", ""):
        obs = env.step(ChessAction(move=move))
        assert obs.reward == pytest.approx(-0.1)
        assert not obs.done
        assert obs.fen == before.fen
        assert obs.metadata["illegal_move"] == move
    assert env.state.step_count == 0  # half-moves played, as the official server counts: none


def test_checkmate_by_the_agent_is_won():
    env = ChessEnvironment()
    # Scholar's mate position, white to play Qxf7#.
    env.reset(fen="r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4", agent_color="white")
    obs = env.step(ChessAction(move="f3f7"))
    assert obs.done and obs.reward == 1.0
    assert obs.result == "1-0"
    assert obs.metadata["end_reason"] == "checkmate"
    assert obs.legal_moves == []


def test_checkmate_by_the_opponent_is_lost():
    env = ChessEnvironment()
    # Fool's mate: white (the agent) plays g2g4 and the greedy opponent mates with Qh4#.
    env.reset(
        fen="rnbqkbnr/pppp1ppp/8/4p3/8/5P2/PPPPP1PP/RNBQKBNR w KQkq - 0 2",
        opponent="greedy",
        agent_color="white",
    )
    obs = env.step(ChessAction(move="g2g4"))
    assert obs.metadata["opponent_move"] == "d8h4"
    assert obs.done and obs.reward == -1.0 and obs.result == "0-1"


def test_stalemate_is_a_draw():
    env = ChessEnvironment()
    env.reset(fen="7k/8/6K1/8/8/8/8/5Q2 w - - 0 1", agent_color="white")
    obs = env.step(ChessAction(move="f1f7"))
    assert obs.done and obs.reward == 0.0
    assert obs.metadata["end_reason"] == "stalemate"


def test_move_limit_ends_the_game_as_a_cut():
    env = ChessEnvironment()
    obs = env.reset(seed=3, agent_color="white", max_moves=6)
    steps = 0
    while not obs.done:
        obs = env.step(ChessAction(move=obs.legal_moves[0]))
        steps += 1
    assert steps == 3
    assert obs.metadata["end_reason"] == "move_limit"
    assert obs.metadata["ply"] == 6
    assert obs.reward == 0.0


def test_threefold_repetition_is_detected():
    env = ChessEnvironment()
    env.reset(agent_color="white", opponent="none")
    shuffle = ["g1f3", "g8f6", "f3g1", "f6g8"] * 2
    for move in shuffle:
        obs = env.step(ChessAction(move=move))
    assert obs.done and obs.metadata["end_reason"] == "threefold_repetition"


def test_fifty_move_rule():
    env = ChessEnvironment()
    env.reset(fen="8/8/8/4k3/8/8/8/R3K3 w - - 99 80", agent_color="white", opponent="none")
    obs = env.step(ChessAction(move="a1a2"))
    assert obs.done and obs.metadata["end_reason"] == "fifty_moves"


# Starting points that reach every ending: mates, stalemates, bare kings, the fifty- and seventy-five-move
# rules (a clock already high in the FEN), repetitions (a rook against a bare king), en passant, castling
# and promotions.
RULE_FENS = [
    chess.STARTING_FEN,
    "8/8/8/8/8/5k2/8/Q3K3 w - - 0 1",
    "7k/5Q2/6K1/8/8/8/8/8 w - - 0 1",
    "8/8/8/8/8/2k5/1r6/K7 w - - 98 80",
    "8/8/4k3/8/8/3K4/3R4/8 w - - 150 120",
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",
    "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1",
    "8/P6k/8/8/8/8/6p1/K7 w - - 0 1",
    "k7/8/1Q6/8/8/8/8/7K w - - 0 1",
    "7k/8/8/8/8/8/8/R6K b - - 0 1",
]


def reference_ending(board: chess.Board, ply: int, max_moves: int) -> str | None:
    """The end of the game by the module's rules, from python-chess's own (slower) functions."""
    outcome = board.outcome(claim_draw=False)
    if outcome is not None:
        return outcome.termination.name.lower()
    if board.halfmove_clock >= 100:
        return "fifty_moves"
    if board.is_repetition(3):
        return "threefold_repetition"
    return "move_limit" if ply >= max_moves else None


@pytest.mark.parametrize("opponent", ["random", "greedy", "none"])
def test_every_observation_agrees_with_python_chess(opponent):
    """The server lists moves, writes FENs and finds endings its own faster way: check each observation of
    many games against python-chess on a board replaying the same moves."""
    env = ChessEnvironment()
    endings = set()
    for game in range(60):
        rng = random.Random(game)
        fen = RULE_FENS[game % len(RULE_FENS)]
        max_moves = 40 if game % 4 == 0 else 500
        obs = env.reset(seed=game, fen=fen, opponent=opponent, max_moves=max_moves)
        board = chess.Board(fen)
        while True:
            for move in env.state.move_history[len(board.move_stack) :]:
                board.push_uci(move)
            ending = reference_ending(board, len(board.move_stack), max_moves)
            assert obs.fen == env.state.fen == board.fen()
            assert obs.is_check == board.is_check()
            assert obs.done == (ending is not None)
            assert obs.metadata.get("end_reason") == ending
            if obs.done:
                result = "1/2-1/2" if ending != "checkmate" else ("0-1" if board.turn else "1-0")
                assert obs.result == result and obs.legal_moves == []
                endings.add(ending)
                break
            assert obs.legal_moves == [move.uci() for move in board.legal_moves]
            move = rng.choice(obs.legal_moves) if rng.random() > 0.05 else "e2e5"
            obs = env.step(ChessAction(move=move))
    rules = {"checkmate", "stalemate", "insufficient_material", "fifty_moves", "seventyfive_moves"}
    assert endings >= rules | {"move_limit"}  # threefold repetition: its own test below


def test_a_repetition_is_the_same_position_with_the_same_castling_rights():
    env = ChessEnvironment()
    env.reset(fen="4k3/8/8/8/8/8/8/R3K3 w Q - 0 1", agent_color="white", opponent="none")
    for move in ["a1a2", "e8d8", "a2a1", "d8e8"] * 2:
        obs = env.step(ChessAction(move=move))
    # The pieces stand as at the start for the third time, but the start could still castle: two repetitions.
    assert not obs.done
    obs = env.step(ChessAction(move="a1a2"))  # this position, without castling, is here for the third time
    assert obs.done and obs.metadata["end_reason"] == "threefold_repetition"


def test_step_after_the_end_is_refused():
    env = ChessEnvironment()
    env.reset(fen="r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4", agent_color="white")
    env.step(ChessAction(move="f3f7"))
    with pytest.raises(ValueError, match="game is over"):
        env.step(ChessAction(move="e1e2"))


def test_bad_reset_options_are_errors_not_silence():
    env = ChessEnvironment()
    with pytest.raises(ValueError, match="Unknown reset option"):
        env.reset(colour="white")
    with pytest.raises(ValueError, match="Unknown opponent"):
        env.reset(opponent="magnus")
    with pytest.raises(ValueError, match="agent_color"):
        env.reset(agent_color="green")
    with pytest.raises(ValueError, match="Invalid FEN"):
        env.reset(fen="not a fen")
    with pytest.raises(ValueError, match=r"fen must be a position in FEN \(text\), got 123"):
        env.reset(fen=123)
    with pytest.raises(ValueError, match="seed must be a whole number from 0 to"):
        env.reset(seed=-1)


def test_state_counts_half_moves_as_the_official_server_and_keeps_the_episode_id():
    env = ChessEnvironment()
    obs = env.reset(seed=2, episode_id="ep-7", agent_color="white")
    env.step(ChessAction(move=obs.legal_moves[0]))
    state = env.state
    assert state.episode_id == "ep-7"
    assert state.step_count == 2  # the agent's move and the opponent's reply
    assert state.ply == 2 and len(state.move_history) == 2
    assert state.agent_color == "white" and state.seed == 2
    black = env.reset(seed=2, agent_color="black")  # the opponent opens: one half-move already
    assert env.state.step_count == 1 and black.fen.split()[1] == "b"


@pytest.mark.parametrize("gamma", [0.99, 0.5])
def test_a_games_end_carries_discounted_rewards_as_the_official_server(gamma):
    env = ChessEnvironment(opponent="none", agent_color="white", gamma=gamma)
    env.reset(fen="6k1/5ppp/8/8/8/8/8/4R2K w - - 0 1")  # back-rank mate in one
    obs = env.step(ChessAction(move="e1e8"))
    assert obs.done and obs.reward == 1.0
    assert obs.metadata["discounted_rewards"] == [1.0] and obs.metadata["gamma"] == gamma
    env.reset(fen="6k1/5ppp/8/8/8/8/8/3R3K w - - 0 1")  # self-play: a quiet move, the king steps aside
    for move in ("d1e1", "g8h8"):
        assert env.step(ChessAction(move=move)).metadata.get("discounted_rewards") is None
    obs = env.step(ChessAction(move="e1e8"))  # mate: every move of the game, discounted from the last
    assert obs.done and obs.metadata["discounted_rewards"] == [gamma**2, gamma, 1.0]


@pytest.mark.parametrize("name", ["random", "greedy", "minimax"])
def test_opponents_play_legal_moves(name):
    rng = random.Random(0)
    opponent = make_opponent(name, depth=1)
    board = chess.Board()
    for _ in range(12):
        move = opponent.choose(board, rng)
        assert board.is_legal(move)
        board.push(move)


@pytest.mark.parametrize("name", ["greedy", "minimax"])
def test_stronger_opponents_take_a_mate_in_one(name):
    board = chess.Board("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1")  # Ra8#
    assert make_opponent(name, depth=2).choose(board, random.Random(0)).uci() == "a1a8"


def test_minimax_sees_the_recapture_that_greedy_walks_into():
    board = chess.Board("7k/2p5/3p4/8/8/8/8/3R3K w - - 0 1")  # d6 is defended by c7
    assert make_opponent("greedy").choose(board, random.Random(0)).uci() == "d1d6"
    assert make_opponent("minimax", depth=2).choose(board, random.Random(0)).uci() != "d1d6"


def test_stockfish_opponent_plays_and_is_closed():
    require_stockfish()
    env = ChessEnvironment(opponent="stockfish", opponent_depth=1, agent_color="white")
    obs = env.reset(seed=0)
    obs = env.step(ChessAction(move="f2f3"))
    assert chess.Board(obs.fen).is_valid()
    env.close()
    assert env._opponent is None


def test_minimax_finds_a_move_when_every_move_loses():
    # Black's only moves all allow mate: deep searches must still answer with a legal move.
    board = chess.Board("k7/8/1K6/8/8/8/8/7R b - - 0 1")
    for depth in (1, 2, 3, 4):
        assert board.is_legal(make_opponent("minimax", depth=depth).choose(board, random.Random(0)))


def test_a_failing_opponent_takes_the_agents_move_back():
    class Broken:
        name = "broken"

        def choose(self, board, rng, legal_moves=None):
            raise RuntimeError("engine crashed")

        def close(self):
            pass

    env = ChessEnvironment()
    before = env.reset(seed=0, agent_color="white")
    env._opponent = Broken()
    with pytest.raises(RuntimeError, match="engine crashed"):
        env.step(ChessAction(move="e2e4"))
    assert env.state.fen == before.fen and env.state.move_history == [] and env.state.step_count == 0
    assert env._board.turn == chess.WHITE  # still the agent's move, on the agent's pieces
    obs = env.step(ChessAction(move="e2e5"))  # illegal: the observation is of the position taken back to
    assert obs.fen == before.fen and obs.legal_moves == before.legal_moves
    env._opponent = None  # the random opponent again, built on the next move
    obs = env.step(ChessAction(move="e2e4"))
    board = chess.Board()
    for move in env.state.move_history:
        board.push_uci(move)
    assert obs.fen == board.fen() and obs.legal_moves == [move.uci() for move in board.legal_moves]


def test_search_depth_is_capped():
    with pytest.raises(ValueError, match="at most 4"):
        ChessEnvironment().reset(opponent="minimax", opponent_depth=9)


def test_without_stockfish_its_tests_skip_unless_the_machine_must_have_it(monkeypatch):
    monkeypatch.setattr("openenv_lab.servers.chess_opponents.find_stockfish", lambda: None)
    monkeypatch.setenv("OPENENV_LAB_REQUIRE_STOCKFISH", "1")  # .ci/run, where apt-get installs it
    with pytest.raises(pytest.fail.Exception, match="OPENENV_LAB_REQUIRE_STOCKFISH=1"):
        require_stockfish()
    monkeypatch.delenv("OPENENV_LAB_REQUIRE_STOCKFISH")
    with pytest.raises(pytest.skip.Exception, match="Stockfish is not installed"):
        require_stockfish()
