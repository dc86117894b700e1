"""The vectorized stacked kNN scoring (``KNNStack``: one rank-by-rank pass over the
candidates for all profiles, the tie re-ranking among the candidates and the full
fallback) equals a plain hand-written kNN score, on small random data with many tied
similarities, empty pools and pools smaller than ``k``; and bit for bit each model's own
``KNN.score``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from sift.filters.examples import ExampleSet
from sift.filters.knn import KNN, KNNStack


def _loop_score(X: sp.csr_matrix, ex: ExampleSet, model: KNN) -> np.ndarray:
    """kNN by hand: every similarity by a loop, neighbours by (similarity desc, insertion
    order), the vote a plain sum."""
    out = np.zeros(X.shape[0])
    m = len(ex)
    if m == 0:
        return out
    P = ex.X.tocsr()
    labels, weights = ex.labels, ex.weights
    for i in range(X.shape[0]):
        x = dict(zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(),
                     X.data[X.indptr[i] : X.indptr[i + 1]].tolist(), strict=True))
        sims = []
        for e in range(m):
            s = 0.0
            for col, v in zip(P.indices[P.indptr[e] : P.indptr[e + 1]].tolist(),
                              P.data[P.indptr[e] : P.indptr[e + 1]].tolist(), strict=True):
                s += x.get(col, 0.0) * v
            sims.append((-s, e))
        sims.sort()
        vote = total = 0.0
        for neg, e in sims[: model.k]:
            lw = (weights[e] if labels[e] > 0 else 0.0) if model.vote == "positive" else labels[e] * weights[e]
            vote += -neg * lw
            total += -neg
        out[i] = (vote / total if total > 0 else 0.0) if model.normalize else vote
    return out


def _data(seed: int, n_docs: int, width: int) -> sp.csr_matrix:
    """Few distinct values, repeated rows and near-empty rows: many exact ties (zeros too)."""
    rng = np.random.default_rng(seed)
    D = sp.random(n_docs, width, density=0.12, random_state=seed, format="csr")
    D.data = rng.choice([0.5, 1.0, 2.0], D.data.size)
    D = sp.vstack([D, D[: n_docs // 3], sp.csr_matrix((2, width))], format="csr")
    D.sort_indices()
    return D


def _models(D: sp.csr_matrix, seed: int, n_models: int) -> list[KNN]:
    rng = np.random.default_rng(seed)
    models = []
    for j in range(n_models):
        size = [0, 2, 5, 30, 60, 90][j % 6]  # empty, fewer than k, and pools wider than k
        rows = np.sort(rng.choice(D.shape[0], size=min(size, D.shape[0]), replace=False)).tolist()
        if j % 4 == 3:
            rows = rows[::-1]  # insertion order unlike the union's
        ex = ExampleSet(None, D.shape[1])
        m = KNN(k=[3, 4, 7][j % 3], vote=["positive", "signed"][j % 2], normalize=j % 5 == 0)
        m.bind(D.shape[1], None, ex)
        if rows:
            lab = np.where(rng.random(len(rows)) < 0.4, 1, -1)
            ex.add(D[rows], lab, rng.choice([0.5, 1.0], len(rows)), np.ones(len(rows), bool))
        models.append(m)
    return models


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("narrow", [False, True])
def test_stack_equals_hand_written_knn(seed: int, narrow: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    D = _data(seed, 90, 30)
    X = sp.vstack([D[::2], _data(seed + 10, 40, 30)], format="csr")
    models = _models(D, seed, 24)
    calls = {"tied": 0, "exact": 0}
    tied, exact = KNNStack._tied, KNNStack._exact

    def count_tied(self: KNNStack, *a: object) -> None:
        calls["tied"] += 1
        tied(self, *a)  # type: ignore[arg-type]

    def count_exact(self: KNNStack, *a: object) -> None:
        calls["exact"] += 1
        exact(self, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(KNNStack, "_tied", count_tied)
    monkeypatch.setattr(KNNStack, "_exact", count_exact)
    stack = KNNStack(models)
    stack._build()
    assert stack.cols.size >= 2  # the union path is what is tested
    if narrow:
        stack.T0 = 6  # few candidates: most pairs fall back
    got = stack.score(X)
    for j, m in enumerate(models):
        ref = _loop_score(X, m._examples(), m)
        assert np.allclose(got[:, j], ref, rtol=0, atol=1e-12), j
        own = m.score(X) if len(m._examples()) else np.zeros(X.shape[0])
        assert np.array_equal(got[:, j], own), j
    assert calls["tied"] > 0  # ties with different label weights were met
    if narrow:
        assert calls["exact"] > 0


def test_loop_reference_is_the_definition() -> None:
    """The hand-written reference on a case worked by hand (k = 2, a tie at the 2nd)."""
    ex = ExampleSet(None, 2)
    ex.add(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]), np.array([1, -1, 1]), np.ones(3),
           np.ones(3, bool))
    m = KNN(k=2, vote="signed")
    m.bind(2, None, ex)
    X = sp.csr_matrix([[0.6, 0.8]])
    # neighbours: example 1 (0.8, first inserted of the tie), then example 2 (0.8)
    assert math.isclose(_loop_score(X, ex, m)[0], -0.8 + 0.8, abs_tol=1e-15)
    assert math.isclose(float(m.score(X)[0]), 0.0, abs_tol=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_few_rows_against_untransposed_examples_give_the_same_bits(seed: int) -> None:
    """``ExampleSet.dots`` of up to 8 rows, before the examples were transposed, passes
    over the examples' rows instead of transposing them: the same bits as the product
    with the transposed examples, which more rows (or a second call) use."""
    rng = np.random.default_rng(seed)
    D = sp.random(120, 400, density=0.05, random_state=seed, format="csr")
    D.data = rng.random(D.data.size)
    D.sort_indices()
    for n in (1, 3, 8):
        ex = ExampleSet(None, 400)
        ex.add(D[:100], np.where(rng.random(100) < 0.3, 1, -1), np.ones(100), np.ones(100, bool))
        X = sp.csr_matrix(D[100 : 100 + n])
        c = ex._compact()
        assert c._mt is None
        few = ex.dots(X)
        assert c._mt is None  # nothing transposed for them
        c.transposed()
        full = ex.dots(X)  # the transposed path, as for more rows
        assert few.shape == full.shape == (n, 100)
        assert few.dtype == full.dtype and few.flags.c_contiguous
        assert np.array_equal(few.view(np.int64), full.view(np.int64))
