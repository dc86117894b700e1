"""k nearest neighbours over the profile's judged documents.

The pool is the profile's :class:`~sift.filters.examples.ExampleSet`: in batch
filtering the labelled training documents; in adaptive filtering, judged stream
documents are added as they are judged. The capped set's eviction policy
(pseudolabels first, then the oldest real judgments) bounds the pool.

The score of a document ``d`` is a similarity-weighted vote of its ``k`` most
similar pool documents (cosine; vectors are unit length):
``vote="positive"`` (Yang's kNN) sums ``w_i * sim(d, x_i)`` over the relevant
neighbours; ``vote="signed"`` also subtracts the non-relevant ones.

The ``k`` neighbours are the most similar pool documents, ties going to the earlier
inserted (:func:`select`), and the vote adds their ``w_i * sim(d, x_i)`` in that
rank order (:func:`neighbours`), as a pool document's leave-one-out score does.
Scoring never scans the pool document by document: one sparse product gives the
similarities to the whole pool, a partition the top ``k``. Stacked, many profiles
share one product with the union of their pools (:class:`KNNStack`).

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
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.base import MAX_WEIGHT, ScoringModel, Stack, check_positive
from sift.filters.errors import ParameterError
from sift.filters.examples import ExampleSet, _Compact
from sift.filters.sparse import dense_product, isin_sorted, nonzero_2d, take_rows, unique

_CHUNK = 1024


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
    mask = kth[:, None] <= S  # the kk largest, and any more equal to the kk-th
    extra = np.flatnonzero(mask.sum(axis=1) > kk)
    if extra.size:  # rows with ties at the kk-th: the lowest columns among them
        sub = S[extra]
        greater = kth[extra, None] < sub
        equal = kth[extra, None] == sub
        need = kk - greater.sum(axis=1)
        mask[extra] = greater | (equal & (np.cumsum(equal, axis=1) <= need[:, None]))
    return nonzero_2d(mask)[1].reshape(n, kk).astype(np.int64, copy=False)


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
    def rows(ex: ExampleSet, rows: NDArray[np.int64], width: int,
             dots: NDArray[np.float64] | None = None
             ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
        """Lists of ``rows`` from scratch (``min(width, m - 1)`` deep), in chunks;
        ``dots``: their products with every example, if already computed (the same
        bits as ``ex.self_dots(rows)``)."""
        depth = min(width, len(ex) - 1)
        nbr = np.full((rows.size, width), -1, dtype=np.int64)
        sim = np.full((rows.size, width), -np.inf)
        for start in range(0, rows.size, _CHUNK):
            part = rows[start : start + _CHUNK]
            S = ex.self_dots(part) if dots is None else dots[start : start + part.size].copy()
            S[np.arange(part.size), part] = -np.inf
            cols = select(S, depth)
            sims = take_rows(S, cols)
            seqs = ex.seq[cols]
            order = np.lexsort((seqs, -sims), axis=1)  # rank order: similarity, then seq
            nbr[start : start + part.size, :depth] = take_rows(seqs, order)
            sim[start : start + part.size, :depth] = take_rows(sims, order)
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

    @staticmethod
    def _merged(nbr: NDArray[np.int64], sim: NDArray[np.float64], length: NDArray[np.int64],
                C: NDArray[np.float64], new_seq: NDArray[np.int64]
                ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """The lists with the new examples (similarities ``C``, one column each, and
        sequence numbers ``new_seq``, larger than any in the lists) inserted where they
        rank, each list keeping its length. A list's new content is the first
        ``length`` of its old entries and the new examples in rank order (similarity,
        then sequence number): what inserting them one after the other gives, since a
        new example ranks after an old one of equal similarity. Only the new examples
        that rank before a list's last entry take part, a few per list. The arrays are
        changed in place (and returned)."""
        last = take_rows(sim, np.maximum(length - 1, 0)[:, None]).ravel()
        enters = (last[:, None] < C) & (length > 0)[:, None]
        r, j = nonzero_2d(enters)  # by list, then by sequence number
        if r.size == 0:
            return nbr, sim
        # r is sorted: each list's entries are one run (np.unique without its sort)
        first = np.flatnonzero(np.concatenate(([True], r[1:] != r[:-1])))
        rows, counts = r[first], np.diff(np.append(first, r.size))
        slot = np.arange(r.size) - np.repeat(first, counts)  # rank of entry among its row's
        where = np.repeat(np.arange(rows.size), counts)
        width, extra = nbr.shape[1], int(counts.max())
        cand_s = np.full((rows.size, extra), -np.inf)
        cand_n = np.full((rows.size, extra), -1, dtype=np.int64)
        cand_s[where, slot] = C[r, j]
        cand_n[where, slot] = new_seq[j]
        all_s = np.concatenate([sim[rows], cand_s], axis=1)
        all_n = np.concatenate([nbr[rows], cand_n], axis=1)
        # rank order by a stable sort on similarity alone: a list's entries are in rank
        # order and come first, the new ones follow by sequence number, so equal
        # similarities keep the order of their sequence numbers; padding (-inf) sorts
        # last, and only the first ``length`` entries are kept anyway
        order = np.argsort(-all_s, axis=1, kind="stable")[:, :width]
        new_s = take_rows(all_s, order)
        new_n = take_rows(all_n, order)
        short = length[rows] < width
        if short.any():  # lengths stay
            tail = np.arange(width)[None, :] >= length[rows, None]
            new_s[tail] = -np.inf
            new_n[tail] = -1
        sim[rows], nbr[rows] = new_s, new_n
        return nbr, sim

    def updated(self, ex: ExampleSet, kk: int, extra: int) -> _Neighbours:
        """The lists for the example set as it is now, from these (of an earlier state of
        the same set). Same result as :meth:`build`, entry for entry in the first ``kk``."""
        seq = ex.seq
        is_new = ~isin_sorted(seq, self.seq)  # both in insertion order
        added = np.flatnonzero(is_new)
        appended = added.size == 0 or added[0] == seq.size - added.size
        if (ex.lineage is not self.lineage or kk != self.kk or kk + extra != self.width
                or not appended or 4 * added.size > seq.size):
            return _Neighbours.build(ex, kk, extra)
        kept_old = isin_sorted(self.seq, seq)
        # the new lists are written straight into their final arrays: the kept lists
        # first (in order), then the new examples' (they were appended); the old arrays
        # are left as they are (lists may be shared, see _shared_build)
        m, n_kept = seq.size, int(np.count_nonzero(kept_old))
        out_n = np.empty((m, self.width), dtype=np.int64)
        out_s = np.empty((m, self.width))
        out_l = np.empty(m, dtype=np.int64)
        nbr, sim, length = out_n[:n_kept], out_s[:n_kept], out_l[:n_kept]
        first = int(np.argmax(kept_old)) if n_kept else 0
        if kept_old[first : first + n_kept].all():  # the usual case, a range: plain copies
            nbr[...] = self.nbr[first : first + n_kept]
            sim[...] = self.sim[first : first + n_kept]
            length[...] = self.length[first : first + n_kept]
        else:
            np.compress(kept_old, self.nbr, axis=0, out=nbr)
            np.compress(kept_old, self.sim, axis=0, out=sim)
            np.compress(kept_old, self.length, axis=0, out=length)
        gone = self.seq[~kept_old]
        if gone.size:
            if gone.size <= 4:  # a judgment evicts one: comparisons beat isin's table
                hit = nbr == gone[0]
                for g in gone[1:]:
                    hit |= nbr == g
            else:
                hit = np.isin(nbr, gone)
            rows = np.flatnonzero(hit.any(axis=1))
            if rows.size:  # drop evicted neighbours, keeping rank order (in the new arrays)
                keep = ~hit[rows]
                counts = keep.sum(axis=1)
                src = np.flatnonzero(keep)  # kept entries, row by row, in rank order
                # each kept entry's new place: its row's start, then its rank among the kept
                dest = np.arange(src.size) + np.repeat(np.arange(rows.size) * self.width
                                                       - (np.cumsum(counts) - counts), counts)
                new_n = np.full(rows.size * self.width, -1, dtype=np.int64)
                new_s = np.full(rows.size * self.width, -np.inf)
                new_n[dest] = nbr[rows].ravel()[src]
                new_s[dest] = sim[rows].ravel()[src]
                nbr[rows] = new_n.reshape(rows.size, self.width)
                sim[rows] = new_s.reshape(rows.size, self.width)
                length[rows] -= self.width - counts
        C = ex.dots_to(added) if added.size else None  # kept rows come first, in order
        if C is not None and n_kept:
            self._merged(nbr, sim, length, C[:n_kept], seq[added])  # in place
        if C is not None:  # the new examples' lists (rows n_kept.., every entry), from the same products
            out_n[added], out_s[added], out_l[added] = _Neighbours.rows(ex, added, self.width,
                                                                      C.T)
        redo = np.flatnonzero(length < kk)
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


def ranked(S: NDArray[np.float64], kk: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Columns and values of the ``kk`` largest entries of each row, in rank order:
    similarity, then column (insertion order), as :func:`select` chooses them."""
    cols = select(S, kk)
    sims = take_rows(S, cols)
    order = np.argsort(-sims, axis=1, kind="stable")  # cols ascend: ties stay in column order
    return take_rows(cols, order), take_rows(sims, order)


def neighbours(X: sp.csr_matrix, ex: ExampleSet, k: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Top-``k`` pool rows of each row of ``X`` and their similarities, in rank order
    (similarity, then insertion order), in row chunks (one sparse product per chunk
    against the pool's transposed compact matrix).

    This is the reference the stacked scoring (:class:`KNNStack`) reproduces bit for bit:
    the vote of a document is ``(sims * label_weights[idx]).sum(axis=1)`` over these
    rank-ordered lists, the same sum a pool document's leave-one-out score is."""
    n = X.shape[0]
    kk = min(k, len(ex))
    idx_out = np.zeros((n, kk), dtype=np.int64)
    sim_out = np.zeros((n, kk), dtype=np.float64)
    if kk == 0:
        return idx_out, sim_out
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        idx, sims = ranked(ex.dots(X[start:stop]), kk)
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
    query_weight
        Weight of the profile's query text in the pool, as a relevant pseudo-document
        added by :meth:`Profile.fit <sift.filters.profile.Profile.fit>` (a
        pseudo-positive: it votes, it is evicted before real judgments, and TROT
        leaves it out like the other pseudo-positives); 0 leaves the query out. Rocchio
        and Kantor start from the query; without this kNN was the one model that
        ignored it. Chosen on the validation split, three seeds (macro T11SU / T11F
        0.329 / 0.302 without the query; weight 1: 0.425 / 0.396, 2: 0.446 / 0.417,
        4: 0.455 / 0.426, 8: 0.456 / 0.425; ``benchmarks/engine_thresholds.py seeds
        0,1,2 --model knn base mp_query_weight=0 ...``). Not used by the kNN inside a
        fusion model.

    Examples
    --------
    >>> KNN(k=10).get_params()
    {'k': 10, 'vote': 'positive', 'normalize': False, 'query_weight': 4.0}
    """

    name = "knn"

    def __init__(self, k: int = 30, vote: str = "positive", normalize: bool = False,
                 query_weight: float = 4.0) -> None:
        self.k = k
        self.vote = vote
        self.normalize = normalize
        self.query_weight = query_weight
        check_positive("query_weight", query_weight, allow_zero=True, at_most=MAX_WEIGHT)
        if not isinstance(normalize, bool):
            raise ParameterError(f"normalize must be a bool, got {normalize!r}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ParameterError(f"k must be a positive integer, got {k!r}")
        if vote not in ("positive", "signed"):
            raise ParameterError(f"vote must be 'positive' or 'signed', got {vote!r}")
        self._lists: _Neighbours | None = None
        self.bind(0, None, None)

    def get_params(self) -> dict[str, Any]:
        return {"k": self.k, "vote": self.vote, "normalize": self.normalize,
                "query_weight": self.query_weight}

    @property
    def no_evidence_score(self) -> float | None:
        """0 for either vote: a document sharing no term with the pool (empty, or made of
        unseen words) scores 0, so a threshold at or below 0 would deliver it. For the
        positive vote 0 also means no relevant neighbour; for the signed vote a vote of
        exactly 0 with neighbours is balanced evidence, and below 0 evidence against, so
        the floor keeps a signed profile to documents its neighbours vote for on balance.
        Until the forty-fourth session the signed vote had no floor and 4 of 15 Reuters
        profiles in an audit started with a negative threshold, delivering empty
        documents. Validation split, three seeds (``benchmarks/engine_replay.py
        --validation --models knn --no-full --no-peer --seeds 0,1,2 --model-params
        '{"vote": "signed"}'``): adaptive 0.471 / 0.478 -> 0.486 / 0.480 macro T11SU /
        T11F, batch 0.386 / 0.437 -> 0.439 / 0.468
        (``benchmarks/results/engine_replay_validation_knn_signed_s44_{before,floor}.json``).

        >>> KNN().no_evidence_score, KNN(vote="signed").no_evidence_score
        (0.0, 0.0)
        """
        return 0.0

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

    def unlearn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        """Nothing to do: the pool is the profile's example set, whose labels the profile
        changes. The neighbour lists do not depend on labels (they are kept while the
        vectors are), and the votes read the labels at every call (:meth:`label_weights`)."""

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


_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xBF58476D1CE4E5B9)
_K3 = np.uint64(0x94D049BB133111EB)


def _mix(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """splitmix64's finaliser (wrapping uint64 arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * _K2
    z = (z ^ (z >> np.uint64(27))) * _K3
    return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


_ROW_KEYS: weakref.WeakKeyDictionary[Any, NDArray[np.uint64]] = weakref.WeakKeyDictionary()


def _row_keys(ex: ExampleSet) -> NDArray[np.uint64]:
    """A 64-bit key per example from its vector's content (hashed columns and value
    bits); the ``j``-th repeat of one vector in the set gets a key of its own. Keys
    only pair candidates: :class:`_Union` compares the vectors they pair."""
    c = ex.pool
    keys = _ROW_KEYS.get(c)
    if keys is not None:
        return keys
    comp = ex._compact()
    with np.errstate(over="ignore"):
        h = _mix(comp.cols[comp.ind].astype(np.uint64) * _K1 + comp.data.view(np.uint64))
        cs = np.zeros(h.size + 1, np.uint64)
        np.cumsum(h, out=cs[1:])
        lengths = np.diff(comp.indptr).astype(np.uint64)
        keys = _mix(cs[comp.indptr[1:]] - cs[comp.indptr[:-1]] + lengths * _K3)
        m = keys.size
        if m > 1:
            order = np.argsort(keys, kind="stable")
            sk = keys[order]
            first = np.concatenate([[True], sk[1:] != sk[:-1]])
            at = np.arange(m)
            occ_sorted = at - np.maximum.accumulate(np.where(first, at, 0))
            if occ_sorted.any():
                occ = np.empty(m, np.uint64)
                occ[order] = occ_sorted.astype(np.uint64)
                keys = np.where(occ > 0, _mix(keys ^ (occ * _K2)), keys)
    _ROW_KEYS[c] = keys
    return keys


class _Union:
    """The de-duplicated union of several example sets' vectors.

    Profiles built from one training matrix and fed one stream hold mostly the same
    documents: stacked scoring computes one similarity per union document instead of
    one per (profile, example). ``rows[j]`` maps set ``j``'s examples to union rows.
    Sets with no examples are left out (``rows[j] is None``), and so is a set whose
    vectors differ from the union rows their keys paired them with: every pairing is
    checked on the vectors themselves.
    """

    def __init__(self, sets: Sequence[ExampleSet]) -> None:
        live = [j for j, ex in enumerate(sets) if len(ex)]
        keys = [_row_keys(sets[j]) for j in live]
        sizes = np.array([k.size for k in keys], dtype=np.int64)
        n_features = next((ex.n_features for ex in sets), 1)
        self.rows: list[NDArray[np.int64] | None] = [None] * len(sets)
        if not live:
            self.n = 0
            self.compact = _Compact.empty()
            return
        uniq, first, inv = np.unique(np.concatenate(keys), return_index=True, return_inverse=True)
        n = int(uniq.size)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        ids = [inv[bounds[i] : bounds[i + 1]].astype(np.int64) for i in range(len(live))]
        # each union row's vector, from the first set holding it
        src_set = np.searchsorted(bounds, first, side="right") - 1
        pieces, piece_ids = [], []
        for i in unique(src_set):
            ex = sets[live[i]]
            comp = ex._compact()
            mine = np.flatnonzero(src_set == i)
            sub = comp.matrix()[first[mine] - bounds[i]]
            pieces.append(sp.csr_matrix((sub.data, comp.cols[sub.indices], sub.indptr),
                                        shape=(mine.size, ex.n_features)))
            piece_ids.append(mine)
        at = np.empty(n, np.int64)
        at[np.concatenate(piece_ids)] = np.arange(n)
        M = sp.vstack(pieces, format="csr")[at]
        self.n = n
        for i, j in enumerate(live):
            rows = ids[i]
            if np.bincount(rows, minlength=n).max() <= 1 and self._same(sets[j], M, rows):
                self.rows[j] = rows
        self.compact = _Compact.from_csr(sp.csr_matrix(M, shape=(n, n_features)))

    @staticmethod
    def _same(ex: ExampleSet, M: sp.csr_matrix, rows: NDArray[np.int64]) -> bool:
        """Whether union rows ``rows`` hold exactly (bit for bit) the examples' vectors."""
        comp = ex._compact()
        lengths = np.diff(comp.indptr)
        if not np.array_equal(M.indptr[rows + 1] - M.indptr[rows], lengths):
            return False
        at = np.repeat(M.indptr[rows] - comp.indptr[:-1], lengths) + np.arange(comp.ind.size)
        return bool(np.array_equal(M.indices[at], comp.cols[comp.ind])
                    and np.array_equal(M.data[at].view(np.uint64), comp.data.view(np.uint64)))


#: similarities (documents x union rows) computed in one scoring step
_BLOCK = 1 << 22
#: a document short of k + 1 members among its candidates is looked at again with this
#: many times as many: a document's most similar union rows are often other profiles'
#: positives, outside most pools
_WIDEN = 2
#: (document, model) pairs ranked together on their own codes
_PAIRS = 1024
#: batches this small are scored pool by pool while the stack's union is not built
_FEW = 16


def _exceptions(code: NDArray[np.unsignedinteger[Any]]
                ) -> tuple[NDArray[np.unsignedinteger[Any]], NDArray[np.int64], NDArray[np.int64]]:
    """Each row's most common value (ties: the smallest) and where a row differs from
    it, as CSR pointers and columns.

    >>> d, ptr, col = _exceptions(np.array([[1, 1, 0], [0, 0, 2]], dtype=np.uint8))
    >>> d.tolist(), ptr.tolist(), col.tolist()
    ([1, 0], [0, 1, 2], [2, 2])
    """
    U, G = code.shape
    if G == 0:
        return np.zeros(U, dtype=code.dtype), np.zeros(U + 1, np.int64), np.zeros(0, np.int64)
    sc = np.sort(code, axis=1)
    start = np.ones((U, G), dtype=bool)
    start[:, 1:] = sc[:, 1:] != sc[:, :-1]
    first = np.flatnonzero(start)  # runs of one value; every row starts one
    length = np.diff(np.append(first, U * G))
    row = first // G
    best = np.lexsort((-length, row))  # by row, the longest run first
    lead = best[np.flatnonzero(np.diff(np.append(-1, row[best])))]
    dcode = sc.ravel()[first[lead]]
    er, ec = nonzero_2d(code != dcode[:, None])
    ptr = np.zeros(U + 1, np.int64)
    np.cumsum(np.bincount(er, minlength=U), out=ptr[1:])
    return dcode, ptr, ec.astype(np.int64)


class KNNStack(Stack):
    """Many kNN models scored at once over the union of their pools.

    The pools' documents are de-duplicated into one union (:class:`_Union`): profiles
    trained on one matrix and fed one stream hold mostly the same documents. One sparse
    product per batch gives each document's similarity to every union document, the
    same bits as each pool's own product (a dot product adds the document's entries in
    the document's order, whatever the other columns are). Each model's neighbours are
    then its first members among the document's ``T`` most similar union documents,
    ``T`` sized from the models' shares of the union; pools sharing most of their
    documents share one default list per document, and only models with an exception
    near its top are ranked on their own (:meth:`_votes`). Votes are summed as
    :func:`neighbours` lists are: scores equal :meth:`KNN.score`'s bit for bit. A pool
    matrix several models share (full training) is scored on its own, one product and
    neighbour search for all of them, and so are pools left out of the union.
    """

    def __init__(self, models: Sequence[ScoringModel]) -> None:
        super().__init__(models)
        for m in models:
            if not isinstance(m, KNN):
                raise ParameterError(f"KNNStack takes kNN models only, got {type(m).__name__}")
        self._built = False

    def update(self, j: int, model: ScoringModel) -> bool:
        """Pools and label weights are combined at build time: ask for a rebuild."""
        return False

    def _build(self) -> None:
        models = [m for m in self.models if isinstance(m, KNN)]
        sets = [m._examples() for m in models]
        # models sharing one pool matrix (full training) share its product and neighbour
        # search already: only pools of their own go into the union
        holders: dict[int, list[int]] = {}
        for j, ex in enumerate(sets):
            holders.setdefault(id(ex.pool), []).append(j)
        own = [js[0] for js in holders.values() if len(js) == 1 and len(sets[js[0]])]
        if len(own) < 2:
            own = []
        mine = set(own)
        union = _Union([ex if j in mine else ExampleSet(None, ex.n_features) for j, ex in enumerate(sets)])
        self.union = union
        cols = [j for j, r in enumerate(union.rows) if r is not None]
        # candidates a document needs for a model to find its k + 1 members (with margin):
        # a pool holding a small share of the union would widen the search for every
        # model, so such pools (at most half the typical share) are scored on their own
        need = {j: 1.5 * min(models[j].k + 1, len(sets[j])) * union.n / len(sets[j]) + 16 for j in cols}
        if cols:
            cap = 2 * float(np.median(list(need.values())))
            cols = [j for j in cols if need[j] <= cap]
        # a pool whose documents other pools rarely hold (the profile's own judged
        # documents, once they have pushed out the shared pseudo-negatives, evicted
        # first: any long-running kNN profile) has few default members, and the search
        # below would widen to the whole union and rank its pairs one by one: such a
        # model is scored on its own pool. 50 Reuters profiles with 2,000-document pools
        # (`benchmarks/knn_own_pools.py`, documents/s, union against pool by pool): 1,500
        # documents of their own 694 against 430, 1,800 228 against 397, 2,000 47 against
        # 429 (`benchmarks/results/knn_own_pools.json`); a fiftieth-session soak slowed
        # from about 2,000 to 300 documents/s once the pools were full. Gathering a
        # model's similarities from the union's product instead was slower than its own
        # pool's product (307 against 430 at 2,000, a throw-away patch).
        mostly_own = set(self._mostly_own(cols))
        cols = [j for j in cols if j not in mostly_own]
        self.cols = np.asarray(cols, dtype=np.int64)
        P = len(cols)
        self.kk = np.array([min(models[j].k, len(sets[j])) for j in cols], dtype=np.int64)
        self.kk1 = np.array([min(models[j].k + 1, len(sets[j])) for j in cols], dtype=np.int64)
        self.norm = np.array([models[j].normalize for j in cols], dtype=bool)
        #: models by (k, k + 1) capped at the pool size: their columns of ``cols``, each
        #: model's code for each union row (``|g| x union.n``; 0: not in the pool; ``c``:
        #: label weight ``vals[c]``), ``vals``, k, k + 1. Codes are one byte for up to 254
        #: distinct label weights.
        self.groups: list[tuple[NDArray[np.int64], NDArray[np.unsignedinteger[Any]],
                                NDArray[np.float64], int, int]] = []
        self.defaults: list[tuple[NDArray[np.unsignedinteger[Any]], NDArray[np.int64], NDArray[np.int64]]] = []
        for kk, k1 in sorted({(int(a), int(b)) for a, b in zip(self.kk, self.kk1, strict=True)}):
            g = np.flatnonzero((self.kk == kk) & (self.kk1 == k1))
            rows_g = [union.rows[cols[c]] for c in g]
            weights = [models[cols[c]].label_weights() for c in g]
            vals, inv = np.unique(np.concatenate(weights), return_inverse=True)
            dtype = np.uint8 if vals.size < 255 else np.uint16 if vals.size < 65535 else np.uint32
            code = np.zeros((g.size, union.n), dtype=dtype)
            start = 0
            for i, rows in enumerate(rows_g):
                assert rows is not None
                code[i, rows] = inv.ravel()[start : start + rows.size] + 1
                start += rows.size
            self.groups.append((g, code, np.concatenate([[0.0], vals]), kk, k1))
            #: per group: each union row's default code (the one most of the group's pools
            #: give it) and its exceptions, the pools whose code differs (a CSR of union
            #: rows over the group's columns: pointers, columns)
            self.defaults.append(_exceptions(np.ascontiguousarray(code.T)))
        self._positions: dict[int, NDArray[np.int32]] = {}
        self.T0 = int(min(union.n, np.ceil(max(need[j] for j in cols)))) if P else 0
        self.alone = sorted(set(range(len(models))) - set(cols))  # scored pool by pool
        self._padded: tuple[NDArray[np.int64], NDArray[np.float64]] | None = None
        self._built = True

    def _mostly_own(self, cols: list[int]) -> list[int]:
        """The models of ``cols`` fewer than an eighth of whose pool documents are held
        by more than half of the pools of ``cols``: their documents are rarely a union
        row's default (the code most pools give it). The eighth is where the union's
        search and the pool's own product cost about the same in the benchmark above
        (21 % shared: the union 1.6 times faster; 6 %: twice as slow)."""
        if len(cols) < 2:
            return []
        rows = [self.union.rows[j] for j in cols]
        held = np.bincount(np.concatenate([r for r in rows if r is not None]),
                           minlength=self.union.n)
        shared = held > len(cols) / 2
        return [j for j, r in zip(cols, rows, strict=True)
                if r is not None and r.size and np.count_nonzero(shared[r]) * 8 < r.size]

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """Scores of every row of ``X`` against every model. A few documents, before the
        union is built, are scored pool by pool instead (building it takes a product's
        worth of work; a stack is rebuilt whenever a pool changes)."""
        X = sp.csr_matrix(X)
        out = np.zeros((X.shape[0], len(self.models)))
        if not self._built and X.shape[0] < _FEW:
            self._score_pools(X, out, range(len(self.models)))
            return out
        if not self._built:
            self._build()
        if self.cols.size:
            self._score_union(X, out)
        self._score_pools(X, out, self.alone)
        return out

    def _score_pools(self, X: sp.csr_matrix, out: NDArray[np.float64], which: Iterable[int]) -> None:
        """Models ``which`` scored on their own pools: one product and neighbour search
        per pool matrix (models sharing one, as in full training, share them)."""
        groups: dict[tuple[int, int], list[int]] = {}
        for j in which:
            m = self.models[j]
            assert isinstance(m, KNN)
            if len(m._examples()):
                groups.setdefault((id(m._examples().pool), m.k), []).append(j)
        for cols in groups.values():
            first = self.models[cols[0]]
            assert isinstance(first, KNN)
            idx, sims = neighbours(X, first._examples(), first.k)
            for c in cols:
                model = self.models[c]
                assert isinstance(model, KNN)
                votes = (sims * model.label_weights()[idx]).sum(axis=1)
                out[:, c] = _normalized(votes, sims) if model.normalize else votes

    def _score_union(self, X: sp.csr_matrix, out: NDArray[np.float64]) -> None:
        """Votes of the models in the union into their columns of ``out``."""
        n = X.shape[0]
        Xr = self.union.compact.restrict(X)
        UT = self.union.compact.transposed()
        step = max(1, min(_CHUNK, _BLOCK // max(1, self.union.n)))
        for start in range(0, n, step):
            stop = min(start + step, n)
            S = dense_product(Xr[start:stop], UT)
            self._votes(S, out, np.arange(start, stop))

    def _votes(self, S: NDArray[np.float64], out: NDArray[np.float64], at: NDArray[np.int64]) -> None:
        """Votes of the documents whose union similarities are ``S`` into rows ``at`` of
        ``out``.

        Pools built from one training matrix share most of their documents (the
        pseudo-negatives) with one label weight, so each union row has a *default*
        code, the one most pools give it, and few *exceptions* (pools that leave the
        row out, hold it with another weight, or hold a row most pools leave out).
        Among a document's ``T`` most similar union rows (``T0`` at first), the first
        ``k + 1`` rows with a non-zero default code give the vote of every model with
        no exception among them, computed once per document (:meth:`_default`); only
        the (document, model) pairs with an exception there are ranked on their own
        (:meth:`_pairs`). A document short of ``k + 1`` members among its ``T``
        candidates (or with a model short of them) is looked at again with ``_WIDEN``
        times as many, up to the whole union."""
        n, U = S.shape
        T = min(U, self.T0)
        rows = np.arange(n)
        while rows.size:
            Sr = S if rows.size == n else S[rows]
            if T >= U:
                cand = np.broadcast_to(np.arange(U), (rows.size, U))
            else:
                cand = np.argpartition(Sr, U - T, axis=1)[:, U - T :]  # the T most similar
            csim = take_rows(Sr, cand)
            order = np.argsort(-csim, axis=1)
            cand = take_rows(cand, order)
            csim = take_rows(csim, order)
            short = np.zeros(rows.size, dtype=bool)
            for gi in range(len(self.groups)):
                short |= self._group_votes(Sr, cand, csim, gi, out, at[rows], final=T >= U)
            rows = rows[short]
            T = min(U, _WIDEN * T)

    def _group_votes(self, S: NDArray[np.float64], cand: NDArray[np.int64], csim: NDArray[np.float64],
                     gi: int, out: NDArray[np.float64], at: NDArray[np.int64], final: bool) -> NDArray[np.bool_]:
        """Votes of group ``gi``'s models for the documents whose candidates (union rows
        by decreasing similarity) are ``cand``, ``csim``; returns the documents to look
        at again with more candidates (none when ``final``: every union row is one)."""
        g, _, _, _, k1 = self.groups[gi]
        dcode, ex_ptr, ex_col = self.defaults[gi]
        n, T = cand.shape
        G = g.size
        D = dcode[cand]  # n x T: each candidate's default code
        member = D != 0
        cum = np.cumsum(member, axis=1, dtype=np.int32)
        full = cum[:, -1] >= k1
        # rank of each document's (k + 1)-th default member; exceptions at or before it
        # change a model's list, exceptions after it do not
        last = np.where(full, np.argmax(cum >= k1, axis=1), T - 1)
        # every exception among the candidates: (document * G + model, rank)
        ne = np.diff(ex_ptr)[cand]
        if not final:
            ne[~full] = 0  # looked at again with more candidates
        hit = np.flatnonzero(ne)
        cnt = ne.ravel()[hit]
        starts = ex_ptr[cand.ravel()[hit]]
        within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        e_doc, e_t = np.divmod(np.repeat(hit, cnt), T)
        e_pid = e_doc * G + ex_col[np.repeat(starts, cnt) + within]
        pid = e_pid[e_t <= last[e_doc]]
        fd = np.flatnonzero(full)
        bad = self._default(fd, D, member, cum, csim, gi, out, at) if fd.size else fd
        # pairs ranked on their own: exceptions before the (k + 1)-th default member, every
        # model of a document whose default list has ties that may order differently, and
        # at the last widening every model of a document short of k + 1 default members
        extra = [bad] if not final else [bad, np.flatnonzero(~full)]
        every = np.concatenate(extra)
        if every.size:
            pid = np.concatenate([pid, (every[:, None] * G + np.arange(G)).ravel()])
        short = ~full if not final else np.zeros(n, dtype=bool)
        if pid.size:
            pid = unique(pid)
            r, c = np.divmod(pid, G)
            keep = full[r] | final
            r, c = r[keep], c[keep]
            order = np.argsort(e_pid, kind="stable")
            incomplete = self._pairs(S, cand, csim, D, (e_pid[order], e_t[order]), gi, r, c, out, at)
            if incomplete.size:
                assert not final  # with every union row a candidate, every pair is complete
                short[incomplete] = True
        return short

    def _default(self, fd: NDArray[np.int64], D: NDArray[np.unsignedinteger[Any]], member: NDArray[np.bool_],
                 cum: NDArray[np.int32], csim: NDArray[np.float64], gi: int, out: NDArray[np.float64],
                 at: NDArray[np.int64]) -> NDArray[np.int64]:
        """Votes from the default lists of documents ``fd`` (each with ``k + 1`` default
        members among its candidates) into every model of group ``gi``; returns those
        of ``fd`` whose list has ties the models' own order may break otherwise."""
        g, _, vals, kk, k1 = self.groups[gi]
        T = D.shape[1]
        sel = member[fd] & (cum[fd] <= k1)
        t = (np.flatnonzero(sel) % T).reshape(-1, k1)  # ranks of the k + 1 members
        lists = take_rows(csim[fd], t)
        codes = take_rows(D[fd], t)
        sims = np.ascontiguousarray(lists[:, :kk])
        cw = codes[:, :kk]
        votes = (sims * vals[cw]).sum(axis=1)
        norm = self.norm[g]
        block = np.broadcast_to(votes[:, None], (fd.size, g.size))
        if norm.any():
            block = np.where(norm[None, :], _normalized(votes, sims)[:, None], votes[:, None])
        out[np.ix_(at[fd], self.cols[g])] = block
        return fd[self._ties(lists, codes, kk, k1)]

    @staticmethod
    def _ties(lists: NDArray[np.float64], codes: NDArray[np.unsignedinteger[Any]], kk: int,
              k1: int) -> NDArray[np.bool_]:
        """Lists (rows of the ``k + 1`` members' similarities and codes, in the union's
        rank order) a pool's own order could rank otherwise with another vote: two tied
        neighbours with different label weights, or the ``k``-th tied with the
        ``(k + 1)``-th (tied neighbours of one weight give the same products in either
        order)."""
        sims = lists[:, :kk]
        cw = codes[:, :kk]
        eq = sims[:, 1:] == sims[:, :-1]
        bad = np.zeros(lists.shape[0], dtype=bool)
        tied = np.flatnonzero(eq.any(axis=1))
        if tied.size:
            bad[tied] = (eq[tied] & (cw[tied, 1:] != cw[tied, :-1])).any(axis=1)
        if k1 > kk:
            bad |= lists[:, kk] == lists[:, kk - 1]
        return bad

    def _pairs(self, S: NDArray[np.float64], cand: NDArray[np.int64], csim: NDArray[np.float64],
               D: NDArray[np.unsignedinteger[Any]], exc: tuple[NDArray[np.int64], NDArray[np.int64]],
               gi: int, r: NDArray[np.int64], c: NDArray[np.int64], out: NDArray[np.float64],
               at: NDArray[np.int64]) -> NDArray[np.int64]:
        """Votes of the (document, model) pairs ``r`` (of ``cand``), ``c`` (of group
        ``gi``), sorted by ``r * |g| + c``, from their own codes: each pair's first
        ``k + 1`` members among the candidates; pairs with ties that may order
        differently go to :meth:`_tied`. A pair's codes are its document's default
        codes ``D`` patched with its exceptions ``exc`` (pair id, rank; sorted by pair
        id). Returns the documents of pairs with fewer than ``k + 1`` members there.
        Pairs go in blocks small enough for their ``pairs x T`` arrays to stay in cache."""
        g, code_g, vals, kk, k1 = self.groups[gi]
        T = cand.shape[1]
        G = g.size
        e_pid, e_t = exc
        short = []
        for s in range(0, r.size, _PAIRS):
            rb, cb = r[s : s + _PAIRS], c[s : s + _PAIRS]
            pid = rb * G + cb
            codes = D[rb]  # pairs x T: the candidates' default codes, then the exceptions
            lo, hi = np.searchsorted(e_pid, [pid[0], pid[-1] + 1])
            if hi > lo:
                ep = e_pid[lo:hi]
                pos = np.minimum(np.searchsorted(pid, ep), pid.size - 1)
                mine = np.flatnonzero(pid[pos] == ep)
                pos, et = pos[mine], e_t[lo:hi][mine]
                codes[pos, et] = code_g[cb[pos], cand[rb[pos], et]]
            member = codes != 0
            cum = np.cumsum(member, axis=1, dtype=np.int32)
            ok = cum[:, -1] >= k1
            po = np.flatnonzero(ok)
            if po.size < rb.size:
                codes, member, cum = codes[po], member[po], cum[po]
                short.append(rb[~ok])
            np.less_equal(cum, k1, out=cum)  # cum: whether among the first k + 1
            f = np.flatnonzero(np.logical_and(member, cum, out=member)).reshape(-1, k1)
            rr, cc = rb[po], cb[po]
            lists = csim.ravel()[rr[:, None] * T + f % T]
            pcodes = codes.ravel()[f]
            sims = np.ascontiguousarray(lists[:, :kk])
            votes = (sims * vals[pcodes[:, :kk]]).sum(axis=1)
            norm = self.norm[g[cc]]
            if norm.any():
                votes = np.where(norm, _normalized(votes, sims), votes)
            out[at[rr], self.cols[g[cc]]] = votes
            bad = self._ties(lists, pcodes, kk, k1)
            if bad.any():
                self._tied(S, cand, csim, gi, rr[bad], cc[bad], codes[bad], out, at)
        return unique(np.concatenate(short)) if short else np.zeros(0, np.int64)

    def _tied(self, S: NDArray[np.float64], cand: NDArray[np.int64], csim: NDArray[np.float64], gi: int,
              rows: NDArray[np.int64], c: NDArray[np.int64], codes: NDArray[np.unsignedinteger[Any]],
              out: NDArray[np.float64], at: NDArray[np.int64]) -> None:
        """Votes of the (document, model) pairs ``rows`` (of ``S``), ``c`` (of group
        ``gi``), whose candidates' codes are ``codes``, ranked the reference way among
        the document's candidates: by similarity, then by position in the pool (looked
        up for tied members only). Exact when the ``k``-th neighbour is more similar
        than the least similar candidate (every pool document as similar is then a
        candidate); the other pairs go to :meth:`_exact`."""
        g, _, vals, kk, _ = self.groups[gi]
        T = cand.shape[1]
        if kk > T:
            self._exact(S, rows, g[c], kk, out, at)
            return
        member = codes != 0
        sims = csim[rows]
        eq = sims[:, 1:] == sims[:, :-1]
        tie_group = np.zeros(sims.shape, dtype=np.int64)
        np.cumsum(~eq, axis=1, out=tie_group[:, 1:])
        tied = np.zeros(sims.shape, dtype=bool)
        tied[:, 1:] = eq
        tied[:, :-1] |= eq
        tied &= member
        pr, pt = nonzero_2d(tied)
        pos = np.zeros(sims.shape, dtype=np.int64)
        positions = self._pool_positions(gi)
        pos[pr, pt] = positions.ravel()[c[pr] * positions.shape[1] + cand[rows[pr], pt]]
        big = np.int64(T + 1) << 32
        key = np.where(member, (tie_group << 32) + pos, big)
        order = np.argsort(key, axis=1, kind="stable")[:, :kk]
        top = take_rows(sims, order)
        cw = take_rows(codes, order)
        enough = member.sum(axis=1) >= kk
        if S.shape[1] > T:
            enough &= top[:, kk - 1] > sims[:, T - 1]
        votes = (top * vals[cw]).sum(axis=1)
        norm = self.norm[g[c]]
        if norm.any():
            votes = np.where(norm, _normalized(votes, top), votes)
        out[at[rows[enough]], self.cols[g[c[enough]]]] = votes[enough]
        if not enough.all():
            self._exact(S, rows[~enough], g[c[~enough]], kk, out, at)

    def _pool_positions(self, gi: int) -> NDArray[np.int32]:
        """Each union row's position in each pool of group ``gi`` (``|g| x union.n``;
        rows not in a pool: ``-1``), built on first use."""
        if gi not in self._positions:
            g = self.groups[gi][0]
            pos = np.full((g.size, self.union.n), -1, dtype=np.int32)
            for i, cc in enumerate(g):
                rows = self.union.rows[int(self.cols[cc])]
                assert rows is not None
                pos[i, rows] = np.arange(rows.size, dtype=np.int32)
            self._positions[gi] = pos
        return self._positions[gi]

    def _exact(self, S: NDArray[np.float64], rows: NDArray[np.int64], c: NDArray[np.int64], kk: int,
               out: NDArray[np.float64], at: NDArray[np.int64]) -> None:
        """Votes of the (document, model) pairs ``rows`` (of ``S``), ``c`` (of ``cols``),
        whose models have ``k = kk``, from each pool's own similarities (its union
        columns, in its order), as :meth:`KNN.score` computes them."""
        pool, lw = self._pools()
        cols = pool[c]  # pairs x longest pool, padded with -1
        sims = np.where(cols >= 0, S[rows[:, None], np.maximum(cols, 0)], -np.inf)
        idx, top = ranked(sims, kk)
        votes = (top * lw[c[:, None], idx]).sum(axis=1)
        norm = self.norm[c]
        if norm.any():
            votes[norm] = _normalized(votes[norm], top[norm])
        out[at[rows], self.cols[c]] = votes

    def _pools(self) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Each model's pool as union rows in the pool's order, and its label weights
        (``|cols| x`` longest pool; padding ``-1`` and ``0``), built on first use."""
        if self._padded is None:
            sizes = [len(self.models[j]._examples()) for j in self.cols]
            pool = np.full((self.cols.size, max(sizes)), -1, dtype=np.int64)
            lw = np.zeros(pool.shape)
            for c, j in enumerate(self.cols):
                rows = self.union.rows[j]
                model = self.models[j]
                assert rows is not None and isinstance(model, KNN)
                pool[c, : rows.size] = rows
                lw[c, : rows.size] = model.label_weights()
            self._padded = (pool, lw)
        return self._padded
