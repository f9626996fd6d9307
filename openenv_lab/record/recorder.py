"""Recording wrappers: every reset and step of an environment (or of each sub-environment) as a row.

`RecordTrajectory` wraps a single ``gymnasium.Env``, `RecordVectorTrajectory` a vector environment
(ours or gymnasium's, in either autoreset mode). Rows follow `openenv_lab.record.trajectory`; the family's
own columns come from the adapter (``describe_action``, ``record``), so OpenEnv environments record their
FENs, screens or portfolio values, and any other gymnasium environment still records the common columns.

With ``path=...`` the rows are saved each time an episode ends: only the rows recorded since the last save,
appended as a part beside the file (`openenv_lab.record.parts`), after which they leave memory, so a long
run costs the same per episode from its first to its last and its memory stays flat. ``close()``,
interpreter exit and Ctrl+C in a ``reset`` or ``step`` also write the whole recording to ``path`` (one
Parquet file, streamed from the parts, written beside and renamed), so nothing recorded is lost. The rows
of an episode still in progress then have ``cut_short`` true (its ``terminated``/``truncated`` stay as
they really were: false). The path is checked when the wrapper is made; a save that still fails (a full
disk) raises from ``step`` saying so, and the rows not saved stay in ``.trajectory``.

An action is described (``action_label``) before it is sent, since the description may depend on the
state (a chess move's SAN); an action the environment refuses gets the environment's own error.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import platform
import time
import warnings
import weakref
from collections.abc import Callable
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import polars as pl
from gymnasium import spaces
from gymnasium.spaces.utils import flatten_space
from gymnasium.vector import AutoresetMode, VectorWrapper
from gymnasium.vector.utils import iterate

from ..client import OpenEnvError
from ..files import check_writable
from . import observations as stored
from .parts import PartsWriter
from .trajectory import Trajectory, with_cut_short, with_seeds

__all__ = ["RecordTrajectory", "RecordVectorTrajectory"]

_PACKAGES = ("openenv-lab", "gymnasium", "numpy", "polars", "openenv", "chess", "ale-py", "stockstats")


class _Rows:
    """The rows recorded and not yet written, and the bookkeeping of episodes, steps and returns per
    sub-environment."""

    def __init__(self, action_space: spaces.Space[Any]) -> None:
        self.rows: list[dict[str, Any]] = []
        self.integer_actions = isinstance(action_space, spaces.Discrete)
        self.episodes = 0
        self.current: dict[int, tuple[int, int, float]] = {}  # env index -> (episode, step, return)
        self.tasks: dict[int, str] = {}  # env index -> the id of the task its episode plays

    def reset(self, index: int, seed: Any, latency: float, family: dict[str, Any]) -> None:
        self.tasks.pop(index, None)
        if family.get("task_id") is not None:
            self.tasks[index] = family["task_id"]
        episode = self.episodes
        self.episodes += 1
        self.current[index] = (episode, 0, 0.0)
        self.rows.append(
            {
                "env_index": index,
                "episode": episode,
                "step": 0,
                "action": None,
                "action_label": None,
                "reward": 0.0,
                "return": 0.0,
                "terminated": False,
                "truncated": False,
                "latency_ms": 1e3 * latency,
                "seed": seed,
                **family,
            }
        )

    def step(
        self,
        index: int,
        action: Any,
        label: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        latency: float,
        family: dict[str, Any],
    ) -> None:
        if index not in self.current:
            raise gym.error.ResetNeeded("Reset the environment before stepping it: nothing is being recorded")
        episode, step, total = self.current[index]
        if index in self.tasks:
            family = {**family, "task_id": self.tasks[index]}
        total += float(reward)
        self.current[index] = (episode, step + 1, total)
        self.rows.append(
            {
                "env_index": index,
                "episode": episode,
                "step": step + 1,
                "action": self._action(action),
                "action_label": label,
                "reward": float(reward),
                "return": total,
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "latency_ms": 1e3 * latency,
                "seed": None,
                **family,
            }
        )

    def _action(self, action: Any) -> Any:
        if self.integer_actions:
            return int(action)
        if isinstance(action, np.ndarray):
            return json.dumps(action.tolist())
        return json.dumps(action, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v))

    def table(self) -> pl.DataFrame:
        """The rows not yet written (``cut_short`` is added when they are read: `with_cut_short`)."""
        if not self.rows:
            return pl.DataFrame()
        schema = {"action": pl.Int64 if self.integer_actions else pl.Utf8, "seed": pl.Int64}
        return pl.DataFrame(self.rows, schema_overrides=schema, infer_schema_length=None)

    def take(self) -> pl.DataFrame:
        """The rows not yet written, which leave memory."""
        table = self.table()
        self.rows = []
        return table


def _metadata(env: gym.Env | gym.vector.VectorEnv, adapter: Any) -> dict[str, Any]:
    """What a reader needs to reproduce the recording: env, server, versions, time (and a clear error for
    an env whose infos cannot be recorded)."""
    if not getattr(adapter, "text_info", True):
        raise ValueError(
            "This env was made with text_info=False, whose infos have numbers only; a recording needs their "
            "text too (a replay draws the FEN, the date). Record an env made with text_info=True (the "
            "default)."
        )
    unwrapped = env.unwrapped
    spec = getattr(env, "spec", None) or getattr(unwrapped, "spec", None)
    info: dict[str, Any] = {
        "env_id": spec.id if spec is not None else type(unwrapped).__name__,
        "env_kwargs": _jsonable(spec.kwargs) if spec is not None else {},
        "family": getattr(adapter, "family", "generic"),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in _PACKAGES if _version(name)},
    }
    client = getattr(unwrapped, "client", None)
    base_url = getattr(unwrapped, "base_url", None) or (getattr(unwrapped, "base_urls", None) or [None])[0]
    if base_url is not None:
        info["base_url"] = base_url
    if client is not None:
        try:
            info["server_metadata"] = {k: v for k, v in client.metadata().items() if k != "readme_content"}
            info["schema_sha256"] = client.identity()["schema_sha256"]
        except OpenEnvError:  # a server without those routes: record what we have
            pass
    if adapter is not None:
        info.update(_jsonable(adapter.trajectory_metadata()))
    return info


def _version(name: str) -> str | None:
    try:
        return package_metadata.version(name)
    except package_metadata.PackageNotFoundError:
        return None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class _SavesWhatItHas:
    """Where the rows go: memory only, or (with a path) parts appended at each episode's end and the whole
    file at the stops (``close()``, interpreter exit, Ctrl+C, ``save()``)."""

    _path: Path | None
    _rows: _Rows
    _parts: PartsWriter | None
    _moved_from: PartsWriter | None  # the parts of the path before ``path`` was changed, not moved yet
    _whole: int  # parts in the file at ``path`` (the last time it was written)
    _observation_space: spaces.Space[Any] | None  # kept observations' space (None: not kept)
    _observation_dtype: np.dtype[Any]  # of the flattened observation, worked out once

    def _start_saving(self, path: str | Path | None) -> None:
        self._path, self._parts, self._moved_from = None, None, None
        self.path = path
        _UNSAVED.add(self)

    @property
    def path(self) -> Path | None:
        """Where the recording is saved (None: memory only). Set it to another file after a failed save:
        the next save moves the parts saved so far there."""
        return self._path

    @path.setter
    def path(self, path: str | Path | None) -> None:
        path = check_writable(path, "the recording") if path is not None else None
        parts = PartsWriter(path) if path is not None else None
        if self._parts is not None and self._parts.started:
            if self._moved_from is not None:  # moved twice before a save: those parts are still first
                self._parts.finish()
            else:
                self._moved_from = self._parts
        self._path, self._parts, self._whole = path, parts, 0

    def _metadata_now(self) -> dict[str, Any]:
        raise NotImplementedError

    def _keep_observations(
        self, keep: bool, observation_space: spaces.Space[Any], action_space: spaces.Space[Any]
    ) -> dict[str, Any]:
        """With ``keep``, check that observations can be stored and say how (the metadata's spaces)."""
        self._observation_space = observation_space if keep else None
        if not keep:
            return {}
        stored.check_storable(observation_space)
        self._observation_dtype = flatten_space(observation_space).dtype
        spaces_json = {"observation_space": stored.space_to_json(observation_space)}
        with contextlib.suppress(NotImplementedError):  # text actions: JSON text in the action column
            spaces_json["action_space"] = stored.space_to_json(action_space)
        return spaces_json

    def _observation(self, observation: Any) -> dict[str, Any]:
        if self._observation_space is None:
            return {}
        return {"observation": stored.encode(self._observation_space, observation, self._observation_dtype)}

    def _rows_now(self) -> pl.LazyFrame:
        """Every row so far, with ``cut_short``: the parts written, then the rows in memory."""
        written = [
            parts.scan() for parts in (self._moved_from, self._parts) if parts is not None and parts.started
        ]
        if not written:
            return with_cut_short(self._rows.table().lazy())
        if self._rows.rows:
            written.append(self._rows.table().lazy())
        return with_cut_short(pl.concat(written, how="diagonal_relaxed"))

    @property
    def trajectory(self) -> Trajectory:
        """Everything recorded so far, including the episode in progress (read back from the parts
        already written: for a long recording, `openenv_lab.load_trajectory` reads lazily instead)."""
        table = self._rows_now().collect()
        return Trajectory(table, with_seeds(self._metadata_now(), table.lazy()))

    def save(self, path: str | Path | None = None) -> Path:
        """Save the recording now, as one Parquet file (to ``path``, or the wrapper's own)."""
        target = path or self.path
        if target is None:
            raise ValueError(f"No path: pass one to save() or to {type(self).__name__}(env, path=...)")
        if self.path is not None and Path(target) == self.path:
            self._save_whole(final=False)
            return self.path
        if self._moved_from is not None or (self._parts is not None and self._parts.started):  # streamed
            rows = self._rows_now()
            return Trajectory(rows, with_seeds(self._metadata_now(), rows)).save(target)
        return self.trajectory.save(target)

    def _append(self) -> None:
        """Write the rows in memory as the next part (the end of an episode)."""
        assert self._parts is not None
        moved = self._moved_from
        if moved is not None:  # the path changed: everything saved at the old one comes first, once
            rows = pl.concat([moved.scan(), self._rows.table().lazy()], how="diagonal_relaxed").collect()
            self._parts.append(rows, self._metadata_now())
            self._rows.rows, self._moved_from = [], None
            moved.finish()
        elif self._rows.rows:
            self._parts.append(self._rows.table(), self._metadata_now())
            self._rows.rows = []

    def _save_whole(self, *, final: bool) -> None:
        """Append what is in memory, then write the whole recording to ``path`` (unless it holds every
        part already); ``final``: the recording ends, its parts folder goes."""
        assert self._parts is not None and self.path is not None
        self._append()
        if self._parts.started and self._whole != self._parts.written:
            rows = self._rows_now()
            Trajectory(rows, with_seeds(self._metadata_now(), rows)).save(self.path)
            self._whole = self._parts.written
        if final:
            self._parts.finish()
            self._whole = 0

    def save_unsaved(self) -> None:
        """Save now if a path is set and rows were recorded since the last save."""
        if self.path is not None:
            _autosave(self, lambda: self._save_whole(final=False))

    def _guarded(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except KeyboardInterrupt:
            self.save_unsaved()  # Ctrl+C: the episode in progress is kept, marked cut_short
            raise

    def close(self) -> None:
        """Close the environment, saving first what is not saved yet (a failed save is a warning: the
        rows stay in ``.trajectory``, to save elsewhere)."""
        try:
            if self.path is not None:
                _autosave(self, lambda: self._save_whole(final=True))
        except OSError as exc:
            warnings.warn(str(exc), stacklevel=2)
        finally:
            _UNSAVED.discard(self)
            super().close()  # type: ignore[misc]


_UNSAVED: weakref.WeakSet[_SavesWhatItHas] = weakref.WeakSet()


@atexit.register
def _save_at_exit() -> None:
    for recorder in list(_UNSAVED):
        if recorder.path is None:
            continue
        try:
            recorder._save_whole(final=True)
        except Exception as exc:  # exiting: say so, and let the others save
            warnings.warn(f"Could not save the recording at {recorder.path}: {exc}", stacklevel=1)


class RecordTrajectory(_SavesWhatItHas, gym.Wrapper):
    """Records every reset and step of ``env``; ``.trajectory`` is the recording so far.

    Args:
        env: any gymnasium environment; OpenEnv ones (``openenv/*``) add their family's columns.
        path: if given, where to save the recording (Parquet) each time an episode ends.
        observations: also keep each observation (the ``observation`` column: flattened bytes, see
            `openenv_lab.record.observations`), for offline RL (`openenv_lab.record.to_minari`).

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = openenv_lab.RecordTrajectory(gym.make("openenv/echo", max_steps=2))
        >>> _ = env.reset(seed=0); _ = env.step("hi"); _ = env.step("there")
        >>> env.trajectory.table.select("step", "action_label", "reward", "return").rows()
        [(0, None, 0.0, 0.0), (1, 'hi', 0.2, 0.2), (2, 'there', 0.5, 0.7)]
        >>> env.close()
    """

    def __init__(self, env: gym.Env, path: str | Path | None = None, *, observations: bool = False) -> None:
        super().__init__(env)
        self._adapter = getattr(env.unwrapped, "adapter", None)
        self._rows = _Rows(env.action_space)
        self._metadata = _metadata(env, self._adapter)
        self._metadata.update(self._keep_observations(observations, env.observation_space, env.action_space))
        self._started = time.perf_counter()
        self._start_saving(path)

    def _metadata_now(self) -> dict[str, Any]:
        metadata = {**self._metadata, "wall_time_s": time.perf_counter() - self._started}
        if self._adapter is not None:
            metadata.update(_jsonable(self._adapter.trajectory_metadata()))
        return metadata

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        return self._guarded(lambda: self._reset(seed, options))

    def _reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        start = time.perf_counter()
        observation, info = self.env.reset(seed=seed, options=options)
        latency = time.perf_counter() - start
        self._rows.reset(0, _seed_of(info, seed), latency, self._family(None, observation, info))
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self._guarded(lambda: self._step(action))

    def _step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        label = _describe(self._adapter, action)
        start = time.perf_counter()
        observation, reward, terminated, truncated, info = self.env.step(action)
        latency = time.perf_counter() - start
        family = self._family(action, observation, info)
        self._rows.step(0, action, label, float(reward), terminated, truncated, latency, family)
        if (terminated or truncated) and self.path is not None:
            _autosave(self, self._append)
        return observation, reward, terminated, truncated, info

    def _family(self, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        columns = self._adapter.record(action, observation, info) if self._adapter is not None else {}
        return {**columns, **_task_column(info, reset=action is None), **self._observation(observation)}


class RecordVectorTrajectory(_SavesWhatItHas, VectorWrapper):
    """Records every sub-environment of a vector environment (``env_index`` tells them apart).

    Works with `OpenEnvVectorEnv` and gymnasium's Sync/AsyncVectorEnv, in ``NEXT_STEP`` (the step after an
    episode ends is recorded as that sub-environment's reset) and ``SAME_STEP`` (the final step comes
    from ``info["final_obs"]``/``["final_info"]``) autoreset modes. ``path`` and ``observations`` are as
    `RecordTrajectory`'s.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> envs = openenv_lab.RecordVectorTrajectory(gym.make_vec("openenv/echo", num_envs=2))
        >>> _ = envs.reset(seed=0); _ = envs.step(("a", "bb"))
        >>> envs.trajectory.table.select("env_index", "step", "reward").rows()
        [(0, 0, 0.0), (1, 0, 0.0), (0, 1, 0.1), (1, 1, 0.2)]
        >>> envs.close()
    """

    def __init__(
        self, env: gym.vector.VectorEnv, path: str | Path | None = None, *, observations: bool = False
    ) -> None:
        super().__init__(env)
        self._adapters = _sub_adapters(env)
        self._rows = _Rows(env.single_action_space)
        self._metadata = {**_metadata(env, self._adapters[0]), "num_envs": env.num_envs}
        self._metadata.update(
            self._keep_observations(observations, env.single_observation_space, env.single_action_space)
        )
        self._mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        self._ended = np.zeros(env.num_envs, dtype=bool)
        self._started = time.perf_counter()
        self._start_saving(path)

    def _metadata_now(self) -> dict[str, Any]:
        return {**self._metadata, "wall_time_s": time.perf_counter() - self._started}

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        return self._guarded(lambda: self._reset(seed, options))

    def _reset(
        self, seed: int | list[int | None] | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        start = time.perf_counter()
        mask = (options or {}).get("reset_mask")
        observations, infos = self.env.reset(seed=seed, options=options)
        latency = time.perf_counter() - start
        for i, observation in enumerate(iterate(self.observation_space, observations)):
            if mask is None or mask[i]:
                info = _unbatch(infos, i)
                self._rows.reset(i, _seed_of(info), latency, self._family(i, None, observation, info))
                self._ended[i] = False
        return observations, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        return self._guarded(lambda: self._step(actions))

    def _step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        actions_list = list(iterate(self.action_space, actions))
        labels = [self._label(i, a) for i, a in enumerate(actions_list)]
        start = time.perf_counter()
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        latency = time.perf_counter() - start
        for i, observation in enumerate(iterate(self.observation_space, observations)):
            info = _unbatch(infos, i)
            if self._mode == AutoresetMode.NEXT_STEP and self._ended[i]:
                self._rows.reset(i, _seed_of(info), latency, self._family(i, None, observation, info))
            elif "final_obs" in info:  # SAME_STEP: the final step, then the reset that replaced it
                final_info = info.pop("final_info", {})
                final = self._family(i, actions_list[i], info.pop("final_obs"), final_info)
                self._rows.step(
                    i, actions_list[i], labels[i], rewards[i], terminations[i], truncations[i], latency, final
                )
                self._rows.reset(i, _seed_of(info), 0.0, self._family(i, None, observation, info))
            else:
                family = self._family(i, actions_list[i], observation, info)
                self._rows.step(
                    i,
                    actions_list[i],
                    labels[i],
                    rewards[i],
                    terminations[i],
                    truncations[i],
                    latency,
                    family,
                )
        self._ended = np.logical_or(terminations, truncations)
        if self._ended.any() and self.path is not None:
            _autosave(self, self._append)
        return observations, rewards, terminations, truncations, infos

    def _label(self, index: int, action: Any) -> str:
        adapter = self._adapters[index]
        if self._mode == AutoresetMode.NEXT_STEP and self._ended[index]:
            return ""  # this sub-environment resets instead: the action is not used
        return _describe(adapter, action)

    def _family(self, index: int, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        adapter = self._adapters[index]
        columns = adapter.record(action, observation, info) if adapter is not None else {}
        return {**columns, **_task_column(info, reset=action is None), **self._observation(observation)}


def _seed_of(info: dict[str, Any], given: int | None = None) -> int | None:
    """The seed an episode's reset used, as its info says (-1, our infos' "none": None), else ``given``."""
    seed = info.get("seed", given)
    return None if seed is None or (isinstance(seed, (int, np.integer)) and seed < 0) else seed


def _task_column(info: dict[str, Any], *, reset: bool) -> dict[str, Any]:
    """``task_id``, on the reset of an episode that plays a task (`_Rows` carries it to its steps), and a
    ``reward.<name>`` column per named reward component of a step (``info["reward_components"]``; a
    reset's row has no reward)."""
    columns: dict[str, Any] = {}
    task = info.get("task")
    if reset and isinstance(task, dict) and "id" in task:
        columns["task_id"] = str(task["id"])
    components = info.get("reward_components")
    if not reset and isinstance(components, dict):
        columns.update({f"reward.{name}": float(value) for name, value in components.items()})
    return columns


def _sub_adapters(env: gym.vector.VectorEnv) -> list[Any]:
    """The adapter of each sub-environment: ours keeps a list, gymnasium's keep the envs."""
    unwrapped = env.unwrapped
    if hasattr(unwrapped, "adapters"):
        return list(unwrapped.adapters)
    envs = getattr(unwrapped, "envs", None)
    if envs is not None:
        return [getattr(e.unwrapped, "adapter", None) for e in envs]
    return [None] * env.num_envs  # AsyncVectorEnv: the adapters live in other processes


def _unbatch(infos: dict[str, Any], index: int) -> dict[str, Any]:
    """Sub-environment ``index``'s info out of a batched info dict (the reverse of ``_add_info``)."""
    single: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        if isinstance(value, dict):
            nested = _unbatch(value, index)
            if nested:
                single[key] = nested
            continue
        present = infos.get(f"_{key}")
        if present is None or present[index]:
            single[key] = value[index]
    return single


def _describe(adapter: Any, action: Any) -> str:
    """``action`` in words (``action_label``), taken before it is sent.

    An action outside the action space that the adapter cannot describe gets a plain ``str`` here: the
    environment refuses it next with its own, clearer error ("not in the action space"). A valid action
    the adapter cannot describe is a bug in the adapter, and raises.
    """
    if adapter is None:
        if isinstance(action, np.ndarray):
            return json.dumps(np.round(action.astype(float), 4).tolist())
        return str(action)
    try:
        return adapter.describe_action(action)
    except Exception:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's note on casting a non-array action
            valid = adapter.action_space.contains(action)
        if valid:
            raise
        return str(action)


def _autosave(wrapper: RecordTrajectory | RecordVectorTrajectory, save: Callable[[], None]) -> None:
    """Save (``save``); a failure says where, why, and that nothing recorded is lost."""
    try:
        save()
    except OSError as exc:
        raise type(exc)(
            f"{exc}. Every step is still recorded: save it elsewhere with .save(path), "
            "or set .path to another file"
        ) from None
