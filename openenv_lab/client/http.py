"""HTTP calls to an OpenEnv server that need no session: health, schema, metadata and env-specific routes.

`Client` is the handle on one server. It answers questions about the server over plain HTTP
(``GET /health``, ``/schema``, ``/metadata``, ``/capacity`` on our own servers, and any other GET route
such as FinRL's ``/config``) and opens `Session` objects for episodes. Episodes never go over HTTP:
OpenEnv's ``POST /reset`` and ``/step`` build a fresh environment per request.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import ssl
import time
from collections.abc import Iterator
from typing import Any

from ..optional_imports import hidden_module
from ._config import Keepalive, Timeouts
from ._urls import http_url, is_loopback
from .errors import (
    ConnectError,
    OpenEnvError,
    ProtocolError,
    ServerError,
    Timeout,
    connect_timeout,
    http_status_error,
    unreachable,
)
from .session import Session


def _preview(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


with hidden_module("click"):  # httpx's command-line tool (click, rich, pygments): never used
    import httpx

__all__ = ["Client"]


class Client:
    """A handle on one OpenEnv server: HTTP information calls, and `Session` objects for episodes.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8000"``.
        timeouts: used for every HTTP call and passed on to the sessions it opens.
        keepalive: passed on to the sessions it opens.
        headers: sent with every HTTP request and WebSocket upgrade (e.g. a Bearer token).

    Example:
        >>> from openenv_lab.client import Client
        >>> from openenv_lab.launch import shared_embedded_server
        >>> url = shared_embedded_server("chess").base_url
        >>> with Client(url) as server:
        ...     server.health()["status"]
        ...     sorted(server.schema()["action"]["properties"])
        'healthy'
        ['metadata', 'move']
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeouts: Timeouts | float | None = None,
        keepalive: Keepalive | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.base_url = http_url(base_url)
        self.timeouts = Timeouts.of(timeouts)
        self.keepalive = keepalive
        self.headers = dict(headers or {})
        self._http: httpx.Client | None = None  # made on first use: many users only open sessions
        self._mcp_id = 0
        self._task_env_name: str | None = None
        self._remembered: dict[tuple[str, str], Any] | None = None  # GET answers, inside `remembering`

    def health(self) -> dict[str, Any]:
        """``GET /health``: ``{"status": "healthy"}`` when the server is up."""
        return self._object("/health")

    def schema(self) -> dict[str, Any]:
        """``GET /schema``: JSON Schemas of the ``action``, ``observation`` and ``state`` models."""
        return self._object("/schema")

    def metadata(self) -> dict[str, Any]:
        """``GET /metadata``: the environment's ``name``, ``description``, ``version``..."""
        return self._object("/metadata")

    def capacity(self) -> dict[str, Any] | None:
        """``GET /capacity`` on openenv_lab servers: ``{"active_sessions", "max_sessions", "batch_route"}``
        (the last names the route where one WebSocket carries many sessions, ``/ws/batch``).

        Returns ``None`` for servers without that route (the official ones), whose limit is only
        discovered by opening sessions, and for an answer without the two counts.
        """
        try:
            answer = self._object("/capacity")
        except ProtocolError:
            return None
        counts = [answer.get("active_sessions"), answer.get("max_sessions")]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
            return None  # not the counts our servers report: read as a server that reports none
        return answer

    def _object(self, path: str) -> dict[str, Any]:
        """``GET path``, which must answer a JSON object (else `ProtocolError`)."""
        answer = self.get(path)
        if not isinstance(answer, dict):
            raise ProtocolError(
                f"{self.base_url}{path} answered {_preview(answer)}, not a JSON object: is it an OpenEnv "
                "server?",
                url=self.base_url,
            )
        return answer

    def get(self, path: str, **params: Any) -> Any:
        """``GET`` any JSON route of the server (e.g. ``"/config"`` on FinRL servers)."""
        return self._get(path, params or None)

    def post(self, path: str, body: Any) -> Any:
        """``POST`` a JSON body to any route of the server, and return the JSON it answers."""
        return self._get(path, None, body=body)

    def identity(self) -> dict[str, Any]:
        """What makes two servers the same environment, for comparing results: the ``name`` and
        ``version`` of ``/metadata`` (``None`` where absent) and ``schema_sha256``, the SHA-256 of
        ``/schema`` as JSON with sorted keys (the action, observation and state models)."""
        metadata = self.metadata()
        schema = json.dumps(self.schema(), sort_keys=True)
        return {
            "name": metadata.get("name"),
            "version": metadata.get("version"),
            "schema_sha256": hashlib.sha256(schema.encode()).hexdigest(),
        }

    def names(self) -> list[str]:
        """What the server calls itself: its ``/metadata`` name, then its environment names
        (``GET /list_environments``, openenv 0.10's task API) where it has the route."""
        names = [str(self.metadata().get("name", ""))]
        try:
            listed = self.get("/list_environments")
        except ProtocolError:
            listed = []
        names += [str(name) for name in listed if isinstance(name, str)] if isinstance(listed, list) else []
        return [name for name in names if name]

    # ------------------------------------------------------------------ openenv 0.10's task API

    def splits(self) -> list[dict[str, Any]]:
        """``GET /{env}/splits``: the task splits (``{"name", "type"}``), or ``[]`` when the server offers
        no tasks (no such route, or the environment does not implement it: HTTP 404 or 501)."""
        try:
            answer = self.get(f"/{self._task_env()}/splits")
        except ProtocolError as exc:
            if exc.status in (404, 501):
                return []
            raise
        return [split for split in answer if isinstance(split, dict)] if isinstance(answer, list) else []

    def tasks(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        """The task specs of ``split`` (``POST /{env}/tasks``), or of ``[start, stop)`` of it
        (``/{env}/task_range``)."""
        if start is None and stop is None:
            answer = self.post(f"/{self._task_env()}/tasks", {"split": split})
        else:
            answer = self.post(
                f"/{self._task_env()}/task_range", {"split": split, "start": start, "stop": stop}
            )
        tasks = answer.get("tasks") if isinstance(answer, dict) else None
        if not isinstance(tasks, list):
            raise ProtocolError(
                f"{self.base_url} answered {answer!r} for the tasks of {split!r}", url=self.base_url
            )
        return tasks

    def num_tasks(self, split: str) -> int:
        """``POST /{env}/num_tasks``: how many tasks ``split`` holds."""
        return int(self.post(f"/{self._task_env()}/num_tasks", {"split": split})["num_tasks"])

    def task(self, split: str, index: int) -> Any:
        """``POST /{env}/task``: the task spec at ``index`` of ``split``."""
        return self.post(f"/{self._task_env()}/task", {"split": split, "index": index})["task"]

    def _task_env(self) -> str:
        """The ``{env}`` of the task routes: the first name ``/list_environments`` gives, else /metadata's."""
        if self._task_env_name is None:
            try:
                listed = self.get("/list_environments")
            except ProtocolError:
                listed = None
            if isinstance(listed, list) and listed and isinstance(listed[0], str):
                self._task_env_name = listed[0]
            else:
                self._task_env_name = str(self.metadata().get("name", "env"))
        return self._task_env_name

    def mcp(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One JSON-RPC call to the server's ``POST /mcp`` (``"tools/list"``, ``"tools/call"``...): its
        ``result``, or the `ServerError` its ``error`` says (code ``MCP <number>``)."""
        self._mcp_id += 1
        reply = self.post(
            "/mcp", {"jsonrpc": "2.0", "id": self._mcp_id, "method": method, "params": params or {}}
        )
        if not isinstance(reply, dict):
            raise ProtocolError(
                f"{self.base_url}/mcp answered {reply!r}, not a JSON-RPC reply", url=self.base_url
            )
        error = reply.get("error")
        if isinstance(error, dict):
            message = str(error.get("message", ""))
            raise ServerError(
                f"The server at {self.base_url} answered {method} with MCP error {error.get('code')}: "
                f"{message}",
                code=f"MCP {error.get('code')}",
                server_message=message,
                details={"data": error.get("data")},
                url=self.base_url,
            )
        return reply.get("result")

    @contextlib.contextmanager
    def remembering(self) -> Iterator[Client]:
        """Within the block, a GET asked again is answered from the first answer (its JSON copied, so a
        caller that edits it changes nothing): setting up sixteen adapters of one server reads its
        ``/schema`` once, not sixteen times. Errors are not remembered."""
        outer = self._remembered
        self._remembered = {} if outer is None else outer
        try:
            yield self
        finally:
            self._remembered = outer

    def _get(
        self, path: str, params: dict[str, Any] | None, timeout: float | None = None, body: Any = None
    ) -> Any:
        if self._remembered is None or body is not None:
            return self._fetch(path, params, timeout, body)
        key = (path, json.dumps(params, sort_keys=True, default=str))
        if key not in self._remembered:
            self._remembered[key] = self._fetch(path, params, timeout, body)
        return copy.deepcopy(self._remembered[key])

    def _fetch(
        self, path: str, params: dict[str, Any] | None, timeout: float | None = None, body: Any = None
    ) -> Any:
        url = self.base_url + "/" + path.lstrip("/")
        if self._http is None:
            self._http = httpx.Client(
                timeout=httpx.Timeout(self.timeouts.request, connect=self.timeouts.connect),
                headers=self.headers,
                verify=_ssl_context(),
                trust_env=not is_loopback(self.base_url),
            )
        try:
            if body is None:
                response = self._http.get(url, params=params, timeout=timeout or httpx.USE_CLIENT_DEFAULT)
            else:
                response = self._http.post(url, json=body, timeout=timeout or httpx.USE_CLIENT_DEFAULT)
        except httpx.ConnectTimeout:
            raise connect_timeout(url, self.timeouts) from None
        except httpx.TimeoutException:
            raise Timeout(f"{url} did not answer within {self.timeouts.request:g} s.", url=url) from None
        except httpx.TransportError as exc:
            raise unreachable(url, str(exc)) from None
        if response.status_code >= 400:
            raise http_status_error(url, response.status_code, response.text)
        try:
            return response.json()
        except ValueError:
            raise ProtocolError(
                f"{url} did not answer with JSON (got {response.text[:100]!r}); is it an OpenEnv server?",
                url=url,
            ) from None

    def wait_until_healthy(self, timeout: float = 30.0, *, interval: float = 0.05) -> None:
        """Poll ``/health`` until the server answers, or raise `ConnectError` after ``timeout`` seconds.

        Any failure (refused, slow, 503 while starting) is retried until the deadline; each attempt
        waits at most what is left of ``timeout``.
        """
        deadline = time.monotonic() + timeout
        last: OpenEnvError | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                answer = self._get("/health", None, timeout=max(0.05, min(remaining, 5.0)))
                if isinstance(answer, dict) and answer.get("status") == "healthy":
                    return
            except OpenEnvError as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise ConnectError(
                    f"{self.base_url} did not become healthy within {timeout:g} s"
                    + (f" (last error: {last})" if last else ""),
                    url=self.base_url,
                )
            time.sleep(interval)

    def session_state(self, **reset_kwargs: Any) -> dict[str, Any]:
        """What one instance of the environment says of itself: a short session is opened, reset with
        ``reset_kwargs``, asked for its ``state`` and closed. OpenEnv's HTTP ``/state`` carries only the
        base fields (``episode_id``, ``step_count``); a session's state has the environment's own (an
        OpenSpiel game's name, a dm_control task's action spec). Remembered within `remembering`."""
        key = ("session state", json.dumps(reset_kwargs, sort_keys=True, default=str))
        if self._remembered is not None and key in self._remembered:
            return copy.deepcopy(self._remembered[key])
        with self.session() as session:
            session.reset(**reset_kwargs)
            state = session.state()
        if self._remembered is not None:
            self._remembered[key] = copy.deepcopy(state)
        return state

    def session(self, **kwargs: Any) -> Session:
        """Open a new `Session` with this client's timeouts, keepalive and headers."""
        kwargs.setdefault("timeouts", self.timeouts)
        kwargs.setdefault("keepalive", self.keepalive)
        kwargs.setdefault("headers", self.headers or None)
        return Session(self.base_url, **kwargs)

    def close(self) -> None:
        """Close the HTTP connection pool. Sessions opened from this client stay open."""
        if self._http is not None:
            self._http.close()
            self._http = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Client {self.base_url}>"


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One certificate store per process: loading it costs far more than a request."""
    return httpx.create_ssl_context()
