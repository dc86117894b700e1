"""Sampling probabilities and estimators of R, the number of relevant documents.

The design (Li and Kanoulas, ILPS at CLEF eHealth 2019, extended with a take-all
stratum): at batch ``t`` a set ``G_t`` of documents is taken with certainty and
``b_t`` draws are made *with replacement* from a power-law distribution over the
ranked list ``L_t`` of the other documents,

    p_i^t = r_i^t ** -a / sum_{r=1}^{|L_t|} r ** -a,

where ``r_i^t`` is the rank (from 1) of document ``i`` in ``L_t``. Over batches,

    1 - pi_i   = prod_t P_t(i not included)
               = prod_t [0 if i in G_t else (1 - p_i^t) ** b_t]
    1 - pi_i - pi_j + pi_ij = prod_t P_t(neither)
               = prod_t [0 if i or j in G_t else (1 - p_i^t - p_j^t) ** b_t]

The Horvitz-Thompson estimator is ``sum_{i in S} y_i / pi_i`` with the usual
variance estimator; the Hansen-Hurwitz estimator of one batch is
``sum_{i known relevant} + mean_j(y_j u_j / p_j)`` over the draws ``j``, where
``u_j`` marks a draw of a document not yet judged at the start of the batch. It is
conditionally unbiased given everything before the batch, so any average of
batch estimates is unbiased too (a martingale argument).

The HT formulas (:func:`pairwise_inclusion`, :func:`horvitz_thompson`) are exact for
a design fixed in advance, but the review's design is adaptive: the ``p_i^t`` depend on
the judgments already made, and a document found relevant is ranked near the top at
the next batches, so its ``pi_i`` (accumulated along the realised path, as in the
paper) climbs towards 1 and its weight towards 1 (where the design follows only the
earlier draws, through the take-all stratum, the bias is upward instead; the paper's
fixed design, ``n_top=0`` and a fixed ranking, has none). The review's HT estimate is
therefore biased low and tends to the number found (about 14 against R = 20 at the
second sampling batch of a synthetic review), and its variance estimate, which assumes
the fixed design, is too small. HH's per-batch argument does not need a fixed design.
Neither variance makes a confidence bound: the normal bound of :meth:`Estimate.upper`
is a heuristic (docs/screening.md, forty-third session).

>>> p = power_law(np.array([1, 2, 0, 3]), exponent=1.0)
>>> [round(float(x), 4) for x in p]
[0.5455, 0.2727, 0.0, 0.1818]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from sift.filters.screening.errors import ScreeningError

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def power_law(ranks: NDArray[np.integer], exponent: float) -> FloatArray:
    """Selection probabilities of a power law of the rank; rank 0 means probability 0.

    Ranks must be a permutation of ``1..n`` among the non-zero entries.
    """
    if not math.isfinite(exponent) or exponent < 0:
        raise ScreeningError(f"exponent must be finite and >= 0, got {exponent!r}")
    r = np.asarray(ranks, dtype=np.float64)
    n = int(np.count_nonzero(r))
    if n == 0:
        return np.zeros_like(r)
    norm_const = float(np.sum(np.arange(1, n + 1, dtype=np.float64) ** -exponent))
    out = np.zeros_like(r)
    mask = r > 0
    out[mask] = r[mask] ** -exponent / norm_const
    return out


def batch_miss_log(p: FloatArray, certain: NDArray[np.bool_], draws: int) -> FloatArray:
    """``log P(not included in this batch)`` per document (``-inf`` when certain; 0 for
    a batch of no draws, which includes nothing by chance: not ``0 * log 0``)."""
    if draws == 0:
        out = np.zeros(np.shape(p))
    else:
        with np.errstate(divide="ignore"):
            out = draws * np.log1p(-np.minimum(p, 1.0))
    out[certain] = -np.inf
    return out


def inclusion_from_log_miss(log_miss: FloatArray) -> FloatArray:
    """First-order inclusion probabilities ``pi_i = 1 - exp(log_miss_i)``."""
    return -np.expm1(log_miss)


def pairwise_inclusion(
    p_hist: FloatArray, certain_hist: NDArray[np.bool_], draws: IntArray
) -> FloatArray:
    """Second-order inclusion probabilities ``pi_ij`` of ``m`` documents.

    Parameters
    ----------
    p_hist
        ``(T, m)`` selection probabilities of the ``m`` documents at each batch.
    certain_hist
        ``(T, m)`` whether the document was taken with certainty at that batch.
    draws
        ``(T,)`` number of draws ``b_t`` per batch.

    Returns
    -------
    ``(m, m)`` matrix with ``pi_i`` on the diagonal.
    """
    t = p_hist.shape[0]
    b = np.asarray(draws, dtype=np.float64).reshape(t, 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # a batch of no draws includes nothing by chance (0, where b * log(1 - p) is 0 * -inf)
        log_miss_i = np.where(certain_hist, -np.inf,
                              np.where(b[:, :, 0] == 0, 0.0, b[:, :, 0] * np.log1p(-p_hist)))
        pair = np.clip(p_hist[:, :, None] + p_hist[:, None, :], 0.0, 1.0)
        log_neither = np.where(b == 0, 0.0, b * np.log1p(-pair))
    either_certain = certain_hist[:, :, None] | certain_hist[:, None, :]
    log_neither = np.where(either_certain, -np.inf, log_neither).sum(axis=0)
    log_miss = log_miss_i.sum(axis=0)
    pi = -np.expm1(log_miss)  # exact for tiny probabilities, where 1 - exp(.) rounds to 0
    # pi_ij = 1 - miss_i - miss_j + neither, written with expm1: each term is about 1 and
    # pi_ij about b (b - 1) p_i p_j, lost to rounding below p ~ 1e-8 in the plain form
    # (1.1e-16 for 5.4e-19 at p ~ 2e-11; forty-sixth session)
    em = np.expm1(log_miss)
    pij = np.expm1(log_neither) - em[:, None] - em[None, :]
    pij = np.clip(pij, 0.0, np.minimum(pi[:, None], pi[None, :]))
    np.fill_diagonal(pij, pi)
    return np.asarray(pij, dtype=np.float64)


def horvitz_thompson(y: FloatArray, pij: FloatArray) -> tuple[float, float]:
    """HT estimate of the total of ``y`` and its variance estimate (clipped at 0).

    ``y`` holds the values of the sampled units and ``pij`` their second-order
    inclusion probabilities (``pi_i`` on the diagonal).

    >>> y = np.array([1.0, 1.0])
    >>> pij = np.array([[0.5, 0.2], [0.2, 0.5]])
    >>> [round(v, 9) for v in horvitz_thompson(y, pij)]
    [4.0, 2.0]
    """
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return 0.0, 0.0
    pi = np.diag(pij).copy()
    if np.any(pi <= 0):
        raise ScreeningError("a sampled unit has inclusion probability 0")
    total = float(np.sum(y / pi))
    outer_pi = pi[:, None] * pi[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.where(pij > 0, (pij - outer_pi) / (pij * outer_pi), 0.0)
    np.fill_diagonal(coef, (1.0 - pi) / pi**2)
    var = float(y @ coef @ y)
    return total, max(var, 0.0)


def hansen_hurwitz(z: FloatArray) -> tuple[float, float]:
    """Mean of the per-draw values ``z_j = y_j / p_j`` and the variance of that mean.

    >>> hansen_hurwitz(np.array([0.0, 4.0, 0.0, 0.0]))
    (1.0, 1.0)
    """
    z = np.asarray(z, dtype=np.float64)
    b = z.size
    if b == 0:
        return 0.0, 0.0
    mean = float(z.mean())
    var = float(np.sum((z - mean) ** 2) / (b * (b - 1))) if b > 1 else 0.0
    return mean, var


@dataclass(frozen=True)
class Estimate:
    """An estimate of R with its variance and the relevant documents found so far.

    ``sampled`` is false while no sampling batch backs the estimate (at the start, during
    the greedy warm-up, and after documents join until a sampling batch of the new epoch
    completes): ``r_hat`` is then ``found`` with variance 0, which says nothing about the
    relevant documents not yet seen, so :meth:`recall` is NaN and :meth:`recall_lower`
    0.0 ("no bound"), not 1.0.
    """

    r_hat: float
    var: float
    found: int
    sampled: bool = True

    def upper(self, confidence: float) -> float:
        """``r_hat + z * sd`` with ``z`` the normal quantile of ``confidence``, at least ``found``.

        A normal approximation with a plug-in variance, so *not* a bound at that
        confidence: when the draws missed the relevant documents left (deep in the
        ranking, where they are rarely drawn), ``r_hat`` is ``found`` and ``var`` is
        small or 0, and the bound says nothing remains (docs/screening.md, forty-third
        session: with ``confidence`` 0.95 the bound rule met its target in 35-40% of
        synthetic runs).
        """
        z = float(norm.ppf(confidence))
        return max(self.r_hat + z * math.sqrt(max(self.var, 0.0)), float(self.found))

    def recall(self) -> float:
        """Point estimate of recall, ``found / max(r_hat, found)``; NaN when not ``sampled``.

        >>> Estimate(10.0, 4.0, 8).recall(), Estimate(8.0, 0.0, 8, sampled=False).recall()
        (0.8, nan)
        """
        if not self.sampled:
            return math.nan
        denom = max(self.r_hat, float(self.found))
        return 1.0 if denom <= 0 else self.found / denom

    def recall_lower(self, confidence: float) -> float:
        """Heuristic lower bound on recall, ``found / upper(confidence)`` (see :meth:`upper`:
        not a bound at that confidence); 0.0, no bound, when not ``sampled`` or when
        nothing is found (``0 / 0`` when the draws saw no relevant document either: it
        was 1.0, while the bound rule, which needs ``found > 0``, did not stop).

        >>> Estimate(0.0, 0.0, 0).recall_lower(0.95), Estimate(4.0, 0.0, 4).recall_lower(0.95)
        (0.0, 1.0)
        """
        if not self.sampled or self.found <= 0:
            return 0.0
        up = self.upper(confidence)
        return 1.0 if up <= 0 else self.found / up
