"""A profile bagged over pseudolabel draws: several profiles of one category, one classifier.

A profile's pseudo-negatives and pseudo-positives are a random draw (its ``seed``), and
which draw it gets moves what it delivers a lot. A :class:`BaggedProfile` holds ``B``
profiles of the same category trained the same way from the seeds ``seed .. seed+B-1``
(its *members*): every judgment is learned by all of them, and a document is scored by
all of them and delivered on one joint rule. On Reuters-21578 five members deciding on
their mean margin beat the same seeds run singly in every group of seeds measured
(validation split, +0.012 / +0.015 macro T11SU / T11F; ``benchmarks/engine_bagging.py``,
docs/engine.md). It costs ``B`` times the judgments and the state of one profile, and
``B`` times the scoring but for linear bags (below).

A bagged profile is a classifier like any other: a score and a threshold, delivered
when the score reaches the threshold, so a :class:`~sift.filters.bank.ProfileBank`, the
replay and the streaming service take it where they take a :class:`Profile` (the bank
stacks its members' models with the other profiles', or a linear bag's one vector, below).
Its score is the rule's statistic over the members (``rule``):

* ``"margin"`` (default): the members' mean ``score - threshold``, a member answering No
  to everything (threshold ``+inf``) counting ``-1``; threshold 0.
* ``"abstain"``: the same mean over the members with a finite threshold only; threshold
  0, or ``+inf`` while every member answers No.
* ``"vote"``: the share of the members that would deliver the document; delivered on
  more than half (the threshold is the float just above 0.5).

Under the margin and abstain rules a bag of linear members (Rocchio) is itself linear:
its score is ``x . w - c`` with ``w`` the mean of the counted members' coefficient
vectors and ``c`` the mean of their thresholds (and of the silenced members' -1), so
it is scored as one vector (:meth:`BaggedProfile.merged`), as cheap as one profile,
instead of ``B`` (the same value up to the rounding of the sums).

>>> from sift.filters.vectorize import Vectorizer
>>> train = ["wheat crop", "oil price", "gold mine", "wheat exports", "oil output"]
>>> v = Vectorizer(n_features=2**12).fit(train)
>>> X = v.transform(train)
>>> p = BaggedProfile.of("oil", 3, query="oil", pseudolabel={})
>>> p.fit(v.transform(["oil"]), X, positives=[1, 4])
>>> [m.seed for m in p.members], p.threshold_
([0, 1, 2], 0.0)
>>> p.decide(v.transform(["oil price", "gold"])).tolist()
[True, False]
>>> p.learn_one(v.transform(["oil price"]), relevant=True)
>>> [m.n_judged_ for m in p.members]
[1, 1, 1]
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from sift.filters.base import init_params
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.profile import Profile, _after_version, check_documents
from sift.filters.rocchio import Rocchio
from sift.filters.sparse import restrict
from sift.filters.state import STATE_VERSION, check_version

RULES = ("margin", "abstain", "vote")

#: the most members a bagged profile may have (each is a whole profile's state and work)
MAX_BAGS = 25

_VERSION = operator.attrgetter("version_")

#: the vote rule's threshold: more than half of the members
_MAJORITY = math.nextafter(0.5, math.inf)


def _check_rule(rule: Any) -> str:
    if rule not in RULES:
        raise ParameterError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    return str(rule)


def bag_threshold(thresholds: NDArray[np.float64], rule: str = "margin") -> Any:
    """The bag's threshold from its members' thresholds (see the module): a float from
    ``(B,)``, or one per profile from ``(B, k)`` (``k`` profiles of ``B`` members each)."""
    _check_rule(rule)
    T = np.asarray(thresholds, dtype=np.float64)
    if T.ndim == 1:
        if rule == "vote":
            return _MAJORITY
        return math.inf if rule == "abstain" and not np.isfinite(T).any() else 0.0
    if rule == "vote":
        return np.full(T.shape[1:], _MAJORITY)
    out = np.zeros(T.shape[1:])
    if rule == "abstain":
        out[~np.isfinite(T).any(axis=0)] = math.inf
    return out


def bag_scores(scores: NDArray[np.float64], thresholds: NDArray[np.float64],
               rule: str = "margin") -> NDArray[np.float64]:
    """The bag's score of each document from its members' scores and thresholds.

    Parameters
    ----------
    scores
        ``(B, n)``: every member's scores of ``n`` documents (members first); or
        ``(B, n, k)`` for ``k`` bagged profiles of ``B`` members each.
    thresholds
        ``(B,)``: every member's threshold (``inf``: it answers No); ``(B, k)`` with
        ``k`` profiles.
    rule
        ``"margin"``, ``"abstain"`` or ``"vote"`` (see the module).

    Examples
    --------
    >>> S = np.array([[0.5, 0.1], [0.5, 0.1], [0.5, 0.1]])
    >>> T = np.array([0.4, 0.2, np.inf])
    >>> bag_scores(S, T, "margin").round(3).tolist()     # (0.1 + 0.3 - 1) / 3, ...
    [-0.2, -0.467]
    >>> bag_scores(S, T, "abstain").round(3).tolist()    # over the two finite members
    [0.2, -0.2]
    >>> bag_scores(S, T, "vote").round(3).tolist()
    [0.667, 0.0]
    """
    _check_rule(rule)
    S = np.asarray(scores, dtype=np.float64)
    T = np.asarray(thresholds, dtype=np.float64)
    T = T.reshape((-1,) + (1,) * (S.ndim - 1)) if T.ndim == 1 else T[:, None]
    if rule == "vote":
        return np.asarray((S >= T).mean(axis=0), dtype=np.float64)
    finite = np.isfinite(T)
    margin = S - np.where(finite, T, 0.0)
    if rule == "abstain":
        n = finite.sum(axis=0)
        total = np.where(finite, margin, 0.0).sum(axis=0)
        return np.asarray(np.where(n > 0, total / np.maximum(n, 1), 0.0), dtype=np.float64)
    return np.asarray(np.where(finite, margin, -1.0).mean(axis=0), dtype=np.float64)


def bagged_delivery(scores: NDArray[np.float64], thresholds: NDArray[np.float64],
                    rule: str = "margin") -> NDArray[np.bool_]:
    """Which documents the members deliver together: ``bag_scores >= bag_threshold``.

    >>> S = np.full((3, 2), 0.5)
    >>> bagged_delivery(S, np.array([0.4, 0.4, 0.6]), "margin").tolist()
    [True, True]
    """
    T = np.asarray(thresholds, dtype=np.float64)
    return np.asarray(bag_scores(scores, T, rule) >= bag_threshold(T, rule))


def _check_members(members: Sequence[Profile]) -> None:
    """Members that can make one bag (:class:`ParameterError` if not): distinct objects
    (one profile twice would learn every judgment twice), all trained or none, and the
    trained ones of one width, one update policy and the same judgments applied,
    pending and ignored (every judgment reaches every member; the bag's counts are its
    first member's). They may differ otherwise: their seeds, and even their query or
    model (views of the profile, see ``benchmarks/engine_bag_views.py``)."""
    if len({id(m) for m in members}) != len(members):
        raise ParameterError("members must be distinct Profile objects (one profile given twice "
                             "would learn every judgment twice)")
    fitted = [m._fitted for m in members]
    if any(fitted) and not all(fitted):
        raise ParameterError(f"members must be all trained or all untrained, got members "
                             f"{[i for i, f in enumerate(fitted) if not f]} untrained")
    first = members[0]
    for i, m in enumerate(members[1:], 1):
        if m.update != first.update:
            raise ParameterError(f"members must share one update policy, got {first.update!r} "
                                 f"and {m.update!r} (member {i})")
        if not fitted[0]:
            continue
        for field in ("n_features_", "n_judged_", "n_pending_", "n_ignored_"):
            if getattr(m, field) != getattr(first, field):
                raise ParameterError(f"members must have the same {field}, got "
                                     f"{getattr(first, field)} and {getattr(m, field)} (member {i})")


class BaggedProfile:
    """``B`` profiles of one category (its members), deciding together.

    Parameters
    ----------
    members
        The member profiles (at least one, at most :data:`MAX_BAGS`, all of the same
        name; each trained from its own pseudolabel seed). :meth:`of` makes them.
    rule
        How the members decide together (see the module).

    Attributes
    ----------
    threshold_, version_, n_judged_, n_relevant_
        The bag's threshold (see the module); the sum of the members' model versions
        (it changes whenever a member's model or threshold does); the judgments every
        member has learned, and the relevant ones among them.

    Examples
    --------
    >>> from sift.filters.vectorize import Vectorizer
    >>> train = ["wheat exports rose", "wheat harvest delayed", "wheat prices firm",
    ...          "oil prices fell", "bank rates unchanged", "oil output cut"]
    >>> vec = Vectorizer(n_features=2**10).fit(train)
    >>> bag = BaggedProfile.of("wheat", 3, query="wheat",
    ...                        pseudolabel={"max_pos_rank": 3, "pos_fraction": 0.5, "min_pool": 0})
    >>> bag.fit(vec.transform(["wheat"]), vec.transform(train), positives=[0],
    ...         feature_weights=vec.feature_weights())
    >>> len(bag.member_thresholds), bag.threshold_  # the mean margin is compared with 0
    (3, 0.0)
    >>> bag.decide(vec.transform(["wheat harvest", "oil prices"])).tolist()
    [True, False]
    """

    def __init__(self, members: Sequence[Profile], rule: str = "margin") -> None:
        if isinstance(members, Profile) or not isinstance(members, Sequence):
            raise ParameterError(f"members must be a list of profiles, got {type(members).__name__}")
        if not members or len(members) > MAX_BAGS:
            raise ParameterError(f"members must hold 1 to {MAX_BAGS} profiles, got {len(members)}")
        if not all(isinstance(m, Profile) for m in members):
            raise ParameterError("members must be Profile objects")
        names = {m.name for m in members}
        if len(names) != 1:
            raise ParameterError(f"members must all be the same profile, got names {sorted(names)!r}")
        _check_members(members)
        self.members = list(members)
        self.rule = _check_rule(rule)
        self._merged: tuple[tuple[Any, ...], tuple[NDArray[np.int64], NDArray[np.float64], float]] | None = None
        #: the threshold and the version it is of (a member's threshold changes only
        #: with its version)
        self._threshold: tuple[int, float] | None = None

    def get_params(self) -> dict[str, Any]:
        """The hyperparameters given to :meth:`__init__`, by name."""
        return init_params(self)

    @classmethod
    def of(cls, name: str, bags: int, *, rule: str = "margin", seed: int = 0,
           **params: Any) -> BaggedProfile:
        """``bags`` untrained profiles ``Profile(name, seed=seed + b, **params)``.

        >>> [m.seed for m in BaggedProfile.of("x", 3, seed=7).members]
        [7, 8, 9]
        """
        if isinstance(bags, bool) or not isinstance(bags, numbers.Integral) \
                or not 1 <= bags <= MAX_BAGS:
            raise ParameterError(f"bags must be an integer in [1, {MAX_BAGS}], got {bags!r}")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise ParameterError(f"seed must be an integer, got {seed!r}")
        return cls([Profile(name, seed=int(seed) + b, **params) for b in range(int(bags))], rule)

    # -- what the bank and the service read ------------------------------------------------
    @property
    def name(self) -> str:
        return self.members[0].name

    @property
    def n_features_(self) -> int:
        """The width of the documents the bag scores (its members', once trained)."""
        return self.members[0].n_features_

    def _check_fitted(self) -> None:
        for m in self.members:
            m._check_fitted()

    @property
    def bags(self) -> int:
        return len(self.members)

    @property
    def query(self) -> str:
        return self.members[0].query

    @property
    def model(self) -> str:
        return self.members[0].model

    @property
    def update(self) -> str | int:
        return self.members[0].update

    @property
    def member_thresholds(self) -> NDArray[np.float64]:
        return np.fromiter((m.threshold_ for m in self.members), dtype=np.float64,
                           count=len(self.members))

    @property
    def threshold_(self) -> float:
        version = self.version_
        if self._threshold is None or self._threshold[0] != version:
            self._threshold = (version, float(bag_threshold(self.member_thresholds, self.rule)))
        return self._threshold[1]

    @property
    def version_(self) -> int:
        return sum(map(_VERSION, self.members))

    def continue_versions(self, previous: int) -> None:
        """:meth:`Profile.continue_versions` of the bag: its ``version_`` (the sum of
        the members') becomes ``previous`` plus its own, the first member's taking the
        difference."""
        first = self.members[0]
        first.version_ = _after_version(previous, self.version_) - (self.version_ - first.version_)

    @property
    def n_judged_(self) -> int:
        return self.members[0].n_judged_

    @property
    def n_relevant_(self) -> int:
        return self.members[0].n_relevant_

    @property
    def n_pending_(self) -> int:
        return self.members[0].n_pending_

    def judgments(self) -> tuple[sp.csr_matrix, NDArray[np.bool_], NDArray[np.float64]]:
        """The real judgments the bag holds, oldest first (every member learns them all:
        the first member's, :meth:`Profile.judgments`)."""
        return self.members[0].judgments()

    # -- training and scoring --------------------------------------------------------------
    def fit(self, query_vector: sp.csr_matrix | None, X_train: sp.csr_matrix | None = None, *,
            positives: ArrayLike = (), labels: ArrayLike | None = None,
            feature_weights: NDArray[np.float64] | None = None,
            n_features: int | None = None) -> None:
        """:meth:`Profile.fit` of every member, with the same arguments."""
        for m in self.members:
            m.fit(query_vector, X_train, positives=positives, labels=labels,
                  feature_weights=feature_weights, n_features=n_features)

    @property
    def linear(self) -> bool:
        """Whether the bag scores as one linear model (see the module): the margin or
        abstain rule over Rocchio members."""
        return self.rule != "vote" and all(isinstance(m.model_, Rocchio) for m in self.members)

    def merged_key(self) -> tuple[Any, ...]:
        """What :meth:`merged` depends on: the members' versions and thresholds."""
        return (*(m.version_ for m in self.members), *self.member_thresholds.tolist())

    def merged(self) -> tuple[NDArray[np.int64], NDArray[np.float64], float]:
        """``(columns, coefficients, offset)`` of a :attr:`linear` bag: its score of ``x``
        is ``x[columns] . coefficients - offset``. The counted members (all under the
        margin rule, those with a finite threshold under abstain) give the mean of their
        coefficient vectors and of their thresholds, a silenced member ``-1`` (margin).
        Kept until a member's version or threshold changes."""
        if not self.linear:
            raise ParameterError(f"bag {self.name!r} is not linear (rule {self.rule!r}, models "
                                 f"{sorted({m.model for m in self.members})})")
        key = self.merged_key()
        if self._merged is None or self._merged[0] != key:
            T = self.member_thresholds
            finite = np.isfinite(T)
            n = len(T) if self.rule == "margin" else int(np.count_nonzero(finite))
            cols = np.zeros(0, dtype=np.int64)
            vals = np.zeros(0)
            offset = 0.0
            if n:
                parts = [cast(Rocchio, m.model_).coef()[:2]
                         for m, f in zip(self.members, finite, strict=True) if f]
                if parts:
                    cols, inverse = np.unique(np.concatenate([c for c, _ in parts]), return_inverse=True)
                    vals = np.zeros(cols.size)
                    np.add.at(vals, inverse, np.concatenate([v for _, v in parts]))
                    vals /= n
                silenced = len(T) - int(np.count_nonzero(finite)) if self.rule == "margin" else 0
                offset = (float(T[finite].sum()) + silenced) / n
            self._merged = (key, (cols.astype(np.int64), vals, offset))
        return self._merged[1]

    def combine(self, member_scores: NDArray[np.float64]) -> NDArray[np.float64]:
        """The bag's scores from the members' (``(B, ...)``, members first), by the rule
        (a linear bag's :meth:`score` takes :meth:`merged` instead: the same up to rounding)."""
        return bag_scores(member_scores, self.member_thresholds, self.rule)

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """The bag's score of each row of ``X`` (documents of :attr:`n_features_` columns
        with finite values, see :func:`~sift.filters.profile.check_documents`)."""
        self._check_fitted()
        X = check_documents(X, self.n_features_)
        if self.linear:
            cols, vals, offset = self.merged()
            return np.asarray(restrict(X, cols) @ vals, dtype=np.float64) - offset
        return self.combine(np.stack([m.score(X) for m in self.members]))

    def decide(self, X: sp.csr_matrix) -> NDArray[np.bool_]:
        """``score >= threshold_`` for each row of ``X``."""
        return np.asarray(self.score(X) >= self.threshold_)

    # -- feedback: every member learns every judgment ------------------------------------------
    def learn_one(self, x: sp.csr_matrix, relevant: bool, weight: float = 1.0) -> None:
        for m in self.members:
            m.learn_one(x, relevant, weight)

    def learn_many(self, X: sp.csr_matrix, relevant: ArrayLike, weights: ArrayLike | None = None) -> None:
        for m in self.members:
            m.learn_many(X, relevant, weights)

    def relabel(self, x: sp.csr_matrix, relevant: bool, weight: float = 1.0) -> bool:
        """:meth:`Profile.relabel` of every member (each learned the judgment): ``True``
        when every member corrected it where it is held, ``False`` when one had evicted
        it (members of one bag learn the same judgments, but their example sets, of
        different pseudolabels, start evicting judgments at different times). The arguments
        are checked, and a judgment a member never learned refused, before any member
        changes."""
        self.members[0].check_relabel(x, relevant, weight)
        for m in self.members[1:]:
            m._check_fitted()
        if self.update != "never" and self.find_judgment(x, not relevant, weight) is None:
            raise FilterError(Profile._never_learned(relevant, float(weight)))
        done = [m.relabel(x, relevant, weight) for m in self.members]
        return all(done)

    def find_judgment(self, x: sp.csr_matrix, relevant: bool, weight: float = 1.0) -> str | None:
        """:meth:`Profile.find_judgment` of the bag: ``None`` when a member never learned
        the judgment (members learn the same judgments, so none did), ``"evicted"`` when
        a member may have evicted it, else where the first member has it."""
        where = [m.find_judgment(x, relevant, weight) for m in self.members]
        if None in where:
            return None
        return "evicted" if "evicted" in where else where[0]

    def relearn(self, calls: Sequence[tuple[sp.csr_matrix, ArrayLike]]) -> None:
        for m in self.members:
            m.relearn(calls)

    def relearn_rows(self, X: sp.csr_matrix, relevant: ArrayLike, sizes: Sequence[int]) -> None:
        for m in self.members:
            m.relearn_rows(X, relevant, sizes)

    def flush(self) -> None:
        for m in self.members:
            m.flush()

    # -- state -----------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """A JSON-safe, versioned snapshot: the rule and every member's state.

        It also carries, as a profile's state does, the ``params`` (the first member's,
        with ``bags`` and ``rule``), ``threshold`` (``None`` for ``+inf``),
        ``model_version`` and ``n_judged``, for readers that summarise a state without
        rebuilding it (``sift profiles ls``, the web views); :meth:`from_state` derives
        them from the members instead.
        """
        thr = self.threshold_
        params = {**self.members[0].get_params(), "bags": self.bags, "rule": self.rule}
        return {"kind": "bagged_profile", "version": STATE_VERSION, "rule": self.rule,
                "params": params, "threshold": None if math.isinf(thr) else thr,
                "model_version": self.version_, "n_judged": self.n_judged_,
                "members": [m.to_state() for m in self.members]}

    @classmethod
    def from_state(cls, state: Any, feature_weights: NDArray[np.float64] | None = None,
                   n_features: int | None = None) -> BaggedProfile:
        """Rebuild a bagged profile from :meth:`to_state` output, validating it."""
        s = check_version(state, "bagged_profile")
        members = s.get("members")
        if not isinstance(members, list) or not 1 <= len(members) <= MAX_BAGS:
            raise StateError(f"bagged_profile: members must be a list of 1 to {MAX_BAGS} profile states")
        loaded = [Profile.from_state(m, feature_weights, n_features) for m in members]
        widths = sorted({m.n_features_ for m in loaded})
        if len(widths) > 1:
            raise StateError(f"bagged_profile: members of different widths {widths}")
        try:
            return cls(loaded, str(s.get("rule")))
        except ParameterError as exc:
            raise StateError(f"bagged_profile: {exc}") from None


def load_profile(state: Any, feature_weights: NDArray[np.float64] | None = None,
                 n_features: int | None = None) -> Profile | BaggedProfile:
    """A :class:`Profile` or :class:`BaggedProfile` from its ``to_state`` output (by its
    ``kind``)."""
    if isinstance(state, dict) and state.get("kind") == "bagged_profile":
        return BaggedProfile.from_state(state, feature_weights, n_features)
    return Profile.from_state(state, feature_weights, n_features)
