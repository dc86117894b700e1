"""SCut with an fbr fallback (sift.filters.threshold.scut) on hand-computed cases."""

import math

import numpy as np
import pytest

from sift.filters.errors import FilterError
from sift.filters.threshold import scut, scut_with_value, trot_with_value


def test_f1_optimal_threshold_hand_computed() -> None:
    s = np.array([0.9, 0.7, 0.6, 0.2, 0.0, 0.0])
    y = np.array([1, -1, 1, -1, -1, -1])
    # F1 at 0.9: 2/3; at 0.7: 1/2; at 0.6: 4/5; at 0.2: 4/6; at 0.0: 4/8
    thr, value = scut_with_value(s, y)
    assert thr == 0.6
    assert value == pytest.approx(0.8)


def test_ties_move_together_and_go_to_the_higher_threshold() -> None:
    # at 0.5 a relevant and a non-relevant tie: both enter at once
    s = np.array([0.8, 0.5, 0.5, 0.1])
    y = np.array([1, 1, -1, -1])
    # F1 at 0.8: a=1, c=1 -> 2/3; at 0.5: a=2, b=1 -> 4/5; at 0.1: 4/6
    assert scut(s, y) == 0.5
    s2 = np.array([0.9, 0.4, 0.3])
    y2 = np.array([1, -1, 1])
    # at 0.9: a=1, c=1 -> 2/3; at 0.4: a=1, b=1, c=1 -> 1/2; at 0.3: a=2, b=1 -> 4/5
    s3 = np.array([0.9, 0.4, 0.4, 0.3])
    y3 = np.array([1, -1, 1, -1])
    # at 0.9: 2/3 (a=1, c=1); at 0.4: a=2, b=1 -> 4/5; at 0.3: a=2, b=2 -> 4/6
    assert scut(s3, y3) == 0.4
    assert scut(s2, y2) == 0.3


def test_equal_values_keep_the_higher_threshold() -> None:
    # at 0.9: a=1, b=0, c=1 -> 2/3; at 0.5: a=2, b=2, c=0 -> 4/6 = 2/3: keep 0.9
    s = np.array([0.9, 0.5, 0.5, 0.5])
    y = np.array([1, 1, -1, -1])
    assert scut(s, y) == 0.9


def test_nothing_relevant_gives_infinity() -> None:
    assert scut(np.array([0.5, 0.2]), np.array([-1, -1])) == math.inf
    assert scut(np.array([]), np.array([])) == math.inf


def test_without_guards_it_is_trot_on_the_measure() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        s = np.round(rng.random(40), 1)
        y = np.where(rng.random(40) < 0.3, 1, -1)
        for measure in ("f1", "t11su"):
            assert scut_with_value(s, y, measure=measure) == trot_with_value(s, y, measure=measure)
            assert scut(s, y, measure=measure, placement=0.5) == trot_with_value(
                s, y, measure=measure, placement=0.5)[0]


def test_tiny_category_one_positive_tied_at_zero() -> None:
    # the only relevant example scores 0 with three non-relevant ones (a kNN vote with no
    # relevant neighbour); one non-relevant scores 0.3
    s = np.array([0.3, 0.0, 0.0, 0.0, 0.0])
    y = np.array([-1, 1, -1, -1, -1])
    # plain F1 accepts everything at 0: a=1, b=4 -> 2/6
    assert scut_with_value(s, y) == (0.0, pytest.approx(1 / 3))
    # fbr 0.5 rejects that threshold; fallback: the top score
    assert scut(s, y, fbr=0.5) == 0.3
    assert scut(s, y, fbr=0.5, fallback="none") == math.inf
    # min_score 0: only 0.3 is a candidate, F1 0 there, no better than nothing
    assert scut_with_value(s, y, min_score=0.0) == (math.inf, 0.0)
    # with the fbr fallback the top score above min_score is used
    assert scut(s, y, min_score=0.0, fbr=0.1) == 0.3


def test_fallback_top_with_nothing_above_min_score() -> None:
    s = np.array([0.0, 0.0])
    y = np.array([1, -1])
    assert scut(s, y, min_score=0.0, fbr=0.3) == math.inf


def test_fbr_keeps_a_good_threshold() -> None:
    s = np.array([0.9, 0.8, 0.1])
    y = np.array([1, 1, -1])
    assert scut_with_value(s, y, fbr=0.5) == (0.8, 1.0)


def test_placement_midpoint_and_min_score_bound() -> None:
    s = np.array([0.9, 0.6, 0.2])
    y = np.array([1, 1, -1])
    assert scut(s, y, placement=0.5) == pytest.approx(0.4)  # midpoint of 0.6 and 0.2
    s2 = np.array([0.9, 0.6, 0.0])
    # the next lower score is 0 == min_score: midpoint of 0.6 and 0
    assert scut(s2, y, placement=0.5, min_score=0.0) == pytest.approx(0.3)
    # the lowest example accepted: no lower score, no bound -> the score itself
    assert scut(np.array([0.9, 0.6]), np.array([1, 1]), placement=0.5) == 0.6


def test_weights() -> None:
    s = np.array([0.9, 0.5, 0.4])
    y = np.array([1, -1, 1])
    # unweighted: at 0.9 F1 2/3, at 0.4 a=2, b=1 -> 4/5
    assert scut(s, y) == 0.4
    # the non-relevant weighs 10: at 0.4 F1 = 4/14
    assert scut(s, y, np.array([1.0, 10.0, 1.0])) == 0.9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"placement": 1.0}, "placement"), ({"fbr": math.nan}, "fbr"),
     ({"fallback": "bottom"}, "fallback"), ({"min_score": math.inf}, "min_score")],
)
def test_bad_parameters_are_named(kwargs: dict[str, float | str], match: str) -> None:
    with pytest.raises(FilterError, match=match):
        scut(np.array([0.5]), np.array([1]), **kwargs)  # type: ignore[arg-type]


def test_shape_mismatch_and_nan() -> None:
    with pytest.raises(FilterError, match="one entry per example"):
        scut(np.array([0.5, 0.1]), np.array([1]))
    with pytest.raises(FilterError, match="finite"):
        scut(np.array([np.nan]), np.array([1]))
