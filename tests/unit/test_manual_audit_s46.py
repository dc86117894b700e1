"""The learning core against the AFS manual (forty-sixth session's audit).

Hand-computed cases for what the manual specifies: log-TF and training-set IDF, Rocchio's
weighted means before corpus weighting before feature selection, Kantor's P/N score and
its edge cases, the kNN vote, the TREC measures, TROT's sweep and tie rule, the
pseudolabeler's 1-based ranks and fractions, and the initial training steps B2-B5 with
the update policies.

The cases marked *failed before its fix*: TROT (and SCut, and the zero-utility sweep)
broke exact ties by floating-point rounding when examples were weighted, so a lower
threshold, or delivering rather than answering No, won a tie the manual gives to the
higher threshold; an example of weight 0 still set the placement gap; signed Rocchio
with no query and no positive was ``-gamma * mean_neg`` instead of the manual's all-zero
model; the pseudolabeler took ``True`` for ``min_neg_rank`` and ``min_pool``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils import murmurhash3_32

from sift.filters.errors import ParameterError
from sift.filters.examples import ExampleSet
from sift.filters.kantor import Kantor
from sift.filters.knn import KNN
from sift.filters.measures import f1, linear_utility, precision, t11f, t11su, t11u
from sift.filters.profile import Profile
from sift.filters.pseudolabel import Pseudolabeler
from sift.filters.rocchio import Rocchio
from sift.filters.threshold import scut_with_value, trot, trot_with_value, zero_utility_threshold
from sift.filters.vectorize import Vectorizer, normalize_rows


def csr(rows: list[list[float]]) -> sp.csr_matrix:
    return sp.csr_matrix(np.array(rows, dtype=float))


def one(n: int) -> np.ndarray:
    return np.ones(n, dtype=bool)


# -- VII / VI: within-document and corpus weights -----------------------------------------


def test_log_tf_times_training_idf_and_unseen_terms() -> None:
    """``(1 + ln tf) * (ln(N+1) - ln(n+1))`` with N, n from the training set; a term never
    seen in training gets ``ln(N+1)``; ``idf2`` squares; ``tf`` 0 stays absent."""
    F = 2**12
    v = Vectorizer(n_features=F, normalize=False).fit(["wheat wheat corn", "corn oil", "gold"])
    X = v.transform(["wheat wheat wheat corn zinc"])
    got = dict(zip(X.indices.tolist(), X.data.tolist(), strict=True))

    def col(t: str) -> int:
        return abs(murmurhash3_32(t, seed=0)) % F

    assert got[col("wheat")] == pytest.approx((1 + math.log(3)) * (math.log(4) - math.log(2)))
    assert got[col("corn")] == pytest.approx(math.log(4) - math.log(3))
    assert got[col("zinc")] == pytest.approx(math.log(4))  # unseen in training
    assert X.nnz == 3  # oil and gold (tf 0) stay absent
    v2 = Vectorizer(n_features=F, normalize=False, idf="idf2").fit(["wheat wheat corn", "corn oil", "gold"])
    assert v2.transform(["corn"]).data.tolist() == pytest.approx([(math.log(4) - math.log(3)) ** 2])
    # the switch: unit length
    v3 = Vectorizer(n_features=F).fit(["wheat wheat corn", "corn oil", "gold"])
    assert float(v3.transform(["wheat corn zinc"]).multiply(v3.transform(["wheat corn zinc"])).sum()) \
        == pytest.approx(1.0)


def test_idf_is_learned_from_the_training_set_only() -> None:
    v = Vectorizer(n_features=2**10, normalize=False).fit(["a1 b1", "b1"])
    before = v.transform(["b1"]).data.copy()
    v.transform(["b1 b1 b1"] * 50)  # transforming stream documents learns nothing
    assert v.n_docs_ == 2
    assert v.transform(["b1"]).data.tolist() == before.tolist() == pytest.approx([0.0])  # ln 3 - ln 3


# -- III: Rocchio ----------------------------------------------------------------------------


def test_rocchio_weighted_means_hand_computed() -> None:
    """alpha 1, beta 2, gamma 0.5; positives e1 (w 1) and e2 (w 3): mean_pos = (e1 + 3 e2)/4;
    negatives e3 and e1 + e3 (w 1 each): mean_neg = (e1 + 2 e3)/2."""
    m = Rocchio(alpha=1.0, beta=2.0, gamma=0.5, nonnegative=False)
    m.bind(4, None, None)
    m.start(csr([[1, 0, 0, 0]]))
    X = csr([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 1, 0, 1]])
    m.learn(X, np.array([1, 1, -1, -1], np.int8), np.array([1.0, 3.0, 1.0, 1.0]), one(4))
    expect = [1.0, 2 * 0.25 - 0.5 * 0.5, 2 * 0.75, -0.5 * 1.0]
    assert m.score(sp.csr_matrix(np.eye(4))).tolist() == pytest.approx(expect)
    # nonnegative (the default) zeroes the negative coefficient
    m2 = Rocchio(alpha=1.0, beta=2.0, gamma=0.5)
    m2.bind(4, None, None)
    m2.start(csr([[1, 0, 0, 0]]))
    m2.learn(X, np.array([1, 1, -1, -1], np.int8), np.array([1.0, 3.0, 1.0, 1.0]), one(4))
    assert m2.score(sp.csr_matrix(np.eye(4))).tolist() == pytest.approx([1.0, 0.25, 1.5, 0.0])


def test_rocchio_corpus_weight_comes_before_selection() -> None:
    """Raw coefficients [1, 0.5] times idf [1, 4] are [1, 2]: top_k=1 keeps column 1 (it
    would keep column 0 if selection came first); idf2 squares the weight."""
    m = Rocchio(alpha=1, beta=1, gamma=0, corpus_weight="idf", top_k=1)
    m.bind(2, np.array([1.0, 4.0]), None)
    m.start(csr([[1.0, 0.0]]))
    m.learn(csr([[0, 0.5]]), np.array([1], np.int8), np.ones(1), one(1))
    cols, vals, _ = m.coef()
    assert cols.tolist() == [1] and vals.tolist() == pytest.approx([2.0])
    m2 = Rocchio(alpha=1, beta=1, gamma=1, corpus_weight="idf2")
    m2.bind(2, np.array([2.0, 3.0]), None)
    m2.start(csr([[1.0, 0.0]]))
    m2.learn(csr([[0, 0.5], [0, 1.0]]), np.array([1, -1], np.int8), np.ones(2), one(2))
    cols, vals, _ = m2.coef()  # column 1: (0.5 - 1) * 9 < 0, zeroed
    assert cols.tolist() == [0] and vals.tolist() == pytest.approx([4.0])


def test_rocchio_ignores_unknown_labels() -> None:
    m = Rocchio(nonnegative=False)
    m.bind(2, None, None)
    m.start(None)
    m.learn(csr([[1, 0], [0, 1]]), np.array([1, 0], np.int8), np.ones(2), one(2))
    assert m.w_neg_ == 0.0
    assert m.score(sp.csr_matrix(np.eye(2))).tolist() == pytest.approx([2.0, 0.0])


def test_rocchio_without_query_or_positive_is_the_zero_model() -> None:
    """Manual III.A: "If no Query and no positive documents are presented, then a linear
    model with all coefficients equal to 0 is produced" -- with signed coefficients too.
    Failed before its fix: ``-gamma * mean_neg``, scores [-0.5, 0, 0]."""
    m = Rocchio(nonnegative=False)
    m.bind(3, None, None)
    m.start(None)
    m.learn(csr([[1, 0, 0]]), np.array([-1], np.int8), np.ones(1), one(1))
    assert m.score(sp.csr_matrix(np.eye(3))).tolist() == [0.0, 0.0, 0.0]
    assert m.coef()[0].size == 0
    ex = ExampleSet(None, 3)
    ex.add(csr([[1, 0, 0]]), [-1], [1.0], [True])
    m.bind(3, None, ex)
    m.start(None)
    m.learn(csr([[1, 0, 0]]), np.array([-1], np.int8), np.ones(1), one(1))
    assert m.loo_scores().tolist() == [0.0]
    # a query, or a positive, brings the negative mean back
    m.start(csr([[0, 0, 1.0]]))
    m.learn(csr([[1, 0, 0]]), np.array([-1], np.int8), np.ones(1), one(1))
    assert m.score(sp.csr_matrix(np.eye(3))).tolist() == pytest.approx([-0.5, 0.0, 1.0])


# -- Kantor ----------------------------------------------------------------------------------


def test_kantor_score_hand_computed() -> None:
    """a = 0.5, two true judgments (k = 2): P = normalize(0.25 q + e2), N = e3; the document
    (1, 1, 1)/sqrt 3 scores sqrt((1 - d.N) / (1 - d.P))."""
    k = Kantor(a=0.5, query_weight=1.0)
    k.bind(3, None, None)
    k.start(csr([[1, 0, 0]]))
    k.learn(csr([[0, 1, 0], [0, 0, 1]]), np.array([1, -1], np.int8), np.ones(2), one(2))
    P = np.array([0.25, 1.0, 0.0]) / math.hypot(0.25, 1.0)
    d = np.ones(3) / math.sqrt(3)
    assert k.k_ == 2
    assert float(k.score(csr([[1, 1, 1]]))[0]) == pytest.approx(math.sqrt((1 - d[2]) / (1 - d @ P)))
    # the same as ||d - N|| / ||d - P||
    assert float(k.score(csr([[1, 1, 1]]))[0]) == pytest.approx(
        float(np.linalg.norm(d - np.array([0, 0, 1.0])) / np.linalg.norm(d - P)))


def test_kantor_edges_are_finite() -> None:
    k = Kantor()
    k.bind(3, None, None)
    k.start(None)
    # no query, no positives, no negatives: 1 for every document (empty included)
    assert k.score(csr([[1, 0, 0], [0, 0, 0]])).tolist() == [1.0, 1.0]
    k.learn(csr([[1, 0, 0]]), np.array([-1], np.int8), np.ones(1), one(1))
    assert k.score(csr([[1, 0, 0], [0, 1, 0]])).tolist() == [0.0, 1.0]
    k.start(csr([[0, 1, 0]]))  # no negatives: numerator 1; d = P: the largest finite score
    s = k.score(csr([[0, 1, 0], [0, 0, 1]]))
    assert np.isfinite(s).all() and s[0] == pytest.approx(1e6) and s[1] == 1.0


def test_kantor_k_counts_true_judgments_only() -> None:
    k = Kantor(a=0.9, query_weight=1.0)
    k.bind(2, None, None)
    k.start(csr([[1, 0]]))
    k.learn(csr([[0, 1]]), np.array([1], np.int8), np.array([0.5]), np.array([False]))
    assert k.k_ == 0
    k.learn(csr([[0, 1]]), np.array([-1], np.int8), np.ones(1), one(1))
    assert k.k_ == 1


# -- kNN -------------------------------------------------------------------------------------


def test_knn_vote_hand_computed() -> None:
    """Similarities of d = (0.6, 0.8, 0) to the pool: 0.6 (+, w 1), 0.96 (-), 0.8 (+, w 2),
    0 (+). k = 2 takes 0.96 and 0.8: positive vote 2 x 0.8, signed 1.6 - 0.96."""
    ex = ExampleSet(None, 3)
    ex.add(csr([[1, 0, 0], [0.8, 0.6, 0], [0, 1, 0], [0, 0, 1]]), [1, -1, 1, 1], [1, 1, 2, 1], [True] * 4)
    d = csr([[0.6, 0.8, 0]])
    pos, signed = KNN(k=2), KNN(k=2, vote="signed")
    for m in (pos, signed):
        m.bind(3, None, ex)
    assert float(pos.score(d)[0]) == pytest.approx(1.6)
    assert float(signed.score(d)[0]) == pytest.approx(0.64)
    # leave-one-out: example 0's neighbours are 1 (0.8, -) and, of the two at 0, the
    # earlier inserted (2, +, w 2): 2 x 0 = 0
    assert float(pos.loo_scores()[0]) == 0.0


def test_knn_pool_evicts_pseudolabels_first_then_oldest() -> None:
    ex = ExampleSet(3, 2)
    ex.add(csr([[1, 0], [0, 1]]), [1, -1], [1, 1], [True, True])
    ex.add(csr([[1, 1], [0.5, 1]]), [-1, -1], [0.1, 0.1], [False, False])
    assert ex.real.tolist() == [True, True, False]
    ex.add(csr([[1, 0.5], [0.2, 1]]), [1, 1], [1, 1], [True, True])
    assert ex.real.tolist() == [True, True, True]
    assert ex.seq.tolist() == [1, 4, 5]  # the pseudolabel, then the oldest real judgment


# -- TREC measures -----------------------------------------------------------------------


def test_trec_measures_hand_computed() -> None:
    a, b, c, d = 2.0, 3.0, 2.0, 10.0
    assert t11u(a, b, c, d) == 1.0
    # T11U / MaxU = 1 / 8, above MinNU -0.5: (0.125 + 0.5) / 1.5
    assert t11su(a, b, c, d) == pytest.approx(0.625 / 1.5)
    assert t11su(0, 9, 2, 0) == 0.0  # floored at MinNU
    assert t11su(0, 0, 2, 0) == pytest.approx(1 / 3)  # answering No
    assert t11f(a, b, c, d) == pytest.approx(1.25 * 2 / (1.25 * 2 + 3 + 0.25 * 2))
    assert f1(a, b, c, d) == pytest.approx(4 / 9)
    assert precision(a, b, c, d) == pytest.approx(0.4)
    assert linear_utility(3, -2)(a, b, c, d) == 0.0


# -- TROT ------------------------------------------------------------------------------------


def test_trot_sweep_hand_computed() -> None:
    """T11SU (two relevant, MaxU 4) by level (a, b): 0.9 (1, 0) 0.667; 0.8 with both of its
    examples (2, 1) 0.833 (the relevant one alone would give 1.0: ties move together);
    0.6 (2, 2) 0.667; 0.2 (2, 3) 0.5. Then T11U 2 at 0.9 and 2 + 2 - 2 at 0.5: the higher
    threshold keeps the tie."""
    s = [0.9, 0.8, 0.8, 0.6, 0.2]
    y = [1, 1, -1, -1, -1]
    thr, value = trot_with_value(s, y, measure="t11su")
    assert thr == 0.8 and value == pytest.approx(2.5 / 3)
    assert trot([0.9, 0.6, 0.55, 0.5], [1, -1, -1, 1], measure="t11u") == 0.9
    assert trot([0.9, 0.8], [-1, -1]) == math.inf


def test_trot_weighted_exact_tie_goes_to_the_higher_threshold() -> None:
    """T11U at 1.0: 2 x 1 = 2; at the lowest score: 2 x 4 - 10 x 0.6 = 2, an exact tie the
    manual gives to the higher threshold. Failed before its fix: the weights summed to
    5.999999999999999 and 0.5 won by an ulp (T11U and T11SU alike)."""
    s = np.linspace(1.0, 0.5, 14)
    y = np.array([1] + [-1] * 10 + [1] * 3)
    w = np.array([1.0] + [0.6] * 10 + [1.0] * 3)
    for measure in ("t11u", "t11su"):
        assert trot(s, y, w, measure=measure) == 1.0, measure
    assert scut_with_value(s, y, w, measure="t11u")[0] == 1.0


def test_trot_weighted_exact_tie_with_no_answers_no() -> None:
    """Ten non-relevant examples of weight 0.2 above one relevant: T11U at the bottom is
    2 - 2 = 0, a tie with answering No, which wins (+inf). Failed before its fix: the
    weights summed to 1.9999999999999998 and everything was delivered."""
    s = np.linspace(1.0, 0.1, 11)
    y = np.array([-1] * 10 + [1])
    w = np.array([0.2] * 10 + [1.0])
    assert trot(s, y, w, measure="t11u") == math.inf
    assert trot(s, y, w, measure="t11su") == math.inf
    assert scut_with_value(s, y, w, measure="t11u")[0] == math.inf


def test_trot_tolerance_keeps_real_differences() -> None:
    """A genuine improvement of a small weight still wins (the tolerance is relative)."""
    s = [0.9, 0.5, 0.4]
    y = [1, 1, -1]
    w = [1.0, 1e-6, 1.0]
    assert trot(s, y, w, measure="t11u") == 0.5
    tiny = [1e-12, 1e-18, 1e-12]  # a scale-free measure on tiny weights
    assert trot(s, y, tiny, measure="t11u") == 0.5


def test_zero_utility_sweep_does_not_stop_at_a_rounded_zero() -> None:
    """Utility going down: six relevant (12), then 28 non-relevant of weight 3/7 (12 - 12 =
    0, an exact zero that sums to -4e-15), then a relevant one (2). Non-negative all the
    way: the lowest score. Failed before its fix: the sweep stopped above the rounded zero."""
    s = np.linspace(1.0, 0.0, 35)
    y = np.array([1] * 6 + [-1] * 28 + [1])
    w = np.array([1.0] * 6 + [3 / 7] * 28 + [1.0])
    assert zero_utility_threshold(s, y, w, start=1.0) == pytest.approx(0.0)


def test_trot_weight_zero_leaves_the_example_out() -> None:
    """Weight 0 "leaves it out": it must not be the next lower score the placement measures
    to, nor SCut's top. Failed before its fix: 0.7 (midway to the weight-0 example at 0.5)."""
    assert trot([0.9, 0.5, 0.3], [1, -1, -1], [1, 0, 1], placement=0.5) == pytest.approx(0.6)
    assert trot([0.9, 0.5, 0.3], [1, -1, -1], [1, 1, 1], placement=0.5) == pytest.approx(0.7)
    thr, _ = scut_with_value([0.95, 0.3, 0.2], [-1, 1, -1], [0, 1, 1], measure="f1", fbr=2.0)
    assert thr == 0.3  # the fallback's top is the top of the examples that count
    # utility 2 at 0.9, then 2 - 3 < 0 at 0.3: the sweep stops at 0.9, placed midway to 0.3
    assert zero_utility_threshold([0.9, 0.5, 0.3], [1, -1, -1], [1, 0, 3], start=0.9,
                                  placement=0.5) == pytest.approx(0.6)


# -- V: pseudolabeling -------------------------------------------------------------------


def test_pseudolabel_ranks_are_one_based_and_fractions_as_the_manual() -> None:
    """MinNegRank 16 of 20: the bottom 20 - 16 + 1 = 5 (ranks 16..20); PosFraction 0.3 of
    MaxPosRank 10: 3 of the top 10; real labels are never changed."""
    s = np.arange(20, dtype=float)[::-1]  # example i has rank i + 1
    lab = np.zeros(20, np.int8)
    p = Pseudolabeler(min_neg_rank=16, neg_fraction=1.0, neg_weight=0.1, min_pool=0)
    idx, plab, w = p.select(s, lab, np.random.default_rng(0))
    assert sorted(idx.tolist()) == [15, 16, 17, 18, 19] and (plab == -1).all() and (w == 0.1).all()
    p = Pseudolabeler(max_pos_rank=10, pos_fraction=0.3, pos_weight=0.5, min_pool=0)
    idx, plab, w = p.select(s, lab, np.random.default_rng(0))
    assert idx.size == 3 and (idx < 10).all() and (plab == 1).all() and (w == 0.5).all()
    lab[:10] = [1, -1] * 5  # all of the top 10 carry real labels: nothing to add
    assert p.select(s, lab, np.random.default_rng(0))[0].size == 0
    assert Pseudolabeler(min_neg_rank=21, neg_fraction=1.0, min_pool=0).select(
        s, np.zeros(20, np.int8), np.random.default_rng(0))[0].size == 0


def test_pseudolabel_is_seeded() -> None:
    s = np.random.default_rng(5).random(300)
    p = Pseudolabeler(max_pos_rank=20, pos_fraction=0.5, neg_fraction=0.2, min_pool=0)
    a = p.select(s, np.zeros(300, np.int8), np.random.default_rng(7))
    b = p.select(s, np.zeros(300, np.int8), np.random.default_rng(7))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", ["min_neg_rank", "min_pool", "max_pos_rank"])
def test_pseudolabel_refuses_booleans_for_counts(name: str) -> None:
    """Failed before its fix for min_neg_rank and min_pool (taken as 1)."""
    with pytest.raises(ParameterError, match=f"{name}.*True"):
        Pseudolabeler(**{name: True})


# -- B2-B5 and the update policies ------------------------------------------------------


def _training() -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(0)
    X = sp.random(300, 50, density=0.1, random_state=1, format="csr")
    X.data[:] = rng.random(X.nnz) + 0.1
    return normalize_rows(X), sp.csr_matrix(np.eye(50)[:1])


PL = {"max_pos_rank": 10, "pos_fraction": 0.3, "pos_weight": 0.5, "min_neg_rank": 1,
      "neg_fraction": 0.2, "neg_weight": 0.1, "min_pool": 0}


def test_initial_training_follows_b2_to_b5() -> None:
    """B3: query + positives (weight 1); B4: that model pseudolabels the training set
    (seeded); B5: the model from the query and every label, real and pseudo."""
    X, q = _training()
    p = Profile("t", model="rocchio", pseudolabel=PL, seed=3)
    p.fit(q, X, positives=[0, 1, 2])
    b3 = Rocchio()
    b3.bind(50, None, None)
    b3.start(q)
    lab = np.zeros(300, np.int8)
    lab[[0, 1, 2]] = 1
    b3.learn(X[[0, 1, 2]], lab[[0, 1, 2]], np.ones(3), one(3))
    idx, plab, pw = Pseudolabeler(**PL).select(b3.score(X), lab, np.random.default_rng(3), no_evidence=0.0)
    assert not np.isin(idx, [0, 1, 2]).any()
    w = np.ones(300)
    full = lab.copy()
    full[idx], w[idx] = plab, pw
    b5 = Rocchio()
    b5.bind(50, None, None)
    b5.start(q)
    rows = np.flatnonzero(full != 0)
    b5.learn(X[rows], full[rows], w[rows], (lab != 0)[rows])
    assert np.allclose(p.model_.score(X), b5.score(X))
    assert len(p.examples_) == rows.size and int(p.examples_.real.sum()) == 3


@pytest.mark.parametrize("update, expect", [
    ("never", [(0, 0, 0, 1), (0, 0, 0, 2), (0, 0, 0, 3), (0, 0, 0, 4)]),
    (3, [(0, 0, 1, 0), (0, 0, 2, 0), (1, 3, 0, 0), (1, 3, 1, 0)]),
    ("every", [(1, 1, 0, 0), (2, 2, 0, 0), (3, 3, 0, 0), (4, 4, 0, 0)]),
])
def test_update_policies(update: str | int, expect: list[tuple[int, int, int, int]]) -> None:
    """(versions since fit, judged, pending, ignored) after each of four judgments."""
    X, q = _training()
    p = Profile("t", model="rocchio", pseudolabel=PL, seed=3, update=update)
    p.fit(q, X, positives=[0, 1, 2])
    v0 = p.version_
    got = []
    for i in range(4):
        p.learn_one(X[10 + i], relevant=bool(i % 2))
        got.append((p.version_ - v0, p.n_judged_, p.n_pending_, p.n_ignored_))
    assert got == expect


# -- F9 of the audit, fixed after it: a vectorizer used before fit --------------------
@pytest.mark.parametrize("idf", ["idf", "idf2"])
def test_an_unfitted_idf_vectorizer_refuses_to_transform(idf: str) -> None:
    """Every IDF of a vectorizer with no training document is ln 1 - ln 1 = 0: its
    vectors were all zeros, without a word, and every profile scored 0 on them."""
    from sift.filters.errors import FilterError
    from sift.filters.vectorize import Vectorizer

    vec = Vectorizer(n_features=2**10, idf=idf)
    for call in (lambda: vec.transform(["wheat corn"]), vec.feature_weights,
                 lambda: Vectorizer(n_features=2**10, idf=idf).fit([]).transform(["wheat corn"])):
        with pytest.raises(FilterError, match=r"^Vectorizer\(idf=.*\) has no training "
                                              r"documents: call fit\(texts\) first"):
            call()
    assert Vectorizer(n_features=2**10, idf="none").transform(["wheat corn"]).nnz == 2
    assert vec.transform([]).shape == (0, 2**10)  # nothing to weigh: no error
    assert vec.fit(["wheat corn", "corn oil"]).transform(["wheat corn"]).nnz == 2
