"""`SpaceServer`: an OpenEnv server running as a Hugging Face Space, woken up and waited for.

A Space that nobody used for a while sleeps; the first request wakes it, and it answers ``/health`` once
its container is up (tens of seconds to minutes). `SpaceServer.start` polls until then, showing the wait
once it lasts (`openenv_lab.progress`), and says what happened when it gives up: asleep or still
building (HTTP 502/503/504, or a request the Hub took but did not answer in time) after how long, gone
or private (HTTP 404: the Hub answers so for a private Space without a token), or a token refused (HTTP
401/403). No answer at all (a name that does not resolve, connections refused or dropped) is not a Space
waking up but a machine that cannot reach the Hub: that fails within the connect timeout, saying so.

Example:
    >>> from openenv_lab.launch import SpaceServer
    >>> SpaceServer("openenv/echo_env").base_url
    'https://openenv-echo-env.hf.space'
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from ..client import Client, ConnectError, OpenEnvError, ProtocolError, Timeouts
from ..client.spaces import space_headers, space_url
from ..progress import Waiting

__all__ = ["SpaceServer"]

_WAKING = (502, 503, 504)


class SpaceServer:
    """The Space ``owner/name`` as a launcher: ``start`` returns its URL once it answers ``/health``.

    Args:
        space: ``"owner/name"``.
        token: the Hugging Face token (default ``$HF_TOKEN``; ``False`` sends none).
        headers: more headers for every request.
        wake_timeout: seconds to wait for a sleeping or building Space.
        connect_timeout: seconds of no answer at all (nothing reached the Hub) before giving up.
        progress: show a wait that lasts (see `openenv_lab.progress`; by default where someone watches).
    """

    def __init__(
        self,
        space: str,
        *,
        token: str | bool | None = None,
        headers: dict[str, str] | None = None,
        wake_timeout: float = 300.0,
        connect_timeout: float = 10.0,
        progress: bool | None = None,
    ) -> None:
        self.space = space
        self.base_url = space_url(space)
        self.headers = space_headers(token, headers)
        self.wake_timeout = float(wake_timeout)
        self.connect_timeout = float(connect_timeout)
        self.progress = progress

    def start(self) -> str:
        started = time.monotonic()
        last = "no answer yet"
        silent_since: float | None = None  # when the run of attempts that reached nothing began
        timeouts = Timeouts(connect=min(10.0, self.connect_timeout), request=10.0)
        with (
            Client(self.base_url, timeouts=timeouts, headers=self.headers) as client,
            Waiting(
                f"the Space {self.space} to wake up", self.wake_timeout, progress=self.progress
            ) as waiting,
        ):
            while True:
                try:
                    if client.health().get("status") == "healthy":
                        return self.base_url
                    last, silent_since = "its /health did not say healthy", None
                except (ProtocolError, ConnectError) as exc:
                    if exc.status == 404:
                        raise ConnectError(self._gone(), url=self.base_url) from None
                    if exc.status in (401, 403):
                        raise ConnectError(
                            f"The Space {self.space} refused the token (HTTP {exc.status}): pass a token "
                            "that can read it (token=..., or $HF_TOKEN)",
                            url=self.base_url,
                            status=exc.status,
                        ) from None
                    if isinstance(exc, ProtocolError) and exc.status not in _WAKING:
                        raise
                    if exc.status is None:  # nothing answered: the network, not the Space
                        silent_since = silent_since if silent_since is not None else time.monotonic()
                        if time.monotonic() - silent_since >= self.connect_timeout:
                            raise ConnectError(self._unreachable(), url=self.base_url) from None
                        last = "no answer"
                    else:
                        last, silent_since = f"HTTP {exc.status}", None
                except OpenEnvError as exc:  # connected, but no answer in time: a Space starting up
                    last, silent_since = type(exc).__name__, None
                waited = time.monotonic() - started
                if waited >= self.wake_timeout:
                    raise ConnectError(
                        f"The Space {self.space} ({self.base_url}) did not wake up within {waited:.0f} s "
                        f"(last answer: {last}). It may be asleep and still starting, building, or paused "
                        "by its owner: open its page on the Hub, or wait longer (wake_timeout=...).",
                        url=self.base_url,
                    )
                waiting.tick(last)
                pause = 0.5 if silent_since is not None else min(2.0, max(0.05, self.wake_timeout / 50))
                time.sleep(pause)

    def _unreachable(self) -> str:
        host = urlsplit(self.base_url).hostname
        return (
            f"The Hugging Face Hub cannot be reached from this machine: nothing at {host} answered for "
            f"{self.connect_timeout:g} s (the name did not resolve, or connections were refused or dropped). "
            "Check this machine's network (a proxy or a firewall?), pass base_url= to an OpenEnv server "
            'you can reach, or run the Space\'s image here with launcher="docker" and trust_remote_code=True.'
        )

    def _gone(self) -> str:
        private = "" if "Authorization" in self.headers else ", or it is private and no token was sent"
        return (
            f"The Space {self.space} was not found at {self.base_url} (HTTP 404): check its name{private} "
            "(token=..., or $HF_TOKEN)"
        )

    def stop(self) -> None:
        pass  # the Space is not ours to stop

    def __repr__(self) -> str:
        return f"<SpaceServer {self.space} {self.base_url}>"
