"""Recording episodes as data: wrappers that write one row per step, and the `Trajectory` they produce.

See `openenv_lab.record.trajectory` for the columns and the file format.
"""

from .recorder import RecordTrajectory, RecordVectorTrajectory
from .trajectory import FORMAT_VERSION, Trajectory, TrajectoryFormatError, load_trajectory

__all__ = [
    "FORMAT_VERSION",
    "RecordTrajectory",
    "RecordVectorTrajectory",
    "Trajectory",
    "TrajectoryFormatError",
    "load_trajectory",
]
