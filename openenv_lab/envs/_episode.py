"""`Episode`: the gymnasium rules of one session, with no I/O (shared by the single and the vector env).

It prepares each request (the reset's keyword arguments: the adapter's ``reset_options``, the user's
options and the seed; the action's JSON after checking it) and interprets each reply (through the
adapter's ``decode``, handing it the action JSON the reply answers), and it tracks what gymnasium users rely
on: the generator behind seeds, whether the episode is over, the warning for servers that ignore
seeds, and the task an episode plays (the tasks given to ``make(..., tasks=...)`` in turn, or the one the
reset options name; `openenv_lab.envs.tasks` reads the server's catalogue of them once, on first use).
`OpenEnvEnv` sends its requests one at a time; `OpenEnvVectorEnv` sends those of all its episodes at once.
"""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from gymnasium.utils import seeding

from ..adapters import Adapter
from ..adapters.info_schema import InfoKey, InfoSchema
from ..client import CapacityError, EnvironmentMismatch, ProtocolError, StepResult
from .tasks import TaskCatalog, names_task, task_request

T = TypeVar("T")

__all__ = ["Episode", "contains", "retry_after_collecting"]

_SEED_UNCONFIRMED: set[str] = set()  # servers already warned about, so the warning shows once


def retry_after_collecting(open_session: Callable[[], T], patience: float = 10.0) -> T:
    """``open_session()``, and if the server is full, once more after collecting this process's garbage.

    Environments that nothing references any more (a notebook cell run again rebinds ``env``; an env caught
    in a reference cycle) keep their session until they are collected, and then close it. Collecting them
    frees their slots, so re-running a notebook never fails on "server full" because of its own past. The
    server frees a slot only once it has seen the connection close: on a loaded machine (two busy cores)
    that took over two seconds, so it gets ``patience`` seconds before the server is taken to be full.
    """
    try:
        return open_session()
    except CapacityError:
        if gc.collect() == 0:
            raise  # nothing was waiting to be collected: the server is full of other people's sessions
    deadline = time.monotonic() + patience
    while True:  # the server frees a slot once it has seen the closed connection
        try:
            return open_session()
        except CapacityError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Episode:
    """One session's episode state: seeds, the action check, and the end of the episode."""

    def __init__(
        self,
        adapter: Adapter,
        base_url: str,
        catalog: TaskCatalog | None = None,
        tasks: list[dict[str, Any]] | None = None,
        extra_keys: tuple[InfoKey, ...] = (),
    ) -> None:
        self.adapter = adapter
        self.extra_keys = extra_keys  # info keys of the env's own, beside the adapter's
        self.base_url = base_url
        self.catalog = catalog
        self.tasks = tasks or []  # played in turn by resets whose options name no task
        self._next_task = 0
        self.task: dict[str, Any] | None = None  # the catalogue's row of the task being played
        self.np_random: np.random.Generator | None = None
        self.np_random_seed: int | None = None
        self.seed: int | None = None
        self.needs_reset = True
        self.sent: dict[str, Any] | None = None  # the action JSON of the step in flight, for decode
        self._schema: InfoSchema | None = None  # made at the first reply, once the adapter is set up
        self._task_info: dict[str, Any] | None = None  # info["task"] on every step of a task's episode

    def reset_request(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        """The reset's keyword arguments; a missing seed is drawn from the episode's generator."""
        if seed is not None:
            self.np_random = self.adapter.np_random(seed)
            if self.np_random is None:
                self.np_random, _ = seeding.np_random(seed)
            self.np_random_seed = seed
        elif self.np_random is None:
            self.np_random, self.np_random_seed = seeding.np_random()
        if seed is None and self.adapter.derive_seeds:
            seed = int(self.np_random.integers(2**31 - 1))
        self.seed = seed
        self.needs_reset = True
        self.sent = None
        options = task_request(options, self.catalog)
        self.task = None
        if names_task(options):
            assert options is not None and self.catalog is not None
            if self.catalog.rows:
                self.task = self.catalog.locate(options["split"], options["index"])
        elif self.tasks:
            self.task = self.tasks[self._next_task % len(self.tasks)]
            self._next_task += 1
            options = {**(options or {}), "split": self.task["split"], "index": self.task["index"]}
        kwargs = {**self.adapter.reset_options, **(options or {})}
        if seed is not None:
            kwargs["seed"] = seed
        return kwargs

    def reset_result(self, result: StepResult) -> tuple[Any, dict[str, Any]]:
        transition = self._decode(result, None)
        unconfirmed = self.seed is not None and result.metadata.get("seed") != self.seed
        if unconfirmed and self.base_url not in _SEED_UNCONFIRMED:
            _SEED_UNCONFIRMED.add(self.base_url)
            warnings.warn(
                f"The server at {self.base_url} did not confirm that it applied reset(seed={self.seed}) "
                "(our servers echo the seed in the reset metadata; the official chess and Atari servers "
                "ignore seeds). Its episodes may not be reproducible.",
                stacklevel=3,
            )
        if self.task is not None:
            self._task_info = self._played_task(result.metadata.get("task"))
            if self.adapter.text_info:  # a dict of text and numbers: not among numbers only
                transition.info["task"] = self._task_info
        else:
            self._task_info = None
        self.needs_reset = transition.terminated or transition.truncated
        return transition.observation, transition.info

    def _played_task(self, reported: Any) -> dict[str, Any]:
        """The task as the catalogue names it and the server reports it; a mismatch is refused."""
        assert self.task is not None
        asked = {key: self.task[key] for key in ("id", "split", "index")}
        if not isinstance(reported, dict):
            return asked
        differs = [k for k in ("split", "index") if k in reported and reported[k] != asked[k]]
        if differs and self.adapter.check_identity:
            raise EnvironmentMismatch(
                f"The server at {self.base_url} reports playing task "
                f"{ {k: reported[k] for k in differs} }, not the {asked} asked for; make the env with "
                "check_identity=False to play it anyway",
                asked=asked,
                reported=reported,
                url=self.base_url,
            )
        return {**asked, **reported}

    def step_request(self, action: Any, *, checked: bool = False) -> dict[str, Any]:
        """The action's JSON, after checking the episode is running and the action is in the space
        (``checked``: the caller has already checked, e.g. a whole batch of actions at once)."""
        if self.needs_reset:
            raise ResetNeeded(
                "The episode is over (or has not started): call env.reset() before env.step(). "
                "Stepping a finished episode would not start a new game."
            )
        space = self.adapter.action_space
        if not checked and not contains(space, action):
            raise ValueError(
                f"Action {_short(action)} is not in the action space {space}{_why_not(space, action)}"
            )
        self.sent = self.adapter.encode_action(action)
        return self.sent

    def step_result(self, result: StepResult) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        transition = self._decode(result, self.sent)
        if transition.terminated or transition.truncated:
            self.needs_reset = True
        return (
            transition.observation,
            transition.reward,
            transition.terminated,
            transition.truncated,
            transition.info,
        )

    def conform(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with this episode's ``seed``, made to fit the info schema: the same keys and types on
        every step (`openenv_lab.adapters.info_schema`)."""
        if self._schema is None:  # made at the first reply, once the adapter is set up
            keys = (*self.adapter.info_schema(), *self.extra_keys)
            self._schema = InfoSchema(keys, source=f"The server at {self.base_url}")
        info["seed"] = -1 if self.seed is None else self.seed
        return self._schema.conform(info)

    def _decode(self, result: StepResult, sent: dict[str, Any] | None) -> Any:
        """The adapter's reading of a reply; a reply it cannot read (a field of the wrong type or shape:
        the server broke its own format) is a `ProtocolError`, as every fault of a server is."""
        adapter = self.adapter
        adapter.last_observation = result.observation
        try:
            transition = adapter.decode(result, sent)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
            raise ProtocolError(
                f"The server at {self.base_url} sent an observation its environment family cannot read "
                f"({type(exc).__name__}: {exc}); is it the server this env expects?",
                url=self.base_url,
            ) from exc
        info = self.conform(transition.info)
        if not adapter.text_info:
            info = self._schema.numbers_only(info)  # type: ignore[union-attr] - conform made it
        elif sent is not None and self._task_info is not None:
            info["task"] = self._task_info
        if adapter.raw_info:
            info["raw_observation"] = result.observation
            info["metadata"] = result.metadata
        transition.info = info
        return transition


_INT64 = np.dtype(np.int64)
_INT64_MAX = int(np.iinfo(np.int64).max)


def contains(space: gym.Space[Any], action: Any) -> bool:
    """``space.contains(action)``, answered directly in the two cases of almost every step.

    An array of a `Box`'s own shape and dtype (every step of a Box-action environment under SB3 or
    CleanRL): gymnasium's ``Box.contains`` answers the same two bound comparisons after checks that cost it
    several times as much (``np.can_cast``, ``np.all``). A Python ``int`` or ``np.int64`` for a
    `Discrete` space of the default dtype (chess, Atari, the board games): ``Discrete.contains`` builds an
    ``np.iinfo`` and a numpy scalar to answer ``start <= action < start + n``.
    """
    if type(space) is spaces.Discrete and (type(action) is int or type(action) is np.int64):
        if space.dtype is not _INT64:
            return space.contains(action)
        start, value = int(space.start), int(action)
        return start <= value < start + int(space.n) and value <= _INT64_MAX
    if (
        type(space) is spaces.Box
        and type(action) is np.ndarray
        and action.dtype == space.dtype
        and action.shape == space.shape
    ):
        return bool((action >= space.low).all() and (action <= space.high).all())
    return space.contains(action)


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _why_not(space: gym.Space[Any], action: Any) -> str:
    """What is wrong with an array action for a `Box` space (shape, dtype or bounds), as ": ..."; or ""."""
    if not isinstance(space, spaces.Box) or not isinstance(action, np.ndarray):
        return ""
    if action.shape != space.shape:
        return f": its shape is {action.shape}, the space's {space.shape}"
    if not np.can_cast(action.dtype, space.dtype):
        return f": its dtype is {action.dtype}; pass np.asarray(action, dtype=np.{space.dtype})"
    if not (np.all(action >= space.low) and np.all(action <= space.high)):
        return f": some values are outside [{space.low.min()}, {space.high.max()}]"
    return ""
