"""A recording as a Minari dataset, the offline RL format that d3rlpy, TorchRL and others load.

`to_minari` writes every finished episode of a recording made with ``observations=True`` (a `Trajectory`,
or the path of one) as a Minari dataset: observations (the reset's, then each step's), actions, rewards,
terminations and truncations, and as its infos the family's recorded columns (chess's FEN and moves,
Atari's lives and frame numbers, FinRL's date, cash and portfolio value...). Its metadata names the
environment (the env's gymnasium spec, with the options it was made with) and keeps the recording's own
metadata (server, schema hash, versions) under ``openenv_lab``. Minari (``pip install minari``, Python
3.11 or later) is needed for this module only.

Example (not run here: it needs Minari)::

    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess"), path="games.parquet", observations=True)
    ...  # play
    env.close()
    dataset = openenv_lab.record.to_minari("games.parquet", "openenv/chess-random-v0")
    minari.load_dataset("openenv/chess-random-v0")  # the same, from Minari's folder
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
import polars as pl
from gymnasium.vector.utils import concatenate, create_empty_array

from . import observations as stored
from .trajectory import BASE_COLUMNS, Trajectory, load_trajectory

__all__ = ["to_minari"]

#: Columns that are not infos: the step's own fields, the observation, and the recording's bookkeeping.
_NOT_INFOS = {*BASE_COLUMNS, "observation", "cut_short"}


def to_minari(
    source: Trajectory | str | os.PathLike[str],
    dataset_id: str,
    *,
    data_format: str = "arrow",
    author: str | None = None,
    author_email: str | None = None,
    algorithm_name: str | None = None,
    description: str | None = None,
    code_permalink: str | None = None,
) -> Any:
    """Write the finished episodes of a recording as the Minari dataset ``dataset_id``, and return it.

    Args:
        source: a `Trajectory` or the path of a recording, made with ``observations=True``.
        dataset_id: Minari's id, ``(namespace/)name-v(version)``; it must not exist yet.
        data_format: Minari's storage, ``"arrow"`` (pyarrow) or ``"hdf5"`` (h5py).
        author, author_email, algorithm_name, description, code_permalink: Minari's metadata.

    Raises:
        ImportError: Minari is not installed (the message says how to install it).
        ValueError: the recording kept no observations, or has no finished episode.
    """
    try:
        import minari
    except ImportError:
        raise ImportError(
            'to_minari needs Minari (Python 3.11 or later): pip install "openenv-lab[minari]"'
        ) from None
    from minari.dataset.minari_storage import MinariStorage
    from minari.storage import get_dataset_path

    trajectory = source if isinstance(source, Trajectory) else load_trajectory(source)
    metadata = trajectory.metadata
    if "observation_space" not in metadata:
        raise ValueError(
            "This recording kept no observations, which a Minari dataset is made of: record with "
            "RecordTrajectory(env, path=..., observations=True) (or RecordVectorTrajectory)"
        )
    if "action_space" not in metadata:
        raise ValueError("This recording's actions are text, which Minari datasets cannot hold")
    observation_space = stored.space_from_json(metadata["observation_space"])
    action_space = stored.space_from_json(metadata["action_space"])
    episodes = _episodes(trajectory, observation_space, action_space)
    if not episodes:
        raise ValueError("This recording has no finished episode to export (every episode was cut short)")
    path = get_dataset_path(dataset_id)
    if path.exists():
        raise FileExistsError(f"A Minari dataset {dataset_id!r} exists already at {path}: choose another id")
    (path / "data").mkdir(parents=True)
    storage = MinariStorage.new(
        path / "data",
        observation_space=observation_space,
        action_space=action_space,
        env_spec=_spec(metadata),
        data_format=data_format,
        jpeg_encoding=False,
    )
    details = {
        "dataset_id": dataset_id,
        "minari_version": minari.__version__,
        "openenv_lab": json.dumps(metadata, default=str),
        **{key: value for key, value in _optional(author, author_email).items() if value},
        **{
            key: value
            for key, value in {
                "algorithm_name": algorithm_name,
                "description": description,
                "code_permalink": code_permalink,
            }.items()
            if value is not None
        },
    }
    storage.update_metadata(details)
    storage.update_episodes(episodes)
    return minari.MinariDataset(storage)


def _optional(author: str | None, author_email: str | None) -> dict[str, Any]:
    return {
        "author": {author} if author else None,
        "author_email": {author_email} if author_email else None,
    }


def _spec(metadata: dict[str, Any]) -> gym.envs.registration.EnvSpec | None:
    """The recorded env's gymnasium spec, with the options it was made with (None if not registered)."""
    try:
        spec = gym.spec(str(metadata.get("env_id")))
    except gym.error.Error:
        return None
    return replace(spec, kwargs={**spec.kwargs, **metadata.get("env_kwargs", {})})


def _episodes(
    trajectory: Trajectory, observation_space: gym.spaces.Space[Any], action_space: gym.spaces.Space[Any]
) -> list[Any]:
    """Minari's episode buffers of every episode that ended (terminated or truncated), in the order they
    started."""
    from minari.data_collector.episode_buffer import EpisodeBuffer

    ended = (pl.col("terminated") | pl.col("truncated")).any().over("episode")
    table = trajectory.scan().filter(ended).collect()  # cut short, or left by a reset: not exported
    buffers = []
    for number, (_, episode) in enumerate(table.group_by("episode", maintain_order=True)):
        episode = episode.sort("step")
        steps = episode.slice(1)
        buffers.append(
            EpisodeBuffer(
                id=number,
                seed=episode["seed"][0],
                observations=_stack(
                    observation_space, [stored.decode(observation_space, b) for b in episode["observation"]]
                ),
                actions=_stack(action_space, [_action(action_space, a) for a in steps["action"]]),
                rewards=steps["reward"].to_list(),
                terminations=steps["terminated"].to_list(),
                truncations=steps["truncated"].to_list(),
                infos=_infos(episode),
            )
        )
    return buffers


def _action(space: gym.spaces.Space[Any], action: Any) -> Any:
    """A recorded action (an integer, or JSON text) as the space's own value."""
    if isinstance(space, gym.spaces.Discrete):
        return int(action)
    return json.loads(action) if isinstance(action, str) else action


def _stack(space: gym.spaces.Space[Any], items: list[Any]) -> Any:
    """``items`` as one batch of ``space`` (a dict of arrays for a Dict space, an array for a Box)."""
    return concatenate(space, items, create_empty_array(space, len(items)))


def _infos(episode: pl.DataFrame) -> dict[str, Any]:
    """The family's columns (the reset's row, then each step's), as the DataCollector gives infos: lists of
    numbers and booleans (null as NaN) and of text (null as ""), and equal-length lists as a 2-D array;
    bytes are left out."""
    infos: dict[str, Any] = {}
    for name in episode.columns:
        column = episode[name]
        if name in _NOT_INFOS or column.dtype == pl.Binary or column.dtype == pl.Null:
            continue
        if column.dtype == pl.String:
            infos[name] = column.fill_null("").to_list()
        elif column.dtype.is_numeric() or column.dtype == pl.Boolean:
            if column.null_count():
                column = column.cast(pl.Float64).fill_null(float("nan"))
            infos[name] = column.to_list()
        elif isinstance(column.dtype, pl.List) and column.null_count() == 0:
            try:
                infos[name] = np.asarray(column.to_list(), dtype=np.float64)
            except ValueError:
                continue  # lists of different lengths
    return infos
