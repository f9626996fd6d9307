"""Running a bundled server under uvicorn: the body of ``openenv-lab serve`` and of embedded servers.

The listening socket is bound before uvicorn starts, so ``port=0`` picks a free port with no race, and
the real address is printed on one line (``ANNOUNCE_PREFIX <url>``) for the process that started us.
With ``exit_with_parent`` the server also stops when its standard input reaches end-of-file, which
happens when the parent process exits or dies for any reason: an embedded server never outlives the
Python process (or notebook kernel) that started it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import threading
import time
from typing import Any

from ..optional_imports import hidden_module
from ..ranges import Range
from ._auth import TOKEN_VARIABLE, TokenGate, needs_token, server_token
from ._limits import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_STEP_TIMEOUT,
    Limits,
    SessionLimits,
)
from .catalogue import get_bundled_server

__all__ = ["ANNOUNCE_PREFIX", "LOG_LEVELS", "SERVE_RANGES", "ServeOptions", "run_server"]

ANNOUNCE_PREFIX = "OPENENV_LAB_LISTENING"
_HARD_EXIT_AFTER = 6.0

#: uvicorn's log levels, which ``--log-level`` takes.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
#: What each server-wide number may be (``max_sessions`` and `ServeOptions`' fields; the ``serve`` flags).
SERVE_RANGES = {
    "max_sessions": Range(1, 10_000),
    "max_message_bytes": Range(1024, 64 << 20),
    "max_sessions_per_client": Range(1, 10_000),
    "max_batch": Range(1, 10_000),
    "idle_timeout": Range(0.01, 1e7, integer=False),
    "ping_interval": Range(0.01, 86_400, integer=False),
    "step_timeout": Range(0.01, 1e7, integer=False),
    "max_reply_bytes": Range(1024, 1 << 30),
}


def _flag(default: Any, help: str, *, unset: str | None = None, never: bool = False) -> Any:
    """A `ServeOptions` field and its ``serve`` flag: ``help`` (``{spec}`` is the family's
    `BundledServer`), ``unset`` (what ``None`` means, in the docs), ``never`` (the flag takes 0 for
    ``None``: no limit)."""
    return dataclasses.field(default=default, metadata={"help": help, "unset": unset, "never": never})


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    """How a server process runs, apart from its environment's options and its address: the settings of
    `run_server` (and the ``openenv-lab serve`` flags) that every replica of a fleet shares.

    ``None`` is the server's own default, or no limit where the default is a number
    (``idle_timeout=None``: sessions are never closed for idling; ``step_timeout=None``: a step may run
    for ever).

    Example:
        >>> from openenv_lab.servers import ServeOptions
        >>> ServeOptions(max_batch=8, idle_timeout=None).flags()
        ['--max-batch', '8', '--idle-timeout', '0']
    """

    log_level: str = _flag("warning", "uvicorn's log level")
    max_message_bytes: int | None = _flag(
        None,
        "largest WebSocket message read (default: {spec.max_message_bytes:,}; larger ones close the "
        "connection with code 1009)",
        unset="the family's",
    )
    max_sessions_per_client: int | None = _flag(
        None, "sessions one client address may hold (default: as many as the server allows)", unset="no limit"
    )
    max_batch: int | None = _flag(
        None,
        "sessions one /ws/batch connection may hold (default: {spec.default_max_sessions})",
        unset="`--max-sessions`, at most the family's",
    )
    idle_timeout: float | None = _flag(
        DEFAULT_IDLE_TIMEOUT, "close a session after this many seconds without a request", never=True
    )
    ping_interval: float = _flag(
        20.0,
        "seconds between WebSocket pings; a client silent for as long again is dropped and its sessions "
        "freed",
    )
    #: Seconds a step may run before its session is ended with an error (`_limits.StepTimeLimitExceeded`).
    step_timeout: float | None = _flag(
        DEFAULT_STEP_TIMEOUT,
        "end a session whose step runs longer than this many seconds, with an error",
        never=True,
    )
    #: Bytes of the longest reply (`_limits.reply_too_large`); a request whose replies would be longer is
    #: refused, before any work where the size is known in advance (Atari's screens).
    max_reply_bytes: int = _flag(
        DEFAULT_MAX_REPLY_BYTES, "longest reply sent; a request for larger observations gets an error"
    )
    #: Steps on the event loop rather than a worker thread of each session: faster for cheap steps
    #: (benchmarks/isolation.py), but while one session steps every other waits (`openenv_lab.servers._base`).
    inline_steps: bool = _flag(
        False,
        "run steps on the event loop, not a worker thread per session: a little faster for cheap steps, "
        "but while one session steps every other waits",
    )

    def __post_init__(self) -> None:
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in SERVE_RANGES and value is not None:
                SERVE_RANGES[field.name].check(field.name, value)

    @staticmethod
    def flag_fields() -> tuple[dataclasses.Field[Any], ...]:
        """The fields, each with its flag's ``help``, ``unset`` and ``never`` in its metadata (the command
        line and ``docs/options.md`` are made from them)."""
        return dataclasses.fields(ServeOptions)

    def flags(self) -> list[str]:
        """The ``openenv-lab serve`` flags that ask for these settings (those not at their default)."""
        flags: list[str] = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value == field.default:
                continue
            flag = "--" + field.name.replace("_", "-")
            if isinstance(value, bool):
                flags.append(flag)  # a switch: given only when on
            else:
                flags += [flag, str(0 if value is None else value)]  # --idle-timeout 0: never, and so on
        return flags


def run_server(
    name: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int | None = None,
    announce: bool = False,
    exit_with_parent: bool = False,
    token: str | None = None,
    open_to_all: bool = False,
    serve_options: ServeOptions | None = None,
    **options: Any,
) -> None:
    """Serve the bundled server ``name`` until interrupted (blocking).

    A ``host`` other than loopback requires a token on every request (see `openenv_lab.servers._auth`):
    ``token``, else ``$OPENENV_LAB_TOKEN``, else one generated and printed; ``open_to_all`` serves
    everyone instead. `ServeOptions` says the rest: ``max_message_bytes`` caps the WebSocket messages it
    reads (default: the server's own, `BundledServer.max_message_bytes`); ``max_sessions_per_client``,
    ``max_batch`` (default: its ``max_sessions``, at most the family's default, for which its message
    limit is sized), ``idle_timeout`` (seconds; None: never), ``max_reply_bytes`` and ``step_timeout``
    (seconds; None: never) are the limits of `openenv_lab.servers._limits`; ``ping_interval`` is how
    often the server pings each WebSocket (a client that does not answer within as long again is dropped
    and its sessions freed)."""
    import uvicorn

    settings = serve_options or ServeOptions()
    if max_sessions is not None:
        SERVE_RANGES["max_sessions"].check("max_sessions", max_sessions)
    _import_jsonschema_without_iri_format()
    bundled = get_bundled_server(name)
    app = bundled.make_app(max_sessions=max_sessions, **options)
    from ._base import ServerEnvironment

    # One server per process: these hold for every session of it.
    ServerEnvironment.inline_steps = settings.inline_steps
    ServerEnvironment.step_timeout = settings.step_timeout
    ServerEnvironment.max_reply_bytes = settings.max_reply_bytes
    default = bundled.default_max_sessions
    limits = Limits(
        per_client=settings.max_sessions_per_client,
        idle_timeout=settings.idle_timeout,
        max_batch=settings.max_batch or min(max_sessions or default, default),
        max_reply_bytes=settings.max_reply_bytes,
    )
    app.state.limits = limits  # read by GET /capacity
    required, generated = server_token(host, token, open_to_all=open_to_all)
    app.state.bearer = required is not None  # the OpenAPI document declares the token
    app = SessionLimits(app, limits)
    if required is not None:
        app = TokenGate(app, required)
    sock = _listen(host, port)
    bound_port = sock.getsockname()[1]
    # A wildcard address is not one clients can use: announce the loopback address instead.
    reachable = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    url = f"http://{f'[{reachable}]' if ':' in reachable else reachable}:{bound_port}"
    # uvicorn's sans-I/O WebSocket protocol (0.35+) speaks the same WebSocket as its default one for
    # less server CPU per message, and per-message cost is most of a cheap step's (server CPU per step
    # is a column of benchmarks/vector_throughput.py).
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        timeout_graceful_shutdown=3,
        lifespan="on",
        ws="websockets-sansio",
        ws_max_size=settings.max_message_bytes or bundled.max_message_bytes,
        ws_ping_interval=settings.ping_interval,
        ws_ping_timeout=settings.ping_interval,
    )
    if announce:
        banner = f"{ANNOUNCE_PREFIX} {url}"
    else:
        everywhere = " (all interfaces)" if reachable != host else ""
        banner = f"openenv_lab {name} server listening on {url}{everywhere} (Ctrl+C to stop)"
        if generated:
            banner += (
                f"\ntoken: {required}\n(every request needs it: token='...' in gym.make, or "
                f"{TOKEN_VARIABLE}=... in the client's environment; --token or {TOKEN_VARIABLE} sets it here)"
            )
        elif required is None and needs_token(host):
            banner += "\nwarning: --no-token: anyone who can reach this address can use the server"

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            # Said only now that uvicorn handles Ctrl+C: an interrupt that follows the banner at once
            # must stop the server cleanly, not land in the middle of its start.
            if self.started:
                print(banner, flush=True)

    server = Server(config)
    if exit_with_parent:
        threading.Thread(target=_stop_at_stdin_eof, args=(server,), daemon=True).start()
    server.run(sockets=[sock])


def _import_jsonschema_without_iri_format() -> None:
    """Import ``jsonschema`` (which openenv's server framework imports through ``mcp``) without
    ``rfc3987_syntax``.

    ``jsonschema`` imports ``rfc3987_syntax``, when it is installed (Jupyter installs it), only to offer an
    optional ``"iri"`` format check, and that import compiles lark grammars: seconds of every server
    start. Nothing in a server process checks formats, and ``jsonschema`` already
    treats the module as optional, so the server imports it with the module hidden, then un-hides it.
    """
    if "jsonschema" in sys.modules:
        return
    with hidden_module("rfc3987_syntax"), contextlib.suppress(ImportError):
        import jsonschema  # noqa: F401  # not installed: the framework says so when it needs it


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if sys.platform != "win32":  # on Windows it would let two servers share a port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(
            exc.errno,
            f"Cannot listen on {host}:{port}: {exc.strerror}. Choose another --port (0 picks a free one).",
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _stop_at_stdin_eof(server: Any) -> None:
    try:
        while sys.stdin.buffer.read(1024):
            pass
    except (OSError, ValueError):
        pass
    server.should_exit = True
    time.sleep(_HARD_EXIT_AFTER)  # a graceful shutdown that hangs (a stuck session) must not keep us alive
    os._exit(0)
