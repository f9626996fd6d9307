"""`SpaceServer`: an OpenEnv server running as a Hugging Face Space, woken up and waited for.

A Space that nobody used for a while sleeps; the first request wakes it, and it answers ``/health`` once
its container is up (tens of seconds to minutes). `SpaceServer.start` polls until then, and says what
happened when it gives up: asleep or still building (HTTP 502/503/504 or no answer) after how long,
gone or private (HTTP 404: the Hub answers so for a private Space without a token), or a token refused
(HTTP 401/403).

Example:
    >>> from openenv_lab.launch import SpaceServer
    >>> SpaceServer("openenv/echo_env").base_url
    'https://openenv-echo-env.hf.space'
"""

from __future__ import annotations

import time

from ..client import Client, ConnectError, OpenEnvError, ProtocolError, Timeouts
from ..client.spaces import space_headers, space_url

__all__ = ["SpaceServer"]

_WAKING = (502, 503, 504)


class SpaceServer:
    """The Space ``owner/name`` as a launcher: ``start`` returns its URL once it answers ``/health``.

    Args:
        space: ``"owner/name"``.
        token: the Hugging Face token (default ``$HF_TOKEN``; ``False`` sends none).
        headers: more headers for every request.
        wake_timeout: seconds to wait for a sleeping or building Space.
    """

    def __init__(
        self,
        space: str,
        *,
        token: str | bool | None = None,
        headers: dict[str, str] | None = None,
        wake_timeout: float = 300.0,
    ) -> None:
        self.space = space
        self.base_url = space_url(space)
        self.headers = space_headers(token, headers)
        self.wake_timeout = float(wake_timeout)

    def start(self) -> str:
        started = time.monotonic()
        last = "no answer yet"
        with Client(
            self.base_url, timeouts=Timeouts(connect=10.0, request=10.0), headers=self.headers
        ) as client:
            while True:
                try:
                    if client.health().get("status") == "healthy":
                        return self.base_url
                    last = "its /health did not say healthy"
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
                    last = f"HTTP {exc.status}" if exc.status else type(exc).__name__
                except OpenEnvError as exc:  # refused, unreachable, slow: a Space waking up looks like this
                    last = type(exc).__name__
                waited = time.monotonic() - started
                if waited >= self.wake_timeout:
                    raise ConnectError(
                        f"The Space {self.space} ({self.base_url}) did not wake up within {waited:.0f} s "
                        f"(last answer: {last}). It may be asleep and still starting, building, or paused "
                        "by its owner: open its page on the Hub, or wait longer (wake_timeout=...).",
                        url=self.base_url,
                    )
                time.sleep(min(2.0, max(0.05, self.wake_timeout / 50)))

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
