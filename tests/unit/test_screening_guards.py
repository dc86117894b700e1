"""Review mode on the inputs found to break it (thirty-seventh session): each case failed
on the code before."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sift.filters.screening.cal import Review
from sift.filters.screening.errors import ScreeningError


def _docs(n: int, every: int = 5) -> tuple[list[str], list[str]]:
    ids = [f"d{i}" for i in range(n)]
    texts = ["wilson disease copper therapy" if i % every == 0 else f"weather report number {i}"
             for i in range(n)]
    return ids, texts


def _screen_all(review: Review, texts: dict[str, str], rounds: int = 1000) -> None:
    for _ in range(rounds):
        batch = review.next_batch()
        if not batch:
            return
        for doc_id in batch:
            review.record_judgment(doc_id, texts[doc_id].startswith("wilson"))


def test_a_first_batch_without_draws_leaves_finite_inclusion_probabilities() -> None:
    # 11 documents and n_top 10: the warm-up batch ranks one document outside the top,
    # with probability 1 and no draws (0 * log 0 was NaN)
    review = Review("wilson disease", random_state=0)
    review.add_documents(*_docs(11))
    review.next_batch()
    assert np.all(np.isfinite(review.inclusion_probabilities()))
    assert Review.from_state(review.to_state()).to_state() == review.to_state()


def test_ht_with_a_batch_of_no_draws_gives_a_finite_estimate() -> None:
    review = Review("wilson disease", estimator="ht", n_top=1, draws=0, random_state=0)
    ids, texts = _docs(2, every=1)
    review.add_documents(ids, texts)
    for doc_id in review.next_batch():
        review.record_judgment(doc_id, True)
    est = review.estimate()
    assert math.isfinite(est.r_hat) and est.r_hat >= est.found == 1 and math.isfinite(est.var)


def test_no_take_all_stratum_samples_from_the_start() -> None:
    review = Review("wilson disease", n_top=0, random_state=0)
    review.add_documents(*_docs(50))
    assert review.next_batch()


@pytest.mark.parametrize(("n", "every"), [(1, 1), (2, 1), (5, 2), (30, 1000)])
def test_a_fully_screened_review_stops(n: int, every: int) -> None:
    review = Review("wilson disease", random_state=0)
    ids, texts = _docs(n, every)
    review.add_documents(ids, texts)
    assert not review.should_stop()
    _screen_all(review, dict(zip(ids, texts, strict=True)))
    assert review.screened == n and review.should_stop()
    assert not Review("wilson disease").should_stop()  # an empty review has not stopped


def test_a_seeded_svm_review_does_not_follow_the_global_random_state() -> None:
    ids, texts = _docs(120, every=7)
    orders = []
    for global_seed in (1, 2):
        np.random.seed(global_seed)
        review = Review("wilson disease", learner="svm", random_state=3)
        review.add_documents(ids, texts)
        _screen_all(review, dict(zip(ids, texts, strict=True)), rounds=4)
        orders.append(review.ordering()[0])
    assert orders[0] == orders[1]


@pytest.mark.parametrize(("params", "match"), [
    ({"random_state": -1}, "random_state must be an integer >= 0 or null, got -1"),
    ({"random_state": 1.5}, "random_state must be"),
    ({"target_recall": None}, "target_recall must be in \\(0, 1\\], got None"),
    ({"confidence": "0.9"}, "confidence must be in \\(0, 1\\), got '0.9'"),
])
def test_bad_parameters_name_themselves(params: dict[str, object], match: str) -> None:
    with pytest.raises(ScreeningError, match=match):
        Review("wilson disease", **params)  # type: ignore[arg-type]

