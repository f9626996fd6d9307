"""`OpenEnvVectorEnv`: N OpenEnv sessions as one ``gymnasium.vector.VectorEnv``, stepped concurrently.

``gym.make_vec("openenv/chess", num_envs=16)`` opens 16 sessions and drives them from one asyncio event
loop in a background thread: a step sends all 16 requests and waits for the 16 replies, so the round
trips overlap instead of adding up. On servers that offer it (ours: ``/ws/batch``) the sessions share one
WebSocket and a step is one message each way; elsewhere each session has its own connection. When every
session is on a server of this machine with that route, the calling thread itself sends the messages and
reads the replies (`SyncChannel`), without the event loop's hand-overs: 1.3-1.5x the steps/s of 16 cheap
environments. No subprocesses and no pickling, so it works in Jupyter and on macOS/Windows (``spawn``),
where gymnasium's ``AsyncVectorEnv`` re-imports everything per worker.

Behaviour is exactly ``gymnasium.vector.SyncVectorEnv``'s over the same single environments (tested):
the same seeding (``reset(seed=s)`` seeds sub-environment i with ``s + i``), the same batching of
observations and infos, and both autoreset modes, ``NEXT_STEP`` (the default) and ``SAME_STEP``.

Sessions go to the embedded server of the family, to a container (``launcher="docker"``, ``image=...``;
removed by ``close``), to a launcher object's server, or round-robin over ``base_urls=[...]`` (for
instance a `Fleet`'s ``urls``). Servers that
report their capacity (``GET /capacity`` on ours) get no more sessions than they have free; for the others
a refusal moves the session to the next server. When the servers cannot hold ``num_envs`` sessions the
error says how many are missing and how to get them. If a server fails during a step, the error names
the sub-environment and the server, and every session is closed.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import queue
import select
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterator, Sequence
from copy import deepcopy
from typing import Any, TypeVar

import numpy as np
from gymnasium.spaces import Box, Discrete, MultiDiscrete
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from ..adapters import Adapter
from ..client import (
    AsyncSession,
    CapacityError,
    Client,
    Keepalive,
    OpenEnvError,
    StepResult,
    Timeout,
    Timeouts,
)
from ..client.async_session import exchange
from ..client.batch import BatchedSession, Channel, SyncBatchedSession, SyncChannel, read_observation
from ..launch import Launcher
from ._episode import Episode, retry_after_collecting
from .env import _make_adapter, _make_launcher

__all__ = ["OpenEnvVectorEnv"]

T = TypeVar("T")

#: From this many sub-environments on, a step goes out in two halves (see `OpenEnvVectorEnv.step`).
_HALVES_FROM = 8

#: Whether sessions on this machine's servers may use `SyncChannel` (tests turn it off to drive `Channel`).
_SYNC_CHANNELS = True

_AnySession = AsyncSession | BatchedSession | SyncBatchedSession


class _LoopThread:
    """An asyncio event loop running in a daemon thread; `run` waits for a coroutine from any thread."""

    def __init__(self) -> None:
        try:  # uvloop's event loop does the same work in C, a third of the client's CPU per step
            import uvloop

            self.loop = uvloop.new_event_loop()
        except ImportError:
            self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="openenv-lab-vector", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.loop.run_forever()
        finally:  # stopped by `stop`, or by the finalizer of an env that was never closed
            self.loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.wait(self.submit(coroutine), timeout)

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    @staticmethod
    def wait(future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # e.g. Ctrl+C in the caller: stop the requests in flight too
            raise

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        if not self.loop.is_running():
            self.loop.close()


#: How many times `OpenEnvVectorEnv` reads the servers' capacities when other clients take the slots
#: it counted on before it could open them.
_CAPACITY_READINGS = 3


class _SlotsTaken(Exception):
    """A server refused a channel's sessions that its ``/capacity`` reading had said were free."""

    def __init__(self, error: CapacityError) -> None:
        super().__init__(str(error))
        self.error = error


class OpenEnvVectorEnv(VectorEnv):
    """Many sessions of one OpenEnv environment family as a vector environment.

    Args:
        num_envs: sub-environments (sessions), at least 1.
        adapter: the family, as for `OpenEnvEnv` (a name or an `Adapter` subclass).
        base_url: one server for all sessions; ``base_urls``: several, filled round-robin. With neither,
            the family's embedded server (started with room for ``num_envs`` sessions).
        launcher, image: as for `OpenEnvEnv`: ``launcher="docker"`` runs one container with room for
            ``num_envs`` sessions, stopped by `close`; a launcher object is started and left running.
        autoreset_mode: ``"next_step"`` (default) or ``"same_step"``, as in gymnasium (its values
            ``"NextStep"`` and ``"SameStep"`` and the `AutoresetMode` members work too).
        copy: return copies of the batched observations (as ``SyncVectorEnv``).
        multiplex: carry all the sessions on one server over one WebSocket when the server offers it
            (``/ws/batch``, which ours do): one message per server and step instead of one per
            sub-environment, 2-3x the steps/s of a cheap environment. ``False`` opens one connection per
            session (OpenEnv's ``/ws``), as for servers without the route.
        render_mode, timeouts, keepalive, headers, **adapter_options: as for `OpenEnvEnv`.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> envs = gym.make_vec("openenv/chess", num_envs=4)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs["board"].shape
        (4, 19, 8, 8)
        >>> actions = np.array([envs.single_action_space.sample(mask=m) for m in obs["action_mask"]])
        >>> obs, rewards, terminations, truncations, infos = envs.step(actions)
        >>> envs.close()
    """

    def __init__(
        self,
        num_envs: int,
        adapter: str | type[Adapter] = "remote",
        *,
        base_url: str | None = None,
        base_urls: Sequence[str] | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        render_mode: str | None = None,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        launcher: str | Launcher = "embedded",
        image: str | None = None,
        multiplex: bool = True,
        **adapter_options: Any,
    ) -> None:
        self.multiplex = multiplex
        self._owned_launcher: Launcher | None = None
        self._closed_because: str | None = None  # why the env closed itself, for later calls' errors
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if isinstance(adapter, Adapter):
            raise TypeError("A vector env needs one adapter per session: pass the adapter's class or name")
        self.num_envs = int(num_envs)
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.copy = copy
        self.adapters = [_make_adapter(adapter, dict(adapter_options)) for _ in range(self.num_envs)]
        first = self.adapters[0]
        if render_mode is not None and render_mode not in first.render_modes:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; choose one of {first.render_modes}"
            )
        self.render_mode = render_mode
        self.metadata = {
            "render_modes": list(first.render_modes),
            "render_fps": first.render_fps,
            "autoreset_mode": self.autoreset_mode,
        }
        self.timeouts = Timeouts.of(timeouts)
        self._session_options = {"timeouts": self.timeouts, "keepalive": keepalive, "headers": headers}
        self.base_urls = self._server_urls(first, base_url, base_urls, launcher, image)
        self._loop = _LoopThread()
        self._finalizer: weakref.finalize | None = None
        self._sessions: list[_AnySession] = []
        self._sync_channels: dict[SyncChannel, collections.deque[list[int]]] = {}  # ids of each batch sent
        try:
            self._sessions = retry_after_collecting(lambda: self._loop.run(self._open_sessions()))
            for session in self._sessions:
                if isinstance(session, SyncBatchedSession):
                    self._sync_channels.setdefault(session.channel, collections.deque())
            # An env dropped without close() (a notebook cell run again) frees its sessions when collected.
            self._finalizer = weakref.finalize(self, _release, self._loop, list(self._sessions))
            self._finalizer.atexit = False  # at exit the process's sockets close anyway
            self._connect_adapters(headers)
        except BaseException:
            self.close()
            raise
        self.episodes = [Episode(a, s.base_url) for a, s in zip(self.adapters, self._sessions, strict=True)]

        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for index, other in enumerate(self.adapters[1:], start=1):
            if other.observation_space != first.observation_space or other.action_space != first.action_space:
                self.close()
                raise ValueError(
                    f"Sub-environment {index} ({self._sessions[index].base_url}) has other spaces than "
                    f"sub-environment 0 ({self._sessions[0].base_url}): use servers of one environment"
                )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._observations = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        self._env_obs: list[Any] = [None] * self.num_envs
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminations = np.zeros(self.num_envs, dtype=np.bool_)
        self._truncations = np.zeros(self.num_envs, dtype=np.bool_)
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)
        # send()/recv(): requests in flight, and the ids of those that finished, in the order they did.
        self._in_flight: dict[int, list[Any]] = {}  # id -> [kind, its asyncio task once started]
        self._finished: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._batched_action_spaces: dict[int, Any] = {}

    # ------------------------------------------------------------------ gymnasium API

    @property
    def np_random(self) -> tuple[np.random.Generator | None, ...]:
        """The generators behind each sub-environment's seeds."""
        return tuple(episode.np_random for episode in self.episodes)

    @property
    def np_random_seed(self) -> tuple[int | None, ...]:
        return tuple(episode.np_random_seed for episode in self.episodes)

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-environments (all, or those in ``options["reset_mask"]``), as ``SyncVectorEnv``."""
        self._check_nothing_in_flight("reset")
        seeds = self._seeds(seed)
        options = dict(options) if options else None
        mask = np.ones(self.num_envs, dtype=np.bool_)
        if options is not None and "reset_mask" in options:
            mask = options.pop("reset_mask")
            if not isinstance(mask, np.ndarray) or mask.shape != (self.num_envs,):
                raise ValueError(f"options['reset_mask'] must be a numpy array of shape ({self.num_envs},)")
            options = options or None
        indices = [i for i in range(self.num_envs) if mask[i]]
        requests = {i: self.episodes[i].reset_request(seeds[i], options) for i in indices}
        results = self._exchange({i: ("reset", kwargs) for i, kwargs in requests.items()})
        infos: dict[str, Any] = {}
        for i in indices:
            self._env_obs[i], info = self.episodes[i].reset_result(results[i])
            infos = self._add_info(infos, info, i)
        self._terminations[mask] = False
        self._truncations[mask] = False
        self._autoreset_envs[mask] = False
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return (deepcopy(self._observations) if self.copy else self._observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-environment at once (in NEXT_STEP mode, those that just ended reset instead)."""
        self._check_nothing_in_flight("step")
        requests = self._requests(range(self.num_envs), actions, self.action_space, "step")

        infos: dict[str, Any] = {}
        finished: dict[int, dict[str, Any]] = {}
        # Two halves in flight at once: this thread decodes the first while the servers step the second.
        halves = 2 if self.num_envs >= _HALVES_FROM else 1
        with contextlib.closing(self._exchange_in_groups(requests, halves)) as groups:
            for results in groups:
                for i, result in results.items():
                    (
                        self._env_obs[i],
                        self._rewards[i],
                        self._terminations[i],
                        self._truncations[i],
                        info,
                    ) = self._result(i, requests[i][0], result)
                    if (
                        requests[i][0] == "step"
                        and self.autoreset_mode == AutoresetMode.SAME_STEP
                        and (self._terminations[i] or self._truncations[i])
                    ):
                        finished[i] = {"final_obs": self._env_obs[i], "final_info": info}
                        continue
                    infos = self._add_info(infos, info, i)
        if finished:  # SAME_STEP: reset the finished ones now, all at once
            resets = {i: ("reset", self.episodes[i].reset_request(None, None)) for i in finished}
            reset_results = self._exchange(resets)
            for i in sorted(finished):
                self._env_obs[i], info = self.episodes[i].reset_result(reset_results[i])
                infos = self._add_info(infos, finished[i], i)
                infos = self._add_info(infos, info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (
            deepcopy(self._observations) if self.copy else self._observations,
            np.copy(self._rewards),
            np.copy(self._terminations),
            np.copy(self._truncations),
            infos,
        )

    # ------------------------------------------------------------------ EnvPool-style asynchronous API

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Start a step of the sub-environments ``env_ids`` (default: all) and return at once.

        ``actions`` holds one action per id, in the order of ``env_ids``. The sessions step on the
        background loop while the caller works; `recv` collects whichever finished first (EnvPool's
        asynchronous mode), so a slow environment no longer holds back the batch. Autoreset is
        NEXT_STEP: a sub-environment whose episode ended resets on its next ``send``, whatever the action.
        The sub-environments of one ``send`` that share a server's connection (``multiplex``) travel in
        one message and finish together; make the env with ``multiplex=False`` when steps on one server
        take very different times.

        Example:
            >>> import gymnasium as gym, openenv_lab
            >>> envs = gym.make_vec("openenv/echo", num_envs=4)
            >>> _ = envs.reset(seed=0)
            >>> envs.send(envs.action_space.sample())          # all four start stepping
            >>> obs, rewards, terminations, truncations, infos = envs.recv(batch_size=2)
            >>> len(infos["env_id"])                            # the first two that answered
            2
            >>> envs.send(envs.action_space.sample()[:2], env_ids=infos["env_id"])
            >>> _ = envs.recv(batch_size=4)
            >>> envs.close()
        """
        if self.autoreset_mode != AutoresetMode.NEXT_STEP:
            raise ValueError("send()/recv() autoreset in 'next_step' mode only; make the env with that mode")
        if self._loop is None or not self._sessions:
            raise self._closed_error()
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in np.ravel(env_ids)]
        for i in ids:
            if not 0 <= i < self.num_envs:
                raise IndexError(f"env_ids: {i} is not a sub-environment (num_envs={self.num_envs})")
            if i in self._in_flight:
                raise ValueError(f"Sub-environment {i} has a step in flight: recv() it before sending again")
        if len(set(ids)) != len(ids):
            raise ValueError(f"env_ids has duplicates: {ids}")
        space = self._batched_action_spaces.get(len(ids))
        if space is None:
            space = self._batched_action_spaces[len(ids)] = batch_space(self.single_action_space, len(ids))
        requests = self._requests(ids, actions, space, "send")  # all checked before any is in flight
        if self._sync_channels:
            self._sync_send(requests)
            return
        batch = []
        for i, (kind, payload) in requests.items():
            entry = self._in_flight[i] = [kind, None]
            batch.append((i, entry, self._sessions[i], payload))
        # One wake-up of the loop for the whole batch; each task reports its id when it is done.
        self._loop.loop.call_soon_threadsafe(self._start_tasks, batch)

    def _start_tasks(self, batch: list[tuple[int, list[Any], Any, dict[str, Any]]]) -> None:
        """Runs in the loop thread: one task per request, unless the env was closed meanwhile; the requests
        of sessions sharing a `Channel` go as one frame, each task waiting for its own reply in it."""
        if not self._sessions:
            return
        loop = asyncio.get_running_loop()
        by_channel: dict[Channel, list[tuple[int, list[Any], BatchedSession, dict[str, Any]]]] = {}
        for item in batch:
            if isinstance(item[2], BatchedSession):
                by_channel.setdefault(item[2].channel, []).append(item)
        for channel, items in by_channel.items():
            entries = [(session.index, entry[0], payload) for _, entry, session, payload in items]
            shared = loop.create_task(channel.request(entries))  # its readers hold it
            for j, (i, entry, session, _) in enumerate(items):
                entry[1] = task = loop.create_task(_reply(shared, j, session.url))
                task.add_done_callback(lambda _, i=i: self._finished.put(i))
        for i, entry, session, payload in batch:
            if isinstance(session, BatchedSession):
                continue
            coroutine = session.reset(**payload) if entry[0] == "reset" else session.step(payload)
            entry[1] = task = loop.create_task(coroutine)
            task.add_done_callback(lambda _, i=i: self._finished.put(i))

    def recv(
        self, batch_size: int | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Wait for ``batch_size`` of the steps in flight (default: all of them) and return those, in the
        order they finished, as ``step`` would for a vector env of that size; ``infos["env_id"]`` says
        which sub-environments they are. Results that finish beyond ``batch_size`` wait for the next call.
        """
        if not self._in_flight:
            raise ValueError("Nothing is in flight: send() actions first")
        size = len(self._in_flight) if batch_size is None else int(batch_size)
        if not 1 <= size <= len(self._in_flight):
            raise ValueError(
                f"batch_size must be 1..{len(self._in_flight)} (the steps in flight), got {size}"
            )
        budget = self.timeouts.request + self.timeouts.close + 5.0  # each request has its own timeout
        ids: list[int] = []
        while len(ids) < size:
            if self._sync_channels and self._finished.empty():
                self._sync_receive(budget)  # the next batch of replies, from whichever channel has one
            try:
                i = self._finished.get(timeout=budget)
            except queue.Empty:
                self.close()
                raise OpenEnvError(
                    f"No reply from the servers within {budget:g} s; closed everything"
                ) from None
            if i in self._in_flight and i not in ids:
                ids.append(i)
        single_obs: list[Any] = []
        infos: dict[str, Any] = {}
        rewards = np.zeros(size, dtype=np.float64)
        terminations = np.zeros(size, dtype=np.bool_)
        truncations = np.zeros(size, dtype=np.bool_)
        for j, i in enumerate(ids):
            kind, task = self._in_flight.pop(i)
            try:
                result = task.result()
            except BaseException as exc:
                _name_sub_environment(exc, i, self._sessions[i].base_url)
                self.close()
                raise
            obs, rewards[j], terminations[j], truncations[j], info = self._result(i, kind, result)
            self._env_obs[i] = obs
            self._autoreset_envs[i] = terminations[j] or truncations[j]
            single_obs.append(self._env_obs[i])
            infos = add_info(infos, info, j, size)  # rows as the batch's, not num_envs
        infos["env_id"] = np.array(ids)
        batch = create_empty_array(self.single_observation_space, n=size, fn=np.zeros)
        return (
            concatenate(self.single_observation_space, single_obs, batch),
            rewards,
            terminations,
            truncations,
            infos,
        )

    def _requests(
        self, ids: Sequence[int], actions: Any, space: Any, caller: str
    ) -> dict[int, tuple[str, dict[str, Any]]]:
        """The requests for sub-environments ``ids`` from their batched ``actions``, all checked first."""
        per_env = list(iterate(space, actions))
        if len(per_env) != len(ids):
            raise ValueError(f"{caller}() got {len(per_env)} actions for {len(ids)} sub-environments")
        # An array of actions in the batched space is checked at once (each row is then in the single
        # space); otherwise, or if it is not in it, each action is checked alone, to name the bad one.
        checked = (
            isinstance(actions, np.ndarray)
            and isinstance(space, (Box, MultiDiscrete))
            # MultiDiscrete takes bools, which Discrete refuses: integers only for a batch of Discrete
            and (
                not isinstance(self.single_action_space, Discrete) or np.issubdtype(actions.dtype, np.integer)
            )
            and space.contains(actions)
        )
        requests = {}
        for i, action in zip(ids, per_env, strict=True):
            try:
                requests[i] = self._request(i, action, checked)
            except ValueError as exc:
                raise ValueError(f"Sub-environment {i}: {exc}") from None
        return requests

    def _request(self, i: int, action: Any, checked: bool = False) -> tuple[str, dict[str, Any]]:
        """Sub-environment ``i``'s next request: its step, or (NEXT_STEP) the reset of an ended episode."""
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset_envs[i]:
            return "reset", self.episodes[i].reset_request(None, None)
        if isinstance(action, np.generic) and isinstance(self.single_action_space, Box):
            action = np.asarray(action)  # what iterate() gives for a scalar Box: Box.contains wants arrays
        return "step", self.episodes[i].step_request(action, checked=checked)

    def _result(self, i: int, kind: str, result: StepResult) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The reply to `_request` as a step's five values (a reset's: reward 0, not ended)."""
        if kind == "reset":
            obs, info = self.episodes[i].reset_result(result)
            return obs, 0.0, False, False, info
        return self.episodes[i].step_result(result)

    def _add_info(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        """gymnasium's ``VectorEnv._add_info`` (same arrays, masks, dtypes and key order), without its
        new mask array for every key of every sub-environment: ~7% of a step of 16 cheap envs."""
        return add_info(vector_infos, env_info, env_num, self.num_envs)

    def _closed_error(self) -> OpenEnvError:
        why = self._closed_because
        because = f" ({why}: its sessions could no longer be trusted)" if why else ""
        return OpenEnvError(f"This vector environment is closed{because}; make a new one.")

    def _check_nothing_in_flight(self, what: str) -> None:
        if self._in_flight:
            raise ValueError(
                f"{len(self._in_flight)} step(s) sent with send() are in flight: recv() them before {what}()"
            )

    def render(self) -> tuple[Any, ...] | None:
        if self.render_mode is None:
            return None
        return tuple(adapter.render(self.render_mode) for adapter in self.adapters)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every session (freeing their slots), stop the event loop thread and a container started
        for this vector env. Interrupted half-way (a second Ctrl+C), it closes the rest before raising."""
        loop, self._loop = getattr(self, "_loop", None), None
        in_flight, self._in_flight = getattr(self, "_in_flight", {}), {}
        channels, others = _split(getattr(self, "_sessions", []))
        self._sessions, self._sync_channels = [], {}
        owned, self._owned_launcher = getattr(self, "_owned_launcher", None), None

        def cancel_tasks() -> None:
            for _, task in in_flight.values():
                if task is not None and loop is not None:
                    loop.loop.call_soon_threadsafe(task.cancel)

        def close_others() -> None:
            if others and loop is not None and loop.loop.is_running():
                loop.run(self._close_all(others), timeout=self.timeouts.close + 5)

        steps: list[Callable[[], None]] = [cancel_tasks, *(c.close for c in channels), close_others]
        if loop is not None:
            steps.append(loop.stop)
        interrupted: BaseException | None = None
        for step in steps:
            try:
                step()
            except Exception:  # best effort: the rest still closes
                pass
            except BaseException as exc:  # Ctrl+C: the rest still closes, then it is raised
                interrupted = interrupted or exc
        finalizer, self._finalizer = getattr(self, "_finalizer", None), None
        if finalizer is not None:
            finalizer.detach()  # everything is closed: nothing left for a collection to do
        try:
            if owned is not None:
                owned.stop()
        finally:
            if interrupted is not None:
                raise interrupted

    # ------------------------------------------------------------------ sessions

    def _server_urls(
        self,
        first: Adapter,
        base_url: str | None,
        base_urls: Sequence[str] | None,
        launcher: str | Launcher,
        image: str | None,
    ) -> list[str]:
        if base_urls is not None:
            if base_url is not None:
                raise ValueError("Pass base_url or base_urls, not both")
            if image is not None or launcher != "embedded":
                raise ValueError("base_urls names running servers: drop launcher= and image=, or base_urls")
            if first.server_options():
                raise ValueError(
                    f"{sorted(first.server_options())} configure the embedded server; drop them or the "
                    "server URLs"
                )
            if isinstance(base_urls, (str, bytes)):
                raise TypeError(
                    f"base_urls takes a list of server URLs; for one server pass base_url={base_urls!r}"
                )
            urls = list(base_urls)
            if not urls:
                raise ValueError("base_urls is empty: give at least one server URL")
            return urls
        max_sessions = None
        if first.server_name is not None:
            from ..servers import get_bundled_server

            default = get_bundled_server(first.server_name).default_max_sessions
            max_sessions = None if self.num_envs <= default else self.num_envs
        server, owned = _make_launcher(first, base_url, launcher, image, max_sessions=max_sessions)
        if owned:
            self._owned_launcher = server
        return [server.start()]

    async def _open_sessions(self) -> list[_AnySession]:
        """Open ``num_envs`` sessions round-robin over the servers, skipping full ones; on servers with a
        batch route (and ``multiplex``), a server's sessions share one `Channel`.

        Another client may take a server's free slots between its ``/capacity`` reading and our channel
        opening there: then everything opened is closed and the capacities are read again, so the slots
        go to servers that still have room (``_CAPACITY_READINGS`` tries in all).
        """
        for reading in range(1, _CAPACITY_READINGS + 1):
            try:
                return await self._open_sessions_once()
            except _SlotsTaken as taken:
                if reading == _CAPACITY_READINGS:
                    error = taken.error
                    error.args = (
                        f"{error.args[0]} Other clients took the free slots that GET /capacity reported, "
                        f"{_CAPACITY_READINGS} times in a row: the servers are busy. Try again, or give "
                        "this env servers of its own.",
                        *error.args[1:],
                    )
                    raise error from None
        raise AssertionError("unreachable")

    async def _open_sessions_once(self) -> list[_AnySession]:
        free: dict[str, int | None] = {}
        routes: dict[str, str] = {}
        for url in dict.fromkeys(self.base_urls):
            capacity = await asyncio.to_thread(self._capacity, url)
            free[url] = None if capacity is None else capacity[0]
            if capacity is not None and capacity[1] and self.multiplex:
                routes[url] = capacity[1]
        known = sum(n for n in free.values() if n is not None)
        if all(n is not None for n in free.values()) and known < self.num_envs:
            raise self._capacity_error(known, free)
        slots: list[AsyncSession | str] = []  # a session, or the URL of a channel to open
        opened: list[Channel | SyncChannel] = []
        order = list(dict.fromkeys(self.base_urls))
        turn = 0
        try:
            while len(slots) < self.num_envs:
                candidates = [u for u in order if free[u] is None or free[u] > 0]  # type: ignore[operator]
                if not candidates:
                    raise self._capacity_error(len(slots), free)
                url = candidates[turn % len(candidates)]
                turn += 1
                if url in routes:
                    slots.append(url)
                else:
                    try:
                        slots.append(await AsyncSession.open(url, **self._session_options))
                    except CapacityError:
                        free[url] = 0  # a server that does not report its capacity is full: use the others
                        continue
                    except OpenEnvError as exc:
                        _name_sub_environment(exc, len(slots), url)
                        raise
                if free[url] is not None:
                    free[url] -= 1  # type: ignore[operator]
            # Every session on a channel to this machine: the calling thread drives them (`SyncChannel`).
            sync = _SYNC_CHANNELS and all(isinstance(s, str) and SyncChannel.usable(s) for s in slots)
            unused: dict[str, list[Any]] = {}  # each server's channel sessions, last first
            for url in routes:
                size = slots.count(url)
                if size:
                    try:
                        if sync:
                            channel: Channel | SyncChannel = await self._open_sync_channel(
                                url, routes[url], size
                            )
                        else:
                            channel = await Channel.open(url, routes[url], size, **self._session_options)
                    except CapacityError as exc:
                        _name_sub_environment(exc, slots.index(url), url)
                        raise _SlotsTaken(exc) from None
                    except OpenEnvError as exc:
                        _name_sub_environment(exc, slots.index(url), url)
                        raise
                    opened.append(channel)
                    unused[url] = channel.sessions[::-1]
            sessions = [unused[s].pop() if isinstance(s, str) else s for s in slots]
            # Kept now: if the caller is interrupted before it reads this result, close() still finds them.
            self._sessions = sessions
            return sessions
        except BaseException:
            await self._close_all([s for s in slots if not isinstance(s, str)])
            for channel in opened:
                if isinstance(channel, SyncChannel):
                    channel.close()
                else:
                    await channel.close()
            raise

    async def _open_sync_channel(self, url: str, route: str, size: int) -> SyncChannel:
        """A `SyncChannel`, opened in a worker thread; if this is cancelled meanwhile (Ctrl+C during
        ``make_vec``), whichever of the worker and the cancellation comes second closes the channel."""
        lock = threading.Lock()
        state: dict[str, Any] = {"abandoned": False, "channel": None}

        def open_channel() -> SyncChannel:
            channel = SyncChannel(url, route, size, **self._session_options)
            with lock:
                state["channel"] = channel
                abandoned = state["abandoned"]
            if abandoned:
                channel.close()
            return channel

        try:
            return await asyncio.to_thread(open_channel)
        except BaseException:
            with lock:
                state["abandoned"] = True
                channel = state["channel"]
            if channel is not None:
                channel.close()
            raise

    def _capacity(self, url: str) -> tuple[int, str | None] | None:
        """Free slots and batch route of the server at ``url`` (``GET /capacity``); None: it says nothing."""
        with Client(url, timeouts=self.timeouts) as client:
            try:
                capacity = client.capacity()
            except OpenEnvError as exc:
                _name_sub_environment(exc, None, url)
                raise
        if capacity is None:
            return None
        route = capacity.get("batch_route")
        free = int(capacity["max_sessions"]) - int(capacity["active_sessions"])
        return free, route if isinstance(route, str) and route.startswith("/") else None

    def _capacity_error(self, available: int, free: dict[str, int | None]) -> CapacityError:
        detail = ", ".join(f"{url}: {n or 'no'} free" for url, n in free.items())
        missing = self.num_envs - available
        return CapacityError(
            f"num_envs={self.num_envs} needs {self.num_envs} sessions, but the servers hold only {available} "
            f"more ({detail}): {missing} short. Start servers with more room ('openenv-lab serve NAME "
            "--max-sessions N'), add servers to base_urls=[...], or lower num_envs.",
            server_message="",
            active_sessions=None,
            max_sessions=available,
        )

    def _connect_adapters(self, headers: dict[str, str] | None) -> None:
        clients: dict[str, Client] = {}
        try:
            for adapter, session in zip(self.adapters, self._sessions, strict=True):
                client = clients.get(session.base_url)
                if client is None:
                    client = clients[session.base_url] = Client(
                        session.base_url, timeouts=self.timeouts, headers=headers
                    )
                adapter.connect(client)
        finally:
            for client in clients.values():
                client.close()
        probing = {
            i: ("reset", a.reset_kwargs(None, None)) for i, a in enumerate(self.adapters) if a.needs_probe
        }
        if probing:
            results = self._exchange(probing)
            for i in probing:
                self.adapters[i].probe(results[i])

    def _exchange(self, requests: dict[int, tuple[str, dict[str, Any]]]) -> dict[int, StepResult]:
        """Send every request at once and wait for all replies; on any failure close everything and raise."""
        results: dict[int, StepResult] = {}
        for group in self._exchange_in_groups(requests, 1):
            results.update(group)
        return results

    def _exchange_in_groups(
        self, requests: dict[int, tuple[str, dict[str, Any]]], groups: int
    ) -> Iterator[dict[int, StepResult]]:
        """The replies to ``requests``, cut in ``groups`` consecutive groups, each yielded once it is in.

        Every group is sent at once, so the caller decodes one group's replies while the servers work on
        the next (a step's two halves overlap client and server work: `step`). On any failure every
        session is closed and the error raised, naming the sub-environment and its server.
        """
        if self._loop is None or not self._sessions:
            raise self._closed_error()
        keys = list(requests)
        if not keys:  # e.g. a reset_mask that chooses none
            return
        size = -(-len(keys) // max(1, groups))
        parts = [keys[start : start + size] for start in range(0, len(keys), size)]
        if self._sync_channels:
            yield from self._exchange_sync(requests, parts)
            return
        sessions, loop = self._sessions, self._loop
        budget = self.timeouts.request + 5.0  # exchange() keeps to timeouts.request by itself
        futures = [
            loop.submit(exchange([(sessions[i], *requests[i]) for i in part], self.timeouts.request))
            for part in parts
        ]
        for n, (part, future) in enumerate(zip(parts, futures, strict=True)):
            try:
                outcomes = loop.wait(future, budget)
            except BaseException as exc:  # interrupted (Ctrl+C), or the loop thread is stuck
                for later in futures[n:]:
                    later.cancel()  # stop the requests in flight too
                self._closed_because = f"a step was interrupted ({type(exc).__name__})"
                self.close()
                if isinstance(exc, (TimeoutError, concurrent.futures.TimeoutError)):
                    raise Timeout(
                        f"No reply from the servers within {budget:g} s; closed every session"
                    ) from None
                raise
            for i, outcome in zip(part, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    _name_sub_environment(outcome, i, sessions[i].base_url)
                    for later in futures[n + 1 :]:
                        with contextlib.suppress(BaseException):
                            loop.wait(later, budget)  # their replies are read before the sessions close
                    self.close()
                    raise outcome
            try:
                yield dict(zip(part, outcomes, strict=True))
            except GeneratorExit:  # the caller stopped (an error, Ctrl+C) with replies still on their way
                if n + 1 < len(futures):
                    for later in futures[n + 1 :]:
                        later.cancel()
                    self._closed_because = "a step was interrupted while its replies were decoded"
                    self.close()
                raise

    # ------------------------------------------------------------------ sessions on SyncChannels

    def _exchange_sync(
        self, requests: dict[int, tuple[str, dict[str, Any]]], parts: list[list[int]]
    ) -> Iterator[dict[int, StepResult]]:
        """`_exchange_in_groups` over `SyncChannel`\\ s: every part's batches go out first, then each part's
        replies are read and yielded in turn, so the servers step a part while the caller decodes the last."""
        unread = len(parts)  # parts whose replies are still on their way
        try:
            sent = [self._sync_submit({i: requests[i] for i in part}) for part in parts]
            for part, batches in zip(parts, sent, strict=True):
                results: dict[int, Any] = {}
                for channel, ids in batches:
                    results.update(self._sync_replies(channel, ids))
                unread -= 1
                for i in part:
                    if isinstance(results[i], BaseException):
                        _name_sub_environment(results[i], i, self._sessions[i].base_url)
                        self.close()
                        raise results[i]
                yield {i: results[i] for i in part}
        finally:
            # Stopped (an error, Ctrl+C) with replies on their way: they would pass for the next step's.
            if unread and not self.closed:
                self._closed_because = "a step was interrupted while its replies were decoded"
                self.close()

    def _sync_submit(
        self, requests: dict[int, tuple[str, dict[str, Any]]]
    ) -> list[tuple[SyncChannel, list[int]]]:
        """Send ``requests`` as one batch per channel; the channels and the ids each batch carries."""
        by_channel: dict[SyncChannel, list[int]] = {}
        entries: dict[SyncChannel, list[tuple[int, str, dict[str, Any] | None]]] = {}
        for i, (kind, payload) in requests.items():
            session = self._sessions[i]
            assert isinstance(session, SyncBatchedSession)
            by_channel.setdefault(session.channel, []).append(i)
            entries.setdefault(session.channel, []).append((session.index, kind, payload))
        for channel, ids in by_channel.items():
            try:
                channel.submit(entries[channel])
            except BaseException as exc:
                self._sync_failed(exc, ids[0])
                raise
        return list(by_channel.items())

    def _sync_replies(self, channel: SyncChannel, ids: list[int]) -> dict[int, Any]:
        """The replies to the oldest batch in flight on ``channel`` (for ``ids``): a `StepResult` or the
        error a sub-environment's reply carries. A failure of the connection closes everything."""
        try:
            replies = channel.receive()
            results: dict[int, Any] = {}
            for i, reply in zip(ids, replies, strict=True):
                try:
                    results[i] = read_observation(reply, channel.url)
                except Exception as exc:
                    results[i] = exc
            return results
        except BaseException as exc:  # the connection failed, or Ctrl+C: these replies are lost
            self._sync_failed(exc, ids[0])
            raise

    def _sync_failed(self, exc: BaseException, i: int) -> None:
        """Name sub-environment ``i`` in ``exc`` (an `OpenEnvError`) or say why the env closes; close it."""
        if self.closed:
            return
        if isinstance(exc, OpenEnvError):
            _name_sub_environment(exc, i, self._sessions[i].base_url)
        else:
            self._closed_because = f"a step was interrupted ({type(exc).__name__})"
        self.close()

    def _sync_send(self, requests: dict[int, tuple[str, dict[str, Any]]]) -> None:
        """`send` over `SyncChannel`\\ s: the batches go now; `_sync_receive` collects their replies."""
        for i, (kind, _) in requests.items():
            self._in_flight[i] = [kind, None]
        try:
            for channel, ids in self._sync_submit(requests):
                self._sync_channels[channel].append(ids)
        except BaseException as exc:  # sent, but not all noted as sent: their replies cannot be placed
            self._sync_failed(exc, next(iter(requests)))
            raise

    def _sync_receive(self, budget: float) -> None:
        """Read the next batch of replies from whichever channel has one first (waiting at most ``budget``
        seconds) and report its sub-environments finished, as the tasks of `_start_tasks` do."""
        waiting = [channel for channel, batches in self._sync_channels.items() if batches]
        if not waiting:
            return  # nothing in flight here: recv() reports that
        channel = waiting[0] if len(waiting) == 1 else self._first_with_reply(waiting, budget)
        ids = self._sync_channels[channel][0]  # taken off once its replies are in
        try:
            results = self._sync_replies(channel, ids)
            self._sync_channels[channel].popleft()
            for i, result in results.items():
                future: concurrent.futures.Future[Any] = concurrent.futures.Future()
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
                self._in_flight[i][1] = future
                self._finished.put(i)
        except BaseException as exc:  # Ctrl+C with replies read but not handed over: nothing adds up now
            self._sync_failed(exc, ids[0])
            raise

    def _first_with_reply(self, channels: list[SyncChannel], budget: float) -> SyncChannel:
        deadline = time.monotonic() + budget
        while True:
            for channel in channels:
                if channel.has_reply():
                    return channel
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise Timeout(f"No reply from the servers within {budget:g} s; closed every session")
            try:
                # In short slices: a keepalive thread may read a reply off a socket (has_reply sees it).
                readable, _, _ = select.select(channels, [], [], min(remaining, 0.05))
            except (OSError, ValueError):  # a channel closed meanwhile: has_reply says so next time round
                continue
            for channel in readable:
                if channel.poll():  # a whole reply came, not just a ping or part of a frame
                    return channel

    @staticmethod
    async def _close_all(sessions: Sequence[_AnySession]) -> None:
        # A channel's sessions close together: close each channel once.
        closers = {id(s.channel if isinstance(s, BatchedSession) else s): s for s in sessions}
        await asyncio.gather(*(session.close() for session in closers.values()), return_exceptions=True)

    def _seeds(self, seed: int | list[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(f"A list of seeds must have num_envs={self.num_envs} entries, got {len(seed)}")
        return list(seed)


def _split(sessions: Sequence[_AnySession]) -> tuple[list[SyncChannel], list[_AnySession]]:
    """The `SyncChannel`\\ s (each once) behind ``sessions``, and the sessions the event loop drives."""
    channels = dict.fromkeys(s.channel for s in sessions if isinstance(s, SyncBatchedSession))
    return list(channels), [s for s in sessions if not isinstance(s, SyncBatchedSession)]


def _release(loop: _LoopThread, sessions: list[_AnySession]) -> None:
    """Close the sessions of a vector env collected without ``close()``, and end its loop thread.

    A finalizer: a collection may run it on any thread, one that holds a connection's lock included (a
    keepalive thread), so the closing happens on a thread of its own.
    """
    with contextlib.suppress(RuntimeError):  # the interpreter is shutting down: the sockets go with it
        threading.Thread(
            target=_release_now, args=(loop, sessions), name="openenv-lab-release", daemon=True
        ).start()


def _release_now(loop: _LoopThread, sessions: list[_AnySession]) -> None:
    channels, others = _split(sessions)
    for channel in channels:
        with contextlib.suppress(Exception):
            channel.close()

    async def close_and_stop() -> None:
        try:
            await OpenEnvVectorEnv._close_all(others)
        finally:
            loop.loop.stop()

    with contextlib.suppress(RuntimeError):  # the loop is closed already
        loop.loop.call_soon_threadsafe(lambda: loop.loop.create_task(close_and_stop()))


def add_info(vector_infos: dict[str, Any], env_info: dict[str, Any], row: int, rows: int) -> dict[str, Any]:
    """Put one sub-environment's ``env_info`` in row ``row`` of the batched ``vector_infos`` (``rows``
    rows), as gymnasium's ``VectorEnv._add_info`` does: each key gets an array (numbers: of their type;
    numpy arrays: stacked; anything else: objects; dicts: recursively; ``final_obs``: objects) and a
    boolean mask ``_key`` saying which rows have it."""
    for key, value in env_info.items():
        if key == "final_obs":
            array = vector_infos.get("final_obs")
            if array is None:
                array = np.full(rows, fill_value=None, dtype=object)
            array[row] = value
        elif isinstance(value, dict):
            array = add_info(vector_infos.get(key, {}), value, row, rows)
        else:
            if key in vector_infos:
                array = vector_infos[key]
            elif type(value) in (int, float, bool) or issubclass(type(value), np.number):
                array = np.zeros(rows, dtype=type(value))
            elif isinstance(value, np.ndarray):
                array = np.zeros((rows, *value.shape), dtype=value.dtype)
            else:
                array = np.full(rows, fill_value=None, dtype=object)
            array[row] = value
        mask_key = f"_{key}"
        mask = vector_infos.get(mask_key)
        if mask is None:
            mask = np.zeros(rows, dtype=np.bool_)
        mask[row] = True
        vector_infos[key], vector_infos[mask_key] = array, mask
    return vector_infos


def _autoreset_mode(mode: str | AutoresetMode) -> AutoresetMode:
    """``mode`` as gymnasium's enum: a member, its value (``"NextStep"``) or its name (``"next_step"``)."""
    if isinstance(mode, str) and not isinstance(mode, AutoresetMode):
        by_name = {m.name.lower(): m for m in AutoresetMode} | {m.value.lower(): m for m in AutoresetMode}
        key = mode.strip().lower()
        if key not in by_name:
            raise ValueError(f"autoreset_mode={mode!r} is not a mode; use 'next_step' or 'same_step'")
        mode = by_name[key]
    mode = AutoresetMode(mode)
    if mode == AutoresetMode.DISABLED:
        raise ValueError("autoreset_mode='disabled' is not supported; use 'next_step' or 'same_step'")
    return mode


def _name_sub_environment(exc: BaseException, index: int | None, url: str) -> None:
    """Prefix the error's message with the sub-environment and server it concerns."""
    where = f"Sub-environment {index} (server {url})" if index is not None else f"Server {url}"
    if exc.args and isinstance(exc.args[0], str) and not exc.args[0].startswith(where):
        exc.args = (f"{where}: {exc.args[0]}", *exc.args[1:])


async def _reply(batch: asyncio.Task[list[Any]], j: int, url: str) -> StepResult:
    """Entry ``j`` of a batch's replies, as the session's own ``step`` or ``reset`` would return it."""
    return read_observation((await batch)[j], url)
