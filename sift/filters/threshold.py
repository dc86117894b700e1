"""TROT: the threshold that optimises an effectiveness measure on labelled examples.

Sweep the distinct scores in decreasing order; at each, the contingency table
is that of saying Yes to every example scoring at or above it (all examples tied
at a score move together). Start from saying No to everything (threshold
``+inf``) and keep a threshold only when it is strictly better, so ties go to
the higher threshold. Vectorised: one sort and cumulative sums, so the cost is
``O(m log m)`` for ``m`` examples.

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

import numpy as np
from numpy.typing import ArrayLike

from sift.filters.errors import FilterError
from sift.filters.measures import Measure, get_measure


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
        Weight of each example (default 1).
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
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel() > 0
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if not (s.shape == y.shape == w.shape):
        raise FilterError(
            f"scores, labels and weights must have one entry per example, got {s.shape}, {y.shape}, {w.shape}"
        )
    if s.size and not np.all(np.isfinite(s)):
        raise FilterError("scores must be finite")
    pos_total = float(w[y].sum())
    neg_total = float(w[~y].sum())
    best_value = float(np.asarray(fn(0.0, 0.0, pos_total, neg_total)))
    if s.size == 0:
        return math.inf, best_value
    order = np.argsort(-s, kind="stable")
    s_sorted = s[order]
    wp = np.where(y[order], w[order], 0.0)
    wn = np.where(y[order], 0.0, w[order])
    # last index of each run of tied scores (sorted descending)
    ends = np.flatnonzero(np.r_[s_sorted[1:] != s_sorted[:-1], True])
    a = np.cumsum(wp)[ends]
    b = np.cumsum(wn)[ends]
    values = np.asarray(fn(a, b, pos_total - a, neg_total - b), dtype=np.float64)
    i = int(np.argmax(values))  # first maximum = highest threshold among equals
    if values[i] > best_value:
        thr = float(s_sorted[ends[i]])
        if placement > 0 and i + 1 < ends.size:
            thr -= placement * (thr - float(s_sorted[ends[i + 1]]))
        return thr, float(values[i])
    return math.inf, best_value
