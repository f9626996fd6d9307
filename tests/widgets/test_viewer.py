"""The viewer, the comparison and the static HTML, driven through their widget models (no browser here)."""

from __future__ import annotations

import html
import re

import chess
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


def _shown(svg: str) -> dict[tuple[int, int], str]:
    """The pieces an SVG board shows: (x, y) of each piece's drawing -> its name (``white-pawn``)."""
    uses = re.findall(r'<use href="#([a-z]+-[a-z]+)"[^>]*transform="translate\((\d+), (\d+)\)"', svg)
    return {(int(x), int(y)): name for name, x, y in uses}


def _recorded(fen: str, *, white_below: bool = True) -> dict[tuple[int, int], str]:
    """Where python-chess's SVG (coordinates: a 15-unit margin, 45-unit squares) draws a FEN's pieces."""
    pieces = {}
    for square, piece in chess.Board(fen).piece_map().items():
        column, row = chess.square_file(square), 7 - chess.square_rank(square)
        if not white_below:
            column, row = 7 - column, 7 - row
        name = f"{'white' if piece.color else 'black'}-{chess.piece_name(piece.piece_type)}"
        pieces[(15 + 45 * column, 15 + 45 * row)] = name
    return pieces


def _highlighted(table_html: str) -> tuple[int, str]:
    """The step number and action label of the row the step table highlights."""
    row = re.search(r'font-weight:600"><td>(\d+)</td><td>([^<]*)</td>', table_html)
    assert row, "no highlighted row"
    return int(row.group(1)), html.unescape(row.group(2))


def _board_at(episode, step: int) -> dict[tuple[int, int], str]:
    """The recorded position at ``step``, seen from the agent's side (its pieces below)."""
    return _recorded(episode["fen"][step], white_below=episode["agent_color"][step] != "black")


def test_each_step_shows_the_position_and_row_recorded_at_it(chess_trajectory):
    viewer = show(chess_trajectory)
    episode = chess_trajectory.episode(0).table
    for step in range(episode.height):
        viewer.step = step
        assert _shown(viewer.main.value) == _board_at(episode, step), f"step {step}"
        label = episode["action_label"][step]
        assert _highlighted(viewer.table.value) == (episode["step"][step], label or "reset")


def test_slider_play_and_step_buttons_move_through_the_episode(chess_trajectory):
    viewer = show(chess_trajectory)
    episode = chess_trajectory.episode(0).table
    last = episode.height - 1
    assert (viewer.slider.max, viewer.play.max) == (last, last)
    viewer.play.value = 3  # what pressing Play does, tick by tick: the link moves the slider
    assert viewer.slider.value == 3
    assert _shown(viewer.main.value) == _board_at(episode, 3)
    viewer.forward.click()
    assert viewer.step == 4 and _shown(viewer.main.value) == _board_at(episode, 4)
    viewer.back.click()
    viewer.back.click()
    assert viewer.step == 2 and _highlighted(viewer.table.value)[0] == 2
    viewer.step = 10_000
    assert viewer.step == last and _shown(viewer.main.value) == _board_at(episode, last)  # clamped
    viewer.speed.value = 10
    assert viewer.play.interval == 100


def test_a_black_agent_sees_its_pieces_below(chess_url):
    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", agent_color="black", max_moves=4))
    obs, _ = env.reset(seed=0)
    env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    trajectory = env.trajectory
    env.close()
    viewer = show(trajectory)
    viewer.step = 1
    assert _shown(viewer.main.value) == _recorded(trajectory.table["fen"][1], white_below=False)


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
