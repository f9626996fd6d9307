"""`Trajectory`: recorded episodes as a polars frame, saved to Parquet with what it takes to reproduce them.

One row per reset or step (``step`` 0 is the reset), with the columns every family shares:

============== ===========================================================================
column         meaning
============== ===========================================================================
env_index      the sub-environment (0 for a single environment)
episode        episode number within the recording, counted per recording
step           0 on the reset row, then 1, 2, ...
action         the action: an integer index, or JSON text for anything else (null on resets)
action_label   the action in words (``"g1f3 (Nf3)"``, ``"FIRE"``, ``"ALFA +57"``)
reward         the step's reward (0 on resets)
return         the sum of rewards so far in the episode
terminated     the episode ended for good on this step
truncated      the episode was cut on this step
latency_ms     wall time of the step (or reset) as the agent saw it
seed           the reset's seed, on reset rows
============== ===========================================================================

plus each family's columns (chess ``fen`` and moves, Atari ``frame_png``, FinRL ``date`` and
``portfolio_value``...; see the adapters' ``record``). The metadata (env id, server URL, the server's
``/metadata``, a hash of its ``/schema``, package versions, wall time, the family's extras) is stored in
the Parquet file's key-value metadata, so one file carries everything.

Files are written to a temporary file beside the target and renamed into place: a file is never left
half-written, even if the kernel dies mid-write.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

__all__ = ["FORMAT_VERSION", "Trajectory", "TrajectoryFormatError", "load_trajectory"]

#: Bumped when a change makes old readers misread new files.
FORMAT_VERSION = 1
_METADATA_KEY = "openenv_lab.trajectory"

BASE_COLUMNS = (
    "env_index",
    "episode",
    "step",
    "action",
    "action_label",
    "reward",
    "return",
    "terminated",
    "truncated",
    "latency_ms",
    "seed",
)


class TrajectoryFormatError(ValueError):
    """A file that is not an openenv_lab trajectory, or from a newer version of openenv_lab."""


class Trajectory:
    """Recorded episodes: ``frame`` (a polars DataFrame, one row per step) and ``metadata`` (a dict).

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=6))
        >>> _ = env.reset(seed=0)
        >>> done = False
        >>> while not done:
        ...     obs, reward, terminated, truncated, info = env.step(env.unwrapped.action_masks().argmax())
        ...     done = terminated or truncated
        >>> trajectory = env.trajectory
        >>> trajectory.frame.select("step", "action_label", "fen").height
        4
        >>> trajectory.metadata["family"], trajectory.episodes
        ('chess', [0])
        >>> env.close()
    """

    def __init__(self, frame: pl.DataFrame, metadata: dict[str, Any] | None = None) -> None:
        self.frame = frame
        self.metadata = dict(metadata or {})

    @property
    def family(self) -> str:
        return str(self.metadata.get("family", "generic"))

    @property
    def episodes(self) -> list[int]:
        """The episode numbers present, in order."""
        if self.frame.is_empty():
            return []
        return self.frame["episode"].unique(maintain_order=True).to_list()

    def episode(self, number: int) -> Trajectory:
        """One episode's rows (a new `Trajectory` with the same metadata)."""
        if number not in self.episodes:
            raise KeyError(f"No episode {number} in this trajectory; it has {self.episodes}")
        return Trajectory(self.frame.filter(pl.col("episode") == number), self.metadata)

    def summary(self) -> pl.DataFrame:
        """One row per episode: steps, return, and how it ended."""
        if self.frame.is_empty():
            return pl.DataFrame({"episode": [], "steps": [], "return": [], "ended": []})
        return self.frame.group_by("episode", maintain_order=True).agg(
            pl.col("env_index").first(),
            (pl.col("step").max()).alias("steps"),
            pl.col("return").last(),
            pl.when(pl.col("terminated").any())
            .then(pl.lit("terminated"))
            .when(pl.col("truncated").any())
            .then(pl.lit("truncated"))
            .otherwise(pl.lit("running"))
            .first()
            .alias("ended"),
        )

    def __len__(self) -> int:
        return self.frame.height

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.frame.iter_rows(named=True))

    def __repr__(self) -> str:
        env = self.metadata.get("env_id", "?")
        return f"<Trajectory {env}: {len(self.episodes)} episode(s), {self.frame.height} rows>"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write Parquet (zstd) with the metadata, atomically: a temporary file, then a rename."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        metadata = {**self.metadata, "format_version": FORMAT_VERSION}
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            self.frame.write_parquet(temporary, metadata={_METADATA_KEY: json.dumps(metadata, default=str)})
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return path

    def _repr_html_(self) -> str:
        from ..widgets.html import trajectory_html

        return trajectory_html(self)

    def to_html(self, path: str | os.PathLike[str] | None = None, **options: Any) -> str:
        """A self-contained HTML page replaying the trajectory (see `openenv_lab.widgets.html`)."""
        from ..widgets.html import trajectory_html, write_html

        page = trajectory_html(self, **options)
        if path is not None:
            write_html(path, page)
        return page


def load_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read a trajectory written by `Trajectory.save`, checking that it is one and that we can read it."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No trajectory file at {path}")
    try:
        stored = pl.read_parquet_metadata(path)
    except Exception as exc:
        raise TrajectoryFormatError(f"{path} is not a Parquet file ({exc})") from None
    if _METADATA_KEY not in stored:
        raise TrajectoryFormatError(
            f"{path} is a Parquet file but not an openenv_lab trajectory (no {_METADATA_KEY!r} metadata)"
        )
    metadata = json.loads(stored[_METADATA_KEY])
    version = int(metadata.get("format_version", 0))
    if version > FORMAT_VERSION:
        raise TrajectoryFormatError(
            f"{path} was written by a newer openenv_lab (trajectory format {version}; this one reads up to "
            f"{FORMAT_VERSION}): upgrade openenv_lab to read it"
        )
    return Trajectory(pl.read_parquet(path), metadata)
