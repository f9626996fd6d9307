"""Building a FastAPI app for one of our environments on OpenEnv's own server framework.

The app is exactly what ``openenv.core.env_server.create_app`` builds (the same routes: ``/ws``,
``/health``, ``/schema``, ``/metadata``, ``/reset``, ``/step``, ``/state``, ``/mcp``), plus one
read-only route of ours, ``GET /capacity``, that reports how many sessions are open and allowed, so
clients can plan vector environments before opening sessions (with ``"max_batch"``, the most sessions one
``/ws/batch`` connection may hold, when the server runs with `_limits.Limits`), and ``/ws/batch``
(`_batch.py`), where one WebSocket carries many sessions.

Bad input never gets a 500: a request the models refuse is a 422 whose JSON carries no value JSON cannot
hold (``1e309`` is read as infinity, which the framework's own error reply could not serialise), and an
environment that refuses its arguments (a ``ValueError``, ``TypeError`` or ``LookupError`` from
``reset``, ``step`` or a task route) is a 400 with ``{"detail": ..., "error": ...}``. A step that runs
past the server's step time limit is a 504 (`_limits.StepTimeLimitExceeded`).

The OpenAPI document declares every status the routes really send (`_declare_statuses`): 400 on every
route (a refusal, or a reply over the server's ``--max-reply-bytes``), 404 and 501 on the task routes
(another environment's name; an environment without tasks), 504 on ``/step``, and, on a server that
requires a token, 401 and the bearer scheme on every route but ``GET /health``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from ..optional_imports import hidden_module
from ._limits import StepTimeLimitExceeded

__all__ = ["OPENENV_HTTP_API", "build_app", "import_openenv_server"]

#: The version of OpenEnv's HTTP API our servers implement (openenv 0.10's apps declare the same).
OPENENV_HTTP_API = "1.0.0"


def import_openenv_server() -> Any:
    """Import ``openenv.core.env_server``, skipping its Gradio web UI when it is not wanted.

    Importing the package pulls in Gradio (most of the import's seconds) only for the optional web UI,
    and the package already treats a missing Gradio as "no web UI". We hide Gradio for the duration of
    the import (unless ``ENABLE_WEB_INTERFACE`` asks for the UI), then un-hide it, so a later
    ``import gradio`` in the same process works as usual.
    """
    name = "openenv.core.env_server"
    if name in sys.modules:
        return sys.modules[name]
    if _web_interface_wanted():
        return importlib.import_module(name)
    with hidden_module("gradio") as hidden:
        try:
            return importlib.import_module(name)
        except ImportError:
            if not hidden:
                raise
    # A version of openenv that needs Gradio outright: forget the partial import, import it all.
    for module in [m for m in sys.modules if m == "openenv" or m.startswith("openenv.")]:
        del sys.modules[module]
    return importlib.import_module(name)


def _web_interface_wanted() -> bool:
    return os.getenv("ENABLE_WEB_INTERFACE", "false").lower() in ("true", "1", "yes")


def build_app(
    env_factory: Callable[[], Any],
    action_cls: type,
    observation_cls: type,
    state_cls: type,
    *,
    env_name: str,
    max_sessions: int,
) -> Any:
    """The FastAPI app serving ``env_factory`` with up to ``max_sessions`` concurrent WebSocket sessions."""
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
    env_server = import_openenv_server()
    from fastapi import FastAPI

    from ..version import __version__
    from ._batch import BATCH_ROUTE, register_batch_route, supports_batches

    app = FastAPI(
        title=f"openenv_lab {env_name} environment",
        # The OpenAPI version is the HTTP API's, as openenv's own create_fastapi_app declares it: that is
        # what `openenv validate --url` reads to pick its standard profile (openenv-http/1.x).
        version=OPENENV_HTTP_API,
        description=(
            f"OpenEnv server for the {env_name} environment, built by openenv_lab {__version__} on the "
            f"openenv framework (OpenEnv HTTP API {OPENENV_HTTP_API})."
        ),
    )
    server = env_server.HTTPEnvServer(
        env_factory,
        action_cls,
        observation_cls,
        max_concurrent_envs=max_sessions,
        env_name=env_name,
        state_cls=state_cls,
    )
    server.register_routes(app, mode=os.environ.get("OPENENV_MODE", "simulation"))
    extras: dict[str, Any] = {}
    if supports_batches(server):
        register_batch_route(app, server, action_cls)
        extras["batch_route"] = BATCH_ROUTE

    _answer_bad_input_with_4xx(app)
    _declare_statuses(app, env_name, action_cls)

    @app.get("/capacity", tags=["Health"], summary="Sessions open and allowed")
    def capacity() -> dict[str, Any]:
        status = server.get_capacity_status()
        limits = getattr(app.state, "limits", None)  # set by run_server
        if limits is not None and limits.max_batch is not None and "batch_route" in extras:
            return {
                "active_sessions": status.active_sessions,
                "max_sessions": status.max_sessions,
                **extras,
                "max_batch": limits.max_batch,
            }
        return {"active_sessions": status.active_sessions, "max_sessions": status.max_sessions, **extras}

    return app


def _answer_bad_input_with_4xx(app: Any) -> None:
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    async def invalid_request(request: Any, exc: RequestValidationError) -> Any:
        return JSONResponse(status_code=422, content={"detail": _json_safe(jsonable_encoder(exc.errors()))})

    async def refused(request: Any, exc: Exception) -> Any:
        return JSONResponse(
            status_code=400, content={"detail": _json_safe(str(exc)), "error": type(exc).__name__}
        )

    async def overran(request: Any, exc: Exception) -> Any:
        return JSONResponse(status_code=504, content={"detail": str(exc), "error": type(exc).__name__})

    app.add_exception_handler(RequestValidationError, invalid_request)
    for kind in (ValueError, TypeError, LookupError):
        app.add_exception_handler(kind, refused)
    app.add_exception_handler(StepTimeLimitExceeded, overran)


#: The JSON of an error reply: a text, or (a 422) the list of what the models refused.
_ERROR = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"detail": {}, "error": {"type": "string"}},
                "required": ["detail"],
            }
        }
    }
}
#: Statuses beyond the framework's own, and the routes that send them ("*": every route).
_STATUSES = {
    "400": ("*", "Refused: an argument the environment does not take, or a reply over --max-reply-bytes"),
    "404": ("/{env_name}/", "No environment of that name on this server"),
    "501": ("/{env_name}/", "This environment has no tasks"),
    "504": ("/step", "The step ran past the server's --step-timeout"),
}


def _declare_statuses(app: Any, env_name: str, action_cls: type) -> None:
    """Make ``app``'s OpenAPI document declare the statuses its routes send (see the module's docstring);
    the token's 401 when ``app.state.bearer`` is set (by `run_server`, before the document is built).
    It also says what the framework's document leaves open: the action ``/step`` takes (the framework
    declares any object), and the one ``env_name`` the task routes answer."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        _declare_action(schema, action_cls)
        bearer = bool(getattr(app.state, "bearer", False))
        if bearer:
            schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["bearer"] = {"type": "http", "scheme": "bearer"}
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                for parameter in operation.get("parameters", []):
                    if parameter.get("name") == "env_name":
                        parameter["schema"] = {"type": "string", "enum": [env_name], "title": "Env Name"}
                responses = operation.setdefault("responses", {})
                for status, (where, description) in _STATUSES.items():
                    if where == "*" or path.startswith(where):
                        responses.setdefault(status, {"description": description, **_ERROR})
                if bearer and not (path == "/health" and method == "get"):
                    operation["security"] = [{"bearer": []}]
                    responses["401"] = {"description": "Without the server's token", **_ERROR}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi


def _declare_action(schema: dict[str, Any], action_cls: type) -> None:
    """Declare ``action_cls``'s JSON schema as what ``/step``'s ``action`` takes."""
    components = schema.get("components", {}).get("schemas", {})
    request = components.get("StepRequest", {}).get("properties", {})
    if "action" not in request or not hasattr(action_cls, "model_json_schema"):
        return
    action = action_cls.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(action.pop("$defs", {}))
    components.setdefault(action_cls.__name__, action)
    request["action"] = {**request["action"], "$ref": f"#/components/schemas/{action_cls.__name__}"}
    request["action"].pop("type", None)
    request["action"].pop("additionalProperties", None)


def _json_safe(value: Any) -> Any:
    """``value`` with every float JSON cannot hold (infinities, NaN) written as text."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return repr(value)
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value
