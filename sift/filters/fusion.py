"""Learning to rank from a few positives by fusing several dissimilarities.

Implements the integer program of Helm et al., "Distance-based Positive and
Unlabeled Learning for Ranking" (Pattern Recognition): given a query item
``v*``, ``J`` dissimilarities ``d^j(v*, v)`` to every other item and a set ``S``
of items known to be similar to ``v*``, find weights ``alpha_j >= 0`` summing to
one such that, ranked by ``sum_j alpha_j d^j``, as few items outside ``S`` as
possible come before the worst-ranked member of ``S``.

The mixed-integer program (solved with :func:`scipy.optimize.milp`, i.e. HiGHS)
uses one auxiliary variable ``t`` for the fused dissimilarity of the worst
member of ``S``::

    min  sum_v x_v
    s.t. sum_j alpha_j d^j(s) <= t                      for s in S
         t <= sum_j alpha_j d^j(v) + M_v x_v            for v in C
         sum_j alpha_j = 1,  alpha >= 0,  x_v in {0, 1}

which has ``|S| + |C|`` rows instead of the paper's ``|S| |C|``; it is
equivalent because for fixed ``alpha`` the ``|S|`` constraints on ``v`` all hold
iff the one with the largest left-hand side does, and ``t`` can always be set to
that largest value. ``M_v = max_j (max_s d^j(s) - d^j(v))`` is the smallest
valid big-M for ``v`` (the maximum of a convex function over the simplex sits at
a vertex), tighter than the paper's global ``M``.

Before solving, every column is rescaled to ``[0, 1]`` (this changes neither the
set of reachable rankings nor the optimum; weights are mapped back), and

* candidates that cannot outrank the worst member of ``S`` under any weights
  (``d^j(v) >= max_s d^j(s)`` for every ``j``: exact, since ``f(v) - max_s f(s)``
  is concave in ``alpha`` and so minimal at a vertex) are removed;
* candidates that strictly dominate some member of ``S`` in every
  dissimilarity outrank it, hence the worst member, under all weights: their
  ``x_v`` is fixed to one;
* members of ``S`` dominated by another member are dropped from the ``t`` rows.

``J = 2`` is solved by a sweep over the breakpoints of the upper envelope of
the ``S`` lines (``meanrank`` / ``mrr``: over the crossings of the pairs); near-ties
count as ties there, so its best count is a valid bound, and the result is called
optimal only when the weights returned, counted again in the original units,
reach it. A time limit returns the best solution found (the better of HiGHS's
incumbent and a sampled heuristic) with the MIP gap.

Two other objectives named in the paper are available: the mean rank of ``S``
and the mean reciprocal rank of ``S`` (ranks of a member of ``S`` are counted
against the candidates only, i.e. ``1 + #{v in C ranked strictly before s}``;
for the reciprocal rank the program optimises a version truncated at rank
``mrr_cutoff``).

Conventions: rows of ``D`` are items, columns are dissimilarities; a smaller
fused value ranks earlier; a candidate tied with the worst member of ``S`` does
*not* outrank it.

This module is pure computation (numpy, scipy): no file or network I/O.
"""

from __future__ import annotations

import contextlib
import numbers
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from sift.filters.accumulator import SparseAccumulator
from sift.filters.base import ScoringModel, check_positive, init_params
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.examples import ExampleSet
from sift.filters.kantor import Kantor
from sift.filters.knn import KNN
from sift.filters.rocchio import Rocchio
from sift.filters.sparse import nonzero_2d, restrict, unique
from sift.filters.state import check_version, decode_array, decode_count, encode_array

__all__ = [
    "COMPONENTS",
    "OBJECTIVES",
    "ContextWeights",
    "DissimilarityFusion",
    "FusionContext",
    "FusionError",
    "FusionModel",
    "FusionResult",
    "SingletonRanker",
    "fused_ranks",
    "heldout_mrr",
    "objective_value",
    "solve_weights",
]

Objective = Literal["maxrank", "meanrank", "mrr"]
OBJECTIVES: tuple[str, ...] = ("maxrank", "meanrank", "mrr")
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

_CHUNK_CELLS = 4_000_000  # cells of a dense temporary before we chunk


class FusionError(FilterError, ValueError):
    """Bad input to the fusion ranker; the message names the parameter and value (a
    :class:`~sift.filters.errors.FilterError`, as every error of the learning core)."""


# --------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class _Problem:
    """Validated input: normalised dissimilarities plus index sets."""

    d: FloatArray  # (n, J') columns rescaled to [0, 1], constant columns dropped
    cols: IntArray  # original index of each kept column
    scale: FloatArray  # range of each kept column in the original units
    n_cols: int  # J
    positives: IntArray  # rows of S
    candidates: IntArray  # rows of C
    raw: FloatArray  # (n, J) the dissimilarities as given


def _real_array(values: Any, name: str, what: str) -> FloatArray:
    """``values`` as a float64 array; complex numbers, strings and other objects are
    refused rather than coerced (numpy drops an imaginary part and parses strings)."""
    if sp.issparse(values):
        raise FusionError(f"{name} must be {what} of real numbers, got a sparse matrix")
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise FusionError(f"{name} must be {what} of real numbers: {exc}") from None
    kind = arr.dtype.kind
    if kind == "O":
        # Python integers beyond int64 make an object array: numbers, so accepted
        bad = [x for x in arr.reshape(-1) if isinstance(x, bool)
               or not isinstance(x, numbers.Real)][:1] if arr.ndim else [values]
        if bad:
            raise FusionError(f"{name} must be {what} of real numbers, got {bad[0]!r:.60}")
    elif kind not in "biuf":
        first = arr.reshape(-1)[0] if arr.size else arr
        raise FusionError(f"{name} must be {what} of real numbers, got dtype {arr.dtype} "
                          f"({first!r:.40})")
    try:
        return np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise FusionError(f"{name} must be {what} of real numbers: {exc}") from None


def _not_bool_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _check_seed(seed: Any, name: str = "seed") -> int | None:
    """``None`` or a non-negative integer (numpy integers too, not a bool)."""
    if seed is None:
        return None
    if not _not_bool_int(seed) or int(seed) < 0:
        raise FusionError(f"{name} must be None or an integer >= 0, got {seed!r}")
    return int(seed)


def _check_time_limit(time_limit: Any, name: str = "time_limit") -> float | None:
    """``None`` or a finite number of seconds > 0 (numpy numbers too, not a bool)."""
    if time_limit is None:
        return None
    ok = (isinstance(time_limit, int | float | np.integer | np.floating)
          and not isinstance(time_limit, bool | np.bool_))
    if not ok or not np.isfinite(time_limit) or time_limit <= 0:
        raise FusionError(f"{name} must be None or a positive number of seconds, got {time_limit!r}")
    return float(time_limit)


def _check_method(method: Any) -> str:
    if not isinstance(method, str) or method not in ("auto", "milp", "sweep"):
        raise FusionError(f"method must be auto, milp or sweep, got {method!r}")
    return method


def _as_matrix(dissimilarities: ArrayLike) -> FloatArray:
    d = _real_array(dissimilarities, "dissimilarities", "a numeric (n, J) array")
    if d.ndim == 1:
        d = d[:, None]
    if d.ndim != 2:
        raise FusionError(f"dissimilarities must be a 2-D (n, J) array, got shape {d.shape}")
    if d.shape[1] == 0:
        raise FusionError("dissimilarities has J = 0 columns; need at least one dissimilarity")
    if d.shape[0] == 0:
        raise FusionError("dissimilarities has no rows (n = 0)")
    if not np.all(np.isfinite(d)):
        bad = np.argwhere(~np.isfinite(d))[0]
        raise FusionError(
            f"dissimilarities must be finite, got {d[bad[0], bad[1]]} at row {bad[0]}, "
            f"column {bad[1]}"
        )
    return d


def _index_set(values: ArrayLike, n: int, name: str,
               empty: str | None = "need at least one known positive") -> IntArray:
    """Distinct integer indices in ``[0, n)`` (integral floats accepted); ``empty``: the
    reason an empty set is refused (``None``: allowed)."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise FusionError(f"{name} must hold integer row indices: {exc}") from None
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.size == 0:
        if empty is not None:
            raise FusionError(f"{name} is empty; {empty}")
        return np.zeros(0, dtype=np.intp)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            if np.any(np.abs(arr) > 2.0**62):
                big = arr[np.abs(arr) > 2.0**62][0]
                raise FusionError(f"{name} holds row index {big!r} outside [0, {n})")
            arr = arr.astype(np.intp)
        else:
            raise FusionError(f"{name} must hold integer row indices, got {arr.tolist()[:5]}")
    # the range on the values as given (an unsigned index beyond int64 would wrap)
    out = arr[(arr < 0) | (arr >= n)]
    if out.size:
        raise FusionError(f"{name} holds row index {int(out[0])} outside [0, {n})")
    idx = arr.astype(np.intp)
    if unique(idx).size != idx.size:
        raise FusionError(f"{name} holds duplicate row indices: {idx.tolist()[:10]}")
    return idx


def _problem(dissimilarities: ArrayLike, positives: ArrayLike, query: int | None) -> _Problem:
    d = _as_matrix(dissimilarities)
    n, j = d.shape
    pos = _index_set(positives, n, "positives")
    keep = np.ones(n, dtype=bool)
    if query is not None:
        if isinstance(query, bool) or not isinstance(query, int | np.integer):
            raise FusionError(f"query must be a row index, got {query!r}")
        if not 0 <= int(query) < n:
            raise FusionError(f"query = {query} is outside [0, {n})")
        if int(query) in set(pos.tolist()):
            raise FusionError(f"positives contains the query item itself (row {query})")
        keep[int(query)] = False
    keep[pos] = False
    cand = np.flatnonzero(keep).astype(np.intp)
    rows = np.concatenate([pos, cand])
    lo = d[rows].min(axis=0)
    hi = d[rows].max(axis=0)
    # a column spanning more than the largest float (e.g. -1.7e308 to 1.7e308) has no
    # finite range: then every column is taken at half its values, which changes neither
    # the rescaled values (halving is exact) nor the weights (the scales stay in ratio)
    with np.errstate(over="ignore"):
        half = 0.5 if not np.all(np.isfinite(hi - lo)) else 1.0
    rng = hi * half - lo * half
    # constant: a range within rounding of the column's magnitude (relative, so that a
    # column's units do not matter: one of values near 1e-13 still varies)
    varying = np.flatnonzero(
        rng > 1e-12 * half * np.maximum(np.abs(hi), np.abs(lo))).astype(np.intp)
    dn = np.zeros((n, varying.size), dtype=np.float64)
    if varying.size:
        dn[rows] = ((d[np.ix_(rows, varying)] * half - lo[varying] * half) / rng[varying])
    return _Problem(dn, varying, rng[varying], j, pos, cand, d)


def _check_objective(objective: str) -> Objective:
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise FusionError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    return objective  # type: ignore[return-value]


def _check_weights(weights: ArrayLike, j: int, name: str = "weights") -> FloatArray:
    w = _real_array(weights, name, "an array").reshape(-1)
    if w.size != j:
        raise FusionError(f"{name} must have J = {j} entries, got {w.size}")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise FusionError(f"{name} must be finite, non-negative and not all zero, got {w.tolist()}")
    return np.asarray(w / w.sum(), dtype=np.float64)


# --------------------------------------------------------------------------- evaluation


def _beats_counts(f_cand: FloatArray, f_pos: FloatArray) -> NDArray[np.int64]:
    """For each positive (column of ``f_pos``), how many candidates score strictly lower.

    ``f_cand`` is (m, K), ``f_pos`` is (p, K); returns (p, K).
    """
    m, k = f_cand.shape
    out = np.zeros((f_pos.shape[0], k), dtype=np.int64)
    srt = np.sort(f_cand, axis=0)
    for col in range(k):
        out[:, col] = np.searchsorted(srt[:, col], f_pos[:, col], side="left")
    del m
    return out


_ROW_HASH = np.uint64(0x9E3779B97F4A7C15)


def _twins(d: FloatArray, pos: IntArray, cand: IntArray) -> tuple[IntArray, IntArray]:
    """``(i, k)``: candidate ``cand[i]`` has the same row as positive ``pos[k]``, bit for
    bit. Rows are matched by a hash of their bits, then compared."""
    j = d.shape[1]
    mult = (np.arange(1, j + 1, dtype=np.uint64) * _ROW_HASH) | np.uint64(1)

    def hashes(rows: IntArray) -> NDArray[np.uint64]:
        bits = np.ascontiguousarray(d[rows] + 0.0).view(np.uint64)  # (+0.0: -0.0 is 0.0)
        return np.asarray((bits * mult).sum(axis=1, dtype=np.uint64), dtype=np.uint64)

    hp, hc = hashes(pos), hashes(cand)
    order = np.argsort(hp, kind="stable")
    at = np.minimum(np.searchsorted(hp[order], hc), pos.size - 1)
    hit = np.flatnonzero(hp[order][at] == hc)
    k = order[at[hit]]
    same = np.all(d[cand[hit]] == d[pos[k]], axis=1)
    return hit[same].astype(np.intp), k[same].astype(np.intp)


def _objective_many(
    d: FloatArray, pos: IntArray, cand: IntArray, alphas: FloatArray, objective: Objective
) -> FloatArray:
    """Exact objective for each column of ``alphas`` (J, K); smaller is better.

    For ``mrr`` the negated mean reciprocal rank is returned so that smaller is
    always better.
    """
    k = alphas.shape[1]
    out = np.empty(k, dtype=np.float64)
    # a candidate identical to a positive (a duplicate document) gets the positive's
    # score to the bit, and so never outranks it: a product can round the same row
    # differently by where it stands in the matrix
    twin_c, twin_p = _twins(d, pos, cand)
    step = max(1, _CHUNK_CELLS // max(1, d.shape[0]))
    for start in range(0, k, step):
        a = alphas[:, start : start + step]
        f_pos = d[pos] @ a
        f_cand = d[cand] @ a
        if twin_c.size:
            f_cand[twin_c] = f_pos[twin_p]
        if objective == "maxrank":
            worst = f_pos.max(axis=0)
            out[start : start + step] = (f_cand < worst).sum(axis=0)
        else:
            ranks = 1.0 + _beats_counts(f_cand, f_pos)
            if objective == "meanrank":
                out[start : start + step] = ranks.mean(axis=0)
            else:
                out[start : start + step] = -(1.0 / ranks).mean(axis=0)
    return out


def _report(objective: Objective, value: float) -> float:
    return -value if objective == "mrr" else value


def objective_value(
    dissimilarities: ArrayLike,
    positives: ArrayLike,
    weights: ArrayLike,
    *,
    objective: str = "maxrank",
    query: int | None = None,
) -> float:
    """The exact value of an objective for given weights.

    Parameters
    ----------
    dissimilarities
        (n, J) array: ``d^j(v*, v_i)`` for each item ``i``.
    positives
        Row indices of ``S``.
    weights
        ``J`` non-negative weights (normalised to sum to one).
    objective
        ``"maxrank"``: number of candidates ranked strictly before the worst
        member of ``S``; ``"meanrank"``: mean rank of ``S`` against the
        candidates; ``"mrr"``: mean reciprocal rank of ``S`` against the
        candidates.
    query
        Row of ``v*`` if ``dissimilarities`` includes it (it is then ignored).

    Returns
    -------
    float

    Examples
    --------
    >>> D = [[0.2, 0.6], [0.6, 0.2], [0.1, 0.9], [0.9, 0.1], [0.5, 0.5]]
    >>> objective_value(D, [0, 1], [1.0, 0.0])
    2.0
    >>> objective_value(D, [0, 1], [0.5, 0.5])
    0.0
    """
    obj = _check_objective(objective)
    d = _as_matrix(dissimilarities)
    w = _check_weights(weights, d.shape[1])
    prob = _problem(d, positives, query)
    a = w[:, None]
    return _report(obj, float(_objective_many(d, prob.positives, prob.candidates, a, obj)[0]))


def _scores(scores: ArrayLike) -> FloatArray:
    """Finite real scores, one per item."""
    s = _real_array(scores, "scores", "an array").reshape(-1)
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise FusionError(f"scores must be finite, got {s[bad[0]]} at index {int(bad[0])}")
    return s


def fused_ranks(scores: ArrayLike, pool: ArrayLike | None = None) -> FloatArray:
    """Mid-ranks (1 = best = smallest score) of each item of ``pool`` within ``pool``.

    Ties share the mean of the positions they occupy. ``scores`` must be finite and
    ``pool`` distinct integer indices into them.

    Examples
    --------
    >>> fused_ranks([0.3, 0.1, 0.3, 0.7]).tolist()
    [2.5, 1.0, 2.5, 4.0]
    """
    s = _scores(scores)
    idx = np.arange(s.size) if pool is None else _index_set(pool, s.size, "pool", empty=None)
    v = s[idx]
    srt = np.sort(v)
    less = np.searchsorted(srt, v, side="left")
    leq = np.searchsorted(srt, v, side="right")
    return (less + (leq - less + 1) / 2.0).astype(np.float64)


def heldout_mrr(
    scores: ArrayLike,
    heldout: ArrayLike,
    *,
    exclude: ArrayLike | None = None,
) -> float:
    """Mean reciprocal rank of the ``heldout`` items, ranked by ascending ``scores``.

    Items in ``exclude`` (the query and the known positives ``S``) are removed
    from the list first, as in the paper's evaluation of ``S* \\ S``. Ties get
    mid-ranks. Scores must be finite; ``heldout`` and ``exclude`` distinct integer
    indices into them (:class:`FusionError` otherwise).

    Examples
    --------
    >>> heldout_mrr([0.0, 0.1, 0.2, 0.3, 0.4], [3], exclude=[0, 1])
    0.5
    """
    s = _scores(scores)
    held = _index_set(heldout, s.size, "heldout", empty="nothing to evaluate")
    keep = np.ones(s.size, dtype=bool)
    if exclude is not None:
        keep[_index_set(exclude, s.size, "exclude", empty=None)] = False
    if not np.all(keep[held]):
        raise FusionError("heldout and exclude overlap")
    pool = np.flatnonzero(keep)
    ranks = fused_ranks(s, pool)
    pos_in_pool = np.searchsorted(pool, held)
    return float(np.mean(1.0 / ranks[pos_in_pool]))


# --------------------------------------------------------------------------- pruning


@dataclass(frozen=True)
class _Pruned:
    active: IntArray  # candidates left for the solver
    n_never: int  # candidates that can never outrank (removed)
    n_fixed: int  # candidates that always outrank (x fixed to one)
    pos_rows: IntArray  # S rows not dominated by another S row


def _pareto_max(x: FloatArray) -> IntArray:
    """Rows of ``x`` not weakly dominated (componentwise <=) by another row."""
    n = x.shape[0]
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        others = np.delete(np.arange(n), i)
        others = others[keep[others]]
        if others.size == 0:
            continue
        dom = np.all(x[others] >= x[i], axis=1)
        strict = np.any(x[others] > x[i], axis=1)
        # dominated by a strictly larger row, or a duplicate with a lower index kept
        if np.any(dom & strict) or np.any(dom & ~strict & (others < i)):
            keep[i] = False
    return np.flatnonzero(keep).astype(np.intp)


def _prune_maxrank(d: FloatArray, pos: IntArray, cand: IntArray) -> _Pruned:
    ps = pos[_pareto_max(d[pos])]
    smax = d[ps].max(axis=0)
    dc = d[cand]
    never = np.all(dc >= smax, axis=1)
    always = np.zeros(cand.size, dtype=bool)
    step = max(1, _CHUNK_CELLS // max(1, ps.size * d.shape[1]))
    for start in range(0, cand.size, step):
        block = dc[start : start + step]
        always[start : start + step] = np.any(
            np.all(block[:, None, :] < d[ps][None, :, :], axis=2), axis=1
        )
    always &= ~never
    active = cand[~never & ~always]
    return _Pruned(active, int(never.sum()), int(always.sum()), ps)


# --------------------------------------------------------------------------- J = 2 sweep


def _envelope(d: FloatArray, ps: IntArray) -> tuple[FloatArray, FloatArray]:
    """Breakpoints in [0, 1] of max_s (d1 + a (d0 - d1)) and its values there."""
    b = d[ps, 1]
    m = d[ps, 0] - d[ps, 1]
    cand_pts = [np.array([0.0, 1.0])]
    if ps.size > 1:
        i, j = np.triu_indices(ps.size, 1)
        dm = m[i] - m[j]
        ok = np.abs(dm) > 1e-15
        x = (b[j][ok] - b[i][ok]) / dm[ok]
        cand_pts.append(x[(x > 0) & (x < 1)])
    pts = np.unique(np.concatenate(cand_pts))
    if pts.size > 2:
        mids = (pts[:-1] + pts[1:]) / 2
        arg = np.argmax(b[None, :] + mids[:, None] * m[None, :], axis=1)
        change = np.flatnonzero(arg[1:] != arg[:-1]) + 1
        pts = np.concatenate([[0.0], pts[change], [1.0]])
    g = np.max(b[None, :] + pts[:, None] * m[None, :], axis=1)
    return pts, g


#: how far (in normalised dissimilarity) a candidate may be above the positives' envelope
#: at a breakpoint and still count as tied with it there: the envelope's value at a
#: breakpoint is the larger of two lines that meet there, each rounded its own way, so a
#: candidate on one of them (a duplicate of a positive) is above the other by a rounding
#: error. The sweep's intervals are therefore a little wide; what it returns is checked
#: with the exact count.
_SWEEP_TIE = 1e-12
#: at most this many of the sweep's optimal points are checked with the exact count
_SWEEP_CHECKS = 64
#: ... then this many middles of its best intervals wider than ``_SWEEP_SLIVER`` (in
#: case the weights mapped back reproduce none of the ties its optimum relies on)
_SWEEP_FALLBACK = 8
_SWEEP_SLIVER = 1e-9


def _sweep_maxrank(d: FloatArray, ps: IntArray, active: IntArray) -> tuple[float, int, int]:
    """J = 2 solve of ``maxrank`` by sweeping the candidates' intervals.

    Returns ``(alpha on column 0, exact count among active at it, lower bound)``: the
    bound is the sweep's best count; the count is checked at the best intervals'
    midpoints and end points (and is the bound unless rounding at a tie decides)."""
    tried, bound = _sweep_points(d, ps, active)
    for few in (tried[:1], tried):  # usually the widest interval's middle is right
        counts = _objective_many(d, ps, active, np.vstack([few, 1.0 - few]), "maxrank")
        i = int(np.argmin(counts))  # the first of the lowest
        if counts[i] <= bound:
            break
    return float(few[i]), int(counts[i]), bound


def _sweep_points(d: FloatArray, ps: IntArray, active: IntArray) -> tuple[FloatArray, int]:
    """The sweep's optimal points (``alpha`` on column 0), best first (the middles of the
    optimal intervals, widest first, then optimal single points; then, in case none
    survives rounding, the middles of the best intervals wider than ``_SWEEP_SLIVER``
    and the two ends), and its best count among ``active``: a lower bound (a candidate
    within ``_SWEEP_TIE`` of the envelope counts as tied), reached unless the optimum is
    a tie that rounding decides the other way."""
    if active.size == 0:
        return np.array([0.5]), 0
    pts, g = _envelope(d, ps)
    lo = np.full(active.size, np.inf)
    hi = np.full(active.size, -np.inf)
    step = max(1, _CHUNK_CELLS // max(1, pts.size))
    for start in range(0, active.size, step):
        rows = active[start : start + step]
        f = d[rows, 1][:, None] + pts[None, :] * (d[rows, 0] - d[rows, 1])[:, None]
        h = g[None, :] - f  # <= 0 where the candidate does not outrank
        ok = h <= _SWEEP_TIE
        has = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        last = pts.size - 1 - np.argmax(ok[:, ::-1], axis=1)
        r = np.arange(rows.size)
        # h is linear between breakpoints, so {h <= tie} is an interval whose ends are
        # found by interpolation: a candidate exactly tied with the envelope at a single
        # point keeps an interval a hair wide there, and two such intervals that meet
        # overlap (the ends of [0, 1/2] and [1/2, 1], interpolated, can land a few ulps
        # apart the wrong way and miss the optimum at 1/2)
        left = pts[first].copy()
        inner = has & (first > 0)
        if inner.any():
            ii = r[inner]
            f0 = first[inner]
            h0, h1 = h[ii, f0 - 1], h[ii, f0]  # h0 > tie >= h1
            left[inner] = np.clip(
                pts[f0 - 1] + (pts[f0] - pts[f0 - 1]) * (h0 - _SWEEP_TIE) / (h0 - h1),
                pts[f0 - 1], pts[f0])
        right = pts[last].copy()
        inner = has & (last < pts.size - 1)
        if inner.any():
            ii = r[inner]
            l0 = last[inner]
            h0, h1 = h[ii, l0], h[ii, l0 + 1]  # h0 <= tie < h1
            right[inner] = np.clip(
                pts[l0] + (pts[l0 + 1] - pts[l0]) * (_SWEEP_TIE - h0) / (h1 - h0),
                pts[l0], pts[l0 + 1])
        lo[start : start + step] = np.where(has, left, np.inf)
        hi[start : start + step] = np.where(has, right, -np.inf)
    valid = np.isfinite(lo)
    ls = np.sort(lo[valid])
    rs = np.sort(hi[valid])
    events = np.unique(np.concatenate([[0.0, 1.0], ls, rs]))
    events = events[(events >= 0) & (events <= 1)]
    mids = (events[:-1] + events[1:]) / 2 if events.size > 1 else events

    def cover(x: FloatArray) -> NDArray[np.int64]:
        return (np.searchsorted(ls, x, side="right") - np.searchsorted(rs, x, side="left")).astype(
            np.int64
        )

    cm = cover(mids)
    cp = cover(events)
    best = int(max(cm.max(initial=0), cp.max(initial=0)))
    bound = int(active.size - best)
    # the points to check, best first: the middles of the optimal intervals, widest
    # first, then the optimal event points (an optimum may be a single point)
    widths = np.diff(events) if events.size > 1 else np.zeros(mids.size)
    tried = np.concatenate([mids[cm == best][np.argsort(-widths[cm == best], kind="stable")],
                            events[cp == best]])[:_SWEEP_CHECKS]
    # in case the weights mapped back reproduce none of these ties: the middles of the
    # best intervals that are more than a rounding sliver wide (no tie inside), then the
    # ends of the segment (one weight only: no rounding)
    wide = np.flatnonzero(widths > _SWEEP_SLIVER)
    wide = wide[np.lexsort((-widths[wide], -cm[wide]))][:_SWEEP_FALLBACK]
    return np.concatenate([tried, mids[wide], [0.0, 1.0]]), bound


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


#: the J = 2 MRR sweep adds up changes of reciprocal ranks in floating point: values
#: this close to its best count as equal (far above the rounding of the sums; MRRs of
#: different rankings closer than this are not told apart)
_SWEEP_MRR_SLACK = 1e-12


def _sweep_pairs(
    d: FloatArray,
    pos: IntArray,
    cand: IntArray,
    objective: Objective,
    deadline: float | None = None,
) -> tuple[FloatArray, float] | None:
    """J = 2 solve of ``meanrank`` / ``mrr`` by sweeping the crossings of the pairs.

    A candidate ``v`` ranks before a positive ``s`` on an interval of ``alpha`` (the
    weight on column 0) that ends where their lines cross. Each such interval is
    shrunk by ``_SWEEP_TIE`` (``v`` that close to ``s`` counts as tied, and a tie does
    not outrank), its ends are sorted, and one pass gives the objective at every end
    and between consecutive ends: ``O(P log P)`` for the ``P <= |S| |C|`` pairs that
    cross, instead of one evaluation of all items per crossing.

    Parameters
    ----------
    d
        (n, 2) normalised dissimilarities.
    pos, cand
        Rows of ``S`` and of the candidates.
    objective
        ``"meanrank"`` or ``"mrr"``.
    deadline
        ``time.monotonic()`` after which the sweep gives up.

    Returns
    -------
    tuple of ndarray and float, or None
        The points to try (``alpha`` on column 0), best first: the middle of the
        interval at the centre of each optimal run, widest run first (a point inside
        an interval is no tie, so rounding cannot decide it the other way), then the
        optimal ends themselves (an optimum can be a single tie point), then the
        middles of the best intervals wider than ``_SWEEP_SLIVER`` and the two ends of
        the segment (if no optimal point survives rounding); and the sweep's best value
        (negated MRR for ``mrr``), a bound: near-ties count as ties, so no weights do
        better. ``None`` if ``deadline`` passed first.
    """
    p, tie = pos.size, _SWEEP_TIE
    b_s, m_s = d[pos, 1], d[pos, 0] - d[pos, 1]
    b_v, m_v = d[cand, 1], d[cand, 0] - d[cand, 1]
    always = np.zeros(p, dtype=np.int64)
    n_left = np.zeros(p, dtype=np.int64)
    ends: list[FloatArray] = []
    owner: list[IntArray] = []
    is_left: list[NDArray[np.bool_]] = []
    for k in range(p):
        if _expired(deadline):
            return None
        c = b_v - b_s[k]  # v before s at alpha iff c + alpha e < -tie
        e = m_v - m_s[k]
        up, down = e > 0, e < 0
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            x = (-tie - c) / np.where(e != 0, e, 1.0)
        # e > 0: before on [0, x); e < 0: before on (x, 1]; e = 0: everywhere or nowhere
        always[k] = (np.count_nonzero((e == 0) & (c < -tie)) + np.count_nonzero(up & (x > 1))
                     + np.count_nonzero(down & (x < 0)))
        left = up & (x > 0) & (x <= 1)
        right = down & (x >= 0) & (x < 1)
        n_left[k] = np.count_nonzero(left)
        ends.extend([x[left], x[right]])
        owner.append(np.full(int(n_left[k]) + int(np.count_nonzero(right)), k, dtype=np.intp))
        is_left.extend([np.ones(int(n_left[k]), dtype=bool),
                        np.zeros(int(np.count_nonzero(right)), dtype=bool)])
    ex = np.concatenate(ends) if ends else np.zeros(0)
    es = np.concatenate(owner) if owner else np.zeros(0, dtype=np.intp)
    el = np.concatenate(is_left) if is_left else np.zeros(0, dtype=bool)
    u = np.unique(np.concatenate([[0.0, 1.0], ex]))
    g = u.size
    at = np.searchsorted(u, ex)
    # states in order: 2k is the point u[k], 2k + 1 the open interval (u[k], u[k + 1]); a
    # "left" pair stops being before s at its end (a tie there), a "right" one starts
    # after its end
    state = np.where(el, 2 * at, 2 * at + 1)
    delta = np.where(el, -1, 1).astype(np.int64)
    n_states = 2 * g - 1
    r0 = 1 + always + n_left  # the ranks at alpha = 0
    if objective == "meanrank":
        moved = np.bincount(state, weights=delta, minlength=n_states)
        vals = (float(r0.sum()) + np.cumsum(moved)) / p  # integer sums: exact
        slack = 0.0
    else:
        steps = np.zeros(n_states)
        if es.size:
            # the change of 1 / rank(s) at each end, in sweep order within each s
            order = np.lexsort((state, es))
            so, dl = es[order], delta[order]
            csum = np.cumsum(dl)
            first = np.flatnonzero(np.r_[True, so[1:] != so[:-1]])
            base = np.repeat(csum[first] - dl[first], np.diff(np.r_[first, so.size]))
            after = r0[so] + (csum - base)
            steps = np.bincount(state[order], weights=1.0 / after - 1.0 / (after - dl),
                                minlength=n_states).astype(np.float64)
        vals = -(float((1.0 / r0).sum()) + np.cumsum(steps)) / p
        slack = _SWEEP_MRR_SLACK
    best = float(vals.min())
    opt = vals <= best + slack
    edge = np.diff(np.concatenate([[0], opt.astype(np.int8), [0]]))
    first_s = np.flatnonzero(edge == 1)
    last_s = np.flatnonzero(edge == -1) - 1
    lo_x = u[first_s // 2]
    hi_x = np.where(last_s % 2 == 0, u[last_s // 2], u[np.minimum(last_s // 2 + 1, g - 1)])
    # the interval (state 2k + 1) of each run at its centre, if the run has one
    k_lo, k_hi = first_s // 2, (last_s - 1) // 2
    has = k_lo <= k_hi
    centre = np.clip(np.searchsorted(u, (lo_x + hi_x) / 2, side="right") - 1, k_lo, k_hi)
    widest = np.argsort(-(hi_x - lo_x)[has], kind="stable")
    middles = (u[:-1] + u[1:]) / 2
    inner = middles[centre[has][widest]]
    points = u[np.flatnonzero(opt[0::2])]
    tried = np.concatenate([inner, points])[:_SWEEP_CHECKS]
    # in case the weights mapped back reproduce none of these ties: the middles of the
    # best intervals more than a rounding sliver wide, then the ends of the segment
    widths = np.diff(u)
    wide = np.flatnonzero(widths > _SWEEP_SLIVER)
    wide = wide[np.lexsort((-widths[wide], vals[1::2][wide]))][:_SWEEP_FALLBACK]
    return np.concatenate([tried, middles[wide], [0.0, 1.0]]), best


def _reported(prob: _Problem, w: FloatArray, objective: Objective) -> float:
    """The objective of weights ``w`` (original units) as :func:`objective_value` computes
    it: on the dissimilarities as given, one weight vector per product (a product with
    several columns can round an exact tie the other way)."""
    return float(_objective_many(prob.raw, prob.positives, prob.candidates, _as_given(w, prob),
                                 objective)[0])


def _original_values(prob: _Problem, alphas_n: FloatArray, objective: Objective) -> FloatArray:
    """:func:`_reported` of normalised weights (columns of ``alphas_n``) once mapped back."""
    return np.array([_reported(prob, _to_original(prob, a), objective) for a in alphas_n.T])


#: near a tie point of the J = 2 sweep, items this close (normalised units) are taken
#: for tied when their crossing is recomputed in the original units
_SNAP_NEAR = 1e-9
#: ... at so many of the sweep's points, and for so many crossings at most
_SNAP_POINTS = 8
_SNAP_MAX = 16


def _sweep_choice(
    prob: _Problem,
    tried: FloatArray,
    target: float,
    objective: Objective,
    deadline: float | None = None,
) -> FloatArray:
    """Weights (original units) for the J = 2 sweep's points ``tried`` (``alpha`` on
    normalised column 0, best first): those of the first point that scores ``target``
    as reported (:func:`_reported`).

    A point where the sweep's optimum is a single tie is a crossing computed in
    normalised units; mapped back, the tie can be decided the other way. If no point
    reaches ``target``, the crossings of the items nearly tied at the first points are
    computed again in the original units (exact when the tie is, e.g., at 1/2 on
    integer data), and the weights there and a few ulps on either side are tried,
    until ``deadline``. The best weights seen are returned; the caller reports their
    value, and calls them optimal only if it is ``target``.
    """
    best_w, best_v = _to_original(prob, np.array([tried[0], 1.0 - tried[0]])), np.inf
    for x in tried:
        w = _to_original(prob, np.array([x, 1.0 - x]))
        v = _reported(prob, w, objective)
        if v < best_v:
            best_w, best_v = w, v
        if v <= target + 1e-9:
            return w
    c0, c1 = (int(c) for c in prob.cols)
    raw, dn, pos, cand = prob.raw, prob.d, prob.positives, prob.candidates
    pairs: list[FloatArray] = []
    for x in tried[:_SNAP_POINTS]:
        f = dn @ np.array([x, 1.0 - x])
        tops = pos[f[pos] >= f[pos].max() - _SNAP_NEAR] if objective == "maxrank" else pos
        for s in tops:
            near = cand[np.abs(f[cand] - f[s]) <= _SNAP_NEAR]
            a0, a1 = raw[near, c0] - raw[s, c0], raw[near, c1] - raw[s, c1]
            ok = a1 != a0
            # a0 w0 + a1 w1 = 0 with w0 + w1 = 1, each weight rounded on its own
            pairs.append(np.column_stack([a1[ok] / (a1[ok] - a0[ok]),
                                          a0[ok] / (a0[ok] - a1[ok])]))
    at = np.unique(np.vstack(pairs), axis=0) if pairs else np.zeros((0, 2))
    at = at[np.all((at >= 0) & (at <= 1), axis=1)][:_SNAP_MAX]
    for w01 in at:
        # there, and each weight moved by a few ulps: each probe rounds the ties its
        # own way
        for k, which in [(0, 0), *((k, i) for k in (-1, 1, -2, 2, -3, 3, -4, 4)
                                     for i in (0, 1))]:
            if _expired(deadline):
                return best_w
            w2 = w01.copy()
            w2[which] += k * np.spacing(w2[which])
            if w2.min() < 0 or w2.sum() <= 0:
                continue
            w = np.zeros(prob.n_cols)
            w[c0], w[c1] = w2
            v = _reported(prob, w, objective)
            if v < best_v:
                best_w, best_v = w, v
            if v <= target + 1e-9:
                return best_w
    return best_w


# --------------------------------------------------------------------------- heuristics


def _candidate_alphas(
    j: int, rng: np.random.Generator, k: int, starts: list[FloatArray]
) -> FloatArray:
    cols = [np.eye(j), np.full((j, 1), 1.0 / j)]
    cols.extend(s.reshape(j, 1) for s in starts)
    if k > 0:
        cols.append(rng.dirichlet(np.full(j, 0.5), size=k).T)
        cols.append(rng.dirichlet(np.full(j, 2.0), size=k).T)
    return np.hstack(cols)


def _evaluate(
    d: FloatArray,
    pos: IntArray,
    cand: IntArray,
    alphas: FloatArray,
    objective: Objective,
    deadline: float | None,
    first: int = 0,
) -> FloatArray:
    """``_objective_many`` of each column of ``alphas``; with a ``deadline``, the columns
    after the first ``first`` in chunks, those left when it passed ``inf``."""
    if deadline is None:
        return _objective_many(d, pos, cand, alphas, objective)
    k = alphas.shape[1]
    out = np.full(k, np.inf)
    if first:
        out[:first] = _objective_many(d, pos, cand, alphas[:, :first], objective)
    for start in range(first, k, _EVAL_CHUNK):
        if _expired(deadline):
            break
        out[start : start + _EVAL_CHUNK] = _objective_many(
            d, pos, cand, alphas[:, start : start + _EVAL_CHUNK], objective)
    return out


#: weight vectors the heuristic evaluates between two looks at its deadline
_EVAL_CHUNK = 16


def _heuristic(
    d: FloatArray,
    pos: IntArray,
    cand: IntArray,
    objective: Objective,
    rng: np.random.Generator,
    starts: list[FloatArray],
    budget_cells: float = 2e8,
    deadline: float | None = None,
) -> tuple[FloatArray, float]:
    """Best of the simplex vertices, the centre, given starts and random samples,
    then a few rounds of pairwise weight moves.

    The vertices, the centre and the starts are always evaluated; the samples and the
    moves stop at ``deadline`` (``time.monotonic()`` seconds; ``None``: no limit).
    """
    j = d.shape[1]
    k = int(min(128, max(0, budget_cells / max(1, d.shape[0] * j) / 2)))
    alphas = _candidate_alphas(j, rng, k, starts)
    vals = _evaluate(d, pos, cand, alphas, objective, deadline, first=j + 1 + len(starts))
    i = int(np.argmin(vals))
    best_a, best_v = alphas[:, i].copy(), float(vals[i])
    if j > 1:
        for step in (0.5, 0.25, 0.1, 0.05, 0.02):
            if _expired(deadline):
                break
            moves = []
            for src in range(j):
                if best_a[src] <= 0:
                    continue
                delta = min(step, best_a[src])
                for dst in range(j):
                    if dst != src:
                        a = best_a.copy()
                        a[src] -= delta
                        a[dst] += delta
                        moves.append(a)
            if not moves:
                continue
            cand_a = np.array(moves).T
            if cand_a.shape[1] > 4 * k + 64:
                cand_a = cand_a[:, rng.choice(cand_a.shape[1], 4 * k + 64, replace=False)]
            vals = _evaluate(d, pos, cand, cand_a, objective, deadline)
            i = int(np.argmin(vals))
            if vals[i] < best_v:
                best_a, best_v = cand_a[:, i].copy(), float(vals[i])
    return best_a, best_v


def _line_search(
    d: FloatArray,
    pos: IntArray,
    active: IntArray,
    alpha: FloatArray,
    value: float,
    rng: np.random.Generator,
    deadline: float | None,
    restarts: int = 0,
) -> tuple[FloatArray, float]:
    """Improve ``maxrank`` weights by exact line searches, then perturbed restarts.

    A segment ``[a, b]`` of the simplex is a J = 2 problem on the columns
    ``d @ a`` and ``d @ b``, which the breakpoint sweep solves exactly. From the
    incumbent ``a`` the targets ``b`` are the simplex vertices, ``a`` with one
    component dropped, and a few random points; a strictly better point is
    taken at once, until a full round brings nothing (a local optimum along
    these directions). Then, while ``deadline`` allows and up to ``restarts``
    times, the search restarts from the best point mixed 30 % with a random one.
    ``value`` is the count among ``active`` at ``alpha``.
    """
    j = d.shape[1]
    rows = np.concatenate([pos, active])
    dm = d[rows]
    p_idx = np.arange(pos.size, dtype=np.intp)
    c_idx = np.arange(pos.size, rows.size, dtype=np.intp)

    def expired() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def descend(a: FloatArray, v: float) -> tuple[FloatArray, float]:
        fa = dm @ a
        improved = True
        while improved and v > 0 and not expired():
            improved = False
            targets = [np.eye(j)[k] for k in rng.permutation(j)]
            for k in rng.permutation(j):
                if 0 < a[k] < 1:
                    b = a.copy()
                    b[k] = 0.0
                    targets.append(b / b.sum())
            targets.extend(rng.dirichlet(np.full(j, 0.5), size=4))
            for b in targets:
                if expired():
                    break
                d2 = np.column_stack([fa, dm @ b])
                pr2 = _prune_maxrank(d2, p_idx, c_idx)
                lam, cnt, _ = _sweep_maxrank(d2, pr2.pos_rows, pr2.active)
                if pr2.n_fixed + cnt < v:
                    new = lam * a + (1.0 - lam) * b
                    val = float(_objective_many(d, pos, active, new[:, None], "maxrank")[0])
                    if val < v:
                        a, v, fa, improved = new, val, dm @ new, True
        return a, v

    best_a, best_v = descend(alpha, value)
    for _ in range(restarts):
        if best_v <= 0 or expired():
            break
        a0 = 0.7 * best_a + 0.3 * rng.dirichlet(np.full(j, 0.5))
        v0 = float(_objective_many(d, pos, active, a0[:, None], "maxrank")[0])
        a1, v1 = descend(a0, v0)
        if v1 < best_v:
            best_a, best_v = a1, v1
    return best_a, best_v


# Seconds the MILP needs beyond HiGHS's own time limit (building the matrix, the
# root LP, which HiGHS does not interrupt, and the post-solve), per non-zero, and
# of the margin LP per candidate row: measured on a loaded 2-core machine
# (J = 10: ~1.5 s over at 250,000 non-zeros; J = 100: ~14 s over at 4 million).
def _stop_margin(time_limit: float) -> float:
    """Seconds before the limit at which line searches stop (one sweep can overrun)."""
    return 0.1 + 0.02 * time_limit


_MILP_OVERHEAD_PER_NNZ = 4e-6
_MILP_OVERHEAD_FIXED = 1.0
#: A program of at most this many non-zeros is small: HiGHS builds, solves and leaves
#: it in 0.01-0.04 s (forty-fifth session: the 13 such programs of two fusion profiles'
#: replays, J = 6, 82-393 examples), so its fixed overhead is taken as
#: ``_MILP_OVERHEAD_SMALL``. With the fixed second above, no solve under a limit below
#: about 5.5 s started HiGHS: each of a fusion profile's 1 s solves ran line searches to
#: its limit and none was proven optimal, where HiGHS proved these optimal in 0.04 s.
_SMALL_MILP_NNZ = 5_000
_MILP_OVERHEAD_SMALL = 0.05
_MILP_SHARE = 0.9
#: The MILP is started only with at least this many times its overhead estimate left
#: (at 10 s for J = 10, N = 40,000 HiGHS's root LP did not finish on a loaded machine).
_MILP_MIN_RATIO = 4.0
_POLISH_PER_ROW = 5e-5


# --------------------------------------------------------------------------- MILPs


@dataclass
class _MilpOut:
    alpha: FloatArray | None
    x: FloatArray | None
    bound: float
    optimal: bool
    message: str


def _run_milp(
    c: FloatArray,
    a: sp.csr_matrix,
    lb: FloatArray,
    ub: FloatArray,
    bounds: Bounds,
    integrality: FloatArray,
    time_limit: float | None,
    j: int,
) -> _MilpOut:
    options: dict[str, Any] = {"presolve": True}
    if time_limit is not None:
        options["time_limit"] = max(0.05, float(time_limit))
    res = milp(
        c,
        integrality=integrality,
        bounds=bounds,
        constraints=LinearConstraint(a, lb, ub),
        options=options,
    )
    bound = getattr(res, "mip_dual_bound", None)
    bound_f = float(bound) if bound is not None and np.isfinite(bound) else -np.inf
    if res.x is None:
        return _MilpOut(None, None, bound_f, False, str(res.message))
    x = np.asarray(res.x, dtype=np.float64)
    alpha = np.clip(x[:j], 0.0, None)
    alpha = alpha / alpha.sum() if alpha.sum() > 0 else np.full(j, 1.0 / j)
    if res.status == 0:
        bound_f = float(res.fun)
    return _MilpOut(alpha, x, bound_f, res.status == 0, str(res.message))


def _milp_maxrank(
    d: FloatArray, ps: IntArray, active: IntArray, cutoff: float | None, time_limit: float | None
) -> _MilpOut:
    j, p, m = d.shape[1], ps.size, active.size
    smax = d[ps].max(axis=0)
    big_m = np.max(smax[None, :] - d[active], axis=1)
    n_var = j + 1 + m
    c = np.concatenate([np.zeros(j + 1), np.ones(m)])
    # rows: sum alpha = 1 | S rows | candidate rows | cutoff
    ds = d[ps]
    rows_s = sp.hstack([sp.csr_matrix(ds), sp.csr_matrix(-np.ones((p, 1))), sp.csr_matrix((p, m))])
    rows_v = sp.hstack(
        [sp.csr_matrix(-d[active]), sp.csr_matrix(np.ones((m, 1))), sp.diags(-big_m, format="csr")]
    )
    row_sum = sp.csr_matrix(np.concatenate([np.ones(j), np.zeros(1 + m)])[None, :])
    blocks = [row_sum, rows_s, rows_v]
    lb = [np.ones(1), np.full(p, -np.inf), np.full(m, -np.inf)]
    ub = [np.ones(1), np.zeros(p), np.zeros(m)]
    if cutoff is not None and np.isfinite(cutoff):
        blocks.append(sp.csr_matrix(np.concatenate([np.zeros(j + 1), np.ones(m)])[None, :]))
        lb.append(np.full(1, -np.inf))
        ub.append(np.full(1, float(cutoff)))
    a = sp.vstack(blocks, format="csr")
    lo = np.zeros(j + 1 + m)  # columns are rescaled to [0, 1], so is t
    hi = np.ones(j + 1 + m)
    integrality = np.concatenate([np.zeros(j + 1), np.ones(m)])
    del n_var
    return _run_milp(
        c, a, np.concatenate(lb), np.concatenate(ub), Bounds(lo, hi), integrality, time_limit, j
    )


def _pairs_reserve(
    d: FloatArray,
    pos: IntArray,
    cand: IntArray,
    objective: Objective,
    cutoff_rank: int,
    deadline: float | None,
) -> float | None:
    """Seconds the ``meanrank`` / ``mrr`` MILP needs beyond HiGHS's own limit (building
    its matrix, the root LP HiGHS does not interrupt, the polish LP after it), from
    its size counted before it is built (one pass over the pairs, no matrix).

    Returns ``None`` if ``deadline`` passed first.
    """
    j = d.shape[1]
    dc = d[cand]
    nnz, n_y = j, 0
    for s in pos:
        if _expired(deadline):
            return None
        diff = d[s] - dc
        always = diff.min(axis=1) > 0
        mixed = int(np.count_nonzero((diff.max(axis=1) > 0) & ~always))
        n_y += mixed
        nnz += mixed * (j + 1)  # its row: the J differences and -M y
        if objective == "mrr":  # its rank indicators: one row per k, every free pair in it
            nnz += max(0, cutoff_rank - int(np.count_nonzero(always))) * (mixed + 1)
    return float(_milp_overhead(nnz) + _MILP_OVERHEAD_PER_NNZ * nnz + _POLISH_PER_ROW * n_y)


def _milp_overhead(nnz: int) -> float:
    """The fixed part of a MILP's overhead: small for a small program (see
    ``_SMALL_MILP_NNZ``), else the second measured for large ones."""
    return _MILP_OVERHEAD_SMALL if nnz <= _SMALL_MILP_NNZ else _MILP_OVERHEAD_FIXED


def _milp_pairs(
    d: FloatArray,
    pos: IntArray,
    cand: IntArray,
    objective: Objective,
    cutoff_rank: int,
    time_limit: float | None,
    reserve: float = 0.0,
) -> tuple[_MilpOut, int, FloatArray]:
    """MILP for ``meanrank`` / ``mrr``: a binary per (s, v) pair that can go either way.

    ``time_limit`` is what is left of the call; HiGHS gets 90 % of it less ``reserve``
    (from :func:`_pairs_reserve`; the caller decided the MILP is worth starting).
    Returns the solve, the number of (s, v) pairs fixed as "v before s", and the
    difference rows ``d_s - d_v`` of the free pairs (in variable order).
    """
    j, p = d.shape[1], pos.size
    diff = d[pos][:, None, :] - d[cand][None, :, :]  # (p, m, J): f_s - f_v per vertex
    hi_ = diff.max(axis=2)
    lo_ = diff.min(axis=2)
    fixed = (lo_ > 0).sum(axis=1)  # v strictly dominates s: always before s
    mixed = (hi_ > 0) & ~(lo_ > 0)
    s_idx, v_idx = nonzero_2d(mixed)
    n_y = s_idx.size
    big = hi_[s_idx, v_idx]
    rows: list[sp.spmatrix] = []
    lbs: list[FloatArray] = []
    ubs: list[FloatArray] = []
    # y rows: (d_s - d_v) . alpha - M y <= 0
    coef = diff[s_idx, v_idx, :]
    n_w = 0
    ks: FloatArray = np.zeros(0)
    w_s: IntArray = np.zeros(0, dtype=np.intp)
    if objective == "mrr":
        kk = np.arange(1, cutoff_rank + 1, dtype=np.float64)
        ck = 1.0 / kk - 1.0 / (kk + 1.0)
        pairs = [(s, k) for s in range(p) for k in range(cutoff_rank) if fixed[s] <= k]
        n_w = len(pairs)
        w_s = np.array([s for s, _ in pairs], dtype=np.intp)
        ks = np.array([k for _, k in pairs], dtype=np.float64)  # rank <= k + 1
        c = np.concatenate([np.zeros(j + n_y), -ck[ks.astype(np.intp)]])
    else:
        c = np.concatenate([np.zeros(j), np.ones(n_y) / p, np.zeros(0)])
    n_var = j + n_y + n_w
    rows.append(sp.csr_matrix(np.concatenate([np.ones(j), np.zeros(n_y + n_w)])[None, :]))
    lbs.append(np.ones(1))
    ubs.append(np.ones(1))
    if n_y:
        left = sp.csr_matrix(coef)
        ymat = sp.diags(-big, format="csr")
        rows.append(sp.hstack([left, ymat, sp.csr_matrix((n_y, n_w))], format="csr"))
        lbs.append(np.full(n_y, -np.inf))
        ubs.append(np.zeros(n_y))
    if n_w:
        # sum_{v} y_{s v} + m_s w_{s k} <= k - fixed_s + m_s   (rank <= k + 1 when w = 1)
        m_s = np.bincount(s_idx, minlength=p).astype(np.float64)
        y_rows = sp.csr_matrix(
            (np.ones(n_y), (s_idx, np.arange(n_y))), shape=(p, n_y)
        )[w_s]
        w_part = sp.diags(m_s[w_s], format="csr")
        rows.append(sp.hstack([sp.csr_matrix((n_w, j)), y_rows, w_part], format="csr"))
        lbs.append(np.full(n_w, -np.inf))
        ubs.append(ks - fixed[w_s] + m_s[w_s])
    a = sp.vstack(rows, format="csr")
    lo = np.zeros(n_var)
    hi = np.ones(n_var)
    integrality = np.concatenate([np.zeros(j), np.ones(n_y + n_w)])
    # as for maxrank: HiGHS gets what is left minus the work it does not interrupt
    milp_time = None if time_limit is None else _MILP_SHARE * (time_limit - reserve)
    out = _run_milp(
        c, a, np.concatenate(lbs), np.concatenate(ubs), Bounds(lo, hi), integrality, milp_time, j
    )
    return out, int(fixed.sum()), np.asarray(coef, dtype=np.float64)


def _polish_pairs(diff: FloatArray, alpha: FloatArray, cap: float = 1e-6) -> FloatArray:
    """Weights keeping ``diff @ alpha <= -cap`` for every row (s before v), if possible."""
    if diff.shape[0] == 0:
        return alpha
    j = diff.shape[1]
    res = linprog(
        np.concatenate([np.zeros(j), [-1.0]]),
        A_ub=np.hstack([diff, np.ones((diff.shape[0], 1))]),
        b_ub=np.zeros(diff.shape[0]),
        A_eq=np.concatenate([np.ones(j), [0.0]])[None, :],
        b_eq=[1.0],
        bounds=[(0, 1)] * j + [(None, cap)],
        method="highs",
    )
    if res.status != 0 or res.x is None or res.x[-1] < 0:
        return alpha
    out = np.clip(np.asarray(res.x[:j], dtype=np.float64), 0, None)
    return np.asarray(out / out.sum(), dtype=np.float64)


def _polish_maxrank(
    d: FloatArray, ps: IntArray, keep_below: IntArray, alpha: FloatArray, cap: float = 1e-6
) -> FloatArray:
    """Weights keeping every row of ``keep_below`` behind the worst of S by ``cap``, if possible.

    HiGHS's feasibility tolerance can leave a candidate a hair in front of the
    worst positive; this LP restores a small strict margin. The margin is capped
    on purpose: the largest margin would push the nearest unlabelled item, often
    an unknown positive, away from S (measured on the RDPG simulation).
    """
    if keep_below.size == 0:
        return alpha
    j, p, m = d.shape[1], ps.size, keep_below.size
    # variables: alpha (j), t, delta; maximise delta
    c = np.concatenate([np.zeros(j + 1), [-1.0]])
    a_s = np.hstack([d[ps], -np.ones((p, 1)), np.zeros((p, 1))])
    a_v = np.hstack([-d[keep_below], np.ones((m, 1)), np.ones((m, 1))])
    res = linprog(
        c,
        A_ub=np.vstack([a_s, a_v]),
        b_ub=np.zeros(p + m),
        A_eq=np.concatenate([np.ones(j), [0.0, 0.0]])[None, :],
        b_eq=[1.0],
        bounds=[(0, 1)] * j + [(None, None), (None, cap)],
        method="highs",
    )
    if res.status != 0 or res.x is None or res.x[-1] < 0:
        return alpha
    out = np.clip(np.asarray(res.x[:j], dtype=np.float64), 0, None)
    return np.asarray(out / out.sum(), dtype=np.float64)


# --------------------------------------------------------------------------- public solver


@dataclass(frozen=True)
class FusionResult:
    """What :func:`solve_weights` found.

    Attributes
    ----------
    weights
        ``J`` weights on the original dissimilarities, summing to one; rank by
        ``dissimilarities @ weights``.
    objective
        Exact objective value at ``weights``: number of candidates before the
        worst member of ``S`` (``maxrank``), mean rank of ``S`` (``meanrank``)
        or mean reciprocal rank of ``S`` (``mrr``).
    bound
        Proven bound on the optimum (lower for ``maxrank``/``meanrank``; for
        ``mrr`` an upper bound on the MRR: the truncated program's bound plus
        ``1 / (mrr_cutoff + 1)``, what the ranks beyond the cutoff can add), or nan if
        unknown. Weights reaching it are optimal (for ``mrr`` whatever the cutoff).
    gap
        Relative gap between ``objective`` and ``bound``, ``|objective - bound|`` over
        the larger of the two in magnitude, in [0, 1] (0 when proven optimal).
    optimal
        Whether optimality is proven.
    method
        ``"sweep"`` (J = 2; optimal unless the optimum is a single tie point that
        no weights reproduce once rounded), ``"milp"``, ``"milp+search"`` (the
        MILP's incumbent improved by line searches after the time limit stopped
        it), ``"heuristic"`` (sampling and line searches; no better MILP
        incumbent, the MILP not started or the J = 2 sweep stopped for lack of
        time) or ``"trivial"``.
    seconds
        Wall time of the solve.
    n_candidates, n_removed, n_fixed, n_active
        Candidates in all, removed as dominated, fixed as always outranking, and
        passed to the solver.
    """

    weights: FloatArray
    objective: float
    bound: float
    gap: float
    optimal: bool
    method: str
    seconds: float
    n_candidates: int
    n_removed: int = 0
    n_fixed: int = 0
    n_active: int = 0
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _huge(prob: _Problem) -> bool:
    """Whether a column's range is near the float maximum (then the weights, inversely
    proportional to the ranges, are mapped with the ranges in ratio, without overflow)."""
    return bool(prob.scale.size and prob.scale.max() > 1e300)


def _to_original(prob: _Problem, alpha_n: FloatArray) -> FloatArray:
    w = np.zeros(prob.n_cols, dtype=np.float64)
    if prob.cols.size == 0:
        return np.full(prob.n_cols, 1.0 / prob.n_cols)
    if _huge(prob):
        with np.errstate(under="ignore"):
            w[prob.cols] = alpha_n * (prob.scale.min() / prob.scale)
    else:
        w[prob.cols] = alpha_n / prob.scale
    total = w.sum()
    return w / total if total > 0 else np.full(prob.n_cols, 1.0 / prob.n_cols)


def _relative_gap(value: float, bound: float) -> float:
    """``|value - bound|`` over the larger of the two in magnitude: in [0, 1] for every
    objective (MRR is stored negated; relative to the objective alone its gap could
    exceed 1). NaN without a finite bound.

    >>> _relative_gap(3.0, 1.0), _relative_gap(-0.25, -1.0)  # maxrank 3 >= 1; MRR 0.25 <= 1
    (0.6666666666666666, 0.75)
    """
    if not np.isfinite(bound):
        return float("nan")
    if value == bound:
        return 0.0
    return abs(value - bound) / max(abs(value), abs(bound), 1e-12)


def _as_given(w: FloatArray, prob: _Problem) -> FloatArray:
    """Weights ``w`` as :func:`objective_value` uses them (checked and normalised again,
    which can move the last bit), as a column."""
    return _check_weights(w, prob.n_cols)[:, None]


def _to_normalised(prob: _Problem, w: FloatArray) -> FloatArray:
    if _huge(prob):
        with np.errstate(under="ignore"):
            a = w[prob.cols] * (prob.scale / prob.scale.max())
    else:
        a = w[prob.cols] * prob.scale
    return a / a.sum() if a.sum() > 0 else np.full(prob.cols.size, 1.0 / max(1, prob.cols.size))


def solve_weights(
    dissimilarities: ArrayLike,
    positives: ArrayLike,
    *,
    query: int | None = None,
    objective: str = "maxrank",
    time_limit: float | None = 60.0,
    method: str = "auto",
    start: ArrayLike | None = None,
    mrr_cutoff: int = 50,
    seed: int | None = 0,
    runner: Callable[[Callable[[], Any], float], Any] | None = None,
) -> FusionResult:
    """Learn weights for a linear combination of dissimilarities from a few positives.

    Parameters
    ----------
    dissimilarities
        (n, J) array, ``d^j(v*, v_i)`` for every item ``i``; finite.
    positives
        Row indices of ``S``, the items known to be similar to ``v*``.
    query
        Row of ``v*`` itself, if ``dissimilarities`` has one (excluded).
    objective
        ``"maxrank"`` (the paper's problem (1)), ``"meanrank"`` or ``"mrr"``.
    time_limit
        Seconds for the whole call, set-up and pruning included (``None``: no
        limit). When it is hit the best weights found are returned with the
        gap. HiGHS gets what is left after the heuristic minus an estimate of
        the work it does not interrupt (building the matrix, the root LP) and
        of the margin LP after it, less 10 % slack (HiGHS overruns more on a
        loaded machine); if that leaves less than four times the estimate, the
        MILP is not started, the time goes to line searches and the bound is
        the trivial one (the count of candidates that always outrank). With a
        ``runner`` the call returns at the limit even if HiGHS overruns. For
        ``meanrank`` / ``mrr`` the same estimate is made from a count of the
        program's pairs before it is built, the heuristic gets a tenth of the
        limit when the MILP follows and all of it otherwise, and the J = 2 sweep
        stops at the limit too (the bound is then unknown).
    method
        ``"auto"`` (sweep for J = 2; otherwise a sampled heuristic and exact
        line searches along segments of the simplex (each a J = 2 sweep) for
        up to a tenth of the limit, then the MILP, keeping the better, then
        line searches from the MILP's incumbent with any time left),
        ``"milp"`` (the MILP alone, after pruning) or ``"sweep"`` (J = 2 only).
    start
        Weights of a previous solution (e.g. before a new positive arrived),
        used as a starting incumbent.
    mrr_cutoff
        Ranks beyond this contribute nothing to the ``mrr`` program.
    seed
        Seed of the random weights the heuristic tries.
    runner
        How the ``maxrank`` MILP step (HiGHS, then the margin LP) is run under a
        time limit: called as ``runner(job, deadline)``, it returns ``job()``'s
        result, or ``None`` if it gave up at ``deadline`` (``time.monotonic()``
        seconds); then the heuristic's weights are returned. ``None`` (the
        default; this module starts no threads): run ``job`` in the calling
        thread, and the call can overrun ``time_limit`` by what HiGHS does not
        interrupt. :func:`sift.commands.nominate.run_in_thread` joins a thread
        at the deadline.

    Returns
    -------
    FusionResult

    Examples
    --------
    Candidate 2 sits between the two positives only when both
    dissimilarities are mixed:

    >>> D = [[0.2, 0.6], [0.6, 0.2], [0.1, 0.9], [0.9, 0.1], [0.5, 0.5]]
    >>> r = solve_weights(D, [0, 1])
    >>> r.objective, r.method, r.weights.round(3).tolist()
    (0.0, 'sweep', [0.5, 0.5])
    >>> D3 = [row + [0.7] for row in D]
    >>> D3[4][2] = 0.1
    >>> r3 = solve_weights(D3, [0, 1], method="milp")
    >>> r3.objective, r3.optimal
    (0.0, True)
    """
    t0 = time.monotonic()
    obj = _check_objective(objective)
    _check_method(method)
    time_limit = _check_time_limit(time_limit)
    if not _not_bool_int(mrr_cutoff) or mrr_cutoff < 1:
        raise FusionError(f"mrr_cutoff must be a positive integer, got {mrr_cutoff!r}")
    mrr_cutoff = int(mrr_cutoff)
    seed = _check_seed(seed)
    if runner is not None and not callable(runner):
        raise FusionError(f"runner must be None or a callable runner(job, deadline), "
                          f"got {runner!r}")
    prob = _problem(dissimilarities, positives, query)
    d, pos, cand = prob.d, prob.positives, prob.candidates
    j = prob.cols.size
    if method == "sweep" and j != 2:
        raise FusionError(f"method='sweep' needs exactly 2 varying dissimilarities, got {j}")
    starts: list[FloatArray] = []
    if start is not None:
        starts.append(_to_normalised(prob, _check_weights(start, prob.n_cols, "start")))
    rng = np.random.default_rng(seed)
    # every score tied: no candidate outranks a positive, the best value of any objective
    # (maxrank 0, meanrank 1, MRR 1, stored negated)
    all_ties = {"maxrank": 0.0, "meanrank": 1.0}.get(obj, -1.0)

    def finish(
        alpha_n: FloatArray | None,
        meth: str,
        bound: float,
        optimal: bool,
        *,
        weights: FloatArray | None = None,
        message: str = "",
        **kw: Any,
    ) -> FusionResult:
        w = weights if weights is not None else _to_original(prob, np.asarray(alpha_n))
        # the objective of the weights returned, on the dissimilarities as given (what
        # objective_value says of them); no informative column: every score ties
        val = _reported(prob, w, obj) if j else all_ties
        notes = [message] if message else []
        if j and prob.cols.size < prob.n_cols and val > all_ties:
            # a constant column was left out: all weight on it ties every item, which no
            # objective can beat; the solver does not return such weights (they rank
            # nothing), but it cannot call a worse value optimal
            bound = all_ties
            dropped = sorted(set(range(prob.n_cols)) - set(prob.cols.tolist()))
            notes.append(f"constant dissimilarities {dropped} left out (all weight on them "
                         f"ties every item: objective {_report(obj, all_ties)})")
        if np.isfinite(bound) and val < bound:
            if bound - val <= 1e-6 * max(1.0, abs(bound)):
                bound = val  # a solver's bound, off by its tolerance
            else:
                # weights that beat a bound disprove it: none rather than a wrong one
                bound, optimal = -np.inf, False
                notes.append("bound discarded: the weights returned beat it")
        # optimal only if these weights reach the bound (a tie the solver counted on can
        # be decided the other way by rounding, in its units or in these)
        optimal = optimal and np.isfinite(bound) and val <= bound + 1e-9
        gap = 0.0 if optimal else _relative_gap(val, bound)
        return FusionResult(
            weights=w,
            objective=_report(obj, val),
            bound=_report(obj, bound) if np.isfinite(bound) else float("nan"),
            gap=gap,
            optimal=optimal,
            method=meth,
            seconds=time.monotonic() - t0,
            n_candidates=int(cand.size),
            message="; ".join(notes),
            **kw,
        )

    if j <= 1 or cand.size == 0:
        alpha = np.full(j, 1.0 / j) if j else np.zeros(0)  # no candidates: any weights
        val = float(_objective_many(d, pos, cand, alpha[:, None], obj)[0]) if j else all_ties
        return finish(alpha, "trivial", val, True)

    def remaining() -> float | None:
        return None if time_limit is None else time_limit - (time.monotonic() - t0)

    # when the heuristics, line searches and sweeps stop: the call must end by the limit
    stop = None if time_limit is None else t0 + time_limit - _stop_margin(time_limit)

    if obj == "maxrank":
        pr = _prune_maxrank(d, pos, cand)
        kw: dict[str, Any] = {
            "n_removed": pr.n_never,
            "n_fixed": pr.n_fixed,
            "n_active": int(pr.active.size),
        }
        if pr.active.size == 0:
            # every remaining candidate is decided: any weights are optimal
            a = _polish_maxrank(d, pr.pos_rows, cand[np.all(d[cand] >= d[pr.pos_rows].max(0), 1)],
                                np.full(j, 1.0 / j))
            return finish(a, "trivial", float(pr.n_fixed), True, **kw)
        if j == 2 and method in ("auto", "sweep"):
            tried, low = _sweep_points(d, pr.pos_rows, pr.active)
            # the first point whose weights, as returned, score the sweep's bound on the
            # dissimilarities as given (at a tie, rounding decides)
            w = _sweep_choice(prob, tried, float(pr.n_fixed + low), obj, stop)
            return finish(None, "sweep", float(pr.n_fixed + low), True, weights=w, **kw)
        # the heuristic only needs the undecided candidates
        if method == "auto":
            h_a, h_v = _heuristic(d, pr.pos_rows, pr.active, obj, rng, starts, deadline=stop)
            # exact line searches: at most a tenth of the limit before the MILP
            ls_deadline = None if time_limit is None else t0 + 0.1 * time_limit
            h_a, h_v = _line_search(d, pr.pos_rows, pr.active, h_a, h_v, rng, ls_deadline)
        else:  # plain MILP: the heuristic only serves as a fallback incumbent
            h_a = starts[0] if starts else np.full(j, 1.0 / j)
            h_v = float(_objective_many(d, pr.pos_rows, pr.active, h_a[:, None], obj)[0])
        if h_v <= 0:
            return finish(h_a, "heuristic", float(pr.n_fixed), True, **kw)
        # The whole call respects time_limit: HiGHS gets what is left minus an
        # estimate of the work it does not interrupt and of what follows it.
        nnz = pr.active.size * (j + 2) + pr.pos_rows.size * (j + 1)
        reserve = (_milp_overhead(nnz) + _MILP_OVERHEAD_PER_NNZ * nnz
                   + _POLISH_PER_ROW * pr.active.size)
        left = remaining()
        # HiGHS overruns its limit more when the machine is loaded: keep 10 % slack
        milp_time = None if left is None else _MILP_SHARE * (left - reserve)
        if milp_time is not None and milp_time < max(0.5, _MILP_MIN_RATIO * reserve):
            # not worth starting HiGHS (its root LP, which it does not interrupt, would
            # take most of the time and on a loaded machine overrun it): spend the time
            # on line searches; the bound is the trivial one (the fixed count)
            if method == "auto" and stop is not None:
                h_a, h_v = _line_search(d, pr.pos_rows, pr.active, h_a, h_v, rng, stop,
                                        restarts=10_000)
            return finish(h_a, "heuristic", float(pr.n_fixed), h_v <= 0,
                          message="time limit: MILP not started", **kw)
        # An objective cutoff at the heuristic's value was tried and weakened
        # HiGHS's bound on large instances, so the heuristic is only a fallback.
        ps_rows, act_rows = pr.pos_rows, pr.active

        def job() -> tuple[_MilpOut, FloatArray | None]:
            out = _milp_maxrank(d, ps_rows, act_rows, None, milp_time)
            if out.alpha is None or out.x is None:
                return out, None
            below = act_rows[out.x[j + 1 :] < 0.5]
            return out, _polish_maxrank(d, ps_rows, below, out.alpha)

        if stop is None or runner is None:
            out, a_pol = job()
        else:
            # HiGHS does not interrupt its root LP and overruns its limit on a loaded
            # machine; a runner (e.g. a thread joined at the deadline: HiGHS releases
            # the GIL) lets the call return at the limit regardless.
            done = runner(job, stop)
            if done is None:
                return finish(h_a, "heuristic", float(pr.n_fixed), False,
                              message="time limit: MILP still running, abandoned", **kw)
            out, a_pol = done
        bound = pr.n_fixed + out.bound if np.isfinite(out.bound) else -np.inf
        if out.alpha is None or out.x is None:
            return finish(h_a, "heuristic", max(bound, float(pr.n_fixed)), False,
                          message=out.message, **kw)
        cands: list[FloatArray] = [out.alpha, h_a]
        if a_pol is not None:
            cands.insert(0, a_pol)
        # compared in the units reported: a tie can fall one way in the solver's
        # normalised units and the other in the original ones
        vals = _original_values(prob, np.column_stack(cands), obj)
        best = int(np.argmin(vals))
        alpha_best, val_best = cands[best], float(vals[best])
        meth = "heuristic" if cands[best] is h_a else "milp"
        # HiGHS's feasibility tolerance can let a near-tie count as not outranking;
        # optimality is claimed only if the exact count matches the proven bound.
        opt = out.optimal and val_best <= bound + 1e-9
        left = remaining()
        if (method == "auto" and not opt and left is not None and time_limit is not None
                and left > 2 * _stop_margin(time_limit)):
            v_act = float(_objective_many(d, pr.pos_rows, pr.active, alpha_best[:, None], obj)[0])
            a_ls, v_ls = _line_search(d, pr.pos_rows, pr.active, alpha_best, v_act, rng, stop)
            if v_ls < v_act and _original_values(prob, a_ls[:, None], obj)[0] < val_best:
                alpha_best, meth = a_ls, "milp+search"
        return finish(alpha_best, meth, bound, opt, message=out.message, **kw)

    # meanrank / mrr
    kw_p: dict[str, Any] = {"n_active": int(cand.size)}
    if j == 2 and method in ("auto", "sweep"):
        sw = _sweep_pairs(d, pos, cand, obj, stop)
        if sw is not None:
            points, best_v = sw
            return finish(None, "sweep", best_v, True,
                          weights=_sweep_choice(prob, points, best_v, obj, stop), **kw_p)
        # the limit came first: the better end of the segment or its middle (or a start)
        ends = _candidate_alphas(j, rng, 0, starts)
        return finish(ends[:, int(np.argmin(_original_values(prob, ends, obj)))], "heuristic",
                      -np.inf, False, message="time limit: sweep stopped", **kw_p)
    # Whether the MILP can start is decided before it is built (building it can take
    # longer than the limit): its overhead is estimated from a count of its pairs.
    reserve_p = _pairs_reserve(d, pos, cand, obj, mrr_cutoff, stop)

    def milp_fits(left: float | None) -> bool:
        if left is None:
            return True
        return reserve_p is not None and (
            _MILP_SHARE * (left - reserve_p) >= max(0.5, _MILP_MIN_RATIO * reserve_p))

    if method == "auto":
        # a tenth of the limit when the MILP follows, else all of it
        h_stop = stop
        if time_limit is not None and stop is not None and milp_fits(
                time_limit - (time.monotonic() - t0) - 0.1 * time_limit):
            h_stop = min(stop, t0 + 0.1 * time_limit)
        h_a, _ = _heuristic(d, pos, cand, obj, rng, starts, deadline=h_stop)
    else:
        h_a = starts[0] if starts else np.full(j, 1.0 / j)
    left = remaining()
    if not milp_fits(left):
        return finish(h_a, "heuristic", -np.inf, False, message="time limit: MILP not started",
                      **kw_p)
    out, n_fixed_pairs, diff = _milp_pairs(d, pos, cand, obj, mrr_cutoff, left,
                                           reserve_p or 0.0)
    if out.alpha is None or out.x is None:
        return finish(h_a, "heuristic", -np.inf, False, message=out.message, **kw_p)
    y = out.x[j : j + diff.shape[0]]
    a_pol = _polish_pairs(diff[y < 0.5], out.alpha)
    trio2: list[FloatArray] = [a_pol, out.alpha, h_a]
    vals = _original_values(prob, np.column_stack(trio2), obj)
    best = int(np.argmin(vals))
    if obj == "meanrank":
        bound = 1.0 + (out.bound + n_fixed_pairs / pos.size) if np.isfinite(out.bound) else -np.inf
        opt = out.optimal and float(vals[best]) <= bound + 1e-9
    else:
        # the program optimises a truncated MRR; its bound is on that
        bound = out.bound / pos.size - 1.0 / (mrr_cutoff + 1) if np.isfinite(out.bound) else -np.inf
        # the bound, the truncated program's plus what the ranks beyond the cutoff can add
        # (less than 1 / (cutoff + 1) each), bounds the exact MRR: weights that reach it
        # are optimal whatever the cutoff (as for meanrank)
        opt = out.optimal and float(vals[best]) <= bound + 1e-9
    return finish(trio2[best], "heuristic" if best == 2 else "milp", bound, opt,
                  message=out.message, **kw_p)


# --------------------------------------------------------------------------- estimators


def _fitted_matrix(est: Any, dissimilarities: ArrayLike) -> FloatArray:
    """The dissimilarities to score with a fitted estimator, as wide as those it was
    fitted on."""
    j = getattr(est, "n_columns_", None)
    if j is None:
        raise FusionError(f"this {type(est).__name__} is not fitted yet; call fit first")
    d = _as_matrix(dissimilarities)
    if d.shape[1] != j:
        raise FusionError(f"dissimilarities must have J = {j} columns (as fitted), "
                          f"got {d.shape[1]}")
    return d


class DissimilarityFusion:
    """Rank by a learned convex combination of dissimilarities (the ILP ranker).

    Parameters
    ----------
    objective
        ``"maxrank"``, ``"meanrank"`` or ``"mrr"`` (see :func:`solve_weights`).
    time_limit
        Seconds per fit, or ``None`` (no limit). A fit that reaches the limit keeps the
        best weights found so far, which can depend on the machine's speed.
    method
        ``"auto"``, ``"milp"`` or ``"sweep"``.
    seed
        Seed of the heuristic.

    Attributes
    ----------
    weights_ : ndarray of shape (J,)
        Learned weights (a copy of ``result_.weights``).
    n_columns_ : int
        ``J``, the number of dissimilarities fitted on (scored ones must match).
    result_ : FusionResult
        Full solver report.

    Examples
    --------
    >>> D = [[0.2, 0.6], [0.6, 0.2], [0.1, 0.9], [0.9, 0.1], [0.5, 0.5]]
    >>> f = DissimilarityFusion().fit(D, [0, 1])
    >>> f.weights_.tolist()
    [0.5, 0.5]
    >>> f.rank(D).tolist()  # S first (tied), then the three candidates (tied)
    [1.5, 1.5, 4.0, 4.0, 4.0]
    """

    def __init__(
        self,
        objective: str = "maxrank",
        time_limit: float | None = 60.0,
        method: str = "auto",
        seed: int | None = 0,
    ) -> None:
        _check_objective(objective)
        _check_method(method)
        self.objective = objective
        self.time_limit = _check_time_limit(time_limit)
        self.method = method
        self.seed = _check_seed(seed)

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters given to :meth:`__init__`, by name."""
        return init_params(self)

    def fit(
        self,
        dissimilarities: ArrayLike,
        positives: ArrayLike,
        *,
        query: int | None = None,
        start: ArrayLike | None = None,
    ) -> DissimilarityFusion:
        """Learn the weights from the positives ``S``."""
        self.result_ = solve_weights(
            dissimilarities,
            positives,
            query=query,
            objective=self.objective,
            time_limit=self.time_limit,
            method=self.method,
            start=start,
            seed=self.seed,
        )
        # a copy: the result is frozen, and changing one must not change the other
        self.weights_ = self.result_.weights.copy()
        self.n_columns_ = self.weights_.size
        return self

    def score(self, dissimilarities: ArrayLike) -> FloatArray:
        """Fused dissimilarity of each row (smaller ranks earlier)."""
        d = _fitted_matrix(self, dissimilarities)
        return np.asarray(d @ _check_weights(self.weights_, d.shape[1]), dtype=np.float64)

    def rank(self, dissimilarities: ArrayLike) -> FloatArray:
        """Mid-ranks of each row under the fused dissimilarity."""
        return fused_ranks(self.score(dissimilarities))


class SingletonRanker:
    """The paper's Singleton baseline: the one dissimilarity with the best objective.

    Ties between dissimilarities are broken uniformly at random with ``seed``. A
    constant dissimilarity (which ties every item) is not chosen while another one
    varies, as :func:`solve_weights` leaves it out.

    Parameters
    ----------
    objective
        ``"maxrank"``, ``"meanrank"`` or ``"mrr"``.
    seed
        Seed of the tie-break.

    Attributes
    ----------
    column_ : int
        Index of the chosen dissimilarity.
    weights_ : ndarray of shape (J,)
        One-hot weights.
    objective_ : float
        Objective value of the chosen dissimilarity.
    tied_ : list of int
        All dissimilarities that tied for best.
    n_columns_ : int
        ``J``, the number of dissimilarities fitted on (scored ones must match).

    Examples
    --------
    >>> D = [[0.2, 0.6], [0.6, 0.2], [0.1, 0.9], [0.9, 0.1], [0.5, 0.5]]
    >>> s = SingletonRanker(seed=0).fit(D, [0, 1])
    >>> s.objective_, s.tied_
    (2.0, [0, 1])
    """

    def __init__(self, objective: str = "maxrank", seed: int | None = 0) -> None:
        _check_objective(objective)
        self.objective = objective
        self.seed = _check_seed(seed)

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters given to :meth:`__init__`, by name."""
        return init_params(self)

    def fit(
        self, dissimilarities: ArrayLike, positives: ArrayLike, *, query: int | None = None
    ) -> SingletonRanker:
        """Pick the dissimilarity that alone best ranks ``S``."""
        obj = _check_objective(self.objective)
        d = _as_matrix(dissimilarities)
        prob = _problem(d, positives, query)
        vals = _objective_many(d, prob.positives, prob.candidates, np.eye(d.shape[1]), obj)
        # a constant column ties every item (no ranking, and the best value of any
        # objective): as solve_weights, leave it out while another column varies
        allowed = prob.cols if prob.cols.size else np.arange(d.shape[1], dtype=np.intp)
        tied = allowed[vals[allowed] <= vals[allowed].min()]
        rng = np.random.default_rng(_check_seed(self.seed))
        self.column_ = int(tied[int(rng.integers(tied.size))]) if tied.size > 1 else int(tied[0])
        self.tied_ = [int(t) for t in tied]
        self.objective_ = _report(obj, float(vals[self.column_]))
        self.weights_ = np.zeros(d.shape[1])
        self.weights_[self.column_] = 1.0
        self.n_columns_ = d.shape[1]
        return self

    def score(self, dissimilarities: ArrayLike) -> FloatArray:
        """The chosen dissimilarity of each row."""
        d = _fitted_matrix(self, dissimilarities)
        return np.asarray(d[:, self.column_], dtype=np.float64)

    def rank(self, dissimilarities: ArrayLike) -> FloatArray:
        """Mid-ranks of each row under the chosen dissimilarity."""
        return fused_ranks(self.score(dissimilarities))


# --------------------------------------------------------------------------- profile model

COMPONENTS: tuple[str, ...] = ("word", "char", "lsa", "rocchio", "kantor", "knn")
_FUSION_STATE_VERSION = 1
#: Bounds a state's scaling must keep: ``_solve`` floors a column's range at 1e-12 (a
#: narrower one becomes 1), and a shift or range beyond 1e100 (or a tie-break range
#: below 1e-100) can make ``(D - lo) / scale`` overflow; real ones are far inside.
_SCALE_FLOOR = 1e-12
_STATE_MAGNITUDE = 1e100
_ALPHA_SUM_TOL = 1e-6


def _check_scaling(alpha: FloatArray | None, lo: FloatArray, scale: FloatArray,
                   tie: FloatArray, j: int) -> None:
    """Refuse a :class:`FusionModel` state whose weights or scaling would give non-finite
    or meaningless scores (:class:`StateError` naming the field)."""
    sizes = (j,) if alpha is not None else (0, j)
    for name, arr in (("lo", lo), ("scale", scale)):
        if arr.size not in sizes:
            want = f"{j}" if alpha is not None else f"0 or {j}"
            raise StateError(f"fusion.{name}: must have {want} entries (one per component), "
                             f"got {arr.size}")
    if lo.size and np.any(np.abs(lo) > _STATE_MAGNITUDE):
        raise StateError(f"fusion.lo: shifts must be at most {_STATE_MAGNITUDE:g} in magnitude, "
                         f"got {lo.tolist()}")
    if scale.size and not np.all((scale >= _SCALE_FLOOR) & (scale <= _STATE_MAGNITUDE)):
        raise StateError(f"fusion.scale: ranges must be in [{_SCALE_FLOOR:g}, "
                         f"{_STATE_MAGNITUDE:g}], got {scale.tolist()}")
    if alpha is not None:
        if alpha.size != j:
            raise StateError(f"fusion.alpha: must have {j} entries (one per component), "
                             f"got {alpha.size}")
        with np.errstate(over="ignore"):
            total = float(alpha.sum())
        if np.any(alpha < 0) or not abs(total - 1.0) <= _ALPHA_SUM_TOL:
            raise StateError(f"fusion.alpha: weights must be >= 0 and sum to 1, got "
                             f"{alpha.tolist()}")
    if tie.size not in (0, 2) or (tie.size and (
            not np.all(np.isfinite(tie)) or abs(tie[0]) > _STATE_MAGNITUDE
            or not 1.0 / _STATE_MAGNITUDE <= tie[1] <= _STATE_MAGNITUDE)):
        raise StateError(f"fusion.tie: must be empty or a shift of magnitude at most "
                         f"{_STATE_MAGNITUDE:g} and a range in [{1 / _STATE_MAGNITUDE:g}, "
                         f"{_STATE_MAGNITUDE:g}], got {tie.tolist()}")
_KANTOR_FLOOR = 1e-12
_KNN_TIE = 1e-3


@dataclass(frozen=True, eq=False)
class FusionContext:
    """What :class:`FusionModel` needs to know about the vectorizer's columns.

    Attributes
    ----------
    word_stop
        The word block is the columns ``[0, word_stop)``.
    char_start
        The character n-gram block is ``[char_start, n_features)``, or ``None``.
    lsa_cols
        Sorted word columns the LSA projection reads (int64).
    lsa_map
        ``(len(lsa_cols), k)`` projection (the transposed SVD components), or an
        empty ``(0, 0)`` array when there is no LSA.
    """

    word_stop: int
    char_start: int | None
    lsa_cols: NDArray[np.int64]
    lsa_map: FloatArray

    @property
    def has_lsa(self) -> bool:
        return bool(self.lsa_map.size)


class ContextWeights(np.ndarray[Any, np.dtype[np.float64]]):
    """Corpus weights (a plain float array) that also carry a :class:`FusionContext`.

    :class:`~sift.filters.profile.Profile` hands a model the vectorizer's
    ``feature_weights()`` at ``bind`` time; a
    :class:`~sift.filters.representations.FusionVectorizer` returns this subclass, so the
    fusion model receives its context through the unchanged ``bind`` signature.

    >>> w = ContextWeights(np.ones(3), None)
    >>> w.context is None, float(w.sum())
    (True, 3.0)
    """

    context: FusionContext | None

    def __new__(cls, weights: ArrayLike, context: FusionContext | None) -> ContextWeights:
        obj = np.asarray(weights, dtype=np.float64).view(cls)
        obj.context = context
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.context = getattr(obj, "context", None)


def _block_sq_norms(X: sp.csr_matrix, lo: int, hi: int) -> FloatArray:
    """Squared length of each row restricted to the columns ``[lo, hi)``."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    keep = (X.indices >= lo) & (X.indices < hi)
    sq = np.bincount(rows[keep], weights=X.data[keep] ** 2, minlength=X.shape[0])
    return np.asarray(sq, dtype=np.float64)


def _max_margin(d: FloatArray, pos: IntArray, alpha: FloatArray) -> tuple[FloatArray, float]:
    """Weights with the same or fewer negatives before the worst positive that push the
    negatives now behind it as far behind as possible; also the margin reached.

    The new weights are counted again and dropped if more negatives come first: with a
    negative that duplicates a positive the best margin is 0, and the LP's vertex can
    leave other negatives exactly tied with the worst positive, where rounding can put
    them in front.
    """
    f = d @ alpha
    neg = np.setdiff1d(np.arange(d.shape[0]), pos)
    behind = neg[f[neg] >= f[pos].max()]
    if behind.size == 0:
        return alpha, 0.0
    out = _polish_maxrank(d, pos, behind, alpha, cap=1.0)
    negs = neg.astype(np.intp)

    def counts(a: FloatArray) -> tuple[float, float]:
        # one product per weight vector, as the model scores (see _reported), and also
        # as objective_value counts the weights (normalised again: the last bit moves)
        return (float(_objective_many(d, pos, negs, a[:, None], "maxrank")[0]),
                float(_objective_many(d, pos, negs, _check_weights(a, a.size)[:, None],
                                      "maxrank")[0]))

    if any(x > y for x, y in zip(counts(out), counts(alpha), strict=True)):
        return alpha, float(f[behind].min() - f[pos].max())
    g = d @ out
    return out, float(g[behind].min() - g[pos].max())


def _safe_div(a: FloatArray, b: FloatArray) -> FloatArray:
    return np.asarray(np.where(b > 1e-12, a / np.where(b > 1e-12, b, 1.0), 0.0), dtype=np.float64)


class FusionModel(ScoringModel):
    """Profile model ranking by a learned convex combination of dissimilarities.

    For every document ``d`` the model computes ``J`` dissimilarities to the
    profile (smaller = more similar):

    ``word``, ``char``, ``lsa``
        ``1 - cos(d, v*)`` in the word block, the character n-gram block and the
        LSA space, where the query item ``v*`` is the sum of the query vector and
        the (weighted) positive examples;
    ``rocchio``, ``kantor``, ``knn``
        the negated score of a Rocchio, Kantor and kNN sub-model bound to the
        same example set (Kantor's as ``-log score``, its distance ratio made a
        difference of log-distances).

    Each column is scaled affinely to ``[0, 1]`` over the examples' leave-one-out
    values; the weights ``alpha`` come from :func:`solve_weights` with ``S`` the
    positive examples and the candidates the negative ones (leave-one-out
    dissimilarities, so a positive is not judged by a model that contains it).
    The score is ``-(scaled dissimilarities @ alpha)``; TROT thresholds it.

    The weights are re-solved lazily (at the next ``score``/``loo_scores``) once
    ``resolve_every`` new positives were learned, with ``time_limit`` seconds and
    the previous weights as a start; the sub-models and ``v*`` learn every
    judgment. Before the first solve (no positive yet) the score is the Rocchio
    sub-model's.

    Parameters
    ----------
    components
        Which dissimilarities (subset of :data:`COMPONENTS`), or ``None`` for all
        those the bound context provides (``char`` and ``lsa`` need a
        :class:`FusionContext`, see :class:`ContextWeights`).
    resolve_every
        Re-solve the weights after this many new positives.
    time_limit
        Seconds per solve (``None``: no limit). A solve that reaches it keeps the best
        weights found so far, so on a slower or busier machine the same seed and
        judgments can give other weights; ``None`` makes a seeded profile the same
        everywhere (at the cost of solves without a bound on their time).
    objective
        Objective of :func:`solve_weights`.
    rocchio, kantor, knn
        Parameters of the sub-models.
    tie_break
        ``"margin"``: among weights that keep the same negatives behind the worst
        positive, take those maximising the gap between the worst positive and
        the nearest such negative (one LP; the solver's optimum is usually a
        whole region, often containing a vertex that uses one component only;
        the new weights are counted again and kept only if no negative more comes
        first); ``"solver"``: keep :func:`solve_weights`' choice.
    seed
        Seed of the solver's heuristic.
    batch_solve_seconds
        While a profile settles a batch of judgments group by group
        (:meth:`settling`), the re-solves inside it stop once they have taken this
        many seconds (each up to ``time_limit``); the weights are then solved once
        more at the batch's re-threshold. One by one a profile solves every
        ``resolve_every`` positives, and a worker's event loop waits for a batch:
        1,000 judgments, 316 of them relevant, took 64 solves and 62 s on the
        service's vectors without a budget, 8 solves and 6.7 s with 5 s
        (``benchmarks/fusion_judgment_batch.py``). Below the budget a batch
        re-solves exactly where judgments one by one do. ``None``: no budget.

    Examples
    --------
    >>> from sift.filters.examples import ExampleSet
    >>> X = sp.csr_matrix(np.array([[1.0, 0, 0], [0.8, 0.6, 0], [0, 0, 1.0], [0, 0.6, 0.8]]))
    >>> ex = ExampleSet(None, 3)
    >>> m = FusionModel(components=["word", "rocchio", "knn"])
    >>> m.bind(3, None, ex)
    >>> m.start(None)
    >>> lab, w, real = np.array([1, 1, -1, -1]), np.ones(4), np.ones(4, bool)
    >>> m.learn(X, lab, w, real)
    >>> ex.add(X, lab, w, real)
    0
    >>> s = m.score(X)
    >>> bool(min(s[0], s[1]) > max(s[2], s[3])), m.components_
    (True, ['word', 'rocchio', 'knn'])
    """

    name = "fusion"

    def __init__(
        self,
        components: list[str] | None = None,
        resolve_every: int = 5,
        time_limit: float | None = 1.0,
        objective: str = "maxrank",
        rocchio: dict[str, Any] | None = None,
        kantor: dict[str, Any] | None = None,
        knn: dict[str, Any] | None = None,
        tie_break: str = "margin",
        seed: int = 0,
        batch_solve_seconds: float | None = 5.0,
    ) -> None:
        if components is not None and (isinstance(components, str)
                                       or not isinstance(components, list | tuple)):
            raise ParameterError(
                f"components must be a list of names among {', '.join(COMPONENTS)}, got {components!r}")
        for name, sub in (("rocchio", rocchio), ("kantor", kantor), ("knn", knn)):
            if sub is not None and not isinstance(sub, dict):
                raise ParameterError(f"{name} must be a dict of its parameters, got {sub!r}")
        if not _not_bool_int(seed) or seed < 0:
            raise ParameterError(f"seed must be an integer >= 0, got {seed!r}")
        # numpy scalars as Python numbers (the parameters go to JSON)
        seed = int(seed)
        resolve_every = int(resolve_every) if _not_bool_int(resolve_every) else resolve_every
        time_limit, batch_solve_seconds = (
            float(x) if isinstance(x, np.integer | np.floating) and not isinstance(x, np.bool_)
            else x for x in (time_limit, batch_solve_seconds))
        self.components = None if components is None else list(components)
        self.resolve_every = resolve_every
        self.time_limit = time_limit
        self.objective = objective
        self.rocchio = dict(rocchio or {})
        self.kantor = dict(kantor or {})
        self.knn = dict(knn or {})
        self.tie_break = tie_break
        self.seed = seed
        self.batch_solve_seconds = batch_solve_seconds
        if batch_solve_seconds is not None:
            check_positive("batch_solve_seconds", batch_solve_seconds, allow_zero=True)
        #: seconds of re-solving left while a batch settles (None: not settling)
        self._budget: float | None = None
        if tie_break not in ("margin", "solver"):
            raise ParameterError(f"tie_break must be 'margin' or 'solver', got {tie_break!r}")
        if self.components is not None:
            bad = [c for c in self.components if c not in COMPONENTS]
            if bad or not self.components or len(set(self.components)) != len(self.components):
                raise ParameterError(
                    f"components must be distinct names among {', '.join(COMPONENTS)}, "
                    f"got {components!r}")
        if (isinstance(resolve_every, bool) or not isinstance(resolve_every, int)
                or resolve_every < 1):
            raise ParameterError(f"resolve_every must be a positive integer, got {resolve_every!r}")
        if time_limit is not None:
            check_positive("time_limit", time_limit)
        if not isinstance(objective, str) or objective not in OBJECTIVES:
            raise ParameterError(
                f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        try:
            self.rocchio_ = Rocchio(**self.rocchio)
            self.kantor_ = Kantor(**self.kantor)
            self.knn_ = KNN(**self.knn)
        except TypeError as exc:
            raise ParameterError(f"sub-model parameters: {exc}") from None
        self.context_: FusionContext | None = None
        self.components_: list[str] = []
        self._reset()
        self.bind(0, None, None)

    def get_params(self) -> dict[str, Any]:
        return {"components": self.components, "resolve_every": self.resolve_every,
                "time_limit": self.time_limit, "objective": self.objective,
                "rocchio": self.rocchio, "kantor": self.kantor, "knn": self.knn,
                "tie_break": self.tie_break, "seed": self.seed,
                "batch_solve_seconds": self.batch_solve_seconds}

    # -- context ----------------------------------------------------------------------
    def bind(
        self,
        n_features: int,
        feature_weights: NDArray[np.float64] | None,
        examples: ExampleSet | None,
    ) -> None:
        ctx = getattr(feature_weights, "context", None)
        self.context_ = ctx if isinstance(ctx, FusionContext) else None
        plain = None if feature_weights is None else np.asarray(feature_weights)
        super().bind(n_features, plain, examples)
        for sub in (self.rocchio_, self.kantor_, self.knn_):
            sub.bind(n_features, plain, examples)
        available = ["word", "rocchio", "kantor", "knn"]
        if self.context_ is not None and self.context_.char_start is not None:
            available.append("char")
        if self.context_ is not None and self.context_.has_lsa:
            available.append("lsa")
        if self.components is None:
            self.components_ = [c for c in COMPONENTS if c in available]
        else:
            missing = [c for c in self.components if c not in available]
            if missing and n_features:
                raise ParameterError(
                    f"fusion components {missing} need a FusionContext (use FusionVectorizer)")
            self.components_ = list(self.components)

    def _blocks(self) -> dict[str, tuple[int, int]]:
        ctx = self.context_
        word_stop = self.n_features_ if ctx is None else ctx.word_stop
        out = {"word": (0, word_stop)}
        if ctx is not None and ctx.char_start is not None:
            out["char"] = (ctx.char_start, self.n_features_)
        return out

    # -- learning ---------------------------------------------------------------------
    def _reset(self) -> None:
        self.centroid_ = SparseAccumulator(1)
        self.alpha_: FloatArray | None = None
        self.lo_ = np.zeros(0)
        self.scale_ = np.zeros(0)
        #: shift and range of kNN's tie-break column at the last solve (empty: none yet)
        self.tie_ = np.zeros(0)
        self.n_pos_ = 0
        self.n_pos_at_solve_ = 0
        self.pending_ = False
        self.n_solves_ = 0
        self.last_solve_: dict[str, Any] = {}
        self._cvec: dict[str, tuple[NDArray[np.int64], FloatArray]] | None = None

    def start(self, query: sp.csr_matrix | None) -> None:
        self._reset()
        for sub in (self.rocchio_, self.kantor_, self.knn_):
            sub.start(query)
        if query is not None and query.nnz:
            q = sp.csr_matrix(query)
            self.centroid_.add(0, q.indices, q.data)

    def learn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        for sub in (self.rocchio_, self.kantor_, self.knn_):
            sub.learn(X, labels, weights, real)
        X = sp.csr_matrix(X)
        lab = np.asarray(labels)
        w = np.asarray(weights, dtype=np.float64)
        rows = np.flatnonzero(lab > 0)
        if rows.size:
            sub = X[rows]
            self.centroid_.add(0, sub.indices, sub.data * np.repeat(w[rows], np.diff(sub.indptr)))
            self.n_pos_ += int(rows.size)
            self._cvec = None
            if self.alpha_ is None or self.n_pos_ - self.n_pos_at_solve_ >= self.resolve_every:
                self.pending_ = True

    def unlearn(
        self,
        X: sp.csr_matrix,
        labels: NDArray[np.int8],
        weights: NDArray[np.float64],
        real: NDArray[np.bool_],
    ) -> None:
        """The sub-models unlearn the rows, ``v*`` loses the positive ones (a cancellation
        residue set to 0, as in Rocchio's sums) and ``n_pos_`` counts them out. The
        weights were solved with these examples' old labels (``S`` the positives, the
        candidates the negatives), so they are re-solved at the next ``score`` /
        ``loo_scores`` (``pending_``), from the previous weights as a start, whatever
        ``resolve_every`` says; until then the counter of the last solve is kept at most
        ``n_pos_``, as a state requires."""
        for sub in (self.rocchio_, self.kantor_, self.knn_):
            sub.unlearn(X, labels, weights, real)
        X = sp.csr_matrix(X)
        lab = np.asarray(labels)
        w = np.asarray(weights, dtype=np.float64)
        pos = lab > 0
        if pos.any():
            self.centroid_.remove_rows(0, X, w, pos)
            self.n_pos_ = max(self.n_pos_ - int(np.count_nonzero(pos)), 0)
            self.n_pos_at_solve_ = min(self.n_pos_at_solve_, self.n_pos_)
            self._cvec = None
        if lab.size:
            self.pending_ = True

    # -- dissimilarities --------------------------------------------------------------
    def _centroid(self) -> dict[str, tuple[NDArray[np.int64], FloatArray]]:
        """``v*`` per block (sorted columns, values) and, for ``lsa``, its projection."""
        if self._cvec is None:
            feat = self.centroid_.features
            vals = self.centroid_.sums[0]
            order = np.argsort(feat)
            feat, vals = feat[order].copy(), vals[order].copy()
            out: dict[str, tuple[NDArray[np.int64], FloatArray]] = {}
            for name, (lo, hi) in self._blocks().items():
                keep = (feat >= lo) & (feat < hi)
                out[name] = (feat[keep], vals[keep])
            ctx = self.context_
            if ctx is not None and ctx.has_lsa:
                c = sp.csr_matrix((vals, feat, np.array([0, feat.size])),
                                  shape=(1, self.n_features_))
                z = np.asarray(restrict(c, ctx.lsa_cols) @ ctx.lsa_map).ravel()
                out["lsa"] = (np.arange(z.size, dtype=np.int64), z)
            self._cvec = out
        return self._cvec

    def _cosines(
        self, X: sp.csr_matrix, name: str, loo: tuple[FloatArray, NDArray[np.bool_]] | None
    ) -> FloatArray:
        """``cos(x, v*)`` in one representation; with ``loo = (weights, is_positive)``
        each positive row is compared with ``v*`` minus its own contribution."""
        cols, vals = self._centroid()[name]
        csq = float(vals @ vals)
        if name == "lsa":
            ctx = self.context_
            assert ctx is not None
            Z = np.asarray(restrict(X, ctx.lsa_cols) @ ctx.lsa_map)
            dot = Z @ vals
            xsq = np.einsum("ij,ij->i", Z, Z)
        else:
            lo, hi = self._blocks()[name]
            dot = np.asarray(restrict(X, cols) @ vals).ravel()
            xsq = _block_sq_norms(X, lo, hi)
        if loo is None:
            return _safe_div(dot, np.sqrt(xsq * csq))
        w, mine = loo
        dot_l = np.where(mine, dot - w * xsq, dot)
        csq_l = np.maximum(np.where(mine, csq - 2 * w * dot + w * w * xsq, csq), 0.0)
        return _safe_div(dot_l, np.sqrt(xsq * csq_l))

    def _columns(self, X: sp.csr_matrix | None, names: list[str] | None = None) -> list[FloatArray]:
        """Raw dissimilarities of the rows of ``X`` (``None``: leave-one-out, examples) for
        each component in ``names`` (default: all), without kNN's tie-break."""
        if X is None:
            ex = self._examples()
            rows, loo = ex.X, (ex.weights, ex.labels > 0)
        else:
            rows, loo = sp.csr_matrix(X), None
        cols: list[FloatArray] = []
        for name in self.components_ if names is None else names:
            if name in ("word", "char", "lsa"):
                cols.append(1.0 - self._cosines(rows, name, loo))
                continue
            sub = {"rocchio": self.rocchio_, "kantor": self.kantor_, "knn": self.knn_}[name]
            s = sub.loo_scores() if X is None else sub.score(rows)
            if name == "kantor":
                s = np.log(np.maximum(s, _KANTOR_FLOOR))
            cols.append(-np.asarray(s, dtype=np.float64))
        return cols

    def _tie_ref(self) -> str | None:
        """The component whose order breaks kNN's ties (word, else Rocchio), if kNN is fused:
        kNN scores 0 whenever no positive is among the k neighbours, and ties do not
        outrank in the maxrank program."""
        if "knn" not in self.components_:
            return None
        return next((c for c in ("word", "rocchio") if c in self.components_), None)

    @staticmethod
    def _tie_fit(r: FloatArray) -> FloatArray:
        """``(shift, range)`` of the tie-break column over the examples."""
        span = float(np.ptp(r)) if r.size else 0.0
        return np.array([float(r.min()) if r.size else 0.0, span if span > 0 else 1.0])

    def _tie(self) -> FloatArray:
        """The kNN tie-break's ``(shift, range)``: fixed at the last solve (``tie_``), so that
        a document's score does not depend on the documents scored with it. Without it
        (before the first solve, or a state saved before the forty-third session, which
        did not keep it): from the examples' leave-one-out values now, as those states
        normalised the term at their solve, and kept from then on once weights exist."""
        if self.tie_.size:
            return self.tie_
        ref = self._tie_ref()
        ex = self.examples_
        if ref is None or ex is None or len(ex) == 0:
            return self._tie_fit(np.zeros(0))
        tie = self._tie_fit(self._columns(None, [ref])[0])
        if self.alpha_ is not None:
            self.tie_ = tie
        return tie

    def _stack(self, cols: list[FloatArray], n: int, tie: FloatArray | None) -> FloatArray:
        """The columns as a matrix, kNN's with its tie-break term (``tie``: ``(shift,
        range)`` of the reference column; ``None``: :meth:`_tie`)."""
        ref = self._tie_ref()
        if ref is not None:
            t = self._tie() if tie is None else tie
            k = self.components_.index("knn")
            r = cols[self.components_.index(ref)]
            cols = [*cols[:k], cols[k] + _KNN_TIE * (r - t[0]) / t[1], *cols[k + 1 :]]
        return np.column_stack(cols) if cols else np.zeros((n, 0))

    def _matrix(self, X: sp.csr_matrix | None) -> FloatArray:
        """Dissimilarities of the rows of ``X`` (``None``: leave-one-out, examples)."""
        n = len(self._examples()) if X is None else sp.csr_matrix(X).shape[0]
        return self._stack(self._columns(X), n, None)

    # -- weights ----------------------------------------------------------------------
    def _solve(self, D: FloatArray, tie: FloatArray) -> None:
        ex = self._examples()
        pos = np.flatnonzero(ex.labels > 0)
        if pos.size == 0 or D.shape[0] == 0:
            return
        lo = D.min(axis=0)
        scale = D.max(axis=0) - lo
        scale = np.where(scale > 1e-12, scale, 1.0)
        Dn = (D - lo) / scale
        start = self.alpha_ if self.alpha_ is not None and self.alpha_.size == D.shape[1] else None
        res = solve_weights(Dn, pos, objective=self.objective, time_limit=self.time_limit,
                            start=start, seed=self.seed)
        alpha = np.asarray(res.weights, dtype=np.float64)
        margin = 0.0
        if self.tie_break == "margin" and self.objective == "maxrank":
            alpha, margin = _max_margin(Dn, pos, alpha)
        self.alpha_ = alpha
        self.lo_, self.scale_, self.tie_ = lo, scale, tie
        self.n_pos_at_solve_ = self.n_pos_
        self.n_solves_ += 1
        self.last_solve_ = {"objective": float(res.objective), "gap": float(res.gap),
                            "optimal": bool(res.optimal), "method": res.method,
                            "seconds": float(res.seconds), "positives": int(pos.size),
                            "candidates": int(res.n_candidates), "margin": margin}

    def _fused(self, D: FloatArray) -> FloatArray:
        if self.alpha_ is None:
            j = self.components_.index("rocchio") if "rocchio" in self.components_ else 0
            return np.asarray(-D[:, j], dtype=np.float64)
        return np.asarray(-(((D - self.lo_) / self.scale_) @ self.alpha_), dtype=np.float64)

    #: the weights are re-solved at the re-threshold (its leave-one-out scores) after the
    #: judgment that completes ``resolve_every`` positives, from the examples of then
    settles_per_group = True

    @contextlib.contextmanager
    def settling(self) -> Iterator[None]:
        """Re-solves inside a batch stop once they took ``batch_solve_seconds``."""
        self._budget = self.batch_solve_seconds
        try:
            yield
        finally:
            self._budget = None

    def settle(self) -> None:
        """The re-solve a re-threshold would make here, without the fused scores."""
        self._ensure_solved()

    def _ensure_solved(self) -> FloatArray | None:
        """Re-solve the weights if due; the leave-one-out matrix solved on, if it solved."""
        if self.pending_ and self.examples_ is not None and np.any(self.examples_.labels > 0):
            if self._budget is not None and self._budget <= 0:
                return None  # the batch spent its budget: solved at its re-threshold
            cols = self._columns(None)
            ref = self._tie_ref()
            # the tie-break's scaling is fixed here, with the weights
            tie = self._tie_fit(cols[self.components_.index(ref)]) if ref else np.zeros(0)
            D = self._stack(cols, len(self.examples_), tie)
            t0 = time.perf_counter()
            self._solve(D, tie)
            if self._budget is not None:
                self._budget -= time.perf_counter() - t0
            self.pending_ = False
            return D
        return None

    @property
    def no_evidence_score(self) -> float | None:
        """Before the first solve the score is the Rocchio sub-model's, whose floor (0: a
        document sharing no term with it) this is; the fused scores after it, negated
        dissimilarities, have none (``None``). Without a Rocchio component: ``None``."""
        if self.alpha_ is None and "rocchio" in self.components_:
            return 0.0
        return None

    @property
    def weights_(self) -> dict[str, float]:
        """Current weight of each component on the ``[0, 1]``-scaled dissimilarities
        (empty before the first solve)."""
        if self.alpha_ is None:
            return {}
        return {c: float(a) for c, a in zip(self.components_, self.alpha_, strict=True)}

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        self._ensure_solved()
        return self._fused(self._matrix(X))

    def loo_scores(self) -> NDArray[np.float64]:
        ex = self._examples()
        if len(ex) == 0:
            return np.zeros(0)
        D = self._ensure_solved()
        if D is None:
            D = self._matrix(None)
        return self._fused(D)

    # -- state ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "fusion",
            "version": _FUSION_STATE_VERSION,
            "components": list(self.components_),
            "rocchio": self.rocchio_.state_dict(),
            "kantor": self.kantor_.state_dict(),
            "knn": self.knn_.state_dict(),
            "centroid": self.centroid_.to_state(),
            "alpha": None if self.alpha_ is None else encode_array(self.alpha_),
            "lo": encode_array(self.lo_),
            "scale": encode_array(self.scale_),
            "tie": encode_array(self.tie_),
            "n_pos": self.n_pos_,
            "n_pos_at_solve": self.n_pos_at_solve_,
            "pending": self.pending_,
            "n_solves": self.n_solves_,
            # the solve's wall-clock time stays out: a state is a function of the
            # seed and the judgments, the same bytes on any machine
            "last_solve": {k: v for k, v in self.last_solve_.items() if k != "seconds"},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_version(state, "fusion")
        try:
            if not isinstance(state["components"], list) or state["components"] != self.components_:
                raise StateError(f"fusion: state components {state['components']} differ from the "
                                 f"bound context's {self.components_} (same vectorizer?)")
            self.rocchio_.load_state_dict(state["rocchio"])
            self.kantor_.load_state_dict(state["kantor"])
            self.knn_.load_state_dict(state["knn"])
            centroid = SparseAccumulator.from_state(state["centroid"], 1, self.n_features_)
            j = len(self.components_)
            alpha = (None if state["alpha"] is None else
                     decode_array(state["alpha"], name="fusion.alpha", dtype=np.float64, ndim=1))
            lo = decode_array(state["lo"], name="fusion.lo", dtype=np.float64, ndim=1)
            scale = decode_array(state["scale"], name="fusion.scale", dtype=np.float64, ndim=1)
            # states saved before the forty-third session have no "tie": empty, so the
            # tie-break's scaling is taken from the examples at the next use (see _tie)
            tie = (decode_array(state["tie"], name="fusion.tie", dtype=np.float64, ndim=1)
                   if "tie" in state else np.zeros(0))
            n_pos = decode_count(state["n_pos"], name="fusion.n_pos")
            n_at = decode_count(state["n_pos_at_solve"], name="fusion.n_pos_at_solve")
            n_solves = decode_count(state["n_solves"], name="fusion.n_solves")
            pending = state["pending"]
            raw_last = state["last_solve"]
        except StateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"fusion: {exc}") from None
        if not isinstance(raw_last, dict):
            raise StateError(f"fusion.last_solve: must be an object, got {raw_last!r:.60}")
        last = {k: v for k, v in raw_last.items() if k != "seconds"}
        _check_scaling(alpha, lo, scale, tie, j)
        if not isinstance(pending, bool):
            raise StateError(f"fusion.pending: must be true or false, got {pending!r}")
        if n_at > n_pos:
            raise StateError(f"fusion: bad counters (n_pos_at_solve {n_at} > n_pos {n_pos})")
        self.centroid_ = centroid
        self.alpha_, self.lo_, self.scale_, self.tie_ = alpha, lo, scale, tie
        self.n_pos_, self.n_pos_at_solve_, self.pending_ = n_pos, n_at, pending
        self.n_solves_, self.last_solve_ = n_solves, last
        self._cvec = None
