"""Sparse helpers that never touch all ``n_features`` hashed columns.

With ``2**20`` hashed columns, any CSR matrix *with that many rows* (a
transposed model, a column vector) costs megabytes and milliseconds just for its
index pointer. Models therefore work on the few columns they use: documents are
restricted to a sorted array of columns (``restrict``), then multiplied by
small dense or sparse matrices over those columns.

>>> import numpy as np, scipy.sparse as sp
>>> X = sp.csr_matrix(np.array([[1.0, 0, 2.0, 0], [0, 3.0, 0, 4.0]]))
>>> restrict(X, np.array([2, 3])).toarray().tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray


_SCRATCH: dict[int, NDArray[np.int32]] = {}


def _scratch(n_features: int) -> NDArray[np.int32]:
    """A reusable column -> position table, all -1 between uses (single-threaded use)."""
    lut = _SCRATCH.get(n_features)
    if lut is None:
        lut = _SCRATCH[n_features] = np.full(n_features, -1, dtype=np.int32)
    return lut


def restrict(X: sp.csr_matrix, cols: NDArray[np.integer[Any]]) -> sp.csr_matrix:
    """Columns ``cols`` (sorted, unique) of ``X``, as an ``n x len(cols)`` CSR matrix.

    Uses a scratch look-up table of one int32 per column: setting and clearing it
    costs ``O(len(cols))``, the gather ``O(nnz(X))``; no binary search.
    """
    X = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
    n = X.shape[0]
    k = int(cols.size)
    if k == 0 or X.nnz == 0:
        return sp.csr_matrix((n, k), dtype=np.float64)
    lut = _scratch(X.shape[1])
    lut[cols] = np.arange(k, dtype=np.int32)
    try:
        pos = lut[X.indices]
    finally:
        lut[cols] = -1
    return _build(X, pos, pos >= 0, k)


def _build(X: sp.csr_matrix, pos: NDArray[Any], keep: NDArray[np.bool_], k: int) -> sp.csr_matrix:
    n = X.shape[0]
    rows = np.repeat(np.arange(n), np.diff(X.indptr))
    counts = np.bincount(rows[keep], minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return sp.csr_matrix((X.data[keep], pos[keep], indptr), shape=(n, k))


def rowwise_sq_norms(X: sp.csr_matrix) -> NDArray[np.float64]:
    """Squared Euclidean length of each row."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return np.bincount(rows, weights=X.data**2, minlength=X.shape[0]).astype(np.float64)


def dense_or_sparse(n_rows: int, n_cols: int, rows: NDArray[np.int64], cols: NDArray[np.int64],
                    vals: NDArray[np.float64], *, dense_limit: int = 20_000_000) -> Any:
    """A (n_rows x n_cols) matrix from unique (row, col) triplets: dense when small enough,
    else CSR."""
    if n_rows * n_cols <= dense_limit:
        out = np.zeros((n_rows, n_cols))
        out[rows, cols] = vals
        return out
    return sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n_cols))


def matmul_dense(A: sp.csr_matrix, B: Any) -> NDArray[np.float64]:
    """``A @ B`` as a dense array, whether ``B`` is dense or sparse."""
    out = A @ B
    if sp.issparse(out):
        return np.asarray(out.toarray(), dtype=np.float64)
    return np.asarray(out, dtype=np.float64)
