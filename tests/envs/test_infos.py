"""Batched infos from servers we do not trust: whatever the sub-environments' infos hold, `add_info` keeps
every value of every row (found by the client-side fuzz: ints beyond 64 bits, a dict in one row and an
array in another, arrays of other shapes) and `split_infos` gives each row's info back."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from hypothesis import example, given, settings
from hypothesis import strategies as st

from openenv_lab.envs.infos import add_info, batch_infos, split_infos

KEYS = st.sampled_from(["a", "b", "c"])
ARRAYS = st.builds(
    lambda shape, dtype, fill: np.full(shape, fill).astype(dtype),
    st.lists(st.integers(1, 3), max_size=2).map(tuple),
    st.sampled_from([np.int8, np.int64, np.uint8, np.float32, np.float64, np.bool_]),
    st.integers(0, 100),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.builds(np.int8, st.integers(-128, 127)),
    st.builds(np.float32, st.integers(-(2**20), 2**20)),
    ARRAYS,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(KEYS, inner, max_size=2)),
    max_leaves=4,
)
INFOS = st.lists(st.dictionaries(KEYS, VALUES, max_size=3), min_size=1, max_size=5)


def same(got, want) -> bool:
    """``got`` is ``want`` kept: arrays equal element for element, numbers exactly, dicts key by key."""
    if isinstance(want, dict):
        keys = sorted(want)
        return isinstance(got, dict) and sorted(got) == keys and all(same(got[k], want[k]) for k in keys)
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        return np.shape(got) == np.shape(want) and bool(np.all(np.asarray(got) == np.asarray(want)))
    if isinstance(want, (float, np.floating)) and math.isnan(want):
        return math.isnan(got)
    return bool(got == want) if not isinstance(want, (list, str)) else got == want


def identical(got, want) -> bool:
    """The same batched infos: keys in the same order, arrays of the same dtype, shape and elements."""
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and list(got) == list(want)
            and all(identical(got[k], want[k]) for k in want)
        )
    if isinstance(want, np.ndarray):
        if not (type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape):
            return False
        if want.dtype != object:
            return bool(np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"))
        return all(identical(g, w) for g, w in zip(got.tolist(), want.tolist(), strict=True))
    return type(got) is type(want) and same(got, want)


def added_row_by_row(pairs, rows):
    batched: dict = {}
    for row, info in pairs:
        batched = add_info(batched, info, row, rows)
    return batched


@settings(max_examples=500, deadline=None)
@given(INFOS, st.randoms(use_true_random=False))
def test_batching_a_key_at_a_time_is_adding_row_by_row(infos, random):
    rows = list(range(len(infos) + 1))
    random.shuffle(rows)  # any rows, in any order, one left out
    pairs = list(zip(rows, infos, strict=False))
    assert identical(batch_infos(pairs, len(rows)), added_row_by_row(pairs, len(rows)))


#: Infos whose rows all have the same keys, as a server's usually do (the case batched in one go).
SAME_KEYS = st.lists(KEYS, min_size=1, max_size=3, unique=True).flatmap(
    lambda keys: st.lists(st.fixed_dictionaries(dict.fromkeys(keys, VALUES)), min_size=1, max_size=5)
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(INFOS, SAME_KEYS))
def test_batching_every_row_in_order_is_adding_row_by_row(infos):
    pairs = list(enumerate(infos))  # a vector step's infos: each row, in order
    batched = batch_infos(pairs, len(infos))
    assert identical(batched, added_row_by_row(pairs, len(infos)))
    arrays = list(arrays_in(batched))
    assert len({id(array) for array in arrays}) == len(arrays)  # each key and mask an array of its own


def arrays_in(batched):
    for value in batched.values():
        if isinstance(value, dict):
            yield from arrays_in(value)
        else:
            yield value


@pytest.mark.parametrize(
    "infos",
    [
        [{"a": 1}, {"a": 2**63}],  # beyond int64: objects
        [{"a": 1}, {"a": 1.5}],  # widened to floats
        [{"a": np.float32(1)}, {"a": 2.0}],  # numpy's scalars
        [{"a": {"b": 1}}, {"a": 2}],  # a dict beside a number
        [{"a": np.zeros(2)}, {"a": np.zeros(3)}],  # other shapes
        [{"a": np.zeros(2, np.int8)}, {"a": np.full(2, 300)}],  # other dtypes
        [{"a": 1, "_a": True}, {"a": 2}],  # a key named like a mask
        [{"final_obs": np.zeros(2)}, {"final_obs": None}],
        [{"a": [1, 2]}, {"a": "x"}, {"a": None}],
        [{"a": True}, {"b": False}],
        [{"a": np.array([[1, 2], None], dtype=object)}, {"a": np.array([(3,), "x"], dtype=object)}],
        [{"a": 2**63 - 1}, {"a": -(2**63)}],
        [{"a": np.float32(0)}, {"a": 2**24 + 1}],  # an int a float32 would round
        [{"a": np.float16(0)}, {"a": 70_000}, {"a": 10**400}],  # beyond float16, beyond any float
    ],
)
def test_batching_the_awkward_cases_is_adding_row_by_row(infos):
    pairs = list(enumerate(infos))
    assert identical(batch_infos(pairs, len(infos)), added_row_by_row(pairs, len(infos)))


@settings(max_examples=300, deadline=None)
@given(INFOS)
@example([{"a": np.float32(0.0)}, {"a": 2**24 + 1}])  # float32 holds integers exactly up to 2**24
@example([{"a": np.float16(0.0)}, {"a": 2049}, {"a": 70_000}])  # float16: up to 2**11, finite to 65504
def test_every_row_of_every_key_is_kept(infos):
    batched: dict = {}
    for row, info in enumerate(infos):
        batched = add_info(batched, info, row, len(infos))
    back = split_infos(batched, len(infos))
    for row, info in enumerate(infos):
        assert sorted(back[row]) == sorted(info), row
        for key, value in info.items():
            assert same(back[row][key], value), (row, key, back[row][key], value)


def test_an_integer_beyond_64_bits_beside_small_ones():
    infos = add_info(add_info({}, {"n": 1}, 0, 2), {"n": 2**70}, 1, 2)
    assert infos["n"].tolist() == [1, 2**70]


def test_a_dict_in_one_row_and_an_array_in_another():
    infos = add_info(add_info({}, {"k": {"x": 1}}, 0, 2), {"k": np.zeros(2)}, 1, 2)
    assert infos["k"][0] == {"x": 1} and infos["k"][1].tolist() == [0.0, 0.0]
    infos = add_info(add_info({}, {"k": np.zeros(2)}, 0, 2), {"k": {"x": 1}}, 1, 2)
    assert infos["k"][1] == {"x": 1} and infos["_k"].tolist() == [True, True]


def test_arrays_of_other_shapes_and_dtypes():
    infos = add_info(add_info({}, {"a": np.zeros(2, np.int8)}, 0, 2), {"a": np.arange(5)}, 1, 2)
    assert [row.tolist() for row in infos["a"]] == [[0, 0], [0, 1, 2, 3, 4]]
    infos = add_info(add_info({}, {"a": np.zeros(2, np.int8)}, 0, 2), {"a": np.full(2, 1000)}, 1, 2)
    assert infos["a"].dtype == np.int64 and infos["a"][1].tolist() == [1000, 1000]  # widened, not wrapped


def test_a_float_beside_ints_is_not_rounded():
    # gymnasium's own _add_info makes an int array from row 0 and rounds row 1's 2.5 to 2.
    infos = add_info(add_info({}, {"x": 3}, 0, 2), {"x": 2.5}, 1, 2)
    assert infos["x"].tolist() == [3.0, 2.5] and infos["x"].dtype == np.float64
    big = add_info(add_info({}, {"x": 2**60 + 1}, 0, 2), {"x": 0.5}, 1, 2)
    assert big["x"].tolist() == [2**60 + 1, 0.5]  # a float64 would round the first


def test_split_infos_keeps_a_key_of_the_users_that_starts_with_an_underscore_and_gives_python_scalars():
    """Mutations this guards (survivors of a mutmut pass over infos.py): every ``_key`` taken for a mask,
    whether or not ``key`` is there; numpy scalars handed back as they are."""
    infos = add_info({}, {"_private": 7, "lives": np.int64(3)}, row=0, rows=2)
    infos = add_info(infos, {"lives": 2}, row=1, rows=2)
    rows = split_infos(infos, 2)
    assert rows == [{"_private": 7, "lives": 3}, {"lives": 2}]
    assert type(rows[0]["lives"]) is int and type(rows[0]["_private"]) is int


def test_infos_are_batched_exactly_as_gymnasium_batches_them():
    """`add_info` (ours, without gymnasium's allocations) against ``VectorEnv._add_info`` itself."""
    final = {"board": np.ones((2, 2))}
    infos = [
        {"n": 1, "x": 0.5, "flag": True, "name": "a", "arr": np.arange(3), "nested": {"k": np.int8(3)}},
        {"x": 2.0, "extra": None, "nested": {"k": np.int8(-1), "deeper": {"s": "z"}}, "final_obs": final},
        {},
        {"n": 7, "name": ("tuple", 1), "arr": np.ones(3), "flag": False, "_n": 5, "final_info": {"n": 2}},
    ]

    class Reference(gym.vector.VectorEnv):
        num_envs = len(infos)

    reference: dict = {}
    ours: dict = {}
    for i, info in enumerate(infos):
        reference = Reference()._add_info(reference, info, i)
        ours = add_info(ours, info, i, len(infos))

    def same(a, b):
        if isinstance(a, dict):
            assert isinstance(b, dict) and list(a) == list(b)
            for key in a:
                same(a[key], b[key])
        else:
            assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
            assert data_equivalence(a, b)

    same(ours, reference)
    assert ours["final_obs"][1] is final


def test_a_none_beside_numbers_in_one_info_key_is_batched_not_raised():
    # Atari's raw observation has screen_base: an int on a step with a screen delta, None on the reset of
    # a sub-environment that autoresets in the same vector step; gymnasium's _add_info raises there.
    infos = add_info({}, {"raw": {"screen_base": 5}, "x": 1.5}, 0, 3)
    infos = add_info(infos, {"raw": {"screen_base": None}, "x": "text"}, 1, 3)
    assert infos["raw"]["screen_base"].tolist() == [5, None, 0]
    assert infos["x"].tolist() == [1.5, "text", 0.0] and infos["_x"].tolist() == [True, True, False]


def test_final_observations_of_several_rows_are_each_kept():
    first, second = np.zeros(2), {"board": np.ones(1)}
    infos = add_info({}, {"final_obs": first, "n": 1}, 0, 3)
    infos = add_info(infos, {"final_obs": second, "n": 2}, 2, 3)
    assert infos["final_obs"][0] is first and infos["final_obs"][2] is second
    assert infos["final_obs"][1] is None and infos["_final_obs"].tolist() == [True, False, True]
    assert infos["final_obs"].dtype == object and infos["final_obs"].shape == (3,)
    batched = batch_infos([(0, {"final_obs": first}), (2, {"final_obs": second})], 3)
    assert batched["final_obs"][0] is first and batched["final_obs"][2] is second


@pytest.mark.parametrize("odd", [np.str_("x"), np.bytes_(b"ab"), np.void(b"ab"), np.complex128(1 + 2j)])
def test_numpys_text_bytes_and_complex_beside_integers_are_kept(odd):
    # Found by the mutation pass's neighbourhood: numpy's text beside ints raised ValueError in the check
    # of whether the int array could hold it.
    infos = add_info(add_info({}, {"a": 1}, 0, 2), {"a": odd}, 1, 2)
    assert infos["a"][0] == 1 and same(infos["a"][1], odd) and infos["_a"].tolist() == [True, True]
    batched = batch_infos([(0, {"a": 1}), (1, {"a": odd})], 2)
    assert batched["a"][0] == 1 and same(batched["a"][1], odd)


def test_no_rows_batch_to_no_keys():
    # The mutation pass: the first row's keys read from an empty batch raised IndexError.
    assert batch_infos([], 3) == {}
    assert batch_infos(iter(()), 0) == {}


@pytest.mark.parametrize(
    ("first", "then", "dtype"),
    [
        (0.5, 5, np.float64),  # as gymnasium: an int beside floats is a float
        (0.5, 2**53, np.float64),  # float64 holds every integer up to 2**53, both ways
        (0.5, -(2**53), np.float64),
        (0.5, 2**53 + 1, object),  # beyond, it rounds some: those are kept as the ints they are
        (0.5, -(2**53) - 1, object),
        (0.5, 2**53 + 2, np.float64),  # and holds others, as gymnasium's array would
        (0.5, 2**1100, object),  # beyond any float64
        (np.float32(0.5), 2**24, np.float32),  # float32 up to 2**24
        (np.float32(0.5), 2**24 + 1, np.float64),  # widened, not rounded
    ],
)
def test_an_int_beside_floats_keeps_the_float_dtype_while_it_is_exact(first, then, dtype):
    """Mutations this guards (the mutmut pass over infos.py): `_exact_float`'s round trip; each left
    every value kept but made the column an object array where a float holds the int."""
    infos = add_info(add_info({}, {"x": first}, 0, 2), {"x": then}, 1, 2)
    assert infos["x"].dtype == dtype and infos["x"].tolist() == [0.5, then]
    assert type(infos["x"].tolist()[1]) is (int if dtype is object else float)


NUMBERS = st.one_of(
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.sampled_from(
        [0, 1, 127, 128, 255, 256, -129, 2**24 + 1, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**63]
    ),
    st.floats(allow_nan=False),
    st.sampled_from([0.0, 1.0, 0.5, -1.0, 2.0, 300.0, 70_000.0, 2.0**53, 2.0**63, 1e300]),
    st.builds(np.int8, st.integers(-128, 127)),
    st.builds(np.uint8, st.integers(0, 255)),
    st.builds(np.int32, st.integers(-(2**31), 2**31 - 1)),
    st.builds(np.float16, st.floats(-1000, 1000)),
    st.builds(np.float32, st.floats(-(2**30), 2**30)),
    st.builds(np.bool_, st.booleans()),
    st.builds(np.uint64, st.integers(0, 2**64 - 1)),
    st.builds(np.int16, st.integers(-(2**15), 2**15 - 1)),
)


@settings(max_examples=1500, deadline=None)
@given(NUMBERS, NUMBERS)
@example(0.5, 5)
@example(True, 0.0)
@example(np.uint8(3), -1)
@example(np.int8(3), 2**63 - 1)
@example(0, 2**63 - 1)
@example(0, -(2.0**63))  # the int64's least value, as a float
@example(np.int8(3), -128)
@example(np.uint64(3), -1)
@example(0.5, 2**53 + 1)  # numpy's == would call the rounded float equal to it
@example(0, np.uint64(2**63 + 1))  # numpy calls uint64 -> float64 safe; it rounds this one
@example(np.int8(3), 127.0)  # the bounds of the narrow types, exactly: each boundary of `_narrower`
@example(np.int8(3), -128.0)
@example(np.int16(3), 2**15 - 1)
@example(np.int16(3), -(2**15))
@example(np.uint8(3), 255)
@example(np.bool_(True), 1.0)
@example(np.bool_(True), 0)
@example(np.float16(1), 0.5)
@example(np.float32(1), 2**24)
def test_two_numbers_batch_to_gymnasiums_dtype_wherever_it_loses_nothing(first, then):
    """Where gymnasium's own ``_add_info`` keeps both numbers (equal after the round trip), ours makes
    the very same dtype; ours differs only where gymnasium would round, wrap or truncate. Guards
    `_narrower`'s and `_keeps`' mutations (the mutmut pass over infos.py), which kept every value but
    made an object array, or a wider one, where gymnasium's dtype holds them."""

    class Reference(gym.vector.VectorEnv):
        num_envs = 2

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = Reference()._add_info(Reference()._add_info({}, {"x": first}, 0), {"x": then}, 1)
    except (OverflowError, ValueError, TypeError):  # gymnasium cannot even store it
        reference = None
    ours = add_info(add_info({}, {"x": first}, 0, 2), {"x": then}, 1, 2)
    wanted = [v.item() if isinstance(v, np.generic) else v for v in (first, then)]
    kept = [v.item() if isinstance(v, np.generic) else v for v in ours["x"].tolist()]
    assert kept == wanted  # Python's ==, exact between ints and floats (numpy's rounds the int)
    if reference is None:
        return
    stored = reference["x"].tolist()
    if all(
        type(s) is not float or math.isfinite(s) or not math.isfinite(float(w))
        for s, w in zip(stored, wanted, strict=True)
    ):
        lossless = all(s == w for s, w in zip(stored, wanted, strict=True))
        if lossless:
            assert ours["x"].dtype == reference["x"].dtype, (ours["x"], reference["x"])


def test_ints_up_to_2_53_become_floats_beside_a_float():
    """`_wider`'s bound (a mutation left ints of exactly 2**53 as objects): float64 holds them all."""
    infos = add_info(add_info({}, {"x": 2**53}, 0, 3), {"x": -(2**53)}, 1, 3)
    infos = add_info(infos, {"x": 0.5}, 2, 3)
    assert infos["x"].dtype == np.float64 and infos["x"].tolist() == [2**53, -(2**53), 0.5]
    beyond = add_info(add_info({}, {"x": 2**53 + 1}, 0, 2), {"x": 0.5}, 1, 2)
    assert beyond["x"].dtype == object and beyond["x"].tolist() == [2**53 + 1, 0.5]


def test_numpys_big_integers_beside_floats_are_not_rounded():
    """numpy's ``can_cast`` calls int64 and uint64 -> float64 safe, but integers beyond 2**53 round: an
    array of them beside float arrays (and numpy's uint64 beside ints, which widens to float64) is kept
    as it is (found by the gymnasium comparison above)."""
    arrays = add_info(add_info({}, {"x": np.zeros(2)}, 0, 2), {"x": np.array([2**53 + 1, 1])}, 1, 2)
    assert arrays["x"].dtype == object and arrays["x"][1].tolist() == [2**53 + 1, 1]
    small = add_info(add_info({}, {"x": np.zeros(2)}, 0, 2), {"x": np.array([2**40, -1])}, 1, 2)
    assert small["x"].dtype == np.float64 and small["x"].tolist() == [[0.0, 0.0], [2.0**40, -1.0]]
    unsigned = add_info(add_info({}, {"x": 0}, 0, 2), {"x": np.uint64(2**63 + 1)}, 1, 2)
    assert unsigned["x"].tolist() == [0, 2**63 + 1]
    single = add_info(add_info({}, {"x": np.float32(1)}, 0, 2), {"x": np.int32(2**24 + 1)}, 1, 2)
    assert single["x"].dtype == np.float64 and single["x"].tolist() == [1.0, 2**24 + 1]


def test_the_corners_a_mutation_pass_found_untested():
    """Mutations this guards (the mutmut pass over infos.py): ``final_obs`` batched like any key (each
    row's observation is kept whole, even when all are dicts); the exact-range check of `_wider` run on a
    float array (``int(inf)`` raised); equal ints beside a float taken for big ones; an empty int array
    beside float ones; the rows of batched dicts that had none given an empty dict instead of None; an int
    beyond 64 bits in a key's first row given None, not 0, in the rows without it."""
    first, second = {"b": np.ones(1)}, {"b": np.zeros(1)}
    batched = batch_infos([(0, {"final_obs": first}), (1, {"final_obs": second})], 2)
    assert batched["final_obs"].dtype == object and batched["final_obs"][0] is first
    assert batched["final_obs"][1] is second
    infinite = add_info(add_info({}, {"x": np.float32(np.inf)}, 0, 2), {"x": 0.1}, 1, 2)
    assert infinite["x"].dtype == np.float64 and infinite["x"].tolist() == [math.inf, 0.1]
    zeros = add_info(add_info({}, {"x": 0}, 0, 2), {"x": 0.5}, 1, 2)
    assert zeros["x"].dtype == np.float64 and zeros["x"].tolist() == [0.0, 0.5]
    empty = add_info(add_info({}, {"x": np.zeros(0)}, 0, 2), {"x": np.zeros(0, dtype=np.int64)}, 1, 2)
    assert empty["x"].dtype == np.float64 and empty["x"].shape == (2, 0)
    # A key of the info's own named like a mask ("_p") is never widened up front (as in gymnasium, it may
    # be the mask of a key "p"): text that its int array cannot take makes it objects then.
    own = add_info(add_info({}, {"_p": 7}, 0, 3), {"_p": "text"}, 1, 3)
    assert own["_p"].tolist() == [7, "text", 0] and own["__p"].tolist() == [True, True, False]
    small = add_info(add_info({}, {"x": np.int8(3)}, 0, 2), {"x": 1000}, 1, 2)  # int8's range, not int64's
    assert small["x"].dtype == np.int64 and small["x"].tolist() == [3, 1000]
    gap = add_info(add_info({}, {"k": {"x": 1}}, 0, 3), {"k": np.zeros(2)}, 2, 3)
    assert gap["k"][0] == {"x": 1} and gap["k"][1] is None and gap["_k"].tolist() == [True, False, True]
    # The rows without a key hold its first value's zero (0 for an int, None for objects), whichever row
    # turns out to need objects: an int beyond 64 bits, first or later.
    first = add_info(add_info({}, {"x": 2**70}, 0, 3), {"x": 5}, 2, 3)
    later = add_info(add_info({}, {"x": 5}, 0, 3), {"x": 2**70}, 2, 3)
    assert first["x"].tolist() == [2**70, 0, 5] and later["x"].tolist() == [5, 0, 2**70]


def test_numbers_beyond_a_float16_say_nothing_while_they_are_checked():
    """Checking whether a float16 array holds an int (a Python one or numpy's) overflows numpy's cast, on
    purpose: no RuntimeWarning may reach the user (mutants that dropped ``errstate(over="ignore")`` left
    every value kept and the tests passing)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        python = add_info(add_info({}, {"x": np.float16(1)}, 0, 2), {"x": 70_000}, 1, 2)
        arrays = add_info(
            add_info({}, {"x": np.zeros(2, np.float16)}, 0, 2), {"x": np.array([70_000, 1])}, 1, 2
        )
        floats = add_info(add_info({}, {"x": np.float16(1)}, 0, 2), {"x": 1e6}, 1, 2)
    assert python["x"].tolist() == [1.0, 70_000] and arrays["x"][1].tolist() == [70_000, 1]
    assert floats["x"].dtype == np.float64 and floats["x"].tolist() == [1.0, 1e6]
