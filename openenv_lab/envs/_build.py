"""What ``make`` needs before any session opens: the adapter, and the launcher that says where the server is.

Shared by `OpenEnvEnv` and `OpenEnvVectorEnv`, so both refuse the same arguments with the same words.
"""

from __future__ import annotations

from typing import Any

from ..adapters import ADAPTERS, Adapter
from ..launch import DockerServer, Launcher, RemoteServer, max_sessions_for, shared_embedded_server

__all__ = ["check_render_mode", "make_adapter", "make_launcher"]


def make_adapter(adapter: str | Adapter | type[Adapter], options: dict[str, Any]) -> Adapter:
    """The adapter for ``adapter`` (a family name, a class or an instance), built with ``options``."""
    if isinstance(adapter, Adapter):
        if options:
            raise TypeError(f"Options {sorted(options)} cannot be applied to an adapter instance")
        return adapter
    if isinstance(adapter, str):
        try:
            adapter = ADAPTERS[adapter]
        except KeyError:
            raise ValueError(f"Unknown adapter {adapter!r}; known: {', '.join(sorted(ADAPTERS))}") from None
    try:
        return adapter(**options)
    except TypeError as exc:
        raise TypeError(f"{adapter.__name__} does not take these options: {exc}") from None


def check_render_mode(adapter: Adapter, render_mode: str | None) -> None:
    """Refuse a render mode the family does not draw, naming those it does."""
    if render_mode is None or render_mode in adapter.render_modes:
        return
    modes = ", ".join(repr(mode) for mode in adapter.render_modes) or "nothing"
    raise ValueError(
        f"render_mode={render_mode!r} is not supported by {type(adapter).__name__}, which renders as "
        f"{modes}: make the env with one of those"
    )


def make_launcher(
    adapter: Adapter,
    base_url: str | None,
    launcher: str | Launcher,
    image: str | None,
    sessions: int = 1,
) -> tuple[Launcher, bool]:
    """The launcher for these arguments, and whether the env owns it (stops it on close).

    ``sessions`` is how many sessions a server started here must hold (a vector env's ``num_envs``)."""
    options = dict(adapter.server_options)
    if base_url is not None:
        if options:
            raise ValueError(
                f"{sorted(options)} configure the embedded server, but base_url={base_url!r} names a running "
                "one with its own settings: drop one or the other"
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
            return DockerServer(image=image), True
        return DockerServer(name, image=image, max_sessions=_room(name, sessions), **options), True
    if name is None:
        raise ValueError(
            f"{type(adapter).__name__} has no bundled server to start: pass base_url='http://host:port' "
            "of a running OpenEnv server, or image='<an OpenEnv image>'"
        )
    if launcher == "docker":
        return DockerServer(name, max_sessions=_room(name, sessions), **options), True
    return shared_embedded_server(name, max_sessions=_room(name, sessions), **options), False


def _room(server_name: str, sessions: int) -> int | None:
    return max_sessions_for(server_name, sessions) if sessions > 1 else None
