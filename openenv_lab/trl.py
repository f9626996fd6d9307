"""TRL's ``environment_factory``, generated from any OpenEnv environment: one line instead of a wrapper.

TRL's ``GRPOTrainer(environment_factory=...)`` takes a class with a no-argument constructor, a
``reset(**dataset_columns)`` returning the first observation as text, public methods that become the
model's tools (TRL reads their schemas from type hints and ``Args:`` docstrings), and optionally
``get_reward()``. `environment_factory` builds that class from what the environment says of itself:

- MCP tool environments (``openenv/echo`` with ``mcp=True``, the official ``echo_env``...): one method
  per tool, named after it, with its required arguments typed and described from the tool's JSON schema
  (optional arguments keep the tool's defaults);
- chess: ``move(move: str)``, a move in UCI notation; the observation text lists the legal moves;
- other environments whose actions are JSON fields (text, numbers, choices): one tool named after the
  action schema (``EchoAction`` gives ``echo``), one typed argument per field;
- environments whose observations have no text form (Atari's screens, FinRL's state vector) are refused,
  naming what is missing, unless ``render=`` describes an observation as text.

Each instance is one session. ``reset`` forwards the dataset columns the environment understands (the
seed, a task's ``task_id`` or ``split``/``index``, chess's ``fen`` and reset options, or ``columns=``) and
ignores the others (the prompt); a tool answers the next observation as text, and after the episode has
ended it raises an error saying so, which TRL hands to the model. ``get_reward()`` is the episode's return
(or ``reward(episode_rows)``). A tool called with arguments that do not fit its schema is an error message
to the model, not a crash; a server that goes away mid-rollout fails that rollout (``failed_reward``,
with the reason logged and in ``transcript``) and the next reset opens a new session. Every instance
records its episodes (`RecordTrajectory`: ``instance.trajectory`` replays in ``openenv_lab.show``) and a
``transcript`` of tool calls and answers; ``record=<folder>`` saves both as they grow.

Example:
    >>> from openenv_lab.trl import environment_factory
    >>> ChessGame = environment_factory("openenv/chess", opponent="random", agent_color="white")
    >>> game = ChessGame()
    >>> print(game.reset(seed=0).splitlines()[0])
    You play white. Position (FEN): rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1
    >>> "Your opponent played" in game.move(move="e2e4")
    True
    >>> game.close()

    In TRL: ``GRPOTrainer(model, args=..., train_dataset=..., environment_factory=ChessGame)``.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import polars as pl

from .adapters import ChessAdapter, GenericAdapter
from .adapters.schema import resolve
from .client import CapacityError, Client, OpenEnvError
from .files import check_writable, write_atomically
from .launch import Fleet, fleet_of, max_sessions_for, shared_embedded_server
from .record import RecordTrajectory

__all__ = ["TRLEnvironment", "environment_factory"]

log = logging.getLogger(__name__)

#: Dataset columns every environment's reset understands (the seed; a task by id or by split and index).
RESET_COLUMNS = ("seed", "task_id", "split", "index")
#: Chess's reset options that a dataset may carry per row.
CHESS_COLUMNS = ("fen", "opponent", "agent_color", "opponent_depth", "max_moves")
#: JSON Schema types as the Python type hints TRL turns back into them.
JSON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
#: Method names TRL reserves, which a tool of the same name would shadow.
RESERVED = frozenset({"reset", "get_reward", "close", "transcript", "trajectory", "tool_names", "index"})


class EpisodeOver(RuntimeError):
    """A tool called after the episode ended (TRL hands the message to the model)."""


def environment_factory(
    env: str,
    *,
    render: Callable[[Any, dict[str, Any]], str] | None = None,
    reward: Callable[[pl.DataFrame], float] | None = None,
    columns: Sequence[str] | None = None,
    sessions: int | None = None,
    failed_reward: float = 0.0,
    record: str | Path | None = None,
    name: str | None = None,
    **make_kwargs: Any,
) -> type:
    """A class for TRL's ``GRPOTrainer(environment_factory=...)``, generated from the environment ``env``.

    Args:
        env: what ``gym.make`` takes: an id (``"openenv/chess"``, ``"openenv/remote"`` with
            ``base_url=``, ``space=``...).
        render: the observation as text, ``render(observation, info) -> str`` (default: the family's).
        reward: the episode's score from its recorded rows, ``reward(rows) -> float`` (default: the
            return, the sum of its rewards).
        columns: the dataset columns ``reset`` forwards (default: ``seed``, ``task_id``, ``split``,
            ``index``, and for chess its reset options and ``fen``); the others are ignored.
        sessions: how many instances will be open at once (TRL's ``per_device_train_batch_size`` times
            ``num_generations``): checked against the servers' room now, and the embedded server is
            started with room for them. ``base_urls=[...]`` or a `Fleet` spread the instances over
            several servers, round-robin.
        failed_reward: the score of a rollout whose server failed.
        record: a folder where each instance saves its recording (``<n>.parquet``) and transcript
            (``<n>.transcript.parquet``) after each reset and tool call.
        name: the class's name (default: from the environment's, e.g. ``ChessEnvironment``).
        **make_kwargs: ``gym.make``'s (the family's options, ``base_url``, ``token``...).

    Raises:
        ValueError: the environment's actions cannot be made into tools, or its observations into text.
        CapacityError: the servers have no room for ``sessions`` sessions.

    Example:
        >>> from openenv_lab.trl import environment_factory
        >>> Echo = environment_factory("openenv/echo")
        >>> echo = Echo()
        >>> echo.reset(prompt="ignored")  # a dataset column the environment does not take
        'echoed_message: \\nmessage_length: 0'
        >>> echo.echo(message="hello")
        'echoed_message: hello\\nmessage_length: 5'
        >>> echo.get_reward()
        0.5
        >>> echo.close()
    """
    make_kwargs = dict(make_kwargs)
    urls = _urls(make_kwargs)
    probe = _make(env, make_kwargs, urls, 0)
    try:
        tools = _tools_of(probe)
        text = render or _renderer(probe)
        forwarded = tuple(columns) if columns is not None else _columns_of(probe)
        server_options = dict(probe.unwrapped.adapter.server_options)
        server_name = probe.unwrapped.adapter.server_name
    finally:
        probe.close()
    if urls is None and sessions is not None and server_name is not None:  # embedded, with room for all
        room = max_sessions_for(server_name, sessions)
        urls = [shared_embedded_server(server_name, max_sessions=room, **server_options).start()]
        make_kwargs = {k: v for k, v in make_kwargs.items() if k not in server_options}
    if urls is not None and sessions is not None:
        _check_room(urls, sessions, make_kwargs)
    family = env.rsplit("/", 1)[-1].removesuffix("_env")
    settings = _Settings(
        env=env,
        make_kwargs=make_kwargs,
        urls=urls,
        text=text,
        forwarded=forwarded,
        reward=reward,
        failed_reward=failed_reward,
        folder=_folder(record),
    )
    namespace: dict[str, Any] = {
        "settings": settings,
        "tool_names": tuple(t.name for t in tools),
        "__doc__": f"{env} as a TRL environment: tools {', '.join(t.name for t in tools)} (openenv_lab.trl).",
        "__module__": __name__,
    }
    for tool in tools:
        namespace[tool.name] = tool.method()
    return type(name or f"{_camel(family)}Environment", (TRLEnvironment,), namespace)


@dataclass
class _Settings:
    """What every instance of one generated class shares: how to make its env, read its observations and
    score its episodes, and where to save them."""

    env: str
    make_kwargs: dict[str, Any]
    urls: list[str] | None
    text: Callable[[Any, dict[str, Any]], str]
    forwarded: tuple[str, ...]
    reward: Callable[[pl.DataFrame], float] | None
    failed_reward: float
    folder: Path | None
    counter: Iterator[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)


class TRLEnvironment:
    """The base of the classes `environment_factory` generates: one session of an environment, driven by a
    language model's tool calls. A generated class adds its ``settings`` and one method per tool (each
    calls `_act`); its public methods are what TRL reads, so the base has only ``reset`` and
    ``get_reward`` (``close`` is set on each instance, so that it is not a tool).

    Example:
        >>> from openenv_lab.trl import TRLEnvironment, environment_factory
        >>> Echo = environment_factory("openenv/echo")
        >>> issubclass(Echo, TRLEnvironment), Echo.tool_names
        (True, ('echo',))
    """

    settings: ClassVar[_Settings]
    tool_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        settings = self.settings
        with settings.lock:
            self._number = next(settings.counter)
        self.index = self._number  # which instance of the class: its recordings' file names
        self._env: Any = None
        self._episode = -1
        self._done = True
        self._failed: str | None = None
        self._return = 0.0
        self._rows: list[dict[str, Any]] = []
        # An attribute of the instance, not a method of the class: TRL makes every public method a tool.
        self.close = self._close  # closes the session (else it closes with the interpreter)

    def reset(self, **dataset_columns: Any) -> str:
        """Start an episode with the dataset row's columns the environment understands; its first
        observation as text."""
        settings = self.settings
        seed = dataset_columns.get("seed")
        options = {
            k: _plain(v) for k, v in dataset_columns.items() if k in settings.forwarded and k != "seed"
        }
        self._episode += 1
        self._return = 0.0
        try:
            if self._env is None or self._failed is not None:  # a new session after a failure
                _close_quietly(self._env)
                self._env = None
                self._failed = None
                self._env = _make(
                    settings.env, settings.make_kwargs, settings.urls, self._number, settings.folder
                )
            observation, info = self._env.reset(seed=_plain(seed), options=options or None)
        except OpenEnvError as exc:
            return self._fail(exc, raise_=False)
        self._done = False
        answer = settings.text(observation, info)
        self._log("reset", None, answer, 0.0, None, dataset_columns.get("prompt"))
        if settings.folder is not None:
            self._save()
        return answer

    def get_reward(self) -> float:
        """The episode's score: its return, or ``reward(rows)`` if given; ``failed_reward`` if the server
        failed."""
        settings = self.settings
        if self._failed is not None:
            return float(settings.failed_reward)
        if settings.reward is not None and self._env is not None:
            table = self._env.trajectory.table
            return float(settings.reward(table.filter(pl.col("episode") == table["episode"].max())))
        return float(self._return)

    @property
    def transcript(self) -> pl.DataFrame:
        """Every reset, tool call and answer so far, one per row."""
        return pl.DataFrame(self._rows, schema=TRANSCRIPT_SCHEMA)

    @property
    def trajectory(self) -> Any:
        """The recording of this instance's episodes (`Trajectory`)."""
        return None if self._env is None else self._env.trajectory

    def _close(self) -> None:
        _close_quietly(self._env)
        self._env = None

    def _act(self, tool: _Tool, arguments: dict[str, Any]) -> str:
        try:
            if self._failed is not None:
                raise EpisodeOver(f"The environment failed ({self._failed}): this rollout is over")
            if self._env is None or self._episode < 0:
                raise EpisodeOver("The episode has not started: reset() first")
            if self._done:
                raise EpisodeOver("The episode is over: no more actions are taken (stop calling tools)")
            checked = tool.check(arguments)
            built = tool.action(self._env.unwrapped, checked)  # a ValueError if the arguments are wrong
        except (ValueError, TypeError, EpisodeOver) as exc:  # TRL hands the message to the model
            self._log(tool.name, arguments, None, 0.0, str(exc))
            raise
        try:
            observation, step_reward, terminated, truncated, info = self._env.step(built)
        except OpenEnvError as exc:
            return self._fail(exc)
        self._return += float(step_reward)
        self._done = bool(terminated or truncated)
        answer = self.settings.text(observation, info)
        if self._done:
            answer += (
                f"\nThe episode is over ({'ended' if terminated else 'cut short'}): return {self._return:g}."
            )
        self._log(tool.name, checked, answer, float(step_reward), None)
        if self.settings.folder is not None:
            self._save()
        return answer

    def _fail(self, exc: Exception, raise_: bool = True) -> str:
        self._failed = f"{type(exc).__name__}: {exc}"
        self._done = True
        log.warning(
            "%s %d: the environment failed, the rollout scores %g: %s",
            type(self).__name__,
            self._number,
            self.settings.failed_reward,
            self._failed,
        )
        self._log("failure", None, None, 0.0, self._failed)
        if raise_:
            raise EpisodeOver(f"The environment failed ({self._failed}): this rollout is over") from exc
        return f"The environment failed ({self._failed}); this rollout is over."

    def _log(
        self,
        kind: str,
        arguments: Any,
        answer: str | None,
        r: float,
        error: str | None,
        prompt: Any = None,
    ) -> None:
        self._rows.append(
            {
                "episode": self._episode,
                "call": kind,
                "arguments": None if arguments is None else json.dumps(arguments, default=str),
                "answer": answer,
                "reward": r,
                "error": error,
                "prompt": None if prompt is None else json.dumps(prompt, default=str),
            }
        )

    def _save(self) -> None:
        """Both recordings, after each reset and call: TRL never says when a rollout is over."""
        folder = self.settings.folder
        assert folder is not None
        self._env.save()
        path = folder / f"{self._number}.transcript.parquet"
        write_atomically(path, self.transcript.write_parquet, "the transcript")


TRANSCRIPT_SCHEMA = {
    "episode": pl.Int64,
    "call": pl.String,
    "arguments": pl.String,
    "answer": pl.String,
    "reward": pl.Float64,
    "error": pl.String,
    "prompt": pl.String,
}


@dataclass
class _Tool:
    """One generated tool: its name, description, typed arguments, and how it makes the env's action."""

    name: str
    description: str
    arguments: list[tuple[str, type, str]]
    action: Callable[[Any, dict[str, Any]], Any]
    returns: str = "The environment's answer, as text."

    def docstring(self) -> str:
        lines = [self.description.strip() or f"Call {self.name}.", "", "Args:"]
        lines += [f"    {arg}: {_one_line(text) or f'the {arg} argument'}" for arg, _, text in self.arguments]
        if not self.arguments:
            lines = lines[:-1]
        return "\n".join([*lines, "", "Returns:", f"    {self.returns}"])

    def method(self) -> Callable[..., str]:
        tool = self

        def call(self: Any, **arguments: Any) -> str:
            return self._act(tool, arguments)

        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        parameters += [
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, annotation=kind)
            for arg, kind, _ in self.arguments
        ]
        call.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
        call.__annotations__ = {arg: kind for arg, kind, _ in self.arguments} | {"return": str}
        call.__name__ = call.__qualname__ = self.name
        call.__doc__ = self.docstring()
        return call

    def check(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments, if they fit the tool's schema; else a ValueError the model reads."""
        wanted = {arg: kind for arg, kind, _ in self.arguments}
        signature = ", ".join(f"{arg}: {kind.__name__}" for arg, kind in wanted.items())
        unknown, missing = set(arguments) - set(wanted), set(wanted) - set(arguments)
        if unknown or missing:
            problems = [
                f"unknown {sorted(unknown)}" if unknown else "",
                f"missing {sorted(missing)}" if missing else "",
            ]
            raise ValueError(f"{self.name}({signature}): {' and '.join(p for p in problems if p)} arguments")
        for arg, kind in wanted.items():
            value = arguments[arg]
            fits = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                fits = True
            if not fits:
                raise ValueError(f"{self.name}({signature}): {arg} must be {_a(kind)}, got {value!r}")
        return dict(arguments)


def _tools_of(env: gym.Env) -> list[_Tool]:
    """The tools of ``env``: its MCP tools, chess's move, or one tool over its action fields."""
    unwrapped = env.unwrapped
    adapter = unwrapped.adapter
    if isinstance(adapter, ChessAdapter):
        return [
            _Tool(
                "move",
                "Play one chess move in UCI notation: the square the piece leaves and the square it "
                "reaches (e2e4, g1f3), with the piece a pawn promotes to (e7e8q). The position lists the "
                "legal moves.",
                [("move", str, "the move in UCI notation, e.g. e2e4")],
                _chess_move,
                "The position after your move and your opponent's reply, as text.",
            )
        ]
    if isinstance(adapter, GenericAdapter) and adapter.tools is not None:
        return [_mcp_tool(tool) for tool in adapter.tools.tools]
    if isinstance(adapter, GenericAdapter):
        return [_schema_tool(unwrapped.client.schema().get("action", {}), adapter)]
    raise ValueError(
        f"{type(adapter).__name__}'s actions ({unwrapped.action_space}) have no form a language model can "
        "name in a tool call: environment_factory makes tools for chess, MCP tool environments and "
        "environments whose actions are JSON fields (text, numbers, choices)"
    )


def _chess_move(unwrapped: Any, arguments: dict[str, Any]) -> int:
    uci = arguments["move"].strip().lower()
    legal = unwrapped.adapter.board.legal_moves
    ucis = sorted(move.uci() for move in legal)
    if uci not in ucis:
        raise ValueError(f"{uci!r} is not a legal move here; the legal moves are: {' '.join(ucis)}")
    return unwrapped.adapter.move_to_action(uci)


def _mcp_tool(tool: Any) -> _Tool:
    properties = tool.input_schema.get("properties", {})
    defs = tool.input_schema.get("$defs", {})
    description, documented, returns = _sections(tool.description)
    arguments = []
    for arg in tool.fields:
        node = resolve(properties.get(arg, {}), defs, frozenset())[0]
        text = str(node.get("description") or documented.get(arg, ""))
        arguments.append((arg, _python_type(node, f"{tool.name}.{arg}"), text))

    def action(unwrapped: Any, values: dict[str, Any]) -> Any:
        return unwrapped.tool_action(tool.name, **values)

    if returns:
        return _Tool(_tool_name(tool.name), description, arguments, action, f"{returns} (as text)")
    return _Tool(_tool_name(tool.name), description, arguments, action)


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields)\s*:\s*$")


def _sections(doc: str) -> tuple[str, dict[str, str], str]:
    """A tool's description (often its function's Google-style docstring) as its summary, the
    descriptions of its arguments, and what it returns."""
    summary: list[str] = []
    arguments: dict[str, str] = {}
    returns: list[str] = []
    section = None
    for line in doc.splitlines():
        found = _SECTION.match(line)
        if found:
            section = found.group(1)
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            entry = re.match(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if entry:
                arguments[entry.group(1)] = entry.group(2).strip()
            elif line.strip() and arguments:
                last = next(reversed(arguments))
                arguments[last] += " " + line.strip()
        elif section == "Returns" and line.strip():
            returns.append(line.strip())
    return _one_line("\n".join(summary)), arguments, " ".join(returns)


def _schema_tool(schema: dict[str, Any], adapter: GenericAdapter) -> _Tool:
    """One tool over the action schema's fields (those the adapter acts with)."""
    defs = schema.get("$defs", {})
    properties = schema.get("properties", {})
    fields = adapter.action_fields()
    arguments = []
    for arg in fields:
        node = resolve(properties.get(arg, {}), defs, frozenset())[0]
        description = str(node.get("description", ""))
        if "enum" in node:
            description = f"{description} (choices: {json.dumps(node['enum'])})".strip()
        arguments.append((arg, _python_type(node, f"action.{arg}"), description))
    title = str(schema.get("title") or "act")
    name = _tool_name(_snake(re.sub(r"Action$", "", title)) or "act")
    description = str(schema.get("description") or f"Act in the environment: send one {title}.")

    def action(unwrapped: Any, values: dict[str, Any]) -> Any:
        return unwrapped.adapter.action_from_json(values)

    return _Tool(name, description, arguments, action)


def _python_type(node: dict[str, Any], where: str) -> type:
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind not in JSON_TYPES:
        if "enum" in node and all(isinstance(v, str) for v in node["enum"]):
            return str
        raise ValueError(
            f"The argument {where} has no single JSON type ({node}): a tool's argument needs one "
            "(string, integer, number, boolean, array or object)"
        )
    return JSON_TYPES[kind]


def _renderer(env: gym.Env) -> Callable[[Any, dict[str, Any]], str]:
    adapter = env.unwrapped.adapter
    if isinstance(adapter, ChessAdapter):
        return render_chess
    if isinstance(adapter, GenericAdapter):
        return render_fields
    raise ValueError(
        f"{type(adapter).__name__}'s observations ({env.observation_space}) have no text form: pass "
        "render=lambda observation, info: '...' to environment_factory"
    )


def render_chess(observation: Any, info: dict[str, Any]) -> str:
    """A chess position as text: the side the model plays, the FEN, the board, the opponent's last move
    and the legal moves (or how the game ended)."""
    import chess

    board = chess.Board(info["fen"])
    lines = [f"You play {info['agent_color']}. Position (FEN): {info['fen']}", str(board)]
    if info.get("illegal_move"):
        lines.append(f"Your move {info.get('move')} was illegal: nothing changed.")
    if info.get("opponent_move"):
        lines.append(f"Your opponent played {info['opponent_move']}.")
    if info.get("end_reason"):
        lines.append(f"The game is over: {info['end_reason']} (result {info.get('result') or '*'}).")
    else:
        lines.append(f"Legal moves: {' '.join(sorted(move.uci() for move in board.legal_moves))}")
    return "\n".join(lines)


def render_fields(observation: Any, info: dict[str, Any]) -> str:
    """An observation's fields as ``name: value`` lines (a tool's result or error for MCP environments)."""
    lines = []
    if "tool_name" in info:  # an MCP environment (its infos' tool keys: `GenericAdapter`)
        if not info["tool_name"]:  # its reset: no call yet
            return "Ready: call a tool."
        if info.get("tool_error"):
            lines.append(f"error: {info['tool_error']}")
        else:
            lines.append(f"result: {_text(info.get('tool_result'))}")
    elif isinstance(observation, dict):
        lines += [f"{key}: {_text(value)}" for key, value in observation.items() if key != "action_mask"]
    else:
        lines.append(_text(observation))
    return "\n".join(lines)


def _text(value: Any) -> str:
    if isinstance(value, np.ndarray):
        value = value.item() if value.size == 1 else value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _columns_of(env: gym.Env) -> tuple[str, ...]:
    if isinstance(env.unwrapped.adapter, ChessAdapter):
        return RESET_COLUMNS + CHESS_COLUMNS
    return RESET_COLUMNS


def _urls(make_kwargs: dict[str, Any]) -> list[str] | None:
    """The servers the instances use, round-robin (``base_urls=`` or a fleet; ``base_url=``), taken out of
    ``make_kwargs``; None where each instance's ``gym.make`` finds its own (embedded, Docker, a Space)."""
    base_urls = make_kwargs.pop("base_urls", None)
    if base_urls is not None:
        fleet = fleet_of(base_urls)
        if fleet is not None and fleet.token is not None:
            make_kwargs.setdefault("token", fleet.token)
        return list(base_urls.urls if isinstance(base_urls, Fleet) else base_urls)
    if "base_url" in make_kwargs:
        return [make_kwargs.pop("base_url")]
    return None


def _check_room(urls: list[str], sessions: int, make_kwargs: dict[str, Any]) -> None:
    token = make_kwargs.get("token")
    headers = {"Authorization": f"Bearer {token}"} if isinstance(token, str) else None
    active = most = 0
    for url in urls:
        with Client(url, headers=headers) as client:
            capacity = client.capacity()
        if capacity is None:
            return  # a server that does not say: its own errors will tell
        active, most = active + capacity["active_sessions"], most + capacity["max_sessions"]
    room = most - active
    if room < sessions:
        message = (
            f"{len(urls)} server(s) have room for {room} more sessions, {sessions - room} short of the "
            f"{sessions} rollouts at once (per_device_train_batch_size x num_generations): start them with "
            "more max_sessions, or add servers (openenv_lab.serve(..., replicas=N), base_urls=fleet)"
        )
        raise CapacityError(message, server_message=message, active_sessions=active, max_sessions=most)


def _make(
    env: str, make_kwargs: dict[str, Any], urls: list[str] | None, number: int, folder: Path | None = None
) -> Any:
    kwargs = dict(make_kwargs)
    if urls is not None:
        kwargs["base_url"] = urls[number % len(urls)]
    made = gym.make(env, **kwargs)
    path = folder / f"{number}.parquet" if folder is not None else None
    return RecordTrajectory(made, path=path)


def _folder(record: str | Path | None) -> Path | None:
    """The recordings' folder, made now (so that a path that cannot be written is an error here)."""
    if record is None:
        return None
    folder = Path(record)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"Cannot make the recordings' folder {folder}: {exc}") from None
    check_writable(folder / "0.parquet", "the recordings")
    return folder


def _close_quietly(env: Any) -> None:
    if env is not None:
        with contextlib.suppress(OpenEnvError):
            env.close()


def _plain(value: Any) -> Any:
    """A dataset value as JSON would carry it (datasets give numpy and torch scalars too)."""
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (ValueError, TypeError):
            return value
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _a(kind: type) -> str:
    return {
        str: "text",
        int: "a whole number",
        float: "a number",
        bool: "true or false",
        list: "a list",
        dict: "an object",
    }[kind]


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name) if part) or "OpenEnv"


def _tool_name(name: str) -> str:
    """A tool's name as a method name: an identifier that does not shadow TRL's reserved methods."""
    cleaned = re.sub(r"\W", "_", name)
    if not cleaned or cleaned[0].isdigit():
        cleaned = f"tool_{cleaned}"
    return f"{cleaned}_tool" if cleaned in RESERVED or cleaned.startswith("_") else cleaned
