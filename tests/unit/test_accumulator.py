"""SparseAccumulator.add_rows against a plain reference: the rows picked by the mask,
each times its weight, summed into dense vectors (the same sums bit for bit as adding
``X[rows]`` entry by entry, the way the accumulator did before it stopped indexing
with scipy)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.filters.accumulator import SparseAccumulator


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 10_000), n_rows=st.integers(1, 6), batches=st.integers(1, 3))
def test_add_rows_sums_the_masked_rows(seed: int, n_rows: int, batches: int) -> None:
    rng = np.random.default_rng(seed)
    acc = SparseAccumulator(2, capacity=4)  # small: the tables grow on the way
    want = np.zeros((2, 50))
    for _ in range(batches):
        X = sp.random(n_rows, 50, density=0.2, format="csr", random_state=rng)
        w = rng.uniform(0.1, 2.0, n_rows)
        mask = rng.random(n_rows) < 0.5
        which = int(rng.integers(0, 2))
        X_before, w_before, mask_before = X.copy(), w.copy(), mask.copy()
        total = acc.add_rows(which, X, w, mask)
        rows = np.flatnonzero(mask)
        assert total == float(w[rows].sum())
        sub = X[rows]  # the reference: scipy's row indexing, entries in order
        np.add.at(want[which], sub.indices, sub.data * np.repeat(w[rows], np.diff(sub.indptr)))
        # inputs untouched
        assert np.array_equal(X.toarray(), X_before.toarray())
        assert np.array_equal(w, w_before) and np.array_equal(mask, mask_before)
    got = np.zeros((2, 50))
    got[:, acc.features] = acc.sums
    np.testing.assert_array_equal(got, want)


def test_add_rows_with_no_row_picked_adds_nothing() -> None:
    acc = SparseAccumulator(1)
    X = sp.csr_matrix(np.array([[1.0, 2.0]]))
    assert acc.add_rows(0, X, np.ones(1), np.zeros(1, bool)) == 0.0
    assert acc.size == 0
