"""Profiles: initial training, update policies, fallback threshold, state round trips."""

import math

import numpy as np
import orjson
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.filters.bank import Hit, ProfileBank
from sift.filters.errors import FilterError, ParameterError, StateError
from sift.filters.profile import DEFAULT_PSEUDOLABEL, Profile
from sift.filters.vectorize import Vectorizer

TRAIN = [
    "wheat exports rose sharply this week",
    "wheat crop forecast raised by usda",
    "crude oil prices fell on opec output",
    "gold mine output up in south africa",
    "oil tanker attacked in the gulf",
    "corn and wheat futures higher",
    "bank raises interest rates",
    "opec oil ministers meet",
] * 3


@pytest.fixture(scope="module")
def vec() -> Vectorizer:
    return Vectorizer(n_features=2**14).fit(TRAIN)


def _fit(vec: Vectorizer, model: str = "rocchio", **kw) -> Profile:  # type: ignore[no-untyped-def]
    p = Profile("wheat", query="wheat", model=model, pseudolabel=kw.pop("pseudolabel", {}), **kw)
    X = vec.transform(TRAIN)
    pos = [i for i, t in enumerate(TRAIN) if "wheat" in t][:3]
    p.fit(vec.transform(["wheat"]), X, positives=pos, feature_weights=vec.feature_weights())
    return p


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_initial_training_delivers_relevant(vec: Vectorizer, model: str) -> None:
    p = _fit(vec, model)
    assert math.isfinite(p.threshold_)
    d = p.decide(vec.transform(["wheat prices", "opec oil output"]))
    assert d.tolist() == [True, False]


def test_update_every_changes_model_and_threshold(vec: Vectorizer) -> None:
    from sift.filters.threshold import trot

    p = _fit(vec, explore=0.0)  # no exploration: the threshold is TROT's alone
    probe = vec.transform(["corn futures", "wheat exports"])
    v0, before, thr0 = p.version_, p.score(probe), p.threshold_
    # non-relevant, sharing "corn" and "futures" with the positive "corn and wheat futures higher"
    p.learn_one(vec.transform(["corn futures opec output"]), relevant=False)
    assert p.version_ == v0 + 1 and p.n_judged_ == 1 and len(p.examples_) == 4
    after = p.score(probe)
    # Rocchio subtracts gamma * mean_neg: the words the judgment shares lose weight,
    # the others keep theirs
    assert after[0] < before[0] and after[1] == pytest.approx(before[1])
    # re-thresholded at once, by TROT on the new leave-one-out scores of the 4 examples
    ex = p.examples_
    loo = p.model_.loo_scores()
    assert ex.labels.tolist() == [1, 1, 1, -1] and ex.real.all() and loo.size == 4
    assert p.threshold_ == trot(loo, ex.labels, ex.weights, measure="t11su", placement=p.threshold_placement)
    assert p.threshold_ != thr0


def test_update_never_ignores_judgments(vec: Vectorizer) -> None:
    p = _fit(vec, update="never")
    state = orjson.dumps(p.to_state())
    p.learn_one(vec.transform(["wheat"]), relevant=True)
    assert p.n_ignored_ == 1 and p.n_judged_ == 0
    assert orjson.loads(orjson.dumps(p.to_state()))["model"] == orjson.loads(state)["model"]


def test_update_every_n_buffers(vec: Vectorizer) -> None:
    p = _fit(vec, update=3)
    v0 = p.version_
    p.learn_one(vec.transform(["wheat a"]), relevant=True)
    p.learn_one(vec.transform(["oil b"]), relevant=False)
    assert p.version_ == v0 and p.n_pending_ == 2
    p.learn_one(vec.transform(["wheat c"]), relevant=True)
    assert p.version_ == v0 + 1 and p.n_pending_ == 0 and p.n_judged_ == 3


def test_pseudolabels_added_and_capped(vec: Vectorizer) -> None:
    p = _fit(vec, pseudolabel={"min_neg_rank": 5, "neg_fraction": 0.5}, max_examples=8)
    assert len(p.examples_) == 8
    assert int(p.examples_.real.sum()) == 3
    # real judgments evict pseudolabels first
    for _ in range(5):
        p.learn_one(vec.transform(["opec output"]), relevant=False)
    assert len(p.examples_) == 8 and int(p.examples_.real.sum()) == 8


def test_query_only_profile_uses_fallback_rate(vec: Vectorizer) -> None:
    p = Profile("oil", query="oil", pseudolabel={}, fallback_rate=0.25)
    X = vec.transform(TRAIN)
    p.fit(vec.transform(["oil"]), X)
    assert math.isfinite(p.threshold_)
    assert 0 < p.decide(X).mean() <= 0.5
    p.learn_one(vec.transform(["oil prices"]), relevant=True)  # now TROT takes over
    assert p.examples_.labels.tolist() == [1]


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn", "fusion"])
@pytest.mark.parametrize("pseudo_positives", [False, True])
def test_query_only_profile_delivers_whatever_the_score_scale(vec: Vectorizer, model: str,
                                                                pseudo_positives: bool) -> None:
    # with pseudo-positives fusion solves its weights, and its scores become negated
    # dissimilarities (all below 0): its fallback cut used to be refused as "no
    # evidence", so a query-only fusion profile never delivered and never got the
    # feedback it needed to learn
    pseudolabel = {"max_pos_rank": 3, "pos_fraction": 1.0, "min_neg_rank": 4, "neg_fraction": 1.0,
                   "neg_weight": 0.1, "min_pool": 0} if pseudo_positives else {}
    p = Profile("oil", query="oil", model=model, pseudolabel=pseudolabel, fallback_rate=0.25)
    X = vec.transform(TRAIN)
    p.fit(vec.transform(["oil"]), X)
    assert math.isfinite(p.threshold_) and p.threshold_ == p.fallback_threshold_
    if model == "fusion" and pseudo_positives:
        assert p.model_.weights_ and p.threshold_ < 0  # solved: the scale this is about
    delivered = p.decide(X)
    assert 0 < delivered.mean() <= 0.5
    assert all("oil" in TRAIN[i] for i in np.flatnonzero(delivered))


def test_fallback_cut_at_the_no_evidence_score_delivers_the_documents_with_evidence(
        vec: Vectorizer) -> None:
    # Rocchio's no-evidence score is 0: with most documents sharing no term with the query,
    # the top quarter's cut is 0, and a threshold there would deliver them all; +inf (as
    # until the forty-third session) would deliver none, ever, not even those naming gold
    p = Profile("gold", query="gold", pseudolabel={}, fallback_rate=0.25)
    X = vec.transform(TRAIN)
    p.fit(vec.transform(["gold"]), X)
    assert p.threshold_ == p.fallback_threshold_ == math.nextafter(0.0, math.inf)
    delivered = np.flatnonzero(p.decide(X))
    assert delivered.size and [TRAIN[i] for i in delivered] == [t for t in TRAIN if "gold" in t]


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn", "fusion"])
def test_a_query_no_training_document_shares_gets_no_pseudo_positives(
        vec: Vectorizer, model: str) -> None:
    """Every training document scores what an empty one does, so the "top" ranks are the
    first rows in file order: none of them may become a pseudo-positive, and the profile
    delivers the stream documents that share its query's words, not those rows."""
    X = vec.transform(TRAIN)
    fitted = []
    for pos_fraction in (1.0, 0.0):  # the top 3 picked (and skipped), or none picked
        pseudolabel = {**DEFAULT_PSEUDOLABEL, "max_pos_rank": 3, "pos_fraction": pos_fraction,
                       "min_pool": 0}
        p = Profile("covid", query="covid pandemic", model=model, pseudolabel=pseudolabel)
        p.fit(vec.transform(["covid pandemic"]), X, feature_weights=vec.feature_weights())
        fitted.append(p)
    # the same examples (the same pseudo-negatives, kNN's query document) either way
    got, without = (q.examples_ for q in fitted)
    assert np.array_equal(got.labels, without.labels) and np.array_equal(got.weights, without.weights)
    assert np.count_nonzero(got.labels > 0) == (1 if model == "knn" else 0)  # kNN: its query
    assert p.decide(vec.transform(["covid pandemic cases", TRAIN[0], ""])).tolist() == [
        True, False, False]


def test_errors_name_the_parameter(vec: Vectorizer) -> None:
    with pytest.raises(ParameterError, match="update must be"):
        Profile("x", update="sometimes")
    with pytest.raises(ParameterError, match="model must be one of"):
        Profile("x", model="bm25")
    with pytest.raises(ParameterError, match=r"model_params for 'rocchio': unknown 'delta' "
                                             r"\(it takes alpha, beta, gamma,"):
        Profile("x", model_params={"delta": 1})
    p = Profile("x")
    with pytest.raises(FilterError, match="not trained"):
        p.score(vec.transform(["x"]))
    p = _fit(vec)
    with pytest.raises(FilterError, match="expected a 1 x"):
        p.learn_one(vec.transform(["a", "b"]), relevant=True)


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_state_rejects_corruption(vec: Vectorizer, model: str) -> None:
    p = _fit(vec, model)
    state = orjson.loads(orjson.dumps(p.to_state()))
    state["examples"]["labels"]["b64"] = "!!!"
    with pytest.raises(StateError):
        Profile.from_state(state)
    state = orjson.loads(orjson.dumps(p.to_state()))
    state["version"] = 0
    with pytest.raises(StateError, match="version"):
        Profile.from_state(state)
    state = orjson.loads(orjson.dumps(p.to_state()))
    del state["version"]  # no version is not the current version
    with pytest.raises(StateError, match="profile state version None is not"):
        Profile.from_state(state, vec.feature_weights())
    state = orjson.loads(orjson.dumps(p.to_state()))
    state["kind"] = "vectorizer"  # a profile's shape under another kind
    with pytest.raises(StateError, match="expected profile state, got kind 'vectorizer'"):
        Profile.from_state(state, vec.feature_weights())
    with pytest.raises(StateError, match="expected profile state, got kind 'vectorizer'"):
        Profile.from_state(vec.to_state(), vec.feature_weights())
    state = orjson.loads(orjson.dumps(p.to_state()))
    state["examples"]["weights"] = state["examples"]["labels"]
    with pytest.raises(StateError):
        Profile.from_state(state)


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_state_of_another_width_is_refused_before_allocating(vec: Vectorizer, model: str) -> None:
    """A state's widths (the profile's, its examples', its model's columns, its pending
    judgments') must all be the vectorizer's: a wrong one would break scoring later, and a
    huge one (2**31 - 1) would allocate gigabytes."""
    p = _fit(vec, model)
    good = orjson.loads(orjson.dumps(p.to_state()))
    assert Profile.from_state(good, vec.feature_weights()).n_features_ == vec.n_features
    with pytest.raises(StateError, match="pass feature_weights"):  # fitted with them
        Profile.from_state(good, None, n_features=vec.n_features)
    for width in (100, 2**31 - 1, 100.0, True):
        bad = {**good, "n_features": width}
        with pytest.raises(StateError, match=r"n_features|features for a vectorizer"):
            Profile.from_state(bad, None, n_features=vec.n_features)
    from sift.filters.examples import ExampleSet

    narrow = orjson.loads(orjson.dumps(ExampleSet(good["examples"]["capacity"], 100).to_state()))
    with pytest.raises(StateError, match="examples of 100 features"):
        Profile.from_state({**good, "examples": narrow}, vec.feature_weights())
    with pytest.raises(ParameterError, match="n_features 5 differs"):
        Profile.from_state(good, vec.feature_weights(), n_features=5)


def test_accumulator_feature_past_the_width_is_refused(vec: Vectorizer) -> None:
    from sift.filters.state import decode_array, encode_array

    p = _fit(vec, "rocchio")
    state = orjson.loads(orjson.dumps(p.to_state()))
    acc = state["model"]["acc"]
    feat = decode_array(acc["features"], name="f", dtype=np.int64, ndim=1).copy()
    feat[-1] = vec.n_features + 7  # sorted: the last is the largest
    state["model"]["acc"] = {**acc, "features": encode_array(feat)}
    with pytest.raises(StateError, match="out of range"):
        Profile.from_state(state, vec.feature_weights())


@pytest.mark.parametrize("change", ["duplicate", "negative", "unsorted"])
def test_accumulator_features_checked_on_load(vec: Vectorizer, change: str) -> None:
    """A duplicate or negative feature is refused; features in another order (a state
    written by hand) load and score as the sorted ones do."""
    from sift.filters.state import decode_array, encode_array

    p = _fit(vec, "rocchio")
    state = orjson.loads(orjson.dumps(p.to_state()))
    acc = state["model"]["acc"]
    feat = decode_array(acc["features"], name="f", dtype=np.int64, ndim=1).copy()
    sums = decode_array(acc["sums"], name="s", dtype=np.float64, ndim=2).copy()
    assert feat.size > 2
    if change == "duplicate":
        feat[1] = feat[0]
    elif change == "negative":
        feat[0] = -1
    else:
        feat, sums = feat[::-1].copy(), sums[:, ::-1].copy()
    state["model"]["acc"] = {"features": encode_array(feat), "sums": encode_array(sums)}
    if change == "unsorted":
        X = vec.transform(TRAIN)
        assert np.array_equal(Profile.from_state(state, vec.feature_weights()).score(X), p.score(X))
    else:
        with pytest.raises(StateError, match="duplicate or negative"):
            Profile.from_state(state, vec.feature_weights())


def test_rocchio_with_no_positive_coefficient_still_learns(vec: Vectorizer) -> None:
    """Negatives that outweigh the query leave no positive coefficient (an empty model):
    the profile scores 0 and its threshold can still be re-learned."""
    p = Profile("x", query="wheat", model_params={"gamma": 50.0})
    p.fit(vec.transform(["wheat"]), feature_weights=vec.feature_weights())
    p.learn_one(vec.transform(["wheat"]), relevant=True)
    p.learn_one(vec.transform(["wheat"]), relevant=False)
    assert p.model_.coef()[0].size == 0
    p.learn_one(vec.transform(["zinc smelter"]), relevant=False)  # re-thresholds
    assert np.all(p.score(vec.transform(TRAIN)) == 0)


_judgments = st.lists(st.tuples(st.sampled_from([*TRAIN, "zinc smelter", "wheat"]), st.booleans()),
                      min_size=0, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(["rocchio", "kantor", "knn"]), judgments=_judgments,
       update=st.sampled_from(["every", 2, "never"]))
def test_state_round_trip_is_exact(vec: Vectorizer, model: str, judgments, update) -> None:  # type: ignore[no-untyped-def]
    p = _fit(vec, model, update=update)
    for text, rel in judgments:
        p.learn_one(vec.transform([text]), relevant=rel)
    blob = orjson.dumps(p.to_state())
    q = Profile.from_state(orjson.loads(blob), vec.feature_weights())
    assert orjson.dumps(q.to_state()) == blob
    X = vec.transform([*TRAIN, "wheat harvest", "zinc"])
    assert np.array_equal(p.score(X), q.score(X))
    assert p.threshold_ == q.threshold_
    # and they keep learning identically
    for r in (p, q):
        r.learn_one(vec.transform(["wheat tender"]), relevant=True)
    assert np.array_equal(p.score(X), q.score(X)) and p.threshold_ == q.threshold_


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(["rocchio", "kantor", "knn"]), judgments=_judgments)
def test_learning_does_not_mutate_inputs(vec: Vectorizer, model: str, judgments) -> None:  # type: ignore[no-untyped-def]
    p = _fit(vec, model)
    for text, rel in judgments:
        x = vec.transform([text])
        before = (x.data.copy(), x.indices.copy(), x.indptr.copy())
        p.learn_one(x, relevant=rel)
        assert np.array_equal(x.data, before[0]) and np.array_equal(x.indices, before[1])
        X = vec.transform(TRAIN)
        snapshot = X.data.copy()
        p.score(X)
        assert np.array_equal(X.data, snapshot)


def test_seeded_runs_are_reproducible(vec: Vectorizer) -> None:
    kw = {"pseudolabel": {"max_pos_rank": 6, "pos_fraction": 0.5, "min_neg_rank": 4, "neg_fraction": 0.5}}
    a = orjson.dumps(_fit(vec, seed=3, **kw).to_state())
    b = orjson.dumps(_fit(vec, seed=3, **kw).to_state())
    assert a == b


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_bank_stacked_scores_equal_single_scores(vec: Vectorizer, model: str) -> None:
    bank = ProfileBank()
    X_train = vec.transform(TRAIN)
    for name, words in (("wheat", "wheat"), ("oil", "oil opec"), ("gold", "gold")):
        p = Profile(name, query=words, model=model, pseudolabel={})
        pos = [i for i, t in enumerate(TRAIN) if name in t][:2]
        p.fit(vec.transform([words]), X_train, positives=pos)
        bank.add(p)
    X = vec.transform([*TRAIN, "wheat and oil", "gold and wheat", ""])
    S = bank.score(X)
    for j, p in enumerate(bank):
        assert S[:, j] == pytest.approx(p.score(X))
    # after a judgment the stack is rebuilt
    bank["oil"].learn_one(vec.transform(["opec meeting"]), relevant=True)
    S2 = bank.score(X)
    assert S2[:, 1] == pytest.approx(bank["oil"].score(X))
    hits = bank.decide(X)
    assert all(h.score >= h.threshold for h in hits)
    assert {(h.row, h.profile) for h in hits} == {
        (int(r), bank.names[c]) for r, c in zip(*np.nonzero(bank.thresholds() <= S2), strict=True)
    }
    # every field, row-major, as named tuples of plain Python values
    thr = bank.thresholds()
    assert hits == [Hit(int(r), bank.names[c], float(S2[r, c]), float(thr[c]), bank[bank.names[c]].version_)
                    for r, c in zip(*np.nonzero(thr <= S2), strict=True)]
    assert all(type(h) is Hit and type(h.row) is int and type(h.score) is float for h in hits)
    assert bank.remove("gold") is not None and bank.score(X).shape == (X.shape[0], 2)


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
@pytest.mark.parametrize("update", ["every", 3, "never"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(judgments=st.lists(st.tuples(st.integers(0, len(TRAIN) - 1), st.booleans()), min_size=1, max_size=12),
       cut=st.integers(0, 12))
def test_learn_many_equals_one_by_one(vec: Vectorizer, model: str, update, judgments, cut) -> None:  # type: ignore[no-untyped-def]
    """A batch (split anywhere into two calls) leaves exactly the state of one-by-one learning."""
    X = vec.transform(TRAIN)
    one = _fit(vec, model, update=update, max_examples=20)
    many = _fit(vec, model, update=update, max_examples=20)
    for i, rel in judgments:
        one.learn_one(X[i], rel)
    rows = [i for i, _ in judgments]
    rels = [r for _, r in judgments]
    k = min(cut, len(rows))
    for part in (slice(0, k), slice(k, None)):
        many.learn_many(X[rows[part]], rels[part])
    a, b = one.to_state(), many.to_state()
    a.pop("model_version"), b.pop("model_version")  # counts re-thresholds, not judgments
    assert orjson.dumps(a) == orjson.dumps(b)
    assert one.threshold_ == many.threshold_ and one.n_pending_ == many.n_pending_


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
@pytest.mark.parametrize("update", ["every", 3, "never"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.lists(st.tuples(st.integers(0, len(TRAIN) - 1), st.booleans()),
                               min_size=0, max_size=4), min_size=0, max_size=6),
       pending=st.integers(0, 2))
def test_relearn_leaves_the_state_of_the_calls(vec: Vectorizer, model: str, update,  # type: ignore[no-untyped-def]
                                               calls, pending) -> None:
    """A recorded sequence of learn_many calls re-learned in one step (what the streaming
    service does with a profile's judgment journal) ends in exactly the state of the
    calls, model version included, also from a profile with judgments pending."""
    X = vec.transform(TRAIN)
    live = _fit(vec, model, update=update, max_examples=20)
    again = _fit(vec, model, update=update, max_examples=20)
    stacked = _fit(vec, model, update=update, max_examples=20)
    for p in (live, again, stacked):
        for i in range(pending):
            p.learn_one(X[i], i % 2 == 0)
    recorded = [(X[[i for i, _ in call]], [r for _, r in call]) for call in calls]
    for rows, rels in recorded:
        live.learn_many(rows, rels)
    again.relearn(recorded)
    # the same calls as their rows stacked and each call's size (no matrix per call)
    stacked.relearn_rows(X[[i for call in calls for i, _ in call]],
                         [r for call in calls for _, r in call], [len(call) for call in calls])
    for p in (again, stacked):
        assert orjson.dumps(live.to_state()) == orjson.dumps(p.to_state())
        assert (live.threshold_, live.version_, live.silenced_, live.n_pending_) == \
            (p.threshold_, p.version_, p.silenced_, p.n_pending_)


def test_relearn_refuses_rows_and_labels_that_differ(vec: Vectorizer) -> None:
    p = _fit(vec)
    X = vec.transform(TRAIN)
    with pytest.raises(FilterError, match="relearn: a call of"):
        p.relearn([(X[:2], [True])])
    with pytest.raises(FilterError, match="calls of 3 rows"):
        p.relearn_rows(X[:2], [True, False], [1, 2])
    with pytest.raises(FilterError, match="1 labels"):
        p.relearn_rows(X[:2], [True], [1])


def test_silencing_depends_on_the_state_not_on_how_often_it_was_rethresholded(vec: Vectorizer) -> None:
    """The case hypothesis found: one by one, the sixth re-threshold answers No (+inf); the
    batch never sees that intermediate state. Both end in the same state, flag included."""
    X = vec.transform(TRAIN)
    rows = [0, 0, 0, 1, 1, 2, 0]
    one = _fit(vec, "kantor", max_examples=20)
    many = _fit(vec, "kantor", max_examples=20)
    flags = []
    for i in rows:
        one.learn_one(X[i], relevant=False)
        flags.append((one.threshold_ == math.inf, one.silenced_))
    assert (True, True) in flags  # the intermediate silencing happens one by one ...
    many.learn_many(X[rows], [False] * len(rows))
    # ... and ends with the state that caused it
    assert one.silenced_ == many.silenced_ == (one.threshold_ == math.inf)
    assert not one.silenced_at_fit_
    assert one.threshold_ == many.threshold_


def test_silenced_at_fit_survives_a_round_trip_and_old_states_read(vec: Vectorizer) -> None:
    p = _fit(vec, "kantor")
    p.silenced_at_fit_ = True
    state = orjson.loads(orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    assert Profile.from_state(state, vec.feature_weights()).silenced_at_fit_
    old = dict(state)
    del old["silenced_at_fit"]  # written before the flag: the sticky flag stands in
    old["silenced"] = True
    assert Profile.from_state(old, vec.feature_weights()).silenced_at_fit_
    old["silenced_at_fit"] = "yes"
    with pytest.raises(StateError, match="silenced_at_fit must be a boolean, got 'yes'"):
        Profile.from_state(old, vec.feature_weights())


def test_learn_many_rejects_bad_shapes_and_weights(vec: Vectorizer) -> None:
    p = _fit(vec)
    X = vec.transform(TRAIN[:2])
    with pytest.raises(FilterError, match="got \\(2, 16384\\) and 1 labels"):
        p.learn_many(X, [True])
    with pytest.raises(FilterError, match="weights must be"):
        p.learn_many(X, [True, False], [1.0, -1.0])
    assert p.n_judged_ == 0 and p.n_pending_ == 0


def test_bank_learn_many_groups_by_profile(vec: Vectorizer) -> None:
    bank = ProfileBank()
    for name in ("wheat", "oil"):
        p = Profile(name, query=name, pseudolabel={})
        X = vec.transform(TRAIN)
        p.fit(vec.transform([name]), X, positives=[i for i, t in enumerate(TRAIN) if name in t][:2],
              feature_weights=vec.feature_weights())
        bank.add(p)
    X = vec.transform(TRAIN)
    before = bank.score(X)
    changed = bank.learn_many([("oil", X[2], True), ("oil", X[6], False), ("oil", X[3], False)])
    assert changed == ["oil"]
    assert bank["oil"].n_judged_ == 3 and bank["wheat"].n_judged_ == 0
    after = bank.score(X)
    np.testing.assert_array_equal(after[:, 0], before[:, 0])
    assert not np.array_equal(after[:, 1], before[:, 1])
    np.testing.assert_allclose(after[:, 1], bank["oil"].score(X))
    with pytest.raises(FilterError, match="no profile named 'gold'"):
        bank.learn_many([("oil", X[0], True), ("gold", X[0], True)])
    assert bank["oil"].n_judged_ == 3


@pytest.mark.parametrize("shape", [[1, 2**31], [-1, 4], [2**40, 4], [1, 2, 3]])
def test_state_rejects_matrix_shapes_out_of_range(shape) -> None:  # type: ignore[no-untyped-def]
    from sift.filters.state import decode_csr, encode_csr

    enc = encode_csr(np.eye(2)[:1])
    enc["shape"] = shape
    with pytest.raises(StateError, match="shape must be two dimensions"):
        decode_csr(enc, name="m")


def test_encode_csr_leaves_an_unsorted_matrix_as_it_was() -> None:
    """Encoding sorts a row's entries by column in a copy: until the twenty-seventh
    session ``sp.csr_matrix(m)`` shared ``m``'s arrays and the sort rewrote them."""
    from sift.filters.state import decode_csr, encode_csr

    m = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([3, 1, 0]), np.array([0, 2, 3])), shape=(2, 5))
    assert not m.has_sorted_indices
    enc = encode_csr(m)
    assert m.indices.tolist() == [3, 1, 0] and m.data.tolist() == [1.0, 2.0, 3.0]
    back = decode_csr(orjson.loads(orjson.dumps(enc)), name="m")
    assert back.indices.tolist() == [1, 3, 0] and np.array_equal(back.toarray(), m.toarray())


def test_decoded_matrices_stack_as_vstack() -> None:
    """``stack_csr_parts`` of decoded matrices (empty ones included) is their vstack,
    exactly; a matrix of another width is refused."""
    from sift.filters.state import decode_csr_parts, encode_csr, stack_csr_parts

    rng = np.random.default_rng(3)
    mats = [sp.random(n, 7, density=0.3, format="csr", random_state=rng) for n in (2, 0, 3, 1)]
    parts = [decode_csr_parts(orjson.loads(orjson.dumps(encode_csr(m)))) for m in mats]
    got = stack_csr_parts(parts, 7)
    want = sp.vstack(mats, format="csr")
    assert got.shape == (6, 7) and np.array_equal(got.toarray(), want.toarray())
    assert stack_csr_parts([], 7).shape == (0, 7)
    with pytest.raises(StateError, match="7 wide"):
        stack_csr_parts([*parts, decode_csr_parts(encode_csr(sp.csr_matrix((1, 8))))], 7)


def test_pseudo_positives_stay_out_of_trot_by_default(vec: Vectorizer) -> None:
    from sift.filters.threshold import trot

    pseudo = {"max_pos_rank": 6, "pos_fraction": 1.0, "pos_weight": 1.0, "neg_fraction": 0.5, "min_pool": 0}
    for flag in (False, True):
        p = _fit(vec, pseudolabel=pseudo, trot_pseudo_positives=flag, explore=0.0)
        ex = p.examples_
        assert np.any((ex.labels > 0) & ~ex.real)  # pseudo-positives exist
        keep = np.ones(len(ex), bool) if flag else ex.real | (ex.labels < 0)
        loo = p.model_.loo_scores()
        weights = p.trot_weights(loo[keep], ex.labels[keep], ex.real[keep], ex.weights[keep])
        assert p.threshold_ == trot(loo[keep], ex.labels[keep], weights, measure="t11su",
                                    placement=p.threshold_placement)


def test_exploration_lowers_the_threshold_only_after_relevant_feedback(vec: Vectorizer) -> None:
    pseudo = {"neg_fraction": 1.0, "neg_weight": 0.1, "min_pool": 0}
    docs = vec.transform(["wheat harvest exports", "wheat crop usda", "wheat futures rose",
                          "wheat exports to china", "wheat prices higher", "usda wheat forecast"])
    plain, explo = _fit(vec, pseudolabel=pseudo, explore=0.0), _fit(vec, pseudolabel=pseudo, explore=1.0)
    assert explo.n_relevant_ == 0 and explo.explore_share() == 0.0
    assert explo.threshold_ == plain.threshold_  # no relevant feedback yet: no exploration
    for p in (plain, explo):
        p.learn_many(docs, [True] * 6)
    assert explo.n_relevant_ == 6 and explo.explore_share() > 0
    assert explo.threshold_ < plain.threshold_
    # junk at the bottom of what it delivers stops it
    junk = vec.transform(["bank interest rates", "gold mine output", "opec oil", "oil tanker", "gulf oil"])
    explo.learn_many(junk, [False] * 5)
    ex = explo.examples_
    loo = explo.model_.loo_scores()
    assert np.all(ex.labels[np.argsort(np.where(ex.real, loo, np.inf))[:5]] < 0)  # the bottom five
    assert explo.explore_share() == 0.0


def test_exploration_parameters_and_counter_round_trip(vec: Vectorizer) -> None:
    for bad in ({"explore": 1.5}, {"explore": -0.1}, {"explore_rate": -1}, {"explore_window": 0},
                {"explore_precision": 1.0}, {"trot_pseudo_positives": "no"}):
        with pytest.raises(ParameterError, match=next(iter(bad))):
            Profile("x", **bad)  # type: ignore[arg-type]
    p = _fit(vec)
    p.learn_one(vec.transform(["wheat harvest"]), relevant=True)
    state = orjson.loads(orjson.dumps(p.to_state()))
    q = Profile.from_state(state, vec.feature_weights())
    assert q.n_relevant_ == 1 and q.get_params() == p.get_params() and q.threshold_ == p.threshold_
    del state["n_relevant"]  # a state written before the counter existed
    assert Profile.from_state(state, vec.feature_weights()).n_relevant_ == 0


def test_bank_reuses_its_stacks_until_a_profile_changes_or_is_added(vec: Vectorizer) -> None:
    """Scoring again with nothing changed reuses the stacks (no pass per profile beyond
    their versions); a judgment, a replaced profile or a new one rebuilds them, and the
    scores follow."""
    bank = ProfileBank()
    X_train = vec.transform(TRAIN)
    for name in ("wheat", "oil"):
        p = Profile(name, query=name, pseudolabel={})
        p.fit(vec.transform([name]), X_train, positives=[i for i, t in enumerate(TRAIN) if name in t][:2])
        bank.add(p)
    X = vec.transform(TRAIN)
    bank.score(X)
    groups = bank._stack_groups()
    assert bank._stack_groups() is groups
    bank["wheat"].learn_one(vec.transform(["wheat harvest"]), relevant=True)
    assert bank._stack_groups() is not groups
    np.testing.assert_allclose(bank.score(X)[:, 0], bank["wheat"].score(X))
    # the same name, another profile with the same version number (a profile re-created
    # by a new spec, fitted as often as the old one): rebuilt, where the stacks, which
    # know their members by name and version, kept scoring the old model before
    other = Profile("oil", query="gold", pseudolabel={})
    other.fit(vec.transform(["gold"]), X_train, positives=[i for i, t in enumerate(TRAIN) if "gold" in t][:2])
    other.version_ = bank["oil"].version_
    bank.add(other)
    np.testing.assert_allclose(bank.score(X)[:, 1], other.score(X))
    assert list(bank.thresholds()) == [bank["wheat"].threshold_, other.threshold_]
    third = Profile("gold", query="gold", pseudolabel={})
    third.fit(vec.transform(["gold"]), X_train, positives=[])
    bank.add(third)
    assert bank.score(X).shape == (X.shape[0], 3) and bank.names == ["wheat", "oil", "gold"]


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "3", "none", [3]])
def test_negative_mass_is_validated(bad: object) -> None:
    with pytest.raises(ParameterError, match="negative_mass"):
        Profile("x", negative_mass=bad)  # type: ignore[arg-type]


def test_negative_mass_auto_resolves_per_model_and_old_states_keep_the_design_weights(vec: Vectorizer) -> None:
    assert [Profile("x", model=m).negative_mass_ for m in ("rocchio", "knn", "kantor")] == [3.0, 3.0, 3.0]
    assert Profile("x", model="fusion").negative_mass_ == 3.0  # since the forty-first session
    assert Profile("x", negative_mass=2).negative_mass_ == 2.0
    pseudo = {"neg_fraction": 1.0, "neg_weight": 0.1, "min_pool": 0}
    p = _fit(vec, pseudolabel=pseudo)
    state = orjson.loads(orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    assert Profile.from_state(state, vec.feature_weights()).negative_mass == "auto"
    del state["params"]["negative_mass"]  # a state written before the parameter
    old = Profile.from_state(state, vec.feature_weights())
    assert old.negative_mass is None and old.negative_mass_ is None


def test_negative_mass_sets_the_pseudo_negatives_trot_weight(vec: Vectorizer) -> None:
    """Each pseudo-negative weighs m / K in TROT (m: the real positives' weight, at most the
    mass; K: pseudo-negatives at or above the lowest real positive); the model keeps the
    pseudolabel weight, and the examples' stored weights do not change."""
    from sift.filters.threshold import trot

    pseudo = {"neg_fraction": 1.0, "neg_weight": 0.1, "min_pool": 0}
    for mass in (1.0, 3.0, 50.0):
        p = _fit(vec, pseudolabel=pseudo, negative_mass=mass, explore=0.0)
        ex = p.examples_
        loo = p.model_.loo_scores()
        sample = (ex.labels < 0) & ~ex.real
        pos = (ex.labels > 0) & ex.real
        k = max(int(np.count_nonzero(loo[sample] >= loo[pos].min())), 1, p.size_floor_)
        w = p.trot_weights(loo, ex.labels, ex.real, ex.weights)
        assert np.allclose(w[sample], min(mass, pos.sum()) / k)
        assert np.array_equal(w[~sample], ex.weights[~sample])
        assert np.all(ex.weights[sample] == 0.1)
        keep = ex.real | (ex.labels < 0)
        assert p.threshold_ == trot(loo[keep], ex.labels[keep], w[keep], measure="t11su",
                                    placement=p.threshold_placement)


def test_ranking_size_counts_the_documents_near_the_top() -> None:
    from sift.filters.profile import ranking_size

    scores = np.array([0.9, 0.1, 0.5, 0.1, 0.3, 0.1, 0.1])  # median 0.1, top 0.8 above it
    assert ranking_size(scores, 0.5).tolist() == [True, False, True, False, False, False, False]
    assert ranking_size(scores, 0.2).tolist() == [True, False, True, False, True, False, False]
    assert not ranking_size(np.full(5, 0.4), 0.3).any()  # no top above the median


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_size_floor_is_the_expected_count_of_look_alike_pseudo_negatives(vec: Vectorizer,
                                                                         fraction: float) -> None:
    """The floor counts the unlabelled training documents near the top of the initial
    model's ranking (the model of the query and the real positives, which a profile
    without pseudolabels ends with) and scales them to the share drawn as
    pseudo-negatives; TROT's K is at least that."""
    from sift.filters.profile import ranking_size

    plain = _fit(vec)  # no pseudolabels: the model before pseudolabeling
    scores = plain.score(vec.transform(TRAIN))
    unlabelled = np.ones(len(TRAIN), bool)
    unlabelled[[i for i, t in enumerate(TRAIN) if "wheat" in t][:3]] = False
    near = int(np.count_nonzero(ranking_size(scores, 0.3) & unlabelled))
    assert near > 0
    pseudo = {"neg_fraction": fraction, "neg_weight": 0.1, "min_pool": 0}
    p = _fit(vec, pseudolabel=pseudo, size_cut=0.3, explore=0.0)
    ex = p.examples_
    sample = (ex.labels < 0) & ~ex.real
    assert p.size_floor_ == round(near * int(sample.sum()) / int(unlabelled.sum()))
    loo = p.model_.loo_scores()
    pos = (ex.labels > 0) & ex.real
    k = max(int(np.count_nonzero(loo[sample] >= loo[pos].min())), 1)
    w = p.trot_weights(loo, ex.labels, ex.real, ex.weights)
    assert np.allclose(w[sample], 3.0 / max(k, p.size_floor_))
    assert _fit(vec, pseudolabel=pseudo, size_cut=None).size_floor_ == 0
    assert _fit(vec, size_cut=0.3).size_floor_ == 0  # no pseudo-negatives, no floor
    # pseudo-negatives from below the top ranks only: not a sample of the ranking's top
    assert _fit(vec, pseudolabel={**pseudo, "min_neg_rank": 5}, size_cut=0.3).size_floor_ == 0


def test_size_floor_raises_k_in_trot_weights() -> None:
    """By hand: 2 real positives (m = 2), 2 pseudo-negatives at or above the lowest of them
    (K = 2): each pseudo-negative weighs m / K = 1, and m / 4 = 0.5 under a floor of 4; a
    floor below K changes nothing."""
    scores = np.array([0.9, 0.5, 0.6, 0.5, 0.2, 0.1])
    labels = np.array([1, 1, -1, -1, -1, -1], dtype=np.int8)
    real = np.array([True, True, False, False, False, False])
    weights = np.array([1, 1, .1, .1, .1, .1])
    p = Profile("x", negative_mass=3.0)
    assert p.trot_weights(scores, labels, real, weights).tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    p.size_floor_ = 4
    assert p.trot_weights(scores, labels, real, weights).tolist() == [1.0, 1.0, 0.5, 0.5, 0.5, 0.5]
    p.size_floor_ = 1
    assert p.trot_weights(scores, labels, real, weights).tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_size_cut_auto_resolves_per_model_validates_and_round_trips(vec: Vectorizer) -> None:
    assert [Profile("x", model=m).size_cut_ for m in ("rocchio", "kantor", "knn", "fusion")] \
        == [0.3, None, None, None]
    assert Profile("x", model="knn", size_cut=0.5).size_cut_ == 0.5
    assert Profile("x").get_params()["size_cut"] == "auto"
    for bad in (0, 0.0, 1.5, -0.2, True, "0.3", math.nan):
        with pytest.raises(ParameterError, match="size_cut"):
            Profile("x", size_cut=bad)  # type: ignore[arg-type]
    p = _fit(vec, pseudolabel={"neg_fraction": 1.0, "neg_weight": 0.1, "min_pool": 0}, size_cut=0.3)
    assert p.size_floor_ > 0
    state = orjson.loads(orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    again = Profile.from_state(state, vec.feature_weights())
    assert (again.size_cut, again.size_floor_, again.threshold_) == (0.3, p.size_floor_, p.threshold_)
    del state["params"]["size_cut"], state["size_floor"]  # a state written before the parameter
    old = Profile.from_state(state, vec.feature_weights())
    assert (old.size_cut, old.size_cut_, old.size_floor_) == (None, None, 0)
    state["size_floor"] = -1
    with pytest.raises(StateError, match="size_floor"):
        Profile.from_state(state, vec.feature_weights())


def test_explore_auto_resolves_per_model() -> None:
    assert [Profile("x", model=m).explore_ for m in ("rocchio", "kantor", "knn")] == [0.8, 0.8, 0.4]
    assert Profile("x", model="knn", explore=0.8).explore_ == 0.8
    assert Profile("x").get_params()["explore"] == "auto"
    for bad in ("8", "always", -0.1, 1.5):
        with pytest.raises(ParameterError, match="explore"):
            Profile("x", explore=bad)  # type: ignore[arg-type]


def test_knn_never_delivers_a_document_it_scores_zero(vec: Vectorizer) -> None:
    """Three positives with no term in common (and no query): each scores 0 leave-one-out,
    so TROT's threshold would be 0 and every document would be delivered."""
    docs = ["alpha beta", "gamma delta", "epsilon zeta", "opec oil output", "beta gamma"]
    p = Profile("x", query="", model="knn", pseudolabel={})
    p.fit(None, vec.transform(docs), positives=[0, 1, 2], feature_weights=vec.feature_weights())
    assert np.all(p.model_.loo_scores()[p.examples_.real] == 0)
    assert 0 < p.threshold_ < 1e-300
    scores = p.score(vec.transform(["opec oil output", "alpha wheat"]))
    assert scores[0] == 0 and scores[1] > 0
    assert p.decide(vec.transform(["opec oil output", "alpha wheat"])).tolist() == [False, True]
    state = orjson.loads(orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY))
    assert Profile.from_state(state, vec.feature_weights()).threshold_ == p.threshold_
    # a model whose scores may be negative or zero on purpose has no such floor: fusion
    # once its weights are solved (before, it scores with its Rocchio sub-model's floor)
    fused = Profile("y", query="", model="fusion", pseudolabel={})
    assert fused.model_.no_evidence_score == 0.0
    fused.fit(None, vec.transform(docs), positives=[0, 1, 2], feature_weights=vec.feature_weights())
    assert fused.model_.weights_ and fused.model_.no_evidence_score is None
    # a signed vote scores a document sharing nothing with the pool 0 too, and has the
    # same floor since the forty-fourth session (test_core_audit_s44.py)
    signed = Profile("z", query="", model="knn", model_params={"vote": "signed"}, pseudolabel={})
    assert signed.model_.no_evidence_score == 0.0


@pytest.mark.parametrize("model", ["rocchio", "kantor", "knn"])
def test_judgments_are_the_real_judgments_held_oldest_first(vec: Vectorizer, model: str) -> None:
    """Not the training positives, pseudolabels or kNN's query; the newest when the
    example set evicted some; then those pending under ``update=n``; the state keeps them."""
    texts = [f"wheat report {i}" if i % 3 else f"oil report {i}" for i in range(9)]
    rel = [i % 3 != 0 for i in range(9)]
    p = _fit(vec, model, update=4, max_examples=6,
             pseudolabel={"neg_fraction": 1.0, "min_pool": 0})
    assert p.judgments()[1].size == 0
    for t, r in zip(texts, rel, strict=True):
        p.learn_one(vec.transform([t]), relevant=r, weight=2.0 if r else 1.0)
    X, got, w = p.judgments()
    assert (p.n_judged_, p.n_pending_) == (8, 1)
    # eight applied into a set of 6 (pseudolabels, then the training positives, then the
    # oldest judgments evicted first): the newest six applied, then the pending one
    assert p.examples_.real.all() and len(p.examples_) == 6
    want = [2, 3, 4, 5, 6, 7, 8]
    assert got.tolist() == [rel[i] for i in want]
    assert w.tolist() == [2.0 if rel[i] else 1.0 for i in want]
    assert (vec.transform([texts[i] for i in want]) != X).nnz == 0
    copy = Profile.from_state(orjson.loads(orjson.dumps(p.to_state())),
                              feature_weights=vec.feature_weights())
    X2, got2, w2 = copy.judgments()
    assert (X2 != X).nnz == 0 and got2.tolist() == got.tolist() and w2.tolist() == w.tolist()
