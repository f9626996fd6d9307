"""Embedded servers: our bundled OpenEnv servers in a child process on 127.0.0.1, started on demand.

This is what makes ``gym.make("openenv/chess")`` work with nothing but pip (Binder, Colab, a laptop):
no Docker, no second terminal. The child runs ``python -m openenv_lab serve NAME --port 0``, binds a
free loopback port, announces it, and is health-checked before use.

Lifetime: one server per (name, options) is shared by every environment of the process
(`shared_embedded_server`); it stops at interpreter exit, and it also stops by itself if this process
dies without running exit handlers (it watches its standard input, whose other end we hold).
"""

from __future__ import annotations

import atexit
import collections
import os
import subprocess
import sys
import threading
import time
from typing import Any

from ..client.errors import LaunchError, OpenEnvError
from ..client.http import Client
from ..servers import get_bundled_server
from ..servers._run import ANNOUNCE_PREFIX

__all__ = ["EmbeddedServer", "shared_embedded_server", "stop_embedded_servers"]


class EmbeddedServer:
    """A bundled server running in a child process of this Python process.

    Args:
        name: a bundled server (see `openenv_lab.servers.BUNDLED_SERVERS`), e.g. ``"chess"``.
        max_sessions: concurrent sessions the server accepts (default: the server's own, 64 for chess).
        startup_timeout: seconds to wait for the server to become healthy.
        **options: the server's options (e.g. ``opponent="minimax"`` for chess).

    Example:
        >>> from openenv_lab.launch import EmbeddedServer
        >>> with EmbeddedServer("chess") as server:                 # doctest: +SKIP
        ...     server.base_url
        'http://127.0.0.1:40123'
    """

    def __init__(
        self,
        name: str,
        *,
        max_sessions: int | None = None,
        startup_timeout: float = 60.0,
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
        self.startup_timeout = startup_timeout
        self.base_url: str | None = None
        self._process: subprocess.Popen[str] | None = None
        self._owner_pid = os.getpid()
        self._log: collections.deque[str] = collections.deque(maxlen=200)
        self._announced = threading.Event()
        self._reader: threading.Thread | None = None

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
        args = [sys.executable, "-m", "openenv_lab", "serve", self.name, "--host", "127.0.0.1"]
        args += ["--port", "0", "--announce", "--exit-with-parent"]
        if self.max_sessions is not None:
            args += ["--max-sessions", str(self.max_sessions)]
        for key, value in self.options.items():
            args += ["--" + key.replace("_", "-"), str(value)]
        return args

    def start(self) -> str:
        """Start the server (if it is not running) and return its base URL once it is healthy."""
        if self.running and self.base_url is not None:
            return self.base_url
        started = time.monotonic()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
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
        try:
            self._reader = threading.Thread(target=self._read_output, args=(self._process,), daemon=True)
            self._reader.start()
            while not self._announced.wait(0.05):
                if self._process.poll() is not None:
                    self._fail(f"exited with status {self._process.returncode} while starting")
                if time.monotonic() - started > self.startup_timeout:
                    self._fail(f"did not start listening within {self.startup_timeout:g} s")
            assert self.base_url is not None
            remaining = max(1.0, self.startup_timeout - (time.monotonic() - started))
            try:
                with Client(self.base_url) as client:
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

    def _read_output(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        try:
            for line in process.stdout:
                line = line.rstrip("\n")
                if not self._announced.is_set() and line.startswith(ANNOUNCE_PREFIX):
                    self.base_url = line.split(maxsplit=1)[1]
                    self._announced.set()
                else:
                    self._log.append(line)
        except (OSError, ValueError):
            pass  # the pipe was closed by stop()

    def _fail(self, what: str) -> None:
        if self._reader is not None:
            # Let the reader drain what an exited process printed (it ends at end-of-file).
            self._reader.join(timeout=2.0 if self._process and self._process.poll() is not None else 0.2)
        log = self.logs().strip()
        self.stop(timeout=1.0)
        raise LaunchError(
            f"The embedded {self.name} server {what}."
            + (f" Its output ended with:\n{_tail(log)}" if log else " It printed nothing.")
            + f"\nCommand: {' '.join(self.command())}"
        )


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


_shared: dict[tuple[str, int | None, tuple[tuple[str, Any], ...]], EmbeddedServer] = {}
_shared_lock = threading.Lock()


def shared_embedded_server(name: str, *, max_sessions: int | None = None, **options: Any) -> EmbeddedServer:
    """The process-wide embedded server for ``name`` and these options, started on first use."""
    key = (name, max_sessions, tuple(sorted(options.items())))
    with _shared_lock:
        server = _shared.get(key)
        if server is None or not server.running:
            if server is not None:
                server.stop()  # it died: release its pipes before starting a new one
            server = EmbeddedServer(name, max_sessions=max_sessions, **options)
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
