"""Rocchio: a linear model from a query and weighted positive and negative examples.

``Q = alpha * query + beta * mean_pos - gamma * mean_neg`` with weighted means,
then corpus weighting (``corpus_weight``: none, idf or idf squared, multiplied
elementwise), then feature selection: negative coefficients zeroed
(``nonnegative``) and only the ``top_k`` largest kept. No query (or ``alpha`` 0)
and no positive gives an all-zero model, with signed coefficients too. The sums
are running sums, so a judgment costs time proportional to the document.

Leave-one-out scores for TROT are exact for the un-selected model and use the
full model's selected features for the rest: for example ``i`` with weight
``w`` in the positive sum ``P`` (total weight ``W``), its score is
``x.(g*q) alpha + beta (x.(g*P) - w x.(g*x)) / (W - w) - gamma x.(g*N) / W_neg``
where ``g`` is the corpus weight on the selected features.

Examples
--------
>>> import numpy as np, scipy.sparse as sp
>>> m = Rocchio(alpha=1.0, beta=1.0, gamma=0.5)
>>> m.bind(4, None, None)
>>> m.start(sp.csr_matrix([[1.0, 0, 0, 0]]))
>>> m.learn(sp.csr_matrix([[0, 1.0, 0, 0], [0, 0, 1.0, 0]]), np.array([1, -1]), np.ones(2), np.ones(2, bool))
>>> m.score(sp.csr_matrix(np.eye(4))).tolist()       # gamma term zeroed by nonnegative
[1.0, 1.0, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.accumulator import SlotMap, SparseAccumulator, remove_total, signed, signed_flag
from sift.filters.base import MAX_WEIGHT, ScoringModel, Stack, check_positive
from sift.filters.errors import ParameterError, StateError
from sift.filters.examples import ExampleSet
from sift.filters.sparse import ColumnStack, isin_sorted, restrict

_Q, _P, _N = 0, 1, 2


class Rocchio(ScoringModel):
    """Rocchio linear model with running sums.

    Parameters
    ----------
    alpha, beta, gamma
        Weights of the query, the positive mean and the negative mean.
    corpus_weight
        ``"none"`` (document vectors already carry IDF), ``"idf"`` or ``"idf2"``.
    nonnegative
        Zero the negative coefficients (a bool; a numpy bool is taken as the same
        Python bool).
    top_k
        Keep only the ``top_k`` largest coefficients (``None``: all).

    Examples
    --------
    >>> import numpy as np
    >>> from sift.filters.examples import ExampleSet
    >>> from sift.filters.vectorize import Vectorizer
    >>> docs = ["wheat exports rose", "wheat harvest delayed", "oil prices fell",
    ...         "bank rates unchanged"]
    >>> vec = Vectorizer(n_features=2**10).fit(docs)
    >>> X, ex, m = vec.transform(docs), ExampleSet(None, 2**10), Rocchio()
    >>> m.bind(2**10, vec.feature_weights(), ex)
    >>> m.start(vec.transform(["wheat"]))
    >>> labels, w, real = np.array([1, 1, -1, -1], dtype=np.int8), np.ones(4), np.ones(4, bool)
    >>> m.learn(X, labels, w, real)
    >>> _ = ex.add(X, labels, w, real)  # the profile keeps its examples beside the model
    >>> m.score(vec.transform(["wheat prices", "oil prices"])).round(3).tolist()
    [0.844, 0.0]
    >>> m.loo_scores().round(3).tolist()  # each example scored by the model without it
    [0.636, 0.636, 0.0, 0.0]
    """

    name = "rocchio"

    def __init__(
        self,
        alpha: float = 1.0,
        beta: float = 2.0,
        gamma: float = 0.5,
        corpus_weight: str = "none",
        nonnegative: bool = True,
        top_k: int | None = None,
    ) -> None:
        self.alpha = alpha
        self.beta = beta
        self.gamma = gamma
        self.corpus_weight = corpus_weight
        if not isinstance(nonnegative, bool | np.bool_):
            raise ParameterError(f"nonnegative must be a bool, got {nonnegative!r}")
        self.nonnegative = bool(nonnegative)
        self.top_k = top_k
        for name in ("alpha", "beta", "gamma"):
            check_positive(name, getattr(self, name), allow_zero=True, at_most=MAX_WEIGHT)
        if corpus_weight not in ("none", "idf", "idf2"):
            raise ParameterError(f"corpus_weight must be 'none', 'idf' or 'idf2', got {corpus_weight!r}")
        if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
            raise ParameterError(f"top_k must be a positive integer or None, got {top_k!r}")
        self.acc_ = SparseAccumulator(3)
        self.w_pos_ = 0.0
        self.w_neg_ = 0.0
        self._coef: tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]] | None = None
        self.bind(0, None, None)

    def bind(self, n_features: int, feature_weights: NDArray[np.float64] | None,
             examples: ExampleSet | None) -> None:
        super().bind(n_features, feature_weights, examples)
        self._coef = None
        self._forget()

    def _forget(self) -> None:
        """Start the bookkeeping of what changed between re-thresholds afresh.

        The leave-one-out scores need the examples' products with four vectors over the
        selected columns: ``g*q``, ``g*P``, ``g*N`` and ``g`` (the last with squared
        entries). The example set remembers each (:meth:`ExampleSet.cached_products`)
        under a key that changes whenever the vector may have changed for a column some
        example uses: ``P`` (``N``) when a relevant (non-relevant) example is learned,
        and any of them when the selection changes for a column that was known before
        (see :meth:`_track_selection`). So a judgment re-computes one product, not four.
        """
        self._epoch = object()
        self._ver = [0, 0, 0, 0]  # q, P, N, squared
        self._slots: NDArray[np.int64] = np.zeros(0, np.int64)
        self._prev: tuple[NDArray[np.int64], int, object, int] | None = None
        self._smap = SlotMap()
        self._cand: tuple[tuple[object, int], NDArray[np.int64]] | None = None
        self._nonneg: bool | None = None  # all sums >= 0 (None: not checked yet)

    @property
    def no_evidence_score(self) -> float | None:
        """0: a document sharing no term with the model (empty, say) scores 0, and with
        signed coefficients below 0 is evidence against."""
        return 0.0

    def get_params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "beta": self.beta, "gamma": self.gamma,
                "corpus_weight": self.corpus_weight, "nonnegative": self.nonnegative,
                "top_k": self.top_k}

    # -- learning ---------------------------------------------------------------------
    def start(self, query: sp.csr_matrix | None) -> None:
        self.acc_ = SparseAccumulator(3)
        self.w_pos_ = 0.0
        self.w_neg_ = 0.0
        self.acc_.add_query(_Q, query)
        self._coef = None
        self._forget()

    def learn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        X = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
        lab = np.asarray(labels)
        w = np.asarray(weights, dtype=np.float64)
        pos = lab == 1
        n_pos = int(np.count_nonzero(pos))
        if signed(X, w):
            self._nonneg = False  # (so True also means: no signed vector learned since start)
        if n_pos:
            self.w_pos_ += self.acc_.add_rows(_P, X, w, pos)
            self._ver[_P] += 1
        if n_pos < lab.size:
            self.w_neg_ += self.acc_.add_rows(_N, X, w, lab == -1)
            self._ver[_N] += 1
        self._coef = None

    def unlearn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        """Subtract the rows from the positive or negative sum and weight total they were
        learned into. A cancellation residue is set to 0
        (:meth:`~sift.filters.accumulator.SparseAccumulator.remove_rows`), and while the
        sums are of non-negative vectors (the fast candidate path of :meth:`_candidates`:
        every sum >= 0 and no signed vector learned since :meth:`start`; after a state is
        loaded, sums all >= 0 are taken as such) an entry left below 0 is set to 0 too,
        so the sums stay exactly non-negative and the path stays open. The versions
        keying the remembered leave-one-out products move as :meth:`learn` moves them."""
        X = X if isinstance(X, sp.csr_matrix) else sp.csr_matrix(X)
        w = np.asarray(weights, dtype=np.float64)
        self._nonneg = self.acc_.nonneg_after_removal(X, w, self._nonneg)
        taken_p, taken_n = self.acc_.remove_labelled(X, labels, w, _P, _N, clamp=self._nonneg)
        if taken_p is not None:
            self.w_pos_ = remove_total(self.w_pos_, taken_p)
            self._ver[_P] += 1
        if taken_n is not None:
            self.w_neg_ = remove_total(self.w_neg_, taken_n)
            self._ver[_N] += 1
        self._coef = None

    # -- the model -------------------------------------------------------------------
    def _corpus(self, feat: NDArray[np.int64]) -> NDArray[np.float64]:
        if self.corpus_weight == "none" or self.feature_weights_ is None:
            return np.ones(feat.size)
        g = self.feature_weights_[feat]
        return g * g if self.corpus_weight == "idf2" else g

    def _raw(self, slots: NDArray[np.int64] | None = None) -> NDArray[np.float64]:
        """The unweighted coefficients of every slot, or of ``slots`` only (the same
        values: the same operations, element by element)."""
        s = self.acc_.sums
        if slots is None:
            sq, sp_, sn = s[_Q], s[_P], s[_N]
        else:
            sq, sp_, sn = s[_Q][slots], s[_P][slots], s[_N][slots]
        q = np.multiply(self.alpha, sq)
        t = np.empty_like(q)
        if self.w_pos_ > 0:  # q + beta * P / w_pos, operation by operation, in place
            np.multiply(self.beta, sp_, out=t)
            np.divide(t, self.w_pos_, out=t)
            np.add(q, t, out=q)
        if self.w_neg_ > 0:
            np.multiply(self.gamma, sn, out=t)
            np.divide(t, self.w_neg_, out=t)
            np.subtract(q, t, out=q)
        return np.asarray(q, dtype=np.float64)

    def _candidates(self) -> NDArray[np.int64] | None:
        """The slots that can get a positive coefficient, in feature order, when that is
        known without computing them all: with ``nonnegative`` and sums of non-negative
        vectors, a column with no query and no positive weight scores ``-gamma N / W``,
        never above 0, so only the columns of the query and the positive sum (a small
        part of the vocabulary) are computed. ``None``: compute every slot."""
        if not self.nonnegative:
            return None
        if self._nonneg is None:
            self._nonneg = bool(np.all(self.acc_.sums >= 0))
        if not self._nonneg:
            return None
        key = (self.acc_, self._ver[_P])
        if self._cand is None or self._cand[0] != key:
            s = self.acc_.sums
            mask = (s[_Q] != 0) | (s[_P] != 0)
            order = self.acc_.order
            self._cand = (key, order[mask[order]])
        return self._cand[1]

    def coef(self) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """``(columns, coefficients, g)``: the selected model (sorted by column) and the
        corpus weight ``g`` of each selected column."""
        if self._coef is None:
            # computed in slot order; the selected slots are then taken in feature order
            # (whatever the slot order), the same values as computing in feature order
            feat = self.acc_.features
            weighted = self.corpus_weight != "none" and self.feature_weights_ is not None
            cand = self._candidates()
            if not self._has_evidence():
                # the design (III.A): no query and no positive give the all-zero model,
                # signed coefficients too (not -gamma * mean_neg)
                cand = np.zeros(0, dtype=np.int64)
                q = np.zeros(0)
            elif cand is None:
                cand = self.acc_.order
                q = self._raw()[cand]
            else:
                q = self._raw(cand)
            g = self._corpus(feat[cand]) if weighted else np.ones(0)
            if weighted:
                q = q * g
            keep = q > 0 if self.nonnegative else q != 0
            idx = np.flatnonzero(keep)
            if self.top_k is not None and idx.size > self.top_k:
                part = np.argpartition(-q[idx], self.top_k - 1)[: self.top_k]
                idx = idx[np.sort(part)]
            sel = cand[idx]
            cols = feat[sel]
            self._slots = sel
            self._track_selection(cols)
            self._coef = (cols, q[idx], g[idx] if weighted else np.ones(idx.size))
        return self._coef

    def _has_evidence(self) -> bool:
        """Whether a query (with ``alpha > 0``) or a positive example has been given: without
        either the model is all zeros, as the design has it."""
        if self.w_pos_ > 0:
            return True
        return self.alpha > 0 and bool(np.any(self.acc_.sums[_Q] != 0))

    def _track_selection(self, cols: NDArray[np.int64]) -> None:
        """Compare the selected columns with those of the last model and invalidate the
        remembered products the difference can change (see :meth:`_forget`)."""
        ex = self.examples_
        prev = self._prev
        size = self.acc_.size
        colmap, n_cols = (None, 0) if ex is None else ex.column_map()
        self._prev = (cols, size, colmap, n_cols)
        if prev is None:
            self._ver = [v + 1 for v in self._ver]
            return
        old, old_size, old_colmap, old_n_cols = prev
        if cols.size == old.size and np.array_equal(cols, old):
            return
        kept = isin_sorted(old, cols)
        fresh = cols[~isin_sorted(cols, old)]
        known = self.acc_.find(fresh) < old_size  # features known at the last model
        changed = np.concatenate([old[~kept], fresh[known]])
        if changed.size:
            s = self.acc_.sums[:, self.acc_.find(changed)]
            for which in (_Q, _P, _N):
                if np.any(s[which] != 0):
                    self._ver[which] += 1
            self._ver[3] += 1
            return
        # only features new since the last model joined: they change the squared
        # product only if an example of that time used them (not when each example
        # was learned before it was kept, as profiles do)
        if ex is not None and fresh.size:
            ids, now_colmap = ex.column_ids(fresh[~known])
            if now_colmap is not old_colmap or np.any((ids >= 0) & (ids < old_n_cols)):
                self._ver[3] += 1

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        cols, vals, _ = self.coef()
        return np.asarray(restrict(X, cols) @ vals, dtype=np.float64)

    def loo_scores(self) -> NDArray[np.float64]:
        ex = self._examples()
        if len(ex) == 0:
            return np.zeros(0)
        cols, _, g = self.coef()
        slots = self._slots
        s = self.acc_.sums
        # per selected column: g*q, g*P, g*N, each product remembered while unchanged
        e, ver = self._epoch, self._ver
        compact, colmap = ex.compact_columns(), ex.column_map()[0]
        acc, smap = self.acc_, self._smap

        def product(which: int, values: NDArray[np.float64], squared: bool = False) -> NDArray[np.float64]:
            return ex.cached_products((e, which, ver[which]), cols, values, squared=squared,
                                      dense=lambda: smap.dense(acc, compact, colmap, slots, values))

        a = product(_Q, g * s[_Q][slots])
        b = product(_P, g * s[_P][slots])
        c = product(_N, g * s[_N][slots])
        self_sq = product(3, g, squared=True)
        w = ex.weights
        pos = ex.labels > 0
        out = self.alpha * a
        wp = np.where(pos, self.w_pos_ - w, self.w_pos_)
        bp = np.where(pos, b - w * self_sq, b)
        out = out + np.where(wp > 1e-12, self.beta * bp / np.where(wp > 1e-12, wp, 1.0), 0.0)
        wn = np.where(~pos, self.w_neg_ - w, self.w_neg_)
        cn = np.where(~pos, c - w * self_sq, c)
        out = out - np.where(wn > 1e-12, self.gamma * cn / np.where(wn > 1e-12, wn, 1.0), 0.0)
        return np.asarray(out, dtype=np.float64)

    # -- state -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        # "signed": a signed vector was learned since start (the sums may all be >= 0 and
        # still not be sums of non-negative vectors: see unlearn), else absent
        return {"acc": self.acc_.to_state(), "w_pos": self.w_pos_, "w_neg": self.w_neg_,
                **({"signed": True} if self._nonneg is False else {})}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        try:
            self.acc_ = SparseAccumulator.from_state(state["acc"], 3, self.n_features_)
            self.w_pos_ = float(state["w_pos"])
            self.w_neg_ = float(state["w_neg"])
            nonneg = signed_flag(state, "rocchio")
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"rocchio: {exc}") from None
        if not (np.isfinite(self.w_pos_) and np.isfinite(self.w_neg_)) or self.w_pos_ < 0 or self.w_neg_ < 0:
            raise StateError("rocchio: example weight totals must be finite and >= 0")
        self._coef = None
        self._forget()
        self._nonneg = nonneg

    @classmethod
    def build_stack(cls, models: Sequence[ScoringModel]) -> Stack:
        return LinearStack(models)


class LinearStack(Stack):
    """Rocchio models stacked into one matrix over the union of their columns:
    one sparse product scores a batch against all of them; a changed model is
    replaced in place (see :class:`~sift.filters.sparse.ColumnStack`)."""

    def __init__(self, models: Sequence[ScoringModel]) -> None:
        super().__init__(models)
        rocchios = [m for m in models if isinstance(m, Rocchio)]
        if len(rocchios) != len(models):
            other = next(m for m in models if not isinstance(m, Rocchio))
            raise ParameterError(f"LinearStack takes Rocchio models only, got {type(other).__name__}")
        n_features = self.models[0].n_features_ if self.models else 1
        self.stack = ColumnStack(n_features, [m.coef()[:2] for m in rocchios])

    def update(self, j: int, model: ScoringModel) -> bool:
        if not isinstance(model, Rocchio):
            return False
        self.models[j] = model
        cols, vals, _ = model.coef()
        self.stack.replace(j, cols, vals)
        return True

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        return self.stack.product(X)
