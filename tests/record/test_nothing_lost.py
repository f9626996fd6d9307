"""Recordings lose nothing: close(), interpreter exit and Ctrl+C save the episode in progress (marked
``cut_short``), and a process killed mid-write leaves the previous file whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import polars as pl
import pytest

import openenv_lab


class InterruptAt(gym.Wrapper):
    """Raises KeyboardInterrupt (what Ctrl+C does) at the n-th step."""

    def __init__(self, env, n: int) -> None:
        super().__init__(env)
        self.n, self.steps = n, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.n:
            raise KeyboardInterrupt
        return self.env.step(action)


@pytest.mark.slow
def test_close_saves_the_episode_in_progress_marked_cut_short(tmp_path):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=2), path=path)
    env.reset(seed=0)
    env.step("a")
    env.step("b")  # the first episode ends (max_steps): saved then
    env.reset(seed=1)
    env.step("c")  # the second is in progress
    env.close()
    table = pl.read_parquet(path)
    assert table["episode"].to_list() == [0, 0, 0, 1, 1]
    assert table["cut_short"].to_list() == [False, False, False, True, True]
    assert table.filter(pl.col("episode") == 1)["truncated"].to_list() == [False, False]  # as it really was
    assert openenv_lab.load_trajectory(path).table.height == 5


def test_ctrl_c_in_a_step_saves_and_still_interrupts(tmp_path):
    path = tmp_path / "run.parquet"
    env = openenv_lab.RecordTrajectory(InterruptAt(gym.make("openenv/echo"), n=3), path=path)
    env.reset(seed=0)
    env.step("a")
    env.step("b")
    with pytest.raises(KeyboardInterrupt):
        env.step("c")
    assert pl.read_parquet(path)["step"].to_list() == [0, 1, 2]
    assert pl.read_parquet(path)["cut_short"].all()
    env.close()


def test_a_vector_recording_saves_on_close(tmp_path):
    path = tmp_path / "runs.parquet"
    envs = openenv_lab.RecordVectorTrajectory(gym.make_vec("openenv/echo", num_envs=2), path=path)
    envs.reset(seed=0)
    envs.step(("a", "bb"))
    envs.close()
    table = pl.read_parquet(path)
    assert table.height == 4 and table["cut_short"].all()


@pytest.mark.slow
def test_interpreter_exit_saves_without_close(tmp_path):
    path = tmp_path / "run.parquet"
    script = textwrap.dedent(
        f"""
        import gymnasium as gym, openenv_lab
        env = openenv_lab.RecordTrajectory(gym.make("openenv/echo"), path={str(path)!r})
        env.reset(seed=0)
        env.step("hello")
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    table = pl.read_parquet(path)
    assert table["action_label"].to_list() == [None, "hello"] and table["cut_short"].all()


WRITER = textwrap.dedent(
    """
    import sys, gymnasium as gym, openenv_lab
    env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=100_000))
    env.reset(seed=0)
    for i in range(8_000):
        env.step("x" * 200)
    env.save(sys.argv[1])
    print("first", flush=True)
    while True:  # rewrite it for ever: the parent kills us mid-write
        env.step("y")
        env.save(sys.argv[1])
    """
)


@pytest.mark.slow
def test_a_process_killed_mid_write_leaves_the_previous_file_whole(tmp_path):
    path = tmp_path / "run.parquet"
    for attempt in range(5):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert writer.stdout.readline().strip() == "first"
            time.sleep(0.05 + 0.07 * attempt)  # somewhere inside one of the rewrites
            os.kill(writer.pid, signal.SIGKILL)
        finally:
            writer.wait(30)
        table = pl.read_parquet(path)  # whole: the last rename, never a half-written file
        assert table.height >= 8_001
        assert table["action_label"][1] == "x" * 200
