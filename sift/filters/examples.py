"""The labelled examples a profile keeps: the judged set.

TROT re-thresholds on these, kNN votes with them, and the leave-one-out scores
come from them. The set is capped (``capacity``); when full, the eviction policy
drops pseudolabelled examples first (oldest first), then the oldest real
judgments. Models that keep running sums (Rocchio, Kantor) have already learned
from an evicted example, so eviction only bounds the cost of re-thresholding and
the kNN pool; it never changes those models.

>>> import numpy as np, scipy.sparse as sp
>>> ex = ExampleSet(capacity=2, n_features=4)
>>> ex.add(sp.csr_matrix(np.eye(3, 4)), np.array([1, -1, -1]), np.ones(3), np.array([True, False, True]))
1
>>> ex.labels.tolist(), ex.real.tolist()
([1, -1], [True, True])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from sift.filters.errors import ParameterError, StateError
from sift.filters.state import decode_array, decode_csr, encode_array, encode_csr


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
        self.X: sp.csr_matrix = sp.csr_matrix((0, n_features), dtype=np.float64)
        self.labels: NDArray[np.int8] = np.zeros(0, np.int8)
        self.weights: NDArray[np.float64] = np.zeros(0, np.float64)
        self.real: NDArray[np.bool_] = np.zeros(0, bool)
        self.seq: NDArray[np.int64] = np.zeros(0, np.int64)
        self.next_seq = 0
        self.n_evicted = 0

    def __len__(self) -> int:
        return int(self.labels.size)

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
        if m == 0:
            return 0
        seq = np.arange(self.next_seq, self.next_seq + m, dtype=np.int64)
        self.next_seq += m
        if share and len(self) == 0:
            self.X = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
        else:
            self.X = sp.vstack([self.X, sp.csr_matrix(X)], format="csr")
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
        self.X = self.X[keep]
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
            ex.next_seq = int(state["next_seq"])
            ex.n_evicted = int(state["n_evicted"])
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
        return ex
