"""The Horvitz-Thompson estimate uses the draws of completed batches only.

A reviewer may judge a document that was never requested. That judgment is a known
relevant document (it counts in ``found``), not a sample unit: it becomes one only when a
*completed* batch took or drew it, with that batch's inclusion probability. The batch
still pending must not enter the estimate (nor its variance) until it completes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sift.filters.screening import Review

TOPIC = "wilson disease therapy"


def corpus(n: int = 60, every: int = 6) -> tuple[list[str], list[str], dict[str, bool]]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(200)]
    ids, texts, gold = [], [], {}
    for i in range(n):
        text = " ".join(rng.choice(words, 10))
        if i % every == 0:
            text += " wilson disease copper therapy"
        ids.append(f"d{i}")
        texts.append(text)
        gold[f"d{i}"] = i % every == 0
    return ids, texts, gold


def review(**params: object) -> Review:
    kw: dict[str, object] = {"estimator": "ht", "draws": 20, "n_top": 4, "n_negatives": 20,
                             "random_state": 0, **params}
    r = Review(TOPIC, **kw)  # type: ignore[arg-type]
    ids, texts, _ = corpus()
    r.add_documents(ids, texts)
    return r


def finite(r: Review) -> None:
    for est in (r.estimate_ht(), r.estimate_hh()):
        assert math.isfinite(est.r_hat) and math.isfinite(est.var) and est.var >= 0
        assert est.r_hat >= est.found
        # no sampling batch behind it: no recall (NaN) and no bound (0.0)
        assert math.isfinite(est.recall()) if est.sampled else math.isnan(est.recall())
        assert math.isfinite(est.recall_lower(0.95))
    r.should_stop()


def drawn_in_pending(r: Review, doc_id: str) -> bool:
    return bool(r.pending_) and r.index_[doc_id] in r.batches_[-1]["draws"]


@pytest.mark.parametrize("seed", [0, 1])
def test_unrequested_relevant_drawn_in_the_pending_batch_after_a_warm_up(seed: int) -> None:
    # the warm-up batch draws nothing: the unrequested document has probability 0 there
    _, _, gold = corpus()
    r = review(warmup_precision=0.9, random_state=seed)
    first = r.next_batch()
    assert r.batches_[-1]["b"] == 0
    x = next(d for d in gold if gold[d] and d not in first)
    r.record_judgment(x, True)  # never requested
    for i, d in enumerate(first):
        r.record_judgment(d, i == 0)  # precision below the warm-up's: sampling starts
    before = r.estimate_ht()
    r.next_batch()
    assert drawn_in_pending(r, x) and r.batches_[-1]["b"] > 0
    assert r.estimate_ht() == before  # the pending batch does not enter
    finite(r)
    for d in list(r.pending_):
        r.record_judgment(d, gold[d])
    est = r.estimate_ht()  # completed: x is a sample unit with this batch's probability
    assert est.found == int(np.sum(r.labels_ == 1)) and est.r_hat >= est.found
    finite(r)


def test_unrequested_relevant_late_document_drawn_in_the_pending_batch() -> None:
    # a document added after the completed batches is in none of them
    _, _, gold = corpus()
    r = review(warmup_precision=0.0)
    for _ in range(2):
        for d in r.next_batch():
            r.record_judgment(d, gold[d])
    r.add_documents(["late"], ["wilson disease copper therapy trial"])
    r.record_judgment("late", True)  # never requested
    before = r.estimate_ht()
    r.next_batch()
    assert drawn_in_pending(r, "late")
    assert r.estimate_ht() == before
    finite(r)


def test_judgments_in_the_pending_batch_count_as_known_only() -> None:
    _, _, gold = corpus()
    r = review(warmup_precision=0.0)
    for _ in range(2):
        for d in r.next_batch():
            r.record_judgment(d, gold[d])
    before = r.estimate_ht()
    pending = r.next_batch()
    assert len(pending) > 1
    r.record_judgment(pending[0], True)  # the batch is still pending
    est = r.estimate_ht()
    assert (est.r_hat, est.var, est.found) == (before.r_hat + 1, before.var, before.found + 1)


def test_ht_of_completed_batches_matches_the_first_order_probabilities() -> None:
    # no batch pending: every sampled relevant unit is weighted by 1 / pi_i, the rest known
    _, _, gold = corpus()
    r = review(warmup_precision=0.0)
    x = "d54"
    r.record_judgment(x, True)  # known before any batch, never requested
    for _ in range(3):
        for d in r.next_batch():
            r.record_judgment(d, gold[d])
    assert not r.pending_
    pi = r.inclusion_probabilities()
    rel = np.flatnonzero(r.sampled_ & (r.labels_ == 1))
    known = int(np.sum(r.labels_ == 1)) - len(rel)
    assert r.estimate_ht().r_hat == pytest.approx(float(np.sum(1.0 / pi[rel])) + known)


@pytest.mark.parametrize("estimator", ["hh", "bound"])
def test_hh_and_bound_ignore_the_pending_batch(estimator: str) -> None:
    _, _, gold = corpus()
    r = review(estimator=estimator, warmup_precision=0.0)
    for _ in range(2):
        for d in r.next_batch():
            r.record_judgment(d, gold[d])
    x = next(d for d in gold if r.labels_[r.index_[d]] < 0)
    r.record_judgment(x, True)  # never requested (the reviewer's own call)
    before = (r.estimate_hh(), r.estimate_ht())
    r.next_batch()
    assert (r.estimate_hh(), r.estimate_ht()) == before
    finite(r)
