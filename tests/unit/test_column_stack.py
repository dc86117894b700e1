"""ColumnStack: the stacked profile vectors, dense or sparse by size and density."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.filters.errors import ParameterError
from sift.filters.sparse import ColumnStack, nonzero_2d, stack_row_refs, stack_rows, take_rows

F = 64  # hashed columns in these small cases


def _vector(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    cols = np.sort(rng.choice(F, size=n, replace=False))
    return cols, rng.normal(size=n)


def _docs(rng: np.random.Generator, m: int) -> sp.csr_matrix:
    X = sp.random(m, F, density=0.2, random_state=np.random.RandomState(int(rng.integers(2**31))), format="csr")
    return sp.csr_matrix(X)


def _expected(vectors: list[tuple[np.ndarray, np.ndarray]], X: sp.csr_matrix) -> np.ndarray:
    W = np.zeros((F, len(vectors)))
    for j, (cols, vals) in enumerate(vectors):
        W[cols, j] = vals
    return np.asarray(X @ W)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), sizes=st.lists(st.integers(0, F), min_size=1, max_size=6),
       changes=st.lists(st.tuples(st.integers(0, 5), st.integers(0, F)), max_size=6))
def test_dense_and_sparse_forms_give_the_same_products(seed: int, sizes: list[int],
                                                       changes: list[tuple[int, int]]) -> None:
    """Forced dense, forced sparse and the automatic choice agree bit for bit, through
    replacements that grow the union, and equal the product with the written-out matrix."""
    rng = np.random.default_rng(seed)
    vectors = [_vector(rng, n) for n in sizes]
    stacks = {
        "dense": ColumnStack(F, vectors, dense_limit=10**9),
        "sparse": ColumnStack(F, vectors, dense_limit=0, dense_density=2.0),
        "auto": ColumnStack(F, vectors, dense_limit=0),
    }
    X = _docs(rng, 7)
    for j, n in [(0, 0), *changes]:
        j %= len(vectors)
        vectors[j] = _vector(rng, n)
        for s in stacks.values():
            s.replace(j, *vectors[j])
        out = {k: s.product(X) for k, s in stacks.items()}
        assert isinstance(stacks["dense"].matrix(), np.ndarray)
        W = stacks["sparse"].matrix()
        assert sp.issparse(W) or W.size == 0  # an empty stack has no cell to store
        assert np.array_equal(out["dense"], out["sparse"])
        assert np.array_equal(out["auto"], out["sparse"])
        assert out["sparse"] == pytest.approx(_expected(vectors, X))


def test_a_stack_goes_dense_when_its_entries_fill_a_third_of_the_cells() -> None:
    rng = np.random.default_rng(0)
    full = [(np.arange(F), rng.normal(size=F)) for _ in range(4)]  # every cell stored
    # one entry each, beside one vector over every column: 68 of 5 x 64 cells (21 %)
    thin = [*((np.array([j]), np.array([1.0])) for j in range(4)), (np.arange(F), np.ones(F))]
    assert isinstance(ColumnStack(F, full, dense_limit=0).matrix(), np.ndarray)
    assert sp.issparse(ColumnStack(F, thin, dense_limit=0).matrix())
    assert isinstance(ColumnStack(F, thin, dense_limit=0, dense_density=0.2).matrix(), np.ndarray)
    # nor beyond dense_max cells, however dense
    assert sp.issparse(ColumnStack(F, full, dense_limit=0, dense_max=F * 4 - 1).matrix())


def test_a_dense_stack_turns_sparse_when_replacements_thin_it_out() -> None:
    rng = np.random.default_rng(1)
    stack = ColumnStack(F, [(np.arange(F), rng.normal(size=F)) for _ in range(3)], dense_limit=0)
    assert isinstance(stack.matrix(), np.ndarray)
    for j in range(3):
        stack.replace(j, np.array([j]), np.array([2.0]))
    X = _docs(rng, 5)
    assert sp.issparse(stack.matrix())
    expected = np.zeros((5, 3))
    for j in range(3):
        expected[:, j] = 2.0 * X[:, j].toarray().ravel()
    assert np.array_equal(stack.product(X), expected)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), rows=st.lists(st.integers(0, 4), min_size=1, max_size=8),
       unsorted=st.booleans())
def test_stack_rows_equals_scipy_vstack(seed: int, rows: list[int], unsorted: bool) -> None:
    """The judgment batches' row stacking: the same matrix as ``sp.vstack`` entry for
    entry (values, column order within rows, row pointers), empty blocks and rows with
    unsorted columns included; the inputs are left as they were."""
    rng = np.random.default_rng(seed)
    blocks = [_docs(rng, m) for m in rows]
    if unsorted:
        for b in blocks:
            for r in range(b.shape[0]):
                lo, hi = b.indptr[r], b.indptr[r + 1]
                b.indices[lo:hi] = b.indices[lo:hi][::-1].copy()
                b.data[lo:hi] = b.data[lo:hi][::-1].copy()
    before = [(b.data.copy(), b.indices.copy(), b.indptr.copy()) for b in blocks]
    got = stack_rows(blocks)
    want = sp.vstack(blocks, format="csr")
    assert got.shape == want.shape
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data)
    for b, (d, i, p) in zip(blocks, before, strict=True):
        assert np.array_equal(b.data, d) and np.array_equal(b.indices, i) and np.array_equal(b.indptr, p)


def test_stack_rows_falls_back_to_scipy_for_other_inputs() -> None:
    a = sp.csr_matrix(np.array([[1.0, 0.0, 2.0]]))
    b = sp.coo_matrix(np.array([[0.0, 3.0, 0.0]]))
    assert stack_rows([a, b]).toarray().tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
    with pytest.raises(ValueError, match="incompatible"):  # scipy's own, as vstack's
        stack_rows([a, sp.csr_matrix(np.ones((1, 4)))])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 7), m=st.integers(0, 9),
       density=st.floats(0.0, 1.0), layout=st.sampled_from(["C", "F", "strided"]))
def test_nonzero_2d_equals_numpy_nonzero(seed: int, n: int, m: int, density: float, layout: str) -> None:
    """Row and column indices in numpy's (row-major) order, for C-ordered, Fortran-ordered
    and strided views, empty shapes included; the mask is left as it was."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, 2 * m if layout == "strided" else m)) < density
    if layout == "F":
        mask = np.asfortranarray(mask)
    elif layout == "strided":
        mask = mask[:, ::2]
    before = mask.copy()
    rows, cols = nonzero_2d(mask)
    want_rows, want_cols = np.nonzero(mask)
    assert np.array_equal(rows, want_rows) and np.array_equal(cols, want_cols)
    assert rows.dtype == want_rows.dtype and cols.dtype == want_cols.dtype
    assert np.array_equal(mask, before)


def test_nonzero_2d_refuses_other_dimensions() -> None:
    with pytest.raises(ParameterError, match="2-D"):
        nonzero_2d(np.ones(3, dtype=bool))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 6), m=st.integers(1, 9), k=st.integers(0, 12),
       layout=st.sampled_from(["C", "F", "strided", "broadcast"]))
def test_take_rows_equals_take_along_axis(seed: int, n: int, m: int, k: int, layout: str) -> None:
    """The same values and dtype as ``np.take_along_axis(A, idx, axis=1)`` for C-ordered,
    Fortran-ordered and strided arrays and broadcast indices; the inputs are left as
    they were."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, 2 * m if layout == "strided" else m))
    if layout == "F":
        A = np.asfortranarray(A)
    elif layout == "strided":
        A = A[:, ::2]
    idx = rng.integers(0, m, size=(n, k))
    if layout == "broadcast":
        idx = np.broadcast_to(rng.integers(0, m, size=(1, k)), (n, k))
    before_a, before_i = A.copy(), idx.copy()
    got = take_rows(A, idx)
    want = np.take_along_axis(A, idx, axis=1)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert np.array_equal(A, before_a) and np.array_equal(idx, before_i)


def test_take_rows_refuses_what_take_along_axis_refuses() -> None:
    A = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ParameterError, match="out of range"):
        take_rows(A, np.array([[0], [3]]))
    with pytest.raises(ParameterError, match="out of range"):
        take_rows(A, np.array([[-1], [0]]))
    with pytest.raises(ParameterError, match="do not match"):
        take_rows(A, np.array([[0]]))


def test_stack_row_refs_equals_vstack_of_row_slices() -> None:
    rng = np.random.default_rng(0)
    mats = [sp.random(5, 50, density=0.2, format="csr", random_state=s) for s in range(3)]
    mats.append(sp.csr_matrix((2, 50)))  # empty rows
    rows = [(mats[int(rng.integers(4))], int(rng.integers(2))) for _ in range(20)]
    got = stack_row_refs(rows)
    want = sp.vstack([X[i] for X, i in rows], format="csr")
    assert got.shape == want.shape and (got != want).nnz == 0
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    with pytest.raises(ParameterError, match="columns"):
        stack_row_refs([(mats[0], 0), (sp.csr_matrix((1, 7)), 0)])
    with pytest.raises(ParameterError, match="at least one"):
        stack_row_refs([])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(0, 12), density=st.floats(0.0, 0.6),
       k=st.integers(0, F))
def test_restrict_equals_scipy_column_selection(seed: int, n: int, density: float, k: int) -> None:
    """``restrict(X, cols)`` is ``X[:, cols]``: the same entries in the same order (rows
    left empty included), for columns in any order."""
    from sift.filters.sparse import restrict

    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(sp.random(n, F, density=density,
                                random_state=np.random.RandomState(seed), format="csr"))
    cols = rng.permutation(F)[:k]
    got = restrict(X, cols)
    want = sp.csr_matrix(X[:, cols]) if k else sp.csr_matrix((n, 0))
    want.sort_indices()
    got_sorted = got.copy()
    got_sorted.sort_indices()
    assert got.shape == want.shape
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got_sorted.indices, want.indices)
    assert np.array_equal(got_sorted.data, want.data)
    # each row keeps the order of its entries in X (its columns' order there)
    for i in range(n):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        order = [c for c in X.indices[lo:hi] if c in set(cols.tolist())]
        assert got.indices[got.indptr[i]:got.indptr[i + 1]].tolist() == \
            [int(np.flatnonzero(cols == c)[0]) for c in order]
