"""What our servers' environments share: openenv's model classes, metadata, state, and where steps run.

Where steps run decides whether one session can stall the others. A step on the server's event loop holds
up every session of the server (and ``/health``, and the WebSocket pings) until it returns, however cheap
the session's steps were before. So every step runs on a worker thread of its session (``/ws``) or of its
connection (``/ws/batch``, where one hop carries the whole batch), as the official server's do: a step
that is slow for a reason nobody predicted stalls only its own session. The hop costs about 70 to 170
microseconds per message on 2 cores (``benchmarks/isolation.py`` measures what it does to steps per
second); a server whose every environment is
trusted to be cheap can run steps on the loop instead (`ServerEnvironment.inline_steps`, the ``serve``
flag ``--inline-steps``). Resets run on worker threads too (the framework's).

Importing this module imports ``openenv``'s server framework (without Gradio, see `import_openenv_server`);
only server processes and tests do that.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from ._app import import_openenv_server

_env_server = import_openenv_server()

Action = _env_server.Action
Observation = _env_server.Observation
State = _env_server.State
Environment = _env_server.Environment
EnvironmentMetadata = _env_server.types.EnvironmentMetadata

__all__ = ["Action", "Environment", "Observation", "ServerEnvironment", "State"]


class ServerEnvironment(Environment):
    """Base class of our environments: concurrent sessions, metadata, ``state``, and where steps run.

    Subclasses set `NAME` and `describe()` and keep their state in ``self._state``. Steps run on a worker
    thread of the session (see the module's docstring): a slow one stalls only its own session.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True
    NAME: ClassVar[str] = ""
    #: Run steps on the event loop (every session stalls while one steps): for servers whose every
    #: environment is known to be cheap; set for the whole process by ``serve --inline-steps``.
    inline_steps: ClassVar[bool] = False
    _state: Any
    _step_thread: ThreadPoolExecutor | None = None

    def describe(self) -> str:
        """One sentence for ``GET /metadata``."""
        return f"The {self.NAME} environment of openenv_lab"

    def get_metadata(self) -> Any:
        from ..version import __version__

        return EnvironmentMetadata(
            name=self.NAME, description=self.describe(), version=__version__, author="openenv_lab"
        )

    def step_waits_elsewhere(self) -> bool:
        """Whether the next step mostly waits on something outside Python (an engine process): in a
        ``/ws/batch`` message such steps run side by side, each on its session's thread, rather than one
        after another on the connection's (default: no)."""
        return False

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if self.inline_steps:
            return self.step(action)
        if self._step_thread is None:
            self._step_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.NAME}-steps")
        return await asyncio.get_running_loop().run_in_executor(self._step_thread, self.step, action)

    def __del__(self) -> None:
        thread = self.__dict__.get("_step_thread")
        if thread is not None:
            thread.shutdown(wait=False)  # an idle worker exits; a busy one when its step returns

    @property
    def state(self) -> Any:
        return self._state

    def _update_state(self, **fields: Any) -> None:
        """Set fields of ``self._state`` to values we computed, without pydantic re-validating them.

        OpenEnv's ``State`` validates every assignment (``validate_assignment``), a noticeable share of
        the server's work for a cheap step. Our values already have the declared types, so they go
        straight into the model's field storage, as a validated assignment would leave them.
        """
        self._state.__dict__.update(fields)
