"""`RewardCurve`: episode returns drawn while training runs, with a rolling mean and band.

Feed it finished episodes (`RewardCurve.add_episode`), or per-step rewards and episode ends
(`RewardCurve.track`, scalars or vector-env arrays), or hand Stable-Baselines3 its callback
(`RewardCurve.sb3_callback`) or a TRL trainer its own (`RewardCurve.trl_callback`: a point per logged
step). Where the environment names the parts of its reward (``info["reward_components"]``, e.g. FinRL's
``market`` and ``costs``), each part's per-episode sum is drawn too, as its own rolling mean. Redraws are
throttled (at most every ``redraw_every`` seconds) so a fast training loop does not spend its time
drawing; `RewardCurve.redraw` forces one. The figure is a PNG in a stock ``ipywidgets.Image``, and
``_repr_html_``/``to_html`` give the same picture without a kernel.
"""

from __future__ import annotations

import base64
import io
import os
import time
import warnings
from typing import Any

import ipywidgets as widgets
import numpy as np

from ..render.pages import write_html
from .bundle import widget_bundle

__all__ = ["RewardCurve"]


class RewardCurve:
    """A live plot of episode returns against environment steps (or episodes).

    Args:
        window: episodes in the rolling mean and band.
        x: ``"steps"`` (environment steps, the default) or ``"episodes"``.
        title: the plot's title.
        redraw_every: the least number of seconds between two redraws.

    Example:
        >>> curve = RewardCurve(window=3, redraw_every=0)
        >>> for episode_return in [1.0, 0.0, 2.0, 3.0]:
        ...     curve.add_episode(episode_return, length=10)
        >>> curve.returns, curve.steps
        ([1.0, 0.0, 2.0, 3.0], [10, 20, 30, 40])
        >>> round(curve.rolling_mean()[-1], 3)
        1.667
        >>> curve.add_episode(1.0, length=10, components={"market": 1.5, "costs": -0.5})
        >>> curve.components["costs"][-2:]
        [nan, -0.5]
    """

    def __init__(
        self, *, window: int = 20, x: str = "steps", title: str = "Episode return", redraw_every: float = 0.5
    ) -> None:
        if x not in ("steps", "episodes"):
            raise ValueError(f"x must be 'steps' or 'episodes', got {x!r}")
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self.x = x
        self.title = title
        self.redraw_every = redraw_every
        self.returns: list[float] = []
        self.steps: list[int] = []
        #: per-episode sums of each named reward component, aligned with `returns` (NaN where absent)
        self.components: dict[str, list[float]] = {}
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="640px"))
        self.caption = widgets.HTML("<i>No finished episode yet.</i>")
        self.widget = widgets.VBox([self.image, self.caption])
        self._total_steps = 0
        self._running: np.ndarray | None = None
        self._lengths: np.ndarray | None = None
        self._running_parts: dict[int, dict[str, float]] = {}  # sub-env -> component sums so far
        self._last_draw = 0.0

    # ------------------------------------------------------------------ feeding

    def add_episode(
        self,
        episode_return: float,
        *,
        length: int | None = None,
        step: int | None = None,
        components: dict[str, float] | None = None,
    ) -> None:
        """One finished episode: its return, its length or the global step it ended at, and the sums of
        its named reward components (if any).

        With ``x="steps"``, an episode given neither ``length`` nor ``step`` has no place on a steps axis:
        the curve says so (a warning, once) and draws against episodes from then on.
        """
        if step is None and length is None and self.x == "steps":
            warnings.warn(
                "RewardCurve(x='steps') got an episode without its length or step, so it cannot be placed "
                "on a steps axis: drawing against episodes instead. Pass length= (or step=) to each "
                "add_episode to draw against environment steps.",
                UserWarning,
                stacklevel=2,
            )
            self.x = "episodes"
        if step is None:
            self._total_steps += int(length or 0)
            step = self._total_steps
        else:
            self._total_steps = int(step)
        for name in components or {}:
            self.components.setdefault(name, [float("nan")] * len(self.returns))
        for name, values in self.components.items():
            values.append(float((components or {}).get(name, float("nan"))))
        self.returns.append(float(episode_return))
        self.steps.append(int(step))
        self._maybe_redraw()

    @classmethod
    def from_recording(cls, source: Any, **options: Any) -> RewardCurve:
        """The curve of a recording's finished episodes, in the order they ended: ``source`` is a
        `Trajectory` or the path of one (a file, or a recording still running). Only the columns the curve
        needs are read, so a long recording of screens opens quickly.

        Example:
            >>> import gymnasium as gym, openenv_lab
            >>> env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=2))
            >>> for seed in range(3):
            ...     _ = env.reset(seed=seed); _ = env.step("a"); _ = env.step("bb")
            >>> curve = RewardCurve.from_recording(env.trajectory, redraw_every=0)
            >>> curve.returns, curve.steps
            ([0.30000000000000004, 0.30000000000000004, 0.30000000000000004], [2, 4, 6])
            >>> env.close()
        """
        import polars as pl

        from ..record.trajectory import Trajectory, load_trajectory

        trajectory = source if isinstance(source, Trajectory) else load_trajectory(source)
        rows = trajectory.scan()
        curve = cls(**{"redraw_every": float("inf"), **options})
        columns = rows.collect_schema()
        if "episode" not in columns:
            return curve
        parts = [name for name in columns if name.startswith("reward.")]
        episodes = (
            rows.with_row_index("row")
            .group_by("episode")
            .agg(
                pl.col("return").last(),
                pl.col("step").max().alias("length"),
                (pl.col("terminated") | pl.col("truncated")).any().alias("ended"),
                pl.col("row").max().alias("last_row"),
                *(pl.col(name).sum() for name in parts),
            )
            .filter(pl.col("ended"))
            .sort("last_row")
            .collect()
        )
        for episode in episodes.iter_rows(named=True):
            components = {name.removeprefix("reward."): episode[name] for name in parts}
            curve.add_episode(episode["return"], length=episode["length"], components=components or None)
        curve.redraw_every = options.get("redraw_every", 0.5)
        curve.redraw()
        return curve

    def _add_parts(self, index: int, parts: Any) -> None:
        if isinstance(parts, dict) and parts:
            sums = self._running_parts.setdefault(index, {})
            for name, value in parts.items():
                sums[name] = sums.get(name, 0.0) + float(value)

    def track(self, rewards: Any, dones: Any, components: Any = None) -> None:
        """Per-step feeding: rewards and episode ends (``terminated | truncated``), scalars or arrays, and
        optionally the step's reward components: one env's ``info["reward_components"]``, or a list of
        them (one per sub-environment)."""
        if isinstance(components, dict):
            components = [components]
        for index, parts in enumerate(components or []):
            self._add_parts(index, parts)
        rewards = np.atleast_1d(np.asarray(rewards, dtype=np.float64))
        dones = np.atleast_1d(np.asarray(dones, dtype=bool))
        if self._running is None or self._running.shape != rewards.shape:
            self._running = np.zeros_like(rewards)
            self._lengths = np.zeros(rewards.shape, dtype=np.int64)
        assert self._lengths is not None
        self._running += rewards
        self._lengths += 1
        self._total_steps += rewards.size
        for index in np.flatnonzero(dones):
            parts = self._running_parts.pop(int(index), None)
            self.add_episode(float(self._running[index]), step=self._total_steps, components=parts)
            self._running[index] = 0.0
            self._lengths[index] = 0

    def sb3_callback(self) -> Any:
        """A Stable-Baselines3 callback feeding this curve (reads the ``episode`` info of Monitor or
        ``RecordEpisodeStatistics`` when present, else accumulates rewards itself)."""
        try:
            from stable_baselines3.common.callbacks import BaseCallback
        except ImportError as exc:  # an optional extra: say how to get it
            raise ImportError(
                'RewardCurve.sb3_callback needs Stable-Baselines3: pip install "openenv-lab[sb3]"'
            ) from exc

        curve = self

        class _RewardCurveCallback(BaseCallback):
            def _on_step(self) -> bool:
                infos = [info if isinstance(info, dict) else {} for info in self.locals.get("infos", [])]
                parts = [info.get("reward_components") for info in infos]
                if any("episode" in info for info in infos):
                    for index, info in enumerate(infos):
                        curve._add_parts(index, parts[index])
                        if "episode" in info:
                            curve.add_episode(
                                float(np.asarray(info["episode"]["r"]).item()),
                                step=self.num_timesteps,
                                components=curve._running_parts.pop(index, None),
                            )
                else:
                    curve.track(self.locals.get("rewards", 0.0), self.locals.get("dones", False), parts)
                return True

            def _on_training_end(self) -> None:
                curve.redraw()

        return _RewardCurveCallback()

    def trl_callback(self) -> Any:
        """A ``transformers`` callback feeding this curve from a TRL trainer's logs (GRPO's ``reward``, the
        mean over the step's rollouts, at each logged step; each reward function's mean,
        ``rewards/<name>/mean``, as a component). With ``x="steps"`` the x axis is the trainer's step."""
        try:
            from transformers import TrainerCallback
        except ImportError as exc:
            raise ImportError(
                'RewardCurve.trl_callback needs transformers: pip install "openenv-lab[grpo]"'
            ) from exc

        curve = self

        class _RewardCurveCallback(TrainerCallback):  # type: ignore[misc]
            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if not logs or "reward" not in logs:
                    return
                parts = {
                    key.split("/")[1]: float(value)
                    for key, value in logs.items()
                    if key.startswith("rewards/") and key.endswith("/mean")
                }
                step = int(state.global_step)
                curve.add_episode(float(logs["reward"]), step=step, components=parts or None)

            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                curve.redraw()

        return _RewardCurveCallback()

    # ------------------------------------------------------------------ drawing

    def rolling_mean(self, component: str | None = None) -> list[float]:
        """The rolling mean of the returns, or of one reward component's per-episode sums."""
        return self._rolling(self.returns if component is None else self.components[component])

    def _rolling(self, series: list[float]) -> list[float]:
        values = np.asarray(series, dtype=np.float64)
        means = []
        for i in range(len(values)):
            window = values[max(0, i - self.window + 1) : i + 1]
            window = window[~np.isnan(window)]
            means.append(float(window.mean()) if window.size else float("nan"))
        return means

    def _maybe_redraw(self) -> None:
        if time.monotonic() - self._last_draw >= self.redraw_every:
            self.redraw()

    def redraw(self) -> None:
        """Draw now (ignores the throttle)."""
        self._last_draw = time.monotonic()
        self.image.value = self.png()
        if self.returns:
            recent = self.returns[-self.window :]
            self.caption.value = (
                f"{len(self.returns)} episodes, {self._total_steps:,} steps; last {len(recent)}: "
                f"mean {np.mean(recent):+.3g}, best {max(self.returns):+.3g}"
            )

    def figure(self) -> Any:
        """The plot as a matplotlib ``Figure`` (returns, their rolling mean and band, the components)."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(6.4, 3.2), dpi=80)
        axes = figure.subplots()
        xs = np.asarray(self.steps if self.x == "steps" else range(1, len(self.returns) + 1))
        if self.returns:
            values = np.asarray(self.returns)
            mean = np.asarray(self.rolling_mean())
            spread = np.asarray(
                [values[max(0, i - self.window + 1) : i + 1].std() for i in range(len(values))]
            )
            axes.plot(xs, values, ".", color="#9db7e8", markersize=3, label="episode return")
            axes.plot(xs, mean, color="#2f6fdd", label=f"mean of last {self.window}")
            axes.fill_between(xs, mean - spread, mean + spread, color="#2f6fdd", alpha=0.15, label="± 1 std")
            for name, parts in self.components.items():
                label = f"{name} (mean of last {self.window})"
                axes.plot(xs, self._rolling(parts), "--", linewidth=1.2, label=label)
            axes.legend(loc="lower right", fontsize=8)
        else:
            axes.text(0.5, 0.5, "no finished episode yet", ha="center", va="center", transform=axes.transAxes)
        axes.set_xlabel("environment steps" if self.x == "steps" else "episodes")
        axes.set_ylabel("return")
        axes.set_title(self.title)
        axes.grid(alpha=0.3)
        figure.tight_layout()
        return figure

    def png(self) -> bytes:
        """The plot as PNG bytes."""
        buffer = io.BytesIO()
        self.figure().savefig(buffer, format="png")
        return buffer.getvalue()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The live widget, and the picture as it is now for renderers without a kernel (GitHub, nbviewer).
        if not self.image.value:
            self.redraw()
        bundle = widget_bundle(self.widget, **kwargs)
        bundle["text/html"] = self._repr_html_()
        return bundle

    def _repr_html_(self) -> str:
        encoded = base64.b64encode(self.png()).decode("ascii")
        return f'<img src="data:image/png;base64,{encoded}" alt="{self.title}">'

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The plot as an ``<img>`` element; with ``path``, also saved there as a page (`write_html`)."""
        page = self._repr_html_()
        if path is not None:
            write_html(path, page)
        return page
