"""FusionModel as a profile model, and the FusionVectorizer it reads its context from."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.filters.errors import ParameterError, StateError
from sift.filters.examples import ExampleSet
from sift.filters.fusion import COMPONENTS, ContextWeights, FusionModel
from sift.filters.profile import Profile
from sift.filters.representations import FusionVectorizer
from sift.filters.vectorize import Vectorizer
from tests.unit.test_profile import TRAIN


@pytest.fixture(scope="module")
def fvec() -> FusionVectorizer:
    return FusionVectorizer(n_features=2**13, lsa_components=3, char_top=50).fit(TRAIN)


@pytest.fixture(scope="module")
def vec() -> Vectorizer:
    return Vectorizer(n_features=2**12).fit(TRAIN)


def _fit(v: Vectorizer, **kw) -> Profile:  # type: ignore[no-untyped-def]
    p = Profile("wheat", query="wheat", model="fusion", pseudolabel=kw.pop("pseudolabel", {}),
                model_params=kw.pop("model_params", {}), **kw)
    pos = [i for i, t in enumerate(TRAIN) if "wheat" in t][:3]
    p.fit(v.transform(["wheat"]), v.transform(TRAIN), positives=pos,
          feature_weights=v.feature_weights())
    return p


def test_fusion_vectorizer_blocks_and_state(fvec: FusionVectorizer) -> None:
    X = fvec.transform(["wheat harvest", "oil"])
    half = 2**12
    assert X.shape == (2, 2**13)
    for i in range(2):
        row = X[i]
        w, c = row.data[row.indices < half], row.data[row.indices >= half]
        assert math.isclose(float(w @ w), 0.5) and math.isclose(float(c @ c), 0.5)
        assert c.size <= 50
    ctx = fvec.feature_weights().context
    assert ctx is not None and ctx.char_start == half and ctx.lsa_map.shape[1] == 3
    again = FusionVectorizer.from_state(orjson.loads(orjson.dumps(fvec.to_state())))
    assert np.array_equal(again.transform(["wheat harvest"]).toarray(), X[0].toarray())
    assert np.array_equal(again.lsa_map_, fvec.lsa_map_)
    with pytest.raises(StateError):
        Vectorizer.from_state(fvec.to_state())


def test_components_follow_the_context(vec: Vectorizer, fvec: FusionVectorizer) -> None:
    assert _fit(vec).model_.components_ == ["word", "rocchio", "kantor", "knn"]  # type: ignore[attr-defined]
    p = _fit(fvec)
    assert p.model_.components_ == list(COMPONENTS)  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match="FusionContext"):
        _fit(vec, model_params={"components": ["word", "lsa"]})


@pytest.mark.parametrize("which", ["vec", "fvec"])
def test_profile_delivers_relevant(which: str, vec: Vectorizer, fvec: FusionVectorizer) -> None:
    v = vec if which == "vec" else fvec
    p = _fit(v)
    assert math.isfinite(p.threshold_)
    s = p.score(v.transform(["wheat prices and wheat exports", "opec oil output"]))
    assert s[0] > s[1]
    w = p.model_.weights_  # type: ignore[attr-defined]
    assert math.isclose(sum(w.values()), 1.0) and min(w.values()) >= 0


def test_resolves_every_n_positives(fvec: FusionVectorizer) -> None:
    p = _fit(fvec, model_params={"resolve_every": 2})
    m = p.model_
    assert isinstance(m, FusionModel)
    first = m.n_solves_
    assert first == 1
    p.learn_one(fvec.transform(["wheat tender"]), relevant=True)
    p.learn_one(fvec.transform(["oil spill"]), relevant=False)
    assert m.n_solves_ == first  # one new positive: sub-models learned, weights kept
    p.learn_one(fvec.transform(["wheat shipment"]), relevant=True)
    assert m.n_solves_ == first + 1 and m.n_pos_at_solve_ == m.n_pos_


def test_leave_one_out_word_cosine_is_exact(vec: Vectorizer) -> None:
    X = vec.transform(TRAIN[:8])
    lab = np.array([1, 1, -1, -1, -1, 1, -1, -1], dtype=np.int8)
    w = np.linspace(0.5, 1.5, 8)
    ex = ExampleSet(None, X.shape[1])
    m = FusionModel(components=["word"])
    m.bind(X.shape[1], None, ex)
    q = vec.transform(["wheat"])
    m.start(q)
    m.learn(X, lab, w, np.ones(8, bool))
    ex.add(X, lab, w, np.ones(8, bool))
    D = m._matrix(None)[:, 0]
    dense = X.toarray()
    for i in range(8):
        c = q.toarray()[0] + sum(w[k] * dense[k] for k in range(8) if lab[k] > 0 and k != i)
        cos = dense[i] @ c / (np.linalg.norm(dense[i]) * np.linalg.norm(c))
        assert math.isclose(D[i], 1.0 - cos, abs_tol=1e-12)


def test_parameter_errors() -> None:
    for kw, word in (({"components": ["bm25"]}, "components"),
                     ({"resolve_every": 0}, "resolve_every"),
                     ({"time_limit": 0}, "time_limit"), ({"objective": "x"}, "objective"),
                     ({"tie_break": "x"}, "tie_break"), ({"knn": {"kk": 3}}, "sub-model"),
                     ({"components": "word"}, "components must be a list"),
                     ({"components": 3}, "components must be a list"),
                     ({"rocchio": 3}, "rocchio must be a dict"), ({"seed": "a"}, "seed"),
                     ({"seed": -1}, "seed")):
        with pytest.raises(ParameterError, match=word):
            FusionModel(**kw)  # type: ignore[arg-type]


def test_state_needs_the_same_context(vec: Vectorizer, fvec: FusionVectorizer) -> None:
    p = _fit(fvec)
    state = orjson.loads(orjson.dumps(p.to_state()))
    # a plain vectorizer of another width: refused on the width, before the components
    with pytest.raises(StateError, match="features for a vectorizer"):
        Profile.from_state(state, vec.feature_weights())
    bad = orjson.loads(orjson.dumps(p.to_state()))
    bad["model"]["version"] = 99
    with pytest.raises(StateError, match="version"):
        Profile.from_state(bad, fvec.feature_weights())
    bad = orjson.loads(orjson.dumps(p.to_state()))
    bad["model"]["n_pos_at_solve"] = 10**6
    with pytest.raises(StateError, match="counters"):
        Profile.from_state(bad, fvec.feature_weights())


def test_context_weights_is_a_plain_array_to_numpy() -> None:
    w = ContextWeights(np.arange(3.0), None)
    assert type(np.asarray(w)) is np.ndarray and w[1:].context is None


_judgments = st.lists(
    st.tuples(st.sampled_from([*TRAIN, "zinc smelter", "wheat"]), st.booleans()),
    min_size=0, max_size=8)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(judgments=_judgments, update=st.sampled_from(["every", 2]),
       resolve=st.sampled_from([1, 2, 5]))
def test_state_round_trip_is_exact(  # type: ignore[no-untyped-def]
    fvec: FusionVectorizer, judgments, update, resolve
) -> None:
    p = _fit(fvec, update=update, model_params={"resolve_every": resolve})
    for text, rel in judgments:
        p.learn_one(fvec.transform([text]), relevant=rel)
    blob = orjson.dumps(p.to_state())
    q = Profile.from_state(orjson.loads(blob), fvec.feature_weights())
    assert orjson.dumps(q.to_state()) == blob
    X = fvec.transform([*TRAIN, "wheat harvest", "zinc"])
    assert np.array_equal(p.score(X), q.score(X))
    assert p.threshold_ == q.threshold_
    for r in (p, q):
        r.learn_one(fvec.transform(["wheat tender"]), relevant=True)
        r.flush()
    assert np.array_equal(p.score(X), q.score(X)) and p.threshold_ == q.threshold_


STREAM = [("wheat tender for export", True), ("oil spill at sea", False),
          ("wheat shipment delayed", True), ("bank rates rise", False),
          ("wheat crop forecast", True), ("grain and wheat prices", True),
          ("opec output talks", False), ("wheat harvest record", True)]


@pytest.mark.parametrize("update", ["every", "2", "3"])
@pytest.mark.parametrize("resolve_every", [1, 2, 3])
@pytest.mark.parametrize("initial", [True, False])
def test_a_batch_re_solves_where_judgments_one_by_one_do(vec: Vectorizer, update: str,
                                                         resolve_every: int, initial: bool) -> None:
    # the weights are re-solved after the judgment (or group) completing resolve_every
    # positives, from the examples of that moment: learn_many must do the same, or a
    # profile rebuilt from its journal (relearn) gets other weights. Without initial
    # positives the re-threshold skips the leave-one-out scores (and so the solve) until
    # a real positive comes, which a batch must do too.
    params = {"resolve_every": resolve_every, "time_limit": 60.0}
    upd = update if update == "every" else int(update)

    def fitted() -> Profile:
        if initial:
            return _fit(vec, model_params=params, update=upd)
        p = Profile("wheat", query="wheat", model="fusion", model_params=params, update=upd)
        p.fit(vec.transform(["wheat"]), vec.transform(TRAIN), positives=[],
              feature_weights=vec.feature_weights())
        return p

    one, many, journal = (fitted() for _ in range(3))
    stream = STREAM if initial else [("oil spill at sea", False), ("bank rates rise", False),
                                     ("opec output talks", False), *STREAM]
    X = vec.transform([t for t, _ in stream])
    rel = [r for _, r in stream]
    for i in range(len(stream)):
        one.learn_one(X[i], relevant=rel[i])
    many.learn_many(X, rel)
    journal.relearn([(X[:3], rel[:3]), (X[3:], rel[3:])])
    for p in (many, journal):
        a, b = one.model_, p.model_
        assert isinstance(a, FusionModel) and isinstance(b, FusionModel)
        assert (b.n_solves_, b.n_pos_at_solve_, b.n_pos_) == (a.n_solves_, a.n_pos_at_solve_, a.n_pos_)
        assert np.array_equal(b.alpha_, a.alpha_)
        assert p.threshold_ == one.threshold_
        assert np.array_equal(p.score(X), one.score(X))
    assert one.model_.n_solves_ > (1 if initial else 0)  # type: ignore[attr-defined]


@pytest.mark.parametrize("budget", [0.0, 1e-9])
def test_a_batch_past_its_solve_budget_solves_once_at_its_re_threshold(vec: Vectorizer,
                                                                      budget: float) -> None:
    # a worker applies a backlog of judgments as one batch on its event loop: one by one
    # re-solves every resolve_every positives (each up to time_limit), so a batch stops
    # re-solving once its budget is spent and solves once more at its re-threshold
    params = {"resolve_every": 1, "time_limit": 60.0}
    one = _fit(vec, model_params=params)
    capped = _fit(vec, model_params={**params, "batch_solve_seconds": budget})
    X = vec.transform([t for t, _ in STREAM])
    rel = [r for _, r in STREAM]
    for i in range(len(STREAM)):
        one.learn_one(X[i], relevant=rel[i])
    before = capped.model_.n_solves_  # type: ignore[attr-defined]
    capped.learn_many(X, rel)
    a, b = one.model_, capped.model_
    assert isinstance(a, FusionModel) and isinstance(b, FusionModel)
    assert a.n_solves_ - before >= 3
    # a budget of 0 skips every solve inside the batch; a tiny one allows the first
    assert b.n_solves_ - before == (1 if budget == 0 else 2)
    assert not b.pending_ and b.n_pos_at_solve_ == b.n_pos_ == a.n_pos_
    assert math.isfinite(capped.threshold_)
    # outside a batch the budget does not apply: one by one solves as before
    capped.learn_one(vec.transform(["wheat exports record"]), relevant=True)
    assert b.n_solves_ - before == (2 if budget == 0 else 3)


def test_batch_solve_budget_is_validated_and_kept_in_the_parameters() -> None:
    for bad in (-1.0, "5", float("nan")):
        with pytest.raises(ParameterError, match="batch_solve_seconds"):
            FusionModel(batch_solve_seconds=bad)  # type: ignore[arg-type]
    assert FusionModel().get_params()["batch_solve_seconds"] == 5.0
    assert FusionModel(batch_solve_seconds=None).get_params()["batch_solve_seconds"] is None
