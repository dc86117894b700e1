"""The bank and bagged profiles used as a library (forty-fourth session's audit).

Each case failed before its fix: documents of another vectorizer's width scored and
delivered by a bank of kNN profiles and by a linear bag; a bank's batch of judgments
applied to its first profiles and then refused for a later one (so a retry learned those
twice); one profile given twice to a bag (every judgment learned twice); an untrained
bag scoring ``-1``; a NaN in a scored document crashing kNN deep inside, giving NaN for
Kantor and ignored by Rocchio; anything at all accepted by ``ProfileBank.add``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from sift.filters.bagging import BaggedProfile, bag_threshold, load_profile
from sift.filters.bank import ProfileBank
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer

TEXTS = ["wheat crop exports", "oil price rise", "gold mine output", "wheat tender egypt",
         "oil output opec", "gold bullion price", "corn crop", "crude oil", "silver mine",
         "wheat harvest", "oil tanker", "gold reserves"]
MODELS = ("rocchio", "kantor", "knn")


@pytest.fixture(scope="module")
def vec() -> Vectorizer:
    return Vectorizer(n_features=2**10).fit(TEXTS)


def fitted(vec: Vectorizer, name: str, model: str = "rocchio", **kw: Any) -> Profile:
    p = Profile(name, query=name, model=model, pseudolabel={}, **kw)
    pos = [i for i, t in enumerate(TEXTS) if name in t]
    p.fit(vec.transform([name]), vec.transform(TEXTS), positives=pos,
          feature_weights=vec.feature_weights())
    return p


def bag(vec: Vectorizer, name: str, n: int = 3, **kw: Any) -> BaggedProfile:
    b = BaggedProfile.of(name, n, query=name, pseudolabel={}, **kw)
    pos = [i for i, t in enumerate(TEXTS) if name in t]
    b.fit(vec.transform([name]), vec.transform(TEXTS), positives=pos,
          feature_weights=vec.feature_weights())
    return b


def wider(vec: Vectorizer) -> sp.csr_matrix:
    """The same documents vectorized by another (wider) vectorizer."""
    return Vectorizer(n_features=2**11).fit(TEXTS).transform(["wheat crop", "oil price"])


@pytest.mark.parametrize("model", MODELS)
def test_a_bank_refuses_documents_of_another_width(vec: Vectorizer, model: str) -> None:
    bank = ProfileBank()
    for name in ("wheat", "oil"):
        bank.add(fitted(vec, name, model))
    with pytest.raises(FilterError, match=r"^expected a matrix of 1024 columns, got \(2, 2048\)$"):
        bank.decide(wider(vec))
    with pytest.raises(FilterError, match="expected a matrix of 1024 columns"):
        bank.score(sp.csr_matrix(np.ones((1, 100))))


def test_a_bag_refuses_documents_of_another_width_and_scores_only_once_trained(vec: Vectorizer) -> None:
    b = bag(vec, "wheat")
    assert b.linear
    with pytest.raises(FilterError, match=r"expected a matrix of 1024 columns, got \(2, 2048\)"):
        b.decide(wider(vec))
    with pytest.raises(FilterError, match="'x' is not trained yet"):
        BaggedProfile.of("x", 3).score(sp.csr_matrix(np.eye(2, 8)))


@pytest.mark.parametrize("model", MODELS)
def test_a_scored_document_with_a_value_that_is_not_finite_is_refused(vec: Vectorizer, model: str) -> None:
    p = fitted(vec, "wheat", model)
    bank = ProfileBank()
    bank.add(p)
    for bad in (np.nan, np.inf):
        x = vec.transform(["wheat crop", "oil price"])
        x.data[-1] = bad
        for target in (p, bank):
            with pytest.raises(FilterError, match=rf"finite values, got {bad!r} in row 1$"):
                target.score(x)
    # a list of rows is a matrix, as the bank always took it
    dense = vec.transform(["wheat crop"]).toarray().tolist()
    np.testing.assert_array_equal(p.score(dense), p.score(vec.transform(["wheat crop"])))


def test_a_bank_applies_a_batch_of_judgments_whole_or_not_at_all(vec: Vectorizer) -> None:
    bank = ProfileBank()
    for name in ("wheat", "oil"):
        bank.add(fitted(vec, name))
    before = {p.name: (p.n_judged_, p.version_, p.threshold_) for p in bank}
    good = vec.transform(["wheat harvest"])
    nan = vec.transform(["oil tanker"])
    nan.data[:] = np.nan
    with pytest.raises(FilterError, match=r"^profile 'oil': document vectors must hold finite"):
        bank.learn_many([("wheat", good, True), ("oil", nan, False)])
    with pytest.raises(FilterError, match=r"profile 'oil' must be a sparse 1 x 1024 row, got \(2, 2048\)"):
        bank.learn_many([("wheat", good, True), ("oil", wider(vec), False)])
    with pytest.raises(FilterError, match="must be a sparse 1 x 1024 row, got"):
        bank.learn_many([("wheat", good, True), ("oil", vec.transform(["a", "b"]), False)])
    with pytest.raises(FilterError, match=r"a judgment must be \(profile, document vector, relevant\)"):
        bank.learn_many([("wheat", good)])  # type: ignore[list-item]
    assert {p.name: (p.n_judged_, p.version_, p.threshold_) for p in bank} == before
    assert bank.learn_many([("wheat", good, True), ("oil", vec.transform(["oil tanker"]), True)]) \
        == ["wheat", "oil"]
    assert [p.n_judged_ for p in bank] == [1, 1]


def test_a_bank_holds_trained_profiles_of_one_width(vec: Vectorizer) -> None:
    bank = ProfileBank()
    with pytest.raises(FilterError, match="holds Profile or BaggedProfile objects, got str"):
        bank.add("wheat")  # type: ignore[arg-type]
    with pytest.raises(FilterError, match="'wheat' is not trained yet"):
        bank.add(Profile("wheat"))
    with pytest.raises(FilterError, match="'wheat' is not trained yet"):
        bank.add(BaggedProfile.of("wheat", 2))
    bank.add(fitted(vec, "wheat"))
    other = Vectorizer(n_features=2**11).fit(TEXTS)
    p = Profile("oil", query="oil", pseudolabel={})
    p.fit(other.transform(["oil"]), other.transform(TEXTS), positives=[1, 4])
    with pytest.raises(FilterError, match="'oil' scores documents of 2048 columns, the bank's profiles 1024"):
        bank.add(p)
    bank.add(fitted(vec, "wheat", "knn"))  # a replacement of the only profile may change it
    assert bank.names == ["wheat"] and bank["wheat"].model == "knn"


def test_a_bag_is_made_of_distinct_members_that_learned_the_same_judgments(vec: Vectorizer) -> None:
    p = fitted(vec, "wheat")
    with pytest.raises(ParameterError, match="members must be distinct Profile objects"):
        BaggedProfile([p, p])
    assert p.n_judged_ == 0
    with pytest.raises(ParameterError, match="members must be a list of profiles, got Profile"):
        BaggedProfile(p)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"all trained or all untrained, got members \[1\] untrained"):
        BaggedProfile([p, Profile("wheat")])
    q = fitted(vec, "wheat", seed=1)
    q.learn_one(vec.transform(["wheat harvest"]), True)
    with pytest.raises(ParameterError, match=r"the same n_judged_, got 0 and 1 \(member 1\)"):
        BaggedProfile([p, q])
    with pytest.raises(ParameterError, match="one update policy, got 'every' and 'never'"):
        BaggedProfile([Profile("w"), Profile("w", update="never")])
    # members may differ otherwise (views of the profile): another query, another model
    BaggedProfile([fitted(vec, "wheat"), fitted(vec, "wheat", "kantor", seed=3)])


def test_a_bagged_state_whose_members_disagree_is_refused(vec: Vectorizer) -> None:
    b = bag(vec, "wheat")
    b.learn_many(vec.transform(["wheat harvest", "oil tanker"]), [True, False])
    state = orjson.loads(orjson.dumps(b.to_state()))
    assert load_profile(state, vec.feature_weights()).n_judged_ == 2
    fresh = orjson.loads(orjson.dumps(fitted(vec, "wheat", "knn", seed=1).to_state()))
    state["members"][1] = fresh
    with pytest.raises(StateError, match=r"^bagged_profile: members must have the same n_judged_, got 2 and 0"):
        load_profile(state, vec.feature_weights())


def test_bag_threshold_refuses_an_unknown_rule_and_of_takes_numpy_integers() -> None:
    with pytest.raises(ParameterError, match="rule must be one of margin, abstain, vote, got 'bogus'"):
        bag_threshold(np.zeros(3), "bogus")
    assert [m.seed for m in BaggedProfile.of("x", np.int64(2), seed=np.int64(4)).members] == [4, 5]
    assert all(type(m.seed) is int for m in BaggedProfile.of("x", np.int64(2), seed=np.int64(4)).members)


def test_halves_of_a_column_adding_up_past_the_limit_are_refused_before_learning(vec: Vectorizer) -> None:
    """Values were checked before a column stored twice was summed: two halves of 0.75e6
    passed, the model learned their sum and the example set then refused it, half a
    judgment applied."""
    p = fitted(vec, "wheat")
    x = sp.csr_matrix((np.array([0.75e6, 0.75e6]), np.array([5, 5]), np.array([0, 2])), shape=(1, 1024))
    before = (p.n_judged_, p.version_, len(p.examples_), p.model_.w_pos_)  # type: ignore[attr-defined]
    with pytest.raises(FilterError, match="document vectors must hold finite values of at most 1e"):
        p.learn_one(x, True)
    assert (p.n_judged_, p.version_, len(p.examples_), p.model_.w_pos_) == before  # type: ignore[attr-defined]


def test_pending_judgments_in_a_state_are_checked_as_learning_checks_them(vec: Vectorizer) -> None:
    p = fitted(vec, "wheat", update=5)
    p.learn_many(vec.transform(["wheat harvest", "oil tanker"]), [True, False])
    good = orjson.loads(orjson.dumps(p.to_state()))
    assert Profile.from_state(good, vec.feature_weights()).n_pending_ == 2
    for field, value, message in (
            ("weights", [1.0, 1e300], "pending weights must be positive numbers of at most 1e"),
            ("labels", [1.7, -1], r"pending labels must be \+1/-1, got \[1.7, -1\]"),
            ("labels", [True, -1], r"pending labels must be \+1/-1")):
        bad = orjson.loads(orjson.dumps(good))
        bad["pending"][field] = value
        with pytest.raises(StateError, match=message):
            Profile.from_state(bad, vec.feature_weights())
    from sift.filters.state import decode_csr, encode_csr
    bad = orjson.loads(orjson.dumps(good))
    X = decode_csr(bad["pending"]["X"], name="pending")
    X.data[:] = 1e200
    bad["pending"]["X"] = encode_csr(X)
    with pytest.raises(StateError, match="pending judgments must hold finite values of at most 1e"):
        Profile.from_state(bad, vec.feature_weights())


@pytest.mark.parametrize("vote", ["positive", "signed"])
def test_a_knn_profile_never_delivers_a_document_sharing_nothing_with_its_pool(vote: str) -> None:
    """A document sharing no term with the pool scores 0, and for a signed vote TROT may
    put the threshold below 0: here every relevant document has more non-relevant than
    relevant neighbours, and the best threshold on the judged documents was -1.47. Until
    the forty-fourth session the signed vote had no floor and delivered empty documents."""
    texts = ["eps theta", "zeta iota", "eps gamma delta", "delta eta gamma", "gamma theta",
             "alpha delta", "delta theta", "alpha theta kappa", "beta theta eps", "alpha beta eta"]
    labels = [1, 1, -1, 1, -1, 1, -1, -1, 1, -1]
    vec = Vectorizer(n_features=2**10).fit(texts)
    p = Profile("t", model="knn", model_params={"vote": vote, "k": 3, "query_weight": 0.0},
                pseudolabel={})
    p.fit(None, vec.transform(texts), labels=labels)
    empty = vec.transform(["", "zzz qqq"])
    assert p.score(empty).tolist() == [0.0, 0.0]
    assert p.threshold_ > 0.0
    assert not p.decide(empty).any()
    for t, rel in (("eps theta kappa", True), ("gamma delta", False)):
        p.learn_one(vec.transform([t]), relevant=rel)
        assert p.threshold_ > 0.0 and not p.decide(empty).any()
