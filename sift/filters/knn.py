"""k nearest neighbours over the profile's judged documents.

The pool is the profile's :class:`~sift.filters.examples.ExampleSet`: in batch
filtering the labelled training documents; in adaptive filtering, judged stream
documents are added as they are judged. The capped set's eviction policy
(pseudolabels first, then the oldest real judgments) bounds the pool.

The score of a document ``d`` is a similarity-weighted vote of its ``k`` most
similar pool documents (cosine; vectors are unit length):
``vote="positive"`` (Yang's kNN) sums ``w_i * sim(d, x_i)`` over the relevant
neighbours; ``vote="signed"`` also subtracts the non-relevant ones.

Scoring never scans the pool document by document: one sparse product gives the
similarities to the whole pool, ``argpartition`` the top ``k``; models sharing
one pool matrix (full training) share the product and the neighbour search.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> from sift.filters.examples import ExampleSet
>>> ex = ExampleSet(None, 2)
>>> _ = ex.add(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]), [1, -1, 1], [1.0, 1.0, 1.0], [True] * 3)
>>> m = KNN(k=2)
>>> m.bind(2, None, ex)
>>> [round(float(s), 2) for s in m.score(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0]]))]
[1.6, 0.8]
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.base import ScoringModel, Stack
from sift.filters.errors import ParameterError
from sift.filters.sparse import restrict

_CHUNK = 1024


def top_k(S: NDArray[np.float64], k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Indices and values of the ``k`` largest entries of each row (unordered)."""
    m = S.shape[1]
    if m <= k:
        idx = np.broadcast_to(np.arange(m), S.shape).copy()
        return idx, S.copy()
    idx = np.argpartition(-S, k - 1, axis=1)[:, :k]
    return idx.astype(np.int64), np.take_along_axis(S, idx, axis=1)


class _PoolIndex:
    """The pool restricted to its own columns, transposed once for products."""

    def __init__(self, pool: sp.csr_matrix) -> None:
        self.cols = np.unique(pool.indices).astype(np.int64)
        self.local = restrict(pool, self.cols)
        self.PT = self.local.T.tocsr()


_POOL_INDEX: list[tuple[weakref.ref[sp.csr_matrix], int, _PoolIndex]] = []
#: Pool indexes kept (most recently used first): one per kNN profile is the point, so
#: that scoring a batch does not rebuild every profile's transposed pool. Each costs
#: about twice its pool's memory (a 2,000-document pool of Reuters: ~2.5 MB).
POOL_INDEX_CACHE = 1024


def pool_index(pool: sp.csr_matrix) -> _PoolIndex:
    """Cached :class:`_PoolIndex` of a pool matrix (by identity; a few kept)."""
    for i, (ref, nnz, idx) in enumerate(_POOL_INDEX):
        if nnz == pool.nnz and ref() is pool:
            if i:
                _POOL_INDEX.insert(0, _POOL_INDEX.pop(i))
            return idx
    # drop entries whose pool is gone (a profile's pool is replaced on every judgment)
    _POOL_INDEX[:] = [e for e in _POOL_INDEX if e[0]() is not None]
    idx = _PoolIndex(pool)
    _POOL_INDEX.insert(0, (weakref.ref(pool), pool.nnz, idx))
    del _POOL_INDEX[POOL_INDEX_CACHE:]
    return idx


def neighbours(
    X: sp.csr_matrix, pool: sp.csr_matrix, k: int, *, exclude_self: bool = False
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Top-``k`` pool neighbours of each row of ``X``, computed in row chunks.

    With ``exclude_self`` (``X`` is ``pool``), a row is not its own neighbour.
    """
    n = X.shape[0]
    kk = min(k, max(pool.shape[0] - (1 if exclude_self else 0), 0))
    idx_out = np.zeros((n, kk), dtype=np.int64)
    sim_out = np.zeros((n, kk), dtype=np.float64)
    if kk == 0:
        return idx_out, sim_out
    index = pool_index(pool)
    XL = index.local if exclude_self else restrict(X, index.cols)
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        S = np.asarray((XL[start:stop] @ index.PT).toarray(), dtype=np.float64)
        if exclude_self:
            rows = np.arange(stop - start)
            S[rows, rows + start] = -np.inf
        idx, sims = top_k(S, kk)
        idx_out[start:stop] = idx
        sim_out[start:stop] = np.where(np.isfinite(sims), sims, 0.0)
    return idx_out, sim_out


class _SelfNeighbourCache:
    """Remembers leave-one-out neighbours of the last pool matrices (by identity)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.items: list[tuple[weakref.ref[sp.csr_matrix], int, int, Any]] = []

    def get(self, pool: sp.csr_matrix, k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        for ref, kk, nnz, value in self.items:
            if kk == k and nnz == pool.nnz and ref() is pool:
                return value  # type: ignore[no-any-return]
        value = neighbours(pool, pool, k, exclude_self=True)
        try:
            self.items.insert(0, (weakref.ref(pool), k, pool.nnz, value))
        except TypeError:  # pragma: no cover - matrices without weakref support
            return value
        del self.items[self.size :]
        return value


_SELF_CACHE = _SelfNeighbourCache()


class KNN(ScoringModel):
    """kNN vote over the profile's judged documents.

    Parameters
    ----------
    k
        Number of neighbours.
    vote
        ``"positive"`` or ``"signed"``.
    """

    name = "knn"

    def __init__(self, k: int = 30, vote: str = "positive") -> None:
        self.k = k
        self.vote = vote
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ParameterError(f"k must be a positive integer, got {k!r}")
        if vote not in ("positive", "signed"):
            raise ParameterError(f"vote must be 'positive' or 'signed', got {vote!r}")
        self.bind(0, None, None)

    def get_params(self) -> dict[str, Any]:
        return {"k": self.k, "vote": self.vote}

    def start(self, query: sp.csr_matrix | None) -> None:
        """kNN keeps no state of its own: the pool is the profile's example set."""

    def learn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        """Nothing to do: the profile adds the examples to the shared pool."""

    def label_weights(self) -> NDArray[np.float64]:
        ex = self._examples()
        if self.vote == "positive":
            return np.where(ex.labels > 0, ex.weights, 0.0)
        return ex.labels.astype(np.float64) * ex.weights

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        ex = self._examples()
        if len(ex) == 0:
            return np.zeros(X.shape[0])
        idx, sims = neighbours(sp.csr_matrix(X), ex.X, self.k)
        return np.asarray((sims * self.label_weights()[idx]).sum(axis=1), dtype=np.float64)

    def loo_scores(self) -> NDArray[np.float64]:
        ex = self._examples()
        if len(ex) == 0:
            return np.zeros(0)
        idx, sims = _SELF_CACHE.get(ex.X, self.k)
        return np.asarray((sims * self.label_weights()[idx]).sum(axis=1), dtype=np.float64)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None

    @classmethod
    def build_stack(cls, models: Sequence[ScoringModel]) -> Stack:
        return KNNStack(models)


class KNNStack(Stack):
    """kNN models grouped by pool matrix: one product and one neighbour search per group."""

    def __init__(self, models: Sequence[ScoringModel]) -> None:
        super().__init__(models)
        groups: dict[tuple[int, int], list[int]] = {}
        for j, m in enumerate(models):
            if not isinstance(m, KNN):
                raise ParameterError("KNNStack takes kNN models only")
            groups.setdefault((id(m._examples().X), m.k), []).append(j)
        self.groups = [
            (cols, np.stack([models[j].label_weights() for j in cols], axis=1))  # type: ignore[attr-defined]
            for cols in groups.values()
        ]

    def update(self, j: int, model: ScoringModel) -> bool:
        """Pools and label weights are grouped at build time: ask for a rebuild."""
        return False

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        out = np.zeros((X.shape[0], len(self.models)))
        for cols, LW in self.groups:
            first = self.models[cols[0]]
            assert isinstance(first, KNN)
            pool = first._examples().X
            if pool.shape[0] == 0:
                continue
            idx, sims = neighbours(sp.csr_matrix(X), pool, first.k)
            acc = np.zeros((X.shape[0], len(cols)))
            for j in range(idx.shape[1]):
                acc += sims[:, j : j + 1] * LW[idx[:, j]]
            out[:, cols] = acc
        return out
