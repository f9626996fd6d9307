"""Recording: one tidy row per step, the family's columns, Parquet files that come back identical."""

from __future__ import annotations

import io
import json
import os
import re
import stat

import chess
import gymnasium as gym
import numpy as np
import polars as pl
import pytest
from gymnasium.vector import AutoresetMode
from PIL import Image

import openenv_lab
from openenv_lab.record import FORMAT_VERSION, Trajectory, TrajectoryFormatError, load_trajectory


def first_legal(obs) -> int:
    return int(np.flatnonzero(obs["action_mask"])[0])


def play_chess(env, seed: int, steps: int = 100) -> None:
    obs, _ = env.reset(seed=seed)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(first_legal(obs))
        if terminated or truncated:
            return


def test_chess_rows_are_the_servers_replies(chess_url):
    """Every row against the server's own replies to the same moves on the same seeds, read on a raw
    session: the recorder must not compute what it records from what it recorded."""
    env = openenv_lab.RecordTrajectory(
        gym.make("openenv/chess", base_url=chess_url, agent_color="white", max_moves=8)
    )
    played = {}
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        played[seed] = []
        done = False
        while not done:
            action = first_legal(obs)
            played[seed].append(env.unwrapped.adapter.action_to_move(action))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    table = env.trajectory.table
    env.close()

    expected = []
    for episode, seed in enumerate((0, 1)):
        with openenv_lab.Session(chess_url) as session:
            reply = session.reset(seed=seed, agent_color="white", max_moves=8)
            expected.append(
                {
                    "episode": episode,
                    "step": 0,
                    "seed": seed,
                    "move": None,
                    "action_label": None,
                    "fen": reply.observation["fen"],
                    "reward": 0.0,
                    "return": 0.0,
                    "opponent_move": None,
                    "terminated": False,
                    "truncated": False,
                    "end_reason": None,
                }
            )
            total = 0.0
            for step, move in enumerate(played[seed], start=1):
                before = chess.Board(reply.observation["fen"])
                reply = session.step({"move": move})
                total += reply.reward
                end_reason = reply.metadata.get("end_reason")
                expected.append(
                    {
                        "episode": episode,
                        "step": step,
                        "seed": None,
                        "move": move,
                        "action_label": f"{move} ({before.san(chess.Move.from_uci(move))})",
                        "fen": reply.observation["fen"],
                        "reward": reply.reward,
                        "return": total,
                        "opponent_move": reply.metadata.get("opponent_move"),
                        "terminated": reply.done and end_reason != "move_limit",
                        "truncated": end_reason == "move_limit",
                        "end_reason": end_reason,
                    }
                )
    assert table.select(list(expected[0])).to_dicts() == expected
    assert [row["end_reason"] for row in expected if row["step"] == 4] == ["move_limit"] * 2  # 8 plies
    assert (table["latency_ms"] > 0).all()


def test_atari_screens_are_png_bytes_of_the_observation():
    env = openenv_lab.RecordTrajectory(gym.make("openenv/atari", game="pong"))
    obs, _ = env.reset(seed=0)
    for action in (1, 2, 3):
        obs, *_ = env.step(action)
    table = env.trajectory.table
    env.close()
    assert table.schema["screen_png"] == pl.Binary
    decoded = np.asarray(Image.open(io.BytesIO(table["screen_png"][-1])))
    np.testing.assert_array_equal(decoded, obs)
    assert table["action_label"].to_list()[1:] == ["FIRE", "RIGHT", "LEFT"]
    assert env.trajectory.metadata["action_meanings"][0] == "NOOP"


def test_finrl_rows_and_metadata():
    env = openenv_lab.RecordTrajectory(gym.make("openenv/finrl"))
    env.reset(seed=0)
    env.step(np.array([1.0, 0, 0, 0, 0], dtype=np.float32))
    trajectory = env.trajectory
    env.close()
    row = trajectory.table.row(1, named=True)
    assert row["action_label"] == "ALFA +100"
    assert row["holdings"] == [100, 0, 0, 0, 0] and len(row["close"]) == 5
    assert row["date"] > trajectory.table.row(0, named=True)["date"]
    assert trajectory.metadata["tickers"] == ["ALFA", "BRVO", "CHRL", "DLTA", "ECHO"]
    assert json.loads(row["action"]) == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_save_and_load_give_back_the_same_table_and_metadata(tmp_path, chess_url):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=6))
    play_chess(env, seed=3)
    trajectory = env.trajectory
    env.close()
    path = trajectory.save(tmp_path / "runs" / "chess.parquet")
    loaded = load_trajectory(path)
    assert loaded.table.equals(trajectory.table)
    metadata = loaded.metadata
    assert metadata["format_version"] == FORMAT_VERSION
    assert metadata["env_id"] == "openenv/chess" and metadata["base_url"] == chess_url
    assert metadata["server_metadata"]["name"] == "chess"
    assert metadata["server_metadata"]["version"] == openenv_lab.__version__
    assert len(metadata["schema_sha256"]) == 64
    assert (
        metadata["packages"]["openenv-lab"] == openenv_lab.__version__ and "gymnasium" in metadata["packages"]
    )
    assert metadata["seeds"] == [3] and metadata["wall_time_s"] > 0
    assert metadata["env_kwargs"]["max_moves"] == 6
    assert [p.name for p in path.parent.iterdir()] == ["chess.parquet"]  # no temporary file left


def test_autosave_keeps_finished_episodes_only(tmp_path, chess_url):
    path = tmp_path / "auto.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=4), path=path)
    play_chess(env, seed=0)
    assert load_trajectory(path).episodes == [0]
    obs, _ = env.reset(seed=1)
    env.step(first_legal(obs))  # ... and then the kernel dies: the file has the finished episode
    assert load_trajectory(path).episodes == [0]
    env.close()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, chess_url, monkeypatch):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=4))
    play_chess(env, seed=0)
    path = env.save(tmp_path / "t.parquet")
    before = path.read_bytes()

    def broken(self, file, **kwargs):
        with open(file, "wb") as handle:
            handle.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken)
    with pytest.raises(OSError, match="disk full"):
        env.save(path)
    env.close()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


def test_files_that_are_not_ours_are_refused(tmp_path):
    other = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(other)
    with pytest.raises(TrajectoryFormatError, match="not an openenv_lab trajectory"):
        load_trajectory(other)
    newer = tmp_path / "newer.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(
        newer, metadata={"openenv_lab.trajectory": json.dumps({"format_version": FORMAT_VERSION + 1})}
    )
    with pytest.raises(TrajectoryFormatError, match="newer openenv_lab"):
        load_trajectory(newer)
    text = tmp_path / "notes.parquet"
    text.write_text("hello")
    with pytest.raises(TrajectoryFormatError, match="not a Parquet file"):
        load_trajectory(text)
    with pytest.raises(FileNotFoundError):
        load_trajectory(tmp_path / "missing.parquet")


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_recording_matches_single_env_recordings(chess_url, mode):
    options = {"agent_color": "white", "max_moves": 6}
    envs = openenv_lab.RecordVectorTrajectory(
        gym.make_vec("openenv/chess", num_envs=2, autoreset_mode=mode, **options)
    )
    obs, _ = envs.reset(seed=10)
    for _ in range(4):  # episodes last 3 steps: this crosses an autoreset
        actions = np.array([int(np.flatnonzero(m)[0]) if m.any() else 0 for m in obs["action_mask"]])
        obs, *_ = envs.step(actions)
    recorded = envs.trajectory.table
    envs.close()
    for index in (0, 1):
        single = openenv_lab.RecordTrajectory(gym.make("openenv/chess", **options))
        play_chess(single, seed=10 + index, steps=3)
        expected = single.trajectory.table.filter(pl.col("episode") == 0)
        single.close()
        mine = recorded.filter(
            (pl.col("env_index") == index)
            & (pl.col("episode") == recorded.filter(pl.col("env_index") == index)["episode"].min())
        )
        columns = [
            "step",
            "action",
            "action_label",
            "reward",
            "return",
            "terminated",
            "truncated",
            "seed",
            "fen",
            "move",
        ]
        assert mine.select(columns).equals(expected.select(columns))
    # NEXT_STEP: the step after the end is the reset; SAME_STEP: the reset comes with the end.
    expected_steps = [0, 1, 2, 3, 0] if mode == AutoresetMode.NEXT_STEP else [0, 1, 2, 3, 0, 1]
    assert recorded.filter(pl.col("env_index") == 0)["step"].to_list() == expected_steps


def test_gymnasiums_sync_vector_env_is_recorded_too(chess_url):
    envs = openenv_lab.RecordVectorTrajectory(
        gym.vector.SyncVectorEnv([lambda: gym.make("openenv/chess", max_moves=4) for _ in range(2)])
    )
    obs, _ = envs.reset(seed=0)
    envs.step(np.array([int(np.flatnonzero(m)[0]) for m in obs["action_mask"]]))
    table = envs.trajectory.table
    envs.close()
    assert table.height == 4 and "fen" in table.columns and table["action_label"][2].endswith(")")


def test_summary_and_episode_selection(chess_url):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=4))
    play_chess(env, seed=0)
    play_chess(env, seed=1)
    trajectory = env.trajectory
    env.close()
    summary = trajectory.summary()
    assert summary["episode"].to_list() == [0, 1] and summary["ended"].to_list() == ["truncated"] * 2
    assert trajectory.episode(1).table["episode"].unique().to_list() == [1]
    with pytest.raises(KeyError, match="No episode 7"):
        trajectory.episode(7)


@pytest.fixture
def umask_027():
    previous = os.umask(0o027)
    yield
    os.umask(previous)


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_saved_files_get_the_usual_mode_and_keep_an_existing_one(tmp_path, umask_027):
    trajectory = Trajectory(pl.DataFrame(), {"env_id": "x"})  # an empty recording is still written
    parquet, page = tmp_path / "t.parquet", tmp_path / "t.html"
    trajectory.save(parquet)
    trajectory.to_html(page)
    assert [stat.S_IMODE(p.stat().st_mode) for p in (parquet, page)] == [0o640, 0o640]  # not mkstemp's 0o600
    parquet.chmod(0o644)
    page.chmod(0o604)
    trajectory.save(parquet)
    trajectory.to_html(page)
    assert [stat.S_IMODE(p.stat().st_mode) for p in (parquet, page)] == [0o644, 0o604]
    assert sorted(os.listdir(tmp_path)) == ["t.html", "t.parquet"]


def test_a_path_that_cannot_be_written_is_refused_when_the_recorder_is_made(tmp_path):
    (tmp_path / "file").write_text("x")
    env = gym.make("openenv/echo")
    with pytest.raises(
        NotADirectoryError,
        match=re.escape(f"Cannot save the recording to {tmp_path / 'file' / 'sub' / 't.parquet'}: "),
    ):
        openenv_lab.RecordTrajectory(env, path=tmp_path / "file" / "sub" / "t.parquet")
    with pytest.raises(IsADirectoryError, match="it is a directory"):
        openenv_lab.RecordTrajectory(env, path=tmp_path)
    env.close()
    envs = gym.make_vec("openenv/echo", num_envs=1)
    with pytest.raises(
        IsADirectoryError, match=re.escape(f"Cannot save the recording to {tmp_path}: it is a directory")
    ):
        openenv_lab.RecordVectorTrajectory(envs, path=tmp_path)
    envs.close()


def test_a_failed_autosave_names_the_path_and_keeps_the_rows(tmp_path, chess_url):
    path = tmp_path / "t.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=2), path=path)
    path.mkdir()  # made after the check: the save at the end of the episode fails
    with pytest.raises(IsADirectoryError) as failure:
        play_chess(env, seed=0)
    message = str(failure.value)
    assert message.startswith(f"Cannot save the recording to {path}: it is a directory")
    assert ".tmp" not in message and ".save(path)" in message
    assert len(env.trajectory) == 2  # the reset and the last step
    with pytest.raises(
        IsADirectoryError, match=re.escape(f"Cannot save the recording to {path}: it is a directory")
    ):
        env.save(path)
    with pytest.warns(UserWarning, match="Cannot save the recording"):
        env.close()  # closes anyway; the rows stay in env.trajectory
    assert len(env.trajectory) == 2
    assert os.listdir(tmp_path) == ["t.parquet"] and os.listdir(path) == []


def test_an_action_outside_the_space_gets_the_envs_own_error(chess_url):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=4))
    obs, _ = env.reset(seed=0)
    for action in ("e2e4", None, 4672):
        with pytest.raises(ValueError, match="is not in the action space Discrete"):
            env.step(action)
    env.step(first_legal(obs))
    assert env.trajectory.table["step"].to_list() == [0, 1]

    def broken(action):
        raise RuntimeError("an adapter bug")

    env.unwrapped.adapter.describe_action = broken
    with pytest.raises(RuntimeError, match="an adapter bug"):  # a valid action: the bug is not hidden
        env.step(first_legal(obs))
    env.close()


def test_damaged_trajectory_files_are_refused_at_load(tmp_path):
    cases = {
        "{not json": "damaged openenv_lab metadata .*: not JSON",
        "[1, 2]": "damaged openenv_lab metadata .*: a JSON list, not an object",
        json.dumps({"format_version": "1"}): "format_version is '1', not an integer",
        json.dumps({"format_version": FORMAT_VERSION}): "not the columns of a trajectory: env_index, episode",
    }
    for number, (stored, problem) in enumerate(cases.items()):
        path = tmp_path / f"{number}.parquet"
        pl.DataFrame({"a": [1]}).write_parquet(path, metadata={"openenv_lab.trajectory": stored})
        with pytest.raises(TrajectoryFormatError, match=f"^{re.escape(str(path))} .*{problem}"):
            load_trajectory(path)
    empty = Trajectory(pl.DataFrame(), {}).save(tmp_path / "empty.parquet")  # nothing recorded yet: fine
    assert load_trajectory(empty).episodes == []


def test_a_format_1_recording_loads_with_its_screens_under_todays_name(tmp_path):
    """Format 1 named Atari's recorded screens ``frame_png``; they load as ``screen_png``."""
    import json

    from openenv_lab.record.trajectory import BASE_COLUMNS

    row = {column: 0 for column in BASE_COLUMNS} | {"frame_png": b"\x89PNG"}
    path = tmp_path / "old.parquet"
    old = {"format_version": 1, "family": "atari", "env_id": "openenv/atari"}
    pl.DataFrame([row]).write_parquet(path, metadata={"openenv_lab.trajectory": json.dumps(old)})
    loaded = openenv_lab.load_trajectory(path)
    assert "screen_png" in loaded.table.columns and "frame_png" not in loaded.table.columns
    assert loaded.table["screen_png"][0] == b"\x89PNG"
