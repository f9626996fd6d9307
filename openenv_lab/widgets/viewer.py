"""The trajectory viewer: Play, a step slider and panes redrawn from one callback (stock ipywidgets only).

Only widgets that ship with ipywidgets are used, linked with ``widgets.link`` (kernel-side; ``jslink`` is
broken on Colab), so the viewer works in JupyterLab, VS Code and Colab without a custom widget manager.
Steps are drawn on demand, one at a time, so a 100,000-step episode is as quick to scrub as a short one.
Outside a live kernel (GitHub, nbviewer) the viewer shows its static HTML replay instead.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..record.trajectory import Trajectory, load_trajectory
from ..render.pages import DEFAULT_MAX_BYTES, side_by_side, trajectory_html, write_html
from ..render.renderers import renderer_for, step_table
from .bundle import widget_bundle

__all__ = ["NOTEBOOK_FALLBACK_BYTES", "TrajectoryViewer", "compare", "show"]

#: Size cap of the static replay saved in a notebook beside the live widget (for GitHub, nbviewer).
NOTEBOOK_FALLBACK_BYTES = 2_000_000


class TrajectoryViewer:
    """Replays a recorded trajectory: episode choice, Play/Pause, a step slider, back/forward, speed.

    Args:
        trajectory: what to show (see `show` for the other things it accepts).
        episode: the episode to start on (default: the first).
        title: a heading (default: the env id).

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=4))
        >>> _ = env.reset(seed=0)
        >>> _ = env.step(env.unwrapped.action_masks().argmax())
        >>> viewer = openenv_lab.show(env)
        >>> viewer.slider.max, viewer.step
        (1, 0)
        >>> viewer.step = 1                 # what the slider, Play and the arrows do
        >>> "<svg" in viewer.main.value
        True
        >>> env.close()
    """

    def __init__(
        self, trajectory: Trajectory, *, episode: int | None = None, title: str | None = None
    ) -> None:
        self.trajectory = trajectory
        self.renderer = renderer_for(trajectory.family)
        self.title = title or str(trajectory.metadata.get("env_id", "trajectory"))
        summary = {row["episode"]: row for row in trajectory.summary().iter_rows(named=True)}
        self.episode_picker = widgets.Dropdown(
            options=[(self._label(number, summary[number]), number) for number in trajectory.episodes],
            description="episode",
            layout=widgets.Layout(width="340px"),
        )
        self.play = widgets.Play(min=0, max=0, interval=250, description="Play")
        self.slider = widgets.IntSlider(min=0, max=0, description="step", continuous_update=True)
        widgets.link((self.play, "value"), (self.slider, "value"))
        self.back = widgets.Button(
            icon="step-backward", tooltip="previous step", layout=widgets.Layout(width="40px")
        )
        self.forward = widgets.Button(
            icon="step-forward", tooltip="next step", layout=widgets.Layout(width="40px")
        )
        self.speed = widgets.IntSlider(value=4, min=1, max=30, description="steps/s")
        self.main = widgets.HTML()
        self.side = widgets.HTML()
        self.table = widgets.HTML()
        self.back.on_click(lambda _: self._move(-1))
        self.forward.on_click(lambda _: self._move(+1))
        self.speed.observe(
            lambda change: setattr(self.play, "interval", int(1000 / change["new"])), names="value"
        )
        self.slider.observe(lambda change: self._draw(change["new"]), names="value")
        controls = widgets.HBox([self.play, self.back, self.forward, self.slider, self.speed])
        self.widget = widgets.VBox(
            [
                widgets.HTML(f"<b>{html.escape(self.title)}</b>"),
                self.episode_picker,
                controls,
                widgets.HBox([self.main, self.side, self.table]),
            ]
        )
        self._rows = trajectory.scan().head(0).collect()
        self.episode_picker.value = episode if episode is not None else trajectory.episodes[0]
        self._open(self.episode_picker.value)
        self.episode_picker.observe(lambda change: self._open(change["new"]), names="value")

    @property
    def step(self) -> int:
        """The row shown (0 is the reset); setting it moves the slider and redraws."""
        return int(self.slider.value)

    @step.setter
    def step(self, value: int) -> None:
        self.slider.value = max(self.slider.min, min(self.slider.max, int(value)))

    def _open(self, number: int) -> None:
        self._rows = self.trajectory.episode(number).table
        last = max(0, self._rows.height - 1)
        self.play.max = self.slider.max = last
        self.play.value = self.slider.value = 0
        self._draw(0)

    def _draw(self, index: int) -> None:
        if self._rows.is_empty():
            return
        index = min(index, self._rows.height - 1)
        panes = self.renderer(self._rows, index, self.trajectory.metadata)
        self.main.value = panes["main"]
        self.side.value = panes["side"]
        self.table.value = step_table(self._rows, index)

    def _move(self, delta: int) -> None:
        self.step = self.step + delta

    @staticmethod
    def _label(number: int, row: dict[str, Any]) -> str:
        return f"{number}: {row['steps']} steps, return {row['return']:+.3g}, {row['ended']}"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The live widget for Jupyter front ends, and a static replay (kept small) for renderers without a
        # kernel, such as GitHub and nbviewer, which show the text/html of a saved notebook instead.
        bundle = widget_bundle(self.widget, **kwargs)
        bundle["text/html"] = trajectory_html(
            self.trajectory, episode=self.episode_picker.value, max_bytes=NOTEBOOK_FALLBACK_BYTES
        )
        return bundle

    def _repr_html_(self) -> str:
        return trajectory_html(self.trajectory, episode=self.episode_picker.value)

    def to_html(self, path: str | os.PathLike[str] | None = None, **options: Any) -> str:
        """The static replay of the episode on screen (see `openenv_lab.render.pages.trajectory_html`)."""
        page = trajectory_html(self.trajectory, episode=self.episode_picker.value, **options)
        if path is not None:
            write_html(path, page)
        return page


class _Message:
    """What `show` returns when there is nothing to show: a sentence, not a traceback."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.widget = widgets.HTML(f"<i>{html.escape(text)}</i>")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return {"text/plain": self.text, "text/html": self.widget.value}

    def _repr_html_(self) -> str:
        return self.widget.value

    def __repr__(self) -> str:
        return self.text


def _as_trajectory(source: Any) -> Trajectory:
    if isinstance(source, Trajectory):
        return source
    if isinstance(source, (str, os.PathLike, Path)):
        return load_trajectory(source)
    recorded = getattr(source, "trajectory", None)
    if isinstance(recorded, Trajectory):  # a RecordTrajectory / RecordVectorTrajectory wrapper
        return recorded
    import polars as pl

    if isinstance(source, pl.DataFrame):
        return Trajectory(source)
    raise TypeError(
        "show() takes a Trajectory, a Parquet path, a recording wrapper or a polars table, "
        f"not {type(source).__name__}"
    )


def show(source: Any, **options: Any) -> TrajectoryViewer | _Message:
    """Show a trajectory in the viewer: a `Trajectory`, a Parquet path, or a recording env (live).

    An empty recording gives a one-line message instead of a viewer.
    """
    trajectory = _as_trajectory(source)
    if not trajectory.episodes:
        return _Message("Nothing recorded yet: reset and step the environment, then show it again.")
    return TrajectoryViewer(trajectory, **options)


class Comparison:
    """Two viewers side by side, driven by one Play button and one slider (see `compare`)."""

    def __init__(self, left: TrajectoryViewer, right: TrajectoryViewer) -> None:
        self.left, self.right = left, right
        longest = max(left.slider.max, right.slider.max)
        self.play = widgets.Play(min=0, max=longest, interval=250)
        self.slider = widgets.IntSlider(min=0, max=longest, description="step")
        widgets.link((self.play, "value"), (self.slider, "value"))
        self.slider.observe(self._follow, names="value")
        for viewer in (left, right):
            viewer.play.layout.display = "none"  # one Play for both
        self.widget = widgets.VBox(
            [widgets.HBox([self.play, self.slider]), widgets.HBox([left.widget, right.widget])]
        )

    def _follow(self, change: dict[str, Any]) -> None:
        for viewer in (self.left, self.right):
            viewer.step = change["new"]  # clamped to each episode's length

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = widget_bundle(self.widget, **kwargs)
        bundle["text/html"] = self._page(max_bytes=NOTEBOOK_FALLBACK_BYTES // 2)
        return bundle

    def to_html(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        sample: bool = True,
        fps: int = 4,
    ) -> str:
        """Both static replays side by side on one page, each with its own scrubber, of the episodes on
        screen (the options as for `openenv_lab.render.pages.trajectory_html`, ``max_bytes`` for each);
        written to ``path`` when given."""
        page = self._page(max_bytes=max_bytes, sample=sample, fps=fps)
        if path is not None:
            write_html(path, page)
        return page

    def _page(self, **options: Any) -> str:
        pages = []
        for viewer in (self.left, self.right):
            default = str(viewer.trajectory.metadata.get("env_id", "trajectory"))
            label = viewer.title if viewer.title != default else None  # the heading names the env anyway
            episode = viewer.episode_picker.value
            pages.append(trajectory_html(viewer.trajectory, episode=episode, title=label, **options))
        return side_by_side(*pages)


def compare(first: Any, second: Any, *, labels: tuple[str, str] = ("A", "B")) -> Comparison:
    """Two trajectories side by side on one slider, e.g. a random agent and a trained one."""
    return Comparison(
        TrajectoryViewer(_as_trajectory(first), title=labels[0]),
        TrajectoryViewer(_as_trajectory(second), title=labels[1]),
    )
