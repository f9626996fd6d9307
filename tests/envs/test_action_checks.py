"""The action check of every step (`contains`) answers as gymnasium's ``space.contains`` does."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from openenv_lab.envs._episode import contains

BOXES = [
    spaces.Box(-1.0, 1.0, (5,), np.float32),
    spaces.Box(np.array([0.0, -2.0]), np.array([1.0, 2.0]), dtype=np.float64),
    spaces.Box(0, 255, (2, 3), np.uint8),
    spaces.Box(-np.inf, np.inf, (3,), np.float32),
    spaces.Box(-1.0, 1.0, (16, 5), np.float32),
    spaces.Box(np.float16(-2), np.float16(2), (8, 8), np.float16),
    spaces.Box(-3, 3, (4,), np.int32),
]


def arrays_near(box: spaces.Box) -> st.SearchStrategy[np.ndarray]:
    """Arrays of the box's dtype and shape (and of others), with values in, at and beyond its bounds."""
    dtype = st.sampled_from([box.dtype, np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.float16)])
    shape = st.sampled_from([box.shape, (*box.shape, 1), (1,)])
    return st.tuples(dtype, shape).flatmap(
        lambda ds: hnp.arrays(
            ds[0],
            ds[1],
            elements=hnp.from_dtype(ds[0], allow_nan=True, allow_infinity=True)
            if ds[0].kind == "f"
            else st.integers(-300, 300).filter(lambda v: np.can_cast(np.min_scalar_type(v), ds[0])),
        )
    )


@pytest.mark.parametrize("box", BOXES, ids=repr)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_box_actions_are_checked_as_gymnasium_checks_them(box, data):
    action = data.draw(arrays_near(box))
    assert contains(box, action) is box.contains(action)
    inside = box.sample()
    assert contains(box, inside) is True
    if np.isfinite(box.high).all() and box.dtype.kind == "f":
        assert contains(box, np.nextafter(box.high, np.inf, dtype=box.dtype)) is False


@pytest.mark.parametrize(
    ("space", "action"),
    [
        (spaces.Discrete(3), 2),
        (spaces.Discrete(3), 3),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), [0.5, 0.5]),  # a list: gymnasium converts it
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.float32(0.5)),
        (spaces.MultiDiscrete([2, 3]), np.array([1, 2])),
    ],
)
def test_other_spaces_and_values_are_left_to_gymnasium(space, action):
    assert contains(space, action) == space.contains(action)


DISCRETE_ACTIONS = st.one_of(
    st.integers(-(2**70), 2**70),  # beyond int64 too: gymnasium refuses those
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.integers(-5, 20).map(lambda v: np.array(v)),
    st.booleans(),
    st.floats(-5, 20),
)


@settings(max_examples=400, deadline=None)
@given(
    n=st.one_of(st.integers(1, 20), st.integers(1, 2**63 - 1)),
    start=st.one_of(st.integers(-5, 5), st.integers(-(2**62), 2**62)),
    dtype=st.sampled_from([np.int64, np.int32]),
    action=DISCRETE_ACTIONS,
    near=st.integers(-2, 2),
)
@example(n=2**63 - 1, start=5, dtype=np.int64, action=2**63 + 1, near=1)  # its last values overflow int64
@example(n=2**31, start=-1, dtype=np.int32, action=0, near=0)  # n itself is beyond int32 (assumed away)
def test_discrete_actions_are_checked_as_gymnasium_checks_them(n, start, dtype, action, near):
    # A space gymnasium can build: an int32 space holds its size and each of its values as int32s.
    assume(dtype is np.int64 or (n < 2**31 and -(2**31) <= start <= start + n < 2**31))
    space = spaces.Discrete(n, start=start, dtype=dtype)
    assert contains(space, action) is space.contains(action)
    for edge in (start + near, start + n - 1 + near):  # either side of both ends, as int and np.int64
        assert contains(space, edge) is space.contains(edge)
        if -(2**63) <= edge < 2**63:
            assert contains(space, np.int64(edge)) is space.contains(np.int64(edge))
