"""``insert_sorted`` and ``isin_sorted`` (sift.filters.sparse) against the numpy
functions they replace on the judgment path, with few and many new values (slices and
mask) and short and long arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.filters.sparse import insert_sorted, isin_sorted

ints = st.lists(st.integers(-50, 50), max_size=60)


@settings(max_examples=300, deadline=None)
@given(base=ints, new=st.lists(st.integers(-60, 60), max_size=40),
       long=st.booleans(), dtype=st.sampled_from([np.int64, np.int32, np.float64]))
def test_insert_sorted_is_np_insert(base: list[int], new: list[int], long: bool, dtype: type) -> None:
    # long: past 10,000 values, where up to 16 new ones go in by slices
    a = np.sort(np.array(base + (list(range(-70, 11_000)) if long else []), dtype=dtype))
    v = np.sort(np.array(new, dtype=dtype))
    at = np.searchsorted(a, v)
    a_before = a.copy()
    got = insert_sorted(a, at, v)
    want = np.insert(a, at, v)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, a_before)  # the input is not modified


def test_insert_sorted_ties_keep_the_given_order() -> None:
    # equal positions: values go in in the order given, as with np.insert
    got = insert_sorted(np.array([10, 20]), np.array([1, 1, 1]), np.array([11, 12, 13]))
    assert got.tolist() == [10, 11, 12, 13, 20]
    assert insert_sorted(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)).size == 0


@settings(max_examples=300, deadline=None)
@given(a=ints, b=ints)
def test_isin_sorted_is_np_isin(a: list[int], b: list[int]) -> None:
    x = np.array(a, dtype=np.int64)
    y = np.sort(np.array(b, dtype=np.int64))
    np.testing.assert_array_equal(isin_sorted(x, y), np.isin(x, y))
    two_d = np.resize(x, (3, x.size))  # any shape, as np.isin
    np.testing.assert_array_equal(isin_sorted(two_d, y), np.isin(two_d, y))
