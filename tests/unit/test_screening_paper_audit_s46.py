"""Review mode against Li and Kanoulas (ILPS, CLEF eHealth 2019 TAR): audit s46.

Hand-computed cases of the sampling design, the estimators and the rules, and Monte
Carlo checks of unbiasedness on a synthetic reviewer. ``Synth`` is a :class:`Review`
whose ranking needs no classifier: a fixed latent score per document (relevant ones
``mu`` higher on average), plus, when ``adaptive``, a jump for judged documents (found
relevant ones to the top, as the real model does). Everything else (the take-all
stratum, the power law, the draws, the design's bookkeeping, the estimators and the
rules) is sift's own code, so a thousand reviews take a few seconds.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from sift.filters.screening import Estimate, Review
from sift.filters.screening.estimators import (
    hansen_hurwitz,
    horvitz_thompson,
    pairwise_inclusion,
    power_law,
)
from sift.filters.screening.stopping import bound_rule, target_rule

R_TRUE = 20


class Synth(Review):
    """A review ranked by fixed latent scores (and, if ``adaptive``, by its labels)."""

    latent: np.ndarray
    adaptive: bool = True

    def _train_and_score(self) -> np.ndarray:
        s = self.latent.copy()
        if self.adaptive:
            s += 5.0 * (self.labels_ == 1) - 1.0 * (self.labels_ == 0)
        return s


def synth(seed: int, *, n: int = 300, r: int = R_TRUE, mu: float = 1.5, adaptive: bool = True,
          **params: object) -> tuple[Synth, np.ndarray]:
    g = np.random.default_rng(10_000 + seed)
    gold = np.zeros(n, dtype=bool)
    gold[:r] = True
    review = Synth(None, random_state=seed, **params)  # type: ignore[arg-type]
    review.latent = g.normal(size=n) + mu * gold
    review.adaptive = adaptive
    review.add_documents([f"d{i}" for i in range(n)], [""] * n)
    return review, gold


def judge_batch(review: Review, gold: np.ndarray) -> list[str]:
    batch = review.next_batch()
    for d in batch:
        review.record_judgment(d, bool(gold[int(d[1:])]))
    return batch


def until_sampling_batch(review: Review, gold: np.ndarray, k: int) -> None:
    while review.n_sampling_batches() < k and judge_batch(review, gold):
        pass


# ------------------------------------------------------------ the sampling design
def test_power_law_by_hand() -> None:
    # ranks 1, 2, 3 at exponent 1: 1, 1/2, 1/3 over 11/6; rank 0 (taken) gets 0
    p = power_law(np.array([2, 0, 1, 3]), 1.0)
    assert p.tolist() == pytest.approx([3 / 11, 0.0, 6 / 11, 2 / 11], rel=1e-15)
    # exponent 0.8 (the paper's) over 4 ranks sums to 1 and falls as r^-0.8
    p = power_law(np.array([1, 2, 3, 4]), 0.8)
    assert p.sum() == pytest.approx(1.0, abs=1e-15)
    assert p[0] / p[3] == pytest.approx(4**0.8, rel=1e-12)


def test_n_top_zero_is_the_papers_design_without_a_take_all_stratum() -> None:
    """``n_top=0`` ("0 disables") ranks every document by the power law at every batch,
    as the paper does; the take-all stratum grew back with ``growth`` before."""
    review, gold = synth(0, n_top=0, draws=40, adaptive=False)
    for _ in range(5):
        judge_batch(review, gold)
    assert all(len(b["certain"]) == 0 for b in review.batches_)
    # a fixed ranking: every batch ranks the whole collection identically
    first = review.batches_[0]["ranks"]
    assert all(np.array_equal(b["ranks"], first) for b in review.batches_)
    assert sorted(first.tolist()) == list(range(1, 301))
    # the first-order inclusion probabilities are the paper's 1 - (1 - p_i)^(b T)
    want = 1.0 - (1.0 - power_law(first, 0.8)) ** (40 * 5)
    np.testing.assert_allclose(review.inclusion_probabilities(), want, rtol=1e-9)


def test_inclusion_probabilities_by_hand() -> None:
    # one batch of b = 2 draws with p = (1/2, 1/4): pi_1 = 1 - (1/2)^2 = 3/4,
    # pi_2 = 1 - (3/4)^2 = 7/16, neither = (1/4)^2 = 1/16, so
    # pi_12 = pi_1 + pi_2 - (1 - 1/16) = 3/4 + 7/16 - 15/16 = 1/4
    pij = pairwise_inclusion(np.array([[0.5, 0.25]]), np.zeros((1, 2), dtype=bool),
                             np.array([2]))
    np.testing.assert_allclose(pij, [[0.75, 0.25], [0.25, 7 / 16]], rtol=1e-14)
    # a second batch taking document 1 with certainty: pi_1 = 1, pi_12 = pi_2
    pij = pairwise_inclusion(np.array([[0.5, 0.25], [0.0, 0.5]]),
                             np.array([[False, False], [True, False]]), np.array([2, 1]))
    pi2 = 1 - (0.75**2) * 0.5
    np.testing.assert_allclose(pij, [[1.0, pi2], [pi2, pi2]], rtol=1e-14)
    # HT by hand: both relevant, y = (1, 1): R = 1/pi_1 + 1/pi_2 = 4/3 + 16/7
    r_hat, var = horvitz_thompson(np.ones(2), np.array([[0.75, 0.25], [0.25, 7 / 16]]))
    assert r_hat == pytest.approx(4 / 3 + 16 / 7, rel=1e-14)
    # var = sum (1 - pi)/pi^2 + 2 (pi_12 - pi_1 pi_2) / (pi_12 pi_1 pi_2)
    want = (0.25 / 0.75**2 + (9 / 16) / (7 / 16) ** 2
            + 2 * (0.25 - 0.75 * 7 / 16) / (0.25 * 0.75 * 7 / 16))
    assert var == pytest.approx(max(want, 0.0), rel=1e-12)


@pytest.mark.parametrize(("p_i", "p_j"), [(1e-8, 1e-8), (1.86e-11, 1.875e-11), (1e-10, 3e-10)])
def test_pairwise_inclusion_of_small_probabilities_is_exact(p_i: float, p_j: float) -> None:
    """pi_ij ~ b (b - 1) p_i p_j: computed as 1 - miss_i - miss_j + neither it was
    rounding noise below p ~ 1e-8 (1.1e-16 for 5.4e-19: the HT variance twice the exact)."""
    getcontext().prec = 80
    b = 40
    di, dj = Decimal(p_i), Decimal(p_j)
    a_i, a_j = 1 - (1 - di) ** b, 1 - (1 - dj) ** b
    a_ij = a_i + a_j - (1 - (1 - di - dj) ** b)
    pij = pairwise_inclusion(np.array([[p_i, p_j]]), np.zeros((1, 2), dtype=bool),
                             np.array([b]))
    assert pij[0, 1] == pytest.approx(float(a_ij), rel=1e-6)
    assert pij[0, 0] == pytest.approx(float(a_i), rel=1e-12)
    exact = np.array([[float(a_i), float(a_ij)], [float(a_ij), float(a_j)]])
    assert horvitz_thompson(np.ones(2), pij)[1] == pytest.approx(
        horvitz_thompson(np.ones(2), exact)[1], rel=1e-5)


def test_hansen_hurwitz_by_hand() -> None:
    # draws z = y / p = (0, 10, 0, 0, 10): mean 4, var = sum (z - 4)^2 / (5 * 4) = 120 / 20
    assert hansen_hurwitz(np.array([0.0, 10.0, 0.0, 0.0, 10.0])) == (4.0, 6.0)


# ------------------------------------------------------------- the estimators
def test_hh_batch_estimate_is_conditionally_unbiased_exactly() -> None:
    """E[R_t | past] = known + take-all relevant + sum_{unjudged, ranked} p_i y_i / p_i
    = R, for every batch of adaptive reviews (the ranking follows the labels)."""
    for seed in range(20):
        review, gold = synth(seed, n_top=5, draws=40, warmup_precision=0.0)
        until_sampling_batch(review, gold, 6)
        batches = review.batches_
        for batch, known in zip(batches, review._found_before(batches), strict=True):
            judged = np.zeros(len(gold), dtype=bool)
            judged[[review.index_[d] for d in review.order_[: batch["judged_before"]]]] = True
            p = power_law(batch["ranks"], review.exponent)
            assert np.array_equal(batch["draw_new"], ~judged[batch["draws"]])
            top_rel = int(np.sum(gold[batch["certain"]]))
            assert known + top_rel + int(np.sum(gold & ~judged & (p > 0))) == R_TRUE
        ests = review.hh_batch_estimates()
        assert len(ests) == 6 and all(v >= 0 for _, v in ests)


def _mean_within(values: np.ndarray, var_hats: np.ndarray, target: float, z: float = 4.0) -> None:
    """The mean of ``values`` within ``z`` standard errors of ``target``, the standard
    error from the estimator's own variance estimates (mean of ``var_hats``)."""
    se = math.sqrt(float(np.mean(var_hats)) / len(values))
    assert abs(float(np.mean(values)) - target) <= z * se, (float(np.mean(values)), se)


def test_hh_batch_estimates_average_to_r_on_an_adaptive_review() -> None:
    seeds, k = 600, 5
    at: list[list[tuple[float, float]]] = [[] for _ in range(k)]
    for seed in range(seeds):
        review, gold = synth(seed, n_top=5, draws=40, warmup_precision=0.0)
        until_sampling_batch(review, gold, k)
        for t, est in enumerate(review.hh_batch_estimates()[:k]):
            at[t].append(est)
    for t in range(k):
        a = np.array(at[t])
        _mean_within(a[:, 0], a[:, 1], R_TRUE)
        # the within-batch variance estimates the batch estimate's variance
        assert float(np.mean(a[:, 1])) == pytest.approx(float(np.var(a[:, 0])), rel=0.3)


def test_ht_is_unbiased_on_the_papers_fixed_design() -> None:
    """No take-all stratum and a ranking fixed in advance: the paper's design, on which
    HT with pi_i = 1 - prod_t (1 - p_i^t)^b is unbiased (with the stratum grown back by
    ``growth``, it was 21.2 against 20 at the fifth batch: z = 13.8 over 2,000 seeds)."""
    seeds, k = 800, 5
    r_hat, var = [], []
    for seed in range(seeds):
        review, gold = synth(seed, n_top=0, draws=40, adaptive=False, estimator="ht")
        until_sampling_batch(review, gold, k)
        est = review.estimate_ht()
        r_hat.append(est.r_hat)
        var.append(est.var)
    _mean_within(np.array(r_hat), np.array(var), R_TRUE)
    assert float(np.mean(var)) == pytest.approx(float(np.var(r_hat)), rel=0.3)


# ------------------------------------------------------------------ stopping
def test_the_point_rule_by_hand() -> None:
    # paper: stop when found > R-hat * target; sift: found >= target * R-hat, found > 0
    assert target_rule(found=8, r_hat=10.0, target=0.8)  # 8 >= 8: a tie stops in sift
    assert not target_rule(found=7, r_hat=10.0, target=0.8)
    assert not target_rule(found=0, r_hat=0.0, target=0.8)  # nothing found: never
    assert target_rule(found=5, r_hat=5.0, target=1.0)  # target 1.0 stops on R-hat == found
    assert not target_rule(found=5, r_hat=5.0001, target=1.0)
    # bound: found / (R-hat + z sd) >= target; z(0.95) = 1.6449, sd 2: 10 / 13.29 < 0.8
    est = Estimate(10.0, 4.0, 10)
    assert est.upper(0.95) == pytest.approx(10.0 + 1.6448536269514722 * 2.0)
    assert not bound_rule(10, est.upper(0.95), 0.8)
    assert bound_rule(10, est.upper(0.95), 0.75)


def test_no_bound_on_recall_with_nothing_found() -> None:
    """Nothing found gives no evidence: recall_lower 0.0, as bound_rule (found > 0)
    refuses to stop; it was 1.0 (0 / 0) with a sampled estimate of 0."""
    assert Estimate(0.0, 0.0, 0).recall_lower(0.95) == 0.0
    assert Estimate(0.0, 0.0, 0, sampled=False).recall_lower(0.95) == 0.0
    review, gold = synth(0, n=60, r=0, warmup_precision=0.0, n_top=2, draws=10)
    until_sampling_batch(review, gold, 2)
    est = review.estimate()
    assert est.sampled and est.found == 0 and est.r_hat == 0.0
    assert est.recall_lower(review.confidence) == 0.0 and not review.should_stop()


def test_the_bound_rule_is_no_guarantee_where_relevant_records_sit_deep() -> None:
    """What the docs say (forty-third session, F1): bound@0.95 is a heuristic. On a
    collection whose last relevant records sit deep it met 0.95 in 14 of these 20 runs
    (N 1,000; 16 of 60 at N 2,000): this keeps the docs' claim honest (a valid 95% bound
    would fail it, and should then replace it)."""
    met = []
    for seed in range(20):
        review, gold = synth(seed, n=1000, mu=1.0)
        stopped = None
        while stopped is None and judge_batch(review, gold):
            if review.should_stop():
                stopped = int(np.sum(review.labels_ == 1))
        met.append((stopped if stopped is not None else R_TRUE) >= 0.95 * R_TRUE)
    assert sum(met) < 0.95 * len(met) * 0.9  # far below the nominal 95%


# ------------------------------------------------------------------- edges
@pytest.mark.parametrize(("n", "r", "params"), [
    (1, 1, {}), (1, 0, {}), (2, 1, {}), (3, 3, {}), (3, 0, {"n_top": 0}),
    (30, 30, {}), (30, 0, {"warmup_precision": 0.0}),
    (12, 1, {"n_top": 1, "draws": 100, "min_batches": 1}),  # draws > the remainder
    (40, 2, {"target_recall": 1.0, "min_batches": 1, "estimator": "hh"}),
    (40, 2, {"target_recall": 1.0, "min_batches": 1, "estimator": "ht"}),
    (40, 2, {"n_top": 0, "exponent": 10.0}),  # probabilities down to 1e-16
])
def test_edges_run_to_a_stop_with_finite_estimates(n: int, r: int,
                                                   params: dict[str, object]) -> None:
    review, gold = synth(0, n=n, r=r, **params)
    while judge_batch(review, gold):
        found = int(np.sum(review.labels_ == 1))
        for est in (review.estimate_ht(), review.estimate_hh()):
            assert math.isfinite(est.r_hat) and math.isfinite(est.var) and est.var >= 0
            assert est.r_hat >= est.found == found
        if review.should_stop():
            assert found > 0 or review.screened == n
            break
    assert review.should_stop()


def test_without_a_stratum_a_batch_never_comes_back_empty_while_documents_remain() -> None:
    """With no take-all stratum (``n_top=0``; before this session only with ``growth=0``)
    a batch whose draws all hit judged documents returned ``[]``, which every caller reads
    as "nothing left": 15 of 300 records were never screened (exponent 0.8, batch 34)."""
    review, gold = synth(0, n_top=0, growth=0.0)
    while judge_batch(review, gold):
        pass
    assert review.screened == 300 and review.should_stop()
    # each fallback is a batch of no draws taking the best-ranked unjudged document
    fallback = [b for b in review.batches_ if b["b"] == 0]
    assert fallback and all(len(b["certain"]) == 1 for b in fallback)
    again = Review.from_state(review.to_state())  # the state holds them and still loads
    assert again.to_state() == review.to_state()
