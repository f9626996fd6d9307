"""The OpenEnv WebSocket protocol without any I/O: building request messages and reading replies.

Both the synchronous session (for gymnasium) and any asynchronous one share this module, so the
rules for tolerating different server versions live in one place:

- 0.1 to 0.3.x servers send no ``metadata``; 0.10 sends it inside ``observation`` and again at the top
  level of the envelope (the top-level copy only when it is not empty);
- ``reward`` may be a bool, an int, a float or ``null``; it is normalised to ``float | None``;
- error messages carry ``code`` and ``message`` and sometimes more fields (``errors``, ``active_sessions``).

The wire format is defined upstream in huggingface/OpenEnv: the message models in
``src/openenv/core/env_server/types.py`` (``WSResetMessage``, ``WSStepMessage``, ``WSStateMessage``,
``WSCloseMessage``, ``WSObservationResponse``, ``WSStateResponse``, ``WSErrorResponse``, ``WSErrorCode``)
and the ``/ws`` route of ``src/openenv/core/env_server/http_server.py`` that sends them (openenv 0.10).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._urls import ws_url
from .errors import CapacityError, ProtocolError, ServerError

__all__ = [
    "BATCH_WIRE",
    "SESSION_WIRE",
    "StepResult",
    "WireFormat",
    "batch_message",
    "close_message",
    "observation_data",
    "parse_batch",
    "parse_reply",
    "reply_data",
    "reset_message",
    "state_message",
    "step_message",
]


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays (actions, reset options) as plain JSON numbers and lists."""
    for method in ("tolist", "item"):  # numpy arrays and numpy scalars both have tolist()
        convert = getattr(value, method, None)
        if callable(convert):
            return convert()
    raise TypeError(f"{type(value).__name__} values cannot be sent to an OpenEnv server: {value!r}")


_strict_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False, default=_json_default).encode

try:  # pydantic's JSON writer (pydantic comes with openenv): several times json.dumps' speed on floats
    from pydantic_core import to_json as _fast_dumps
except ImportError:  # pragma: no cover - the client also works without it
    _fast_dumps = None


def _dumps(message: Any) -> str:
    """A request message as compact JSON text, refusing NaN and infinities (they are not JSON).

    pydantic's writer makes it when it can: for JSON's own types and numpy's values it writes what
    ``json.dumps`` writes (numbers in their shortest form, text as UTF-8 rather than ``\\u`` escapes: the
    same values once parsed). Whenever its text holds a ``NaN`` or ``Infinity`` token (or just those
    letters inside a string) or it cannot write a value, ``json.dumps`` decides, so what is refused is
    refused with its error. Values only pydantic knows how to write (bytes, dates, sets, enums) are
    sent as pydantic writes them.
    """
    if _fast_dumps is not None:
        try:
            text = _fast_dumps(message, fallback=_json_default)
        except Exception:  # json.dumps below raises the error the caller gets
            pass
        else:
            if b"NaN" not in text and b"Infinity" not in text:
                return text.decode()
    return _strict_dumps(message)


# Not orjson, although it parses our replies faster than pydantic's (benchmarks/levers.py measures both):
# it turns an integer beyond 64 bits into a float, and a scan for one costs more than the saving.
try:  # pydantic's JSON parser (pydantic comes with openenv): json.loads' values, faster on numbers
    from pydantic_core import from_json as _fast_loads
except ImportError:  # pragma: no cover - the client also works without it
    _fast_loads = None


def _loads(raw: str | bytes) -> Any:
    """``json.loads(raw)``, through pydantic's faster parser when it is there.

    They agree on every document (NaN and Infinity, big integers, repeated keys: the last wins); where
    pydantic's refuses one (a lone UTF-16 surrogate in a string), ``json.loads`` decides, and its error
    is the one reported.
    """
    if _fast_loads is not None:
        try:
            return _fast_loads(raw)
        except ValueError:
            pass
    return json.loads(raw)


#: Error codes after which the server closes the connection.
FATAL_CODES = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR", "LIMIT_EXCEEDED"})


@dataclass(slots=True)
class StepResult:
    """One observation as the server sent it, with the envelope normalised.

    Attributes:
        observation: the environment's own fields (``fen``, ``screen``...), without ``metadata``.
        reward: the reward as a float, or ``None`` when the server sent none (e.g. on some resets).
        done: whether the server says the episode is over. It does not say *why*: adapters decide
            between termination and truncation.
        metadata: the observation's metadata (empty for servers older than 0.10).
    """

    observation: dict[str, Any]
    reward: float | None
    done: bool
    metadata: dict[str, Any] = field(default_factory=dict)


def reset_message(kwargs: dict[str, Any]) -> str:
    """The message that starts an episode; ``kwargs`` reach the environment's ``reset``."""
    return _dumps({"type": "reset", "data": kwargs})


def step_message(action: dict[str, Any]) -> str:
    """The message that plays one action; ``action`` is the action model's fields."""
    return _dumps({"type": "step", "data": action})


def state_message() -> str:
    return '{"type":"state"}'


def close_message() -> str:
    return '{"type":"close"}'


def parse_reply(raw: str | bytes, *, expected: str, url: str | None = None) -> dict[str, Any]:
    """Decode one reply message and return its ``data``, raising the error it carries, if any.

    ``expected`` is ``"observation"`` (reply to reset and step) or ``"state"``.
    """
    return reply_data(_decode(raw, url), expected=expected, url=url)


def reply_data(message: Any, *, expected: str, url: str | None = None) -> dict[str, Any]:
    """The ``data`` of a decoded reply (a message, or one entry of a batch), raising the error it carries."""
    if not isinstance(message, dict) or "type" not in message:
        raise ProtocolError(
            f"The server at {url} sent {_preview(message)}, not an OpenEnv reply "
            '(expected an object with a "type" field).',
            url=url,
        )
    kind = message["type"]
    data = message.get("data")
    if kind == "error":
        raise error_from_message(data if isinstance(data, dict) else {}, url=url)
    if kind != expected:
        raise ProtocolError(
            f'The server at {url} replied with a "{kind}" message where "{expected}" was expected.',
            url=url,
        )
    if not isinstance(data, dict):
        raise ProtocolError(f'The server at {url} sent a "{kind}" message without data.', url=url)
    return data


#: A request for one session of a connection: ``(session, "reset"/"step"/"state", data)``.
Entry = tuple[int, str, dict[str, Any] | None]


def batch_message(entries: list[Entry]) -> str:
    """One message for ``/ws/batch``: a ``(session, "reset"/"step"/"state", data)`` request per entry."""
    return _dumps(
        {"type": "batch", "data": [{"session": i, "type": kind, "data": data} for i, kind, data in entries]}
    )


def parse_batch(raw: str | bytes, *, count: int, url: str | None = None) -> list[Any]:
    """The ``count`` replies of a ``/ws/batch`` message, in order (each for `reply_data`)."""
    message = _decode(raw, url)
    if not isinstance(message, dict) or message.get("type") != "batch":
        reply_data(message, expected="batch", url=url)  # raises the error it carries, or says what it is
    replies = message.get("data")
    if not isinstance(replies, list) or len(replies) != count:
        raise ProtocolError(
            f"The server at {url} answered a batch of {count} requests with {_preview(replies)}.", url=url
        )
    return replies


def session_message(entries: list[Entry]) -> str:
    """The ``/ws`` message of the one request in ``entries`` (a ``/ws`` connection is one session)."""
    ((_, kind, data),) = entries
    if kind == "state":
        return state_message()
    return _dumps({"type": kind, "data": data})


def parse_session(raw: str | bytes, *, count: int, url: str | None = None) -> list[Any]:
    """The one reply of a ``/ws`` message, as a list (each entry for `reply_data`), like `parse_batch`."""
    return [_decode(raw, url)]


@dataclass(frozen=True, slots=True)
class WireFormat:
    """How requests travel on one WebSocket route: ``/ws`` (a session a connection, a request a message)
    or ``/ws/batch`` (many sessions a connection, one message for all their requests).

    The drivers (`openenv_lab.client.drivers`) send ``encode(entries)`` and read each message with
    ``decode(raw, count=..., url=...)``: the ``count`` replies, in the order of their requests.

    Example:
        >>> BATCH_WIRE.encode([(0, "reset", {"seed": 1}), (1, "state", None)])
        '{"type":"batch","data":[{"session":0,"type":"reset","data":{"seed":1}},{"session":1,"type":"state","data":null}]}'
        >>> SESSION_WIRE.encode([(0, "step", {"move": "e2e4"})])
        '{"type":"step","data":{"move":"e2e4"}}'
    """

    #: Whether one connection holds many sessions (the URL then says how many: ``?sessions=N``).
    batched: bool
    encode: Callable[[list[Entry]], str]
    decode: Callable[..., list[Any]]

    def url(self, base_url: str, route: str, size: int) -> str:
        """The WebSocket URL of a connection holding ``size`` sessions on ``route``."""
        if not self.batched:
            if size != 1:
                raise ValueError(f"A /ws connection holds one session, not {size}")
            return ws_url(base_url, route=route)
        return ws_url(base_url, query=f"sessions={size}", route=route)


SESSION_WIRE = WireFormat(batched=False, encode=session_message, decode=parse_session)
BATCH_WIRE = WireFormat(batched=True, encode=batch_message, decode=parse_batch)


def _decode(raw: str | bytes, url: str | None) -> Any:
    try:
        return _loads(raw)
    except ValueError as exc:
        raise ProtocolError(
            f"The server at {url} sent a message that is not JSON ({exc}); it does not speak the "
            "OpenEnv protocol.",
            url=url,
        ) from None


def parse_observation(data: dict[str, Any], *, url: str | None = None) -> StepResult:
    """Normalise an observation envelope from any server version into a `StepResult`."""
    observation = data.get("observation")
    if not isinstance(observation, dict):
        raise ProtocolError(
            f"The server at {url} sent an observation envelope without an 'observation' object: "
            f"{_preview(data)}",
            url=url,
        )
    nested = observation.pop("metadata", None)
    top = data.get("metadata")
    if isinstance(top, dict) and isinstance(nested, dict) and top is not nested and top != nested:
        metadata = {**nested, **top}
    elif isinstance(top, dict):
        metadata = top
    elif isinstance(nested, dict):
        metadata = nested
    else:
        metadata = {}
    # Every reply of every step comes through here: the usual types are taken as they are, without a call.
    reward = data.get("reward")
    if type(reward) is not float and reward is not None:
        reward = _normalise_reward(reward, url)
    done = data.get("done", False)
    if type(done) is not bool:
        done = _normalise_done(done, url)
    return StepResult(observation, reward, done, metadata)


def observation_data(message: Any, *, url: str | None = None) -> StepResult:
    """`parse_observation` of the ``data`` of a decoded ``observation`` reply (or one entry of a batch):
    ``parse_observation(reply_data(message, expected="observation"))``, with the usual case first."""
    if type(message) is dict and message.get("type") == "observation":
        data = message.get("data")
        if type(data) is dict:
            return parse_observation(data, url=url)
    return parse_observation(reply_data(message, expected="observation", url=url), url=url)


def error_from_message(data: dict[str, Any], *, url: str | None = None) -> ServerError:
    """Turn the ``data`` of an error message into the matching exception (not raised)."""
    code = str(data.get("code", "UNKNOWN"))
    server_message = str(data.get("message", ""))
    details = {k: v for k, v in data.items() if k not in ("code", "message")}
    if code == "CAPACITY_REACHED":
        active = data.get("active_sessions")
        maximum = data.get("max_sessions")
        numbers = f" ({active}/{maximum} sessions in use)" if maximum is not None else ""
        return CapacityError(
            f"The server at {url} is full{numbers}: it refused a new session. Close sessions you no "
            "longer need (env.close()), connect to another server, or start one that allows more "
            "sessions ('openenv-lab serve NAME --max-sessions N' for ours; create_app(..., "
            "max_concurrent_envs=N) for an OpenEnv environment of your own).",
            server_message=server_message,
            active_sessions=active if isinstance(active, int) else None,
            max_sessions=maximum if isinstance(maximum, int) else None,
            details=details,
            url=url,
        )
    hint = _HINTS.get(code, "")
    text = f"The server at {url} reported {code}: {server_message}"
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        text += " (" + "; ".join(_describe_validation_error(e) for e in errors[:3]) + ")"
    if hint:
        text += ". " + hint
    return ServerError(text, code=code, server_message=server_message, details=details, url=url)


_HINTS = {
    "VALIDATION_ERROR": "The action or message does not match the server's schema: compare it "
    "with Client(url).schema()['action']",
    "EXECUTION_ERROR": "The environment raised while handling the request; the session is still open",
    "FACTORY_ERROR": "The server could not build an environment for this session; check its logs",
    "SESSION_ERROR": "The server closed the session",
    "LIMIT_EXCEEDED": "The server refused the session: one of its limits (named above) would be exceeded",
    "STEP_TIMEOUT": "The server ended the session",
    "REPLY_TOO_LARGE": "The server sent this error instead of the reply; the session is still open",
}


def _describe_validation_error(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    location = ".".join(str(part) for part in error.get("loc", ()))
    return f"{location}: {error.get('msg', '')}" if location else str(error.get("msg", ""))


def _normalise_reward(value: Any, url: str | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, int, float)):
        return float(value)
    raise ProtocolError(f"The server at {url} sent a reward that is not a number: {value!r}", url=url)


def _normalise_done(value: Any, url: str | None) -> bool:
    if isinstance(value, (bool, int)):
        return bool(value)
    raise ProtocolError(f"The server at {url} sent a 'done' that is not a boolean: {value!r}", url=url)


def _preview(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
