"""RewardCurve: fed by episodes, by per-step arrays, and by Stable-Baselines3; throttled; static HTML."""

from __future__ import annotations

import io
import os
import re
import stat
import sys

import gymnasium as gym
import numpy as np
import pytest
from PIL import Image

from openenv_lab.widgets import RewardCurve


def test_episodes_steps_and_rolling_mean():
    curve = RewardCurve(window=2, redraw_every=0)
    for value in (1.0, 3.0, 5.0):
        curve.add_episode(value, length=4)
    assert curve.steps == [4, 8, 12]
    assert curve.rolling_mean() == [1.0, 2.0, 4.0]
    picture = Image.open(io.BytesIO(curve.image.value))
    assert picture.size == (512, 256)
    assert "3 episodes, 12 steps" in curve.caption.value


def test_track_follows_each_sub_environment_of_a_vector_env():
    curve = RewardCurve(redraw_every=0)
    curve.track(np.array([1.0, 2.0]), np.array([False, False]))
    curve.track(np.array([1.0, 2.0]), np.array([True, False]))
    curve.track(np.array([5.0, 2.0]), np.array([False, True]))
    assert curve.returns == [2.0, 6.0]
    assert curve.steps == [4, 6]


def test_redraws_are_throttled():
    curve = RewardCurve(redraw_every=3600)
    curve.add_episode(1.0, length=1)  # the first finished episode draws
    first = curve.image.value
    curve.add_episode(2.0, length=1)
    assert curve.image.value == first  # within the hour: no redraw
    curve.redraw()
    assert curve.image.value != first


def test_bad_arguments():
    with pytest.raises(ValueError, match="x must be"):
        RewardCurve(x="time")
    with pytest.raises(ValueError, match="window"):
        RewardCurve(window=0)


@pytest.mark.slow
def test_stable_baselines3_callback():
    from stable_baselines3 import PPO
    from stable_baselines3.common.monitor import Monitor

    curve = RewardCurve(redraw_every=0)
    env = Monitor(gym.make("CartPole-v1"))
    PPO("MlpPolicy", env, n_steps=256, batch_size=64, n_epochs=1, seed=0, device="cpu").learn(
        512, callback=curve.sb3_callback()
    )
    assert len(curve.returns) >= 5 and curve.steps[-1] <= 512
    assert all(r >= 1 for r in curve.returns)  # CartPole pays 1 per step


def test_static_html(tmp_path):
    curve = RewardCurve()
    curve.add_episode(1.0, length=3)
    page = curve.to_html(tmp_path / "curve.html")
    assert page.startswith('<img src="data:image/png;base64,')
    assert (tmp_path / "curve.html").read_text().startswith("<!doctype html>")


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_static_html_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "curve.html"
    path.write_text("old")
    path.chmod(0o644)
    curve = RewardCurve()
    curve.add_episode(1.0, length=3)
    curve.to_html(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not the 0o600 of a mkstemp file
    assert path.read_text().startswith("<!doctype html>") and os.listdir(tmp_path) == ["curve.html"]


def test_notebooks_keep_the_picture_beside_the_widget():
    curve = RewardCurve()
    curve.add_episode(1.0, length=3)
    bundle = curve._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"].startswith('<img src="data:image/png;base64,')


def test_reward_components_are_summed_per_episode_and_drawn():
    plain, curve = RewardCurve(redraw_every=0), RewardCurve(redraw_every=0)
    steps = [
        ([1.0, 2.0], [False, False], [{"market": 1.5, "costs": -0.5}, {"market": 2.0, "costs": 0.0}]),
        ([1.0, 2.0], [True, False], [{"market": 1.0, "costs": 0.0}, {"market": 2.5, "costs": -0.5}]),
        ([3.0, 1.0], [False, True], [{"market": 3.0, "costs": 0.0}, {"market": 1.0, "costs": 0.0}]),
    ]
    for rewards, dones, parts in steps:
        curve.track(np.array(rewards), np.array(dones), parts)
        plain.track(np.array(rewards), np.array(dones))
    assert curve.returns == plain.returns == [2.0, 5.0]
    assert curve.components == {"market": [2.5, 5.5], "costs": [-0.5, -0.5]}
    assert curve.rolling_mean("market") == [2.5, 4.0]
    assert curve.png() != plain.png()  # the components are drawn


@pytest.mark.parametrize(
    ("make", "module", "extra"),
    [("sb3_callback", "stable_baselines3", "sb3"), ("trl_callback", "transformers", "grpo")],
)
def test_a_callback_whose_trainer_is_not_installed_says_what_to_install(monkeypatch, make, module, extra):
    for name in [module, *(name for name in sys.modules if name.startswith(f"{module}."))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed, imported or not
    with pytest.raises(
        ImportError,
        match=f"RewardCurve.{make} needs .*" + re.escape(f'pip install "openenv-lab[{extra}]"'),
    ):
        getattr(RewardCurve(redraw_every=0), make)()


def test_the_sb3_callback_sums_components_per_episode():
    curve = RewardCurve(redraw_every=0)
    callback = curve.sb3_callback()
    for step, (info, done) in enumerate([({"reward_components": {"a": 1.0}}, False), ({}, True)], start=1):
        if done:
            info = {**info, "episode": {"r": 3.0, "l": 2}}
        callback.locals = {"infos": [info], "rewards": np.array([1.0]), "dones": np.array([done])}
        callback.num_timesteps = step
        callback._on_step()
    assert curve.returns == [3.0] and curve.components == {"a": [1.0]}


def _points(curve: RewardCurve) -> tuple[list[float], list[float], str]:
    """The returns as drawn: the x and y of the "episode return" markers, and the x axis's label."""
    axes = curve.figure().axes[0]
    (markers,) = [line for line in axes.lines if line.get_label() == "episode return"]
    return list(markers.get_xdata()), list(markers.get_ydata()), axes.get_xlabel()


def test_the_points_drawn_are_the_returns_given_at_their_steps():
    curve = RewardCurve(window=2, redraw_every=3600)
    for value, length in ((1.0, 4), (-2.0, 6), (5.0, 10)):
        curve.add_episode(value, length=length)
    assert _points(curve) == ([4, 10, 20], [1.0, -2.0, 5.0], "environment steps")
    axes = curve.figure().axes[0]
    (mean,) = [line for line in axes.lines if line.get_label().startswith("mean of last")]
    assert list(mean.get_ydata()) == [1.0, -0.5, 1.5]


def test_episodes_without_a_length_are_drawn_against_episodes_not_all_at_zero():
    curve = RewardCurve(redraw_every=3600)
    with pytest.warns(UserWarning, match="without its length or step"):
        curve.add_episode(1.0)
    curve.add_episode(2.0)
    curve.add_episode(3.0)
    assert _points(curve) == ([1, 2, 3], [1.0, 2.0, 3.0], "episodes")


def test_the_episodes_axis_numbers_episodes_whatever_their_lengths():
    curve = RewardCurve(x="episodes", redraw_every=3600)
    curve.add_episode(4.0, length=100)
    curve.add_episode(-1.0, length=3)
    assert _points(curve) == ([1, 2], [4.0, -1.0], "episodes")
