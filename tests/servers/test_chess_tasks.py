"""The chess task set: every shipped mate proved, our solver checked against Stockfish, the task routes
and task resets of our server over the wire (openenv's own HTTP routes, the official client's shape)."""

from __future__ import annotations

import chess
import chess.engine
import pytest

from openenv_lab.client import Client, ServerError
from openenv_lab.servers.chess import ChessAction, ChessEnvironment
from openenv_lab.servers.chess_tasks import SPLITS, TASKS, mate_in, mates_exactly_in, solutions
from tests.helpers import require_stockfish

ALL = [task for split in SPLITS.values() for task in TASKS.list_tasks(split)]


def test_the_set_has_a_few_hundred_distinct_positions_for_both_colours():
    assert [s["name"] for s in TASKS.list_splits()] == ["mate_in_1", "mate_in_2", "mate_in_3"]
    assert all(TASKS.num_tasks(split) >= 100 for split in SPLITS.values())
    assert len({chess.Board(t["fen"]).epd() for t in ALL}) == len(ALL)
    turns = {chess.Board(t["fen"]).turn for t in ALL}
    assert turns == {chess.WHITE, chess.BLACK}


@pytest.mark.slow
@pytest.mark.parametrize("split", list(SPLITS.values()))
def test_every_shipped_task_mates_in_exactly_its_depth(split):
    for task in TASKS.list_tasks(split):
        board = chess.Board(task["fen"])
        assert board.is_valid(), task["id"]
        # Exactly its depth: some first move mates within it (one search gives them all), none in fewer.
        found = solutions(board, task["mate_in"])
        assert found and found == task["solutions"], task["id"]
        assert not mate_in(board, task["mate_in"] - 1), task["id"]
        assert board.fen() == task["fen"]  # the search leaves the board as it was


def test_solver_on_positions_known_by_hand():
    back_rank = chess.Board("6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1")
    assert mate_in(back_rank, 1) and solutions(back_rank, 1) == ["d1d8"]
    assert solutions(back_rank.mirror(), 1) == ["d8d1"]  # the same mate, for black
    assert not mate_in(chess.Board(), 2)
    back_rank.remove_piece_at(chess.H7)  # now the king escapes to h7: no mate
    assert not mate_in(back_rank, 1)
    # Two rooks against a lone king on the edge: the ladder mates in 2, not in 1.
    ladder = chess.Board("7k/8/8/8/8/8/R7/1R4K1 w - - 0 1")
    assert mates_exactly_in(ladder, 2)
    assert not mates_exactly_in(ladder, 1) and not mates_exactly_in(ladder, 3)
    # A stalemate ends the line without a mate: after 1.Qb6?? black has no move and no mate follows.
    stalemate = chess.Board("k7/2Q5/8/1K6/8/8/8/8 w - - 0 1")
    assert "c7b6" not in solutions(stalemate, 2)


@pytest.mark.slow
def test_stockfish_agrees_on_the_depth_of_a_sample_of_tasks():
    # Stockfish's mate search ("go mate n") reports the shortest mate it finds within n moves: n itself
    # for a task (a fixed-depth search may report a longer mate than the shortest, so it is not used).
    sample = ALL[::10]
    with chess.engine.SimpleEngine.popen_uci(require_stockfish()) as engine:
        engine.configure({"Threads": 1})
        for task in sample:
            limit = chess.engine.Limit(mate=task["mate_in"], time=10)
            info = engine.analyse(chess.Board(task["fen"]), limit)
            assert info["score"].relative.mate() == task["mate_in"], task["id"]


def test_a_task_is_won_by_a_solution_and_lost_by_running_out_of_moves():
    env = ChessEnvironment()
    task = TASKS.get_task("mate_in_1", 0)
    obs = env.reset(split="mate_in_1", index=0)
    assert obs.fen == task["fen"] and obs.metadata["task"]["id"] == "mate_in_1-0"
    obs = env.step(ChessAction(move=task["solutions"][0]))
    assert obs.done and obs.reward == 1.0 and obs.metadata["end_reason"] == "checkmate"

    env.reset(split="mate_in_1", index=0)
    wrong = next(m for m in env.reset(split="mate_in_1", index=0).legal_moves if m not in task["solutions"])
    obs = env.step(ChessAction(move=wrong))
    assert obs.done and obs.reward == 0.0 and obs.metadata["end_reason"] == "out_of_moves"
    assert obs.result == "*"


def test_a_mate_in_two_is_played_to_its_end_against_the_best_defence():
    env = ChessEnvironment()
    obs = env.reset(split="mate_in_2", index=3, opponent="minimax", opponent_depth=3)
    assert obs.metadata["opponent"] == "minimax"
    for _ in range(2):
        board = chess.Board(obs.fen)
        moves_left = 2 - env._agent_moves
        obs = env.step(ChessAction(move=solutions(board, moves_left)[0]))
    assert obs.done and obs.reward == 1.0 and obs.metadata["end_reason"] == "checkmate"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"split": "mate_in_2"}, "both split and index"),
        ({"split": "mate_in_9", "index": 0}, "Unknown task split"),
        ({"split": "mate_in_1", "index": 10_000}, "outside mate_in_1"),
        ({"split": "mate_in_1", "index": 0, "fen": chess.STARTING_FEN}, "either fen or split"),
        ({"split": "mate_in_1", "index": 0, "opponent": "none"}, "needs a defender"),
    ],
)
def test_bad_task_resets_are_refused_saying_why(options, message):
    with pytest.raises(ValueError, match=message):
        ChessEnvironment().reset(**options)


def test_task_routes_over_http(chess_url):
    with Client(chess_url) as client:
        assert [s["name"] for s in client.splits()] == list(SPLITS.values())
        assert client.num_tasks("mate_in_2") == TASKS.num_tasks("mate_in_2")
        assert client.task("mate_in_3", 5) == TASKS.get_task("mate_in_3", 5)
        assert client.tasks("mate_in_1", 2, 4) == TASKS.get_task_range("mate_in_1", 2, 4)
        assert len(client.tasks("mate_in_1")) == TASKS.num_tasks("mate_in_1")
        session = client.session()
        try:
            first = session.reset(split="mate_in_2", index=7)
            assert first.metadata["task"] == {
                "id": "mate_in_2-7",
                "split": "mate_in_2",
                "index": 7,
                "mate_in": 2,
            }
            with pytest.raises(ServerError, match="outside"):
                session.reset(split="mate_in_2", index=-1)
        finally:
            session.close()


def test_a_server_without_tasks_has_no_splits(official_grid_world):
    with Client(official_grid_world) as client:
        assert client.splits() == []
