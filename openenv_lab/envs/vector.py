"""`OpenEnvVectorEnv`: N OpenEnv sessions as one ``gymnasium.vector.VectorEnv``, stepped concurrently.

``gym.make_vec("openenv/chess", num_envs=16)`` opens 16 sessions (`openenv_lab.client.pool`) and drives
them as one pipeline, the way EnvPool does: `send` puts a request per sub-environment on the wire,
`recv` decodes the replies as they come, and `step` is `send` of every sub-environment followed by
`recv` of all of them. On our servers the sessions of a server share one WebSocket and a step is one
message each way; when they are all on this machine the calling thread itself writes and reads them.
No subprocesses and no pickling, so it works in Jupyter and on macOS/Windows (``spawn``), where
gymnasium's ``AsyncVectorEnv`` re-imports everything per worker.

Behaviour is exactly ``gymnasium.vector.SyncVectorEnv``'s over the same single environments (tested):
the same seeding (``reset(seed=s)`` seeds sub-environment i with ``s + i``), the same batching of
observations and infos, ``options["reset_mask"]``, ``call``/``get_attr``/``set_attr``, and both autoreset
modes, ``NEXT_STEP`` (the default) and ``SAME_STEP``.

Sessions go to the embedded server of the family, to a container (``launcher="docker"``, ``image=...``;
removed by ``close``), to a launcher object's server, or round-robin over ``base_urls=[...]`` (for
instance a `Fleet`'s ``urls``). If a server fails during a step, the error names the sub-environment
(``exc.env_index``) and the server, and every session is closed. With ``on_failure="restart"`` the run
goes on instead: the sub-environments of a server that died (its connection lost, or silent past the
request timeout) end their episode truncated, with ``infos["server_failed"]``, and continue on new
sessions of whichever server can take them (the others of ``base_urls``, or the same one restarted, as a
``Fleet(restart=True)`` does); the others never notice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Iterable, Sequence
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Discrete, MultiDiscrete
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from ..adapters import Adapter
from ..adapters.info_schema import InfoKey
from ..client import (
    Client,
    EnvironmentMismatch,
    Keepalive,
    OpenEnvError,
    ProtocolError,
    SessionClosed,
    StepResult,
    Timeouts,
    TransportError,
)
from ..client.loop import LoopTransport
from ..client.pool import open_pool, reseat
from ..client.transport import Reply, Request, Transport
from ..launch import Fleet, Launcher
from ._build import (
    Where,
    check_reset_mask,
    make_adapter,
    models_digest,
    refuse_other_models,
    render_metadata,
    request_headers,
    server_urls,
    set_up_adapters,
    with_launcher_headers,
)
from ._build import autoreset_mode as autoreset_mode_of
from ._episode import Episode, contains, retry_after_collecting
from .attributes import SubEnvironmentAttributes
from .infos import batch_infos
from .tasks import TaskCatalog, selection, spread

__all__ = ["OpenEnvVectorEnv"]


#: What ``on_failure`` may be.
_ON_FAILURE = ("raise", "restart")
#: The info keys of a vector env made with ``on_failure="restart"``, on every step of every sub-environment.
RESTART_INFO_KEYS = (
    InfoKey("server_failed", "bool", "the sub-environment's server failed: its episode ends truncated here"),
    InfoKey("server_error", "str", "why the server failed"),
)

_log = logging.getLogger("openenv_lab")

#: What one sub-environment's reply becomes: a step's five values (a reset's: reward 0, not ended).
_Decoded = tuple[Any, float, bool, bool, dict[str, Any]]


class OpenEnvVectorEnv(SubEnvironmentAttributes, VectorEnv):
    """Many sessions of one OpenEnv environment family as a vector environment.

    Args:
        num_envs: sub-environments (sessions), at least 1.
        adapter: the family, as for `OpenEnvEnv` (a name or an `Adapter` subclass).
        base_url: one server for all sessions; ``base_urls``: several, filled round-robin, or a `Fleet`
            (whose token the requests carry, as they do for the URLs of a fleet of this process). With
            neither, the family's embedded server (started with room for ``num_envs`` sessions).
        launcher, image: as for `OpenEnvEnv`: ``launcher="docker"`` runs one container with room for
            ``num_envs`` sessions, stopped by `close`; a launcher object is started and left running.
        autoreset_mode: ``"next_step"`` (default) or ``"same_step"``, as in gymnasium (its values
            ``"NextStep"`` and ``"SameStep"`` and the `AutoresetMode` members work too).
        copy: return copies of the batched observations (as ``SyncVectorEnv``).
        multiplex: carry all the sessions on one server over one WebSocket when the server offers it
            (``/ws/batch``, which ours do): one message per server and step instead of one per
            sub-environment, which is most of a cheap environment's step (``benchmarks/vector_throughput.py``
            measures it). ``False`` opens one connection per session (OpenEnv's ``/ws``), as for servers
            without the route.
        tasks: tasks to deal out to the sub-environments (as for `OpenEnvEnv`): sub-environment ``k``
            plays tasks ``k``, ``k + num_envs``, ... in turn, one per reset (`openenv_lab.envs.tasks.spread`).
        space, token, trust_remote_code: a Hugging Face Space as the server, as for `OpenEnvEnv`.
        progress: show a wait for the servers that lasts, as for `OpenEnvEnv`.
        on_failure: ``"raise"`` (default): a server that fails closes the env with an error naming it.
            ``"restart"``: its sub-environments end their episodes truncated (``infos["server_failed"]``
            says which, ``infos["server_error"]`` why: keys every info then has, False and "" elsewhere)
            and go on with new sessions, on any server of the env that can take them within
            ``reconnect_within`` seconds (else the error is raised). The sessions are then always driven
            by an event loop thread, so that each can be replaced alone.
        reconnect_within: seconds to find new sessions after a server fails (``on_failure="restart"``).
        adapter_options: ``render_mode``, ``timeouts``, ``keepalive``, ``headers``, ``raw_info``,
            ``text_info`` and the adapter's own options, as for `OpenEnvEnv`.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> envs = gym.make_vec("openenv/chess", num_envs=4)
        >>> obs, infos = envs.reset(seed=0)
        >>> obs["board"].shape
        (4, 19, 8, 8)
        >>> actions = np.array([envs.single_action_space.sample(mask=m) for m in obs["action_mask"]])
        >>> obs, rewards, terminations, truncations, infos = envs.step(actions)
        >>> envs.call("action_masks")[0].shape
        (4672,)
        >>> envs.close()
    """

    def __init__(
        self,
        num_envs: int,
        adapter: str | type[Adapter] = "remote",
        *,
        base_url: str | None = None,
        base_urls: Sequence[str] | Fleet | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        render_mode: str | None = None,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        launcher: str | Launcher = "embedded",
        image: str | None = None,
        multiplex: bool = True,
        check_identity: bool = True,
        tasks: Any = None,
        space: str | None = None,
        token: str | bool | None = None,
        trust_remote_code: bool = False,
        progress: bool | None = None,
        on_failure: str = "raise",
        reconnect_within: float = 60.0,
        raw_info: bool = False,
        text_info: bool = True,
        **adapter_options: Any,
    ) -> None:
        if on_failure not in _ON_FAILURE:
            raise ValueError(f"on_failure must be one of {_ON_FAILURE}, got {on_failure!r}")
        self.multiplex = multiplex
        self.on_failure = on_failure
        self.reconnect_within = float(reconnect_within)
        #: Sub-environments moved to new sessions after a server failed (``on_failure="restart"``).
        self.restarts = 0
        self._keepalive = keepalive
        self._owned_launcher: Launcher | None = None
        self._transport: Transport | None = None
        self._finalizer: weakref.finalize | None = None
        self._closed_because: str | None = None  # why the env closed itself, for later calls' errors
        self._in_flight: dict[int, str] = {}  # sub-environment -> "reset"/"step" sent, reply not yet in
        self._sent: dict[int, Request] = {}  # the resets in flight, sent again if their server fails
        self._ready: dict[int, _Decoded] = {}  # replies decoded but not yet returned, in arrival order
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
        if isinstance(adapter, Adapter):
            raise TypeError("A vector env needs one adapter per session: pass the adapter's class or name")
        self.num_envs = int(num_envs)
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.copy = copy
        settings = {"check_identity": check_identity, "raw_info": raw_info, "text_info": text_info}
        self.adapters = [
            make_adapter(adapter, dict(adapter_options), **settings, render_mode=render_mode)
            for _ in range(self.num_envs)
        ]
        first = self.adapters[0]
        self.render_mode = render_mode
        self.timeouts = Timeouts.of(timeouts)
        where = Where(base_url, launcher, image, space, token, trust_remote_code, progress)
        headers = request_headers(where, headers)
        self.base_urls, self._owned_launcher, started_by = server_urls(first, self.num_envs, where, base_urls)
        headers = with_launcher_headers(started_by, headers)  # e.g. a container's token
        self._headers = headers
        try:
            self._transport = retry_after_collecting(
                lambda: open_pool(
                    self.base_urls,
                    self.num_envs,
                    multiplex=multiplex,
                    timeouts=self.timeouts,
                    keepalive=keepalive,
                    headers=headers,
                    direct=on_failure != "restart",
                )
            )
            # An env dropped without close() (a notebook cell run again) frees its sessions when collected.
            self._finalizer = weakref.finalize(self, _release, self._transport)
            self._finalizer.atexit = False  # at exit the process's sockets close anyway
            self._set_up_adapters()
        except BaseException:
            self.close()
            raise
        urls = self._transport.urls
        first = self.adapters[0]
        self.metadata = {**render_metadata(first), "autoreset_mode": self.autoreset_mode}
        timeouts, headers = self.timeouts, self._headers  # not self: the catalogue must not keep it alive
        self._catalog = TaskCatalog(lambda: Client(urls[0], timeouts=timeouts, headers=headers), close=True)
        try:
            shares = spread(selection(tasks, self._catalog), self.num_envs) if tasks is not None else None
        except BaseException:
            self.close()
            raise
        extra_keys = RESTART_INFO_KEYS if on_failure == "restart" else ()
        self.episodes = [
            Episode(a, url, self._catalog, shares[i] if shares else None, extra_keys)
            for i, (a, url) in enumerate(zip(self.adapters, urls, strict=True))
        ]

        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for index, other in enumerate(self.adapters[1:], start=1):
            if other.observation_space != first.observation_space or other.action_space != first.action_space:
                self.close()
                advice = (
                    "the server described two of its sessions differently"
                    if urls[index] == urls[0]
                    else "use servers of one environment"
                )
                raise ProtocolError(
                    f"Sub-environment {index} ({urls[index]}) has other spaces than sub-environment 0 "
                    f"({urls[0]}): {advice}",
                    url=urls[index],
                )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._observations = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        self._env_obs: list[Any] = [None] * self.num_envs
        self._autoreset_envs = np.zeros(self.num_envs, dtype=np.bool_)
        self._batched_action_spaces: dict[int, Any] = {self.num_envs: self.action_space}

    # ------------------------------------------------------------------ gymnasium API

    @property
    def tasks(self) -> Any:
        """The servers' tasks as a polars DataFrame (as `OpenEnvEnv.tasks`), read from the first server."""
        return self._catalog.table()

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers every request to the servers carries (as `OpenEnvEnv.headers`)."""
        return dict(self._headers or {})

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
        """Reset every sub-environment, or those chosen by ``options["reset_mask"]`` (a boolean array
        with a True somewhere), exactly as ``SyncVectorEnv`` does."""
        self._check_idle("reset")
        seeds = self._seeds(seed)
        options = dict(options) if options else None
        indices = range(self.num_envs)
        if options is not None and "reset_mask" in options:
            mask = check_reset_mask(options.pop("reset_mask"), self.num_envs)
            indices = np.flatnonzero(mask).tolist()
        requests = {i: ("reset", self.episodes[i].reset_request(seeds[i], options)) for i in indices}
        self._send(requests)
        replies = self._collect(len(requests))
        reset_infos = []
        for i in indices:
            self._env_obs[i], _, _, _, info = replies[i]
            self._autoreset_envs[i] = False
            reset_infos.append((i, info))
        infos = batch_infos(reset_infos, self.num_envs)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return (deepcopy(self._observations) if self.copy else self._observations), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-environment: `send` them all, then `recv` them all (in NEXT_STEP mode, those
        whose episode ended last step reset instead). The step goes out as one message per server: a
        message is a system call and a wake-up on each side, which on these machines costs more than
        decoding one half of the replies while the servers step the other (`benchmarks/ceilings.py`)."""
        self._check_idle("step")
        requests = self._requests(range(self.num_envs), actions, self.action_space, "step")
        ids = list(requests)
        self._send(requests)
        replies = self._collect(len(ids))

        # Each reply's five values into five columns at once (numpy's per-element assignment costs more).
        columns = zip(*(replies[i] for i in range(self.num_envs)), strict=True)
        env_obs, reward_list, terminated_list, truncated_list, infos_tuple = columns
        self._env_obs[:] = env_obs
        rewards = np.array(reward_list, dtype=np.float64)
        terminations = np.array(terminated_list, dtype=np.bool_)
        truncations = np.array(truncated_list, dtype=np.bool_)
        infos_by_env: list[dict[str, Any]] = list(infos_tuple)
        ended = np.logical_or(terminations, truncations)
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended.any():  # reset those now, at once
            finished = np.flatnonzero(ended).tolist()
            self._send({i: ("reset", self.episodes[i].reset_request(None, None)) for i in finished})
            resets = self._collect(len(finished))
            for i in finished:
                final_obs, final_info = self._env_obs[i], infos_by_env[i]
                self._env_obs[i], _, _, _, info = resets[i]
                infos_by_env[i] = {**info, "final_obs": final_obs, "final_info": final_info}
        infos = batch_infos(enumerate(infos_by_env), self.num_envs)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._autoreset_envs = ended
        return (
            deepcopy(self._observations) if self.copy else self._observations,
            rewards,
            terminations,
            truncations,
            infos,
        )

    # ------------------------------------------------------------------ EnvPool-style asynchronous API

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Start a step of the sub-environments ``env_ids`` (default: all) and return at once.

        ``actions`` holds one action per id, in the order of ``env_ids``. The sessions step while the
        caller works; `recv` collects whichever finished first (EnvPool's asynchronous mode), so a slow
        environment no longer holds back the batch. Autoreset is NEXT_STEP: a sub-environment whose
        episode ended resets on its next ``send``, whatever the action. The sub-environments of one
        ``send`` that share a server's connection (``multiplex``) travel in one message and finish
        together; make the env with ``multiplex=False`` when steps on one server take very different
        times.

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
        self._open_transport()
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in np.ravel(env_ids)]
        for i in ids:
            if not 0 <= i < self.num_envs:
                raise IndexError(f"env_ids: {i} is not a sub-environment (num_envs={self.num_envs})")
            if i in self._in_flight or i in self._ready:
                raise ValueError(f"Sub-environment {i} has a step in flight: recv() it before sending again")
        if len(set(ids)) != len(ids):
            raise ValueError(f"env_ids has duplicates: {ids}")
        space = self._batched_action_spaces.get(len(ids))
        if space is None:
            space = self._batched_action_spaces[len(ids)] = batch_space(self.single_action_space, len(ids))
        self._send(self._requests(ids, actions, space, "send"))  # all checked before any is in flight

    def recv(
        self, batch_size: int | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Wait for ``batch_size`` of the steps in flight (default: all of them) and return those, in the
        order they finished, as ``step`` would for a vector env of that size; ``infos["env_id"]`` says
        which sub-environments they are. Results that finish beyond ``batch_size`` wait for the next call.
        """
        in_flight = len(self._in_flight) + len(self._ready)
        if not in_flight:
            raise ValueError("Nothing is in flight: send() actions first")
        size = in_flight if batch_size is None else int(batch_size)
        if not 1 <= size <= in_flight:
            raise ValueError(f"batch_size must be 1..{in_flight} (the steps in flight), got {size}")
        replies = self._collect(size)
        ids = list(replies)
        single_obs: list[Any] = []
        batch_info: list[tuple[int, dict[str, Any]]] = []
        rewards = np.zeros(size, dtype=np.float64)
        terminations = np.zeros(size, dtype=np.bool_)
        truncations = np.zeros(size, dtype=np.bool_)
        for j, i in enumerate(ids):
            self._env_obs[i], rewards[j], terminations[j], truncations[j], info = replies[i]
            self._autoreset_envs[i] = terminations[j] or truncations[j]
            single_obs.append(self._env_obs[i])
            batch_info.append((j, info))  # rows as the batch's, not num_envs
        infos = batch_infos(batch_info, size)
        infos["env_id"] = np.array(ids)
        batch = create_empty_array(self.single_observation_space, n=size, fn=np.zeros)
        return (
            concatenate(self.single_observation_space, single_obs, batch),
            rewards,
            terminations,
            truncations,
            infos,
        )

    # ------------------------------------------------------------------ the pipeline

    def _requests(self, ids: Iterable[int], actions: Any, space: Any, caller: str) -> dict[int, Request]:
        """The requests for sub-environments ``ids`` from their batched ``actions``, all checked first."""
        ids = list(ids)
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
            and contains(space, actions)
        )
        requests = {}
        for i, action in zip(ids, per_env, strict=True):
            try:
                requests[i] = self._request(i, action, checked)
            except ValueError as exc:
                raise ValueError(f"Sub-environment {i}: {exc}") from None
        return requests

    def _request(self, i: int, action: Any, checked: bool = False) -> Request:
        """Sub-environment ``i``'s next request: its step, or (NEXT_STEP) the reset of an ended episode."""
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset_envs[i]:
            return "reset", self.episodes[i].reset_request(None, None)
        if isinstance(action, np.generic) and isinstance(self.single_action_space, Box):
            action = np.asarray(action)  # what iterate() gives for a scalar Box: Box.contains wants arrays
        return "step", self.episodes[i].step_request(action, checked=checked)

    def _send(self, requests: dict[int, Request]) -> None:
        """Put ``requests`` on the wire; their replies are collected by `_collect`."""
        transport = self._open_transport()
        for i, request in requests.items():
            self._in_flight[i] = request[0]
            if request[0] == "reset" and self.on_failure == "restart":
                self._sent[i] = request
        try:
            transport.send(requests)
        except BaseException as exc:  # sent in part: the transport is closed, and so is the env
            self._close_after(exc)
            raise

    def _collect(self, count: int) -> dict[int, _Decoded]:
        """The first ``count`` decoded replies, in the order they arrived (waiting for more as needed).

        Replies are decoded as they arrive, so the decoding of a batch overlaps the servers' work on the
        next. Any failure with replies still on their way (an error reply, a lost connection, an
        exception or Ctrl+C while decoding) closes the env: those replies could no longer be placed.
        """
        budget = self.timeouts.request + self.timeouts.close + 5.0  # each request has its own timeout
        while len(self._ready) < count:
            transport = self._open_transport()
            try:
                replies = transport.receive(budget)
            except BaseException as exc:
                self._close_after(exc)
                raise
            self._decode(replies)
        ids = list(self._ready)[:count]
        return {i: self._ready.pop(i) for i in ids}

    def _decode(self, replies: dict[int, Reply]) -> None:
        undecoded = dict(replies)
        lost: dict[int, tuple[str, TransportError]] = {}
        try:
            for i, reply in replies.items():
                kind = self._in_flight.pop(i)
                del undecoded[i]
                if isinstance(reply, TransportError) and self.on_failure == "restart":
                    lost[i] = kind, reply  # its server failed: the episode ends here, the run goes on
                    continue
                if isinstance(reply, BaseException):  # the request failed: its session is in doubt
                    self._close_after(reply)
                    raise reply
                self._sent.pop(i, None)
                self._ready[i] = self._result(i, kind, reply)
            if lost:
                self._move(lost)
        except BaseException as exc:
            if self._transport is not None and (undecoded or self._in_flight):
                self._closed_because = "a step was interrupted while its replies were decoded"
                self._close_after(exc)
            raise

    def _move(self, lost: dict[int, tuple[str, TransportError]]) -> None:
        """Give the sub-environments ``lost`` (whose server failed) new sessions: a lost step ends its
        episode truncated, a lost reset is sent again to the new session."""
        transport = self._open_transport()
        assert isinstance(transport, LoopTransport)
        failed = {transport.urls[i] for i in lost}
        # Healthy servers first; the failed ones last, in case they come back (a restarted replica).
        order = [u for u in self.base_urls if u not in failed] + [u for u in self.base_urls if u in failed]
        ids = sorted(lost)
        first_error = lost[ids[0]][1]
        try:
            reseat(
                transport,
                ids,
                order,
                within=self.reconnect_within,
                multiplex=self.multiplex,
                timeouts=self.timeouts,
                keepalive=self._keepalive,
                headers=self._headers,
            )
        except OpenEnvError as exc:
            self._closed_because = f"no server could take the sessions of a failed one: {exc}"
            self._close_after(first_error)
            raise first_error from exc
        self._refuse_other_models({transport.urls[i] for i in ids})
        self.restarts += len(ids)
        _log.warning(
            "openenv_lab: server %s failed (%s); sub-environment(s) %s continue on %s",
            ", ".join(sorted(failed)),
            first_error,
            ids,
            ", ".join(sorted({transport.urls[i] for i in ids})),
        )
        resend: dict[int, Request] = {}
        for i in ids:
            kind, error = lost[i]
            self.episodes[i].base_url = transport.urls[i]
            if kind == "reset":
                resend[i] = self._sent.pop(i)
                continue
            self.episodes[i].needs_reset = True
            info = self.episodes[i].conform({"server_failed": True, "server_error": str(error)})
            self._ready[i] = (self._env_obs[i], 0.0, False, True, info)
        if resend:
            self._send(resend)

    def _refuse_other_models(self, urls: set[str]) -> None:
        """`refuse_other_models` for the servers that took sessions of a failed one: each must publish
        the models it did at make (a server unused then: those of one of the env's servers)."""
        for url in sorted(urls):
            at_make = self._models_at_make
            with Client(url, timeouts=self.timeouts, headers=self._headers) as client:
                try:
                    refuse_other_models(client, {at_make[url]} if url in at_make else set(at_make.values()))
                except OpenEnvError as exc:
                    self._closed_because = (
                        "a server came back with other models"
                        if isinstance(exc, EnvironmentMismatch)
                        else "a new server could not be read"
                    )
                    self._close_after(exc)
                    raise

    def _result(self, i: int, kind: str, result: StepResult) -> _Decoded:
        if kind == "reset":
            obs, info = self.episodes[i].reset_result(result)
            return obs, 0.0, False, False, info
        return self.episodes[i].step_result(result)

    def _open_transport(self) -> Transport:
        if self._transport is None or self._transport.closed:
            why = self._closed_because
            because = f" ({why}: its sessions could no longer be trusted)" if why else ""
            raise SessionClosed(f"This vector environment is closed{because}; make a new one.")
        return self._transport

    def _close_after(self, exc: BaseException) -> None:
        """Close the env after ``exc`` broke the requests in flight; later calls say why."""
        if self._transport is None:
            return
        if self._closed_because is None and not isinstance(exc, OpenEnvError):
            self._closed_because = f"a step was interrupted ({type(exc).__name__})"
        self.close()

    def _check_idle(self, what: str) -> None:
        in_flight = len(self._in_flight) + len(self._ready)
        if in_flight:
            raise ValueError(
                f"{in_flight} step(s) sent with send() are in flight: recv() them before {what}()"
            )

    def _seeds(self, seed: int | list[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(f"A list of seeds must have num_envs={self.num_envs} entries, got {len(seed)}")
        return list(seed)

    # ------------------------------------------------------------------ opening and closing

    def _set_up_adapters(self) -> None:
        """`set_up_adapters` with one HTTP client per server (its ``/schema`` read once for all its
        sub-environments) and the probing resets sent on the sub-environments' own sessions, all at once."""
        assert self._transport is not None
        urls = self._transport.urls
        with contextlib.ExitStack() as stack:
            clients: dict[str, Client] = {}
            for url in urls:
                if url not in clients:
                    clients[url] = stack.enter_context(
                        Client(url, timeouts=self.timeouts, headers=self._headers)
                    )
                    stack.enter_context(clients[url].remembering())
            self.adapters = set_up_adapters(
                self.adapters,
                [clients[url] for url in urls],
                self.render_mode,
                self._probe,
                self._session_state,
            )
            #: What each server's models were at make: a reconnection refuses one that changed.
            self._models_at_make = {url: models_digest(client) for url, client in clients.items()}

    def _probe(self, probing: dict[int, dict[str, Any]]) -> dict[int, Reply]:
        assert self._transport is not None
        self._transport.send({i: ("reset", options) for i, options in probing.items()})
        first: dict[int, Reply] = {}
        while len(first) < len(probing):
            first.update(self._transport.receive(self.timeouts.request + self.timeouts.close + 5.0))
        return first

    def _session_state(self, i: int) -> dict[str, Any]:
        """The state of session ``i``, asked over its own connection: a server with room for one session
        (dm_control's default) has none for another."""
        assert self._transport is not None
        self._transport.send({i: ("state", {})})
        reply = self._transport.receive(self.timeouts.request + self.timeouts.close + 5.0)[i]
        if isinstance(reply, BaseException):
            raise reply
        assert isinstance(reply, dict)
        return reply

    def render(self) -> tuple[Any, ...] | None:
        if self.render_mode is None:
            return None
        return tuple(adapter.render(self.render_mode) for adapter in self.adapters)

    def close_extras(self, **kwargs: Any) -> None:
        """Close every session (freeing their slots) and a container started for this vector env.
        Interrupted half-way (a second Ctrl+C), it closes the rest before raising."""
        transport, self._transport = getattr(self, "_transport", None), None
        self._in_flight, self._ready = {}, {}
        owned, self._owned_launcher = getattr(self, "_owned_launcher", None), None
        interrupted: BaseException | None = None
        if transport is not None:
            try:
                transport.close()
            except Exception:  # best effort: the rest still closes
                pass
            except BaseException as exc:  # Ctrl+C: the rest still closes, then it is raised
                interrupted = exc
        finalizer, self._finalizer = getattr(self, "_finalizer", None), None
        if finalizer is not None:
            finalizer.detach()  # everything is closed: nothing left for a collection to do
        try:
            if owned is not None:
                owned.stop()
        finally:
            if interrupted is not None:
                raise interrupted


def _release(transport: Transport) -> None:
    """Close the sessions of a vector env collected without ``close()``.

    A finalizer: a collection may run it on any thread, one that holds a connection's lock included (a
    keepalive thread), so the closing happens on a thread of its own.
    """
    with contextlib.suppress(RuntimeError):  # the interpreter is shutting down: the sockets go with it
        threading.Thread(target=transport.close, name="openenv-lab-release", daemon=True).start()
