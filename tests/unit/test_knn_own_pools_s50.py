"""kNN models whose pools are mostly their own documents are scored pool by pool.

A long-running kNN profile's pool is its own judged documents (the shared
pseudo-negatives are evicted first), which few other pools hold. In the union such a
pool's rows are nobody's default, so every (document, model) pair was ranked on its own
after widening to the whole union: a soak with full pools slowed from about 2,000 to
300 documents a second, and 50 such profiles in process scored 47 documents a second
against 429 pool by pool (``benchmarks/knn_own_pools.py``). ``KNNStack._mostly_own``
sends a model with fewer than an eighth of its pool shared to its own pool; pools
sharing a base stay in the union. Scores are each model's own either way, bit for bit.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sift.filters.examples import ExampleSet
from sift.filters.knn import KNN, KNNStack


def _model(D: sp.csr_matrix, rows: np.ndarray, k: int = 5, seed: int = 0) -> KNN:
    rng = np.random.default_rng(seed)
    ex = ExampleSet(None, D.shape[1])
    m = KNN(k=k)
    m.bind(D.shape[1], None, ex)
    lab = np.where(rng.random(rows.size) < 0.3, 1, -1)
    ex.add(D[rows], lab, np.ones(rows.size), np.ones(rows.size, bool))
    return m


def _docs(n: int, seed: int) -> sp.csr_matrix:
    return sp.random(n, 50, density=0.15, random_state=seed, format="csr")


def _scores_are_each_models_own(models: list[KNN], X: sp.csr_matrix) -> KNNStack:
    stack = KNNStack(models)
    got = stack.score(X)  # enough documents to build the union
    for j, m in enumerate(models):
        assert np.array_equal(got[:, j], m.score(X)), j
    return stack


def test_disjoint_pools_are_scored_on_their_own() -> None:
    D = _docs(400, 1)
    models = [_model(D, np.arange(j * 50, (j + 1) * 50), seed=j) for j in range(8)]
    stack = _scores_are_each_models_own(models, _docs(40, 2))
    assert stack.cols.size == 0 and stack.alone == list(range(8))


def test_pools_sharing_a_base_stay_in_the_union() -> None:
    """At fit: one shared sample (the pseudo-negatives) plus a few rows of one's own."""
    D = _docs(400, 3)
    base = np.arange(200)
    models = [_model(D, np.concatenate([base, 200 + np.arange(j * 10, (j + 1) * 10)]), seed=j)
              for j in range(8)]
    stack = _scores_are_each_models_own(models, _docs(40, 4))
    assert stack.cols.tolist() == list(range(8)) and stack.alone == []


def test_only_the_pools_gone_own_leave_the_union() -> None:
    """Five pools still mostly the shared base, three whose base was pushed out."""
    D = _docs(600, 5)
    base = np.arange(200)
    shared = [_model(D, np.concatenate([base, 200 + np.arange(j * 10, (j + 1) * 10)]), seed=j)
              for j in range(5)]
    own = [_model(D, 300 + np.arange(j * 90, (j + 1) * 90), seed=10 + j) for j in range(3)]
    stack = _scores_are_each_models_own(shared + own, _docs(40, 6))
    assert stack.cols.tolist() == [0, 1, 2, 3, 4] and stack.alone == [5, 6, 7]


def test_an_eighth_shared_stays_in_the_union() -> None:
    """Held by more than half of the pools counts as shared; a pool with an eighth of
    its rows shared stays in the union, one row fewer shared leaves it."""
    D = _docs(900, 7)
    base = np.arange(25)
    three = [_model(D, np.concatenate([base, 100 + np.arange(j * 175, (j + 1) * 175)]), seed=j)
             for j in range(3)]
    stack = KNNStack(three)
    stack._build()
    assert stack.cols.tolist() == [0, 1, 2]  # 25 of 200 rows held by all three
    fewer = [_model(D, np.concatenate([base[:24], 100 + np.arange(j * 176, (j + 1) * 176)]), seed=j)
             for j in range(3)]
    stack = KNNStack(fewer)
    stack._build()
    assert stack.cols.size == 0 and stack.alone == [0, 1, 2]
