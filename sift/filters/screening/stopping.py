"""Stopping rules: target (point estimate), bound (variance-aware), knee, fixed budget.

The bound rule's "bound" is a heuristic: a normal approximation with a plug-in variance
(:meth:`~sift.filters.screening.estimators.Estimate.upper`), not a confidence bound; it
stops early when the relevant records left sit deep in the ranking (docs/screening.md).

>>> target_rule(found=19, r_hat=20.0, target=0.95)
True
>>> knee_rule([1] * 10 + [0] * 200)
True
>>> fixed_budget_rule(screened=50, n_total=100, budget=0.5)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sift.filters.screening.errors import ScreeningError


def _check_target(target: float) -> None:
    if not (isinstance(target, int | float) and 0.0 < target <= 1.0):
        raise ScreeningError(f"target recall must be in (0, 1], got {target!r}")


def target_rule(found: int, r_hat: float, target: float) -> bool:
    """Stop when the relevant found reach ``target * r_hat`` (and at least one was found)."""
    _check_target(target)
    return found > 0 and found >= target * r_hat


def bound_rule(found: int, r_upper: float, target: float) -> bool:
    """Stop when a lower bound on recall, ``found / r_upper``, reaches ``target``.

    ``r_upper`` is the review's normal-approximation upper value of R, so the rule holds
    recall at ``target`` with the stated confidence only where that approximation
    holds (many sampled relevant records), not when the draws missed the ones left.
    """
    _check_target(target)
    return found > 0 and found >= target * r_upper


def knee_point(labels: Sequence[int]) -> tuple[int, int]:
    """The knee of the gain curve: ``(screened, found)`` at the point farthest from the chord.

    The chord joins (0, 0) to (s, r), with ``s`` screened and ``r`` found.
    """
    y = np.cumsum(np.asarray(labels, dtype=np.float64))
    s = len(y)
    if s == 0:
        return 0, 0
    r = y[-1]
    x = np.arange(1, s + 1, dtype=np.float64)
    # distance from the chord, up to a positive constant
    dist = r * x - s * y
    i = int(np.argmin(dist))  # the gain curve lies above the chord: most negative
    return i + 1, int(y[i])


def knee_rule(labels: Sequence[int], min_screened: int = 150) -> bool:
    """Cormack and Grossman's knee method (2016).

    With ``s`` screened, ``r`` found, and the knee at ``(i, r_i)``, the slope ratio is
    ``rho = (r_i / i) / ((r - r_i + 1) / (s - i))``. Stop when ``s >= min_screened`` and
    ``rho >= 156 - min(r, 150)``.
    """
    s = len(labels)
    if s < min_screened:
        return False
    r = int(np.sum(labels))
    if r == 0:
        return False
    i, r_i = knee_point(labels)
    if i >= s or r_i == 0:
        return False
    rho = (r_i / i) / ((r - r_i + 1) / (s - i))
    return rho >= 156 - min(r, 150)


def fixed_budget_rule(screened: int, n_total: int, budget: float) -> bool:
    """Stop once ``ceil(budget * n_total)`` records are screened."""
    if not 0.0 < budget <= 1.0:
        raise ScreeningError(f"budget must be in (0, 1], got {budget!r}")
    return screened >= math.ceil(budget * n_total)
