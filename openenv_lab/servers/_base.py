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

A step that runs longer than the server's step time limit (`ServerEnvironment.step_timeout`, the ``serve``
flag ``--step-timeout``, 600 s unless set) ends its session: the client gets an error whose code is
``STEP_TIMEOUT`` (on HTTP, a 504) and, on a WebSocket, a close. A thread cannot be stopped from outside,
so the step itself runs on until it returns; the environment is closed then, on that thread, never
while it steps.

Importing this module imports ``openenv``'s server framework (without Gradio, see `import_openenv_server`);
only server processes and tests do that.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ClassVar

from ._app import import_openenv_server
from ._limits import DEFAULT_STEP_TIMEOUT, StepTimeLimitExceeded, end_connection

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
    #: Seconds a step may run before its session is ended (None: no limit); set for the whole process by
    #: ``serve --step-timeout``. Applies to steps on worker threads (not ``inline_steps``).
    step_timeout: ClassVar[float | None] = DEFAULT_STEP_TIMEOUT
    #: Bytes of the longest reply the server sends (None: no limit), for environments that know a
    #: reply's size before they make it (`check_reply_size`); set for the process by ``--max-reply-bytes``.
    max_reply_bytes: ClassVar[int | None] = None
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
        step = self._step_thread.submit(self.step, action)
        waited = asyncio.wrap_future(step)
        limit = self.step_timeout
        if limit is None:
            return await waited
        # One timer per step (cheaper than asyncio.wait_for's task and shield): it cancels the wait, not
        # the step, which no one can stop; a cancellation of ours is told apart by `overran`.
        overran = []
        timer = asyncio.get_running_loop().call_later(limit, lambda: overran.append(waited.cancel()))
        try:
            return await waited
        except asyncio.CancelledError:
            if not overran:
                raise
        finally:
            timer.cancel()
        overrun = StepTimeLimitExceeded(limit)
        await self.end_after_overrun(step, overrun)
        raise overrun

    async def end_after_overrun(self, step: Future[Any], overrun: StepTimeLimitExceeded) -> None:
        """End the session whose ``step`` ran past the limit: its connection closes with ``overrun``'s
        error (on a WebSocket), and the environment is closed when the step returns, on its thread."""
        close = self.close
        self.close = lambda: step.add_done_callback(lambda _: close())  # type: ignore[method-assign]
        await end_connection(overrun.data(), "step ran past the server's --step-timeout")

    def check_reply_size(self, size: int, what: str) -> None:
        """Refuse (a `ValueError`, before any work) a request whose replies would be ``size`` bytes, more
        than the server sends; ``what`` says what makes them that large."""
        limit = self.max_reply_bytes
        if limit is not None and size > limit:
            raise ValueError(
                f"{what} makes replies of about {size:,} bytes, more than this server sends ({limit:,}, "
                "its --max-reply-bytes): ask for smaller observations, or run the server with a larger "
                "--max-reply-bytes"
            )

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
