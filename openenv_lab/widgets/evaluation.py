"""Pictures of evaluations: two policies' returns side by side, their paired differences, learning curves.

`comparison_figure` draws from plain numbers (this layer knows nothing of `openenv_lab.evaluation`, which
calls it): the return distributions of the two policies (box plots with every episode as a dot), the
per-seed differences sorted with their mean and interval, and, when given, each policy's learning curve
(a `RewardCurve`'s rolling mean, or a sequence of returns). The same picture goes into a stock ipywidgets
box (`comparison_widget`, which works on Colab) and a self-contained page (`comparison_html`, `save_html`):
a PNG embedded as data, so exports and e-mail show it without a kernel.
"""

from __future__ import annotations

import base64
import html
import io
import os
from typing import Any

import numpy as np
import polars as pl

from ..render.pages import write_html
from .reward_curve import RewardCurve

__all__ = ["comparison_figure", "comparison_html", "comparison_widget", "png", "save_html", "summary_html"]

_COLOURS = ("#2f6fdd", "#e07b39")


def _curve(values: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """x, y and the x label of a learning curve: a RewardCurve's rolling mean, or returns in order."""
    if isinstance(values, RewardCurve):
        xs = np.asarray(values.steps if values.x == "steps" else range(1, len(values.returns) + 1))
        label = "environment steps" if values.x == "steps" else "episodes"
        return xs, np.asarray(values.rolling_mean(), dtype=np.float64), label
    ys = np.asarray(list(values), dtype=np.float64)
    return np.arange(1, ys.size + 1), ys, "episodes"


def comparison_figure(
    labels: tuple[str, str],
    returns: tuple[np.ndarray, np.ndarray],
    differences: np.ndarray,
    interval: tuple[float, float],
    curves: dict[str, Any] | None = None,
) -> Any:
    """The comparison as a matplotlib ``Figure``: distributions, paired differences, learning curves."""
    from matplotlib.figure import Figure

    panels = 3 if curves else 2
    figure = Figure(figsize=(4.2 * panels, 3.4), dpi=80)
    axes = figure.subplots(1, panels)

    distributions = axes[0]
    distributions.boxplot(
        [np.asarray(r) for r in returns], tick_labels=list(labels), widths=0.5, showfliers=False
    )
    rng = np.random.default_rng(0)  # the dots' horizontal jitter only
    for k, values in enumerate(returns, start=1):
        values = np.asarray(values)
        jitter = rng.uniform(-0.12, 0.12, values.size)
        distributions.plot(k + jitter, values, ".", color=_COLOURS[k - 1], alpha=0.6, label=labels[k - 1])
    distributions.set_title("Returns, one dot per episode")
    distributions.set_ylabel("return")
    distributions.grid(alpha=0.3)

    paired = axes[1]
    order = np.argsort(differences, kind="stable")
    paired.bar(np.arange(differences.size), differences[order], color="#9db7e8", label="one seed")
    mean = float(np.mean(differences))
    paired.axhline(mean, color=_COLOURS[0], label=f"mean {mean:+.3g}")
    low, high = interval
    if np.isfinite(low) and np.isfinite(high):
        paired.axhspan(low, high, color=_COLOURS[0], alpha=0.15, label="95% interval")
    paired.axhline(0.0, color="black", linewidth=0.8)
    paired.set_title(f"{labels[0]} − {labels[1]}, per seed (sorted)")
    paired.set_xlabel(f"{differences.size} paired seeds")
    paired.set_xticks([])
    paired.legend(fontsize=8, loc="best")
    paired.grid(alpha=0.3, axis="y")

    if curves:
        learning = axes[2]
        xlabel = "episodes"
        for k, (label, values) in enumerate(curves.items()):
            xs, ys, xlabel = _curve(values)
            learning.plot(xs, ys, color=_COLOURS[k % 2], label=label)
        learning.set_title("Learning curves")
        learning.set_xlabel(xlabel)
        learning.set_ylabel("return (rolling mean)")
        learning.legend(fontsize=8)
        learning.grid(alpha=0.3)
    figure.tight_layout()
    return figure


def png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _table_html(rows: list[tuple[str, str, str]]) -> str:
    body = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{html.escape(mean)}</td><td>{html.escape(interval)}</td></tr>"
        for name, mean, interval in rows
    )
    return (
        '<table style="border-collapse:collapse;font:13px sans-serif" cellpadding="4">'
        "<tr><th align=left></th><th align=left>mean return</th><th align=left>95% interval</th></tr>"
        f"{body}</table>"
    )


def comparison_html(verdict: str, rows: list[tuple[str, str, str]], picture: bytes) -> str:
    """The verdict, the table and the picture, as one HTML fragment (the picture embedded as data)."""
    encoded = base64.b64encode(picture).decode("ascii")
    return (
        '<div class="openenv-lab-comparison">'
        f'<p style="font:15px sans-serif"><b class="verdict">{html.escape(verdict)}</b></p>'
        f"{_table_html(rows)}"
        f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(verdict)}" style="max-width:100%">'
        "</div>"
    )


def comparison_widget(verdict: str, rows: list[tuple[str, str, str]], picture: bytes) -> Any:
    """The same report as stock ipywidgets: an HTML verdict and table above the picture."""
    import ipywidgets as widgets

    header = widgets.HTML(
        f'<p style="font:15px sans-serif"><b>{html.escape(verdict)}</b></p>{_table_html(rows)}'
    )
    image = widgets.Image(value=picture, format="png", layout=widgets.Layout(max_width="100%"))
    return widgets.VBox([header, image])


def save_html(fragment: str, path: str | os.PathLike[str] | None) -> str:
    """``fragment``, written as a whole page to ``path`` when given (atomically)."""
    if path is not None:
        write_html(path, fragment)
    return fragment


def summary_html(text: str, episodes: pl.DataFrame, *, shown: int = 10) -> str:
    """An evaluation in a notebook: its summary line and its first episodes."""
    head = episodes.head(shown).select(
        "seed", "return", "length", "terminated", "truncated", "failed", "error"
    )
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row) + "</tr>"
        for row in head.iter_rows()
    )
    header = "".join(f"<th align=left>{name}</th>" for name in head.columns)
    more = (
        f"<p>… {episodes.height - shown} more episodes in <code>.episodes</code></p>"
        if episodes.height > shown
        else ""
    )
    return (
        f'<div><p style="font:14px sans-serif"><b>{html.escape(text)}</b></p>'
        f'<table style="border-collapse:collapse;font:12px monospace" cellpadding="3"><tr>{header}</tr>{rows}'
        f"</table>{more}</div>"
    )
