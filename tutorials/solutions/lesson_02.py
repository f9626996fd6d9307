"""Lesson 2: spaces and adapters."""

from __future__ import annotations

import numpy as np


def legal_moves_from_mask(adapter, obs) -> set[str]:
    return {adapter.action_to_move(action) for action in np.flatnonzero(obs["action_mask"])}


def count_pieces(board: np.ndarray) -> tuple[int, int]:
    return int(board[0:6].sum()), int(board[6:12].sum())


def space_kind(json_type: str) -> str:
    return {"string": "Text", "number": "Box", "integer": "Box", "boolean": "Discrete"}[json_type]
