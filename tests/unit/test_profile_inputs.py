"""What a profile makes of inputs a library user can get wrong (forty-third session's audit
of ``sift.filters``): each is refused with an error that says what was wrong, before the
profile changes, or handled as the docstrings say."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from sift.filters.bank import ProfileBank
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.measures import t11f
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer
from tests.unit.test_profile import TRAIN

WHEAT = [i for i, t in enumerate(TRAIN) if "wheat" in t][:3]


@pytest.fixture(scope="module")
def vec() -> Vectorizer:
    return Vectorizer(n_features=2**12).fit(TRAIN)


def _fit(vec: Vectorizer, model: str = "rocchio", **kw) -> Profile:  # type: ignore[no-untyped-def]
    p = Profile("wheat", query="wheat", model=model, pseudolabel={}, **kw)
    p.fit(vec.transform(["wheat"]), vec.transform(TRAIN), positives=WHEAT,
          feature_weights=vec.feature_weights())
    return p


def _state(p: Profile) -> dict:  # type: ignore[type-arg]
    return orjson.loads(orjson.dumps(p.to_state()))  # type: ignore[no-any-return]


def test_a_boolean_mask_or_fractions_as_positives_are_refused(vec: Vectorizer) -> None:
    # cast to integers a mask names rows 0 and 1, whatever it marks
    mask = np.array(["wheat" in t for t in TRAIN])
    p = Profile("wheat", query="wheat", pseudolabel={})
    for bad in (mask, [0.9, 1.2]):
        with pytest.raises(FilterError, match="positives must be row numbers"):
            p.fit(vec.transform(["wheat"]), vec.transform(TRAIN), positives=bad)
    p.fit(vec.transform(["wheat"]), vec.transform(TRAIN), positives=np.flatnonzero(mask)[:3])
    assert p.n_features_ == vec.n_features


def test_a_failed_fit_names_its_argument_and_leaves_the_profile_as_it_was(vec: Vectorizer) -> None:
    X = vec.transform(TRAIN)
    bad = X.copy()
    bad.data[0] = np.inf
    fresh = Profile("wheat", query="wheat", pseudolabel={})
    with pytest.raises(FilterError, match="X_train must hold finite values"):
        fresh.fit(vec.transform(["wheat"]), bad, positives=WHEAT)
    with pytest.raises(FilterError, match="not trained yet"):
        fresh.score(X)
    fitted = _fit(vec)
    before = (fitted.threshold_, fitted.score(X).tolist())
    with pytest.raises(FilterError, match="feature_weights must be"):
        fitted.fit(vec.transform(["wheat"]), X, positives=WHEAT,
                   feature_weights=vec.feature_weights()[:10])
    with pytest.raises(FilterError, match="query_vector must be 1 x"):
        fitted.fit(vec.transform(["wheat", "oil"]), X, positives=WHEAT)
    assert (fitted.threshold_, fitted.score(X).tolist()) == before


def test_labels_that_are_not_booleans_are_refused_on_every_path(vec: Vectorizer) -> None:
    p = _fit(vec)
    x = vec.transform(["wheat harvest"])
    bank = ProfileBank()
    bank.add(p)
    with pytest.raises(FilterError, match="relevant must be a boolean"):
        bank.learn_many([("wheat", x, "false")])  # bool("false") is True
    with pytest.raises(FilterError, match="relevant must be booleans"):
        p.relearn_rows(x, ["no"], [1])
    with pytest.raises(FilterError, match="relevant must be booleans"):
        p.relearn([(x, ["no"])])
    assert p.n_judged_ == 0
    bank.learn_many([("wheat", x, np.True_), ("wheat", x, 0)])
    assert p.n_judged_ == 2 and p.n_relevant_ == 1


def test_waiting_judgments_do_not_follow_the_callers_buffer(vec: Vectorizer) -> None:
    a, b = _fit(vec, update=3), _fit(vec, update=3)
    rows = vec.transform(["wheat prices", "oil output"])
    buffer = rows.copy()
    a.learn_many(buffer, [True, False])
    buffer.data[:] = 0.0  # the caller fills its buffer again
    b.learn_many(rows, [True, False])
    third = vec.transform(["wheat crop"])
    a.learn_one(third, relevant=True)
    b.learn_one(third, relevant=True)
    assert a.threshold_ == b.threshold_
    assert orjson.dumps(a.to_state()) == orjson.dumps(b.to_state())


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_a_column_stored_twice_learns_as_stored_once(vec: Vectorizer, model: str) -> None:
    a, b = _fit(vec, model), _fit(vec, model)
    X = vec.transform(["wheat prices up", "oil output cut", "wheat crop large"])
    coo = X.tocoo()
    halves = sp.csr_matrix((np.r_[coo.data / 2, coo.data / 2], (np.r_[coo.row, coo.row],
                                                                 np.r_[coo.col, coo.col])),
                           shape=X.shape)
    halves.has_canonical_format = False
    halves_before = halves.data.copy()
    a.learn_many(X, [True, False, True])
    b.learn_many(halves, [True, False, True])
    assert a.threshold_ == b.threshold_
    assert np.array_equal(a.model_.loo_scores(), b.model_.loo_scores())
    assert np.array_equal(halves.data, halves_before)  # the caller's matrix is not changed


def test_a_state_loads_with_the_corpus_weights_it_was_fitted_with(vec: Vectorizer) -> None:
    X = vec.transform(TRAIN)
    weighted = _fit(vec)
    with pytest.raises(StateError, match="pass feature_weights"):
        Profile.from_state(_state(weighted), None, n_features=vec.n_features)
    again = Profile.from_state(_state(weighted), vec.feature_weights())
    assert np.array_equal(again.score(X), weighted.score(X))
    # fitted without them: loads without them whatever is given, scoring as fitted
    plain = Profile("wheat", query="wheat", pseudolabel={})
    plain.fit(vec.transform(["wheat"]), X, positives=WHEAT)
    loaded = Profile.from_state(_state(plain), vec.feature_weights())
    assert np.array_equal(loaded.score(X), plain.score(X))
    assert orjson.dumps(loaded.to_state()) == orjson.dumps(plain.to_state())
    # a state from before the flag is bound to what is given, as then
    old = _state(weighted)
    del old["feature_weights"]
    assert np.array_equal(Profile.from_state(old, vec.feature_weights()).score(X), weighted.score(X))
    with pytest.raises(StateError, match="feature_weights must be a boolean"):
        Profile.from_state({**_state(weighted), "feature_weights": "yes"}, vec.feature_weights())


def test_parameters_are_named_in_their_errors() -> None:
    with pytest.raises(ParameterError, match="max_examples must be a positive integer or None, got 0"):
        Profile("x", max_examples=0)
    with pytest.raises(ParameterError, match="model_params must be a dict"):
        Profile("x", model_params="k=3")  # type: ignore[arg-type]
    # a callable would work until the state, which names its measure, is written
    with pytest.raises(ParameterError, match="measure must be a measure's name"):
        Profile("x", measure=t11f)  # type: ignore[arg-type]


def test_numpy_scalar_weights_are_weights(vec: Vectorizer) -> None:
    a, b = _fit(vec), _fit(vec)
    x = vec.transform(["wheat crop"])
    a.learn_one(x, relevant=True, weight=np.float32(0.5))
    b.learn_one(x, relevant=True, weight=0.5)
    assert a.threshold_ == b.threshold_
    with pytest.raises(FilterError, match="weight must be a positive number"):
        a.learn_one(x, relevant=True, weight=True)  # type: ignore[arg-type]


def test_kantor_never_delivers_a_document_sharing_nothing_with_its_positives(vec: Vectorizer) -> None:
    """A document with nothing in common with ``P`` scores ``sqrt(1 - d.N)``, at most 1;
    TROT's threshold would fall below 1 after a few judgments (the audit's run: 0.98 after
    five) and deliver empty documents and documents of unseen words."""
    p = _fit(vec, "kantor")
    judged = vec.transform(["wheat exports", "oil prices", "gold output", "wheat futures",
                            "bank rates", "corn crop"])
    p.learn_many(judged, [True, False, False, True, False, True])
    assert p.threshold_ > 1.0 == p.model_.no_evidence_score
    junk = vec.transform(["", "the of and to", "zzzqx blorp"])
    assert np.all(p.score(junk) <= 1.0) and not p.decide(junk).any()
    assert math.isfinite(p.threshold_)
