"""``/ws/batch``: many sessions over one WebSocket, for vector environments (an openenv_lab extension).

On OpenEnv's ``/ws`` every session is a connection of its own, so a vector step of N sub-environments costs
the server N WebSocket messages, and on a cheap environment the per-message work (framework, envelopes,
the WebSocket itself) is most of a step. Here one connection holds ``sessions=N`` sessions and one
message carries a request for each sub-environment that steps::

    client: {"type": "batch", "data": [{"session": 0, "type": "step", "data": {...}}, ...]}
    server: {"type": "batch", "data": [<the reply /ws would send for each entry, in order>]}

Each entry is a ``reset``, ``step`` or ``state`` request exactly as ``/ws`` takes it, for a session of
the connection (at most one entry per session), and each reply is what ``/ws`` would answer (an
observation, a state, or an error with its code), so the client reads them with the same code. A problem
with the message as a whole (not JSON, not a batch, an unknown or repeated session) is one
``{"type": "error"}`` reply, sent before any entry runs. The sessions are created through the framework's
own session registry, so they count against ``max_sessions`` and show in ``GET /capacity``, and they end
with the connection. ``GET /capacity`` names the route (``"batch_route"``): that is how clients find out
that a server has it. A batch whose requests run past the server's step time limit ends the connection
as a step on ``/ws`` ends its session (`_limits.StepTimeLimitExceeded`); its sessions are destroyed when
the requests return.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect  # resolved by name: FastAPI reads the annotation

from ._limits import StepTimeLimitExceeded, batch_refusal, end_connection

__all__ = ["BATCH_ROUTE", "register_batch_route", "supports_batches"]

BATCH_ROUTE = "/ws/batch"


def supports_batches(server: Any) -> bool:
    """Whether this version of openenv's ``HTTPEnvServer`` has the session registry the route uses."""
    return all(
        hasattr(server, name)
        for name in (
            "_create_session",
            "_destroy_session",
            "_run_in_session_executor",
            "_get_valid_kwargs",
            "_update_session_activity",
            "get_capacity_status",
        )
    )


def register_batch_route(app: Any, server: Any, action_cls: type) -> None:
    """Add ``/ws/batch`` to ``app``, serving the sessions of openenv's ``server`` (an ``HTTPEnvServer``)."""
    from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.serialization import deserialize_action, serialize_observation
    from pydantic import ValidationError
    from pydantic_core import to_json

    from ._base import ServerEnvironment

    sessions_info = getattr(server, "_session_info", {})

    def strict_json(reply: dict[str, Any]) -> str:
        # As /ws writes its replies (pydantic's model_dump_json): infinities and NaN as null, never the
        # Infinity/NaN tokens that strict JSON parsers refuse (a seed of 1e999 echoed in metadata, say).
        return to_json(reply, inf_nan_mode="null").decode()

    def error(message: str, code: str, **extra: Any) -> dict[str, Any]:
        return {"type": "error", "data": {"message": message, "code": code, **extra}}

    async def handle(session_id: str, env: Any, kind: str, data: Any) -> dict[str, Any]:
        """One entry's reply: what ``/ws`` would send for this request."""
        if not isinstance(data, dict) or (kind == "step" and not data):
            problem = 'The request needs a "data" object (the action, for a step)'
            return error(problem, "VALIDATION_ERROR")
        try:
            if kind == "step":
                action = deserialize_action(data, action_cls)
                if type(env).step_async is not Environment.step_async:
                    observation = await env.step_async(action)
                else:
                    observation = await server._run_in_session_executor(session_id, env.step, action)
                touch(session_id, stepped=True)
                reply = {"type": "observation", "data": serialize_observation(observation)}
            elif kind == "reset":
                if type(env).reset_async is not Environment.reset_async:
                    kwargs = server._get_valid_kwargs(inspect.signature(env.reset_async), data)
                    observation = await env.reset_async(**kwargs)
                else:
                    kwargs = server._get_valid_kwargs(inspect.signature(env.reset), data)
                    observation = await server._run_in_session_executor(session_id, env.reset, **kwargs)
                touch(session_id, stepped=False)
                reply = {"type": "observation", "data": serialize_observation(observation)}
            elif kind == "state":
                state = env.state
                reply = {"type": "state", "data": state.model_dump() if hasattr(state, "model_dump") else {}}
            else:
                reply = error(f"Unknown message type: {kind}", "UNKNOWN_TYPE")
            return reply
        except Exception as exc:
            return refusal(exc)

    def refusal(exc: Exception) -> dict[str, Any]:
        """The error reply of a request the environment or the models refused, as ``/ws`` words it."""
        if isinstance(exc, ValidationError):
            errors = json.loads(exc.json(include_url=False))
            return error("Invalid message", "VALIDATION_ERROR", errors=errors)
        return error(str(exc), "EXECUTION_ERROR")

    def ours(env: Any) -> bool:
        """Whether ``env`` steps as our environments do (`step_here` runs its steps). Not one whose class
        puts another ``step_async`` first: the MCP environments' routes their tool calls on the event loop,
        where their MCP session lives, and a plain ``step`` on a thread would wait on that loop forever."""
        return type(env).step_async is ServerEnvironment.step_async

    def step_here(session_id: str, env: Any, data: Any) -> dict[str, Any]:
        """A step of one of our environments, run where this is called: the connection's worker thread (one
        hop for all of a batch's steps), or the event loop for a server started with ``--inline-steps``."""
        if not isinstance(data, dict) or not data:
            return error('The request needs a "data" object (the action, for a step)', "VALIDATION_ERROR")
        try:
            observation = env.step(deserialize_action(data, action_cls))
            touch(session_id, stepped=True)
            return {"type": "observation", "data": serialize_observation(observation)}
        except Exception as exc:
            return refusal(exc)

    def touch(session_id: str, *, stepped: bool) -> None:
        """What the framework's ``_update_session_activity`` does (the time the idle reaper reads, and the
        session's step count), without pydantic validating the two assignments (``SessionInfo`` validates
        each one): a float and a count that only grows go straight into the model's field storage, as
        `ServerEnvironment._update_state` does for our states. A session record of another shape goes
        through the framework's own method."""
        fields = getattr(sessions_info.get(session_id), "__dict__", None)
        if type(fields) is not dict or type(fields.get("step_count")) is not int:
            server._update_session_activity(session_id, increment_step=stepped)
            return
        fields["last_activity_at"] = time.time()
        if stepped:
            fields["step_count"] += 1

    def check(sessions: list[tuple[str, Any]], entries: Any) -> str | None:
        """What is wrong with a batch as a whole (checked before any of it runs), or None."""
        if not isinstance(entries, list):
            return 'A batch\'s "data" must be a list of requests'
        seen = set()
        for k, entry in enumerate(entries):
            index = entry.get("session") if isinstance(entry, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(sessions):
                return f"Entry {k} of the batch names no session of this connection: {entry!r}"[:300]
            if index in seen:
                return f"Session {index} appears twice in the batch; send one request per session"
            seen.add(index)
        return None

    async def run(sessions: list[tuple[str, Any]], entries: list[dict[str, Any]], thread: Any) -> str:
        replies: list[dict[str, Any]] = [{}] * len(entries)
        steps = []  # our environments' steps: one hop to the connection's thread for all of them
        # Requests that leave the event loop otherwise (resets; steps that wait on an engine process, each
        # on its session's thread so that the engines think side by side): run beside them.
        waiting = []
        for k, entry in enumerate(entries):
            session_id, env = sessions[entry["session"]]
            kind, data = entry.get("type"), entry.get("data")
            data = {} if data is None and kind != "step" else data
            if kind == "step" and ours(env) and env.inline_steps:
                replies[k] = step_here(session_id, env, data)
            elif kind == "step" and ours(env) and not env.step_waits_elsewhere():
                steps.append((k, session_id, env, data))
            elif kind == "state":
                replies[k] = await handle(session_id, env, kind, data)  # no suspension: as a plain call
            else:
                waiting.append((k, handle(session_id, env, kind, data)))
        if steps:
            loop = asyncio.get_running_loop()
            stepped = loop.run_in_executor(thread, lambda: [step_here(*step[1:]) for step in steps])
            waiting.append((-1, stepped))
        if waiting:
            gathered = asyncio.gather(*(awaitable for _, awaitable in waiting))
            done = await within_step_timeout(gathered)
            for (k, _), reply in zip(waiting, done, strict=True):
                if k >= 0:
                    replies[k] = reply
                else:  # the steps' replies, in the order they were sent
                    for (index, *_), step_reply in zip(steps, reply, strict=True):
                        replies[index] = step_reply
        return strict_json({"type": "batch", "data": replies})  # one serialisation for the whole batch

    async def within_step_timeout(gathered: asyncio.Future[Any]) -> Any:
        """What ``gathered`` returns, or `_Overran` when it runs past the server's step time limit."""
        limit = ServerEnvironment.step_timeout
        if limit is None:
            return await gathered
        try:
            return await asyncio.wait_for(asyncio.shield(gathered), limit)  # once a batch: cost is small
        except asyncio.TimeoutError:  # Python 3.10's is not the builtin TimeoutError
            raise _Overran(gathered, limit) from None

    @app.websocket(BATCH_ROUTE)
    async def batch_endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        sessions: list[tuple[str, Any]] = []
        running: asyncio.Future[Any] | None = None  # requests that ran past the step time limit
        # Where this connection's steps run: a slow one holds up this connection only.
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-steps")
        try:
            try:
                count = int(websocket.query_params.get("sessions", "1"))
            except ValueError:
                count = 0
            if count < 1:
                await send(websocket, error("?sessions= must be a positive integer", "VALIDATION_ERROR"))
                return
            refusal = batch_refusal(count, getattr(websocket.app.state, "limits", None))
            if refusal is not None and count <= server.get_capacity_status().max_sessions:
                await send(websocket, {"type": "error", "data": refusal})  # more than max_sessions: full
                return
            try:
                for _ in range(count):
                    sessions.append(await server._create_session())
            except SessionCapacityError as exc:
                status = server.get_capacity_status()
                message = (
                    f"{count} sessions asked, {count - len(sessions)} more than this server has free "
                    f"({status.max_sessions} allowed)"
                )
                await send(
                    websocket,
                    error(
                        message,
                        "CAPACITY_REACHED",
                        active_sessions=exc.active_sessions,
                        max_sessions=exc.max_sessions,
                    ),
                )
                return
            except EnvironmentFactoryError as exc:
                await send(websocket, error(str(exc), "FACTORY_ERROR", factory_name=exc.factory_name))
                return
            while True:
                raw = await websocket.receive_text()
                try:
                    message = json.loads(raw)
                except ValueError as exc:
                    await send(websocket, error(f"Invalid JSON: {exc}", "INVALID_JSON"))
                    continue
                if isinstance(message, dict) and message.get("type") == "close":
                    break
                if not isinstance(message, dict) or message.get("type") != "batch":
                    hint = 'Send {"type": "batch", "data": [...]} or {"type": "close"}'
                    await send(websocket, error(hint, "UNKNOWN_TYPE"))
                    continue
                problem = check(sessions, message.get("data"))
                if problem is not None:
                    await send(websocket, error(problem, "VALIDATION_ERROR"))
                    continue
                await websocket.send_text(await run(sessions, message["data"], thread))
        except WebSocketDisconnect:
            pass
        except _Overran as overran:
            running = overran.running
            exc = StepTimeLimitExceeded(overran.limit)
            if not await end_connection(exc.data(), "a batch ran past the server's --step-timeout"):
                with contextlib.suppress(Exception):
                    await send(websocket, {"type": "error", "data": exc.data()})
        except Exception as exc:  # as /ws: say what happened, then end the sessions
            with contextlib.suppress(Exception):
                await send(websocket, error(str(exc), "SESSION_ERROR"))
        finally:
            if running is not None:  # its environments are closed only once they have stopped
                with contextlib.suppress(BaseException):
                    await asyncio.shield(running)
            if sessions:  # shielded: a server shutting down must not leak the other sessions
                destroy = asyncio.gather(*(server._destroy_session(sid) for sid, _ in sessions))
                with contextlib.suppress(BaseException):
                    await asyncio.shield(destroy)
            thread.shutdown(wait=False)  # a step still running ends on its own; its reply is dropped
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await websocket.close()


class _Overran(Exception):
    """A batch's requests (``running``) ran past the step time limit (``limit`` seconds)."""

    def __init__(self, running: asyncio.Future[Any], limit: float) -> None:
        super().__init__(limit)
        self.running, self.limit = running, limit


async def send(websocket: WebSocket, message: dict[str, Any]) -> None:
    await websocket.send_text(json.dumps(message))
