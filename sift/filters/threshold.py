"""TROT: the threshold that optimises an effectiveness measure on labelled examples.

Sweep the distinct scores in decreasing order; at each, the contingency table
is that of saying Yes to every example scoring at or above it (all examples tied
at a score move together). Start from saying No to everything (threshold
``+inf``) and keep a threshold only when it is strictly better, so ties go to
the higher threshold. Vectorised: one sort and cumulative sums, so the cost is
``O(m log m)`` for ``m`` examples.

Values within ``TIE_TOLERANCE`` of the sweep's largest magnitude count as equal:
with weighted examples the cumulative sums round, and two contingency tables of
exactly equal value (or one exactly tying No) would otherwise differ in the last
bit and hand the tie to the lower threshold (forty-sixth session). With unit
weights equal values are equal floats already, so nothing changes there.

Examples
--------
>>> import numpy as np
>>> scores = np.array([0.9, 0.8, 0.8, 0.3])
>>> labels = np.array([1, 1, -1, -1])
>>> trot(scores, labels, measure="t11su")
0.8
>>> trot(np.array([0.9, 0.8, 0.2]), np.array([-1, -1, 1]), measure="t11u")  # nothing pays
inf
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike

from sift.filters.errors import FilterError
from sift.filters.measures import Measure, get_measure

#: Measure values closer than this share of the largest magnitude in a sweep are ties
#: (summing weights rounds; a genuine difference is many orders of magnitude larger).
TIE_TOLERANCE = 1e-10


def _first_best(values: np.ndarray) -> int:
    """Index of the first value within ``TIE_TOLERANCE`` (relative to the largest finite
    magnitude) of the maximum: the earliest, i.e. highest, of equally good thresholds.

    >>> _first_best(np.array([2.0, 1.0, 2.0000000000000004]))
    0
    >>> _first_best(np.array([0.0, 1e-12, 3e-12]))
    2
    """
    finite = values[np.isfinite(values)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    top = float(np.max(values))
    return int(np.argmax(values >= top - TIE_TOLERANCE * scale))


def trot(
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    measure: str | Measure = "t11su",
    placement: float = 0.0,
) -> float:
    """Best threshold for ``measure`` over scored, weighted, labelled examples.

    Parameters
    ----------
    scores
        Score of each example.
    labels
        ``1`` (or True) for relevant, ``-1``/``0`` (or False) for non-relevant.
    weights
        Weight of each example (default 1): finite and non-negative (0 leaves it out).
    measure
        Name of a measure in :mod:`sift.filters.measures` or a callable of (a, b, c, d).
    placement
        Where to put the threshold between the lowest accepted score ``s`` and the next
        lower score ``s'``: ``s - placement * (s - s')``. 0 (the design's choice) puts it
        at ``s``; 0.5 at the midpoint, the maximum-margin choice. Only examples decide the
        contingency either way.

    Returns
    -------
    float
        The threshold (``math.inf`` when answering No to everything is best).

    Raises
    ------
    FilterError
        If ``placement`` is outside ``[0, 1)``, the arrays differ in length, a score is
        not finite, or a weight is negative or not finite.

    Examples
    --------
    >>> trot([0.9, 0.8, 0.4, 0.3], [1, 1, -1, -1])  # on the lowest accepted score
    0.8
    >>> round(trot([0.9, 0.8, 0.4, 0.3], [1, 1, -1, -1], placement=0.5), 6)  # midway
    0.6
    >>> trot([0.9, 0.8], [-1, -1])  # answering No to everything is best
    inf
    """
    return trot_with_value(scores, labels, weights, measure=measure, placement=placement)[0]


def trot_with_value(
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    measure: str | Measure = "t11su",
    placement: float = 0.0,
) -> tuple[float, float]:
    """Like :func:`trot` but also return the measure's value at the chosen threshold."""
    if not 0.0 <= placement < 1.0:
        raise FilterError(f"placement must be in [0, 1), got {placement!r}")
    fn = get_measure(measure)
    s, y, w = _examples(scores, labels, weights)
    pos_total = float(w[y].sum())
    neg_total = float(w[~y].sum())
    if s.size == 0:
        return math.inf, float(np.asarray(fn(0.0, 0.0, pos_total, neg_total)))
    distinct, a, b = _distinct_sweep(s, y, w)
    # saying No to everything first: one call of the (elementwise) measure for all
    a0 = np.concatenate([[0.0], a])
    b0 = np.concatenate([[0.0], b])
    values = np.asarray(fn(a0, b0, pos_total - a0, neg_total - b0), dtype=np.float64)
    # the first maximum (No first, then the highest threshold) among values equal up to
    # rounding (TIE_TOLERANCE)
    j = _first_best(values)
    if j > 0 and values[j] > values[0]:
        i = j - 1
        thr = float(distinct[i])
        if placement > 0 and i + 1 < distinct.size:
            thr -= placement * (thr - float(distinct[i + 1]))
        return thr, float(values[j])
    return math.inf, float(values[0])


def _examples(scores: ArrayLike, labels: ArrayLike, weights: ArrayLike | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, relevance flags and weights as flat arrays, validated: scores finite,
    weights finite and non-negative. Examples of weight 0 are left out (their scores
    are no candidate threshold and no placement gap)."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel() > 0
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if not (s.shape == y.shape == w.shape):
        raise FilterError(
            f"scores, labels and weights must have one entry per example, got {s.shape}, {y.shape}, {w.shape}"
        )
    if s.size and not np.all(np.isfinite(s)):
        raise FilterError(f"scores must be finite, got {float(s[~np.isfinite(s)][0])!r}")
    if weights is not None and w.size and not (w.min() >= 0.0 and w.max() < math.inf):  # (NaN fails the first)
        bad = w[~((w >= 0.0) & (w < math.inf))]
        raise FilterError(f"weights must be finite and non-negative, got {float(bad[0])!r}")
    if weights is not None and w.size and not w.min() > 0.0:
        keep = w > 0.0
        s, y, w = s[keep], y[keep], w[keep]
    return s, y, w


def _distinct_sweep(
    s: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores in decreasing order with the weight of relevant (``a``) and
    non-relevant (``b``) examples scoring at or above each."""
    if s.size == 0:
        return s, s.copy(), s.copy()
    order = stable_argsort(-s)
    s_sorted = s[order]
    last = np.empty(s.size, bool)
    np.not_equal(s_sorted[1:], s_sorted[:-1], out=last[:-1])
    last[-1] = True
    ends = np.flatnonzero(last)
    y_o, w_o = y[order], w[order]
    a = np.cumsum(np.where(y_o, w_o, 0.0))[ends]
    b = np.cumsum(np.where(y_o, 0.0, w_o))[ends]
    return s_sorted[ends], a, b


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` (ties in index order), faster: an unstable sort,
    then tied runs, if any, put back in index order.

    >>> stable_argsort(np.array([2.0, 1.0, 2.0, 1.0, 0.0])).tolist()
    [4, 1, 3, 0, 2]
    """
    order = np.argsort(x)
    xs = x[order]
    tied = xs[1:] == xs[:-1]
    if tied.any():
        # sort by (run of equal values, index): one sort of integer keys
        n = order.size
        run = np.zeros(n, np.int64)
        np.cumsum(~tied, out=run[1:])
        order = np.sort(run * n + order) % n
    return order


def scut(
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    measure: str | Measure = "f1",
    fbr: float = 0.0,
    fallback: str = "top",
    placement: float = 0.0,
    min_score: float | None = None,
) -> float:
    """Score-cut thresholding with an fbr fallback (Yang 2001, SCut and SCutFBR).

    See :func:`scut_with_value`; this returns the threshold only.

    Examples
    --------
    >>> import numpy as np
    >>> s = np.array([0.9, 0.7, 0.6, 0.2, 0.0, 0.0])
    >>> y = np.array([1, -1, 1, -1, -1, -1])
    >>> scut(s, y)                  # F1: 2/3 at 0.9, 1/2 at 0.7, 4/5 at 0.6 (a=2, b=1, c=0)
    0.6
    >>> scut(np.array([0.3, 0.0, 0.0]), np.array([-1, 1, -1]), fbr=0.3)  # best F1 1/2 at 0
    0.0
    >>> scut(np.array([0.3, 0.0, 0.0]), np.array([-1, 1, -1]), fbr=0.3, min_score=0.0)  # F1 0 above 0
    0.3
    """
    return scut_with_value(scores, labels, weights, measure=measure, fbr=fbr, fallback=fallback,
                           placement=placement, min_score=min_score)[0]


def scut_with_value(
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    measure: str | Measure = "f1",
    fbr: float = 0.0,
    fallback: str = "top",
    placement: float = 0.0,
    min_score: float | None = None,
) -> tuple[float, float]:
    """The threshold that maximises ``measure`` on validation scores, with a guard.

    The sweep is TROT's (:func:`trot_with_value`: distinct scores in decreasing order,
    ties move together, answering No to everything is the starting point and wins ties),
    with two additions for categories with few relevant examples:

    - ``min_score``: only thresholds strictly above it are candidates (examples scoring
      at or below it are never accepted). For a kNN vote, ``min_score=0`` forbids
      accepting documents with no relevant neighbour, which F1 would otherwise do for a
      category whose only relevant example scores 0 among hundreds of ties.
    - ``fbr``: when the best value is below ``fbr``, the threshold is not trusted and is
      replaced (SCutFBR): ``fallback="top"`` sets it to the highest example score above
      ``min_score`` (accept only what scores like the top-ranked example; SCutFBR.1),
      ``fallback="none"`` to ``+inf`` (accept nothing; SCutFBR.0).

    Parameters
    ----------
    scores
        Validation (e.g. leave-one-out) score of each example.
    labels
        ``1`` (or True) for relevant, ``-1``/``0`` (or False) for non-relevant.
    weights
        Weight of each example (default 1).
    measure
        Name of a measure in :mod:`sift.filters.measures` or a callable of (a, b, c, d).
    fbr
        The fallback rank threshold, in the measure's units (``0`` turns the fallback off).
    fallback
        ``"top"`` or ``"none"``.
    placement
        As in :func:`trot`: the threshold is ``s - placement * (s - s')`` where ``s`` is
        the lowest accepted score and ``s'`` the next lower example score (or
        ``min_score`` if that is higher). Not applied to the fallback threshold.
    min_score
        Lower bound (exclusive) of the candidate thresholds, or ``None``.

    Returns
    -------
    tuple of float
        The threshold (``math.inf``: accept nothing) and the measure's value on the
        examples at that threshold.
    """
    if not 0.0 <= placement < 1.0:
        raise FilterError(f"placement must be in [0, 1), got {placement!r}")
    if not (isinstance(fbr, int | float) and math.isfinite(fbr)):
        raise FilterError(f"fbr must be a finite number, got {fbr!r}")
    if fallback not in ("top", "none"):
        raise FilterError(f"fallback must be 'top' or 'none', got {fallback!r}")
    if min_score is not None and not math.isfinite(min_score):
        raise FilterError(f"min_score must be a finite number or None, got {min_score!r}")
    fn = get_measure(measure)
    s, y, w = _examples(scores, labels, weights)
    pos_total = float(w[y].sum())
    neg_total = float(w[~y].sum())
    nothing = float(np.asarray(fn(0.0, 0.0, pos_total, neg_total)))
    distinct, a, b = _distinct_sweep(s, y, w)
    n_cand = distinct.size if min_score is None else int(np.sum(distinct > min_score))
    values = np.asarray(fn(a, b, pos_total - a, neg_total - b), dtype=np.float64)[:n_cand]
    thr, value = math.inf, nothing
    if n_cand:
        # the first maximum, No first, among values equal up to rounding (as in trot)
        i = _first_best(np.concatenate([[nothing], values])) - 1
        if i >= 0 and values[i] > nothing:
            thr, value = float(distinct[i]), float(values[i])
            lower = float(distinct[i + 1]) if i + 1 < distinct.size else None
            if min_score is not None and (lower is None or lower < min_score):
                lower = min_score
            if placement > 0 and lower is not None:
                thr -= placement * (thr - lower)
    if value < fbr:
        if fallback == "top" and n_cand:
            thr, value = float(distinct[0]), float(values[0])
        else:
            thr, value = math.inf, nothing
    return thr, value


def zero_utility_threshold(
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    start: float,
    credit_relevant: float = 2.0,
    credit_nonrelevant: float = -1.0,
    placement: float = 0.0,
) -> float:
    """The lowest threshold at or below ``start`` down to which the examples' linear
    utility stays non-negative (the zero-utility threshold of Zhai et al.'s beta-gamma
    thresholding, TREC-7 and TREC-8).

    Sweep the distinct scores at or below ``start`` in decreasing order; the utility
    ``credit_relevant * a + credit_nonrelevant * b`` of saying Yes to every example at
    or above the score is computed for each, and the sweep stops before the first
    negative value. Returns ``start`` when the utility at ``start`` is already negative
    or no example scores at or below it, and an infinite ``start`` unchanged
    (``placement`` as in :func:`trot`). A NaN ``start``, like a non-finite score or a
    negative or non-finite weight, raises :class:`FilterError`.

    >>> import numpy as np
    >>> s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    >>> y = np.array([1, -1, 1, -1, -1, -1])
    >>> zero_utility_threshold(s, y, start=0.9)   # utilities 2, 1, 3, 2, 1, 0
    0.4
    >>> zero_utility_threshold(s, y, np.array([1, 3, 1, 1, 1, 1]), start=0.9)  # 2, -1: stop
    0.9
    """
    if not 0.0 <= placement < 1.0:
        raise FilterError(f"placement must be in [0, 1), got {placement!r}")
    if isinstance(start, bool) or not isinstance(start, numbers.Real) or math.isnan(start):
        raise FilterError(f"start must be a number (or an infinity), got {start!r}")
    s, y, w = _examples(scores, labels, weights)
    if not math.isfinite(start) or s.size == 0:
        return start
    distinct, a, b = _distinct_sweep(s, y, w)
    u = credit_relevant * a + credit_nonrelevant * b
    first = int(np.searchsorted(-distinct, -start, side="left"))  # first score <= start
    if first >= distinct.size:
        return start
    # negative beyond rounding: an exact 0 of weighted sums may come out as -1e-16
    scale = abs(credit_relevant) * float(a[-1]) + abs(credit_nonrelevant) * float(b[-1])
    bad = np.flatnonzero(u[first:] < -TIE_TOLERANCE * scale)
    last = first + (int(bad[0]) - 1 if bad.size else distinct.size - first - 1)
    if last < first:
        return start
    thr = float(distinct[last])
    if placement > 0 and last + 1 < distinct.size:
        thr -= placement * (thr - float(distinct[last + 1]))
    return min(thr, start)
