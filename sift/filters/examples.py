"""The labelled examples a profile keeps: the judged set.

TROT re-thresholds on these, kNN votes with them, and the leave-one-out scores
come from them. The set is capped (``capacity``); when full, the eviction policy
drops pseudolabelled examples first (oldest first), then the oldest real
judgments. Models that keep running sums (Rocchio, Kantor) have already learned
from an evicted example, so eviction only bounds the cost of re-thresholding and
the kNN pool; it never changes those models.

The vectors are stored over the set's own *compact* columns (the hashed columns
its examples use, numbered in order of first use), so that the products a
re-threshold needs (every example against a model's coefficients,
:meth:`ExampleSet.products`) are one CSR product over ``nnz`` entries, with no
gather over the ``2**20`` hashed columns and no matrix rebuilt per judgment.
``X`` (hashed columns) is derived from it when asked for, and cached.

>>> import numpy as np, scipy.sparse as sp
>>> ex = ExampleSet(capacity=2, n_features=4)
>>> ex.add(sp.csr_matrix(np.eye(3, 4)), np.array([1, -1, -1]), np.ones(3), np.array([True, False, True]))
1
>>> ex.labels.tolist(), ex.real.tolist()
([1, -1], [True, True])
>>> ex.products(np.array([0, 2]), np.array([[5.0], [7.0]])).ravel().tolist()
[5.0, 7.0]
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from sift.filters.base import MAX_WEIGHT
from sift.filters.errors import ParameterError, StateError
from sift.filters.sparse import dense_product, insert_sorted, rows_equal, unique_inverse
from sift.filters.state import decode_array, decode_count, decode_csr, encode_array, encode_csr

try:  # the kernel behind scipy's CSR @ vector, called without building a matrix per call
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
except ImportError:  # pragma: no cover - a scipy without it falls back to csr_matrix @ x
    _csr_matvec = None


class _Compact:
    """Rows over compact columns: ``data``, ``ind`` (compact ids), ``indptr``, and
    ``cols`` (compact id -> hashed column). Never mutated: every change makes a new one,
    so several example sets may share one (full training)."""

    __slots__ = ("__weakref__", "_buf", "_mat", "_mt", "_off", "_sq", "colmap", "cols", "data", "floor",
                 "ind", "indptr", "sorted_cols", "sorted_ids")

    def __init__(self, data: NDArray[np.float64], ind: NDArray[np.int32], indptr: NDArray[np.int64],
                 cols: NDArray[np.int64], floor: int | None = None,
                 index: tuple[NDArray[np.int64], NDArray[np.int32]] | None = None,
                 buf: _Buffer | None = None, off: int = 0, colmap: object | None = None) -> None:
        self.data = data
        self.ind = ind
        self.indptr = indptr
        self.cols = cols
        #: the growable storage ``data`` and ``ind`` are views of (``None``: they own
        #: their arrays), and where they start in it
        self._buf = buf
        self._off = off
        #: replaced whenever compact ids are renumbered (ids of a column never change
        #: while it stays the same object)
        self.colmap = object() if colmap is None else colmap
        #: columns in use when last counted: ``cols`` is compacted once it is twice that
        self.floor = int(cols.size) if floor is None else floor
        if index is None:
            order = np.argsort(cols, kind="stable")
            index = (cols[order], order.astype(np.int32))
        #: ``cols`` sorted, with the compact id of each, for binary-search look-ups
        self.sorted_cols, self.sorted_ids = index
        self._mat: sp.csr_matrix | None = None
        self._sq: sp.csr_matrix | None = None
        self._mt: sp.csr_matrix | None = None

    @property
    def n_rows(self) -> int:
        return int(self.indptr.size - 1)

    def matrix(self, squared: bool = False) -> sp.csr_matrix:
        shape = (self.n_rows, max(int(self.cols.size), 1))
        if squared:
            if self._sq is None:
                self._sq = sp.csr_matrix((self.data * self.data, self.ind, self.indptr), shape=shape)
            return self._sq
        if self._mat is None:
            self._mat = sp.csr_matrix((self.data, self.ind, self.indptr), shape=shape)
        return self._mat

    def transposed(self) -> sp.csr_matrix:
        """The matrix transposed (compact columns x rows), built once."""
        if self._mt is None:
            self._mt = self.matrix().T.tocsr()
        return self._mt

    def restrict(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """The rows of ``X`` (hashed columns) over the compact columns; entries keep
        their order, columns no example uses are dropped."""
        ids = self.ids(X.indices)
        keep = ids >= 0
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        indptr = np.zeros(X.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(rows[keep], minlength=X.shape[0]), out=indptr[1:])
        return sp.csr_matrix((np.asarray(X.data, np.float64)[keep], ids[keep], indptr),
                             shape=(X.shape[0], max(int(self.cols.size), 1)))

    @classmethod
    def empty(cls) -> _Compact:
        return cls(np.zeros(0), np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(0, np.int64))

    @classmethod
    def from_csr(cls, X: sp.csr_matrix) -> _Compact:
        if not X.has_sorted_indices:  # canonical entry order (see ExampleSet.self_dots)
            X = X.sorted_indices()
        cols, inv = np.unique(X.indices, return_inverse=True)
        return cls(np.asarray(X.data, np.float64).copy(), inv.astype(np.int32).ravel(),
                   X.indptr.astype(np.int64), cols.astype(np.int64))

    def ids(self, columns: NDArray[Any]) -> NDArray[np.int32]:
        """Compact id of each hashed column (``-1`` when no example uses it)."""
        cols = np.asarray(columns, dtype=np.int64)
        if self.sorted_cols.size == 0:
            return np.full(cols.size, -1, dtype=np.int32)
        pos = np.searchsorted(self.sorted_cols, cols)
        np.minimum(pos, self.sorted_cols.size - 1, out=pos)
        return np.where(self.sorted_cols[pos] == cols, self.sorted_ids[pos], -1).astype(np.int32)

    def append(self, X: sp.csr_matrix) -> _Compact:
        """A new compact matrix with the rows of ``X`` (hashed columns) appended.

        The entries go into a growable buffer shared with this matrix: when this matrix
        ends where the buffer's filled part ends they are written after it (the rows
        this matrix sees do not change), otherwise the live entries are copied to a new
        buffer first. So a judgment costs time proportional to the document, not to
        the set.
        """
        if not X.has_sorted_indices:  # canonical entry order: products then do not depend on it
            X = X.sorted_indices()
        ids = self.ids(X.indices)
        cols = self.cols
        index = (self.sorted_cols, self.sorted_ids)
        new = ids < 0
        if new.any():
            fresh, inv = unique_inverse(X.indices[new].astype(np.int64))  # one row: no sort
            fresh_ids = np.arange(cols.size, cols.size + fresh.size, dtype=np.int32)
            ids[new] = fresh_ids if inv is None else fresh_ids[inv]
            cols = np.concatenate([cols, fresh])
            at = np.searchsorted(self.sorted_cols, fresh)
            index = (insert_sorted(self.sorted_cols, at, fresh), insert_sorted(self.sorted_ids, at, fresh_ids))
        nnz, extra = int(self.data.size), int(X.indptr[-1])
        buf, off = self._buf, self._off
        if buf is None or buf.used != off + nnz or off + nnz + extra > buf.data.size:
            total = nnz + extra
            buf = _Buffer(total + max(total // 4, 4096))
            buf.data[:nnz] = self.data
            buf.ind[:nnz] = self.ind
            off = 0
        end = off + nnz + extra
        buf.data[off + nnz : end] = X.data[: extra]
        buf.ind[off + nnz : end] = ids[: extra]
        buf.used = end
        indptr = np.concatenate([self.indptr, nnz + X.indptr[1:].astype(np.int64)])
        return _Compact(buf.data[off:end], buf.ind[off:end], indptr, cols, self.floor, index,
                        buf, off, self.colmap)

    def keep_rows(self, keep: NDArray[np.bool_]) -> _Compact:
        """A new compact matrix with only the rows where ``keep``; columns no longer used
        are dropped once ``cols`` has doubled since they were last counted, so ``cols``
        stays bounded and the count is amortised."""
        lengths = np.diff(self.indptr)
        first_kept = int(np.argmax(keep)) if keep.any() else keep.size
        buf, off = None, 0
        if keep[first_kept:].all():  # a prefix is dropped: slices, no mask
            start = int(self.indptr[first_kept])
            data, ind = self.data[start:], self.ind[start:]
            indptr = self.indptr[first_kept:] - start
            buf, off = self._buf, self._off + start  # the buffer's tail stays this one's
        else:
            mask = np.repeat(keep, lengths)
            n = int(np.count_nonzero(mask))
            # into a buffer with room to append in place (see append)
            buf, off = _Buffer(n + max(n // 4, 4096)), 0
            data = np.compress(mask, self.data, out=buf.data[:n])
            ind = np.compress(mask, self.ind, out=buf.ind[:n])
            buf.used = n
            indptr = np.zeros(int(keep.sum()) + 1, np.int64)
            np.cumsum(lengths[keep], out=indptr[1:])
        cols, floor, colmap = self.cols, self.floor, self.colmap
        index: tuple[NDArray[np.int64], NDArray[np.int32]] | None = (self.sorted_cols, self.sorted_ids)
        if cols.size > 2 * floor + 1024:
            used, inv = np.unique(ind, return_inverse=True)
            floor = int(used.size)
            if 2 * used.size < cols.size:
                cols = cols[used]
                ind = inv.astype(np.int32).ravel()
                index = None
                buf, off, colmap = None, 0, None
        return _Compact(data, ind, indptr, cols, floor, index, buf, off, colmap)


class _Buffer:
    """Storage for the entries of compact matrices: ``used`` entries are filled; the
    compact matrix whose entries end there may append in place."""

    __slots__ = ("data", "ind", "used")

    def __init__(self, size: int) -> None:
        self.data = np.empty(size, np.float64)
        self.ind = np.empty(size, np.int32)
        self.used = 0


_SHARED: list[tuple[weakref.ref[sp.csr_matrix], _Compact]] = []

#: products an example set remembers (a few vectors per model) and the key of its norms
_MEMO_SIZE = 8
_NORMS = ("examples", "row norms")


def _matvec(indptr: NDArray[np.int64], ind: NDArray[np.int32], data: NDArray[np.float64],
            x: NDArray[np.float64], first: int, n_rows: int) -> NDArray[np.float64]:
    """``M @ x`` for the CSR rows ``first..first + n_rows`` (absolute ``indptr``), as
    scipy computes it (each row's terms added in entry order), without building a
    matrix: scipy's own kernel when it can be reached, else a CSR product."""
    y = np.zeros(n_rows)
    if n_rows == 0:
        return y
    ptr = indptr[first : first + n_rows + 1]
    if _csr_matvec is not None:
        p32 = ptr.astype(np.int32) if ptr[-1] < 2**31 - 1 else ptr
        j = ind if p32.dtype == ind.dtype else ind.astype(p32.dtype)
        _csr_matvec(n_rows, x.size, p32, j, data, x, y)
        return y
    lo = int(ptr[0])
    M = sp.csr_matrix((data[lo : int(ptr[-1])], ind[lo : int(ptr[-1])], ptr - lo), shape=(n_rows, x.size))
    return np.asarray(M @ x, dtype=np.float64)


def _compact_of(X: sp.csr_matrix) -> _Compact:
    """The compact form of a shared matrix, computed once per matrix (by identity)."""
    for ref, comp in _SHARED:
        if ref() is X:
            return comp
    _SHARED[:] = [e for e in _SHARED if e[0]() is not None]
    comp = _Compact.from_csr(X)
    _SHARED.append((weakref.ref(X), comp))
    return comp


class ExampleSet:
    """A capped set of labelled example vectors.

    Parameters
    ----------
    capacity
        Largest number of examples kept, or ``None`` for no cap.
    n_features
        Number of columns of the vectors.

    Attributes
    ----------
    X : csr_matrix of shape (m, n_features)
        The vectors over hashed columns (derived from the compact form and cached).
    labels : ndarray of int8, ``1`` relevant and ``-1`` non-relevant
    weights : ndarray of float64
    real : ndarray of bool, ``True`` for real judgments, ``False`` for pseudolabels
    seq : ndarray of int64, insertion order (for eviction)

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> ex, X = ExampleSet(3, 4), sp.csr_matrix(np.eye(4))
    >>> ex.add(X[:2], np.array([1, -1], dtype=np.int8), np.ones(2), np.ones(2, bool))
    0
    >>> ex.add(X[2:], np.array([-1, -1], dtype=np.int8), np.full(2, 0.1), np.zeros(2, bool))
    1
    >>> ex.labels.tolist(), ex.real.tolist()  # over capacity: a pseudolabel went first
    ([1, -1, -1], [True, True, False])
    >>> ex.add(X[3:], np.array([1], dtype=np.int8), np.ones(1), np.ones(1, bool))
    1
    >>> ex.labels.tolist(), ex.real.tolist()
    ([1, -1, 1], [True, True, True])
    """

    def __init__(self, capacity: int | None, n_features: int) -> None:
        if capacity is not None and not _positive_int(capacity):
            raise ParameterError(f"capacity must be a positive integer or None, got {capacity!r}")
        if not _positive_int(n_features):
            raise ParameterError(f"n_features must be a positive integer, got {n_features!r}")
        self.capacity = None if capacity is None else int(capacity)
        self.n_features = int(n_features)
        self._c: _Compact | None = _Compact.empty()
        self._X: sp.csr_matrix | None = None
        #: replaced whenever the vectors are replaced wholesale (not by add/evict), so
        #: derived data kept across judgments (kNN neighbour lists) knows to start over
        self.lineage = object()
        #: products remembered across judgments (see :meth:`cached_products`)
        self._memo: dict[Hashable, tuple[object, NDArray[np.int64], NDArray[np.float64]]] = {}
        self._tail: tuple[Any, ...] | None = None
        self._aligned: tuple[NDArray[np.int64], NDArray[np.int64],
                             tuple[NDArray[np.int64] | slice, int] | None] | None = None
        self._norms: NDArray[np.float64] | None = None
        self.labels: NDArray[np.int8] = np.zeros(0, np.int8)
        self.weights: NDArray[np.float64] = np.zeros(0, np.float64)
        self.real: NDArray[np.bool_] = np.zeros(0, bool)
        self.seq: NDArray[np.int64] = np.zeros(0, np.int64)
        self.next_seq = 0
        self.n_evicted = 0
        #: real examples among them (None: a state of before the forty-eighth session,
        #: which did not count them)
        self.n_evicted_real: int | None = 0

    def __len__(self) -> int:
        return int(self.labels.size)

    # -- the vectors ----------------------------------------------------------------
    @property
    def X(self) -> sp.csr_matrix:
        if self._X is None:
            c = self._compact()
            X = sp.csr_matrix((c.data, c.cols[c.ind].astype(np.int32), c.indptr),
                              shape=(c.n_rows, self.n_features))
            X.sort_indices()
            self._X = X
        return self._X

    @X.setter
    def X(self, value: sp.csr_matrix) -> None:
        value = value if isinstance(value, sp.csr_matrix) else sp.csr_matrix(value)
        self._X = value
        self._c = None
        self._norms = None
        self.lineage = object()

    @property
    def pool(self) -> object:
        """An object identifying the current vectors: equal (``is``) for example sets that
        share one matrix (full training), new after every change."""
        return self._compact()

    def _compact(self) -> _Compact:
        if self._c is None:
            assert self._X is not None
            self._c = _compact_of(self._X)
        return self._c

    def column_ids(self, columns: NDArray[Any]) -> tuple[NDArray[np.int32], object]:
        """Compact id of each hashed column (``-1`` when no example uses it) and the
        token of the numbering: ids are handed out in order of first use, so under the
        same token a column whose id is at least an earlier ``n_columns()`` was not in
        any example of that time."""
        c = self._compact()
        return c.ids(columns), c.colmap

    def column_map(self) -> tuple[object, int]:
        """The token of the compact numbering and the number of compact columns (see
        :meth:`column_ids`)."""
        c = self._compact()
        return c.colmap, int(c.cols.size)

    def compact_columns(self) -> NDArray[np.int64]:
        """The hashed column of each compact column (do not modify)."""
        return self._compact().cols

    def products(self, columns: NDArray[Any], values: NDArray[np.float64], *,
                 squared: bool = False) -> NDArray[np.float64]:
        """``X[:, columns] @ values`` for every example (``m x k``).

        ``columns`` are unique hashed columns and ``values`` has one row per column.
        With ``squared``, the examples' squared entries are used instead of ``X``.
        Each example's product adds its entries' terms in entry (column) order, so a
        product computed for some rows alone is bit-identical to the same rows of the
        product over all of them (:meth:`cached_products` relies on it).
        """
        c = self._compact()
        V = np.asarray(values, dtype=np.float64)
        V2 = V[:, None] if V.ndim == 1 else V if V.ndim == 2 else V.reshape(V.shape[0], -1)
        out = np.zeros((c.n_rows, V2.shape[1]))
        if c.n_rows == 0 or c.data.size == 0:
            return out
        ids = c.ids(np.asarray(columns)) if len(columns) else np.zeros(0, np.int32)
        ok = ids >= 0
        ids_ok = ids[ok]
        W = np.zeros(max(int(c.cols.size), 1))
        data = c.data * c.data if squared else c.data
        for k in range(V2.shape[1]):
            W[ids_ok] = V2[ok, k]
            out[:, k] = _matvec(c.indptr, c.ind, data, W, 0, c.n_rows)
        return out

    def cached_products(self, key: Hashable, columns: NDArray[Any], values: NDArray[np.float64], *,
                        squared: bool = False,
                        dense: Callable[[], NDArray[np.float64]] | None = None) -> NDArray[np.float64]:
        """``products(columns, values, squared=squared)`` for one vector, remembered
        under ``key`` across changes of the set.

        The caller promises that ``key`` determines the vector: equal keys mean that
        every column any example uses has the same value (columns of no example may
        differ). A remembered product is then reused for the examples it covered and
        computed only for the examples added since, bit-identically (see
        :meth:`products`). A set replaced wholesale forgets everything. ``dense``, if
        given, returns the vector over the compact columns (see :meth:`column_map`),
        used instead of looking ``columns`` up when every example needs the product.
        """
        c = self._compact()
        m = c.n_rows
        memo = self._memo.get(key)
        if memo is not None and memo[0] is self.lineage:
            found = self._align(memo[1])
            if found is not None:
                take, n_have = found
                out = np.empty(m)
                out[:n_have] = memo[2][take]
                if n_have < m:
                    out[n_have:] = self._tail_products(c, n_have, columns, values, squared)
                self._remember(key, out)
                return out
        if dense is not None:
            W = np.asarray(dense(), dtype=np.float64)
            data = c.data * c.data if squared else c.data
            out = _matvec(c.indptr, c.ind, data, W, 0, m) if m and c.data.size else np.zeros(m)
        else:
            out = self.products(columns, values, squared=squared).ravel()
        self._remember(key, out)
        return out

    def _align(self, seq: NDArray[np.int64]) -> tuple[NDArray[np.int64] | slice, int] | None:
        """Where the current examples were in an earlier state of the set (insertion
        numbers ``seq``): ``(rows of the earlier state, n)`` for the first ``n`` current
        examples, when all the others are newer; ``None`` otherwise."""
        cached = self._aligned
        if cached is not None and cached[0] is seq and cached[1] is self.seq:
            return cached[2]
        cur = self.seq
        m = cur.size
        found: tuple[NDArray[np.int64] | slice, int] | None = None
        if seq.size == 0 or m == 0:
            found = (slice(0, 0), 0)
        else:
            k = int(np.searchsorted(seq, cur[0]))
            n = min(seq.size - k, m)
            if np.array_equal(seq[k : k + n], cur[:n]) and (n == m or cur[n] > seq[-1]):
                found = (slice(k, k + n), n)  # a prefix dropped, rows appended: the usual case
            else:
                pos = np.minimum(np.searchsorted(seq, cur), seq.size - 1)
                have = seq[pos] == cur
                n_have = int(np.count_nonzero(have))
                # the examples not covered must be the newest (seq increases along the set)
                if not have[n_have:].any():
                    found = (pos[:n_have], n_have)
        self._aligned = (seq, cur, found)
        return found

    def _remember(self, key: Hashable, out: NDArray[np.float64]) -> None:
        self._memo.pop(key, None)
        self._memo[key] = (self.lineage, self.seq, out)
        while len(self._memo) > _MEMO_SIZE:
            del self._memo[next(iter(self._memo))]

    def _tail_products(self, c: _Compact, first: int, columns: NDArray[Any], values: NDArray[np.float64],
                       squared: bool) -> NDArray[np.float64]:
        """Products of the rows ``first..`` with one vector, each entry's value looked up
        by its hashed column (no dense vector over all compact columns). The look-up is
        kept for the next vector over the same columns."""
        lo, hi = int(c.indptr[first]), int(c.indptr[-1])
        t = self._tail
        if t is not None and t[0] is columns and t[1] is c and t[2] == first:
            hit, src, indptr, entries = t[3:]
        else:
            cols = np.asarray(columns, dtype=np.int64)
            entry_cols = c.cols[c.ind[lo:hi]]
            if cols.size and hi > lo:
                order = None if cols.size < 2 or bool(np.all(cols[1:] > cols[:-1])) else np.argsort(cols)
                sc = cols if order is None else cols[order]
                pos = np.minimum(np.searchsorted(sc, entry_cols), sc.size - 1)
                hit = sc[pos] == entry_cols
                src = pos[hit] if order is None else order[pos[hit]]
            else:
                hit, src = np.zeros(hi - lo, bool), np.zeros(0, np.int64)
            indptr = c.indptr[first:] - lo
            entries = np.arange(hi - lo, dtype=np.int32)
            self._tail = (columns, c, first, hit, src, indptr, entries)
        x = c.data[lo:hi]
        v = np.zeros(hi - lo)
        v[hit] = np.asarray(values, dtype=np.float64).ravel()[src]
        return _matvec(indptr, entries, x * x if squared else x, v, 0, c.n_rows - first)

    def dots(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """Dot products of the rows of ``X`` (hashed columns) with every example
        (``n x m``, dense)."""
        c = self._compact()
        if c.n_rows == 0:
            return np.zeros((X.shape[0], 0))
        Xr = c.restrict(sp.csr_matrix(X))
        if Xr.shape[0] <= 8 and c._mt is None:
            # A few rows against examples not transposed since they last changed (a
            # document scored right after judgments): one pass over the examples' rows
            # against the rows made dense, instead of transposing every example for
            # them. Each cell adds the same products in the same (column) order, the
            # other terms only adding zeros: the same bits (as in dots_to).
            W = Xr.T.toarray()
            return np.ascontiguousarray((c.matrix() @ W).T, dtype=np.float64)
        return dense_product(Xr, c.transposed())

    def self_dots(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Dot products of the examples ``rows`` with every example (``len(rows) x m``).

        Rows keep their entries sorted by column, so every way of computing a dot
        product here adds the same terms in the same order: the results are
        bit-identical to :meth:`dots_to` (kNN neighbour lists rely on it).
        """
        if len(rows) <= 8:
            return self.dots_to(rows).T.copy()
        c = self._compact()
        return dense_product(c.matrix()[rows], c.transposed())

    def dots_to(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Dot products of every example with the examples ``rows`` (``m x len(rows)``),
        each accumulated over the *every* side's entries in order, so that entry
        ``(i, j)`` is bit-identical to ``self_dots([i])[0, rows[j]]``."""
        c = self._compact()
        M = c.matrix()
        sub = M[rows]
        if len(rows) > 8:
            # a sparse product (the shared terms only): each cell adds the same products
            # in the same (column) order as the product with the rows made dense below,
            # whose other terms only add zeros, at a fraction of the work for many rows
            return dense_product(M, sp.csr_matrix(sub.T))
        W = np.zeros((M.shape[1], len(rows)))
        W[sub.indices, np.repeat(np.arange(len(rows)), np.diff(sub.indptr))] = sub.data
        return np.asarray(M @ W, dtype=np.float64)

    def row_norms(self) -> NDArray[np.float64]:
        """Euclidean length of each example vector."""
        if self._norms is None:
            c = self._compact()
            memo = self._memo.get(_NORMS)
            first = 0
            prev = np.zeros(0)
            if memo is not None and memo[0] is self.lineage:
                # the norms of the examples kept, the new (newest) ones computed
                found = self._align(memo[1])
                if found is not None:
                    take, first = found
                    prev = memo[2][take]
            lo = int(c.indptr[first])
            indptr = c.indptr[first:] - lo
            data = c.data[lo:]
            sq = np.zeros(c.n_rows - first)
            full = np.diff(indptr) > 0
            if full.any():
                # over the rows with entries only: a start at the end of ``data`` (trailing
                # empty rows) is out of reduceat's range, and an empty row's sum is 0; each
                # row still sums its own entries, in order
                sq[full] = np.add.reduceat(data * data, indptr[:-1][full])
            self._norms = np.concatenate([prev, np.sqrt(np.asarray(sq, dtype=np.float64))])
            self._remember(_NORMS, self._norms)
        return self._norms

    # -- adding and evicting ------------------------------------------------------------
    def add(
        self,
        X: sp.csr_matrix,
        labels: ArrayLike,
        weights: ArrayLike,
        real: ArrayLike,
        *,
        share: bool = False,
    ) -> int:
        """Append examples; return how many were evicted to respect the cap.

        Parameters
        ----------
        X : csr_matrix of shape (m, n_features)
            The vectors: finite values of at most ``MAX_WEIGHT`` (1e6) in magnitude, the
            bound profiles put on judged vectors. A column stored twice in a row is
            stored once, summed (in a copy), as profiles store it.
        labels : array-like of m numbers
            Exactly ``1`` (relevant) or ``-1`` (non-relevant).
        weights : array-like of m numbers
            Each in ``(0, MAX_WEIGHT]``.
        real : array-like of m booleans
            ``True`` for real judgments, ``False`` for pseudolabels.
        share : bool
            With ``share=True`` and an empty set, ``X`` itself is kept (not copied), so
            several profiles labelling the same training matrix share its memory.

        Every argument is checked before the set changes: a
        :class:`~sift.filters.errors.ParameterError` leaves it as it was, and the set
        holds only what :meth:`from_state` loads.
        """
        lab = _labels(labels)
        w = _weights(weights)
        r = _flags(real)
        Xc = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
        m = Xc.shape[0]
        if not (lab.size == w.size == r.size == m):
            raise ParameterError(f"got {m} rows but {lab.size} labels, {w.size} weights, {r.size} flags")
        if Xc.shape[1] != self.n_features:
            raise ParameterError(f"X must have {self.n_features} columns, got {Xc.shape[1]}")
        if m == 0:
            return 0
        if not Xc.has_canonical_format:  # each column once, as from_state requires
            Xc = Xc.copy()
            Xc.sum_duplicates()
        bad = first_bad_value(Xc.data)
        if bad is not None:
            raise ParameterError(f"X must hold finite values of at most {MAX_WEIGHT:g} in magnitude, "
                                 f"got {bad!r}")
        seq = np.arange(self.next_seq, self.next_seq + m, dtype=np.int64)
        self.next_seq += m
        if share and len(self) == 0:
            self.X = Xc
        else:
            self._c = self._compact().append(Xc)
            self._X = None
            self._norms = None
        self.labels = np.concatenate([self.labels, lab])
        self.weights = np.concatenate([self.weights, w])
        self.real = np.concatenate([self.real, r])
        self.seq = np.concatenate([self.seq, seq])
        return self._evict()

    def matching_rows(self, x: sp.csr_matrix, *, label: int | None = None, weight: float | None = None,
                      real: bool | None = None) -> NDArray[np.int64]:
        """The examples (row numbers, oldest first) whose vector is the one row ``x``
        exactly: the same columns and the same values (a column stored twice in ``x``
        counts summed, as :meth:`add` stores it), and, where given, whose label, weight and
        real flag are these.

        One vectorised comparison: the rows of ``x``'s length that pass the other tests
        are compared with ``x`` entry by entry at once, with no loop over rows.

        >>> ex = ExampleSet(None, 4)
        >>> X = sp.csr_matrix(np.array([[1.0, 0, 2, 0], [0, 1, 0, 0], [1, 0, 2, 0]]))
        >>> _ = ex.add(X, [1, -1, -1], np.ones(3), np.ones(3, bool))
        >>> ex.matching_rows(X[0]).tolist(), ex.matching_rows(X[0], label=-1).tolist()
        ([0, 2], [2])
        """
        xc = x if isinstance(x, sp.csr_matrix) else sp.csr_matrix(x)
        if xc.shape != (1, self.n_features):
            raise ParameterError(f"x must be one row of {self.n_features} columns, got shape {xc.shape}")
        if not xc.has_canonical_format:
            xc = xc.copy()
            xc.sum_duplicates()
        c = self._compact()
        ok: NDArray[np.bool_] = np.ones(len(self), dtype=bool)
        if label is not None:
            ok &= self.labels == label
        if weight is not None:
            ok &= self.weights == weight
        if real is not None:
            ok &= self.real == bool(real)
        rows: NDArray[np.int64] = np.flatnonzero(ok).astype(np.int64)
        ids = c.ids(xc.indices)  # the rows keep their entries in column order, as xc
        if rows.size == 0 or np.any(ids < 0):  # a column no example has: none equal
            return np.zeros(0, np.int64)
        return rows[rows_equal(c.indptr, c.ind, c.data, rows, ids, xc.data)]

    def set_label(self, row: int, label: int) -> None:
        """Give example ``row`` the label ``label`` (1 or -1): a corrected judgment. Its
        place, vector, weight, flag and insertion number stay, and so does everything
        remembered for the set (products, norms, kNN neighbour lists: none depends on
        labels; what does reads :attr:`labels` when asked). The array is replaced, not
        changed in place, so a copy of it taken before stays as it was."""
        lab = _labels([label])
        if isinstance(row, bool) or not isinstance(row, numbers.Integral) or not 0 <= int(row) < len(self):
            raise ParameterError(f"row must be an example's number in [0, {len(self)}), got {row!r}")
        labels = self.labels.copy()
        labels[int(row)] = lab[0]
        self.labels = labels

    def _evict(self) -> int:
        if self.capacity is None or len(self) <= self.capacity:
            return 0
        excess = len(self) - self.capacity
        # pseudolabels first, then oldest (the rows are in insertion order)
        drop = np.flatnonzero(~self.real)[:excess]
        if drop.size < excess:
            drop = np.concatenate([drop, np.flatnonzero(self.real)[: excess - drop.size]])
        keep = np.ones(len(self), dtype=bool)
        keep[drop] = False
        if self.n_evicted_real is not None:
            self.n_evicted_real += int(np.count_nonzero(self.real[drop]))
        self._c = self._compact().keep_rows(keep)
        self._X = None
        self._norms = None
        self.labels = self.labels[keep]
        self.weights = self.weights[keep]
        self.real = self.real[keep]
        self.seq = self.seq[keep]
        self.n_evicted += excess
        return excess

    def to_state(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "n_features": self.n_features,
            "X": encode_csr(self.X),
            "labels": encode_array(self.labels),
            "weights": encode_array(self.weights),
            "real": encode_array(self.real),
            "seq": encode_array(self.seq),
            "next_seq": self.next_seq,
            "n_evicted": self.n_evicted,
            **({} if self.n_evicted_real is None else {"n_evicted_real": self.n_evicted_real}),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ExampleSet:
        """Inverse of :meth:`to_state`, validating it as :meth:`add` validates its
        arguments (:class:`~sift.filters.errors.StateError` naming the field)."""
        try:
            ex = cls(state["capacity"], state["n_features"])
            ex.X = decode_csr(state["X"], name="examples.X")
            ex.labels = decode_array(state["labels"], name="examples.labels", dtype=np.int8, ndim=1)
            ex.weights = decode_array(state["weights"], name="examples.weights", dtype=np.float64, ndim=1)
            ex.real = decode_array(state["real"], name="examples.real", dtype=np.bool_, ndim=1)
            ex.seq = decode_array(state["seq"], name="examples.seq", dtype=np.int64, ndim=1)
            ex.next_seq = decode_count(state["next_seq"], name="examples.next_seq")
            ex.n_evicted = decode_count(state["n_evicted"], name="examples.n_evicted")
            ex.n_evicted_real = (None if "n_evicted_real" not in state else decode_count(
                state["n_evicted_real"], name="examples.n_evicted_real"))
        except (KeyError, TypeError, ValueError, ParameterError) as exc:
            raise StateError(f"examples: {exc}") from None
        m = ex.X.shape[0]
        if not (ex.labels.size == ex.weights.size == ex.real.size == ex.seq.size == m):
            raise StateError("examples: arrays disagree in length")
        if ex.capacity is not None and m > ex.capacity:
            raise StateError(f"examples: {m} examples in a set of capacity {ex.capacity}")
        if ex.n_evicted_real is not None and ex.n_evicted_real > ex.n_evicted:
            raise StateError(f"examples: {ex.n_evicted_real} real examples evicted of "
                             f"{ex.n_evicted} evicted")
        if ex.X.shape[1] != ex.n_features:
            raise StateError("examples: matrix width differs from n_features")
        if np.any((ex.labels != 1) & (ex.labels != -1)):
            raise StateError("examples: labels must be 1 or -1")
        if np.any(ex.weights <= 0):
            raise StateError("examples: weights must be positive")
        bad = first_bad_value(ex.X.data)
        if bad is not None:
            raise StateError(f"examples.X: values must be at most {MAX_WEIGHT:g} in magnitude, "
                             f"got {bad!r}")
        if ex.weights.size and not ex.weights.max() <= MAX_WEIGHT:
            raise StateError(f"examples.weights: must be at most {MAX_WEIGHT:g}, got "
                             f"{float(ex.weights.max())!r}")
        if m > 1 and np.any(np.diff(ex.seq) <= 0):
            raise StateError("examples: seq must be strictly increasing (rows in insertion order)")
        if m and ex.seq[-1] >= ex.next_seq:
            raise StateError("examples: next_seq must exceed every seq")
        return ex


def _positive_int(value: Any) -> bool:
    """An integer (numpy's too, not a boolean) of at least 1."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1


def _labels(labels: ArrayLike) -> NDArray[np.int8]:
    """Labels of exactly ``1`` or ``-1`` as int8, checked before the cast (which would
    wrap 257 to 1 and truncate 1.7 to 1)."""
    given = np.asarray(labels)
    if given.dtype.kind not in "iuf" and given.size:  # booleans, strings, objects
        raise ParameterError(f"labels must be 1 (relevant) or -1 (non-relevant), got "
                             f"{given.dtype} values {given.ravel()[:3].tolist()!r}")
    ok = np.abs(given) == 1  # False for NaN; a wrapped abs of the smallest integer is negative
    if not ok.all():
        raise ParameterError(f"labels must be 1 (relevant) or -1 (non-relevant), got "
                             f"{given.ravel()[~ok.ravel()][0].item()!r}")
    return given.astype(np.int8, copy=False).ravel()


def _weights(weights: ArrayLike) -> NDArray[np.float64]:
    """Weights in ``(0, MAX_WEIGHT]`` as float64 (NaN and infinities refused)."""
    given = np.asarray(weights)
    if given.dtype.kind not in "iuf" and given.size:
        raise ParameterError(f"weights must be positive numbers of at most {MAX_WEIGHT:g}, got "
                             f"{given.dtype} values {given.ravel()[:3].tolist()!r}")
    w = given.astype(np.float64, copy=False).ravel()
    # the extremes only (a NaN is both, and fails both comparisons)
    if w.size and not (np.minimum.reduce(w) > 0 and np.maximum.reduce(w) <= MAX_WEIGHT):
        ok = (w > 0) & (w <= MAX_WEIGHT)
        raise ParameterError(f"weights must be positive numbers of at most {MAX_WEIGHT:g}, got "
                             f"{float(w[~ok][0])!r}")
    return w


def _flags(real: ArrayLike) -> NDArray[np.bool_]:
    """The ``real`` flags: booleans (an empty sequence of any type)."""
    given = np.asarray(real)
    if given.dtype != np.bool_ and given.size:
        raise ParameterError(f"real must be booleans (True for a real judgment), got {given.dtype} "
                             f"values {given.ravel()[:3].tolist()!r}")
    return given.astype(bool, copy=False).ravel()


def first_bad_value(data: NDArray[Any]) -> float | None:
    """The first value that is not finite or is beyond ``MAX_WEIGHT`` in magnitude, or
    ``None`` (the largest magnitude only, when all are fine: a NaN fails its comparison)."""
    if data.size == 0:
        return None
    top = np.abs(data).max()
    if top <= MAX_WEIGHT:  # False for NaN
        return None
    bad = ~(np.abs(data) <= MAX_WEIGHT)
    return float(data[np.argmax(bad)])
