"""Stacked kNN scoring over the union of the profiles' pools (``KNNStack``) gives
exactly, bit for bit, each model's own scores, and those are the straightforward
definition: the ``k`` most similar pool documents (ties to the earlier inserted),
their ``similarity * label weight`` summed in rank order."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.filters.bank import ProfileBank
from sift.filters.examples import ExampleSet
from sift.filters.knn import KNN, KNNStack, _Union
from sift.filters.profile import Profile


@pytest.fixture(autouse=True)
def _every_pool_in_the_union(monkeypatch: pytest.MonkeyPatch) -> None:
    """These pools are random subsets of one matrix, most rows held by a minority of the
    pools: since the fiftieth session such models are scored pool by pool
    (``KNNStack._mostly_own``), which ``test_knn_own_pools_s50.py`` tests. Here they stay
    in the union, whose exception handling is what is tested."""
    monkeypatch.setattr(KNNStack, "_mostly_own", lambda self, cols: [])


def _docs(n: int, width: int, seed: int) -> sp.csr_matrix:
    """Documents with few distinct values and repeats: many exactly equal similarities."""
    rng = np.random.default_rng(seed)
    D = sp.random(n, width, density=0.15, random_state=seed, format="csr")
    D.data = rng.choice([0.25, 0.5, 1.0], D.data.size)
    D = sp.vstack([D, D[: n // 4]], format="csr")  # repeated documents
    D.sort_indices()
    return D


def _reference(X: sp.csr_matrix, ex: ExampleSet, model: KNN) -> np.ndarray:
    """Full sort per document: similarity, then insertion order; vote summed in that order."""
    S = (X @ ex.X.T).toarray()
    lw = model.label_weights()
    kk = min(model.k, len(ex))
    out = np.zeros(X.shape[0])
    for i, row in enumerate(S):
        top = np.lexsort((np.arange(row.size), -row))[:kk]
        sims = row[top]
        vote = (sims * lw[top]).sum()
        if model.normalize:
            vote = vote / sims.sum() if sims.sum() > 0 else 0.0
        out[i] = vote
    return out


def _models(D: sp.csr_matrix, specs: list[tuple[list[int], int, str, bool]], seed: int) -> list[KNN]:
    rng = np.random.default_rng(seed)
    models = []
    for rows, k, vote, normalize in specs:
        ex = ExampleSet(None, D.shape[1])
        m = KNN(k=k, vote=vote, normalize=normalize)
        m.bind(D.shape[1], None, ex)
        if rows:
            lab = np.where(rng.random(len(rows)) < 0.4, 1, -1)
            ex.add(D[rows], lab, rng.choice([0.3, 1.0], len(rows)), np.ones(len(rows), bool))
        models.append(m)
    return models


def _check(models: list[KNN], X: sp.csr_matrix, T0: int | None = None) -> KNNStack:
    few = KNNStack(models).score(X[:3])  # a few documents: pool by pool, no union built
    stack = KNNStack(models)
    stack._build()
    if T0 is not None:
        stack.T0 = T0  # a narrow first candidate set: most rows need widening
    got = stack.score(X)
    assert np.array_equal(few, got[:3])
    for j, m in enumerate(models):
        ex = m._examples()
        own = m.score(X) if len(ex) else np.zeros(X.shape[0])
        assert np.array_equal(got[:, j], own), j
        if len(ex):
            assert np.array_equal(own, _reference(X, ex, m)), j
    return stack


def test_shared_pools_score_exactly_as_each_model() -> None:
    D = _docs(120, 40, 0)
    rng = np.random.default_rng(1)
    specs = []
    for j in range(12):
        rows = np.flatnonzero(rng.random(D.shape[0]) < 0.5).tolist()  # subsets in one order
        specs.append((rows, [1, 3, 7, 200][j % 4], ["positive", "signed"][j % 2], j % 3 == 0))
    specs.append((list(range(D.shape[0]))[::-1], 5, "positive", False))  # order disagrees: alone
    specs.append(([], 3, "positive", False))  # empty pool
    specs.append(([5, 5, 5, 7], 2, "signed", True))  # one document three times
    models = _models(D, specs, 2)
    X = _docs(60, 40, 3)
    for T0 in (None, 1, 4, 12, 40):
        stack = _check(models, X, T0)
    rows = stack.union.rows
    assert rows[13] is None and all(r is not None for r in rows[:13])
    assert stack.union.n < sum(len(m._examples()) for m in models)  # shared documents kept once


def test_union_holds_each_vector_once_and_every_pools_vectors() -> None:
    D = _docs(80, 30, 4)
    sets = []
    for rows in ([0, 2, 4, 6, 8], [1, 2, 3, 8, 9], [0, 1, 9, 10], [4, 3], [8, 8, 8], []):
        ex = ExampleSet(None, 30)
        ex.add(D[rows], np.ones(len(rows)), np.ones(len(rows)), np.ones(len(rows), bool))
        sets.append(ex)
    u = _Union(sets)
    M = u.compact.matrix()
    full = sp.csr_matrix((M.data, u.compact.cols[M.indices], M.indptr), shape=(u.n, 30))
    for ex, rows in zip(sets[:5], u.rows, strict=False):
        assert rows is not None and np.unique(rows).size == rows.size
        assert (full[rows] != ex.X).nnz == 0
    assert u.rows[5] is None
    assert u.n == len({0, 2, 4, 6, 8, 1, 3, 9, 10}) + 2  # 8 three times in one set: two more rows


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_models=st.integers(1, 6), k=st.integers(1, 12),
       share=st.floats(0.05, 1.0), T0=st.sampled_from([None, 1, 3, 8, 20]))
def test_random_pools_with_ties(seed: int, n_models: int, k: int, share: float, T0: int | None) -> None:
    D = _docs(60, 25, seed)
    rng = np.random.default_rng(seed)
    specs = []
    for j in range(n_models):
        rows = np.flatnonzero(rng.random(D.shape[0]) < share).tolist()
        specs.append((rows, k + j, ["positive", "signed"][j % 2], bool(rng.random() < 0.3)))
    _check(_models(D, specs, seed), _docs(25, 25, seed + 1), T0)


def test_bank_of_trained_profiles_scores_exactly_after_judgments() -> None:
    D = _docs(200, 60, 7)
    rng = np.random.default_rng(8)
    bank = ProfileBank()
    for j in range(6):
        p = Profile(f"p{j}", model="knn", model_params={"k": 5 + j, "normalize": j % 2 == 1},
                    pseudolabel={"min_neg_rank": 1, "neg_fraction": 0.25, "neg_weight": 0.3}, max_examples=120)
        p.fit(None, D, positives=rng.choice(D.shape[0], 3, replace=False).tolist())
        bank.add(p)
    X = _docs(50, 60, 9)
    for step in range(3):
        got = bank.score(X)
        for j, p in enumerate(bank):
            assert np.array_equal(got[:, j], p.score(X)), (step, j)
        bank.learn_many([(f"p{w}", X[r], bool(r % 3 == 0))
                         for w, r in zip(rng.integers(0, 6, 20), rng.integers(0, 50, 20), strict=True)])
    # a restored profile scores the same inside a rebuilt bank
    again = ProfileBank()
    for p in bank:
        again.add(Profile.from_state(p.to_state()))
    assert np.array_equal(again.score(X), bank.score(X))


def test_negative_entries_and_empty_documents() -> None:
    D = _docs(50, 20, 11)
    D.data = np.where(np.arange(D.data.size) % 3 == 0, -D.data, D.data)  # negative similarities
    specs = [(list(range(0, 50, 2)), 4, "signed", False), (list(range(0, 50, 3)), 30, "positive", True)]
    X = sp.vstack([_docs(10, 20, 12), sp.csr_matrix((2, 20))], format="csr")  # two empty documents
    _check(_models(D, specs, 13), X, 1)


@pytest.mark.parametrize("k", [1, 4])
def test_one_pool_shared_by_every_model(k: int) -> None:
    """Full training: one matrix shared by all the example sets."""
    D = _docs(90, 30, 14)
    models = []
    for j in range(4):
        ex = ExampleSet(None, 30)
        ex.add(D, np.where(np.arange(D.shape[0]) % (j + 2) == 0, 1, -1), np.ones(D.shape[0]),
               np.ones(D.shape[0], bool), share=True)
        m = KNN(k=k + j)
        m.bind(30, None, ex)
        models.append(m)
    own = _models(D, [(list(range(0, 90, 2)), 3, "signed", False), (list(range(1, 90, 3)), 2, "positive", True)], 16)
    stack = _check(models + own, _docs(30, 30, 15), 5)
    assert stack.alone == [0, 1, 2, 3]  # the shared matrix: one product and search for the four
    assert stack.union.rows[4] is not None and stack.union.rows[5] is not None


def test_a_small_pool_is_scored_on_its_own() -> None:
    """A pool holding a small share of the union would widen every model's search."""
    D = _docs(160, 40, 17)
    rng = np.random.default_rng(18)
    specs = [(np.flatnonzero(rng.random(D.shape[0]) < 0.4).tolist(), 3, "positive", False) for _ in range(8)]
    specs.append(([3, 40, 41], 3, "signed", False))
    models = _models(D, specs, 19)
    stack = _check(models, _docs(40, 40, 20))
    assert stack.alone == [8] and stack.cols.tolist() == list(range(8))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 12), c=st.integers(2, 40), frac=st.floats(0.0, 1.0))
def test_select_is_the_full_sort_with_ties_to_the_lower_column(seed: int, n: int, c: int, frac: float) -> None:
    from sift.filters.knn import select

    rng = np.random.default_rng(seed)
    S = rng.choice([-1.0, 0.0, 0.25, 0.5, 1.0], (n, c)) if seed % 2 else rng.random((n, c))
    kk = max(1, int(frac * c))
    expect = [np.sort(np.lexsort((np.arange(c), -row))[:kk]) for row in S]
    assert np.array_equal(select(S, kk), np.array(expect))


def test_shared_base_scores_most_pairs_from_one_default_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools as pseudolabeling builds them: one shared sample of negatives (one label
    weight) in one order, minus a few rows a pool holds as positives, plus positives of
    its own. Every (document, model) pair without an exception before its document's
    (k + 1)-th default member is scored from that one list; the rest are ranked on their
    own. Scores stay each model's own, bit for bit, at every first candidate width."""
    D = sp.random(240, 40, density=0.15, random_state=21, format="csr")  # few exact ties
    rng = np.random.default_rng(22)
    base = np.sort(rng.choice(D.shape[0], 150, replace=False))
    others = np.setdiff1d(np.arange(D.shape[0]), base)
    models = []
    for j in range(30):
        own = rng.choice(others, 4, replace=False)
        taken = rng.choice(base, 2, replace=False)  # base rows this pool holds as positives
        rows = np.concatenate([np.sort(np.concatenate([own, taken])), np.setdiff1d(base, taken)])
        ex = ExampleSet(None, D.shape[1])
        m = KNN(k=5, vote="signed" if j == 0 else "positive", normalize=j % 3 == 0)
        m.bind(D.shape[1], None, ex)
        lab = np.where(np.arange(rows.size) < 6, 1, -1)
        ex.add(D[rows], lab, np.where(lab > 0, 1.0, 0.5), np.ones(rows.size, bool))
        models.append(m)
    seen = {"pairs": 0}
    pairs = KNNStack._pairs

    def count(self: KNNStack, *a: object) -> object:
        seen["pairs"] += a[6].size  # type: ignore[attr-defined]
        return pairs(self, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(KNNStack, "_pairs", count)
    X = sp.random(80, 40, density=0.15, random_state=23, format="csr")
    stack = KNNStack(models)
    stack._build()
    assert np.count_nonzero(stack.defaults[0][0]) == base.size  # the shared sample is the default
    stack.score(X)
    assert 0 < seen["pairs"] < X.shape[0] * len(models) // 3
    X = sp.vstack([X, _docs(20, 40, 23)], format="csr")  # and documents with many ties
    for T0 in (None, 1, 4, 12):
        _check(models, X, T0)
