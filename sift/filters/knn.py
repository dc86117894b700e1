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
from sift.filters.examples import ExampleSet

_CHUNK = 1024


def top_k(S: NDArray[np.float64], k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Indices and values of the ``k`` largest entries of each row (unordered)."""
    m = S.shape[1]
    if m <= k:
        idx = np.broadcast_to(np.arange(m), S.shape).copy()
        return idx, S.copy()
    idx = np.argpartition(-S, k - 1, axis=1)[:, :k]
    return idx.astype(np.int64), np.take_along_axis(S, idx, axis=1)


def select(S: NDArray[np.float64], kk: int) -> NDArray[np.int64]:
    """Columns of the ``kk`` largest entries of each row, ties going to the lower
    column, returned in increasing column order (``n x kk``).

    This total order (similarity, then column = insertion order) makes the
    neighbour lists the same whether computed at once or kept up to date.
    """
    n, c = S.shape
    if kk <= 0 or n == 0:
        return np.zeros((n, 0), dtype=np.int64)
    if kk >= c:
        return np.broadcast_to(np.arange(c, dtype=np.int64), (n, c)).copy()
    kth = np.partition(S, c - kk, axis=1)[:, c - kk]
    greater = kth[:, None] < S
    equal = kth[:, None] == S
    need = kk - greater.sum(axis=1)
    mask = greater | (equal & (np.cumsum(equal, axis=1) <= need[:, None]))
    return np.nonzero(mask)[1].reshape(n, kk).astype(np.int64)


class _Neighbours:
    """Leave-one-out neighbour lists of one example set, kept exact across judgments.

    Row ``i`` holds the ``length[i]`` examples ranked first for example ``i`` (by
    similarity, then insertion order), in rank order: ``nbr`` their ``seq``, ``sim``
    their similarities (padding: ``-1`` and ``-inf``). Lists are built ``extra`` deeper
    than ``k``: an evicted example shortens the lists it was in, and a list is only
    recomputed (one product) once it is shorter than ``k``; a new example is inserted
    into the lists it enters (one matrix-vector product for all of them).
    """

    __slots__ = ("kk", "length", "lineage", "nbr", "pool", "seq", "sim", "width")

    def __init__(self, ex: ExampleSet, kk: int, width: int, nbr: NDArray[np.int64],
                 sim: NDArray[np.float64], length: NDArray[np.int64]) -> None:
        self.lineage = ex.lineage
        self.pool = ex.pool
        self.seq = ex.seq.copy()
        self.kk = kk
        self.width = width
        self.nbr = nbr
        self.sim = sim
        self.length = length

    @staticmethod
    def rows(ex: ExampleSet, rows: NDArray[np.int64], width: int
             ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
        """Lists of ``rows`` from scratch (``min(width, m - 1)`` deep), in chunks."""
        depth = min(width, len(ex) - 1)
        nbr = np.full((rows.size, width), -1, dtype=np.int64)
        sim = np.full((rows.size, width), -np.inf)
        for start in range(0, rows.size, _CHUNK):
            part = rows[start : start + _CHUNK]
            S = ex.self_dots(part)
            S[np.arange(part.size), part] = -np.inf
            cols = select(S, depth)
            sims = np.take_along_axis(S, cols, axis=1)
            seqs = ex.seq[cols]
            order = np.lexsort((seqs, -sims), axis=1)  # rank order: similarity, then seq
            nbr[start : start + part.size, :depth] = np.take_along_axis(seqs, order, axis=1)
            sim[start : start + part.size, :depth] = np.take_along_axis(sims, order, axis=1)
        return nbr, sim, np.full(rows.size, depth, dtype=np.int64)

    @classmethod
    def build(cls, ex: ExampleSet, kk: int, extra: int) -> _Neighbours:
        width = kk + extra
        nbr, sim, length = cls.rows(ex, np.arange(len(ex), dtype=np.int64), width)
        return cls(ex, kk, width, nbr, sim, length)

    def scores(self, ex: ExampleSet, label_weights: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each example's vote from its first ``kk`` neighbours, summed in rank order."""
        nbr, sim = self.nbr[:, : self.kk], self.sim[:, : self.kk]
        seq = ex.seq
        span = int(seq[-1] - seq[0]) + 1 if seq.size else 0
        if span <= 8 * seq.size:  # seq -> row by a small look-up table
            lut = np.zeros(span, dtype=np.int64)
            lut[seq - seq[0]] = np.arange(seq.size)
            pos = lut[nbr - seq[0]]
        else:
            pos = np.searchsorted(seq, nbr)
        return np.asarray((sim * label_weights[pos]).sum(axis=1), dtype=np.float64)

    def updated(self, ex: ExampleSet, kk: int, extra: int) -> _Neighbours:
        """The lists for the example set as it is now, from these (of an earlier state of
        the same set). Same result as :meth:`build`, entry for entry in the first ``kk``."""
        seq = ex.seq
        is_new = ~np.isin(seq, self.seq)
        added = np.flatnonzero(is_new)
        appended = added.size == 0 or added[0] == seq.size - added.size
        if (ex.lineage is not self.lineage or kk != self.kk or kk + extra != self.width
                or not appended or 4 * added.size > seq.size):
            return _Neighbours.build(ex, kk, extra)
        kept_old = np.isin(self.seq, seq)
        nbr, sim, length = self.nbr[kept_old], self.sim[kept_old], self.length[kept_old]
        n_kept = nbr.shape[0]
        gone = self.seq[~kept_old]
        if gone.size:
            hit = np.isin(nbr, gone)
            rows = np.flatnonzero(hit.any(axis=1))
            if rows.size:  # drop evicted neighbours, keeping rank order (arrays are copies)
                keep = ~hit[rows]
                order = np.argsort(~keep, axis=1, kind="stable")
                nbr[rows] = np.where(np.take_along_axis(keep, order, 1),
                                     np.take_along_axis(nbr[rows], order, 1), -1)
                sim[rows] = np.where(np.take_along_axis(keep, order, 1),
                                     np.take_along_axis(sim[rows], order, 1), -np.inf)
                length[rows] -= (~keep).sum(axis=1)
        if added.size and n_kept:
            C = ex.dots_to(added)[:n_kept]  # kept rows come first, in order
            cols = np.arange(self.width)
            for j, a_seq in enumerate(seq[added]):
                c = C[:, j]
                last = np.take_along_axis(sim, np.maximum(length - 1, 0)[:, None], 1).ravel()
                enter = (length > 0) & (c > last)  # ties rank after: the new seq is larger
                rows = np.flatnonzero(enter)
                if rows.size == 0:
                    continue
                at = (sim[rows] >= c[rows, None]).sum(axis=1)  # entries ranked before
                shift = cols[None, :] > at[:, None]
                prev_n = np.concatenate([nbr[rows, :1], nbr[rows, :-1]], axis=1)
                prev_s = np.concatenate([sim[rows, :1], sim[rows, :-1]], axis=1)
                new_n = np.where(shift, prev_n, nbr[rows])
                new_s = np.where(shift, prev_s, sim[rows])
                here = cols[None, :] == at[:, None]
                new_n[here] = a_seq
                new_s[here] = c[rows]
                tail = cols[None, :] >= length[rows, None]  # lengths stay: the last drops
                new_n[tail] = -1
                new_s[tail] = -np.inf
                nbr[rows], sim[rows] = new_n, new_s
        out_n = np.full((seq.size, self.width), -1, dtype=np.int64)
        out_s = np.full((seq.size, self.width), -np.inf)
        out_l = np.zeros(seq.size, dtype=np.int64)
        out_n[:n_kept], out_s[:n_kept], out_l[:n_kept] = nbr, sim, length
        redo = np.concatenate([added, np.flatnonzero(length < kk)])
        if redo.size:
            out_n[redo], out_s[redo], out_l[redo] = _Neighbours.rows(ex, redo, self.width)
        return _Neighbours(ex, kk, self.width, out_n, out_s, out_l)


_SHARED_LISTS: list[tuple[weakref.ref[Any], int, _Neighbours]] = []


def _shared_build(ex: ExampleSet, kk: int, extra: int) -> _Neighbours:
    """:meth:`_Neighbours.build`, shared by example sets over one matrix (full training)."""
    for ref, width, value in _SHARED_LISTS:
        if width == kk + extra and value.kk == kk and ref() is ex.pool and np.array_equal(value.seq, ex.seq):
            if value.lineage is not ex.lineage:  # same matrix, another example set
                value = _Neighbours(ex, kk, value.width, value.nbr, value.sim, value.length)
            return value
    value = _Neighbours.build(ex, kk, extra)
    _SHARED_LISTS[:] = [e for e in _SHARED_LISTS if e[0]() is not None][:3]
    _SHARED_LISTS.insert(0, (weakref.ref(ex.pool), kk + extra, value))
    return value


def _normalized(votes: NDArray[np.float64], sims: NDArray[np.float64]) -> NDArray[np.float64]:
    """``votes`` divided by the summed neighbour similarity of each row (0 where none)."""
    total = sims.sum(axis=1)
    out = np.zeros(votes.shape, dtype=np.float64)
    np.divide(votes, total, out=out, where=total > 0)
    return out


def neighbours(X: sp.csr_matrix, ex: ExampleSet, k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Top-``k`` pool rows of each row of ``X`` and their similarities, in row chunks
    (one sparse product per chunk against the pool's transposed compact matrix)."""
    n = X.shape[0]
    kk = min(k, len(ex))
    idx_out = np.zeros((n, kk), dtype=np.int64)
    sim_out = np.zeros((n, kk), dtype=np.float64)
    if kk == 0:
        return idx_out, sim_out
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        S = ex.dots(X[start:stop])
        idx, sims = top_k(S, kk)
        idx_out[start:stop] = idx
        sim_out[start:stop] = sims
    return idx_out, sim_out


class KNN(ScoringModel):
    """kNN vote over the profile's judged documents.

    Parameters
    ----------
    k
        Number of neighbours.
    vote
        ``"positive"`` or ``"signed"``.
    normalize
        Divide the vote by the summed similarity of the ``k`` neighbours (the share of
        the neighbourhood's similarity that votes relevant), as in batch
        categorization with a normalised vote.
    """

    name = "knn"

    def __init__(self, k: int = 30, vote: str = "positive", normalize: bool = False) -> None:
        self.k = k
        self.vote = vote
        self.normalize = normalize
        if not isinstance(normalize, bool):
            raise ParameterError(f"normalize must be a bool, got {normalize!r}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ParameterError(f"k must be a positive integer, got {k!r}")
        if vote not in ("positive", "signed"):
            raise ParameterError(f"vote must be 'positive' or 'signed', got {vote!r}")
        self._lists: _Neighbours | None = None
        self.bind(0, None, None)

    def get_params(self) -> dict[str, Any]:
        return {"k": self.k, "vote": self.vote, "normalize": self.normalize}

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
        idx, sims = neighbours(sp.csr_matrix(X), ex, self.k)
        votes = (sims * self.label_weights()[idx]).sum(axis=1)
        return _normalized(votes, sims) if self.normalize else np.asarray(votes, dtype=np.float64)

    def loo_scores(self) -> NDArray[np.float64]:
        """Each example's score from its ``k`` nearest *other* examples. The neighbour
        lists are kept up to date across judgments (new examples merged in, lists that
        lost an evicted example recomputed), so a judgment costs two products with the
        new rows instead of all pairs."""
        ex = self._examples()
        if len(ex) == 0:
            return np.zeros(0)
        kk = min(self.k, len(ex) - 1)
        extra = max(8, kk // 2)
        lists = self._lists
        if lists is not None and lists.pool is ex.pool and lists.lineage is ex.lineage:
            pass
        elif lists is not None and lists.lineage is ex.lineage:
            lists = lists.updated(ex, kk, extra)
        else:
            lists = _shared_build(ex, kk, extra)
        self._lists = lists
        votes = lists.scores(ex, self.label_weights())
        return _normalized(votes, lists.sim[:, :kk]) if self.normalize else votes

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
            groups.setdefault((id(m._examples().pool), m.k), []).append(j)
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
            ex = first._examples()
            if len(ex) == 0:
                continue
            idx, sims = neighbours(sp.csr_matrix(X), ex, first.k)
            acc = np.zeros((X.shape[0], len(cols)))
            for j in range(idx.shape[1]):
                acc += sims[:, j : j + 1] * LW[idx[:, j]]
            norm = [i for i, c in enumerate(cols) if getattr(self.models[c], "normalize", False)]
            if norm:
                total = sims.sum(axis=1)[:, None]
                acc[:, norm] = np.divide(acc[:, norm], total, out=np.zeros((acc.shape[0], len(norm))),
                                         where=total > 0)
            out[:, cols] = acc
        return out
