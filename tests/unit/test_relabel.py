"""Judgment corrections: Profile.relabel, BaggedProfile.relabel and the models' unlearn.

A profile that learned a judgment with the wrong label and then relabels it must end
where a profile that learned the right label in the first place ends (up to the rounding
of the running sums), wherever the judgment is: still pending under ``update=n``, held
in the example set, or evicted from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sift.filters.accumulator import RESIDUE, SparseAccumulator, remove_total
from sift.filters.bagging import BaggedProfile
from sift.filters.bank import ProfileBank
from sift.filters.errors import FilterError, ParameterError
from sift.filters.examples import ExampleSet
from sift.filters.fusion import FusionModel
from sift.filters.kantor import Kantor
from sift.filters.profile import Profile
from sift.filters.rocchio import Rocchio
from sift.filters.vectorize import Vectorizer
from tests.unit.test_profile import TRAIN

STREAM = ["wheat harvest delayed by rain", "oil prices rose again", "wheat export tender",
          "gold price steady", "corn and wheat crop", "opec cuts oil output", "wheat bushels sold",
          "bank rates cut", "wheat futures fell", "tanker oil spill"]
REL = ["wheat" in t for t in STREAM]
MODELS = ["rocchio", "kantor", "knn"]
POSITIVES = [i for i, t in enumerate(TRAIN) if "wheat" in t][:3]

VEC = Vectorizer(n_features=2**12).fit(TRAIN)
XS = VEC.transform(STREAM)
PROBE = VEC.transform(TRAIN + STREAM + ["wheat", "oil", "wheat oil gold"])


def _fit(model: str = "rocchio", **kw: Any) -> Profile:
    p = Profile("wheat", query="wheat", model=model, seed=1, **kw)
    p.fit(VEC.transform(["wheat"]), VEC.transform(TRAIN), positives=POSITIVES,
          feature_weights=VEC.feature_weights())
    return p


def _bag(model: str = "rocchio", **kw: Any) -> BaggedProfile:
    b = BaggedProfile.of("wheat", 3, query="wheat", model=model, seed=1, **kw)
    b.fit(VEC.transform(["wheat"]), VEC.transform(TRAIN), positives=POSITIVES,
          feature_weights=VEC.feature_weights())
    return b


def _same_threshold(a: float, b: float) -> bool:
    """Equal, both ``+inf``, or equal up to the rounding of the running sums."""
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _sums(acc: SparseAccumulator) -> dict[int, np.ndarray]:
    """The sums by feature (slot order differs between histories)."""
    return {int(f): acc.sums[:, i].copy() for i, f in enumerate(acc.features)}


def _same_sums(a: SparseAccumulator, b: SparseAccumulator) -> bool:
    sa, sb = _sums(a), _sums(b)
    zero = np.zeros(a.n_sums)
    return all(np.allclose(sa.get(f, zero), sb.get(f, zero), rtol=1e-12, atol=1e-14) for f in set(sa) | set(sb))


def _state_bytes(p: Profile | BaggedProfile) -> bytes:
    return orjson.dumps(p.to_state(), option=orjson.OPT_SERIALIZE_NUMPY)


def _assert_same(a: Profile, b: Profile, *, exact: bool = False) -> None:
    sa, sb = a.score(PROBE), b.score(PROBE)
    if exact:
        assert np.array_equal(sa, sb)
    assert np.allclose(sa, sb, rtol=1e-12, atol=1e-12)
    assert _same_threshold(a.threshold_, b.threshold_), (a.threshold_, b.threshold_)
    assert a.examples_.labels.tolist() == b.examples_.labels.tolist()
    assert np.array_equal(a.examples_.weights, b.examples_.weights)
    assert (a.examples_.X != b.examples_.X).nnz == 0
    assert (a.n_judged_, a.n_relevant_, a.n_pending_) == (b.n_judged_, b.n_relevant_, b.n_pending_)
    ja, jb = a.judgments(), b.judgments()
    assert (ja[0] != jb[0]).nnz == 0 and ja[1].tolist() == jb[1].tolist() and np.array_equal(ja[2], jb[2])


# -- case 2: the judgment is in the example set ------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("k", [0, 3, 9])
def test_relabel_held_judgment_matches_the_right_label_from_the_start(model: str, k: int) -> None:
    a, b = _fit(model), _fit(model)
    wrong = list(REL)
    wrong[k] = not wrong[k]
    for i in range(len(STREAM)):
        a.learn_one(XS[i], wrong[i])
        b.learn_one(XS[i], REL[i])
    before, version = a.score(PROBE), a.version_
    rows = len(a.examples_)
    assert a.relabel(XS[k], REL[k]) is True
    assert len(a.examples_) == rows and a.version_ == version + 1  # in place, re-thresholded once
    assert not np.allclose(before, a.score(PROBE))  # the model did change
    _assert_same(a, b, exact=model == "knn")
    # the leave-one-out scores too (what TROT saw), and those of a copy with fresh caches
    assert np.allclose(a.model_.loo_scores(), b.model_.loo_scores(), rtol=1e-12, atol=1e-12)
    fresh = Profile.from_state(orjson.loads(_state_bytes(a)), VEC.feature_weights())
    assert np.allclose(fresh.model_.loo_scores(), a.model_.loo_scores(), rtol=1e-12, atol=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS),
       seq=st.lists(st.integers(0, len(STREAM) - 1), min_size=1, max_size=7, unique=True),
       at=st.integers(0, 6), weight=st.sampled_from([1.0, 0.5, 2.0]))
def test_relabel_any_held_judgment(model: str, seq: list[int], at: int, weight: float) -> None:
    at %= len(seq)
    a, b = _fit(model), _fit(model)
    for j, i in enumerate(seq):
        a.learn_one(XS[i], REL[i] != (j == at), weight=weight)
        b.learn_one(XS[i], REL[i], weight=weight)
    assert a.relabel(XS[seq[at]], REL[seq[at]], weight) is True
    _assert_same(a, b, exact=model == "knn")


def test_relabel_picks_the_newest_matching_example() -> None:
    p = _fit("knn")
    x = XS[1]
    p.learn_many(sp.vstack([x, XS[2], x, x]), [False, True, False, True])
    assert p.relabel(x, True) is True
    assert p.judgments()[1].tolist() == [False, True, True, True]  # the second False
    assert p.relabel(x, False) is True
    assert p.judgments()[1].tolist() == [False, True, True, False]  # the newest True


def test_a_weight_that_differs_is_not_the_same_judgment() -> None:
    """The weight identifies the judgment: another weight finds no held example, and a
    profile that has evicted none refuses (the caller broke the contract; before the
    audit it took the judgment for evicted and unlearned what it never learned)."""
    p = _fit("knn")
    p.learn_one(XS[1], False, weight=0.5)
    n = len(p.examples_)
    assert p.relabel(XS[1], True, weight=0.5) is True and len(p.examples_) == n
    with pytest.raises(FilterError, match="never learned"):
        p.relabel(XS[1], False, weight=2.0)
    assert len(p.examples_) == n


# -- case 1: the judgment is pending ------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_relabel_pending_judgment_then_flush(model: str) -> None:
    a, b = _fit(model, update=4), _fit(model, update=4)
    k = 5  # learned 5th: the groups are 0-3 (applied) and 4-7 (pending), then 8-9
    wrong = list(REL)
    wrong[k] = not wrong[k]
    for i in range(7):
        a.learn_one(XS[i], wrong[i])
        b.learn_one(XS[i], REL[i])
    assert a.n_pending_ == 3
    state, version = a.to_state(), a.version_
    assert a.relabel(XS[k], REL[k]) is True
    # nothing learned now: the model and threshold are as they were, the buffer changed
    assert a.version_ == version and orjson.dumps(a.to_state()["model"]) == orjson.dumps(state["model"])
    assert a.judgments()[1].tolist() == b.judgments()[1].tolist()
    for i in range(7, 10):
        a.learn_one(XS[i], REL[i])
        b.learn_one(XS[i], REL[i])
    a.flush()
    b.flush()
    _assert_same(a, b, exact=model == "knn")


def test_relabel_pending_picks_the_newest_and_leaves_the_caller_rows() -> None:
    p = _fit("rocchio", update=10)
    x = XS[3].copy()
    p.learn_many(sp.vstack([x, XS[2], x]), [False, True, False])
    held = p._pending[0][1]
    before = held.copy()
    assert p.relabel(x, True) is True
    assert p.judgments()[1].tolist() == [False, True, True]
    assert np.array_equal(held, before)  # the buffer's label array was replaced, not changed


# -- case 3: the judgment was evicted ------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_relabel_evicted_judgment(model: str) -> None:
    cap = 6
    a, b = _fit(model, max_examples=cap, pseudolabel={}), _fit(model, max_examples=cap, pseudolabel={})
    k, others = 0, list(range(1, 1 + cap))
    a.learn_one(XS[k], not REL[k])
    for i in others:
        a.learn_one(XS[i], REL[i])
    assert a.examples_.matching_rows(XS[k]).size == 0  # evicted
    for i in others:
        b.learn_one(XS[i], REL[i])
    b.learn_one(XS[k], REL[k])  # never the old label, the new one last
    judged = a.n_judged_
    assert a.relabel(XS[k], REL[k]) is False
    assert a.n_judged_ == judged and b.n_judged_ == judged
    m, n = a.model_, b.model_
    if isinstance(m, Rocchio):
        assert isinstance(n, Rocchio) and _same_sums(m.acc_, n.acc_)
        assert math.isclose(m.w_pos_, n.w_pos_) and math.isclose(m.w_neg_, n.w_neg_)
    if isinstance(m, Kantor):
        assert isinstance(n, Kantor) and _same_sums(m.acc_, n.acc_) and m.k_ == n.k_
    # the same judgments are held, in the same order: the whole profile is the same
    _assert_same(a, b, exact=model == "knn")
    assert a.judgments()[1].tolist()[-1] == REL[k]


# -- both ways and back ----------------------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_relabel_twice_returns_to_the_start(model: str) -> None:
    p = _fit(model)
    for i in range(len(STREAM)):
        p.learn_one(XS[i], REL[i])
    scores, thr = p.score(PROBE), p.threshold_
    for _ in range(2):
        assert p.relabel(XS[2], not REL[2]) is True
        assert not np.allclose(p.score(PROBE), scores)
        assert p.relabel(XS[2], REL[2]) is True
        assert np.allclose(p.score(PROBE), scores, rtol=1e-12, atol=1e-12)
        assert _same_threshold(p.threshold_, thr)


def test_rocchio_sums_stay_exactly_non_negative() -> None:
    """The fast candidate path stays open: columns whose every positive contribution
    was taken back (in another order than they were added) are exactly 0 in the positive
    sum, not a cancellation residue, and equal to a profile that never had them there."""
    a, b = _fit("rocchio"), _fit("rocchio")
    docs = VEC.transform(["zebra okapi quagga", "zebra okapi", "okapi quagga zebra zebra"])
    weights = [0.3, 0.7, 1.1]
    for i in range(3):
        a.learn_one(docs[i], True, weights[i])
        b.learn_one(docs[i], False, weights[i])
    for i in (1, 0, 2):
        assert a.relabel(docs[i], False, weights[i]) is True
    m, n = a.model_, b.model_
    assert isinstance(m, Rocchio) and isinstance(n, Rocchio)
    assert bool(np.all(m.acc_.sums >= 0)) and m._nonneg is True and m._candidates() is not None
    slots = m.acc_.find(unique_cols := np.unique(docs.indices))
    assert unique_cols.size and np.all(m.acc_.sums[1][slots] == 0.0)  # exactly 0 in the positive sum
    assert _same_sums(m.acc_, n.acc_) and m.w_pos_ == pytest.approx(n.w_pos_, rel=1e-15)
    cand_m, cand_n = m._candidates(), n._candidates()
    assert cand_m is not None and cand_n is not None  # the same candidate columns as never learned
    assert np.array_equal(m.acc_.features[cand_m], n.acc_.features[cand_n])
    _assert_same(a, b)


# -- fusion (a smaller check: its weights are re-solved, not replayed) --------------------------------
def test_fusion_relabel_takes_back_and_resolves() -> None:
    params = {"time_limit": 0.5, "batch_solve_seconds": None}
    a, b = _fit("fusion", model_params=params), _fit("fusion", model_params=params)
    k = 2
    for i in range(6):
        a.learn_one(XS[i], REL[i] != (i == k))
        b.learn_one(XS[i], REL[i])
    ma, mb = a.model_, b.model_
    assert isinstance(ma, FusionModel) and isinstance(mb, FusionModel)
    solves = ma.n_solves_
    assert a.relabel(XS[k], REL[k]) is True
    assert _same_sums(ma.centroid_, mb.centroid_) and ma.n_pos_ == mb.n_pos_
    assert _same_sums(ma.rocchio_.acc_, mb.rocchio_.acc_) and _same_sums(ma.kantor_.acc_, mb.kantor_.acc_)
    assert ma.kantor_.k_ == mb.kantor_.k_
    # re-solved at the re-threshold, on the corrected labels
    assert ma.n_solves_ == solves + 1 and not ma.pending_ and ma.n_pos_at_solve_ == ma.n_pos_
    assert a.examples_.labels.tolist() == b.examples_.labels.tolist()
    again = Profile.from_state(orjson.loads(_state_bytes(a)), VEC.feature_weights())
    assert _state_bytes(again) == _state_bytes(a)


def test_fusion_unlearn_keeps_its_counters_consistent() -> None:
    m = FusionModel(components=["word", "rocchio"], time_limit=0.5)
    ex = ExampleSet(None, XS.shape[1])
    m.bind(XS.shape[1], None, ex)
    m.start(None)
    lab, w, real = np.array([1, 1, -1], np.int8), np.ones(3), np.ones(3, bool)
    m.learn(XS[:3], lab, w, real)
    ex.add(XS[:3], lab, w, real)
    m.loo_scores()  # solves
    assert m.n_pos_at_solve_ == m.n_pos_ == 2 and not m.pending_
    m.unlearn(XS[:1], lab[:1], w[:1], real[:1])
    assert m.n_pos_ == 1 and m.n_pos_at_solve_ == 1 and m.pending_
    m.unlearn(XS[1:2], lab[1:2], w[1:2], real[1:2])
    assert m.n_pos_ == m.n_pos_at_solve_ == 0
    assert np.all(m.centroid_.sums == 0.0)  # every positive taken back: exactly 0


# -- bagged profiles ----------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["rocchio", "kantor"])
def test_bagged_relabel(model: str) -> None:
    a, b = _bag(model), _bag(model)
    k = 4
    for i in range(len(STREAM)):
        a.learn_one(XS[i], REL[i] != (i == k))
        b.learn_one(XS[i], REL[i])
    assert a.relabel(XS[k], REL[k]) is True
    assert np.allclose(a.score(PROBE), b.score(PROBE), rtol=1e-12, atol=1e-12)
    assert _same_threshold(a.threshold_, b.threshold_)
    for ma, mb in zip(a.members, b.members, strict=True):
        _assert_same(ma, mb)
    assert a.judgments()[1].tolist() == b.judgments()[1].tolist()


def test_bagged_relabel_evicted_and_bad_input_leaves_every_member() -> None:
    a = _bag("rocchio", max_examples=4, pseudolabel={})
    a.learn_one(XS[0], False)
    for i in range(1, 6):
        a.learn_one(XS[i], REL[i])
    assert a.relabel(XS[0], True) is False
    state = _state_bytes(a)
    with pytest.raises(FilterError, match="weight"):
        a.relabel(XS[1], True, weight=-1.0)
    assert _state_bytes(a) == state


# -- state, inputs, judgments ---------------------------------------------------------------------------
@pytest.mark.parametrize("model", MODELS)
def test_state_round_trip_after_relabel_is_exact(model: str) -> None:
    p = _fit(model, update=3)
    for i in range(8):
        p.learn_one(XS[i], not REL[i])
    p.relabel(XS[1], REL[1])  # applied
    p.relabel(XS[7], REL[7])  # pending
    raw = _state_bytes(p)
    q = Profile.from_state(orjson.loads(raw), VEC.feature_weights())
    assert _state_bytes(q) == raw
    assert np.array_equal(q.score(PROBE), p.score(PROBE)) and q.threshold_ == p.threshold_
    for r in (p, q):
        r.learn_one(XS[8], REL[8])
        r.relabel(XS[0], REL[0])
    assert _state_bytes(q) == _state_bytes(p)


def test_inputs_are_not_mutated_and_judgments_report_the_correction() -> None:
    p = _fit("rocchio")
    # a non-canonical row: columns out of order, one stored twice (halves summing to the value)
    x = XS[2].tocoo()
    data = np.concatenate([x.data[::-1], [0.0]])
    cols = np.concatenate([x.col[::-1], [x.col[0]]]).astype(np.int32)
    given = sp.csr_matrix((data, cols, np.array([0, data.size])), shape=x.shape)
    given.has_sorted_indices = False
    snap = (given.data.copy(), given.indices.copy(), given.indptr.copy())
    p.learn_one(XS[2], False)
    assert p.relabel(given, True) is True
    assert (np.array_equal(given.data, snap[0]) and np.array_equal(given.indices, snap[1])
            and np.array_equal(given.indptr, snap[2]))
    J, rel, w = p.judgments()
    assert (J - XS[2]).nnz == 0 and rel.tolist() == [True] and w.tolist() == [1.0]
    assert p.n_relevant_ == 1


def test_update_never_ignores_the_correction_as_the_judgment() -> None:
    p = _fit("rocchio", update="never")
    p.learn_one(XS[0], False)
    state = _state_bytes(p)
    assert p.relabel(XS[0], True) is True
    assert _state_bytes(p) == state


# -- a bank holding the profile scores the corrected model ---------------------------------------------
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("bagged", [False, True])
def test_bank_sees_the_relabel(model: str, bagged: bool) -> None:
    make: Callable[..., Profile | BaggedProfile] = _bag if bagged else _fit
    a = make(model)
    other = Profile("oil", query="oil", model=model, seed=2)
    other.fit(VEC.transform(["oil"]), VEC.transform(TRAIN), positives=[2, 4, 7],
              feature_weights=VEC.feature_weights())
    bank = ProfileBank()
    bank.add(a)
    bank.add(other)
    for i in range(len(STREAM)):
        a.learn_one(XS[i], REL[i] != (i == 6))
    before = bank.score(PROBE)[:, 0]  # stacks built for this state
    assert np.allclose(before, a.score(PROBE), rtol=1e-12, atol=1e-12)
    bank.decide(PROBE)
    a.relabel(XS[6], REL[6])
    after = bank.score(PROBE)[:, 0]
    assert np.allclose(after, a.score(PROBE), rtol=1e-12, atol=1e-12)
    assert not np.allclose(after, before)
    thr = bank.thresholds()[0]
    assert thr == a.threshold_
    assert [h.row for h in bank.decide(PROBE) if h.profile == "wheat"] == \
        np.flatnonzero(a.decide(PROBE)).tolist()


# -- bad input --------------------------------------------------------------------------------------
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("two rows", {"x": XS[:2]}, r"x must be one row of 4096 columns, got shape \(2, 4096\)"),
    ("wrong width", {"x": sp.csr_matrix((1, 10))}, r"x must be one row of 4096 columns, got shape \(1, 10\)"),
    ("not a matrix", {"x": "wheat"}, r"x must be one row of 4096 columns"),
    ("nan in x", {"x": sp.csr_matrix(([np.nan], [0], [0, 1]), shape=(1, 4096))}, r"x must hold finite values"),
    ("relevant 1", {"relevant": 1}, r"relevant must be a bool, got 1$"),
    ("relevant str", {"relevant": "true"}, r"relevant must be a bool, got 'true'"),
    ("relevant None", {"relevant": None}, r"relevant must be a bool, got None"),
    ("weight 0", {"weight": 0}, r"weight must be a finite number > 0 and <= 1e\+06, got 0$"),
    ("weight negative", {"weight": -1.5}, r"weight must be .* got -1.5$"),
    ("weight nan", {"weight": float("nan")}, r"weight must be .* got nan$"),
    ("weight inf", {"weight": math.inf}, r"weight must be .* got inf$"),
    ("weight bool", {"weight": True}, r"weight must be .* got True$"),
    ("weight str", {"weight": "1"}, r"weight must be .* got '1'$"),
    ("weight huge", {"weight": 1e7}, r"weight must be .* got 10000000.0$"),
]


@pytest.mark.parametrize(("case", "args", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_in_one_line(case: str, args: dict[str, Any], message: str) -> None:
    for p in (_fit("rocchio", update=3), _bag("knn", update=3)):
        p.learn_one(XS[0], False)
        state = _state_bytes(p)
        call = {"x": XS[0], "relevant": True, "weight": 1.0, **args}
        with pytest.raises(FilterError, match=message) as err:
            p.relabel(**call)
        assert "\n" not in str(err.value)
        assert _state_bytes(p) == state  # left as it was


def test_numpy_bools_and_numbers_are_taken() -> None:
    a, b = _fit("rocchio"), _fit("rocchio")
    a.learn_one(XS[0], False, weight=0.5)
    b.learn_one(XS[0], True, weight=0.5)
    assert a.relabel(XS[0], np.bool_(True), np.float32(0.5)) is True
    _assert_same(a, b)
    assert a.relabel(XS[0].toarray(), False, 0.5) is True  # a dense row is converted


def test_an_untrained_profile_refuses() -> None:
    with pytest.raises(FilterError, match="not trained yet") as err:
        Profile("x").relabel(XS[0], True)
    assert "\n" not in str(err.value)
    with pytest.raises(FilterError, match="not trained yet"):
        BaggedProfile.of("x", 2).relabel(XS[0], True)


# -- the pieces -------------------------------------------------------------------------------------------
def test_example_set_matching_rows_and_set_label() -> None:
    ex = ExampleSet(3, 5)
    X = sp.csr_matrix(np.array([[1.0, 0, 2, 0, 0], [0, 1, 0, 0, 0], [1, 0, 2, 0, 0], [0, 0, 0, 0, 0]]))
    ex.add(X[:3], [1, -1, 1], [1.0, 1.0, 0.5], [True, False, True])
    assert ex.matching_rows(X[0]).tolist() == [0, 2]
    assert ex.matching_rows(X[0], weight=1.0).tolist() == [0]
    assert ex.matching_rows(X[1], real=True).tolist() == []
    assert ex.matching_rows(X[1], real=False, label=-1).tolist() == [1]
    assert ex.matching_rows(sp.csr_matrix(np.array([[1.0, 0, 2.5, 0, 0]]))).tolist() == []
    assert ex.matching_rows(sp.csr_matrix(np.array([[1.0, 0, 0, 0, 0]]))).tolist() == []
    assert ex.matching_rows(sp.csr_matrix(np.array([[0, 0, 0, 0, 3.0]]))).tolist() == []  # unseen column
    assert ex.matching_rows(X[3]).tolist() == []
    ex.add(X[3:], [-1], [1.0], [True])  # evicts the pseudolabel
    assert ex.matching_rows(X[3]).tolist() == [2]  # an empty row matches an empty row
    seq, labels = ex.seq.copy(), ex.labels
    ex.set_label(0, -1)
    assert ex.labels.tolist() == [-1, 1, -1] and labels.tolist() == [1, 1, -1]
    assert np.array_equal(ex.seq, seq)
    with pytest.raises(ParameterError, match="labels must be 1"):
        ex.set_label(0, 2)
    with pytest.raises(ParameterError, match=r"row must be .* got 3"):
        ex.set_label(3, 1)
    with pytest.raises(ParameterError, match="x must be one row of 5 columns"):
        ex.matching_rows(X[:2])


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_remove_rows_takes_back_what_add_rows_added(data: st.DataObject) -> None:
    """Rows added one by one and taken back one by one in another order leave exactly
    0 where nothing is left (no cancellation residue) and the other rows' sums."""
    n, width = data.draw(st.integers(1, 6)), 8
    values = st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.7, 1.0 / 3.0, 3.0])
    dense = np.array(data.draw(st.lists(st.lists(values, min_size=width, max_size=width),
                                        min_size=n, max_size=n)))
    X = sp.csr_matrix(dense)
    w = np.array(data.draw(st.lists(st.sampled_from([0.1, 0.3, 1.0, 7.0]), min_size=n, max_size=n)))
    out = data.draw(st.permutations(range(n)))[: data.draw(st.integers(0, n))]
    acc, ref = SparseAccumulator(2), SparseAccumulator(2)
    total, ref_total = 0.0, 0.0
    for i in range(n):
        total += acc.add_rows(1, X[i], w[i : i + 1], np.ones(1, bool))
        if i not in out:
            ref_total += ref.add_rows(1, X[i], w[i : i + 1], np.ones(1, bool))
    for i in out:
        total = remove_total(total, acc.remove_rows(1, X[i], w[i : i + 1], np.ones(1, bool), clamp=True))
    assert _same_sums(acc, ref) and math.isclose(total, ref_total, abs_tol=1e-12)
    kept = np.zeros(width)
    for i in set(range(n)) - set(out):
        kept += dense[i] * w[i]
    got = np.zeros(width)
    got[acc.features] = acc.sums[1]
    assert np.all(got[kept == 0] == 0.0) and np.all(got >= 0)  # no residue: exactly 0
    assert (total == 0.0) == (len(out) == n)
    assert np.all(acc.sums[0] == 0.0)
    assert RESIDUE < 1e-6


def test_remove_rows_snaps_the_residue_of_another_order() -> None:
    acc = SparseAccumulator(1)
    X = sp.csr_matrix(np.array([[0.1], [0.2]]))
    for i in range(2):
        acc.add_rows(0, X[i], np.ones(1), np.ones(1, bool))
    assert (0.1 + 0.2) - 0.1 - 0.2 != 0.0  # what plain subtraction would leave
    acc.remove_rows(0, X[0], np.ones(1), np.ones(1, bool))
    acc.remove_rows(0, X[1], np.ones(1), np.ones(1, bool))
    assert acc.sums.tolist() == [[0.0]]
    # a genuine remainder far above the residue stays (signed, unclamped)
    acc.add_rows(0, sp.csr_matrix(np.array([[1.0]])), np.ones(1), np.ones(1, bool))
    acc.remove_rows(0, sp.csr_matrix(np.array([[1.5]])), np.ones(1), np.ones(1, bool))
    assert acc.sums.tolist() == [[-0.5]]
    # clamped (sums of non-negative vectors): what is left below 0 is 0
    acc = SparseAccumulator(1)
    acc.add_rows(0, sp.csr_matrix(np.array([[1.0]])), np.ones(1), np.ones(1, bool))
    acc.remove_rows(0, sp.csr_matrix(np.array([[1.5]])), np.ones(1), np.ones(1, bool), clamp=True)
    assert acc.sums.tolist() == [[0.0]]
