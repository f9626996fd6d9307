"""What our servers' environments share: openenv's model classes, metadata, state, and where steps run.

Importing this module imports ``openenv``'s server framework (without Gradio, see `import_openenv_server`);
only server processes and tests do that.
"""

from __future__ import annotations

import asyncio
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
    """Base class of our environments: concurrent sessions, metadata, ``state``, and inline steps.

    Subclasses set `NAME` and `describe()`, keep their state in ``self._state``, and say with
    `step_in_thread` whether a step may be slow. Quick steps run on the server's event loop: the hop to
    the session's worker thread and back costs about as much as a whole chess or Atari step, and those
    steps hold the GIL anyway, so threads would not overlap them. Slow
    steps (a chess engine thinking) run in a worker thread so other sessions' traffic keeps moving.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True
    NAME: ClassVar[str] = ""
    _state: Any

    def describe(self) -> str:
        """One sentence for ``GET /metadata``."""
        return f"The {self.NAME} environment of openenv_lab"

    def step_in_thread(self) -> bool:
        """Whether the next step may take long enough to run in a worker thread (default: no)."""
        return False

    def get_metadata(self) -> Any:
        from ..version import __version__

        return EnvironmentMetadata(
            name=self.NAME, description=self.describe(), version=__version__, author="openenv_lab"
        )

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if self.step_in_thread():
            return await asyncio.get_running_loop().run_in_executor(None, self.step, action)
        return self.step(action)

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
