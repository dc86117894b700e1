"""Pseudolabeling: label some unjudged examples from a scoring model's ranking.

As the Adaptive Filtering Software describes it: sort all examples by score
(rank 1 = highest; equal scores rank in example order); randomly pick
``round(pos_fraction * max_pos_rank)`` (Python's ``round``: half to even) of the
top ``max_pos_rank`` and label them relevant with weight ``pos_weight``; randomly
pick ``round(neg_fraction * (n - min_neg_rank + 1))`` of the bottom
``n - min_neg_rank + 1`` (ranks ``min_neg_rank..n``) and label them non-relevant
with weight ``neg_weight``. Picked examples that already carry a real label keep
it (they are picked, then skipped, so they use up part of the quota).

The random picks are made by one random key per example, drawn in example order
(``rng.random(n)``): the picked examples of a rank range are those with the
smallest keys in it, a uniformly random subset as the design asks. So profiles
fitted with one seed on one training set give an example the same key, and their
samples coincide wherever their rank ranges do: with the default ``min_neg_rank``
of 1 every profile draws the same pseudo-negatives, and a stack of kNN profiles
scores one shared sample instead of one per profile (see
:class:`~sift.filters.knn.KNNStack`).

One guard beyond the design: ranks are absolute, so on a small training set the
top ``max_pos_rank`` are a large share of it and mostly not relevant. Positive
pseudolabels are only given when at least ``min_pool`` examples are ranked
(default 200: the top 10 are then at most the top 5%). And a second: an example
is only labelled relevant if it scores above ``no_evidence`` (what the model gives a
document with nothing in common with it, when the caller says so). When a query
matches no training document every score ties there, the "top" ranks are the first
rows in file order, and pseudo-positives drawn from them would teach the model
unrelated documents. Such picks are skipped like picks that carry a real label.

Examples
--------
>>> import numpy as np
>>> scores = np.arange(10, dtype=float)[::-1]          # example i has rank i + 1
>>> labels = np.zeros(10, dtype=np.int8); labels[0] = 1  # a real positive
>>> p = Pseudolabeler(max_pos_rank=4, pos_fraction=1.0, min_neg_rank=8, neg_fraction=1.0, min_pool=0)
>>> idx, lab, w = p.select(scores, labels, np.random.default_rng(0))
>>> sorted(idx[lab > 0].tolist()), sorted(idx[lab < 0].tolist())
([1, 2, 3], [7, 8, 9])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sift.filters.base import MAX_WEIGHT
from sift.filters.errors import ParameterError


@dataclass(frozen=True)
class Pseudolabeler:
    """Parameters of pseudolabeling (the design's MaxPosRank ... NegWeight).

    Examples
    --------
    >>> pl = Pseudolabeler(max_pos_rank=2, pos_fraction=0.5, pos_weight=0.5,
    ...                    min_neg_rank=3, neg_fraction=0.5, neg_weight=0.1, min_pool=0)
    >>> scores = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.1])
    >>> labels = np.array([1, 0, 0, 0, 0, 0])  # the first is a real positive: kept as it is
    >>> idx, lab, w = pl.select(scores, labels, np.random.default_rng(0))
    >>> idx.tolist(), lab.tolist(), w.tolist()  # one of the top 2, half of ranks >= 3
    ([1, 3, 2], [1, -1, -1], [0.5, 0.1, 0.1])
    """

    max_pos_rank: int = 0
    pos_fraction: float = 0.0
    pos_weight: float = 1.0
    min_neg_rank: int = 1
    neg_fraction: float = 0.0
    neg_weight: float = 1.0
    min_pool: int = 200

    def __post_init__(self) -> None:
        if isinstance(self.max_pos_rank, bool) or not isinstance(self.max_pos_rank, int) \
                or self.max_pos_rank < 0:
            raise ParameterError(f"max_pos_rank must be an integer >= 0, got {self.max_pos_rank!r}")
        if isinstance(self.min_pool, bool) or not isinstance(self.min_pool, int) or self.min_pool < 0:
            raise ParameterError(f"min_pool must be an integer >= 0, got {self.min_pool!r}")
        if isinstance(self.min_neg_rank, bool) or not isinstance(self.min_neg_rank, int) \
                or self.min_neg_rank < 1:
            raise ParameterError(f"min_neg_rank must be an integer >= 1, got {self.min_neg_rank!r}")
        for name in ("pos_fraction", "neg_fraction", "pos_weight", "neg_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterError(f"{name} must be a number, got {value!r}")
        for name in ("pos_fraction", "neg_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ParameterError(f"{name} must be in [0, 1], got {value!r}")
        for name in ("pos_weight", "neg_weight"):
            value = getattr(self, name)
            if not (np.isfinite(value) and 0 < value <= MAX_WEIGHT):
                raise ParameterError(f"{name} must be a positive number of at most {MAX_WEIGHT:g}, "
                                     f"got {value!r}")

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> Pseudolabeler:
        params = dict(params or {})
        unknown = set(params) - set(cls.__dataclass_fields__)
        if unknown:
            raise ParameterError(f"unknown pseudolabel parameters: {sorted(unknown)}")
        return cls(**params)

    def to_params(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def negatives_sample_all(self) -> bool:
        """Whether the pseudo-negatives are drawn from every rank (``min_neg_rank`` 1):
        then they are a uniformly random sample of the unlabelled examples."""
        return self.min_neg_rank == 1

    def select(
        self, scores: ArrayLike, labels: ArrayLike, rng: np.random.Generator,
        no_evidence: float | None = None,
    ) -> tuple[NDArray[np.int64], NDArray[np.int8], NDArray[np.float64]]:
        """Pick examples to pseudolabel.

        Parameters
        ----------
        scores
            Model score of every example.
        labels
            Current labels: ``1`` relevant, ``-1`` non-relevant, ``0`` unlabelled.
        rng
            Seeded random generator.
        no_evidence
            The score of a document that shares nothing with the model; a pick scoring
            no higher is not labelled relevant (``None``: no such score).

        Returns
        -------
        (indices, labels, weights)
            New pseudolabels for previously unlabelled examples only.
        """
        s = np.asarray(scores, dtype=np.float64)
        lab = np.asarray(labels)
        n = s.size
        order = np.argsort(-s, kind="stable")  # order[r] has rank r + 1
        key = rng.random(n)  # one key per example, in example order (see the module doc)
        out_idx: list[NDArray[np.int64]] = []
        out_lab: list[NDArray[np.int8]] = []
        out_w: list[NDArray[np.float64]] = []
        top = order[: min(self.max_pos_rank, n)]
        n_pos = min(round(self.pos_fraction * self.max_pos_rank), top.size) if n >= self.min_pool else 0
        if n_pos > 0:
            picked = _smallest(top, key, n_pos)
            picked = picked[lab[picked] == 0]
            if no_evidence is not None:
                picked = picked[s[picked] > no_evidence]
            out_idx.append(picked.astype(np.int64))
            out_lab.append(np.ones(picked.size, dtype=np.int8))
            out_w.append(np.full(picked.size, self.pos_weight))
        bottom = order[self.min_neg_rank - 1 :] if self.min_neg_rank <= n else order[:0]
        n_neg = min(round(self.neg_fraction * max(n - self.min_neg_rank + 1, 0)), bottom.size)
        if n_neg > 0:
            picked = _smallest(bottom, key, n_neg)
            picked = picked[lab[picked] == 0]
            if out_idx:
                picked = np.setdiff1d(picked, out_idx[0], assume_unique=True)
            out_idx.append(picked.astype(np.int64))
            out_lab.append(np.full(picked.size, -1, dtype=np.int8))
            out_w.append(np.full(picked.size, self.neg_weight))
        if not out_idx:
            return np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.float64)
        return np.concatenate(out_idx), np.concatenate(out_lab), np.concatenate(out_w)


def _smallest(candidates: NDArray[np.int64], key: NDArray[np.float64], m: int) -> NDArray[np.int64]:
    """The ``m`` of ``candidates`` with the smallest keys, in increasing order of key."""
    k = key[candidates]
    if m < candidates.size:
        part = np.argpartition(k, m - 1)[:m]
        return candidates[part[np.argsort(k[part], kind="stable")]]
    return candidates[np.argsort(k, kind="stable")]
