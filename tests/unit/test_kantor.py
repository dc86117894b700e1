"""Kantor's P/N score: the formula and its edge cases."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from sift.filters.errors import ParameterError
from sift.filters.examples import ExampleSet
from sift.filters.kantor import Kantor


def _model(query: list[float] | None, a: float = 0.99, query_weight: float = 1.0) -> Kantor:
    m = Kantor(a=a, query_weight=query_weight)  # 1: the design's formula, hand-computed below
    n = 3
    ex = ExampleSet(None, n)
    m.bind(n, None, ex)
    m.start(None if query is None else sp.csr_matrix([query]))
    return m


def _learn(m: Kantor, rows: list[list[float]], labels: list[int], real: bool = True,
           weights: list[float] | None = None) -> None:
    X = sp.csr_matrix(rows)
    lab = np.array(labels, dtype=np.int8)
    w = np.ones(len(rows)) if weights is None else np.array(weights, dtype=np.float64)
    r = np.full(len(rows), real)
    m.learn(X, lab, w, r)
    assert m.examples_ is not None
    m.examples_.add(X, lab, w, r)


def test_formula_hand_computed() -> None:
    m = _model([1.0, 0.0, 0.0])
    _learn(m, [[0.0, 1.0, 0.0]], [-1])
    # k = 1: P = normalize(0.99 * q) = e1; N = e2
    d = np.array([[0.6, 0.8, 0.0]])
    expected = math.sqrt((1 - 0.8) / (1 - 0.6))
    assert m.score(sp.csr_matrix(d))[0] == pytest.approx(expected)


def test_query_decays_with_truly_judged_count() -> None:
    m = _model([1.0, 0.0, 0.0], a=0.5)
    _learn(m, [[0.0, 1.0, 0.0]], [1])
    # k = 1: U_p = 0.5 e1 + e2, P = (0.5, 1)/sqrt(1.25)
    P = np.array([0.5, 1.0, 0.0]) / math.sqrt(1.25)
    d = np.array([1.0, 0.0, 0.0])
    assert m.score(sp.csr_matrix([d]))[0] == pytest.approx(math.sqrt(1 / (1 - d @ P)))
    # pseudolabels do not count in k
    m2 = _model([1.0, 0.0, 0.0], a=0.5)
    _learn(m2, [[0.0, 1.0, 0.0]], [1], real=False)
    assert m2.k_ == 0


def test_query_weight_scales_the_query_against_the_positives() -> None:
    m = _model([1.0, 0.0, 0.0], a=0.5, query_weight=3.0)
    _learn(m, [[0.0, 1.0, 0.0]], [1])
    # k = 1: U_p = 3 * 0.5 e1 + e2, P = (1.5, 1)/sqrt(3.25)
    P = np.array([1.5, 1.0, 0.0]) / math.sqrt(3.25)
    d = np.array([0.6, 0.8, 0.0])
    assert m.score(sp.csr_matrix([d]))[0] == pytest.approx(math.sqrt(1 / (1 - d @ P)))
    assert Kantor().get_params()["query_weight"] == 1.5
    with pytest.raises(ParameterError, match="query_weight must be a finite number > 0 and <= 1e\\+06, got 0"):
        Kantor(query_weight=0)


def test_example_weights_scale_their_vectors_in_the_sums() -> None:
    """``U_p = b a^k q + sum w x`` and ``U_n = sum w x``: a pseudolabel of weight 0.5
    counts half (the rows are unit vectors, so each adds ``w`` along its axis)."""
    m = _model([1.0, 0.0, 0.0], a=0.5)
    _learn(m, [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [1, -1, -1], weights=[0.5, 3.0, 1.0])
    # k = 3: U_p = 0.125 e1 + 0.5 e2, P = (1, 4, 0) / sqrt(17); U_n = 3 e2 + e3, N = (0, 3, 1) / sqrt(10)
    P = np.array([1.0, 4.0, 0.0]) / math.sqrt(17)
    N = np.array([0.0, 3.0, 1.0]) / math.sqrt(10)
    for d in ([1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]):
        dv = np.array(d)
        assert m.score(sp.csr_matrix([d]))[0] == pytest.approx(math.sqrt((1 - dv @ N) / (1 - dv @ P)))


def test_no_negatives_numerator_is_one() -> None:
    m = _model([0.0, 1.0, 0.0])
    s = m.score(sp.csr_matrix([[0.0, 0.6, 0.8]]))
    assert s[0] == pytest.approx(math.sqrt(1 / 0.4))


def test_document_equal_to_profile_is_finite() -> None:
    m = _model([0.0, 1.0, 0.0])
    s = m.score(sp.csr_matrix([[0.0, 2.0, 0.0]]))
    assert np.isfinite(s[0]) and s[0] > 1e5


def test_no_query_no_positive_and_empty_document() -> None:
    m = _model(None)
    s = m.score(sp.csr_matrix([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    assert np.all(np.isfinite(s))
    assert s.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("weights", [None, [3.0, 0.5, 1.0, 2.0, 0.7, 1.0, 1.5]],
                         ids=["unit-weights", "weighted"])
@pytest.mark.parametrize("query_weight", [1.0, 1.5, 4.0])
def test_leave_one_out_matches_retraining(query_weight: float, weights: list[float] | None) -> None:
    """Each leave-one-out score is the score of the example by the model retrained without
    it, with the other examples' weights (pseudolabels, which are weighted, are what the
    weights are for)."""
    rng = np.random.default_rng(0)
    rows = rng.uniform(0, 1, (7, 3)).tolist()
    labels = [1, 1, -1, 1, -1, -1, 1]
    w = [1.0] * 7 if weights is None else weights
    m = _model([1.0, 0.2, 0.0], query_weight=query_weight)
    _learn(m, rows, labels, weights=w)
    loo = m.loo_scores()
    for i in range(7):
        other = _model([1.0, 0.2, 0.0], query_weight=query_weight)
        keep = [j for j in range(7) if j != i]
        _learn(other, [rows[j] for j in keep], [labels[j] for j in keep], weights=[w[j] for j in keep])
        other.k_ = m.k_  # leaving one out must not change the query decay
        assert loo[i] == pytest.approx(other.score(sp.csr_matrix([rows[i]]))[0], rel=1e-9)


def test_top_k_keeps_the_largest_coefficients_of_p_and_n() -> None:
    m = Kantor(top_k=1)
    ex = ExampleSet(None, 3)
    m.bind(3, None, ex)
    m.start(None)
    X = sp.csr_matrix([[3.0, 1.0, 0.0], [0.0, 1.0, 2.0]])
    lab = np.array([1, -1], dtype=np.int8)
    m.learn(X, lab, np.ones(2), np.ones(2, bool))
    cols, P, N, _, _ = m.vectors()
    # P keeps column 0 (3 > 1), N keeps column 2 (2 > 1); each is a unit vector again
    assert cols.tolist() == [0, 2]
    assert P.tolist() == [1.0, 0.0] and N.tolist() == [0.0, 1.0]
    d = sp.csr_matrix([[0.6, 0.0, 0.8]])
    assert m.score(d)[0] == pytest.approx(math.sqrt((1 - 0.8) / (1 - 0.6)))
    with pytest.raises(ParameterError, match="top_k must be a positive integer"):
        Kantor(top_k=0)


def test_row_norms_with_empty_rows_at_the_end_and_after_more_examples() -> None:
    """An example with no entries (a positive given as empty text) last in the set: the
    norms come out 0 for it, not an IndexError (found by the decoder fuzz test), and the
    norms kept across an add match a recomputation."""
    ex = ExampleSet(None, 4)
    rows = sp.csr_matrix(np.array([[1.0, 2, 0, 0], [0, 0, 0, 0], [0, 0, 3, 0], [0, 0, 0, 0]]))
    ex.add(rows, [1, -1, 1, -1], np.ones(4), np.ones(4, bool))
    assert ex.row_norms().tolist() == [math.sqrt(5.0), 0.0, 3.0, 0.0]
    ex.add(sp.csr_matrix(np.array([[0, 0, 0, 0], [0, 4.0, 0, 0], [0, 0, 0, 0]])), [1, 1, -1],
           np.ones(3), np.ones(3, bool))
    assert ex.row_norms().tolist() == [math.sqrt(5.0), 0.0, 3.0, 0.0, 0.0, 4.0, 0.0]
    m = Kantor()
    m.bind(4, None, ex)
    m.start(sp.csr_matrix([[1.0, 0, 0, 0]]))
    m.learn(ex.X, ex.labels, ex.weights, ex.real)
    assert np.all(np.isfinite(m.loo_scores()))
