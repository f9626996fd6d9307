"""Batched infos: one sub-environment's ``info`` dict into row ``i`` of a vector environment's infos.

The layout is gymnasium's own (``VectorEnv._add_info``): each key gets an array with one row per
sub-environment and a boolean mask ``_key`` saying which rows have it. gymnasium builds a new mask array
for every key of every sub-environment on every step, about 7% of a step of 16 cheap environments; this
does the same work in place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["add_info"]


def add_info(vector_infos: dict[str, Any], env_info: dict[str, Any], row: int, rows: int) -> dict[str, Any]:
    """Put one sub-environment's ``env_info`` in row ``row`` of the batched ``vector_infos`` (``rows``
    rows), as gymnasium's ``VectorEnv._add_info`` does: each key gets an array (numbers: of their type;
    numpy arrays: stacked; anything else: objects; dicts: recursively; ``final_obs``: objects) and a
    boolean mask ``_key`` saying which rows have it. Where gymnasium fails (a row's value does not fit the
    key's array: a None, or text, beside numbers), the key's array becomes an array of objects.

    Example:
        >>> infos = add_info({}, {"lives": 3}, row=1, rows=2)
        >>> infos["lives"], infos["_lives"]
        (array([0, 3]), array([False,  True]))
    """
    for key, value in env_info.items():
        if key == "final_obs":
            array = vector_infos.get("final_obs")
            if array is None:
                array = np.full(rows, fill_value=None, dtype=object)
            array[row] = value
        elif isinstance(value, dict):
            array = add_info(vector_infos.get(key, {}), value, row, rows)
        else:
            if key in vector_infos:
                array = vector_infos[key]
            elif type(value) in (int, float, bool) or issubclass(type(value), np.number):
                array = np.zeros(rows, dtype=type(value))
            elif isinstance(value, np.ndarray):
                array = np.zeros((rows, *value.shape), dtype=value.dtype)
            else:
                array = np.full(rows, fill_value=None, dtype=object)
            try:
                array[row] = value
            except (TypeError, ValueError):  # None (or text) where other rows had numbers: gymnasium
                array = array.astype(object)  # would raise; the key becomes an object array instead
                array[row] = value
        mask_key = f"_{key}"
        mask = vector_infos.get(mask_key)
        if mask is None:
            mask = np.zeros(rows, dtype=np.bool_)
        mask[row] = True
        vector_infos[key], vector_infos[mask_key] = array, mask
    return vector_infos
