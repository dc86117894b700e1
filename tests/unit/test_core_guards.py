"""The learning core refuses what would corrupt it, before changing anything.

A profile that learned half a judgment (the sums updated, the threshold not) stays
broken, and its state may no longer load; a bank that scores with a removed profile's
model delivers for the wrong profile. Each case here was found by breaking the core on
purpose.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from sift.filters.bagging import BaggedProfile
from sift.filters.bank import ProfileBank
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.profile import MAX_VALUE, Profile
from sift.filters.state import encode_array
from sift.filters.vectorize import Vectorizer

TEXTS = ["wheat crop exports", "oil price rise", "gold mine output", "wheat tender egypt",
         "oil output opec", "gold bullion price", "corn crop", "crude oil", "silver mine",
         "wheat harvest"]


@pytest.fixture(scope="module")
def vec() -> Vectorizer:
    return Vectorizer(n_features=2**12).fit(TEXTS)


def fitted(vec: Vectorizer, name: str, query: str, positives: list[int], **kw: Any) -> Profile:
    p = Profile(name, query=query, pseudolabel={}, **kw)
    p.fit(vec.transform([query]), vec.transform(TEXTS), positives=positives)
    return p


def snapshot(p: Profile) -> tuple[Any, ...]:
    return (p.version_, p.n_judged_, len(p.examples_), p.threshold_, p.n_pending_)


def test_a_profile_removed_and_added_again_is_scored_with_its_new_model(vec: Vectorizer) -> None:
    docs = vec.transform(["wheat exports", "oil output", "gold"])
    for model in ("rocchio", "kantor", "knn"):
        bank = ProfileBank()
        bank.add(fitted(vec, "a", "gold", [2, 5], model=model))
        bank.add(fitted(vec, "b", "wheat", [0, 3], model=model))
        bank.score(docs)
        bank.remove("b")
        new = fitted(vec, "b", "oil", [1, 4], model=model)  # the same version number
        assert new.version_ == bank["a"].version_
        bank.add(new)
        assert np.array_equal(bank.score(docs)[:, 1], new.score(docs)), model


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1e300, -2 * MAX_VALUE])
def test_a_judged_vector_with_unusable_values_changes_nothing(vec: Vectorizer, bad: float) -> None:
    p = fitted(vec, "w", "wheat", [0])
    before = snapshot(p)
    x = vec.transform(["wheat tender"])
    x.data[0] = bad
    with pytest.raises(FilterError, match="finite values of at most"):
        p.learn_one(x, True)
    assert snapshot(p) == before
    p.learn_one(vec.transform(["wheat tender"]), True)  # and the profile goes on learning
    assert p.n_judged_ == 1 and math.isfinite(p.threshold_)


@pytest.mark.parametrize("weight", [2 * MAX_VALUE, 1e200])
def test_a_weight_that_would_overflow_the_sums_is_refused(vec: Vectorizer, weight: float) -> None:
    p = fitted(vec, "w", "wheat", [0], model="kantor")
    before = snapshot(p)
    with pytest.raises(FilterError, match="weight must be a positive number of at most"):
        p.learn_one(vec.transform(["wheat tender"]), True, weight=weight)
    with pytest.raises(FilterError, match="weights must be positive numbers of at most"):
        p.learn_many(vec.transform(["wheat tender"]), [True], [weight])
    assert snapshot(p) == before


@pytest.mark.parametrize("relevant", [[-1], [2], ["yes"], [0.5]])
def test_relevant_must_be_a_boolean(vec: Vectorizer, relevant: list[Any]) -> None:
    p = fitted(vec, "w", "wheat", [0])
    with pytest.raises(FilterError, match="relevant must be booleans"):
        p.learn_many(vec.transform(["oil"]), relevant)
    p.learn_many(vec.transform(["oil", "wheat"]), [0, 1])  # 0 and 1 are fine
    assert (p.n_judged_, p.n_relevant_) == (2, 1)


def test_a_refit_starts_without_the_old_judgments(vec: Vectorizer) -> None:
    p = fitted(vec, "w", "wheat", [0], update=3)
    p.learn_one(vec.transform(["oil"]), True)
    p.learn_one(vec.transform(["gold"]), True)
    assert p.n_pending_ == 2
    p.fit(vec.transform(["wheat"]), vec.transform(TEXTS), positives=[0])
    fresh = fitted(vec, "w", "wheat", [0], update=3)
    assert (p.n_pending_, p.n_judged_, p.n_ignored_, p.threshold_) == (0, 0, 0, fresh.threshold_)


def test_scoring_a_matrix_of_another_width_is_an_error(vec: Vectorizer) -> None:
    p = fitted(vec, "w", "wheat", [0])
    for width in (2**11, 2**13):
        with pytest.raises(FilterError, match=f"columns, got \\(1, {width}\\)"):
            p.score(sp.csr_matrix((1, width)))


@pytest.mark.parametrize(("params", "match"), [
    ({"model_params": {"alpha": 1e308}}, "alpha must be a finite number >= 0 and <= 1e\\+06"),
    ({"seed": -1}, "seed must be an integer >= 0"),
    ({"seed": 1.5}, "seed must be an integer >= 0"),
    ({"pseudolabel": "none"}, "pseudolabel must be a dict"),
    ({"pseudolabel": {"neg_fraction": "0.2"}}, "neg_fraction must be a number"),
    ({"pseudolabel": {"neg_weight": 1e300}}, "neg_weight must be a positive number of at most"),
])
def test_parameters_are_checked_when_the_profile_is_made(params: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        Profile("w", **params)


def test_vectorizer_state_is_validated(vec: Vectorizer) -> None:
    good = vec.to_state()
    assert Vectorizer.from_state(good).transform(["wheat"]).toarray().tolist() == \
        vec.transform(["wheat"]).toarray().tolist()
    cases = [({"n_docs": -5}, "n_docs must be a count"),
             ({"n_docs": "x"}, "n_docs must be a count"),
             ({"df_count": encode_array(-np.ones(good["df_count"]["shape"][0]))},
              "document frequencies must be in"),
             ({"df_count": encode_array(np.ones(good["df_count"]["shape"][0], np.int64))},
              "expected dtype float64"),
             ({"params": {**good["params"], "bogus": 1}}, "vectorizer: "),
             ({"params": None}, "vectorizer: ")]
    for change, match in cases:
        with pytest.raises(StateError, match=match):
            Vectorizer.from_state({**good, **change})
    with pytest.raises(StateError, match="vectorizer: "):
        Vectorizer.from_state({k: v for k, v in good.items() if k != "params"})


def test_profile_state_that_overflows_or_disagrees_is_a_state_error(vec: Vectorizer) -> None:
    p = fitted(vec, "w", "wheat", [0, 3], update=5)  # two examples
    p.learn_one(vec.transform(["oil"]), True)
    good = p.to_state()
    with pytest.raises(StateError):
        Profile.from_state({**good, "pending": {**good["pending"], "labels": [300]}})
    huge = {**good["examples"]["labels"], "shape": [2**32, 2**32]}
    with pytest.raises(StateError, match="bytes for shape"):
        Profile.from_state({**good, "examples": {**good["examples"], "labels": huge}})
    with pytest.raises(StateError, match="examples in a set of capacity 1"):
        Profile.from_state({**good, "examples": {**good["examples"], "capacity": 1}})
    with pytest.raises(StateError, match="an example set of capacity None"):
        Profile.from_state({**good, "examples": {**good["examples"], "capacity": None}})
    assert Profile.from_state(good).threshold_ == p.threshold_


def test_bagged_members_of_different_widths_do_not_load(vec: Vectorizer) -> None:
    bag = BaggedProfile.of("w", 2, query="wheat", pseudolabel={})
    bag.fit(vec.transform(["wheat"]), vec.transform(TEXTS), positives=[0])
    other = Vectorizer(n_features=2**11).fit(TEXTS)
    narrow = Profile("w", query="wheat", pseudolabel={})
    narrow.fit(other.transform(["wheat"]), other.transform(TEXTS), positives=[0])
    state = bag.to_state()
    state["members"][1] = narrow.to_state()
    with pytest.raises(StateError, match="members of different widths"):
        BaggedProfile.from_state(state)


def test_a_rocchio_threshold_never_reaches_the_score_of_no_evidence() -> None:
    # a relevant judgment of a document unlike the profile pulls TROT's threshold below 0
    # here (its leave-one-out score is -0.25); a document sharing no term with the model
    # scores 0 and must not be delivered for it
    train = ["wheat exports rose", "wheat crop", "oil prices", "gold mine", "oil output",
             "wheat harvest good", "gold prices fell", "oil wells dry", "corn and wheat",
             "silver mine"]
    v = Vectorizer(n_features=2**12).fit(train)
    X = v.transform(train)
    p = Profile("x", query="wheat")
    p.fit(v.transform(["wheat"]), X, positives=[0, 1], feature_weights=v.feature_weights())
    p.learn_one(X[2], True)
    assert p.model_.loo_scores().min() < 0 and p.threshold_ > 0
    assert p.decide(v.transform(["", "zebra", "gold mine"])).tolist() == [False, False, False]


def test_a_vector_with_a_column_given_twice_scores_as_its_sum(vec: Vectorizer) -> None:
    p = fitted(vec, "w", "wheat", [0, 3], model="kantor")
    x = vec.transform(["wheat crop"])
    cols, vals = x.indices, x.data
    # the same vector, its first entry split in two entries of the same column
    dup = sp.csr_matrix((np.r_[vals[0] / 2, vals[0] / 2, vals[1:]], np.r_[cols[0], cols[0], cols[1:]],
                         [0, vals.size + 1]), shape=x.shape)
    assert not dup.has_canonical_format
    assert p.score(dup)[0] == pytest.approx(p.score(x)[0], rel=1e-12)
