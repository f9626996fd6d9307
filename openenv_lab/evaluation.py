"""`evaluate` and `compare`: how well a policy does on an environment, and whether one policy beats another.

``evaluate(policy, "openenv/chess", episodes=100, n_envs=16)`` plays one episode per seed on the native
vector path (`OpenEnvVectorEnv`'s ``send``/``recv``: each sub-environment starts its next seed as soon as
its episode ends, and none waits for the others) and returns an `Evaluation`: a polars table, one row per
episode (seed, return, length, how it ended, wall time, the environment's identity, the task), and a
summary with the mean, its standard error and a bootstrap 95% interval. The seeds decide everything a
seeded server and a seeded policy do, so the same call gives the same table whatever ``n_envs`` is.

``compare(a, b)`` pairs two evaluations by seed and says, in words and with an interval, whether the
difference is larger than chance; it refuses evaluations of different environments (id, server version,
schema) unless told otherwise. Its result draws itself: return distributions, paired differences and, when
given, learning curves (`openenv_lab.widgets.evaluation`).

What can go wrong, and what happens:

- the policy raises, or returns an action outside the action space: that episode is recorded as failed,
  with the error, and the others go on; the summary counts the failures;
- the server goes away mid-evaluation: the episodes finished so far are kept and returned, with a warning
  that says how many are missing (``Evaluation.complete`` is False);
- ``episodes < 1``, an unknown environment id, ``seeds`` and ``episodes`` that disagree: a ``ValueError``
  before anything runs.
"""

from __future__ import annotations

import copy
import inspect
import math
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import polars as pl
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from .adapters.base import Adapter
from .adapters.generic import legal_choice
from .client import Client, OpenEnvError
from .envs import OpenEnvVectorEnv
from .envs.infos import split_infos
from .widgets import evaluation as report
from .widgets.bundle import widget_bundle

__all__ = ["Evaluation", "EvaluationComparison", "bootstrap_interval", "compare", "evaluate"]

#: The policies named by a string: uniform over the action space, or over the legal actions.
NAMED_POLICIES = ("random", "masked-random")
#: Bootstrap resamples for the intervals (their draws are seeded: the same data give the same interval).
RESAMPLES = 10_000
#: The columns of `Evaluation.episodes` that say which environment it was.
IDENTITY = ("env_id", "server_name", "server_version", "schema_sha256")


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (``(nan, nan)`` for fewer than two).

    Example:
        >>> low, high = bootstrap_interval([1.0, 2.0, 3.0, 4.0, 5.0])
        >>> bool(low < 3.0 < high), bootstrap_interval([1.0, 2.0, 3.0]) == bootstrap_interval([1.0, 2.0, 3.0])
        (True, True)
    """
    data = np.asarray(values, dtype=np.float64)
    if data.size < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    block = max(1, 2_000_000 // data.size)  # resamples drawn at a time: bounded memory for long lists
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        means[start:stop] = data[rng.integers(0, data.size, size=(stop - start, data.size))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def _positional(function: Any) -> int:
    """How many positional parameters a callable takes (0 when its signature cannot be read)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 0
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in kinds)


@dataclass
class _Failure:
    """A policy's failure to give an action for one observation."""

    error: str


class _Policy:
    """The policy as the evaluation loop calls it: actions for some sub-environments at once."""

    def __init__(self, policy: Any, action_space: gym.Space[Any]) -> None:
        self.space = action_space
        self.predict = None
        self.masks_argument = False
        #: it is given each sub-environment's last info too (a callable ``(obs, info) -> action``)
        self.wants_info = False
        if isinstance(policy, str):
            if policy not in NAMED_POLICIES:
                raise ValueError(f"policy {policy!r} is not one of {NAMED_POLICIES} or a callable or a model")
            self.name = policy
            # Picks among the listed legal actions where the schema does not bound an integer action.
            integer = isinstance(action_space, gym.spaces.Box) and action_space.dtype.kind in "iu"
            self.wants_info = policy == "masked-random" and integer
        elif callable(getattr(policy, "predict", None)):  # a Stable-Baselines3 model
            self.predict = policy.predict
            self.masks_argument = "action_masks" in inspect.signature(policy.predict).parameters
            self.name = type(policy).__name__
        elif callable(policy):
            self.name = getattr(policy, "__name__", type(policy).__name__)
            self.wants_info = _positional(policy) >= 2
        else:
            raise TypeError(
                "policy must be a callable obs -> action, a model with predict(), or one of "
                f"{NAMED_POLICIES}; got {type(policy).__name__}"
            )
        self.policy = policy
        self._spaces: dict[int, gym.Space[Any]] = {}

    def start(self, index: int, seed: int) -> None:
        """A new episode on sub-environment ``index``: the random policies draw from its seed."""
        if isinstance(self.policy, str):
            space = self._spaces.setdefault(index, copy.deepcopy(self.space))
            space.seed(seed)

    def act(
        self,
        observations: dict[int, Any],
        infos: dict[int, dict[str, Any]],
        observation_space: gym.Space[Any],
        legal: Callable[[int], list[Any]] = lambda index: [],
    ) -> dict[int, Any]:
        """An action (or a `_Failure`) for each sub-environment's observation (and info); ``legal(i)``:
        the legal actions sub-environment ``i``'s server listed, where the space cannot mask them."""
        if self.predict is not None:
            return self._predict(observations, observation_space)
        actions: dict[int, Any] = {}
        for index, obs in observations.items():
            try:
                if isinstance(self.policy, str):
                    mask = obs.get("action_mask") if isinstance(obs, dict) else None
                    listed = legal_choice(self._spaces[index], legal(index))
                    if self.policy == "masked-random" and mask is not None and np.any(mask):
                        action = self._spaces[index].sample(mask=np.asarray(mask, dtype=np.int8))
                    elif self.policy == "masked-random" and listed is not None:
                        action = listed  # an action the schema does not bound: one the server listed
                    else:
                        action = self._spaces[index].sample()
                elif self.wants_info:
                    action = self.policy(obs, infos.get(index, {}))
                else:
                    action = self.policy(obs)
            except Exception as exc:  # the policy's own error: this episode fails, the others go on
                actions[index] = _Failure(f"the policy raised {type(exc).__name__}: {exc}")
                continue
            actions[index] = self._checked(action)
        return actions

    def _predict(self, observations: dict[int, Any], observation_space: gym.Space[Any]) -> dict[int, Any]:
        ids = list(observations)
        batch = concatenate(
            observation_space, [observations[i] for i in ids], create_empty_array(observation_space, len(ids))
        )
        kwargs: dict[str, Any] = {"deterministic": True}
        if self.masks_argument and isinstance(batch, dict) and "action_mask" in batch:
            kwargs["action_masks"] = np.asarray(batch["action_mask"], dtype=bool)
        try:
            predicted, _ = self.predict(batch, **kwargs)
        except Exception as exc:
            failure = _Failure(f"the model's predict() raised {type(exc).__name__}: {exc}")
            return dict.fromkeys(ids, failure)
        return {i: self._checked(action) for i, action in zip(ids, predicted, strict=True)}

    def _checked(self, action: Any) -> Any:
        try:
            if self.space.contains(action):
                return action
        except Exception:  # a value contains() cannot even look at
            pass
        return _Failure(f"the policy returned {action!r:.80}, which is not in the action space {self.space}")


@dataclass
class _Episode:
    seed: int
    started: float
    task_id: str | None = None
    reward: float = 0.0
    length: int = 0


class _Runner:
    """One episode per seed on a vector env, each sub-environment taking the next seed when it is free."""

    def __init__(
        self, envs: gym.vector.VectorEnv, policy: _Policy, seeds: Sequence[int], progress: Any
    ) -> None:
        self.envs = envs
        self.policy = policy
        self.pending = deque(seeds)
        self.running: dict[int, _Episode] = {}
        self.observations: dict[int, Any] = {}
        self.infos: dict[int, dict[str, Any]] = {}  # kept only for a policy that takes (obs, info)
        self.rows: list[dict[str, Any]] = []
        self.progress = progress
        self.asynchronous = isinstance(envs, OpenEnvVectorEnv)  # send()/recv() to some of them

    def _legal(self, index: int) -> list[Any]:
        """The legal actions sub-environment ``index``'s server listed (`GenericAdapter.legal_actions`), or
        for an environment of another kind, its info's ``legal_actions``."""
        adapters = getattr(self.envs, "adapters", None)
        listing = getattr(adapters[index], "legal_actions", None) if adapters is not None else None
        if callable(listing):
            return listing()
        listed = self.infos.get(index, {}).get("legal_actions")
        return list(listed) if isinstance(listed, (list, tuple, np.ndarray)) else []

    def run(self) -> None:
        self._start(list(range(min(self.envs.num_envs, len(self.pending)))))
        while self.running:
            # The policy is asked once per observation: where it fails, that episode ends and the
            # sub-environment starts its next seed, whose first observation is asked for in turn.
            actions: dict[int, Any] = {}
            asking = set(self.running)
            while asking:
                answers = self.policy.act(
                    {i: self.observations[i] for i in sorted(asking)},
                    self.infos,
                    self.envs.single_observation_space,
                    self._legal,
                )
                failed = [i for i, action in answers.items() if isinstance(action, _Failure)]
                for i in failed:
                    self._finish(i, error=answers[i].error)
                actions.update((i, action) for i, action in answers.items() if i not in failed)
                asking = set(self._start(failed))
            if actions:
                self._step({i: actions[i] for i in sorted(actions)})

    def _start(self, ids: list[int]) -> list[int]:
        """Reset sub-environments ``ids`` with the next seeds (as many as are left); the ids started."""
        ids = ids[: len(self.pending)]
        if not ids:
            return []
        seeds: list[int | None] = [None] * self.envs.num_envs
        mask = np.zeros(self.envs.num_envs, dtype=np.bool_)
        for i in ids:
            seeds[i] = self.pending.popleft()
            mask[i] = True
            self.running[i] = _Episode(int(seeds[i]), time.perf_counter())
            self.policy.start(i, int(seeds[i]))
        observations, infos = self.envs.reset(seed=seeds, options={"reset_mask": mask})
        rows = list(iterate(self.envs.observation_space, observations))
        per_env = split_infos(infos, self.envs.num_envs) if self.policy.wants_info else None
        tasks = _task_ids(infos, self.envs.num_envs)
        for i in ids:
            self.observations[i] = rows[i]
            if per_env is not None:
                self.infos[i] = per_env[i]
            self.running[i].task_id = tasks[i]
        return ids

    def _step(self, actions: dict[int, Any]) -> None:
        ids = list(actions)
        single_space = self.envs.single_action_space
        if self.asynchronous and len(ids) < self.envs.num_envs:  # only those with an episode running step
            batch = concatenate(
                single_space, list(actions.values()), create_empty_array(single_space, len(ids))
            )
            self.envs.send(batch, env_ids=ids)
            observations, rewards, terminations, truncations, infos = self.envs.recv()
            order = [int(i) for i in infos["env_id"]]
        else:  # all of them (one message per server for our vector env); idle ones' results are dropped
            everything = [
                actions[i] if i in actions else single_space.sample() for i in range(self.envs.num_envs)
            ]
            batch = concatenate(
                single_space, everything, create_empty_array(single_space, self.envs.num_envs)
            )
            observations, rewards, terminations, truncations, infos = self.envs.step(batch)
            order = list(range(self.envs.num_envs))
        rows = list(iterate(self.envs.observation_space, observations))
        per_env = split_infos(infos, len(order)) if self.policy.wants_info else None
        ended = []
        for j, i in enumerate(order):
            if i not in self.running:
                continue
            episode = self.running[i]
            episode.reward += float(rewards[j])
            episode.length += 1
            self.observations[i] = rows[j]
            if per_env is not None:
                self.infos[i] = per_env[j]
            if terminations[j] or truncations[j]:
                self._finish(i, terminated=bool(terminations[j]), truncated=bool(truncations[j]))
                ended.append(i)
        self._start(ended)

    def _finish(
        self, i: int, *, terminated: bool = False, truncated: bool = False, error: str | None = None
    ) -> None:
        episode = self.running.pop(i)
        self.observations.pop(i, None)
        self.infos.pop(i, None)
        self.rows.append(
            {
                "seed": episode.seed,
                "return": episode.reward,
                "length": episode.length,
                "terminated": terminated,
                "truncated": truncated,
                "failed": error is not None,
                "error": error,
                "wall_s": time.perf_counter() - episode.started,
                "task_id": episode.task_id,
            }
        )
        if self.progress is not None:
            self.progress.update(1)

    def abandon(self, reason: str) -> None:
        """The server went away: the episodes in progress end as failed, the pending ones are dropped."""
        for i in list(self.running):
            self._finish(i, error=reason)
        self.pending.clear()


def _task_ids(infos: dict[str, Any], n: int) -> list[str | None]:
    """The ``id`` of the task each sub-environment's reset named in ``info["task"]`` (batched: a dict of
    arrays, or an array of dicts), or None."""
    if "task" not in infos:
        return [None] * n
    rows = split_infos({"task": infos["task"], "_task": infos.get("_task", np.ones(n, dtype=np.bool_))}, n)
    tasks = [row.get("task") for row in rows]
    return [str(task["id"]) if isinstance(task, dict) and "id" in task else None for task in tasks]


class Evaluation:
    """What `evaluate` measured: ``episodes``, one row per episode, and ``identity``, the environment's.

    Columns of ``episodes``: ``seed``, ``return``, ``length`` (steps), ``terminated``, ``truncated``,
    ``failed`` and ``error`` (the policy's failure, or the server's), ``wall_s``, ``task_id`` (a task set's
    task, else null), ``policy``, and the identity (``env_id``, ``server_name``, ``server_version``,
    ``schema_sha256``) on every row, so tables of several evaluations can be stacked and still compared.

    Example:
        >>> import openenv_lab
        >>> result = openenv_lab.evaluate(lambda obs: "hello", "openenv/echo", episodes=3, n_envs=2,
        ...                               max_steps=2, progress=False)
        >>> result.episodes.select("seed", "return", "length", "truncated").rows()
        [(0, 1.0, 2, True), (1, 1.0, 2, True), (2, 1.0, 2, True)]
        >>> result.summary()["mean"], result.summary()["failed"]
        (1.0, 0)
    """

    def __init__(
        self, episodes: pl.DataFrame, identity: dict[str, Any], *, policy: str, complete: bool = True
    ) -> None:
        self.episodes = episodes
        self.identity = identity
        self.policy = policy
        #: False when the server went away before every seed was played (the rows are what was played).
        self.complete = complete

    @property
    def returns(self) -> np.ndarray:
        """The returns of the episodes that did not fail, in seed order."""
        played = self.episodes.filter(~pl.col("failed")).sort("seed")
        return played["return"].to_numpy().astype(np.float64)

    def summary(self, *, confidence: float = 0.95) -> dict[str, Any]:
        """``episodes``, ``failed``, ``mean``, ``std``, ``sem`` (standard error), ``ci_low``/``ci_high``
        (bootstrap interval of the mean), ``min``, ``max``; NaN where too few episodes give a number."""
        values = self.returns
        n = values.size
        low, high = bootstrap_interval(values, confidence=confidence)
        std = float(values.std(ddof=1)) if n > 1 else math.nan
        return {
            "episodes": int(self.episodes.height),
            "failed": int(self.episodes["failed"].sum()),
            "mean": float(values.mean()) if n else math.nan,
            "std": std,
            "sem": std / math.sqrt(n) if n > 1 else math.nan,
            "ci_low": low,
            "ci_high": high,
            "confidence": confidence,
            "min": float(values.min()) if n else math.nan,
            "max": float(values.max()) if n else math.nan,
        }

    def __str__(self) -> str:
        s = self.summary()
        incomplete = "" if self.complete else " (incomplete: the server went away)"
        played = s["episodes"] - s["failed"]
        name = f"{self.policy} on {self.identity.get('env_id')}"
        if not played:
            return f"{name}: all {s['episodes']} episodes failed{incomplete}"
        failed = f", {s['failed']} failed" if s["failed"] else ""
        spread = (
            f" (95% CI {s['ci_low']:+.4g} to {s['ci_high']:+.4g}, sem {s['sem']:.3g})" if played > 1 else ""
        )
        return (
            f"{name}: mean return {s['mean']:+.4g}{spread} over "
            f"{played} episode{'s' if played != 1 else ''}{failed}{incomplete}"
        )

    def __repr__(self) -> str:
        return f"<Evaluation {self}>"

    def _repr_html_(self) -> str:
        return report.summary_html(str(self), self.episodes)


def _env_id(env_id: str) -> str:
    name = env_id if "/" in env_id or env_id in gym.registry else f"openenv/{env_id}"
    if name not in gym.registry:
        known = sorted(i for i in gym.registry if i.startswith("openenv/"))
        raise ValueError(
            f"Unknown environment id {env_id!r}; the openenv ids are {known}, or any gymnasium id"
        )
    return name


def _identity(envs: gym.vector.VectorEnv | gym.Env, env_id: str) -> dict[str, Any]:
    identity: dict[str, Any] = {
        "env_id": env_id,
        "server_name": None,
        "server_version": None,
        "schema_sha256": None,
        "base_url": None,
    }
    unwrapped = envs.unwrapped
    urls = getattr(unwrapped, "base_urls", None) or [getattr(unwrapped, "base_url", None)]
    headers = getattr(unwrapped, "headers", None)
    if urls and urls[0]:
        identity["base_url"] = urls[0]
        try:
            with Client(urls[0], headers=headers) as client:
                server = client.identity()
        except OpenEnvError:  # a server without /metadata or /schema: its identity is its id alone
            return identity
        identity.update(
            server_name=server["name"],
            server_version=server["version"],
            schema_sha256=server["schema_sha256"],
        )
    return identity


def _seeds(episodes: int | None, seeds: Sequence[int] | None, seed: int) -> list[int]:
    if seeds is not None:
        seeds = [int(s) for s in seeds]
        if episodes is not None and episodes != len(seeds):
            raise ValueError(f"episodes={episodes} but {len(seeds)} seeds were given: one episode per seed")
        if not seeds:
            raise ValueError("seeds is empty: give at least one")
        if len(set(seeds)) != len(seeds):
            raise ValueError("seeds has duplicates: each seed is one episode, and comparisons pair by seed")
        return seeds
    episodes = 100 if episodes is None else episodes
    if episodes < 1:
        raise ValueError(f"episodes must be at least 1, got {episodes}")
    return list(range(seed, seed + episodes))


def _progress(total: int, label: str, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit="episode")


def evaluate(
    policy: Any,
    env: str | gym.Env | gym.vector.VectorEnv,
    *,
    episodes: int | None = None,
    seeds: Sequence[int] | None = None,
    seed: int = 0,
    n_envs: int = 16,
    progress: bool = True,
    **make_kwargs: Any,
) -> Evaluation:
    """Play ``policy`` for one episode per seed and return the `Evaluation`.

    Args:
        policy: a callable ``obs -> action`` (one observation at a time; ``(obs, info) -> action`` is given
            the sub-environment's last info too), a model with ``predict`` (Stable-
            Baselines3; ``MaskablePPO`` gets the action masks), ``"random"`` (uniform over the action space)
            or ``"masked-random"`` (uniform over the legal actions where the observation has a mask, or
            where the server lists them for an action the schema does not bound). The
            random policies draw from each episode's seed.
        env: an environment id (``"openenv/chess"``, or ``"chess"``), made here with ``make_kwargs`` as a
            vector env of ``n_envs`` and closed at the end (with an adapter instance among them, which
            serves one session, as a single env playing one episode at a time); or an environment you
            made (a vector env of ours, any gymnasium vector env, or a single env), used and left open.
        episodes: how many (default 100, seeds ``seed``, ``seed + 1``, ...); or give ``seeds``.
        seeds: the seeds, one episode each (the same seeds give the same episodes on a seeded server).
        n_envs: sub-environments (sessions) playing at once, for an id.
        progress: a progress bar (tqdm: in notebooks a widget, in terminals a line).
    """
    seed_list = _seeds(episodes, seeds, seed)
    made = isinstance(env, str)
    single = env if isinstance(env, gym.Env) else None
    if made:
        env_id = _env_id(env)
        if n_envs < 1:
            raise ValueError(f"n_envs must be at least 1, got {n_envs}")
        if isinstance(make_kwargs.get("adapter"), Adapter):  # one session's adapter: one env
            single = gym.make(env_id, **make_kwargs)
            envs = gym.vector.SyncVectorEnv([lambda: single], copy=False)
        else:
            n = min(n_envs, len(seed_list))
            mode = None if env_id.startswith("openenv/") else "sync"
            envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode, **make_kwargs)
    elif isinstance(env, gym.vector.VectorEnv):
        envs = env
        env_id = getattr(getattr(env, "spec", None), "id", None) or type(env.unwrapped).__name__
    elif isinstance(env, gym.Env):
        envs = gym.vector.SyncVectorEnv([lambda: env], copy=False)  # closed below without closing env
        env_id = getattr(getattr(env, "spec", None), "id", None) or type(env.unwrapped).__name__
    else:
        raise TypeError(f"env must be an environment id or an environment, got {type(env).__name__}")
    try:
        wrapped = _Policy(policy, envs.single_action_space)
        identity = _identity(envs if single is None else single, env_id)
        bar = _progress(len(seed_list), f"{wrapped.name} on {env_id}", progress)
        runner = _Runner(envs, wrapped, seed_list, bar)
        complete = True
        try:
            runner.run()
        except OpenEnvError as exc:
            played = len(runner.rows)
            runner.abandon(f"the server went away: {exc}")
            complete = False
            warnings.warn(
                f"The server went away after {played} of {len(seed_list)} episodes ({exc}); the evaluation "
                f"keeps the {played} finished episodes (Evaluation.complete is False).",
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            if bar is not None:
                bar.close()
    finally:
        if made:
            envs.close()
    schema = {
        "seed": pl.Int64,
        "return": pl.Float64,
        "length": pl.Int64,
        "terminated": pl.Boolean,
        "truncated": pl.Boolean,
        "failed": pl.Boolean,
        "error": pl.Utf8,
        "wall_s": pl.Float64,
        "task_id": pl.Utf8,
    }
    table = (
        pl.DataFrame(runner.rows, schema=schema)
        .sort("seed")
        .with_columns(
            pl.lit(wrapped.name).alias("policy"),
            *(pl.lit(identity[key], dtype=pl.Utf8).alias(key) for key in IDENTITY),
        )
    )
    return Evaluation(table, identity, policy=wrapped.name, complete=complete)


class EvaluationComparison:
    """Two evaluations paired by seed: the difference, its interval, a p-value and a verdict in words.

    ``pairs`` is a table of the seeds both played without failure (``seed``, ``a``, ``b``,
    ``difference``). ``verdict`` says who wins by how much, or that no difference is detectable with this
    many episodes and about how many would be needed. A winner is named only when both the bootstrap
    interval of the mean difference excludes zero and the sign-flip test's p-value is below 5% (exact up
    to 16 pairs that differ): with few episodes that differ at all, the bootstrap alone would claim too
    much. It draws itself (`figure`, `png`, ``_repr_html_``, `to_html`, `widget`): the return
    distributions side by side, the paired differences, and the learning curves when given.
    """

    def __init__(
        self,
        a: Evaluation,
        b: Evaluation,
        *,
        labels: tuple[str, str] | None = None,
        curves: dict[str, Any] | None = None,
        confidence: float = 0.95,
    ) -> None:
        self.a, self.b = a, b
        self.labels = labels or (a.policy, b.policy if b.policy != a.policy else f"{b.policy} (B)")
        self.curves = curves or {}
        self.confidence = confidence
        left = a.episodes.filter(~pl.col("failed")).select("seed", pl.col("return").alias("a"))
        right = b.episodes.filter(~pl.col("failed")).select("seed", pl.col("return").alias("b"))
        self.pairs = (
            left.join(right, on="seed", how="inner")
            .sort("seed")
            .with_columns((pl.col("a") - pl.col("b")).alias("difference"))
        )
        if self.pairs.height < 2:
            raise ValueError(
                f"Only {self.pairs.height} seed(s) were played by both without failing: comparing needs at "
                "least two paired episodes (evaluate both on the same seeds)."
            )
        d = self.pairs["difference"].to_numpy()
        self.n = d.size
        self.mean = float(d.mean())
        self.std = float(d.std(ddof=1))
        self.ci = bootstrap_interval(d, confidence=confidence)
        self.p_value = _sign_flip_p_value(d)
        self.needed = _episodes_needed(self.mean, self.std)
        self.verdict = self._verdict()

    def _verdict(self) -> str:
        first, second = self.labels
        low, high = self.ci
        level = f"{self.confidence:.0%}"
        if self.std == 0 and self.mean == 0:
            return f"{first} and {second} got the same return on each of the {self.n} seeds."
        # Both must say so: the bootstrap interval alone is too narrow when few episodes differ at all
        # (four wins in a hundred draws), where the sign-flip test is exact.
        if (low > 0 or high < 0) and self.p_value < 1 - self.confidence:
            winner, loser = (first, second) if self.mean > 0 else (second, first)
            half = (high - low) / 2
            return (
                f"{winner} beats {loser} by {abs(self.mean):.3g} ± {half:.2g} ({level} CI of the difference "
                f"{low:+.3g} to {high:+.3g}), p = {self.p_value:.2g}, over {self.n} paired seeds."
            )
        needed = (
            f"about {self.needed:,} paired episodes would be needed to detect a difference of this size "
            "(80% power)"
            if self.needed is not None
            else "a difference this small would need far more episodes"
        )
        return (
            f"No difference detectable with {self.n} episodes: {first} minus {second} is {self.mean:+.3g} "
            f"({level} CI {low:+.3g} to {high:+.3g}), p = {self.p_value:.2g}; {needed}."
        )

    def __str__(self) -> str:
        return self.verdict

    def __repr__(self) -> str:
        return f"<EvaluationComparison {self.verdict}>"

    def figure(self) -> Any:
        """The comparison as a matplotlib ``Figure``."""
        return report.comparison_figure(
            self.labels,
            (self.a.returns, self.b.returns),
            self.pairs["difference"].to_numpy(),
            self.ci,
            self.curves,
        )

    def png(self) -> bytes:
        return report.png(self.figure())

    def _repr_html_(self) -> str:
        return report.comparison_html(self.verdict, self._table(), self.png())

    def to_html(self, path: Any = None) -> str:
        """The report as an HTML fragment; with ``path``, also saved there as a self-contained page."""
        return report.save_html(self._repr_html_(), path)

    @property
    def widget(self) -> Any:
        """The report as an ipywidgets box (stock widgets: works on Colab)."""
        return report.comparison_widget(self.verdict, self._table(), self.png())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = widget_bundle(self.widget, **kwargs)
        bundle["text/html"] = self._repr_html_()
        return bundle

    def _table(self) -> list[tuple[str, str, str]]:
        rows = []
        for label, evaluation in zip(self.labels, (self.a, self.b), strict=True):
            s = evaluation.summary(confidence=self.confidence)
            rows.append((label, f"{s['mean']:+.4g}", f"{s['ci_low']:+.4g} to {s['ci_high']:+.4g}"))
        low, high = self.ci
        rows.append(
            (
                f"{self.labels[0]} − {self.labels[1]} (paired)",
                f"{self.mean:+.4g}",
                f"{low:+.4g} to {high:+.4g}",
            )
        )
        return rows


def _sign_flip_p_value(differences: np.ndarray, *, resamples: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired differences under "no difference" (each difference's sign flipped
    at random). Zero differences do not change under a flip, so only the others are flipped: exactly
    (every sign pattern) for up to 16 of them, else ``resamples`` seeded draws."""
    nonzero = differences[differences != 0]
    n = nonzero.size
    if n == 0:
        return 1.0
    observed = abs(nonzero.sum())
    if n <= 16:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(resamples, n))
    sums = np.abs(signs @ nonzero)
    # Sums equal on paper differ in their last bits: a tie is within a billionth of the terms' size (a
    # floor of 1e-9 would count every pattern as extreme where returns are counted in billionths).
    return float(np.mean(sums >= observed - 1e-9 * np.abs(nonzero).sum()))


def _episodes_needed(
    mean: float, std: float, *, z_alpha: float = 1.96, z_power: float = 0.8416
) -> int | None:
    """Paired episodes to detect a difference of ``mean`` at 5% (two-sided) with 80% power: the normal
    approximation's count, and never fewer than 6, the fewest differing pairs with which the sign-flip test
    can reach 5% (all six the same way: p = 2/64)."""
    if mean == 0 or not math.isfinite(std):
        return None
    return max(6, math.ceil(((z_alpha + z_power) * std / abs(mean)) ** 2))


def _differences(a: Evaluation, b: Evaluation) -> list[str]:
    return [
        f"{key}: {a.identity.get(key)!r} vs {b.identity.get(key)!r}"
        for key in IDENTITY
        if a.identity.get(key) != b.identity.get(key)
    ]


def compare(
    first: Any,
    second: Any,
    *,
    labels: tuple[str, str] | None = None,
    allow_different_envs: bool = False,
    curves: dict[str, Any] | None = None,
) -> Any:
    """Two evaluations paired by seed (an `EvaluationComparison`), or two recordings side by side.

    With two `Evaluation` s it refuses, naming the differences, evaluations of different environments (id,
    server version, schema hash) unless ``allow_different_envs=True``. ``curves`` maps each label to its
    learning curve (a `RewardCurve`, or a sequence of returns) for the report. Anything else (trajectories,
    paths, recorders) goes to `openenv_lab.widgets.compare`: two replays on one slider.
    """
    if isinstance(first, Evaluation) and isinstance(second, Evaluation):
        different = _differences(first, second)
        if different and not allow_different_envs:
            raise ValueError(
                "These evaluations are of different environments (" + "; ".join(different) + "): their "
                "returns are not comparable. Pass allow_different_envs=True to compare them anyway."
            )
        return EvaluationComparison(first, second, labels=labels, curves=curves)
    if isinstance(first, Evaluation) or isinstance(second, Evaluation):
        raise TypeError("compare() takes two Evaluations, or two recordings; not one of each")
    from .widgets import compare as compare_replays

    return compare_replays(first, second, labels=labels or ("A", "B"))
