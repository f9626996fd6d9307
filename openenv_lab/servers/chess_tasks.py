"""The chess server's task set: verified mates in one, two and three moves.

A task is a position where the side to move forces checkmate in exactly ``n`` of its own moves, whatever
the other side replies, and cannot in fewer. The positions ship with the package
(``chess_tasks.json``, made by ``scripts/make_chess_tasks.py`` from a fixed seed) and every one of them is
proved by `mate_in` below, an exhaustive search written for this purpose (the test suite proves them all
again).

Served through openenv 0.10's task routes (``/chess/splits``, ``/chess/tasks``, ``/chess/num_tasks``,
``/chess/task``, ``/chess/task_range``) with one split per depth: ``mate_in_1``, ``mate_in_2``,
``mate_in_3``. ``reset(split=..., index=...)`` starts a task: the agent plays the side to move, and the
episode ends with +1 when it mates within ``n`` moves, or with 0 (``end_reason="out_of_moves"``) when its
``n``-th move has not mated.

Example:
    >>> from openenv_lab.servers.chess_tasks import TASKS, mate_in, solutions
    >>> import chess
    >>> task = TASKS.get_task("mate_in_1", 0)
    >>> sorted(task)
    ['fen', 'id', 'index', 'mate_in', 'solutions', 'split']
    >>> board = chess.Board(task["fen"])
    >>> mate_in(board, 1)
    True
    >>> solutions(board, 1) == task["solutions"]
    True
"""

from __future__ import annotations

import json
from functools import cached_property
from importlib import resources
from typing import Any

import chess

__all__ = ["SPLITS", "TASKS", "TaskSet", "mate_in", "mates_exactly_in", "solutions"]

#: The split of each depth, shallowest first.
SPLITS = {1: "mate_in_1", 2: "mate_in_2", 3: "mate_in_3"}


def mate_in(board: chess.Board, n: int) -> bool:
    """Whether the side to move can force checkmate within ``n`` of its moves, whatever the replies.

    ``board`` is left as it was. Draws by rule (stalemate, insufficient material) end the line without a
    mate; repetition and the fifty-move rule cannot arise within three moves of a task.
    """
    if n < 1:
        return False
    for move in _candidates(board, n):
        board.push(move)
        try:
            if _defender_is_lost(board, n - 1):
                return True
        finally:
            board.pop()
    return False


def solutions(board: chess.Board, n: int) -> list[str]:
    """Every first move (UCI, sorted) that forces checkmate within ``n`` moves."""
    found = []
    for move in _candidates(board, n):
        board.push(move)
        try:
            if _defender_is_lost(board, n - 1):
                found.append(move.uci())
        finally:
            board.pop()
    return sorted(found)


def mates_exactly_in(board: chess.Board, n: int) -> bool:
    """Whether the side to move forces mate in ``n`` moves and not in fewer (what makes a task of depth n)."""
    return mate_in(board, n) and not mate_in(board, n - 1)


def _defender_is_lost(board: chess.Board, n: int) -> bool:
    """After the attacker's move: mated now, or mated within ``n`` more attacker moves after any reply."""
    if board.is_checkmate():
        return True
    if n == 0 or board.is_stalemate() or board.is_insufficient_material():
        return False
    for reply in board.legal_moves:
        board.push(reply)
        try:
            if not mate_in(board, n):
                return False
        finally:
            board.pop()
    return True


def _candidates(board: chess.Board, n: int) -> list[chess.Move]:
    """The attacker's moves worth trying: only checks can mate at once; otherwise checks first."""
    moves = list(board.legal_moves)
    if n == 1:
        return [move for move in moves if board.gives_check(move)]
    return sorted(moves, key=lambda move: not board.gives_check(move))


class TaskSet:
    """The shipped tasks, in the shape openenv's ``TaskProvider`` routes serve (splits, tasks by index).

    Each task is a dict: ``id`` (``"<split>-<index>"``), ``split``, ``index``, ``fen``, ``mate_in`` and
    ``solutions`` (every first move that forces the mate, UCI).
    """

    def __init__(self, resource: str = "chess_tasks.json") -> None:
        self._resource = resource

    @cached_property
    def _by_split(self) -> dict[str, list[dict[str, Any]]]:
        text = resources.files(__package__).joinpath(self._resource).read_text(encoding="utf-8")
        data = json.loads(text)
        tasks: dict[str, list[dict[str, Any]]] = {}
        for split, entries in data["splits"].items():
            tasks[split] = [
                {"id": f"{split}-{index}", "split": split, "index": index, **entry}
                for index, entry in enumerate(entries)
            ]
        return tasks

    def list_splits(self) -> list[dict[str, str]]:
        return [{"name": split, "type": "test"} for split in self._by_split]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [dict(task) for task in self._split(split)]

    def num_tasks(self, split: str) -> int:
        return len(self._split(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        tasks = self._split(split)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(tasks):
            raise IndexError(f"Task index {index!r} is outside {split} (0 to {len(tasks) - 1})")
        return dict(tasks[index])

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        return [dict(task) for task in self._split(split)[start:stop]]

    def _split(self, split: str) -> list[dict[str, Any]]:
        try:
            return self._by_split[split]
        except KeyError:
            raise ValueError(
                f"Unknown task split {split!r}; the chess server has {', '.join(self._by_split)}"
            ) from None


#: The tasks that ship with the package.
TASKS = TaskSet()
