"""What ``make`` needs before any session opens: the adapter, the launcher that says where the server is,
and the checked arguments of vector envs (servers, autoreset mode, reset masks).

Shared by `OpenEnvEnv` and `OpenEnvVectorEnv`, so both refuse the same arguments with the same words.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from ..adapters import ADAPTERS, Adapter, GenericAdapter
from ..adapters.spec import find_spec
from ..client import Client, EnvironmentMismatch, OpenEnvError, ProtocolError
from ..client.spaces import SERVER_TOKEN_VARIABLE, TOKEN_VARIABLE, space_headers, space_image
from ..launch import (
    DockerServer,
    Fleet,
    Launcher,
    RemoteServer,
    SpaceServer,
    fleet_of,
    max_sessions_for,
    shared_embedded_server,
)

__all__ = [
    "Where",
    "autoreset_mode",
    "check_render_mode",
    "check_reset_mask",
    "make_adapter",
    "make_launcher",
    "models_digest",
    "refuse_other_models",
    "render_metadata",
    "request_headers",
    "server_urls",
    "set_up_adapters",
    "with_launcher_headers",
]


class Where:
    """Where the user said the server is: ``base_url``, ``launcher``, ``image``, or a Hub ``space``."""

    def __init__(
        self,
        base_url: str | None = None,
        launcher: str | Launcher = "embedded",
        image: str | None = None,
        space: str | None = None,
        token: str | bool | None = None,
        trust_remote_code: bool = False,
        progress: bool | None = None,
    ) -> None:
        self.base_url, self.launcher, self.image = base_url, launcher, image
        self.space, self.token, self.trust_remote_code = space, token, trust_remote_code
        self.progress = progress


def make_adapter(
    adapter: str | Adapter | type[Adapter],
    options: dict[str, Any],
    *,
    check_identity: bool = True,
    raw_info: bool = False,
    text_info: bool = True,
    render_mode: str | None = None,
) -> Adapter:
    """The adapter for ``adapter`` (a family name, a class or an instance), built with ``options`` and
    given the env's settings; a render mode its family does not draw is refused before any server starts
    (the generic adapter's family is known only once it has read its server)."""
    if isinstance(adapter, Adapter):
        if options:
            raise TypeError(f"Options {sorted(options)} cannot be applied to an adapter instance")
        made = adapter
    else:
        if isinstance(adapter, str):
            try:
                adapter = ADAPTERS[adapter]
            except KeyError:
                known = ", ".join(sorted(ADAPTERS))
                raise ValueError(f"Unknown adapter {adapter!r}; known: {known}") from None
        try:
            made = adapter(**options)
        except TypeError as exc:
            raise TypeError(f"{adapter.__name__} does not take these options: {exc}") from None
    made.check_identity, made.raw_info, made.text_info = check_identity, raw_info, text_info
    if type(made) is not GenericAdapter:
        check_render_mode(made, render_mode)
    return made


#: Sends the probing resets (sub-environment -> reset options) and returns their replies (or errors).
Probe = Callable[[dict[int, dict[str, Any]]], dict[int, Any]]


def set_up_adapters(
    given: Sequence[Adapter],
    clients: Sequence[Client],
    render_mode: str | None,
    probe: Probe,
    state: Callable[[int], dict[str, Any]],
) -> list[Adapter]:
    """Make every adapter of an env ready to play its server, in one order for both envs.

    1. The generic adapter hands a server to its family's adapter where the server's names say which
       (the official ``chess_env`` gets the chess adapter), with the user's settings; the render mode is
       checked against the family that will draw.
    2. Adapters that need no reset read what their server says of itself (`Adapter.setup`).
    3. The others get their reset options sent at once through ``probe`` (the env's own sessions), then
       read their server with its reply; ``state(i)`` reads session ``i``'s state for those that ask.

    ``clients[i]`` is sub-environment ``i``'s server's HTTP client.
    """
    adapters = [_family_adapter(a, c) for a, c in zip(given, clients, strict=True)]
    for adapter in adapters:
        check_render_mode(adapter, render_mode)
    for adapter, client in zip(adapters, clients, strict=True):
        if not adapter.needs_probe:
            _set_up(adapter, client, None, None)
    probing = {i: dict(a.reset_options) for i, a in enumerate(adapters) if a.needs_probe}
    if probing:
        replies = probe(probing)
        for i in probing:
            if isinstance(replies[i], BaseException):
                raise replies[i]
            read = functools.partial(state, i) if adapters[i].probe_state else None
            _set_up(adapters[i], clients[i], replies[i], read)
    return adapters


def _family_adapter(adapter: Adapter, client: Client) -> Adapter:
    """``adapter`` itself, unless it is the generic one and the server's spec hands it to one of our
    families: that family's adapter then, with the generic one's settings."""
    if type(adapter) is not GenericAdapter:
        return adapter
    spec = adapter.spec
    if spec is None:
        try:
            spec = find_spec(client.names())
        except OpenEnvError:  # no /metadata: the generic adapter says what it can
            return adapter
    if spec is None or spec.family is None:
        return adapter
    family = ADAPTERS[spec.family]()
    family.check_identity, family.raw_info = adapter.check_identity, adapter.raw_info
    family.text_info = adapter.text_info
    return family


def _set_up(adapter: Adapter, client: Client, first: Any, state: Callable[[], dict[str, Any]] | None) -> None:
    """``adapter.setup``; what the server says of itself that the adapter cannot read (a ``/schema``
    whose parts have the wrong types) is a `ProtocolError` naming the server, not a crash."""
    try:
        if state is None:
            adapter.setup(client, first)
        else:
            adapter.setup(client, first, state)  # type: ignore[call-arg]  # `Adapter.probe_state`
    except (TypeError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        raise ProtocolError(
            f"The server at {client.base_url} describes itself in a form {type(adapter).__name__} cannot "
            f"read ({type(exc).__name__}: {exc}); is it an OpenEnv server of that kind?",
            url=client.base_url,
        ) from exc


def models_digest(client: Client) -> str:
    """The SHA-256 of the server's action and observation models (``/schema``): what spaces are made of."""
    schema = client.schema()
    models = {key: schema.get(key) for key in ("action", "observation", "reset_observation")}
    return hashlib.sha256(json.dumps(models, sort_keys=True).encode()).hexdigest()


def refuse_other_models(client: Client, at_make: Collection[str]) -> None:
    """After a reconnection, both envs' policy: refuse a server that now publishes other action or
    observation models (`models_digest`) than the env's servers did at make (restarted at another
    version, say), since the spaces made then would be wrong for it."""
    if models_digest(client) in at_make:
        return
    raise EnvironmentMismatch(
        f"The server at {client.base_url} now publishes other action or observation models (/schema) "
        "than when this environment was made: its spaces would be wrong for it. Make the "
        "environment again (gym.make) to play the server as it is now.",
        asked="the /schema read at make",
        reported="another /schema",
        url=client.base_url,
    )


def render_metadata(adapter: Adapter) -> dict[str, Any]:
    """The env's ``metadata``: what its family draws, and how fast a replay plays."""
    return {"render_modes": list(adapter.render_modes), "render_fps": adapter.render_fps}


def check_render_mode(adapter: Adapter, render_mode: str | None) -> None:
    """Refuse a render mode the family does not draw, naming those it does."""
    if render_mode is None or render_mode in adapter.render_modes:
        return
    modes = ", ".join(repr(mode) for mode in adapter.render_modes) or "nothing"
    raise ValueError(
        f"render_mode={render_mode!r} is not supported by {type(adapter).__name__}, which renders as "
        f"{modes}: make the env with one of those"
    )


def request_headers(where: Where, headers: dict[str, str] | None) -> dict[str, str] | None:
    """The headers of every request: ``headers``, plus ``Authorization: Bearer <token>`` for a Space
    (``token=``, else ``$HF_TOKEN``) or for our servers (``token=``, else ``$OPENENV_LAB_TOKEN``, which
    servers beyond loopback require). ``$HF_TOKEN`` is never sent to a URL the user typed."""
    if where.space is not None and where.launcher == "docker":
        return headers  # the Space's image runs here: the token was for the registry
    if where.space is not None or isinstance(where.token, str):
        return space_headers(where.token, headers)
    server_token = os.environ.get(SERVER_TOKEN_VARIABLE) if where.token is None else None
    if server_token:
        return space_headers(server_token, headers)
    return headers


def with_launcher_headers(launcher: Any, headers: dict[str, str] | None) -> dict[str, str] | None:
    """``headers`` plus those the launcher's server needs (a container's token), the user's winning."""
    needed = getattr(launcher, "headers", None)
    if not needed:
        return headers
    return {**needed, **(headers or {})}


def _space_launcher(adapter: Adapter, where: Where) -> tuple[Launcher, bool]:
    assert where.space is not None
    if where.base_url is not None or where.image is not None:
        raise ValueError("space= names the server: drop base_url= and image=, or space=")
    if adapter.server_options:
        raise ValueError(
            f"{sorted(adapter.server_options)} configure our embedded servers, not a Space: drop them"
        )
    if where.launcher == "docker":
        if not where.trust_remote_code:
            raise ValueError(
                f"launcher='docker' runs the image of the Space {where.space}, code written by its owner, on "
                "this machine: pass trust_remote_code=True if you trust it"
            )
        token = where.token if isinstance(where.token, str) else None
        if where.token is None:
            token = os.environ.get(TOKEN_VARIABLE) or None
        image = space_image(where.space)
        return DockerServer(image=image, pull=True, registry_token=token, progress=where.progress), True
    if where.launcher != "embedded":
        raise ValueError("space= names the server: drop the launcher object, or space=")
    return SpaceServer(where.space, token=where.token, progress=where.progress), False


def configuring(adapter: Adapter) -> list[str]:
    """The adapter's server options that only configure a server started here (not `identity_options`,
    which a running server is checked against instead)."""
    return sorted(set(adapter.server_options) - set(adapter.identity_options))


def make_launcher(adapter: Adapter, where: Where, sessions: int = 1) -> tuple[Launcher, bool]:
    """The launcher for these arguments, and whether the env owns it (stops it on close).

    ``sessions`` is how many sessions a server started here must hold (a vector env's ``num_envs``)."""
    if where.space is not None:
        return _space_launcher(adapter, where)
    base_url, launcher, image = where.base_url, where.launcher, where.image
    options = dict(adapter.server_options)
    if base_url is not None:
        if configured := configuring(adapter):
            raise ValueError(
                f"{configured} configure the embedded server, but base_url={base_url!r} names a "
                "running one with its own settings: drop one or the other"
            )
        if image is not None or launcher != "embedded":
            raise ValueError("base_url names a running server: drop launcher= and image=, or base_url")
        return RemoteServer(base_url), False
    if not isinstance(launcher, str):
        if image is not None or options:
            raise ValueError(
                "A launcher object carries its own image and options: drop image= and the options"
            )
        return launcher, False
    if launcher not in ("embedded", "docker"):
        raise ValueError(f"launcher must be 'embedded', 'docker' or a launcher object, got {launcher!r}")
    name = adapter.server_name
    if image is not None:
        if name is None or not image.startswith("openenv-lab/"):
            return DockerServer(image=image, progress=where.progress), True
        room = _room(name, sessions)
        return DockerServer(name, image=image, max_sessions=room, progress=where.progress, **options), True
    if name is None:
        raise ValueError(
            f"{type(adapter).__name__} has no bundled server to start: pass base_url='http://host:port' "
            "of a running OpenEnv server, or image='<an OpenEnv image>'"
        )
    room = _room(name, sessions)
    if launcher == "docker":
        return DockerServer(name, max_sessions=room, progress=where.progress, **options), True
    return shared_embedded_server(name, max_sessions=room, progress=where.progress, **options), False


def _room(server_name: str, sessions: int) -> int | None:
    return max_sessions_for(server_name, sessions) if sessions > 1 else None


def server_urls(
    adapter: Adapter, num_envs: int, where: Where, base_urls: Sequence[str] | None
) -> tuple[list[str], Launcher | None, Launcher | None]:
    """The servers of a vector env's sessions, the launcher it owns (to stop on close) if any, and the
    launcher that started them (whose ``headers`` the requests carry) if any."""
    base_url, launcher, image = where.base_url, where.launcher, where.image
    if base_urls is None:
        server, owned = make_launcher(adapter, where, sessions=num_envs)
        return [server.start()], server if owned else None, server
    if where.space is not None:
        raise ValueError("Pass space or base_urls, not both")
    if base_url is not None:
        raise ValueError("Pass base_url or base_urls, not both")
    if image is not None or launcher != "embedded":
        raise ValueError("base_urls names running servers: drop launcher= and image=, or base_urls")
    if configured := configuring(adapter):
        raise ValueError(f"{configured} configure the embedded server; drop them or the server URLs")
    if isinstance(base_urls, (str, bytes)):
        raise TypeError(f"base_urls takes a list of server URLs; for one server pass base_url={base_urls!r}")
    fleet = fleet_of(base_urls)  # a fleet, or the URLs of one: its requests carry its token
    urls = list(fleet.urls if isinstance(base_urls, Fleet) else base_urls)
    if not urls:
        raise ValueError("base_urls is empty: give at least one server URL")
    return urls, None, fleet


def check_reset_mask(mask: Any, num_envs: int) -> np.ndarray:
    """``options["reset_mask"]`` checked as ``SyncVectorEnv`` checks it (same errors)."""
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (num_envs,):
        raise ValueError(f"`options['reset_mask']` must have shape `({num_envs},)`, got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not np.any(mask):
        raise ValueError(
            "`options['reset_mask']` must contain a boolean array with at least one True value, got "
            f"reset_mask={mask}"
        )
    return mask


def autoreset_mode(mode: str | AutoresetMode) -> AutoresetMode:
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
