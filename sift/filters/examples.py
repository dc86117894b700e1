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

import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from sift.filters.errors import ParameterError, StateError
from sift.filters.state import decode_array, decode_count, decode_csr, encode_array, encode_csr


class _Compact:
    """Rows over compact columns: ``data``, ``ind`` (compact ids), ``indptr``, and
    ``cols`` (compact id -> hashed column). Never mutated: every change makes a new one,
    so several example sets may share one (full training)."""

    __slots__ = ("__weakref__", "_mat", "_mt", "_sq", "cols", "data", "floor", "ind", "indptr",
                 "sorted_cols", "sorted_ids")

    def __init__(self, data: NDArray[np.float64], ind: NDArray[np.int32], indptr: NDArray[np.int64],
                 cols: NDArray[np.int64], floor: int | None = None,
                 index: tuple[NDArray[np.int64], NDArray[np.int32]] | None = None) -> None:
        self.data = data
        self.ind = ind
        self.indptr = indptr
        self.cols = cols
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
        """A new compact matrix with the rows of ``X`` (hashed columns) appended."""
        if not X.has_sorted_indices:  # canonical entry order: products then do not depend on it
            X = X.sorted_indices()
        ids = self.ids(X.indices)
        cols = self.cols
        index = (self.sorted_cols, self.sorted_ids)
        new = ids < 0
        if new.any():
            fresh, inv = np.unique(X.indices[new], return_inverse=True)
            fresh = fresh.astype(np.int64)
            fresh_ids = np.arange(cols.size, cols.size + fresh.size, dtype=np.int32)
            ids[new] = fresh_ids[inv.ravel()]
            cols = np.concatenate([cols, fresh])
            at = np.searchsorted(self.sorted_cols, fresh)
            index = (np.insert(self.sorted_cols, at, fresh), np.insert(self.sorted_ids, at, fresh_ids))
        indptr = np.concatenate([self.indptr, self.indptr[-1] + X.indptr[1:].astype(np.int64)])
        return _Compact(np.concatenate([self.data, X.data.astype(np.float64)]),
                        np.concatenate([self.ind, ids]), indptr, cols, self.floor, index)

    def keep_rows(self, keep: NDArray[np.bool_]) -> _Compact:
        """A new compact matrix with only the rows where ``keep``; columns no longer used
        are dropped once ``cols`` has doubled since they were last counted, so ``cols``
        stays bounded and the count is amortised."""
        lengths = np.diff(self.indptr)
        first_kept = int(np.argmax(keep)) if keep.any() else keep.size
        if keep[first_kept:].all():  # a prefix is dropped: slices, no mask
            start = int(self.indptr[first_kept])
            data, ind = self.data[start:], self.ind[start:]
            indptr = self.indptr[first_kept:] - start
        else:
            mask = np.repeat(keep, lengths)
            data, ind = self.data[mask], self.ind[mask]
            indptr = np.zeros(int(keep.sum()) + 1, np.int64)
            np.cumsum(lengths[keep], out=indptr[1:])
        cols, floor = self.cols, self.floor
        index: tuple[NDArray[np.int64], NDArray[np.int32]] | None = (self.sorted_cols, self.sorted_ids)
        if cols.size > 2 * floor + 1024:
            used, inv = np.unique(ind, return_inverse=True)
            floor = int(used.size)
            if 2 * used.size < cols.size:
                cols = cols[used]
                ind = inv.astype(np.int32).ravel()
                index = None
        return _Compact(data, ind, indptr, cols, floor, index)


_SHARED: list[tuple[weakref.ref[sp.csr_matrix], _Compact]] = []


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
    """

    def __init__(self, capacity: int | None, n_features: int) -> None:
        if capacity is not None and (not isinstance(capacity, int) or capacity < 1):
            raise ParameterError(f"capacity must be a positive integer or None, got {capacity!r}")
        self.capacity = capacity
        self.n_features = n_features
        self._c: _Compact | None = _Compact.empty()
        self._X: sp.csr_matrix | None = None
        #: replaced whenever the vectors are replaced wholesale (not by add/evict), so
        #: derived data kept across judgments (kNN neighbour lists) knows to start over
        self.lineage = object()
        self._norms: NDArray[np.float64] | None = None
        self.labels: NDArray[np.int8] = np.zeros(0, np.int8)
        self.weights: NDArray[np.float64] = np.zeros(0, np.float64)
        self.real: NDArray[np.bool_] = np.zeros(0, bool)
        self.seq: NDArray[np.int64] = np.zeros(0, np.int64)
        self.next_seq = 0
        self.n_evicted = 0

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

    def products(self, columns: NDArray[Any], values: NDArray[np.float64], *,
                 squared: bool = False) -> NDArray[np.float64]:
        """``X[:, columns] @ values`` for every example (``m x k``), in one product.

        ``columns`` are unique hashed columns and ``values`` has one row per column.
        With ``squared``, the examples' squared entries are used instead of ``X``.
        """
        c = self._compact()
        V = np.asarray(values, dtype=np.float64)
        V2 = V[:, None] if V.ndim == 1 else V if V.ndim == 2 else V.reshape(V.shape[0], -1)
        W = np.zeros((max(int(c.cols.size), 1), V2.shape[1]))
        if c.cols.size and len(columns):
            ids = c.ids(np.asarray(columns))
            ok = ids >= 0
            W[ids[ok]] = V2[ok]
        return np.asarray(c.matrix(squared) @ W, dtype=np.float64)

    def dots(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """Dot products of the rows of ``X`` (hashed columns) with every example
        (``n x m``, dense)."""
        c = self._compact()
        if c.n_rows == 0:
            return np.zeros((X.shape[0], 0))
        out = c.restrict(sp.csr_matrix(X)) @ c.transposed()
        return np.asarray(out.toarray(), dtype=np.float64)

    def self_dots(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Dot products of the examples ``rows`` with every example (``len(rows) x m``).

        Rows keep their entries sorted by column, so every way of computing a dot
        product here adds the same terms in the same order: the results are
        bit-identical to :meth:`dots_to` (kNN neighbour lists rely on it).
        """
        if len(rows) <= 8:
            return self.dots_to(rows).T.copy()
        c = self._compact()
        out = c.matrix()[rows] @ c.transposed()
        return np.asarray(out.toarray(), dtype=np.float64)

    def dots_to(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Dot products of every example with the examples ``rows`` (``m x len(rows)``),
        each accumulated over the *every* side's entries in order, so that entry
        ``(i, j)`` is bit-identical to ``self_dots([i])[0, rows[j]]``."""
        c = self._compact()
        M = c.matrix()
        sub = M[rows]
        W = np.zeros((M.shape[1], len(rows)))
        W[sub.indices, np.repeat(np.arange(len(rows)), np.diff(sub.indptr))] = sub.data
        return np.asarray(M @ W, dtype=np.float64)

    def row_norms(self) -> NDArray[np.float64]:
        """Euclidean length of each example vector."""
        if self._norms is None:
            c = self._compact()
            sq = np.add.reduceat(c.data * c.data, c.indptr[:-1]) if c.data.size else np.zeros(c.n_rows)
            sq = np.where(np.diff(c.indptr) > 0, sq, 0.0) if c.data.size else sq
            self._norms = np.sqrt(np.asarray(sq, dtype=np.float64))
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

        With ``share=True`` and an empty set, ``X`` itself is kept (not copied), so
        several profiles labelling the same training matrix share its memory.
        """
        lab = np.asarray(labels, dtype=np.int8).ravel()
        w = np.asarray(weights, dtype=np.float64).ravel()
        r = np.asarray(real, dtype=bool).ravel()
        m = X.shape[0]
        if not (lab.size == w.size == r.size == m):
            raise ParameterError(f"got {m} rows but {lab.size} labels, {w.size} weights, {r.size} flags")
        if np.any((lab != 1) & (lab != -1)):
            raise ParameterError("labels must be 1 (relevant) or -1 (non-relevant)")
        if X.shape[1] != self.n_features:
            raise ParameterError(f"X must have {self.n_features} columns, got {X.shape[1]}")
        if m == 0:
            return 0
        seq = np.arange(self.next_seq, self.next_seq + m, dtype=np.int64)
        self.next_seq += m
        Xc = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
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

    def _evict(self) -> int:
        if self.capacity is None or len(self) <= self.capacity:
            return 0
        excess = len(self) - self.capacity
        # pseudolabels first (real=False sorts first), then oldest
        order = np.lexsort((self.seq, self.real))
        drop = order[:excess]
        keep = np.ones(len(self), dtype=bool)
        keep[drop] = False
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
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ExampleSet:
        try:
            ex = cls(state["capacity"], int(state["n_features"]))
            ex.X = decode_csr(state["X"], name="examples.X")
            ex.labels = decode_array(state["labels"], name="examples.labels", dtype=np.int8, ndim=1)
            ex.weights = decode_array(state["weights"], name="examples.weights", dtype=np.float64, ndim=1)
            ex.real = decode_array(state["real"], name="examples.real", dtype=np.bool_, ndim=1)
            ex.seq = decode_array(state["seq"], name="examples.seq", dtype=np.int64, ndim=1)
            ex.next_seq = decode_count(state["next_seq"], name="examples.next_seq")
            ex.n_evicted = decode_count(state["n_evicted"], name="examples.n_evicted")
        except (KeyError, TypeError, ValueError, ParameterError) as exc:
            raise StateError(f"examples: {exc}") from None
        m = ex.X.shape[0]
        if not (ex.labels.size == ex.weights.size == ex.real.size == ex.seq.size == m):
            raise StateError("examples: arrays disagree in length")
        if ex.X.shape[1] != ex.n_features:
            raise StateError("examples: matrix width differs from n_features")
        if np.any((ex.labels != 1) & (ex.labels != -1)):
            raise StateError("examples: labels must be 1 or -1")
        if np.any(ex.weights <= 0):
            raise StateError("examples: weights must be positive")
        if m > 1 and np.any(np.diff(ex.seq) <= 0):
            raise StateError("examples: seq must be strictly increasing (rows in insertion order)")
        if m and ex.seq[-1] >= ex.next_seq:
            raise StateError("examples: next_seq must exceed every seq")
        return ex
