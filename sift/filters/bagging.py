"""Profiles bagged over pseudolabel draws: several banks of the same profiles, one decision.

A profile's pseudo-negatives and pseudo-positives are a random draw (its ``seed``), and
which draw it gets moves what it delivers a lot. A :class:`BaggedBank` holds ``B``
banks of the same profiles, trained the same way from ``B`` seeds: every document is
scored by all of them and delivered on one joint rule, and every judgment is learned
by all of them. On Reuters-21578 five members deciding on their mean margin beat the
same seeds run singly in every group of seeds measured (validation split, +0.012 /
+0.015 macro T11SU / T11F; ``benchmarks/engine_bagging.py``, docs/engine.md). It costs
``B`` times the scoring, the judgments and the state of one bank.

Rules (``rule``):

* ``"margin"`` (default): delivered when the members' mean ``score - threshold`` is at
  least 0; a member answering No to everything (threshold ``+inf``) counts ``-1``.
* ``"abstain"``: the same mean over the members with a finite threshold only (at least
  one needed).
* ``"vote"``: delivered when more than half of the members would deliver it.

>>> from sift.filters.profile import Profile
>>> from sift.filters.vectorize import Vectorizer
>>> train = ["wheat crop", "oil price", "gold mine", "wheat exports", "oil output"]
>>> v = Vectorizer(n_features=2**12).fit(train)
>>> X = v.transform(train)
>>> banks = []
>>> for seed in (0, 1, 2):
...     bank = ProfileBank()
...     for name, pos in (("wheat", [0, 3]), ("oil", [1, 4])):
...         p = Profile(name, query=name, pseudolabel={}, seed=seed)
...         p.fit(v.transform([name]), X, positives=pos)
...         bank.add(p)
...     banks.append(bank)
>>> bag = BaggedBank(banks)
>>> [(h.row, h.profile) for h in bag.decide(v.transform(["oil price", "wheat and oil"]))]
[(0, 'oil'), (1, 'wheat'), (1, 'oil')]
>>> bag.learn_one("oil", v.transform(["oil price"]), relevant=True)
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.bank import Hit, ProfileBank
from sift.filters.errors import ParameterError

RULES = ("margin", "abstain", "vote")


def bagged_delivery(scores: NDArray[np.float64], thresholds: NDArray[np.float64],
                    rule: str = "margin") -> NDArray[np.bool_]:
    """Which cells the members deliver together.

    Parameters
    ----------
    scores
        ``(B, n_docs, n_profiles)``: every member's scores.
    thresholds
        ``(B, n_profiles)``: every member's thresholds (``inf``: it answers No).
    rule
        ``"margin"``, ``"abstain"`` or ``"vote"`` (see the module).

    Returns
    -------
    ndarray of bool, shape (n_docs, n_profiles)

    Examples
    --------
    >>> S = np.full((3, 1, 2), 0.5)
    >>> T = np.array([[0.4, 0.2], [0.4, 0.2], [0.6, np.inf]])
    >>> bagged_delivery(S, T, "margin").tolist()  # b: (0.3 + 0.3 - 1) / 3 < 0
    [[True, False]]
    >>> bagged_delivery(S, T, "abstain").tolist()  # b: 0.3 over the two others
    [[True, True]]
    """
    if rule not in RULES:
        raise ParameterError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    S = np.asarray(scores, dtype=np.float64)
    T = np.asarray(thresholds, dtype=np.float64)[:, None, :]
    if rule == "vote":
        return np.asarray((S >= T).sum(axis=0) * 2 > S.shape[0])
    finite = np.isfinite(T)
    if rule == "abstain":
        margin = np.where(finite, S - np.where(finite, T, 0.0), 0.0)
        counted = np.broadcast_to(finite, S.shape).sum(axis=0)
        return np.asarray((counted > 0) & (margin.sum(axis=0) >= 0))
    margin = np.where(finite, S - np.where(finite, T, 0.0), -1.0)
    return np.asarray(margin.mean(axis=0) >= 0)


class BaggedBank:
    """``B`` banks of the same profiles, in the same order, deciding together.

    Parameters
    ----------
    banks
        The members (at least one; each trained from its own pseudolabel seed).
    rule
        How the members decide together (see :func:`bagged_delivery`).

    A delivery's :class:`~sift.filters.bank.Hit` carries the members' mean score, the
    mean of their finite thresholds (``inf`` when none is) and the sum of their model
    versions (it changes whenever a member changes).
    """

    def __init__(self, banks: Sequence[ProfileBank], rule: str = "margin") -> None:
        if not banks:
            raise ParameterError("banks must hold at least one bank")
        if rule not in RULES:
            raise ParameterError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
        names = banks[0].names
        if any(b.names != names for b in banks[1:]):
            raise ParameterError("the banks must hold the same profiles in the same order")
        self.banks = list(banks)
        self.rule = rule

    @property
    def names(self) -> list[str]:
        return self.banks[0].names

    def decide(self, X: sp.csr_matrix) -> list[Hit]:
        """Every (document, profile) the members deliver together, row-major."""
        S = np.stack([b.score(X) for b in self.banks])
        T = np.stack([b.thresholds() for b in self.banks])
        rows, cols = np.nonzero(bagged_delivery(S, T, self.rule))
        finite = np.isfinite(T)
        n_finite = finite.sum(axis=0)
        thr = np.where(n_finite > 0, np.where(finite, T, 0.0).sum(axis=0) / np.maximum(n_finite, 1), np.inf)
        mean_score = S.mean(axis=0)
        names = self.names
        versions = np.sum([[p.version_ for p in b] for b in self.banks], axis=0)
        return [Hit(r, names[j], float(mean_score[r, j]), float(thr[j]), int(versions[j]))
                for r, j in zip(rows.tolist(), cols.tolist(), strict=True)]

    def learn_one(self, name: str, x: sp.csr_matrix, relevant: bool) -> bool:
        """Learn one judgment in every member; whether any member's model or threshold
        changed."""
        changed = False
        for bank in self.banks:
            p = bank[name]
            before = p.version_
            p.learn_one(x, relevant)
            changed |= p.version_ != before
        return changed
