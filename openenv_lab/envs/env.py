"""`OpenEnvEnv`: any OpenEnv server as a ``gymnasium.Env``.

The environment owns one `Session` (one environment instance on the server) and an `Adapter` that
translates between the server's JSON and gymnasium spaces. It adds what gymnasium users rely on and the
OpenEnv protocol does not give: checked actions, honest ``terminated``/``truncated``, reproducible
seeding, and a clear error instead of a silent new game when stepping a finished episode.
"""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

import gymnasium as gym

from ..adapters import Adapter
from ..client import (
    Client,
    ConnectError,
    EnvironmentMismatch,
    Keepalive,
    ProtocolError,
    ServerError,
    Session,
    SessionClosed,
    Timeouts,
)
from ..launch import EmbeddedServer, Launcher
from ._build import (
    Where,
    make_adapter,
    make_launcher,
    models_digest,
    refuse_other_models,
    render_metadata,
    request_headers,
    set_up_adapters,
    with_launcher_headers,
)
from ._episode import Episode, retry_after_collecting
from .tasks import TaskCatalog, selection

__all__ = ["OpenEnvEnv"]


class OpenEnvEnv(gym.Env):
    """A gymnasium environment backed by an OpenEnv server (usually made with ``gym.make("openenv/...")``).

    Args:
        adapter: the environment family: a name from `openenv_lab.adapters.ADAPTERS` (``"chess"``,
            ``"remote"``), an `Adapter` subclass, or an adapter instance.
        base_url: the server to use. When omitted, the family's bundled server is started on this machine
            (shared by all environments of the process) — ``"remote"`` has none and needs a URL.
        launcher: where to start the server when no ``base_url`` is given: ``"embedded"`` (the default, a
            child process), ``"docker"`` (a container of our image for the family, owned by this env and
            removed by `close`), or a launcher object such as ``DockerServer("chess", memory="1g")``
            (started here; stopping it is yours).
        image: any OpenEnv Docker image to run for this env (implies ``launcher="docker"``), e.g. for
            ``"openenv/remote"``.
        render_mode: one of the adapter's render modes (chess: ``"svg"``, ``"rgb_array"``, ``"ansi"``).
        timeouts: connect/request/close timeouts of the connection (`Timeouts`, or seconds for all three).
        keepalive: WebSocket ping settings (e.g. ``Keepalive(interval=None)`` behind tunnels that drop pings).
        headers: extra HTTP headers, sent with every request and WebSocket upgrade.
        space: a Hugging Face Space ``"owner/name"`` running an OpenEnv server: its URL is resolved
            (`openenv_lab.client.spaces`), a sleeping Space is woken and waited for (`SpaceServer`), and
            ``token`` travels with every request. With ``launcher="docker"`` the Space's image runs on this
            machine instead, which needs ``trust_remote_code=True``.
        token: a Hugging Face token (default for a Space: ``$HF_TOKEN``; ``False`` sends none). For a
            ``base_url``, only a token given here is sent.
        trust_remote_code: allow running a Space's image here (``space=..., launcher="docker"``); never
            asked interactively.
        progress: show a wait for the server that lasts (a Space waking, an image downloading, a server
            starting); by default where someone watches (a terminal or a notebook), ``False`` never.
        check_identity: refuse (`EnvironmentMismatch`) a server that reports another environment than the
            one asked for (another Atari game, another spec's environment, another task); ``False``
            allows it.
        tasks: tasks to play in turn, one per reset, on a server that offers tasks (openenv 0.10's task
            API; our chess server's mates in 1-3): a split's name, a list of task ids or of
            ``(split, index)`` pairs, or a DataFrame of rows of `tasks`. A reset can also name one:
            ``reset(options={"task_id": ...})`` (see `openenv_lab.envs.tasks`).
        raw_info: add the server's JSON, as it came, to every info: ``info["raw_observation"]`` (its
            observation's fields) and ``info["metadata"]``. Off by default: research code stacks infos,
            and raw JSON (nulls, lists of any length, keys that come and go) does not stack.
        text_info: keep the infos' text keys (a FEN, a date, why an episode ended) and dicts (the FinRL
            reward's parts). ``False`` leaves numbers only, each dict's under keys of their own
            (``reward_components_market``): what TorchRL's batched ``GymEnv(id, num_envs=N)`` can stack.
        **adapter_options: passed to the adapter class (chess: ``opponent``, ``agent_color``...).

    Seeding: ``reset(seed=s)`` sends ``s`` to the server; ``reset()`` sends a seed drawn from the
    environment's own generator, so one seed fixes a whole sequence of episodes, and ``info["seed"]``
    says which seed an episode used. (Atari, where reseeding reloads the ROM, continues the emulator's
    random stream instead, as ALE does; ``info["seed"]`` is then -1.) Servers that ignore seeds
    (the official chess and Atari servers) cannot replay episodes; a warning says so once per server.

    Info: the same keys, each of one type, on every step from the reset on, so that vector envs and RL
    libraries can stack them (``docs/infos.md`` lists each family's; `openenv_lab.adapters.info_schema`):
    every family has ``seed`` (the episode's; -1 for none) and ``reward_missing`` (the server sent no
    reward: the reward is then 0.0). An episode that plays a task has ``task`` (its ``id``, ``split``,
    ``index`` and what the server reports of it) on every step.

    Example:
        >>> import gymnasium as gym
        >>> import openenv_lab
        >>> env = gym.make("openenv/chess")
        >>> obs, info = env.reset(seed=0)
        >>> action = env.action_space.sample(mask=obs["action_mask"])
        >>> obs, reward, terminated, truncated, info = env.step(action)
        >>> bool(info["illegal_move"])
        False
        >>> env.close()
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array", "svg"], "render_fps": 4}

    def __init__(
        self,
        adapter: str | Adapter | type[Adapter] = "remote",
        *,
        base_url: str | None = None,
        render_mode: str | None = None,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
        launcher: str | Launcher = "embedded",
        image: str | None = None,
        check_identity: bool = True,
        tasks: Any = None,
        space: str | None = None,
        token: str | bool | None = None,
        trust_remote_code: bool = False,
        progress: bool | None = None,
        raw_info: bool = False,
        text_info: bool = True,
        **adapter_options: Any,
    ) -> None:
        self._owns_launcher = False
        timeouts = Timeouts.of(timeouts)  # checked before a server starts
        self.adapter = make_adapter(
            adapter,
            adapter_options,
            check_identity=check_identity,
            raw_info=raw_info,
            text_info=text_info,
            render_mode=render_mode,
        )
        self.render_mode = render_mode
        where = Where(base_url, launcher, image, space, token, trust_remote_code, progress)
        headers = request_headers(where, headers)
        self.launcher, self._owns_launcher = make_launcher(self.adapter, where)
        self._session: Session | None = None
        try:
            self.base_url = self.launcher.start()
        except BaseException:
            self._stop_owned_launcher()
            raise
        headers = with_launcher_headers(self.launcher, headers)  # e.g. a container's token
        self.client = Client(self.base_url, timeouts=timeouts, keepalive=keepalive, headers=headers)
        this = weakref.ref(self)  # the catalogue must not keep the env alive (a dropped env closes)
        self._catalog = TaskCatalog(lambda: this().client)  # type: ignore[union-attr]
        try:
            [self.adapter] = set_up_adapters(
                [self.adapter], [self.client], render_mode, self._probe, lambda _: self.session.state()
            )
            if self._session is None:
                self._session = retry_after_collecting(self.client.session)
            self.metadata = render_metadata(self.adapter)
            self.episode = Episode(self.adapter, self.base_url, self._catalog)
            if tasks is not None:
                self.episode.tasks = selection(tasks, self._catalog)
            self._models_at_make = models_digest(self.client)
        except ServerError as exc:
            self.close()
            if exc.code != "EXECUTION_ERROR":
                raise
            # The probing reset failed: there is no session to keep open.
            options = self.adapter.reset_options
            said, hint = (
                (f"failed its first reset, sent with {options}", "check those options against the server's")
                if options
                else ("failed its first reset", "no options were sent: the server cannot start an episode")
            )
            raise ServerError(
                f"The server at {exc.url} {said}: {exc.server_message}. No environment was made ({hint}; "
                "the server's log says more).",
                code=exc.code,
                server_message=exc.server_message,
                details=exc.details,
                url=exc.url,
            ) from None
        except BaseException:
            self.close()
            raise
        self.observation_space = self.adapter.observation_space
        self.action_space = self.adapter.action_space

    def _probe(self, probing: dict[int, dict[str, Any]]) -> dict[int, Any]:
        """The first reset, on the session this env then keeps (for an adapter that sizes its spaces from
        a reply)."""
        self._session = retry_after_collecting(self.client.session)
        return {0: self._session.reset(**probing[0])}

    @property
    def tasks(self) -> Any:
        """The server's tasks as a polars DataFrame (``split``, ``index``, ``id``, then the server's fields);
        no rows when the server offers none. Read from the server once."""
        return self._catalog.table()

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers every request to the server carries (a token's among them), for opening
        clients of one's own on it (`openenv_lab.evaluate` reads the server's identity with them)."""
        return dict(self.client.headers)

    @property
    def session(self) -> Session:
        """The current session with the server (a new one is opened by `reset` if it was lost)."""
        if self._session is None or self._session.closed:
            raise SessionClosed("This environment has no open session; call reset() to open one.")
        return self._session

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode. ``options`` are extra reset arguments for the server (e.g. ``{"fen": ...}``)."""
        self.episode.np_random = self._np_random  # one generator, whether gymnasium or we made it
        kwargs = self.episode.reset_request(seed, options)
        self._np_random, self._np_random_seed = self.episode.np_random, self.episode.np_random_seed
        if self._session is None or self._session.closed:
            self._reconnect()  # the last session was lost; this is a new episode anyway
        assert self._session is not None
        return self.episode.reset_result(self._session.reset(**kwargs))

    def _reconnect(self) -> None:
        """Open a new session, restarting an embedded server that died (it may come back on a new port),
        and refuse a server that now publishes other models than at make (`refuse_other_models`)."""
        self._open_session()
        try:
            refuse_other_models(self.client, {self._models_at_make})
        except EnvironmentMismatch:
            session, self._session = self._session, None
            if session is not None:
                session.close()
            raise

    def _open_session(self) -> None:
        for attempt in range(2):
            url = self.launcher.start()
            if url != self.base_url:
                old = self.client
                self.client = Client(url, timeouts=old.timeouts, keepalive=old.keepalive, headers=old.headers)
                old.close()
                self.base_url = self.episode.base_url = url
            try:
                self._session = retry_after_collecting(self.client.session)
                return
            except (ConnectError, ProtocolError):
                # A server killed a moment ago refuses or drops connections before it can be reaped:
                # once it has exited, start() launches a new one.
                if attempt or not isinstance(self.launcher, EmbeddedServer) or not self.launcher.exited(2.0):
                    raise

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        payload = self.episode.step_request(action)
        return self.episode.step_result(self.session.step(payload))

    def render(self) -> Any:
        if self.render_mode is None:
            gym.logger.warn(
                "render() was called without a render mode: make the environment with "
                f"render_mode set to one of {self.adapter.render_modes}."
            )
            return None
        return self.adapter.render(self.render_mode)

    def __getattr__(self, name: str) -> Any:
        # Family-specific attributes the adapter declares (e.g. ALE's `ale`, sb3-contrib's `action_masks`).
        adapter = self.__dict__.get("adapter")
        if adapter is not None and name in adapter.env_attributes:
            return getattr(adapter, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def close(self) -> None:
        """Close the session (freeing its slot on the server); a shared embedded server keeps running, a
        container started for this env (``launcher="docker"``) is stopped and removed."""
        if self.__dict__.get("_session") is not None:
            self._session.close()
            self._session = None
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        self._stop_owned_launcher()
        super().close()

    def _stop_owned_launcher(self) -> None:
        if self.__dict__.get("_owns_launcher"):
            self._owns_launcher = False
            self.launcher.stop()
