"""Many profiles scored at once.

Profiles are grouped by model class; each group is stacked (see
:meth:`~sift.filters.base.ScoringModel.build_stack`), so a batch of documents is
scored against every Rocchio profile by one sparse product, against every
Kantor profile by two, and so on. A stack is rebuilt lazily, at most once per
scoring call, when a member's ``version_`` changed. A bagged profile
(:class:`~sift.filters.bagging.BaggedProfile`) has its members stacked with the
other profiles, and its score combined from theirs.

>>> from sift.filters.vectorize import Vectorizer
>>> train = ["wheat crop", "oil price", "gold mine", "wheat exports", "oil output"]
>>> v = Vectorizer(n_features=2**12).fit(train)
>>> X = v.transform(train)
>>> bank = ProfileBank()
>>> for name, pos in (("wheat", [0, 3]), ("oil", [1, 4])):
...     p = Profile(name, query=name, pseudolabel={})
...     p.fit(v.transform([name]), X, positives=pos)
...     bank.add(p)
>>> [(d.row, d.profile) for d in bank.decide(v.transform(["oil price", "wheat and oil"]))]
[(0, 'oil'), (1, 'wheat'), (1, 'oil')]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import NamedTuple, cast

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sift.filters.bagging import BaggedProfile, bag_scores, bag_threshold
from sift.filters.base import Stack
from sift.filters.errors import FilterError
from sift.filters.profile import Profile, check_documents, check_rows
from sift.filters.sparse import ColumnStack, nonzero_2d, stack_rows

#: what a bank holds: a profile, or a bagged profile (several profiles deciding together)
AnyProfile = Profile | BaggedProfile


class Hit(NamedTuple):
    """A delivery: row of the batch, profile, score, threshold and model version.

    A named tuple: a batch against many profiles makes one per delivery (several per
    document against 1,000 profiles), and a tuple is made in a fraction of a frozen
    dataclass's time.
    """

    row: int
    profile: str
    score: float
    threshold: float
    model_version: int


class ProfileBank:
    """An ordered set of profiles with stacked scoring.

    Examples
    --------
    >>> from sift.filters.profile import Profile
    >>> from sift.filters.vectorize import Vectorizer
    >>> train = ["wheat exports rose", "wheat harvest delayed", "wheat prices firm",
    ...          "oil prices fell", "bank rates unchanged", "oil output cut"]
    >>> vec = Vectorizer(n_features=2**10).fit(train)
    >>> bank = ProfileBank()
    >>> for name, positives in (("wheat", [0, 1]), ("oil", [3, 5])):
    ...     p = Profile(name, query=name, pseudolabel={})
    ...     p.fit(vec.transform([name]), vec.transform(train), positives=positives,
    ...           feature_weights=vec.feature_weights())
    ...     bank.add(p)
    >>> hits = bank.decide(vec.transform(["wheat harvest", "oil prices", "bank rates"]))
    >>> [(h.row, h.profile) for h in hits]  # one sparse product for all profiles
    [(0, 'wheat'), (1, 'oil')]
    """

    def __init__(self) -> None:
        self._profiles: dict[str, AnyProfile] = {}
        self._stacks: dict[type, tuple[tuple[tuple[str, int], ...], Stack, list[int]]] = {}
        #: the profiles in order and their names, rebuilt after an add or a remove
        self._order: tuple[list[AnyProfile], list[str]] | None = None
        #: the scoring profiles (a bagged profile's members in its place), the bagged ones
        #: grouped by rule and size, and where the others are (see _scoring)
        self._leaves: tuple[list[Profile], list[tuple[str, NDArray[np.int64], NDArray[np.int64]]],
                            list[int], list[int]] | None = None
        #: the linear bags' positions (see _scoring) and their stack of merged vectors
        self._linear_at: list[int] = []
        self._linear_stack: tuple[list[tuple[str, int]], ColumnStack, NDArray[np.float64]] | None = None
        #: the last stack groups and the members' versions they were built for
        self._groups: tuple[list[int], list[tuple[Stack, list[int]]]] | None = None

    def __len__(self) -> int:
        return len(self._profiles)

    def __contains__(self, name: object) -> bool:
        return name in self._profiles

    def __getitem__(self, name: str) -> AnyProfile:
        try:
            return self._profiles[name]
        except KeyError:
            raise FilterError(f"no profile named {name!r}") from None

    def __iter__(self) -> Iterator[AnyProfile]:
        return iter(self._profiles.values())

    @property
    def names(self) -> list[str]:
        return list(self._profiles)

    def add(self, profile: AnyProfile) -> None:
        """Add or replace a profile: a trained :class:`Profile` or
        :class:`~sift.filters.bagging.BaggedProfile` of the bank's width (that of the
        profiles it holds; :class:`FilterError` if not)."""
        if not isinstance(profile, Profile | BaggedProfile):
            raise FilterError(f"a bank holds Profile or BaggedProfile objects, got "
                              f"{type(profile).__name__}")
        profile._check_fitted()
        other = next((p for p in self._profiles.values() if p.name != profile.name), None)
        if other is not None and other.n_features_ != profile.n_features_:
            raise FilterError(f"profile {profile.name!r} scores documents of "
                              f"{profile.n_features_} columns, the bank's profiles "
                              f"{other.n_features_} (another vectorizer?)")
        old = self._profiles.get(profile.name)
        self._profiles[profile.name] = profile
        self._order = self._groups = self._leaves = None
        self._linear_stack = None
        if old is not None and old is not profile:
            # the stacks know their members by name and version: a replacement with the
            # version number of the profile it replaces (a re-created profile fitted as
            # many times) would pass for it, and the old model would go on scoring
            self._stacks.clear()

    def remove(self, name: str) -> AnyProfile | None:
        """Remove a profile; returns it, or ``None`` if there was none."""
        self._order = self._groups = self._leaves = None
        self._linear_stack = None
        if name in self._profiles:
            # as for a replacement (see add): a profile added later under this name with
            # the version number of this one would pass for it in the stacks
            self._stacks.clear()
        return self._profiles.pop(name, None)

    def _ordered(self) -> tuple[list[AnyProfile], list[str]]:
        if self._order is None:
            profiles = list(self._profiles.values())
            self._order = (profiles, [p.name for p in profiles])
        return self._order

    def _scoring(self) -> tuple[list[Profile], list[tuple[str, NDArray[np.int64], NDArray[np.int64]]],
                                list[int], list[int]]:
        """``(leaves, bagged, plain, plain_leaves)``: the profiles whose models are
        stacked (each bagged profile's members in its place, but for linear bags, which
        are stacked as one vector each, see :meth:`_linear`); the other bagged profiles
        grouped by rule and size, ``(rule, profiles (k,), their members' leaves (k,
        B))``; and the profiles that are not bagged, with their leaf index."""
        if self._leaves is None:
            leaves: list[Profile] = []
            groups: dict[tuple[str, int], tuple[list[int], list[list[int]]]] = {}
            plain: list[int] = []
            plain_leaves: list[int] = []
            linear: list[int] = []
            for j, p in enumerate(self._ordered()[0]):
                if isinstance(p, BaggedProfile) and p.linear:
                    linear.append(j)
                elif isinstance(p, BaggedProfile):
                    at, members = groups.setdefault((p.rule, p.bags), ([], []))
                    at.append(j)
                    members.append(list(range(len(leaves), len(leaves) + p.bags)))
                    leaves.extend(p.members)
                else:
                    plain.append(j)
                    plain_leaves.append(len(leaves))
                    leaves.append(p)
            bagged = [(rule, np.array(at, dtype=np.int64), np.array(members, dtype=np.int64))
                      for (rule, _), (at, members) in groups.items()]
            self._leaves = (leaves, bagged, plain, plain_leaves)
            self._linear_at = linear
        return self._leaves

    def _linear(self) -> tuple[list[int], ColumnStack | None, NDArray[np.float64]]:
        """The linear bags (:attr:`BaggedProfile.linear`): their positions, one stack of
        their merged vectors (each replaced when its bag's members change) and their
        offsets."""
        self._scoring()
        at = self._linear_at
        if not at:
            return at, None, np.zeros(0)
        profiles = self._ordered()[0]
        bags = [cast(BaggedProfile, profiles[j]) for j in at]
        # a bag's version (its members' summed) changes whenever a member's model or
        # threshold does: unchanged versions, nothing to do
        keys = [(b.name, b.version_) for b in bags]
        old = self._linear_stack
        if old is not None and old[0] == keys:
            return at, old[1], old[2]
        merged = [b.merged() for b in bags]
        if old is not None and [k[0] for k in old[0]] == [k[0] for k in keys]:
            stack = old[1]
            for i, (was, now) in enumerate(zip(old[0], keys, strict=True)):
                if was != now:
                    stack.replace(i, merged[i][0], merged[i][1])
        else:
            stack = ColumnStack(bags[0].members[0].n_features_, [(c, v) for c, v, _ in merged])
        offsets = np.array([off for _, _, off in merged])
        self._linear_stack = (keys, stack, offsets)
        return at, stack, offsets

    def learn_many(self, judgments: Iterable[tuple[str, sp.csr_matrix, bool]]) -> list[str]:
        """Apply a batch of ``(profile, document vector, relevant)`` judgments.

        Each profile gets its judgments in their order through
        :meth:`Profile.learn_many` (one re-threshold per profile per batch, the same
        final state as one by one); its stacked scoring vector is refreshed on the next
        scoring call. Returns the names of the profiles whose model or threshold
        changed. Unknown profile names, labels that are not booleans (or 1 and 0) and
        rows a profile would refuse (not one row of its width, values not finite or over
        its limit) raise :class:`FilterError` before anything is applied, so a batch is
        applied whole or not at all.
        """
        groups: dict[str, tuple[list[sp.csr_matrix], list[bool]]] = {}
        for item in judgments:
            if not isinstance(item, tuple | list) or len(item) != 3:
                raise FilterError(f"a judgment must be (profile, document vector, relevant), "
                                  f"got {item!r:.80}")
            name, x, relevant = item
            if name not in self._profiles:
                raise FilterError(f"no profile named {name!r}")
            if not isinstance(relevant, bool | np.bool_ | int | float | np.number) \
                    or relevant not in (0, 1):  # not bool(): "false" would read as relevant
                raise FilterError(f"relevant must be a boolean (or 1 or 0), got {relevant!r} "
                                  f"for profile {name!r}")
            width = self._profiles[name].n_features_
            if not sp.issparse(x) or x.shape != (1, width):
                raise FilterError(f"the document vector of a judgment for profile {name!r} "
                                  f"must be a sparse 1 x {width} row, got "
                                  f"{getattr(x, 'shape', type(x).__name__)}")
            rows, rels = groups.setdefault(name, ([], []))
            rows.append(x)
            rels.append(bool(relevant))
        stacked = {}
        for name, (rows, _) in groups.items():
            X = stack_rows(rows)
            try:
                check_rows(X)
            except FilterError as exc:
                raise FilterError(f"profile {name!r}: {exc}") from None
            stacked[name] = X
        changed = []
        for name, (_, rels) in groups.items():
            p = self._profiles[name]
            before = p.version_
            p.learn_many(stacked[name], rels)
            if p.version_ != before:
                changed.append(name)
        return changed

    def thresholds(self) -> NDArray[np.float64]:
        leaves, bagged, plain, plain_leaves = self._scoring()
        if not bagged and not self._linear_at:
            return np.fromiter((p.threshold_ for p in leaves), dtype=np.float64, count=len(leaves))
        thr = self._leaf_thresholds()
        out = np.empty(len(self._profiles))
        out[plain] = thr[plain_leaves]
        profiles = self._ordered()[0]
        for j in self._linear_at:
            out[j] = profiles[j].threshold_
        for rule, at, members in bagged:
            out[at] = bag_threshold(thr[members].T, rule)
        return out

    def _leaf_thresholds(self) -> NDArray[np.float64]:
        leaves = self._scoring()[0]
        return np.fromiter((p.threshold_ for p in leaves), dtype=np.float64, count=len(leaves))

    def _stack_groups(self) -> list[tuple[Stack, list[int]]]:
        """The stacks of the profiles' models, by model class, and their columns: those of
        the last call while no member changed (its ``version_``) and none was added or
        removed, so a scoring call against 1,000 unchanged profiles costs one pass over
        their versions."""
        profiles = self._scoring()[0]
        versions = [p.version_ for p in profiles]
        if self._groups is not None and self._groups[0] == versions:
            return self._groups[1]
        out = self._build_groups(profiles)
        self._groups = (versions, out)
        return out

    def _build_groups(self, profiles: list[Profile]) -> list[tuple[Stack, list[int]]]:
        groups: dict[type, list[int]] = {}
        for j, p in enumerate(profiles):
            groups.setdefault(type(p.model_), []).append(j)
        out = []
        for cls, cols in groups.items():
            key = tuple((profiles[j].name, profiles[j].version_) for j in cols)
            cached = self._stacks.get(cls)
            stack = None
            if cached is not None and cached[0] == key:
                stack = cached[1]
            elif cached is not None and [k[0] for k in cached[0]] == [k[0] for k in key]:
                # same profiles in the same order: replace only the changed ones
                stack = cached[1]
                for i, (old, new) in enumerate(zip(cached[0], key, strict=True)):
                    if old[1] != new[1] and not stack.update(i, profiles[cols[i]].model_):
                        stack = None
                        break
            if stack is None:
                stack = cls.build_stack([profiles[j].model_ for j in cols])  # type: ignore[attr-defined]
            self._stacks[cls] = (key, stack, cols)
            out.append((stack, cols))
        for cls in set(self._stacks) - set(groups):
            del self._stacks[cls]
        return out

    def score(self, X: sp.csr_matrix) -> NDArray[np.float64]:
        """Scores of every row of ``X`` against every profile, shape (n_docs, n_profiles):
        documents of the profiles' width with finite values (see
        :func:`~sift.filters.profile.check_documents`)."""
        first = next(iter(self._profiles.values()), None)
        X = sp.csr_matrix(X) if first is None else check_documents(X, first.n_features_)
        leaves, bagged, plain, plain_leaves = self._scoring()
        out = np.zeros((X.shape[0], len(leaves)))
        for stack, cols in self._stack_groups():
            out[:, cols] = stack.score(X)
        if not bagged and not self._linear_at:
            return out
        combined = np.zeros((X.shape[0], len(self._profiles)))
        combined[:, plain] = out[:, plain_leaves]
        lin_at, linear, offsets = self._linear()
        if linear is not None:  # as BaggedProfile.score computes them, bit for bit
            combined[:, lin_at] = linear.product(X) - offsets
        # each group of other bagged profiles of one rule and size at once: members
        # first, laid out as BaggedProfile.score lays them out, so that the bits are the same
        thr = self._leaf_thresholds()
        for rule, at, members in bagged:
            S = np.ascontiguousarray(out[:, members].transpose(2, 0, 1))
            combined[:, at] = bag_scores(S, thr[members].T, rule)
        return combined

    def decide(self, X: sp.csr_matrix) -> list[Hit]:
        """Every (document, profile) whose score reaches the profile's threshold, row-major."""
        scores = self.score(X)
        thr = self.thresholds()
        rows, cols = nonzero_2d(scores >= thr[None, :])
        profiles, names = self._ordered()
        versions = [p.version_ for p in profiles]
        at = cols.tolist()
        # tuple.__new__ mapped over the columns: a quarter of the time of Hit(...) per
        # delivery, which a profile set delivering a few times per document pays
        fields = zip(rows.tolist(), map(names.__getitem__, at), scores[rows, cols].tolist(),
                     thr[cols].tolist(), map(versions.__getitem__, at), strict=True)
        return list(map(tuple.__new__, repeat(Hit), fields))
