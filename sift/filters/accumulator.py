"""Running weighted sums of sparse vectors over a growing local vocabulary.

A profile touches a few thousand of the hashed columns, so its sums are kept as
dense arrays over a local slot table (global column -> slot). Adding a document
costs time proportional to the document's non-zeros, whatever the history.

>>> import numpy as np
>>> acc = SparseAccumulator(n_sums=2)
>>> acc.add(0, np.array([7, 3]), np.array([1.0, 2.0]))
>>> acc.add(1, np.array([3]), np.array([5.0]))
>>> acc.features.tolist(), acc.sums.tolist()
([3, 7], [[2.0, 1.0], [5.0, 0.0]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.errors import StateError
from sift.filters.sparse import insert_sorted, unique_inverse
from sift.filters.state import decode_array, encode_array

#: Taking rows back out of running sums (:meth:`SparseAccumulator.remove_rows`) leaves,
#: where the true result is 0, a cancellation residue of a few units in the last place
#: of the values added and subtracted there. An entry of a touched column whose
#: magnitude is at most this share of ``|sum before| + |values subtracted|`` becomes
#: exactly 0: far above that residue (``1e-16`` per operation, so about ``1e-13`` after
#: a thousand), far below any value a vectorizer gives (a genuine remainder that small
#: needs the subtracted term a billion times larger than it, and zeroing it moves a
#: score by at most that share).
RESIDUE = 1e-9


def signed(X: sp.csr_matrix, weights: NDArray[np.float64]) -> bool:
    """Whether the rows of ``X`` with these weights may add a negative amount to a sum
    (a negative value or weight): what ends a model's "sums of non-negative vectors"."""
    return bool(X.data.size) and bool(X.data.min() < 0 or np.any(weights < 0))


def signed_flag(state: dict[str, Any], model: str) -> bool | None:
    """A model's "sums of non-negative vectors" flag as its state gives it: ``False`` when
    the state says a signed vector was learned (``"signed": true``), else ``None`` (to be
    checked on the sums). Without it a loaded model took sums that were all >= 0 for sums
    of non-negative vectors, and clamped at 0 what an unlearn left of a signed vector's
    negative entry, where the live model kept it. Raises ``ValueError`` for another value."""
    flag = state.get("signed", False)
    if not isinstance(flag, bool):
        raise ValueError(f"{model}: 'signed' must be true or false, got {flag!r:.40}")
    return False if flag else None


def remove_total(total: float, taken: float) -> float:
    """A running total of positive weights with ``taken`` (added before) taken back: 0
    when what is left is within :data:`RESIDUE` of 0 or below it (a cancellation residue).

    >>> remove_total(0.1 + 0.2, 0.2), remove_total(0.1 + 0.2, 0.1 + 0.2), remove_total(0.3, 0.4)
    (0.10000000000000003, 0.0, 0.0)
    """
    left = total - taken
    return left if left > RESIDUE * (abs(total) + abs(taken)) else 0.0


class SparseAccumulator:
    """``n_sums`` running sums sharing one local vocabulary."""

    def __init__(self, n_sums: int, capacity: int = 256) -> None:
        self.n_sums = n_sums
        self._feat = np.zeros(capacity, dtype=np.int64)
        self._sums = np.zeros((n_sums, capacity), dtype=np.float64)
        self.size = 0
        # features sorted, with their slots, for vectorized look-ups
        self._sorted_feat = np.zeros(0, dtype=np.int64)
        self._sorted_slot = np.zeros(0, dtype=np.int64)

    @property
    def features(self) -> NDArray[np.int64]:
        """Global column of each slot, in slot order."""
        return self._feat[: self.size]

    @property
    def sums(self) -> NDArray[np.float64]:
        """The sums, shape ``(n_sums, size)`` (a view)."""
        return self._sums[:, : self.size]

    @property
    def order(self) -> NDArray[np.int64]:
        """Slots in feature order: ``features[order]`` is sorted. Models compute in this
        order, so that results do not depend on the order in which slots were made."""
        return self._sorted_slot

    def find(self, indices: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Slots of global columns, ``-1`` for columns without a slot."""
        idx = np.asarray(indices, dtype=np.int64)
        if self._sorted_feat.size == 0:
            return np.full(idx.size, -1, dtype=np.int64)
        pos = np.searchsorted(self._sorted_feat, idx)
        np.minimum(pos, self._sorted_feat.size - 1, out=pos)
        found = self._sorted_feat[pos] == idx
        return np.where(found, self._sorted_slot[pos], -1)

    def slots(self, indices: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Slots of global columns, creating slots for new ones."""
        idx = np.asarray(indices, dtype=np.int64)
        uniq, inv = unique_inverse(idx)  # one document's row: unique and sorted already
        slot_u = self.find(uniq)
        new = slot_u < 0
        n_new = int(new.sum())
        if n_new:
            while self.size + n_new > self._feat.size:
                self._grow()
            new_slots = np.arange(self.size, self.size + n_new, dtype=np.int64)
            self._feat[self.size : self.size + n_new] = uniq[new]
            slot_u[new] = new_slots
            self.size += n_new
            # uniq is sorted: insert the new features into the sorted view, O(size)
            at = np.searchsorted(self._sorted_feat, uniq[new])
            self._sorted_feat = insert_sorted(self._sorted_feat, at, uniq[new])
            self._sorted_slot = insert_sorted(self._sorted_slot, at, new_slots)
        return slot_u if inv is None else slot_u[inv]

    def _grow(self) -> None:
        cap = max(2 * self._feat.size, 16)
        feat = np.zeros(cap, dtype=np.int64)
        feat[: self.size] = self._feat[: self.size]
        sums = np.zeros((self.n_sums, cap), dtype=np.float64)
        sums[:, : self.size] = self._sums[:, : self.size]
        self._feat, self._sums = feat, sums

    def add(self, which: int, indices: NDArray[np.integer[Any]], values: NDArray[np.float64]) -> None:
        """``sums[which][indices] += values`` (indices may repeat)."""
        if indices.size == 0:
            return
        slots = self.slots(indices)  # may grow (and replace) the arrays
        if indices.size < 2 or bool(np.all(indices[1:] > indices[:-1])):
            self._sums[which, slots] += values  # distinct slots: the same sums as add.at
        else:
            np.add.at(self._sums[which], slots, values)

    def add_rows(self, which: int, X: sp.csr_matrix, weights: NDArray[np.float64],
                 mask: NDArray[np.bool_]) -> float:
        """Add ``weights[i] * X[i]`` for the rows where ``mask`` holds; return their total weight."""
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return 0.0
        lengths = np.diff(X.indptr)
        if rows.size == X.shape[0]:  # all rows: no copy
            indices, data = X.indices, X.data
        else:  # the rows' entries, in order (what X[rows] holds, without scipy's indexing)
            entries = np.repeat(np.asarray(mask, dtype=bool), lengths)
            indices, data, lengths = X.indices[entries], X.data[entries], lengths[rows]
        self.add(which, indices, data * np.repeat(weights[rows], lengths))
        return float(weights[rows].sum())

    def remove_rows(self, which: int, X: sp.csr_matrix, weights: NDArray[np.float64],
                    mask: NDArray[np.bool_], *, clamp: bool = False) -> float:
        """Subtract ``weights[i] * X[i]`` for the rows where ``mask`` holds (the inverse of
        :meth:`add_rows`: rows added before with these weights); return their total weight.

        In the columns touched, an entry left within :data:`RESIDUE` of 0 (relative to the
        sum before and the values subtracted) becomes exactly 0, so that a column whose
        every contribution was taken back is 0 again, not a cancellation residue. With
        ``clamp`` (the caller knows the sum is of non-negative vectors) an entry left
        below 0 becomes 0 too. The sum keeps its slots.

        >>> acc = SparseAccumulator(1)
        >>> X = sp.csr_matrix(np.array([[0.1, 0.2], [0.7, 0.0]]))
        >>> _ = acc.add_rows(0, X, np.array([0.3, 1.0]), np.ones(2, bool))
        >>> acc.remove_rows(0, X, np.array([0.3, 1.0]), np.array([False, True]))
        1.0
        >>> acc.remove_rows(0, X, np.array([0.3, 1.0]), np.array([True, False]), clamp=True)
        0.3
        >>> acc.sums.tolist()  # 0.1 * 0.3 + 0.7 - 0.7 - 0.1 * 0.3: not 1e-17, 0
        [[0.0, 0.0]]
        """
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return 0.0
        lengths = np.diff(X.indptr)
        if rows.size == X.shape[0]:
            indices, data = X.indices, X.data
        else:
            entries = np.repeat(np.asarray(mask, dtype=bool), lengths)
            indices, data, lengths = X.indices[entries], X.data[entries], lengths[rows]
        if indices.size:
            values = np.asarray(data, dtype=np.float64) * np.repeat(weights[rows], lengths)
            slots = self.slots(indices)  # may grow (and replace) the arrays
            uniq, inv = unique_inverse(slots)
            if inv is None:  # distinct slots (one row): subtracted as they are
                taken, size = values, np.abs(values)
            else:
                taken, size = np.zeros(uniq.size), np.zeros(uniq.size)
                np.add.at(taken, inv, values)
                np.add.at(size, inv, np.abs(values))
            before = self._sums[which, uniq]
            after = before - taken
            after[np.abs(after) <= RESIDUE * (np.abs(before) + size)] = 0.0
            if clamp:
                np.maximum(after, 0.0, out=after)
            self._sums[which, uniq] = after
        return float(weights[rows].sum())

    def nonneg_after_removal(self, X: sp.csr_matrix, weights: NDArray[np.float64],
                             nonneg: bool | None) -> bool:
        """A model's flag "the sums are of non-negative vectors" (``nonneg``, ``None``: not
        checked yet) once rows ``X`` with ``weights`` are taken back: ``False`` for signed
        rows, else as it was, checked now if not yet (every sum >= 0)."""
        if signed(X, weights):
            return False
        return bool(np.all(self._sums >= 0)) if nonneg is None else nonneg

    def remove_labelled(self, X: sp.csr_matrix, labels: NDArray[np.int8],
                        weights: NDArray[np.float64], pos_sum: int, neg_sum: int, *,
                        clamp: bool) -> tuple[float | None, float | None]:
        """:meth:`remove_rows` of the relevant rows (label 1) from sum ``pos_sum`` and of
        the non-relevant ones (-1) from ``neg_sum``: the weight taken from each, ``None``
        for a sum no row was taken from (the inverse of a model's ``learn``)."""
        lab = np.asarray(labels)
        out: list[float | None] = []
        for which, mask in ((pos_sum, lab == 1), (neg_sum, lab == -1)):
            out.append(self.remove_rows(which, X, weights, mask, clamp=clamp)
                       if mask.any() else None)
        return out[0], out[1]

    def add_query(self, which: int, query: sp.csr_matrix | None) -> None:
        """Add a (1 x F) query vector, if any."""
        if query is not None and query.nnz:
            q = sp.csr_matrix(query)
            self.add(which, q.indices, q.data)

    def to_state(self) -> dict[str, Any]:
        """The sums by feature, in feature order (canonical: slot order depends on how
        documents were batched, the state does not)."""
        return {"features": encode_array(self._sorted_feat.copy()),
                "sums": encode_array(self.sums[:, self._sorted_slot].copy())}

    @classmethod
    def from_state(cls, state: dict[str, Any], n_sums: int,
                   n_features: int | None = None) -> SparseAccumulator:
        """Inverse of :meth:`to_state`; with ``n_features``, every feature must be below it
        (a column index past the vectorizer's width would break scoring later). A state
        that is not an object, lacks a key or is corrupt raises
        :class:`~sift.filters.errors.StateError`."""
        if not isinstance(state, dict):
            raise StateError(f"accumulator: state must be an object, got {type(state).__name__}")
        missing = [key for key in ("features", "sums") if key not in state]
        if missing:
            raise StateError(f"accumulator: state lacks {', '.join(map(repr, missing))}")
        feat = decode_array(state["features"], name="accumulator.features", dtype=np.int64, ndim=1)
        sums = decode_array(state["sums"], name="accumulator.sums", dtype=np.float64, ndim=2)
        if sums.shape != (n_sums, feat.size):
            raise StateError(f"accumulator: sums of shape {sums.shape} for {feat.size} features")
        # sorted first (to_state writes them in order: a stable sort of sorted input is
        # one pass), so duplicates are neighbours
        order = np.argsort(feat, kind="stable")
        sfeat = feat[order]
        if sfeat.size and (sfeat[0] < 0 or bool(np.any(sfeat[1:] == sfeat[:-1]))):
            raise StateError("accumulator: duplicate or negative features")
        if n_features is not None and sfeat.size and sfeat[-1] >= n_features:
            raise StateError(f"accumulator: feature {int(sfeat[-1])} out of range for "
                             f"{n_features} features")
        acc = cls(n_sums, capacity=max(feat.size, 16))
        acc._feat[: feat.size] = feat
        acc._sums[:, : feat.size] = sums
        acc.size = int(feat.size)
        acc._sorted_feat = sfeat
        acc._sorted_slot = order.astype(np.int64)
        return acc


class SlotMap:
    """The accumulator slot of each compact column of an example set (``-1``: none) and
    the compact column of each slot, kept across judgments: a judgment maps only the
    columns new to either side.

    Models build the vectors they multiply the examples by from it (:meth:`dense`),
    with no look-up of hashed columns.
    """

    def __init__(self) -> None:
        self._key: tuple[object, object] | None = None
        self._map = np.zeros(0, np.int64)
        self._rev = np.zeros(0, np.int64)
        self._acc_size = 0

    def get(self, acc: SparseAccumulator, cols: NDArray[np.int64], colmap: object) -> NDArray[np.int64]:
        """The slots of the compact columns ``cols`` (numbered under the token ``colmap``)."""
        m, rev = self._map, self._rev
        if self._key is None or self._key[0] is not acc or self._key[1] is not colmap or m.size > cols.size:
            m = acc.find(cols)
            rev = np.full(acc.size, -1, np.int64)
            hit = m >= 0
            rev[m[hit]] = np.flatnonzero(hit)
        else:
            if acc.size > self._acc_size:  # columns unknown before may have got a slot
                rev = np.concatenate([rev, np.full(acc.size - rev.size, -1, np.int64)])
                missing = np.flatnonzero(m < 0)
                if missing.size:
                    m = m.copy()
                    found = acc.find(cols[missing])
                    m[missing] = found
                    rev[found[found >= 0]] = missing[found >= 0]
            if cols.size > m.size:
                new = acc.find(cols[m.size :])
                hit = new >= 0
                rev[new[hit]] = m.size + np.flatnonzero(hit)
                m = np.concatenate([m, new])
        self._key, self._map, self._rev, self._acc_size = (acc, colmap), m, rev, acc.size
        return m

    def dense(self, acc: SparseAccumulator, cols: NDArray[np.int64], colmap: object,
              slots: NDArray[np.int64], values: NDArray[np.float64]) -> NDArray[np.float64]:
        """The vector with ``values`` at the accumulator ``slots`` (0 elsewhere), over the
        compact columns ``cols``."""
        self.get(acc, cols, colmap)
        cid = self._rev[slots]
        ok = cid >= 0
        W = np.zeros(max(int(cols.size), 1))
        W[cid[ok]] = values[ok]
        return W
