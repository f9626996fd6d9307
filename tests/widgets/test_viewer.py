"""The viewer, the comparison and the static HTML, driven through their widget models (no browser here)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import polars as pl
import pytest

import openenv_lab
from openenv_lab.record import Trajectory
from openenv_lab.render.pages import trajectory_html
from openenv_lab.widgets import Comparison, TrajectoryViewer, compare, register_renderer, show


@pytest.fixture(scope="module")
def chess_trajectory(chess_url) -> Trajectory:
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", opponent="greedy", max_moves=30))
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["action_mask"])[-1]))
            done = terminated or truncated
    trajectory = env.trajectory
    env.close()
    return trajectory


def test_show_accepts_a_trajectory_a_path_a_wrapper_and_a_frame(chess_trajectory, tmp_path):
    path = chess_trajectory.save(tmp_path / "t.parquet")
    for source in (chess_trajectory, path, str(path), chess_trajectory.table):
        viewer = show(source)
        assert isinstance(viewer, TrajectoryViewer)
    with pytest.raises(TypeError, match="show\\(\\) takes"):
        show(42)


def test_slider_play_buttons_and_panes(chess_trajectory):
    viewer = show(chess_trajectory)
    last = chess_trajectory.episode(0).table.height - 1
    assert (viewer.slider.max, viewer.play.max) == (last, last)
    board_at_start = viewer.main.value
    viewer.play.value = 3  # what pressing Play does, tick by tick: the link moves the slider
    assert viewer.slider.value == 3 and viewer.main.value != board_at_start
    viewer.forward.click()
    assert viewer.step == 4
    viewer.back.click()
    viewer.back.click()
    assert viewer.step == 2
    viewer.step = 10_000
    assert viewer.step == last  # clamped
    assert "<svg" in viewer.main.value and "background:#ffe9a8" in viewer.table.value
    viewer.speed.value = 10
    assert viewer.play.interval == 100


def test_episode_picker_switches_episodes(chess_trajectory):
    viewer = show(chess_trajectory)
    assert [value for _, value in viewer.episode_picker.options] == [0, 1]
    viewer.step = 2
    viewer.episode_picker.value = 1
    assert viewer.step == 0
    assert viewer.slider.max == chess_trajectory.episode(1).table.height - 1


def test_an_empty_recording_gives_a_message(chess_url):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess"))
    shown = show(env)
    env.close()
    assert "Nothing recorded yet" in repr(shown) and "Nothing recorded yet" in shown._repr_html_()
    assert "Empty trajectory" in trajectory_html(env.trajectory)


def test_long_episodes_are_drawn_lazily():
    calls = []

    @register_renderer("counting")
    def counting(episode, index, metadata, *, main=True):
        calls.append(index)
        return {"main": f"<p>{index}</p>", "side": ""}

    steps = 100_000
    frame = pl.DataFrame(
        {
            "env_index": [0] * steps,
            "episode": [0] * steps,
            "step": list(range(steps)),
            "action": [0] * steps,
            "action_label": ["a"] * steps,
            "reward": [0.0] * steps,
            "return": [0.0] * steps,
            "terminated": [False] * steps,
            "truncated": [False] * steps,
        }
    )
    viewer = show(Trajectory(frame, {"family": "counting"}))
    viewer.step = steps - 1
    assert calls == [0, steps - 1]  # only the steps shown were drawn
    assert viewer.main.value == f"<p>{steps - 1}</p>"
    with pytest.raises(ValueError, match="over the 1 MB cap"):
        trajectory_html(viewer.trajectory, max_bytes=1_000_000, sample=False)
    page = trajectory_html(viewer.trajectory, max_bytes=1_000_000)
    assert "Showing every" in page and len(page) < 1_500_000


def test_compare_drives_both_viewers_from_one_slider(chess_trajectory):
    comparison = compare(chess_trajectory.episode(0), chess_trajectory.episode(1), labels=("first", "second"))
    shortest = min(comparison.left.slider.max, comparison.right.slider.max)
    comparison.slider.value = shortest
    assert comparison.left.step == comparison.right.step == shortest
    comparison.slider.value = comparison.slider.max
    assert {comparison.left.step, comparison.right.step} == {
        comparison.left.slider.max,
        comparison.right.slider.max,
    }


def test_static_html_is_self_contained(chess_trajectory, tmp_path):
    page = chess_trajectory.to_html(tmp_path / "replay.html")
    text = (tmp_path / "replay.html").read_text()
    assert text.startswith("<!doctype html>") and page in text
    assert 'src="http' not in text and "<script src" not in text and "<link" not in text  # nothing to fetch
    steps = chess_trajectory.episode(0).table.height
    assert text.count('"step": "') == steps  # every step is in the page ...
    assert text.count("<svg") == steps  # ... with its board
    assert chess_trajectory._repr_html_().startswith("<div")


def test_a_comparison_is_one_static_page_too(chess_trajectory, tmp_path):
    comparison = compare(
        chess_trajectory.episode(0), chess_trajectory.episode(1), labels=("random", "trained")
    )
    page = comparison.to_html(tmp_path / "pair.html")
    assert page in (tmp_path / "pair.html").read_text()
    assert "random · openenv/chess · episode 0" in page and "trained · openenv/chess · episode 1" in page
    steps = sum(chess_trajectory.episode(n).table.height for n in (0, 1))
    assert page.count("<script>") == 2 and page.count('"step": "') == steps  # both replays, every step
    unlabelled = Comparison(TrajectoryViewer(chess_trajectory), TrajectoryViewer(chess_trajectory)).to_html()
    assert unlabelled.count(">openenv/chess · episode 0<") == 2


def test_notebooks_keep_a_static_replay_beside_the_widget(chess_trajectory):
    bundle = show(chess_trajectory)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle  # Jupyter shows the live viewer
    assert bundle["text/html"].startswith("<div") and "<svg" in bundle["text/html"]  # GitHub shows this
    pair = compare(chess_trajectory.episode(0), chess_trajectory.episode(1))._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in pair and pair["text/html"].count("<script>") == 2
