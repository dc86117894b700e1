"""Judgment corrections: a helper's audit of the forty-eighth session
(``Profile.relabel`` / ``find_judgment``, models' state round trips, weights)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

from sift.filters.bagging import BaggedProfile
from sift.filters.errors import FilterError, StateError
from sift.filters.examples import ExampleSet
from sift.filters.profile import Profile
from sift.filters.vectorize import Vectorizer

TRAIN = ["wheat exports rose sharply this week", "wheat crop forecast raised by usda",
         "crude oil prices fell on opec output", "gold mine output up in south africa",
         "oil tanker attacked in the gulf", "corn and wheat futures higher",
         "bank raises interest rates", "opec oil ministers meet"] * 3
STREAM = ["wheat harvest delayed by rain", "oil prices rose again", "wheat export tender",
          "gold price steady", "corn and wheat crop", "opec cuts oil output", "wheat bushels sold",
          "bank rates cut", "wheat futures fell", "tanker oil spill", "zebra wheat", "okapi oil"]
REL = ["wheat" in t for t in STREAM]
POS = [i for i, t in enumerate(TRAIN) if "wheat" in t][:3]
VEC = Vectorizer(n_features=2**12).fit(TRAIN)
XS = VEC.transform(STREAM)
PROBE = VEC.transform([*TRAIN, *STREAM, "wheat", "oil", "wheat oil gold"])


def fit(model: str = "rocchio", **kw: Any) -> Profile:
    kw.setdefault("seed", 1)
    p = Profile("wheat", query="wheat", model=model, **kw)
    p.fit(VEC.transform(["wheat"]), VEC.transform(TRAIN), positives=POS,
          feature_weights=VEC.feature_weights())
    return p


def test_a_never_learned_judgment_is_refused_after_only_pseudolabels_were_evicted() -> None:
    """The fit leaves 3 real examples and 5 pseudolabels in a set of 8; five judgments push
    out exactly the pseudolabels. No judgment was evicted, so a document never judged is
    not "evicted": it was, and ``relabel`` took out of the sums a label they never held."""
    a, b = fit(max_examples=8), fit(max_examples=8)
    for i in range(5):
        a.learn_one(XS[i], REL[i])
        b.learn_one(XS[i], REL[i])
    assert a.examples_.n_evicted == 5 and a.examples_.n_evicted_real == 0
    assert a.find_judgment(XS[10], True) is None
    with pytest.raises(FilterError, match="no judgment was evicted"):
        a.relabel(XS[10], False)
    assert np.array_equal(a.score(PROBE), b.score(PROBE))
    # once a judgment is evicted, one not held may be it
    for i in range(5, 10):
        a.learn_one(XS[i], REL[i])
    assert a.examples_.n_evicted_real > 0
    assert a.find_judgment(XS[0], not REL[0]) == "evicted"


def test_an_old_state_without_the_count_keeps_the_old_rule() -> None:
    p = fit(max_examples=8)
    for i in range(5):
        p.learn_one(XS[i], REL[i])
    state = orjson.loads(orjson.dumps(p.to_state()))
    del state["examples"]["n_evicted_real"]
    q = Profile.from_state(state, VEC.feature_weights())
    assert q.examples_.n_evicted_real is None
    assert q.find_judgment(XS[10], True) == "evicted"  # all real, something evicted


def test_a_state_with_more_real_evictions_than_evictions_is_refused() -> None:
    p = fit(max_examples=8)
    state = orjson.loads(orjson.dumps(p.to_state()))
    state["examples"]["n_evicted_real"] = state["examples"]["n_evicted"] + 1
    with pytest.raises(StateError, match="real examples evicted"):
        ExampleSet.from_state(state["examples"])


def _row(values: dict[int, float]) -> sp.csr_matrix:
    x = sp.lil_matrix((1, 2**12))
    for k, v in values.items():
        x[0, k] = v
    return sp.csr_matrix(x)


@pytest.mark.parametrize(("model", "params"), [("kantor", {}), ("rocchio", {"nonnegative": False}),
                                               ("rocchio", {})])
def test_a_loaded_profile_remembers_a_signed_vector_was_learned(model: str, params: dict) -> None:
    """Saved and loaded, a model took sums that were all >= 0 for sums of non-negative
    vectors and clamped at 0 what a correction left of a signed vector's negative entry,
    which the live one keeps: Kantor's scores moved by 0.016, Rocchio's (signed) by 0.04."""
    c = int(VEC.transform(["zebra"]).indices[0])
    w = int(VEC.transform(["wheat"]).indices[0])
    signed, plain, more = _row({w: 0.5, c: -0.1}), _row({w: 0.5, c: 1.0}), _row({w: 0.5, c: 0.3})

    def run(save: bool) -> Profile:
        p = fit(model, pseudolabel={}, model_params=params)
        p.learn_one(signed, True)
        p.learn_one(plain, True)
        if save:
            p = Profile.from_state(orjson.loads(orjson.dumps(p.to_state())), VEC.feature_weights())
        p.relabel(plain, False)
        p.learn_one(more, True)
        return p

    live, loaded = run(False), run(True)
    probe = sp.vstack([PROBE, _row({c: 1.0}), _row({w: 1.0, c: 1.0})]).tocsr()
    assert np.array_equal(live.score(probe), loaded.score(probe))
    assert live.threshold_ == loaded.threshold_


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_a_bad_signed_flag_is_a_state_error(bad: Any) -> None:
    p = fit()
    state = orjson.loads(orjson.dumps(p.to_state()))
    state["model"]["signed"] = bad
    with pytest.raises(StateError, match="signed"):
        Profile.from_state(state, VEC.feature_weights())


def test_a_weight_beyond_any_float_is_a_filter_error() -> None:
    p = fit()
    p.learn_one(XS[0], True)
    b = BaggedProfile.of("w", 2, query="wheat", seed=1)
    b.fit(VEC.transform(["wheat"]), VEC.transform(TRAIN), positives=POS)
    b.learn_one(XS[0], True)
    huge = 10**400
    for call in (lambda: p.relabel(XS[0], False, huge), lambda: p.find_judgment(XS[0], True, huge),
                 lambda: b.relabel(XS[0], False, huge), lambda: p.learn_one(XS[1], True, huge),
                 lambda: p.learn_many(XS[1:2], [True], [huge])):
        with pytest.raises(FilterError, match="weight"):
            call()


@pytest.mark.parametrize("value", [float("nan"), 2e6, -float("inf")])
def test_a_bad_value_in_x_is_named(value: float) -> None:
    p = fit()
    p.learn_one(XS[0], True)
    x = XS[0].copy()
    x.data[0] = value
    for call in (lambda: p.relabel(x, False), lambda: p.find_judgment(x, True)):
        with pytest.raises(FilterError, match=f"x must hold finite values.*got {value!r}"):
            call()
