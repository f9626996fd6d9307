"""Embedded servers: our bundled OpenEnv servers in a child process (on loopback), started on demand.

This is what makes ``gym.make("openenv/chess")`` work with nothing but pip (Binder, Colab, a laptop):
no Docker, no second terminal. The child runs ``python -m openenv_lab serve NAME --port 0``, binds a
free loopback port, announces it, and is health-checked before use.

Lifetime: one server per (name, options) is shared by every environment of the process
(`shared_embedded_server`); it stops at interpreter exit, and it also stops by itself if this process
dies without running exit handlers (it watches its standard input, whose other end we hold). An
`EmbeddedServer` that is dropped without `stop()` (a notebook cell run twice rebinds the name) stops when
it is garbage collected.
"""

from __future__ import annotations

import atexit
import collections
import importlib.util
import os
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

from ..client import Client, LaunchError, OpenEnvError
from ..client.spaces import SERVER_TOKEN_VARIABLE
from ..options import option_flags, option_text
from ..progress import Waiting
from ..servers import ANNOUNCE_PREFIX, ServeOptions, get_bundled_server

__all__ = ["EmbeddedServer", "shared_embedded_server", "stop_embedded_servers"]

#: How to reach a server instead of starting one, in Python and on the command line (both meet these errors).
_ELSEWHERE = "base_url=, base_urls= or space= in Python; --base-url on the command line"


class EmbeddedServer:
    """A bundled server running in a child process of this Python process.

    Args:
        name: a bundled server (see `openenv_lab.servers.BUNDLED_SERVERS`), e.g. ``"chess"``.
        max_sessions: concurrent sessions the server accepts (default: the server's own, 64 for chess).
        port: port to listen on; 0 (the default) picks a free one at each start.
        startup_timeout: seconds to wait for the server to become healthy.
        host: the address to bind (default loopback; another one needs ``token``, or the server makes
            one up that this object does not know).
        token: the token every request must carry, wherever the server is bound (`headers` has it); it
            reaches the server through its environment, never its command line.
        progress: show a start that lasts more than a couple of seconds (see `openenv_lab.progress`;
            by default where someone watches: a terminal or a notebook).
        serve_options: how the server process runs: its log level, message and session limits
            (`openenv_lab.servers.ServeOptions`; default: the server's own).
        **options: the server's options (e.g. ``opponent="minimax"`` for chess).

    Example:
        >>> from openenv_lab.launch import EmbeddedServer
        >>> with EmbeddedServer("chess") as server:  # doctest: +ELLIPSIS
        ...     server.base_url
        'http://127.0.0.1:...'
    """

    def __init__(
        self,
        name: str,
        *,
        max_sessions: int | None = None,
        port: int = 0,
        startup_timeout: float = 60.0,
        host: str = "127.0.0.1",
        token: str | None = None,
        progress: bool | None = None,
        serve_options: ServeOptions | None = None,
        **options: Any,
    ) -> None:
        spec = get_bundled_server(name)
        known = {option.name: option for option in spec.options}
        unknown = set(options) - set(known)
        if unknown:
            raise ValueError(
                f"The {name} server has no option(s) {sorted(unknown)}; it takes {sorted(known)}"
            )
        self.name = name
        self.options = dict(options)
        self.max_sessions = max_sessions
        self.port = port
        self.startup_timeout = startup_timeout
        self.host = host
        self.token = token
        self.progress = progress
        self.serve_options = serve_options or ServeOptions()
        self.base_url: str | None = None
        self._process: subprocess.Popen[str] | None = None
        self._owner_pid = os.getpid()
        self._log: collections.deque[str] = collections.deque(maxlen=200)
        self._announced = threading.Event()
        self._announced_url: list[str] = []
        self._reader: threading.Thread | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def running(self) -> bool:
        """Whether the server process is alive (in a forked child: whether the parent started it)."""
        if self._process is None:
            return False
        if os.getpid() != self._owner_pid:
            return self.base_url is not None
        return self._process.poll() is None

    def command(self) -> list[str]:
        """The command line that starts the server."""
        args = [sys.executable, "-m", "openenv_lab", "serve", self.name, "--host", self.host]
        args += ["--port", str(self.port), "--announce", "--exit-with-parent"]
        if self.token is not None:
            args.append("--token-from-env")
        if self.max_sessions is not None:
            args += ["--max-sessions", str(self.max_sessions)]
        args += self.serve_options.flags()
        args += option_flags(self.options)
        return args

    def start(self) -> str:
        """Start the server (if it is not running) and return its base URL once it is healthy."""
        if self.running and self.base_url is not None:
            return self.base_url
        if importlib.util.find_spec("openenv") is None:
            raise LaunchError(
                f"The embedded {self.name} server needs the openenv package, which this install has not "
                "(a client-only install: requirements-client.txt). Reach a server running elsewhere "
                f"({_ELSEWHERE}), or install openenv-lab with its dependencies (pip install openenv-lab) "
                "to run one here."
            )
        needs = get_bundled_server(self.name).missing()
        if needs is not None:
            raise LaunchError(f"{needs} to run it here, or reach one running elsewhere ({_ELSEWHERE}).")
        started = time.monotonic()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if self.token is not None:
            env[SERVER_TOKEN_VARIABLE] = self.token
        self._announced.clear()
        self._log.clear()
        self._process = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",  # odd bytes in the server's output must not stop us reading it
            bufsize=1,
            env=env,
            start_new_session=sys.platform != "win32",  # Ctrl+C in the parent must not kill it mid-use
        )
        self._owner_pid = os.getpid()
        # Neither the reader thread nor the finalizer holds `self`: a dropped server can be collected.
        self._finalizer = weakref.finalize(self, _abandon, self._process, self._owner_pid)
        self._announced_url.clear()
        try:
            self._reader = threading.Thread(
                target=_read_output,
                args=(self._process, self._log, self._announced, self._announced_url),
                daemon=True,
            )
            self._reader.start()
            what = f"the embedded {self.name} server to start"
            with Waiting(what, self.startup_timeout, progress=self.progress) as waiting:
                while not self._announced.wait(0.05):
                    if self._process.poll() is not None:
                        self._fail(f"exited with status {self._process.returncode} while starting")
                    if time.monotonic() - started > self.startup_timeout:
                        self._fail(f"did not start listening within {self.startup_timeout:g} s")
                    waiting.tick()
            self.base_url = self._announced_url[0]
            remaining = max(1.0, self.startup_timeout - (time.monotonic() - started))
            try:
                with Client(self.base_url, headers=self.headers) as client:
                    client.wait_until_healthy(remaining)
            except OpenEnvError:
                self._fail(f"did not become healthy within {self.startup_timeout:g} s")
        except BaseException:
            self.stop(timeout=1.0)  # interrupted (Ctrl+C) or failed: leave nothing running
            raise
        return self.base_url

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server: close its input (it shuts down gracefully), then terminate, then kill."""
        process, self._process = self._process, None
        self.base_url = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if process is None or os.getpid() != self._owner_pid:
            return
        if process.poll() is None:
            try:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                process.terminate()
                try:
                    process.wait(3.0)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()

    @property
    def headers(self) -> dict[str, str] | None:
        """What every request to this server must carry (its token), for ``headers=`` of a client."""
        return None if self.token is None else {"Authorization": f"Bearer {self.token}"}

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        """The server process's exit status once it has exited (negative: killed by that signal)."""
        return self._process.poll() if self._process is not None else None

    def exited(self, timeout: float = 0.0) -> bool:
        """Whether the server process has exited, waiting up to ``timeout`` seconds for it to do so."""
        process = self._process
        if process is None:
            return True
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def logs(self) -> str:
        """The last lines the server printed (its errors and warnings)."""
        return "\n".join(self._log)

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.base_url if self.running else "stopped"
        return f"<EmbeddedServer {self.name} {state}>"

    def _fail(self, what: str) -> None:
        if self._reader is not None:
            # Let the reader drain what an exited process printed (it ends at end-of-file).
            self._reader.join(timeout=2.0 if self._process and self._process.poll() is not None else 0.2)
        log = self.logs().strip()
        self.stop(timeout=1.0)
        raise LaunchError(
            f"The embedded {self.name} server {what}."
            + (f" {_gist(log)}" if log else " It printed nothing.")
            + f"\nCommand: {' '.join(self.command())}"
        )


def _read_output(
    process: subprocess.Popen[str], log: collections.deque[str], announced: threading.Event, url: list[str]
) -> None:
    """Read the server's output until it ends: its announced URL, then its log lines."""
    assert process.stdout is not None
    try:
        for line in process.stdout:
            line = line.rstrip("\n")
            if not announced.is_set() and line.startswith(ANNOUNCE_PREFIX):
                url.append(line.split(maxsplit=1)[1])
                announced.set()
            else:
                log.append(line)
    except (OSError, ValueError):
        pass  # the pipe was closed by stop()


def _abandon(process: subprocess.Popen[str], owner_pid: int) -> None:
    """Stop the process of a server that was garbage collected while running, without blocking."""
    if os.getpid() != owner_pid or process.poll() is not None:
        return
    try:
        if process.stdin is not None:
            process.stdin.close()  # the server exits by itself when its input closes
    except OSError:
        pass

    def reap() -> None:
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    threading.Thread(target=reap, daemon=True).start()


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _gist(log: str) -> str:
    """What a server's output says went wrong: argparse's error line, a traceback's last line (the
    exception), or else the end of the output."""
    lines = log.splitlines()
    refused = [line for line in lines if ": error: " in line]
    if refused:
        return f"It said: {refused[-1]}"
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        return f"It raised {lines[-1].strip()}\nIts output ended with:\n{_tail(log, 12)}"
    return f"Its output ended with:\n{_tail(log)}"


_shared: dict[tuple[str, int | None, tuple[tuple[str, Any], ...]], EmbeddedServer] = {}
_shared_lock = threading.Lock()


def shared_embedded_server(
    name: str, *, max_sessions: int | None = None, progress: bool | None = None, **options: Any
) -> EmbeddedServer:
    """The process-wide embedded server for ``name`` and these options, started on first use (showing a
    start that lasts, as `EmbeddedServer`'s ``progress`` says)."""
    written = sorted((option, option_text(value)) for option, value in options.items())  # dicts as JSON
    key = (name, max_sessions, tuple(written))
    with _shared_lock:
        server = _shared.get(key)
        if server is None or not server.running:
            if server is not None:
                server.stop()  # it died: release its pipes before starting a new one
            server = EmbeddedServer(name, max_sessions=max_sessions, progress=progress, **options)
            server.start()
            _shared[key] = server
        return server


def stop_embedded_servers() -> None:
    """Stop every shared embedded server of this process (also done at interpreter exit)."""
    with _shared_lock:
        servers = list(_shared.values())
        _shared.clear()
    for server in servers:
        server.stop()


atexit.register(stop_embedded_servers)
