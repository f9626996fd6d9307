"""Long recordings: each episode's end appends its rows as a part (never rewriting what was saved), rows
leave memory once written, the parts merge as they pile up, and a folder that is not whole, or that two
recorders want, is an error that says what happened."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import gymnasium as gym
import polars as pl
import pytest

import openenv_lab
from openenv_lab.record import TrajectoryFormatError, load_trajectory
from openenv_lab.record.parts import MERGE_EVERY, PartsWriter, parts_folder
from openenv_lab.widgets import TrajectoryViewer


def play(env, episodes: int, steps: int = 2) -> None:
    for episode in range(episodes):
        env.reset(seed=episode)
        for step in range(steps):
            env.step(f"e{episode}s{step}")


def parts(path) -> list[str]:
    return sorted(name for name in os.listdir(parts_folder(path)) if name.endswith(".parquet"))


def test_each_episode_end_appends_its_rows_only_and_they_leave_memory(tmp_path):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=2), path=path)
    play(env, episodes=3)
    assert parts(path) == [f"part-{n:08d}-{n:08d}.parquet" for n in (1, 2, 3)]
    for number, name in enumerate(parts(path)):
        rows = pl.read_parquet(parts_folder(path) / name)
        assert rows["episode"].to_list() == [number] * 3  # that episode's reset and two steps, nothing else
    assert env._rows.rows == []  # written, so out of memory
    before = (parts_folder(path) / parts(path)[0]).stat().st_mtime_ns
    play(env, episodes=1)
    assert (parts_folder(path) / parts(path)[0]).stat().st_mtime_ns == before  # never rewritten
    assert not path.exists()  # the whole file comes when the recording stops...
    running = load_trajectory(path)  # ... and meanwhile the parts are read
    assert running.episodes == [0, 1, 2, 3] and not running.table["cut_short"].any()
    assert env.trajectory.table.equals(running.table.select(env.trajectory.table.columns))
    env.close()
    assert not parts_folder(path).exists()
    whole = load_trajectory(path)
    assert whole.table.equals(running.table) and whole.metadata["seeds"] == [0, 1, 2, 0]


def test_many_parts_merge_and_read_back_in_order(tmp_path):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=1), path=path)
    play(env, episodes=MERGE_EVERY + 3, steps=1)
    merged = f"part-{1:08d}-{MERGE_EVERY:08d}.parquet"
    assert parts(path)[0] == merged and len(parts(path)) == 4
    episodes = load_trajectory(path).table["episode"].to_list()
    assert episodes == [n for n in range(MERGE_EVERY + 3) for _ in (0, 1)]
    # A crash between a merge and the removal of what it merged leaves parts it covers: read once only.
    shutil.copy(parts_folder(path) / parts(path)[1], parts_folder(path) / f"part-{5:08d}-{5:08d}.parquet")
    assert load_trajectory(path).table.height == 2 * (MERGE_EVERY + 3)
    env.close()
    assert pl.read_parquet(path)["episode"].n_unique() == MERGE_EVERY + 3


def test_a_merge_that_fails_loses_and_doubles_nothing(tmp_path, monkeypatch):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=1), path=path)
    merge = PartsWriter._merge

    def full_disk(writer, metadata):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PartsWriter, "_merge", full_disk)
    play(env, episodes=MERGE_EVERY, steps=1)  # the last save's merge fails: the save itself does not
    assert len(parts(path)) == MERGE_EVERY and env._rows.rows == []
    monkeypatch.setattr(PartsWriter, "_merge", merge)
    play(env, episodes=1, steps=1)  # the next save merges them all
    assert parts(path) == [f"part-{1:08d}-{MERGE_EVERY + 1:08d}.parquet"]
    env.close()
    assert pl.read_parquet(path)["episode"].to_list() == [n for n in range(MERGE_EVERY + 1) for _ in (0, 1)]


def test_a_vector_recording_with_a_path_has_the_rows_of_one_without(tmp_path):
    path = tmp_path / "runs.parquet"
    recorders = [
        openenv_lab.RecordVectorTrajectory(gym.make_vec("openenv/echo", num_envs=3, max_steps=2), path=p)
        for p in (path, None)
    ]
    for envs in recorders:
        envs.reset(seed=0)
        for step in range(7):  # episodes end at steps 1 and 4 (a part each), steps 2 and 5 reset them
            envs.step(tuple(f"{i}{step}" for i in range(3)))
    assert len(parts(path)) == 2
    columns = ["env_index", "episode", "step", "action_label", "reward", "cut_short"]
    assert recorders[0].trajectory.table.select(columns).equals(recorders[1].trajectory.table.select(columns))
    for envs in recorders:
        envs.close()
    saved = pl.read_parquet(path).select(columns)
    assert saved.equals(recorders[1].trajectory.table.select(columns))
    assert saved.filter(pl.col("cut_short"))["step"].to_list() == [0, 0, 0, 1, 1, 1]


def test_a_lazy_recording_reads_only_what_a_viewer_asks_for(tmp_path):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=2), path=path)
    play(env, episodes=3)
    env.close()
    trajectory = load_trajectory(path)
    assert trajectory.episodes == [0, 1, 2] and trajectory.summary().height == 3 and len(trajectory) == 9
    assert trajectory.episode(1).table["action_label"].to_list() == [None, "e1s0", "e1s1"]
    curve = openenv_lab.RewardCurve.from_recording(trajectory)
    assert curve.steps == [2, 4, 6] and len(curve.returns) == 3
    viewer = TrajectoryViewer(trajectory)
    assert viewer.episode_picker.value == 0
    assert trajectory._table is None  # nothing above read every column of every row
    assert trajectory.table.height == 9


def test_a_second_recorder_on_the_same_path_is_refused(tmp_path):
    path = tmp_path / "run.parquet"
    first = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=1), path=path)
    second = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=1), path=path)
    play(first, episodes=1, steps=1)  # the first to save holds the folder
    with pytest.raises(FileExistsError, match="another recorder is recording there now") as refused:
        play(second, episodes=1, steps=1)
    assert ".save(path)" in str(refused.value) and len(second.trajectory) == 2  # its rows are kept
    with pytest.raises(FileExistsError, match="another recorder is recording there now"):
        openenv_lab.RecordTrajectory(gym.make("openenv/echo"), path=path)
    second.path = tmp_path / "other.parquet"  # as the message says: another path
    first.close()
    second.close()
    assert load_trajectory(path).table.height == 2
    assert load_trajectory(tmp_path / "other.parquet").table.height == 2
    third = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=1), path=path)  # closed: free
    play(third, episodes=2, steps=1)
    third.close()
    assert load_trajectory(path).episodes == [0, 1]


KILLED = textwrap.dedent(
    """
    import os, signal, sys, gymnasium as gym, openenv_lab
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=2), path=sys.argv[1])
    for episode in range(3):
        env.reset(seed=episode)
        env.step("a")
        env.step("b")
    env.reset(seed=3)
    env.step("in progress")
    os.kill(os.getpid(), signal.SIGKILL)  # no close(), no atexit: what a killed kernel does
    """
)


@pytest.mark.slow
def test_a_killed_recording_is_read_from_its_parts_and_not_silently_overwritten(tmp_path):
    path = tmp_path / "run.parquet"
    killed = subprocess.run([sys.executable, "-c", KILLED, str(path)], timeout=120)
    assert killed.returncode == -signal.SIGKILL
    trajectory = load_trajectory(path)  # the three finished episodes; the one in progress is lost
    assert trajectory.episodes == [0, 1, 2] and trajectory.table.height == 9
    assert not trajectory.table["cut_short"].any()
    with pytest.raises(FileExistsError, match="holds a recording that was never closed") as refused:
        openenv_lab.RecordTrajectory(gym.make("openenv/echo"), path=path)
    assert f"openenv_lab.load_trajectory({str(path)!r})" in str(refused.value)


def test_a_folder_that_is_not_whole_is_an_error_naming_what_is_lost(tmp_path):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=1), path=path)
    play(env, episodes=4, steps=1)
    env._parts.release()  # as if the process had died: the folder stays
    env.path = None
    env.close()
    folder = parts_folder(path)
    second = folder / f"part-{2:08d}-{2:08d}.parquet"
    second.write_bytes(second.read_bytes()[:100])  # cut by something other than our writes
    with pytest.raises(TrajectoryFormatError, match=f"{second.name}.*move it aside to read the others"):
        load_trajectory(path)
    second.unlink()
    with pytest.raises(TrajectoryFormatError, match=r"missing part\(s\) 2 to 2 .* rows are lost"):
        load_trajectory(path)
    newer = pl.read_parquet(folder / f"part-{4:08d}-{4:08d}.parquet")
    newer.write_parquet(
        folder / f"part-{2:08d}-{2:08d}.parquet",
        metadata={"openenv_lab.trajectory": '{"format_version": 99}'},
    )
    with pytest.raises(TrajectoryFormatError, match="written by a newer openenv_lab"):
        load_trajectory(path)
