"""`Trajectory`: recorded episodes as a polars table, saved to Parquet with what it takes to reproduce them.

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

plus each family's columns (chess ``fen`` and moves, Atari ``screen_png``, FinRL ``date`` and
``portfolio_value``...; see the adapters' ``record``). The metadata (env id, server URL, the server's
``/metadata``, a hash of its ``/schema``, package versions, wall time, the family's extras) is stored in
the Parquet file's key-value metadata, so one file carries everything.

Files are written to a temporary file beside the target and renamed into place (`openenv_lab.files`): a
file is never left half-written, even if the kernel dies mid-write. `load_trajectory` refuses, naming the
file and the problem, anything that is not such a file (damaged metadata or missing columns included).
A recording still running (or whose process died) is a folder of parts beside its file
(`openenv_lab.record.parts`); `load_trajectory` reads it the same way.

A `Trajectory` read from disk reads its rows lazily (`scan`): the episode list, `summary` and one
`episode` read only the columns they need, so a viewer opens a long recording of Atari screens without
loading every screen; ``table`` loads everything.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from ..files import write_atomically
from .parts import METADATA_KEY, is_recording, parts_folder, read_parts

__all__ = [
    "FORMAT_VERSION",
    "Trajectory",
    "TrajectoryFormatError",
    "load_trajectory",
    "with_cut_short",
    "with_seeds",
]

#: Bumped when a change makes old readers misread new files (2: Atari's ``frame_png`` is ``screen_png``;
#: `load_trajectory` still reads format 1).
FORMAT_VERSION = 2
_METADATA_KEY = METADATA_KEY

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
    """Recorded episodes: ``table`` (a polars DataFrame, one row per step) and ``metadata`` (a dict).

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=6))
        >>> _ = env.reset(seed=0)
        >>> done = False
        >>> while not done:
        ...     obs, reward, terminated, truncated, info = env.step(env.unwrapped.action_masks().argmax())
        ...     done = terminated or truncated
        >>> trajectory = env.trajectory
        >>> trajectory.table.select("step", "action_label", "fen").height
        4
        >>> trajectory.metadata["family"], trajectory.episodes
        ('chess', [0])
        >>> env.close()
    """

    def __init__(self, table: pl.DataFrame | pl.LazyFrame, metadata: dict[str, Any] | None = None) -> None:
        self._lazy = table if isinstance(table, pl.LazyFrame) else None
        self._table = table if isinstance(table, pl.DataFrame) else None
        self.metadata = dict(metadata or {})

    @property
    def table(self) -> pl.DataFrame:
        """Every row (read now if the trajectory was read lazily from disk, then kept)."""
        if self._table is None:
            assert self._lazy is not None
            self._table = self._lazy.collect()
        return self._table

    @table.setter
    def table(self, table: pl.DataFrame) -> None:
        self._table, self._lazy = table, None

    def scan(self) -> pl.LazyFrame:
        """The rows as a polars LazyFrame: select the columns you need before ``collect()``."""
        return self._table.lazy() if self._table is not None else self._lazy  # type: ignore[return-value]

    @property
    def frame(self) -> pl.DataFrame:
        """The former name of `table` ("frame" now means an emulator frame only)."""
        warnings.warn("Trajectory.frame is now Trajectory.table", DeprecationWarning, stacklevel=2)
        return self.table

    @property
    def family(self) -> str:
        return str(self.metadata.get("family", "generic"))

    @property
    def episodes(self) -> list[int]:
        """The episode numbers present, in order."""
        if "episode" not in self.scan().collect_schema():
            return []
        numbers = self.scan().select(pl.col("episode").unique(maintain_order=True)).collect()
        return numbers["episode"].to_list()

    def episode(self, number: int) -> Trajectory:
        """One episode's rows (a new `Trajectory` with the same metadata)."""
        if number not in self.episodes:
            raise KeyError(f"No episode {number} in this trajectory; it has {self.episodes}")
        return Trajectory(self.scan().filter(pl.col("episode") == number).collect(), self.metadata)

    def summary(self) -> pl.DataFrame:
        """One row per episode: steps, return, and how it ended."""
        if "episode" not in self.scan().collect_schema():
            return pl.DataFrame({"episode": [], "steps": [], "return": [], "ended": []})
        return (
            self.scan()
            .group_by("episode", maintain_order=True)
            .agg(
                pl.col("env_index").first(),
                (pl.col("step").max()).alias("steps"),
                pl.col("return").last(),
                pl.when(pl.col("terminated").any())
                .then(pl.lit("terminated"))
                .when(pl.col("truncated").any())
                .then(pl.lit("truncated"))
                .otherwise(pl.lit("running"))
                .alias("ended"),
            )
            .collect()
        )

    def __len__(self) -> int:
        if self._table is not None:
            return self._table.height
        return int(self.scan().select(pl.len()).collect().item())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.table.iter_rows(named=True))

    def __repr__(self) -> str:
        env = self.metadata.get("env_id", "?")
        return f"<Trajectory {env}: {len(self.episodes)} episode(s), {len(self)} rows>"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write Parquet (zstd) with the metadata, atomically: a temporary file, then a rename.

        Missing parent directories are created; a new file gets the usual mode (``0o666`` less the
        umask), an overwritten one keeps its own. A trajectory read lazily is streamed to the file.
        """
        text = json.dumps({**self.metadata, "format_version": FORMAT_VERSION}, default=str)
        metadata = {_METADATA_KEY: text}
        if self._table is not None:
            table = self._table
            write: Any = lambda temporary: table.write_parquet(temporary, metadata=metadata)  # noqa: E731
        else:
            lazy = self._lazy
            assert lazy is not None
            write = lambda temporary: lazy.sink_parquet(temporary, metadata=metadata)  # noqa: E731
        return write_atomically(path, write, what="the recording")

    def _repr_html_(self) -> str:
        from ..render.pages import trajectory_html

        return trajectory_html(self)

    def to_html(self, path: str | os.PathLike[str] | None = None, **options: Any) -> str:
        """A self-contained HTML page replaying the trajectory (see `openenv_lab.render.pages`)."""
        from ..render.pages import trajectory_html, write_html

        page = trajectory_html(self, **options)
        if path is not None:
            write_html(path, page)
        return page


def load_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read a trajectory written by `Trajectory.save` or a recorder, checking that it is one and that we can
    read it. Rows are read lazily (see `Trajectory.scan`).

    A recording that is still running, or whose process died before ``close()``, is read from its folder
    of parts (``path`` + ``.parts``), the newer copy (a running one whole, at once: its recorder merges
    parts as it goes).

    Raises:
        FileNotFoundError: no file at ``path``.
        TrajectoryFormatError: not a Parquet file, not a trajectory (no or broken openenv_lab metadata, or
            missing columns), one written by a newer openenv_lab, or a folder of parts with a part missing
            or damaged.
    """
    path = Path(path)
    folder = parts_folder(path)
    if folder.is_dir():
        try:
            rows, metadata = read_parts(folder, load=_read_metadata)
        except ValueError as exc:
            raise TrajectoryFormatError(str(exc)) from None
        _check_columns(folder, rows)
        rows = with_cut_short(rows)
        if is_recording(folder):  # its recorder merges and removes parts as it goes: a snapshot, now
            rows = rows.collect().lazy()
        return Trajectory(rows, with_seeds(metadata, rows))
    if not path.exists():
        raise FileNotFoundError(f"No trajectory file at {path}")
    metadata = _read_metadata(path)
    rows = pl.scan_parquet(path)
    if metadata.get("format_version", 0) < 2 and "frame_png" in rows.collect_schema():
        rows = rows.rename({"frame_png": "screen_png"})  # format 1 named the Atari screens so
    _check_columns(path, rows)
    return Trajectory(rows, metadata)


def with_cut_short(rows: pl.LazyFrame) -> pl.LazyFrame:
    """``rows`` with ``cut_short``: whether the row's episode was still in progress when it was saved (its
    sub-environment's last episode, and no step ended it). Reads the few columns it needs."""
    if "episode" not in rows.collect_schema():
        return rows
    keys = rows.select("env_index", "episode", (pl.col("terminated") | pl.col("truncated")).alias("ended"))
    episodes = keys.group_by("episode").agg(pl.col("env_index").first(), pl.col("ended").any()).collect()
    last = episodes.filter(pl.col("episode") == pl.col("episode").max().over("env_index"))
    running = last.filter(~pl.col("ended"))["episode"].to_list()
    return rows.with_columns(pl.col("episode").is_in(running).alias("cut_short"))


def with_seeds(metadata: dict[str, Any], rows: pl.LazyFrame) -> dict[str, Any]:
    """A single environment's recording lists the seed of each episode's reset (``seeds``), from its rows."""
    if "num_envs" in metadata:
        return metadata
    if "episode" not in rows.collect_schema():
        return {**metadata, "seeds": []}
    return {**metadata, "seeds": rows.filter(pl.col("step") == 0).select("seed").collect()["seed"].to_list()}


def _read_metadata(path: Path) -> dict[str, Any]:
    """The openenv_lab metadata of the Parquet file at ``path``, checked: ours, and a version we read."""
    try:
        stored = pl.read_parquet_metadata(path)
    except Exception as exc:
        raise TrajectoryFormatError(f"{path} is not a Parquet file ({exc})") from None
    if _METADATA_KEY not in stored:
        raise TrajectoryFormatError(
            f"{path} is a Parquet file but not an openenv_lab trajectory (no {_METADATA_KEY!r} metadata)"
        )
    metadata = _parse_metadata(path, stored[_METADATA_KEY])
    version = metadata.get("format_version", 0)
    if version > FORMAT_VERSION:
        raise TrajectoryFormatError(
            f"{path} was written by a newer openenv_lab (trajectory format {version}; this one reads up to "
            f"{FORMAT_VERSION}): upgrade openenv_lab to read it"
        )
    return metadata


def _check_columns(path: Path, rows: pl.LazyFrame) -> None:
    columns = rows.collect_schema()
    missing = [column for column in BASE_COLUMNS if column not in columns]
    if len(columns) and missing:  # an empty recording has no columns at all
        raise TrajectoryFormatError(
            f"{path} has openenv_lab metadata but not the columns of a trajectory: {', '.join(missing)} "
            "missing (the file was changed after Trajectory.save, or written by other code)"
        )


def _parse_metadata(path: Path, text: str) -> dict[str, Any]:
    """The stored metadata: a JSON object whose ``format_version``, if any, is an integer."""
    damaged = f"{path} has damaged openenv_lab metadata ({_METADATA_KEY!r})"
    try:
        metadata = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrajectoryFormatError(f"{damaged}: not JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise TrajectoryFormatError(f"{damaged}: a JSON {type(metadata).__name__}, not an object")
    version = metadata.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise TrajectoryFormatError(f"{damaged}: format_version is {version!r}, not an integer")
    return metadata
