"""Running weighted sums of sparse vectors over a growing local vocabulary.

A profile touches a few thousand of the hashed columns, so its sums are kept as
dense arrays over a local slot table (global column -> slot). Adding a document
costs time proportional to the document's non-zeros, whatever the history.

>>> import numpy as np
>>> acc = SparseAccumulator(n_sums=2)
>>> acc.add(0, np.array([7, 3]), np.array([1.0, 2.0]))
>>> acc.add(1, np.array([3]), np.array([5.0]))
>>> acc.features.tolist(), acc.sums.tolist()
([7, 3], [[1.0, 2.0], [0.0, 5.0]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sift.filters.errors import StateError
from sift.filters.state import decode_array, encode_array


class SparseAccumulator:
    """``n_sums`` running sums sharing one local vocabulary."""

    def __init__(self, n_sums: int, capacity: int = 256) -> None:
        self.n_sums = n_sums
        self._slot: dict[int, int] = {}
        self._feat = np.zeros(capacity, dtype=np.int64)
        self._sums = np.zeros((n_sums, capacity), dtype=np.float64)
        self.size = 0

    @property
    def features(self) -> NDArray[np.int64]:
        """Global column of each slot, in slot order."""
        return self._feat[: self.size]

    @property
    def sums(self) -> NDArray[np.float64]:
        """The sums, shape ``(n_sums, size)`` (a view)."""
        return self._sums[:, : self.size]

    def slots(self, indices: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Slots of global columns, creating slots for new ones."""
        table = self._slot
        out = np.empty(indices.size, dtype=np.int64)
        for i, col in enumerate(indices.tolist()):
            s = table.get(col)
            if s is None:
                s = self.size
                if s >= self._feat.size:
                    self._grow()
                table[col] = s
                self._feat[s] = col
                self.size += 1
            out[i] = s
        return out

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
        np.add.at(self._sums[which], slots, values)

    def to_state(self) -> dict[str, Any]:
        return {"features": encode_array(self.features.copy()), "sums": encode_array(self.sums.copy())}

    @classmethod
    def from_state(cls, state: dict[str, Any], n_sums: int) -> SparseAccumulator:
        feat = decode_array(state["features"], name="accumulator.features")
        sums = decode_array(state["sums"], name="accumulator.sums")
        if sums.shape != (n_sums, feat.size):
            raise StateError(f"accumulator: sums of shape {sums.shape} for {feat.size} features")
        if np.unique(feat).size != feat.size:
            raise StateError("accumulator: duplicate features")
        acc = cls(n_sums, capacity=max(feat.size, 16))
        acc._feat[: feat.size] = feat
        acc._sums[:, : feat.size] = sums
        acc.size = int(feat.size)
        acc._slot = {int(c): i for i, c in enumerate(feat.tolist())}
        return acc
