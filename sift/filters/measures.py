"""Effectiveness measures over the 2x2 contingency table.

``a`` = relevant and delivered, ``b`` = non-relevant and delivered, ``c`` =
relevant and not delivered, ``d`` = non-relevant and not delivered. Every
measure is a function of ``(a, b, c, d)`` that works elementwise on numpy
arrays, so TROT can evaluate all candidate thresholds in one call. Higher is
better for all of them.

The TREC 2002 filtering measures:

- ``t11u = 2a - b`` (linear utility, credit 2 per relevant, -1 per non-relevant);
- ``t11su``: ``(max(t11u / MaxU, MinNU) - MinNU) / (1 - MinNU)`` with
  ``MaxU = 2 (a + c)`` and ``MinNU = -0.5``; answering No to everything scores 1/3.
  With nothing relevant (``a + c = 0``, so ``MaxU = 0``) TREC leaves T11SU undefined;
  sift scores it as answering No, 1/3, whatever the non-relevant deliveries ``b``
  (delivering junk on a topic with no relevant document is not penalised);
- ``t11f``: F-beta with beta = 0.5, ``1.25 a / (1.25 a + b + 0.25 c)``, 0 when nothing
  relevant is delivered.

>>> round(float(t11su(2.0, 1.0, 2.0, 10.0)), 4)
0.5833
>>> float(t11su(0.0, 0.0, 5.0, 10.0))  # deliver nothing
0.3333333333333333
>>> round(float(t11f(2.0, 1.0, 2.0, 10.0)), 4)
0.625
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sift.filters.errors import ParameterError

Num = Any  # float or ndarray of floats
Measure = Callable[[Num, Num, Num, Num], Num]


def _div(num: Num, den: Num) -> Num:
    num_a = np.asarray(num, dtype=np.float64)
    den_a = np.asarray(den, dtype=np.float64)
    out = np.divide(num_a, den_a, out=np.zeros(np.broadcast(num_a, den_a).shape), where=den_a != 0)
    return out if out.ndim else float(out)


def linear_utility(credit_relevant: float = 2.0, credit_nonrelevant: float = -1.0) -> Measure:
    """A linear utility ``credit_relevant * a + credit_nonrelevant * b``."""

    def utility(a: Num, b: Num, c: Num, d: Num) -> Num:
        return credit_relevant * np.asarray(a, dtype=np.float64) + credit_nonrelevant * np.asarray(
            b, dtype=np.float64
        )

    utility.__name__ = f"utility_{credit_relevant:g}_{credit_nonrelevant:g}"
    return utility


def t11u(a: Num, b: Num, c: Num, d: Num) -> Num:
    """TREC 2002 linear utility ``2a - b``."""
    return 2.0 * np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)


def t11su(a: Num, b: Num, c: Num, d: Num, min_nu: float = -0.5) -> Num:
    """TREC 2002 scaled utility (T11SU), in [0, 1].

    ``a`` relevant delivered, ``b`` non-relevant delivered, ``c`` relevant missed,
    ``d`` the rest; ``T11U = 2a - b`` over its maximum ``2(a + c)``, floored at
    ``min_nu`` and rescaled to [0, 1].

    Parameters
    ----------
    a, b, c, d
        The contingency table (numbers or arrays, elementwise).
    min_nu
        The floor of the normalised utility, a finite number below 1 (TREC: -0.5).

    Notes
    -----
    With no relevant document at all (``a + c = 0``) the maximum utility is 0 and TREC
    leaves T11SU undefined. sift's convention is to score it as answering No to
    everything, ``-min_nu / (1 - min_nu)`` (1/3 with the TREC floor), whatever the
    non-relevant deliveries ``b``: such a topic neither rewards nor penalises a
    filter. TROT is not affected: it runs only with a relevant example.

    Examples
    --------
    >>> round(t11su(2, 1, 1, 10), 4)  # T11U 3 of 6
    0.6667
    >>> t11su(0, 0, 5, 10)  # answering No to everything
    0.3333333333333333
    >>> t11su(0, 5, 0, 10)  # nothing relevant (a + c = 0): the same, by convention
    0.3333333333333333
    """
    if isinstance(min_nu, bool) or not isinstance(min_nu, numbers.Real) or not (
            math.isfinite(min_nu) and min_nu < 1):
        raise ParameterError(f"min_nu must be a finite number < 1, got {min_nu!r}")
    max_u = 2.0 * (np.asarray(a, dtype=np.float64) + np.asarray(c, dtype=np.float64))
    nu = _div(t11u(a, b, c, d), max_u)
    out = (np.maximum(nu, min_nu) - min_nu) / (1.0 - min_nu)
    return out if np.ndim(out) else float(out)


def f_beta(a: Num, b: Num, c: Num, d: Num, beta: float = 1.0) -> Num:
    """F-beta: ``(1 + beta^2) a / ((1 + beta^2) a + b + beta^2 c)``; 0 when that is 0/0."""
    a_ = np.asarray(a, dtype=np.float64)
    k = 1.0 + beta * beta
    return _div(k * a_, k * a_ + np.asarray(b, dtype=np.float64) + beta * beta * np.asarray(c, dtype=np.float64))


def t11f(a: Num, b: Num, c: Num, d: Num) -> Num:
    """TREC 2002 F-beta with beta = 0.5.

    >>> round(t11f(2, 1, 1, 10), 4)  # precision and recall 2/3
    0.6667
    """
    return f_beta(a, b, c, d, beta=0.5)


def f1(a: Num, b: Num, c: Num, d: Num) -> Num:
    """F1, the harmonic mean of precision and recall."""
    return f_beta(a, b, c, d, beta=1.0)


def precision(a: Num, b: Num, c: Num, d: Num) -> Num:
    """Precision ``a / (a + b)``; 0 when nothing is delivered."""
    return _div(a, np.asarray(a, dtype=np.float64) + np.asarray(b, dtype=np.float64))


def recall(a: Num, b: Num, c: Num, d: Num) -> Num:
    """Recall ``a / (a + c)``; 0 when there is nothing relevant."""
    return _div(a, np.asarray(a, dtype=np.float64) + np.asarray(c, dtype=np.float64))


MEASURES: dict[str, Measure] = {
    "t11su": t11su,
    "t11f": t11f,
    "t11u": t11u,
    "f1": f1,
    "precision": precision,
}


def get_measure(name: str | Measure) -> Measure:
    """Look a measure up by name (``t11su``, ``t11f``, ``t11u``, ``f1``, ``precision``,
    or ``utility:<credit_relevant>:<credit_nonrelevant>``), or pass a callable through."""
    if callable(name):
        return name
    if isinstance(name, str) and name in MEASURES:  # not `in` first: a list is unhashable
        return MEASURES[name]
    if isinstance(name, str) and name.startswith("utility:"):
        try:
            _, cr, cn = name.split(":")
            credits = float(cr), float(cn)
        except ValueError:
            pass
        else:
            if all(math.isfinite(c) for c in credits):
                return linear_utility(*credits)
    raise ParameterError(
        f"measure must be one of {', '.join(MEASURES)} or 'utility:R:N', got {name!r}"
    )


def contingency(
    delivered: NDArray[np.bool_], relevant: NDArray[np.bool_]
) -> tuple[float, float, float, float]:
    """Count ``(a, b, c, d)`` from boolean arrays of decisions and gold labels, one of
    each per document (arrays of different shapes raise ParameterError, not broadcast).

    >>> import numpy as np
    >>> contingency(np.array([True, True, False, False]), np.array([True, False, True, False]))
    (1.0, 1.0, 1.0, 1.0)
    """
    dl = np.asarray(delivered, dtype=bool)
    rl = np.asarray(relevant, dtype=bool)
    if dl.shape != rl.shape:
        sizes = (f"lengths {dl.size} and {rl.size}" if dl.ndim == rl.ndim == 1
                 else f"shapes {dl.shape} and {rl.shape}")
        raise ParameterError(f"delivered and relevant must be one per document, got {sizes}")
    return (float(np.sum(dl & rl)), float(np.sum(dl & ~rl)), float(np.sum(~dl & rl)),
            float(np.sum(~dl & ~rl)))
