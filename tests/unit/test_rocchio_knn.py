"""Rocchio and kNN on small hand-computed cases."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.filters.errors import ParameterError
from sift.filters.examples import ExampleSet
from sift.filters.knn import KNN
from sift.filters.rocchio import Rocchio


def _bound(model, n: int = 4) -> ExampleSet:  # type: ignore[no-untyped-def]
    ex = ExampleSet(None, n)
    model.bind(n, np.array([1.0, 2.0, 3.0, 4.0]), ex)
    return ex


def _learn(model, ex, rows, labels, weights=None):  # type: ignore[no-untyped-def]
    X = sp.csr_matrix(rows, dtype=float)
    lab = np.array(labels, dtype=np.int8)
    w = np.ones(len(rows)) if weights is None else np.array(weights, dtype=float)
    model.learn(X, lab, w, np.ones(len(rows), bool))
    ex.add(X, lab, w, np.ones(len(rows), bool))


def test_rocchio_weighted_means_hand_computed() -> None:
    m = Rocchio(alpha=1.0, beta=2.0, gamma=1.0, nonnegative=False)
    ex = _bound(m)
    m.start(sp.csr_matrix([[1.0, 0, 0, 0]]))
    _learn(m, ex, [[0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]], [1, 1, -1], weights=[3.0, 1.0, 2.0])
    # mean_pos = (3 e2 + e3) / 4; mean_neg = e4
    cols, vals, _ = m.coef()
    dense = np.zeros(4)
    dense[cols] = vals
    assert dense.tolist() == pytest.approx([1.0, 1.5, 0.5, -1.0])


def test_rocchio_feature_selection_and_corpus_weight() -> None:
    m = Rocchio(alpha=1.0, beta=1.0, gamma=1.0, corpus_weight="idf", top_k=2)
    ex = _bound(m)
    m.start(sp.csr_matrix([[1.0, 0, 0, 0]]))
    _learn(m, ex, [[0, 1.0, 1.0, 0], [0, 0, 0, 1.0]], [1, -1])
    cols, vals, _ = m.coef()
    # raw Q = (1, 1, 1, -1) * idf (1, 2, 3, 4) = (1, 2, 3, -4); negatives zeroed; top 2 kept
    assert cols.tolist() == [1, 2]
    assert vals.tolist() == pytest.approx([2.0, 3.0])


def test_rocchio_all_zero_without_query_and_positives() -> None:
    m = Rocchio()
    ex = _bound(m)
    m.start(None)
    _learn(m, ex, [[0, 0, 1.0, 0]], [-1])
    assert m.score(sp.csr_matrix(np.eye(4))).tolist() == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("weights", [None, [3.0, 0.5, 1.0, 2.0, 0.7, 1.0, 1.5]],
                         ids=["unit-weights", "weighted"])
def test_rocchio_leave_one_out_matches_retraining(weights: list[float] | None) -> None:
    """Each leave-one-out score is the score of the example by the model retrained without
    it, with the other examples' weights (the weighted means lose ``w x`` and ``w``)."""
    rng = np.random.default_rng(1)
    rows = rng.uniform(0, 1, (7, 4)).round(2).tolist()
    labels = [1, 1, -1, 1, -1, -1, 1]
    w = [1.0] * 7 if weights is None else weights
    m = Rocchio(alpha=0.7, beta=1.5, gamma=0.4, nonnegative=False)
    ex = _bound(m)
    q = sp.csr_matrix([[0.5, 0.1, 0.0, 0.3]])
    m.start(q)
    _learn(m, ex, rows, labels, weights=w)
    loo = m.loo_scores()
    for i in range(len(rows)):
        other = Rocchio(alpha=0.7, beta=1.5, gamma=0.4, nonnegative=False)
        ex2 = _bound(other)
        other.start(q)
        keep = [j for j in range(len(rows)) if j != i]
        _learn(other, ex2, [rows[j] for j in keep], [labels[j] for j in keep], weights=[w[j] for j in keep])
        assert loo[i] == pytest.approx(other.score(sp.csr_matrix([rows[i]]))[0], rel=1e-9, abs=1e-12)


def test_rocchio_parameter_errors_name_the_value() -> None:
    with pytest.raises(ParameterError, match="beta must be a finite number >= 0 and <= 1e\\+06, got -1"):
        Rocchio(beta=-1)
    with pytest.raises(ParameterError, match="top_k"):
        Rocchio(top_k=0)
    with pytest.raises(ParameterError, match="corpus_weight"):
        Rocchio(corpus_weight="bm25")


def test_knn_similarity_weighted_vote() -> None:
    m = KNN(k=2)
    ex = ExampleSet(None, 2)
    m.bind(2, None, ex)
    ex.add(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]), [1, -1, 1], [1.0, 1.0, 2.0], [True] * 3)
    s = m.score(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0]]))
    # doc e1: neighbours e1 (1.0, +1, w1) and (0.6,0.8) (0.6, +1, w2) -> 1 + 1.2
    # doc e2: neighbours e2 (1.0, -1) and (0.6,0.8) (0.8, +1, w2) -> 1.6
    assert s.tolist() == pytest.approx([2.2, 1.6])
    signed = KNN(k=2, vote="signed")
    signed.bind(2, None, ex)
    assert signed.score(sp.csr_matrix([[0.0, 1.0]]))[0] == pytest.approx(-1.0 + 1.6)


def test_knn_leave_one_out_excludes_self() -> None:
    m = KNN(k=1)
    ex = ExampleSet(None, 2)
    m.bind(2, None, ex)
    ex.add(sp.csr_matrix([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]), [1, 1, -1], [1.0] * 3, [True] * 3)
    # each example's nearest other: row0 -> row1 (0.8, +), row1 -> row0 (0.8, +), row2 -> row1 (0.6, +)
    assert m.loo_scores().tolist() == pytest.approx([0.8, 0.8, 0.6])


def test_knn_matches_brute_force_top_k() -> None:
    # a pool larger than k: product + argpartition agree with a full sort
    rng = np.random.default_rng(0)
    pool = sp.random(500, 50, density=0.1, random_state=1, format="csr")
    m = KNN(k=5)
    ex = ExampleSet(None, 50)
    m.bind(50, None, ex)
    ex.add(pool, rng.choice([-1, 1], 500), np.ones(500), np.ones(500, bool))
    X = sp.random(20, 50, density=0.1, random_state=2, format="csr")
    S = (X @ pool.T).toarray()
    expect = []
    lw = np.where(ex.labels > 0, 1.0, 0.0)
    for row in S:
        top = np.argsort(-row, kind="stable")[:5]
        expect.append(float((row[top] * lw[top]).sum()))
    assert m.score(X) == pytest.approx(expect)


def test_select_breaks_ties_by_insertion_order() -> None:
    from sift.filters.knn import select

    S = np.array([[0.5, 0.9, 0.5, 0.5, 0.1], [1.0, 1.0, 1.0, 1.0, 1.0]])
    assert select(S, 2).tolist() == [[0, 1], [0, 1]]
    assert select(S, 4).tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert select(S, 5).tolist() == [[0, 1, 2, 3, 4]] * 2


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.lists(st.integers(0, 39), min_size=1, max_size=4), min_size=1, max_size=30),
       k=st.integers(1, 8), cap=st.integers(3, 30), seed=st.integers(0, 3))
def test_knn_leave_one_out_kept_up_to_date_equals_from_scratch(steps, k, cap, seed) -> None:  # type: ignore[no-untyped-def]
    """Neighbour lists carried across additions and evictions give exactly (bit for bit)
    the leave-one-out scores of lists built from scratch; duplicates make ties. Pools
    larger than k plus the lists' extra depth exercise shortened and re-built lists."""
    rng = np.random.default_rng(seed)
    docs = sp.random(20, 30, density=0.2, random_state=seed, format="csr")
    docs = sp.vstack([docs, docs], format="csr")  # every document twice: ties
    labels = np.where(rng.random(40) < 0.4, 1, -1).astype(np.int8)
    live = KNN(k=k)
    ex = ExampleSet(cap, 30)
    live.bind(30, None, ex)
    for rows in steps:
        ex.add(docs[rows], labels[rows], np.ones(len(rows)), np.ones(len(rows), bool))
        got = live.loo_scores()
        fresh_ex = ExampleSet(cap, 30)
        fresh_ex.X = ex.X.copy()
        fresh_ex.labels, fresh_ex.weights = ex.labels.copy(), ex.weights.copy()
        fresh_ex.real, fresh_ex.seq = ex.real.copy(), ex.seq.copy()
        fresh = KNN(k=k)
        fresh.bind(30, None, fresh_ex)
        assert np.array_equal(got, fresh.loo_scores())
        # the lists themselves, entry for entry in their first k (the votes' depth)
        kk = min(k, len(ex) - 1)
        assert live._lists is not None and fresh._lists is not None
        assert np.array_equal(live._lists.nbr[:, :kk], fresh._lists.nbr[:, :kk])
        assert np.array_equal(live._lists.sim[:, :kk], fresh._lists.sim[:, :kk])


def test_knn_normalized_vote_is_the_relevant_share_of_similarity() -> None:
    ex = ExampleSet(None, 2)
    ex.add(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]), [1, -1, 1], [1.0, 1.0, 1.0], [True] * 3)
    m = KNN(k=2, normalize=True)
    m.bind(2, None, ex)
    s = m.score(sp.csr_matrix([[1.0, 0.0], [0.0, 1.0]]))
    # [1, 0]: neighbours rows 0 (1.0, relevant) and 2 (0.6, relevant) -> 1.6 / 1.6
    # [0, 1]: neighbours rows 1 (1.0, not) and 2 (0.8, relevant) -> 0.8 / 1.8
    np.testing.assert_allclose(s, [1.0, 0.8 / 1.8])
    # leave-one-out: row 0's neighbours are rows 2 (0.6) and 1 (0.0) -> 0.6 / 0.6
    np.testing.assert_allclose(m.loo_scores()[0], 1.0)
    with pytest.raises(ParameterError, match="normalize must be a bool"):
        KNN(normalize="yes")  # type: ignore[arg-type]


def test_knn_query_weight_is_validated() -> None:
    with pytest.raises(ParameterError, match="query_weight must be a finite number >= 0 and <= 1e\\+06, got -1"):
        KNN(query_weight=-1)
    with pytest.raises(ParameterError, match="query_weight"):
        KNN(query_weight=float("nan"))
    assert KNN(query_weight=0).get_params()["query_weight"] == 0


def test_knn_profile_pools_its_query_as_a_pseudo_positive() -> None:
    from sift.filters.profile import Profile
    from sift.filters.vectorize import Vectorizer

    train = ["wheat crop", "corn crop", "oil price", "gold mine", "oil well", "wheat price"]
    vec = Vectorizer(n_features=2**10).fit(train)
    X = vec.transform(train)
    q = vec.transform(["wheat"])

    def fit(**mp: float) -> Profile:
        p = Profile("wheat", query="wheat", model="knn", model_params=mp, pseudolabel={})
        p.fit(q, X, positives=[0], feature_weights=vec.feature_weights())
        return p

    p = fit(query_weight=2.0)
    ex = p.examples_
    assert len(ex) == 2  # the positive, then the query
    assert ex.labels.tolist() == [1, 1] and ex.weights.tolist() == [1.0, 2.0]
    assert ex.real.tolist() == [True, False]  # a pseudo-positive: out of TROT by default
    assert (ex.X[1] != q).nnz == 0
    # "wheat price" is voted for by the query only (k = 30 takes the whole pool)
    s = p.score(vec.transform(["wheat price"]))[0]
    assert s == pytest.approx(2.0 * float((q @ vec.transform(["wheat price"]).T).toarray()[0, 0]) +
                              float((X[0] @ vec.transform(["wheat price"]).T).toarray()[0, 0]))
    assert len(fit(query_weight=0.0).examples_) == 1
    # a query-only profile now scores what matches its query, and delivers its top share
    only = Profile("oil", query="oil", model="knn", pseudolabel={}, fallback_rate=0.3)
    only.fit(vec.transform(["oil"]), X, feature_weights=vec.feature_weights())
    assert only.decide(vec.transform(["oil price", "gold mine"])).tolist() == [True, False]


def test_knn_leave_one_out_after_large_batches_equals_from_scratch() -> None:
    """Batches of 40 new examples into a pool of 400 (several enter most lists at once,
    with exact ties from repeated documents) and evictions by the cap: the lists carried
    across the batches give the leave-one-out scores of lists built from scratch, bit
    for bit."""
    rng = np.random.default_rng(7)
    base = sp.random(150, 60, density=0.08, random_state=7, format="csr")
    docs = sp.vstack([base, base, base[:100]], format="csr")  # repeats: equal similarities
    labels = np.where(rng.random(docs.shape[0]) < 0.3, 1, -1).astype(np.int8)
    live = KNN(k=12)
    ex = ExampleSet(320, 60)
    live.bind(60, None, ex)
    order = rng.permutation(docs.shape[0])
    ex.add(docs[order[:240]], labels[order[:240]], np.ones(240), np.ones(240, bool))
    live.loo_scores()
    for start in range(240, docs.shape[0], 40):
        rows = order[start : start + 40]
        ex.add(docs[rows], labels[rows], np.ones(rows.size), np.ones(rows.size, bool))
        got = live.loo_scores()
        fresh_ex = ExampleSet(320, 60)
        fresh_ex.X = ex.X.copy()
        fresh_ex.labels, fresh_ex.weights = ex.labels.copy(), ex.weights.copy()
        fresh_ex.real, fresh_ex.seq = ex.real.copy(), ex.seq.copy()
        fresh = KNN(k=12)
        fresh.bind(60, None, fresh_ex)
        assert np.array_equal(got, fresh.loo_scores())


def test_knn_lists_emptied_by_evictions_are_rebuilt() -> None:
    """A batch that evicts most of some lists' entries (a cluster of the oldest examples
    whose surviving members had their neighbours among them): those lists fall below k,
    must be rebuilt, and then hold the neighbours a build from scratch finds, which were
    never in them (the other examples, less similar to the cluster than its members)."""
    rng = np.random.default_rng(3)
    d = 20
    cluster = np.zeros((30, d))
    cluster[:, 0] = 1.0
    cluster[:, 1:5] = 0.05 * rng.random((30, 4))
    others = np.zeros((70, d))
    others[:, 0] = 0.3
    others[:, 5:18] = rng.random((70, 13))
    new = np.zeros((24, d))
    new[:, 19] = 1.0 + rng.random(24)  # orthogonal to everything before
    X = sp.csr_matrix(np.vstack([cluster, others]))
    labels = np.where(rng.random(100) < 0.5, 1, -1).astype(np.int8)
    live = KNN(k=4)
    ex = ExampleSet(100, d)
    live.bind(d, None, ex)
    ex.add(X, labels, np.ones(100), np.ones(100, bool))
    live.loo_scores()
    assert live._lists is not None
    before = live._lists
    ex.add(sp.csr_matrix(new), np.ones(24, np.int8), np.ones(24), np.ones(24, bool))  # evicts rows 0-23
    got = live.loo_scores()
    assert live._lists is not before and live._lists.length.min() >= 4  # updated, not short
    fresh_ex = ExampleSet(100, d)
    fresh_ex.X = ex.X.copy()
    fresh_ex.labels, fresh_ex.weights = ex.labels.copy(), ex.weights.copy()
    fresh_ex.real, fresh_ex.seq = ex.real.copy(), ex.seq.copy()
    fresh = KNN(k=4)
    fresh.bind(d, None, fresh_ex)
    assert np.array_equal(got, fresh.loo_scores())
    assert fresh._lists is not None
    assert np.array_equal(live._lists.nbr[:, :4], fresh._lists.nbr[:, :4])
    # the surviving cluster members' new neighbours include examples they never listed
    survivors = np.flatnonzero(np.isin(ex.seq, np.arange(24, 30)))
    listed_before = set(before.nbr[before.seq.searchsorted(ex.seq[survivors])].ravel().tolist())
    assert set(fresh._lists.nbr[survivors, :4].ravel().tolist()) - listed_before
