"""What every lesson's checks share: the verdict (`NotYetRight`), and watchers that see what an answer did.

A watcher is a gymnasium wrapper handed to the student's function in place of the environment. It
counts the calls, remembers the seeds and the legal-action masks, and times the steps, so a check can
compare the answer with what actually happened instead of with the answer's own output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

__all__ = ["Exercise", "NotYetRight", "WatchedEnv", "WatchedVectorEnv"]

#: The hint for an answer that steps an episode after its end.
PAST_THE_END = (
    "it stepped an episode that had already ended. An episode ends when `terminated` OR `truncated` is true "
    "(a limit cuts it short: that is `truncated`); stop, or reset, then."
)
#: The most seconds a check takes by default, however wrong the answer (`Exercise.time_limit`); a machine
#: whose cores are shared (CI runs several notebooks at once) sets more in ``OPENENV_LAB_CHECK_SECONDS``.
SECONDS = float(os.environ.get("OPENENV_LAB_CHECK_SECONDS", "60"))


class NotYetRight(AssertionError):
    """An exercise's answer is not right yet. The message says what went wrong and what to try.

    It is an `AssertionError`, so a notebook cell (and nbval, and pytest) stops on it as on a failed
    ``assert``.
    """


class _TooLong(BaseException):
    """Raised by the time limit's alarm inside the answer (a BaseException: an answer's ``except
    Exception`` does not swallow it)."""


class Exercise:
    """One exercise of a lesson: runs the answer, fails with a hint, or says it is correct.

    ``seconds``: the most a check may take (`time_limit`); an answer still running then gets a hint
    instead of a kernel that never answers. ``lets_through``: the answer's errors that the check
    catches itself, to give a hint of its own; `run` turns any other error into a hint.
    """

    def __init__(
        self,
        number: int,
        name: str,
        *,
        seconds: float | None = None,
        lets_through: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.number = number
        self.name = name
        self.seconds = SECONDS if seconds is None else seconds
        #: errors of the answer the check handles itself (with its own hint), not `run`
        self.lets_through = lets_through
        self._limited = False

    def fail(self, hint: str) -> NoReturn:
        raise NotYetRight(f"Exercise {self.number} ({self.name}) is not right yet: {hint}")

    def require(self, condition: bool, hint: str) -> None:
        if not condition:
            self.fail(hint)

    @contextlib.contextmanager
    def time_limit(self) -> Iterator[None]:
        """Stop what runs inside after ``seconds``, with a hint. A check that calls the answer many times
        (a training run) puts them all inside one limit; `run` alone limits each call.

        The alarm is a SIGALRM timer, which only the main thread of a Unix process can set (a notebook's
        kernel runs cells there); elsewhere nothing is limited.
        """
        if (
            self._limited
            or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()
        ):
            yield
            return

        def alarm(signum: int, frame: Any) -> None:
            raise _TooLong

        previous = signal.signal(signal.SIGALRM, alarm)
        earlier, _ = signal.setitimer(signal.ITIMER_REAL, self.seconds)  # pytest-timeout's, say
        started = time.monotonic()
        self._limited = True
        try:
            yield
        except _TooLong:
            self.fail(
                f"it was still running after {self.seconds:g} seconds, far longer than a right answer "
                "takes. Is there a loop that never ends: an episode played past `terminated` or "
                "`truncated`, or a `while` whose condition never changes?"
            )
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if earlier:  # the timer that was set before, for what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(earlier - (time.monotonic() - started), 1e-3))
            self._limited = False

    def run(self, answer: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call the answer; one that is unwritten, steps a game past its end, raises or runs too long
        gets a hint (with the answer's own traceback above it, where it raised)."""
        with self.time_limit():
            try:
                return answer(*args, **kwargs)
            except NotImplementedError:
                self.fail(
                    f"`{self.name}` is not written yet: replace `raise NotImplementedError` with your code."
                )
            except ResetNeeded:
                self.fail(PAST_THE_END)
            except (NotYetRight, *self.lets_through):
                raise
            except Exception as exc:
                raise NotYetRight(
                    f"Exercise {self.number} ({self.name}) is not right yet: `{self.name}` raised "
                    f"{type(exc).__name__}: {exc}. The traceback above shows the line of your code."
                ) from exc

    def require_finite(self, values: Any, what: str) -> None:
        """A hint when ``values`` hold a NaN or an infinity: the answer's numbers diverged."""
        array = np.asarray(values, dtype=float)
        if not np.all(np.isfinite(array)):
            bad = "NaN" if np.isnan(array).any() else "an infinity"
            self.fail(
                f"{what} holds {bad}: the updates diverged. Look for a step size above 1, a sign that "
                "pushes away from the target instead of toward it, or a target that grows with itself."
            )

    def passed(self, detail: str = "") -> None:
        print(f"Exercise {self.number}: correct" + (f" ({detail})" if detail else ""))


def _legal(mask: np.ndarray, action: Any) -> bool:
    index = int(action)
    return 0 <= index < mask.size and bool(mask[index])


class WatchedEnv(gym.Wrapper):
    """A single environment that records what is done to it: seeds, actions, rewards, endings.

    ``strict_masks``: an action outside the observation's ``action_mask`` fails the exercise at once,
    with a hint (the environment would have played it as an illegal move).
    """

    def __init__(self, env: gym.Env, exercise: Exercise, *, strict_masks: bool = False) -> None:
        super().__init__(env)
        self.exercise = exercise
        self.strict_masks = strict_masks
        self.reset_seeds: list[int | None] = []
        self.steps = 0
        self.rewards: list[float] = []
        self.endings: list[tuple[bool, bool]] = []
        self.infos: list[dict[str, Any]] = []  # the steps' infos
        self.actions: list[list[Any]] = []  # per reset, the actions taken since
        self.observations: list[list[Any]] = []  # per reset, its observation and each step's since
        self.last_observation: Any = None
        self.last_info: dict[str, Any] = {}
        self._ended = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.reset_seeds.append(seed)
        self.actions.append([])
        observation, info = self.env.reset(seed=seed, options=options)
        self.observations.append([observation])
        self._ended = False
        self.last_observation, self.last_info = observation, info
        return observation, info

    def step(self, action: Any) -> Any:
        if self._ended:  # a time limit on this side truncates without ending the server's episode
            self.exercise.fail(PAST_THE_END)
        observation = self.last_observation
        if self.strict_masks and isinstance(observation, dict) and "action_mask" in observation:
            mask = np.asarray(observation["action_mask"])
            if mask.any() and not _legal(mask, action):
                self.exercise.fail(
                    f"action {action!r} is not legal in that position. Sample among the legal ones: "
                    "`env.action_space.sample(mask=obs['action_mask'])`."
                )
        result = self.env.step(action)
        observation, reward, terminated, truncated, info = result
        if self.actions:
            self.actions[-1].append(action)
            self.observations[-1].append(observation)
        self.steps += 1
        self.rewards.append(float(reward))
        self.endings.append((bool(terminated), bool(truncated)))
        self._ended = bool(terminated or truncated)
        self.infos.append(info)
        self.last_observation, self.last_info = observation, info
        return result


class WatchedVectorEnv(gym.vector.VectorWrapper):
    """A vector environment that counts and times its steps, and checks actions against the masks."""

    def __init__(self, env: gym.vector.VectorEnv, exercise: Exercise, *, strict_masks: bool = False) -> None:
        super().__init__(env)
        self.exercise = exercise
        self.strict_masks = strict_masks
        self.resets = 0
        self.steps = 0
        self.step_seconds = 0.0
        self.endings = 0  # sub-environment episodes that ended (terminated or truncated)
        self.last_observation: Any = None

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> Any:
        self.resets += 1
        observation, infos = self.env.reset(seed=seed, options=options)
        self.last_observation = observation
        return observation, infos

    def step(self, actions: Any) -> Any:
        observation = self.last_observation
        if self.strict_masks and isinstance(observation, dict) and "action_mask" in observation:
            for index, (mask, action) in enumerate(zip(observation["action_mask"], actions, strict=False)):
                if mask.any() and not _legal(np.asarray(mask), action):
                    self.exercise.fail(
                        f"sub-environment {index} got action {action!r}, which is not legal there. Sample "
                        "each one among its legal actions: `envs.single_action_space.sample(mask=m)` for "
                        "each row `m` of `obs['action_mask']`."
                    )
        start = time.perf_counter()
        result = self.env.step(actions)
        self.step_seconds += time.perf_counter() - start
        observation, _, terminations, truncations, _ = result
        self.steps += 1
        self.endings += int(np.logical_or(terminations, truncations).sum())
        self.last_observation = observation
        return result
