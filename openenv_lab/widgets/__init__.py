"""Widgets that show recorded trajectories and training curves (stock ipywidgets + matplotlib only).

- `show` / `TrajectoryViewer`: replay a trajectory (a `Trajectory`, a Parquet path, or a recording env);
- `compare`: two trajectories side by side on one slider;
- `RewardCurve`: episode returns while training runs (a plain loop or Stable-Baselines3);
- `openenv_lab.render`: the same replays as self-contained HTML pages, for GitHub and nbviewer.

Widgets read recorded rows only; they never talk to servers.
"""

from ..render.renderers import register_renderer
from .reward_curve import RewardCurve
from .viewer import Comparison, TrajectoryViewer, compare, show

__all__ = ["Comparison", "RewardCurve", "TrajectoryViewer", "compare", "register_renderer", "show"]
