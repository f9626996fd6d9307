"""Tasks through gymnasium: the catalogue as a DataFrame, choosing a task at reset, playing a list of
them in turn, and a vector env dealing a split out to its sub-environments (our chess server's mates)."""

from __future__ import annotations

import chess
import gymnasium as gym
import numpy as np
import polars as pl
import pytest

import openenv_lab
from openenv_lab.adapters import Transition
from openenv_lab.adapters.chess import ChessAdapter
from openenv_lab.client import EnvironmentMismatch, StepResult
from openenv_lab.envs._episode import Episode
from openenv_lab.envs.tasks import TaskCatalog, spread
from openenv_lab.servers.chess_tasks import TASKS


def solve(env, info) -> int:
    """The action of the first move that keeps the forced mate of the task in progress."""
    from openenv_lab.servers.chess_tasks import solutions

    board = chess.Board(info["fen"])
    for depth in range(1, 4):
        found = solutions(board, depth)
        if found:
            return env.unwrapped.adapter.move_to_action(found[0])
    raise AssertionError("no mate")


def test_the_catalogue_is_a_dataframe_of_every_task(chess_url):
    with gym.make("openenv/chess", base_url=chess_url) as env:
        table = env.unwrapped.tasks
    assert isinstance(table, pl.DataFrame)
    assert table.columns[:3] == ["split", "index", "id"]
    assert table.height == sum(TASKS.num_tasks(s["name"]) for s in TASKS.list_splits())
    row = table.filter(pl.col("id") == "mate_in_3-4").row(0, named=True)
    assert row["fen"] == TASKS.get_task("mate_in_3", 4)["fen"] and row["mate_in"] == 3


def test_tasks_are_played_in_turn_and_solved_or_failed(chess_url):
    with gym.make("openenv/chess", base_url=chess_url, tasks="mate_in_1") as env:
        ids = []
        for episode in range(3):
            obs, info = env.reset(seed=episode)
            ids.append(info["task"]["id"])
            assert info["fen"] == TASKS.get_task("mate_in_1", episode)["fen"]
            obs, reward, terminated, truncated, info = env.step(solve(env, info))
            assert (reward, terminated, truncated, info["end_reason"]) == (1.0, True, False, "checkmate")
        assert ids == ["mate_in_1-0", "mate_in_1-1", "mate_in_1-2"]

        obs, info = env.reset()
        solution = solve(env, info)
        other = next(a for a in np.flatnonzero(obs["action_mask"]) if a != solution)
        obs, reward, terminated, truncated, info = env.step(other)
        if info["end_reason"] != "checkmate":  # a position may hold more than one mate
            assert (reward, terminated, info["end_reason"]) == (0.0, True, "out_of_moves")


def test_a_reset_names_a_task_by_id_or_by_split_and_index(chess_url):
    with gym.make("openenv/chess", base_url=chess_url) as env:
        _, info = env.reset(options={"task_id": "mate_in_2-7"})
        assert info["task"] == {"id": "mate_in_2-7", "split": "mate_in_2", "index": 7, "mate_in": 2}
        _, info = env.reset(options={"split": "mate_in_3", "index": 1})
        assert info["task"]["id"] == "mate_in_3-1"
        _, info = env.reset()  # no task named, none given at make: a game from the start
        assert "task" not in info and chess.Board(info["fen"]).fullmove_number == 1
        with pytest.raises(ValueError, match=r"No task 'mate_in_2-9999'.*called like 'mate_in_1-0'"):
            env.reset(options={"task_id": "mate_in_2-9999"})
        with pytest.raises(ValueError, match=r"split 'mate_in_4'.*mate_in_1 \(0-"):
            env.reset(options={"split": "mate_in_4", "index": 0})
        _, info = env.reset(options={"task_id": "mate_in_1-3"})  # the session survived the refusals
        assert info["task"]["index"] == 3


def test_a_dataframe_chooses_the_tasks(chess_url):
    with gym.make("openenv/chess", base_url=chess_url) as probe:
        chosen = probe.unwrapped.tasks.filter(pl.col("split") == "mate_in_2").tail(2)
    with gym.make("openenv/chess", base_url=chess_url, tasks=chosen) as env:
        ids = [env.reset()[1]["task"]["id"] for _ in range(3)]
    last = TASKS.num_tasks("mate_in_2") - 1
    assert ids == [f"mate_in_2-{last - 1}", f"mate_in_2-{last}", f"mate_in_2-{last - 1}"]


def test_a_vector_env_deals_a_split_out_to_its_sub_environments(chess_url):
    envs = gym.make_vec("openenv/chess", num_envs=4, base_url=chess_url, tasks="mate_in_1")
    try:
        _, infos = envs.reset(seed=0)
        assert list(infos["task"]["index"]) == [0, 1, 2, 3]
        # Each sub-environment converts its own move: the boards differ.
        adapters = envs.unwrapped.adapters
        actions = np.array([adapters[i].move_to_action(_first_mate(infos["fen"][i])) for i in range(4)])
        _, rewards, terminations, _, _ = envs.step(actions)
        assert list(rewards) == [1.0] * 4 and terminations.all()
        _, _, _, _, infos = envs.step(actions)  # next-step autoreset: the next tasks of each share
        assert list(infos["task"]["index"]) == [4, 5, 6, 7]
    finally:
        envs.close()


def _first_mate(fen: str) -> str:
    from openenv_lab.servers.chess_tasks import solutions

    return solutions(chess.Board(fen), 1)[0]


def test_spread_deals_round_robin_and_repeats_a_short_list():
    rows = [{"id": str(i)} for i in range(5)]
    assert [[r["id"] for r in share] for share in spread(rows, 2)] == [["0", "2", "4"], ["1", "3"]]
    assert [[r["id"] for r in share] for share in spread(rows[:2], 3)] == [["0"], ["1"], ["0"]]


def test_a_server_without_tasks_says_so(official_grid_world):
    with gym.make("openenv/remote", base_url=official_grid_world) as env:
        assert env.unwrapped.tasks.height == 0
        with pytest.raises(ValueError, match="offers no tasks"):
            env.reset(options={"task_id": "anything"})
    with pytest.raises(ValueError, match=r"not a split of this server.*no task routes"):
        gym.make("openenv/remote", base_url=official_grid_world, tasks="train")


class _Rows(TaskCatalog):
    """A catalogue read from a list, for the pure rules of `Episode` (no server involved)."""

    def __init__(self, rows):
        super().__init__(lambda: None)
        self._rows = rows
        self._by_id = {row["id"]: row for row in rows}
        self._splits = sorted({row["split"] for row in rows})


def test_a_server_playing_another_task_than_the_one_asked_is_refused():
    catalog = _Rows([{"split": "s", "index": 0, "id": "s-0"}, {"split": "s", "index": 1, "id": "s-1"}])
    adapter = ChessAdapter()
    adapter.decode = lambda result, sent: Transition({}, 0.0, False, False, {})  # type: ignore[method-assign]
    episode = Episode(adapter, "http://127.0.0.1:1", catalog)
    episode.reset_request(0, {"task_id": "s-1"})
    reported = {"task": {"split": "s", "index": 0}, "seed": 0}
    reply = StepResult(observation={}, reward=0.0, done=False, metadata=reported)
    with pytest.raises(EnvironmentMismatch) as caught:
        episode.reset_result(reply)
    assert caught.value.asked["index"] == 1 and caught.value.reported["index"] == 0
    adapter.check_identity = False
    episode.reset_request(0, {"task_id": "s-1"})
    assert episode.reset_result(reply)[1]["task"]["index"] == 0


def test_recordings_name_the_task_of_every_row(chess_url):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", base_url=chess_url, tasks="mate_in_1"))
    for _ in range(2):
        _, info = env.reset()
        env.step(solve(env, info))
    table = env.trajectory.table
    env.close()
    assert table["task_id"].to_list() == ["mate_in_1-0"] * 2 + ["mate_in_1-1"] * 2

    envs = openenv_lab.RecordVectorTrajectory(
        gym.make_vec("openenv/chess", num_envs=2, base_url=chess_url, tasks=["mate_in_2-0", "mate_in_3-0"])
    )
    envs.reset(seed=0)
    envs.step(np.zeros(2, dtype=np.int64))
    table = envs.trajectory.table
    envs.close()
    by_env = dict(table.group_by("env_index").agg(pl.col("task_id").unique()).iter_rows())
    assert {k: list(v) for k, v in by_env.items()} == {0: ["mate_in_2-0"], 1: ["mate_in_3-0"]}


def test_an_evaluation_on_a_task_set_names_each_episodes_task(chess_url):
    """`evaluate` read ``info["task"]`` as one dict per sub-environment, but a vector env batches it (a
    dict of arrays): an evaluation on a task set raised ``KeyError: 0`` at its first reset."""
    result = openenv_lab.evaluate(
        "masked-random", "chess", episodes=4, n_envs=2, base_url=chess_url, tasks="mate_in_1", progress=False
    )
    table = result.episodes
    assert not table["failed"].any()
    assert sorted(table["task_id"].to_list()) == [f"mate_in_1-{i}" for i in range(4)]  # 0, 2 and 1, 3
