"""Tasks: the episodes a server defines by name (openenv 0.10's task API), as gymnasium users choose them.

A server that offers tasks lists them by split (``/{env}/splits``, ``/{env}/tasks``) and starts one at
``reset(split=..., index=...)``. On top of that, this module gives:

- `TaskCatalog`: every task of the server as one polars DataFrame (``env.unwrapped.tasks``), with the
  columns ``split``, ``index`` and ``id`` first, then the fields the server gives each task;
- `task_request`: ``reset(options={"task_id": ...})`` (an ``id`` of the table) or
  ``options={"split": ..., "index": ...}``, checked against the table before anything is sent;
- `selection` and `spread`: ``make(..., tasks=...)`` plays a list of tasks in turn, one per reset, and
  ``make_vec(..., tasks=...)`` deals the list out to its sub-environments (sub-environment ``k`` plays
  tasks ``k``, ``k + num_envs``, ...), so a vector env covers a split without two sub-environments
  playing the same task at once.

Example:
    >>> import gymnasium as gym, openenv_lab
    >>> env = gym.make("openenv/chess", tasks="mate_in_1")
    >>> env.unwrapped.tasks.columns[:5]
    ['split', 'index', 'id', 'fen', 'mate_in']
    >>> obs, info = env.reset(seed=0)
    >>> info["task"]["id"]
    'mate_in_1-0'
    >>> obs, info = env.reset(options={"task_id": "mate_in_2-7"})
    >>> info["task"]["mate_in"]
    2
    >>> env.close()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..client import Client

__all__ = ["TaskCatalog", "names_task", "selection", "spread", "task_request"]


class TaskCatalog:
    """The tasks of one server, read on first use (one call per split) and kept.

    Args:
        client: a function giving a `Client` of the server (called once, when the tasks are first needed).
        close: close that client after reading (for a client made just for this).
    """

    def __init__(self, client: Callable[[], Client], *, close: bool = False) -> None:
        self._client = client
        self._close = close
        self._rows: list[dict[str, Any]] | None = None
        self._by_id: dict[str, dict[str, Any]] = {}
        self._splits: list[str] = []

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every task: ``split``, ``index``, ``id`` and the server's fields, in the server's order."""
        if self._rows is None:
            client = self._client()
            try:
                self._rows = self._read(client)
            finally:
                if self._close:
                    client.close()
        return self._rows

    def _read(self, client: Client) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        self._splits = [str(split.get("name")) for split in client.splits()]
        for split in self._splits:
            for position, spec in enumerate(client.tasks(split)):
                fields = dict(spec) if isinstance(spec, dict) else {"task": spec}
                index = fields.pop("index", position)
                task_id = str(fields.pop("id", f"{split}-{index}"))
                fields.pop("split", None)
                row = {"split": split, "index": int(index), "id": task_id, **fields}
                rows.append(row)
                self._by_id[task_id] = row
        return rows

    def table(self) -> Any:
        """The tasks as a polars DataFrame (no rows, but the three key columns, for a server without)."""
        import polars as pl

        rows = self.rows
        if not rows:
            return pl.DataFrame(schema={"split": pl.String, "index": pl.Int64, "id": pl.String})
        return pl.DataFrame(rows, infer_schema_length=None)

    @property
    def splits(self) -> list[str]:
        """The split names, in the server's order."""
        self.rows  # noqa: B018 - reading the rows reads the splits
        return list(self._splits)

    def find(self, task_id: str) -> dict[str, Any]:
        """The row of the task called ``task_id``; a `KeyError` saying what exists when there is none."""
        rows = self.rows
        if task_id in self._by_id:
            return self._by_id[task_id]
        if not rows:
            raise KeyError(f"No task {task_id!r}: this server offers no tasks (it has no task routes)")
        examples = ", ".join(repr(row["id"]) for row in rows[:3])
        raise KeyError(
            f"No task {task_id!r} on this server; its {len(rows)} tasks in {', '.join(self._splits)} are "
            f"called like {examples} (see env.unwrapped.tasks)"
        )

    def locate(self, split: str, index: int) -> dict[str, Any]:
        """The row at ``index`` of ``split``; a `KeyError` naming the splits and their sizes otherwise."""
        for row in self.rows:
            if row["split"] == split and row["index"] == index:
                return row
        sizes = {name: sum(1 for row in self.rows if row["split"] == name) for name in self._splits}
        known = ", ".join(f"{name} (0-{size - 1})" for name, size in sizes.items()) or "none"
        raise KeyError(f"No task at index {index!r} of split {split!r}; this server's splits: {known}")


def names_task(options: dict[str, Any] | None) -> bool:
    """Whether reset options choose a task: a ``task_id``, or ``split`` and ``index`` together (a
    ``split`` alone is left to the server: FinRL's is a part of its data)."""
    return bool(options) and ("task_id" in options or ("split" in options and "index" in options))


def task_request(options: dict[str, Any] | None, catalog: TaskCatalog | None) -> dict[str, Any] | None:
    """``options`` with a ``task_id`` replaced by the task's ``split`` and ``index``, checked to exist (a
    ``split`` and ``index`` are checked too, on a server that lists tasks)."""
    if not names_task(options):
        return options
    assert options is not None
    options = dict(options)
    if catalog is None:
        raise ValueError("This environment cannot look tasks up")
    if "task_id" in options:
        if "split" in options or "index" in options:
            raise ValueError("Choose a task by task_id, or by split and index, not both")
        try:
            row = catalog.find(str(options.pop("task_id")))
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    elif not catalog.rows:
        return options  # a server that lists no tasks: its split and index are its own business
    else:
        try:
            row = catalog.locate(options["split"], options["index"])
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    options["split"], options["index"] = row["split"], row["index"]
    return options


def selection(tasks: Any, catalog: TaskCatalog) -> list[dict[str, Any]]:
    """The tasks ``make(..., tasks=...)`` names, as rows: a split's name (all its tasks, in order), a list
    of task ids or of ``(split, index)`` pairs, or a DataFrame with ``split`` and ``index`` columns (e.g.
    ``env.unwrapped.tasks.filter(...)``)."""
    if isinstance(tasks, str):
        if tasks not in catalog.splits:
            known = ", ".join(catalog.splits) or "none: it has no task routes"
            raise ValueError(f"tasks={tasks!r} is not a split of this server (its splits: {known})")
        return [row for row in catalog.rows if row["split"] == tasks]
    if hasattr(tasks, "select") and hasattr(tasks, "columns"):  # a polars DataFrame
        missing = {"split", "index"} - set(tasks.columns)
        if missing:
            raise ValueError(f"A DataFrame of tasks needs the columns split and index (missing {missing})")
        tasks = list(zip(tasks["split"].to_list(), tasks["index"].to_list(), strict=True))
    if not isinstance(tasks, Sequence) or not tasks:
        raise ValueError(
            f"tasks must be a split's name, a list of task ids or (split, index) pairs, or a DataFrame of "
            f"tasks; got {tasks!r}"
        )
    rows = []
    for task in tasks:
        try:
            if isinstance(task, str):
                rows.append(catalog.find(task))
            elif isinstance(task, Sequence) and len(task) == 2:
                rows.append(catalog.locate(task[0], int(task[1])))
            else:
                raise ValueError(f"{task!r} is neither a task id nor a (split, index) pair")
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    return rows


def spread(rows: list[dict[str, Any]], num_envs: int) -> list[list[dict[str, Any]]]:
    """Deal ``rows`` out to ``num_envs`` sub-environments: ``k`` gets ``rows[k::num_envs]`` (and, with
    fewer tasks than sub-environments, ``rows[k % len(rows)]``)."""
    if len(rows) >= num_envs:
        return [rows[k::num_envs] for k in range(num_envs)]
    return [[rows[k % len(rows)]] for k in range(num_envs)]
