"""TROT and the effectiveness measures on hand-computed cases."""

import math

import numpy as np
import pytest

from sift.filters.errors import FilterError, ParameterError
from sift.filters.measures import f1, get_measure, linear_utility, precision, t11f, t11su, t11u
from sift.filters.threshold import scut, trot, trot_with_value, zero_utility_threshold


def test_t11su_hand_computed() -> None:
    # a=3, b=2, c=1: T11U = 4, MaxU = 8, NU = 0.5, SU = (0.5 + 0.5) / 1.5
    assert t11su(3, 2, 1, 10) == pytest.approx(1.0 / 1.5)
    # utility below MinNU is clipped to 0
    assert t11su(0, 100, 5, 0) == 0.0
    # nothing delivered
    assert t11su(0, 0, 5, 10) == pytest.approx(1 / 3)
    # perfect
    assert t11su(5, 0, 0, 10) == pytest.approx(1.0)


def test_f_measures_hand_computed() -> None:
    # a=2, b=1, c=2: F0.5 = 1.25*2 / (1.25*2 + 1 + 0.25*2) = 2.5/4
    assert t11f(2, 1, 2, 0) == pytest.approx(0.625)
    assert f1(2, 1, 2, 0) == pytest.approx(4 / 7)
    assert t11f(0, 0, 3, 5) == 0.0
    assert precision(0, 0, 3, 5) == 0.0
    assert t11u(3, 2, 0, 0) == 4.0


def test_measures_vectorised() -> None:
    a = np.array([0.0, 1.0, 2.0])
    b = np.array([0.0, 1.0, 0.0])
    out = t11su(a, b, 2 - a, 5 - b)
    assert out.shape == (3,)
    assert out[0] == pytest.approx(1 / 3)


def test_linear_utility_and_lookup() -> None:
    u = get_measure("utility:3:-2")
    assert u(2, 1, 0, 0) == 4.0
    assert linear_utility(1, 0)(5, 7, 0, 0) == 5.0
    with pytest.raises(ParameterError, match="measure must be one of"):
        get_measure("accuracy")


def test_trot_ties_move_together() -> None:
    # at 0.8 two examples tie (one relevant, one not): they enter the table together
    scores = np.array([0.9, 0.8, 0.8, 0.5])
    labels = np.array([1, 1, -1, 1])
    # T11U: at 0.9 -> 2; at 0.8 -> 4 - 1 = 3; at 0.5 -> 6 - 1 = 5
    thr, value = trot_with_value(scores, labels, measure="t11u")
    assert thr == 0.5 and value == 5.0
    # with a heavy non-relevant at the tie, 0.9 wins
    thr = trot(scores, labels, np.array([1.0, 1.0, 10.0, 1.0]), measure="t11u")
    assert thr == 0.9


def test_trot_infinity_when_no_is_best() -> None:
    scores = np.array([0.9, 0.7, 0.1])
    labels = np.array([-1, -1, 1])
    assert trot(scores, labels, measure="t11u") == math.inf
    assert trot(np.array([]), np.array([]), measure="t11su") == math.inf


def test_trot_prefers_higher_threshold_on_equal_value() -> None:
    # T11U at 0.9: 2; at 0.5: 2 + 2 - 2 = 2 -> keep 0.9
    scores = np.array([0.9, 0.6, 0.55, 0.5])
    labels = np.array([1, -1, -1, 1])
    assert trot(scores, labels, measure="t11u") == 0.9


def test_trot_rejects_bad_input() -> None:
    with pytest.raises(FilterError, match="one entry per example"):
        trot(np.array([0.1, 0.2]), np.array([1]))
    with pytest.raises(FilterError, match="finite"):
        trot(np.array([np.nan]), np.array([1]))


def test_trot_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        scores = rng.integers(0, 8, n).astype(float)
        labels = rng.choice([-1, 1], n)
        weights = rng.uniform(0.1, 2, n)
        thr, value = trot_with_value(scores, labels, weights, measure="t11su")
        best_v, best_t = t11su(0, 0, weights[labels > 0].sum(), weights[labels < 0].sum()), math.inf
        for t in sorted(set(scores), reverse=True):
            yes = scores >= t
            a = weights[yes & (labels > 0)].sum()
            b = weights[yes & (labels < 0)].sum()
            v = t11su(a, b, weights[labels > 0].sum() - a, weights[labels < 0].sum() - b)
            if v > best_v + 1e-12:
                best_v, best_t = v, t
        assert value == pytest.approx(best_v)
        assert thr == best_t


def test_zero_utility_threshold_hand_computed() -> None:
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    y = np.array([1, -1, 1, -1, -1, -1, -1])
    # 2a - b going down: 2, 1, 3, 2, 1, 0, -1: the sweep stops at 0.4
    assert zero_utility_threshold(s, y, start=0.9) == 0.4
    # placement 0.5: midway between 0.4 and the first rejected score 0.3
    assert zero_utility_threshold(s, y, start=0.9, placement=0.5) == pytest.approx(0.35)
    # weights: the first non-relevant example weighs 3, so 2 - 3 < 0 right below the start
    w = np.array([1, 3, 1, 1, 1, 1, 1.0])
    assert zero_utility_threshold(s, y, w, start=0.9) == 0.9
    # from a start between scores: 2a - b at 0.6, 0.5, 0.4, 0.3 is 2, 1, 0, -1, so 0.4
    assert zero_utility_threshold(s, y, start=0.65) == 0.4
    # +inf and an empty set return the start
    assert zero_utility_threshold(s, y, start=math.inf) == math.inf
    assert zero_utility_threshold(np.zeros(0), np.zeros(0), start=0.5) == 0.5


def test_a_placement_other_than_0_and_half_is_applied_as_given() -> None:
    """``s - placement * (s - s')`` with placement 0.25 (the tests elsewhere use 0 or 0.5,
    where the midpoint passes for any placement), for the three threshold rules."""
    # TROT (T11SU): 0.8 accepts both relevant and no non-relevant; the next lower is 0.4
    assert trot([0.9, 0.8, 0.4, 0.3], [1, 1, -1, -1], placement=0.25) == pytest.approx(0.7)  # 0.8 - 0.1
    # SCut (F1): best at 0.6 (a=2, b=1), the next lower score 0.2 (0.6 - 0.1), or min_score
    # 0.3 when that is higher (0.6 - 0.075)
    s = np.array([0.9, 0.7, 0.6, 0.2, 0.0, 0.0])
    y = np.array([1, -1, 1, -1, -1, -1])
    assert scut(s, y, placement=0.25) == pytest.approx(0.5)
    assert scut(s, y, placement=0.25, min_score=0.3) == pytest.approx(0.525)
    # zero utility: the sweep stops at 0.4, the first rejected score is 0.3 (0.4 - 0.025)
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    y = np.array([1, -1, 1, -1, -1, -1, -1])
    assert zero_utility_threshold(s, y, start=0.9, placement=0.25) == pytest.approx(0.375)


def test_zero_utility_threshold_is_below_trot() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        s = rng.normal(size=40)
        y = np.where(rng.random(40) < 0.3 + 0.4 * (s > 0), 1, -1)
        thr = trot(s, y, measure="t11u")
        zero = zero_utility_threshold(s, y, start=thr)
        assert zero <= thr
        if math.isfinite(thr):  # the utility at the zero-utility threshold is still >= 0
            acc = s >= zero
            assert 2 * np.sum(acc & (y > 0)) - np.sum(acc & (y < 0)) >= 0
