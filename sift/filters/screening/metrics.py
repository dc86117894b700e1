"""Evaluation measures of a screening order, shared by sift and the peer benchmark.

A *screening order* is the sequence of gold labels (1 relevant, 0 not) in the
order a reviewer looked at the records. It may stop before the end of the
collection; records never screened count as not found.

WSS@r (work saved over sampling at recall r), as used here for every system:

    n_r   = number of records screened when the ceil(r * R)-th relevant record
            is found (R = relevant records in the collection of N records)
    WSS@r = (N - n_r) / N - (1 - r)

If the order never reaches ceil(r * R) relevant records, n_r = N (the reviewer
would have to screen everything).

>>> wss([1, 0, 1, 0, 0, 0, 0, 0, 0, 0], recall=0.95)
0.65
>>> recall_at([1, 0, 0, 1], fraction=0.5, n_total=4, n_relevant=2)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sift.filters.screening.errors import ScreeningError


def shuffle_permutation(n: int, seed: int) -> list[int]:
    """The record order used by every simulation with ``seed`` (sift and peers alike).

    >>> shuffle_permutation(5, 0)
    [2, 4, 3, 0, 1]
    """
    if n < 0:
        raise ScreeningError(f"n must be >= 0, got {n!r}")
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


def screened_at_recall(
    order: Sequence[int], recall: float, n_total: int | None = None, n_relevant: int | None = None
) -> int:
    """Records screened when ``ceil(recall * R)`` relevant records are found (``N`` if never)."""
    labels = np.asarray(order, dtype=np.int64)
    n = len(labels) if n_total is None else n_total
    r_total = int(labels.sum()) if n_relevant is None else n_relevant
    if r_total <= 0:
        raise ScreeningError("the collection has no relevant record: WSS is undefined")
    need = math.ceil(recall * r_total - 1e-12)
    hits = np.flatnonzero(np.cumsum(labels) >= need)
    return int(hits[0]) + 1 if len(hits) else n


def wss(
    order: Sequence[int],
    recall: float = 0.95,
    n_total: int | None = None,
    n_relevant: int | None = None,
) -> float:
    """Work saved over sampling at ``recall`` (see the module docstring)."""
    n = len(order) if n_total is None else n_total
    screened = screened_at_recall(order, recall, n, n_relevant)
    return round((n - screened) / n - (1.0 - recall), 12)


def recall_at(
    order: Sequence[int],
    fraction: float,
    n_total: int | None = None,
    n_relevant: int | None = None,
) -> float:
    """Recall after screening ``floor(fraction * N)`` records."""
    labels = np.asarray(order, dtype=np.int64)
    n = len(labels) if n_total is None else n_total
    r_total = int(labels.sum()) if n_relevant is None else n_relevant
    if r_total <= 0:
        raise ScreeningError("the collection has no relevant record: recall is undefined")
    k = math.floor(fraction * n + 1e-9)
    return float(labels[:k].sum()) / r_total
