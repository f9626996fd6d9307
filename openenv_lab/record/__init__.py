"""Recording episodes as data: wrappers that write one row per step, and the `Trajectory` they produce.

See `openenv_lab.record.trajectory` for the columns and the file format, `openenv_lab.record.parts` for
a recording while it runs, and `openenv_lab.record.minari` for recordings as Minari datasets.
"""

from .minari import to_minari
from .recorder import RecordTrajectory, RecordVectorTrajectory
from .trajectory import FORMAT_VERSION, Trajectory, TrajectoryFormatError, load_trajectory

__all__ = [
    "FORMAT_VERSION",
    "RecordTrajectory",
    "RecordVectorTrajectory",
    "Trajectory",
    "TrajectoryFormatError",
    "load_trajectory",
    "to_minari",
]
