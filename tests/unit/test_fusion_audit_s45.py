"""Defects of the fusion ranker, its text representations and ``sift nominate`` found by
the forty-fifth session's audit (/tmp/s45/fusion/FINDINGS.md), and their fixes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from sift.cli import main
from sift.commands.nominate import simulate_rdpg
from sift.filters.errors import ParameterError, StateError
from sift.filters.examples import ExampleSet
from sift.filters.fusion import (
    DissimilarityFusion,
    FusionError,
    FusionModel,
    SingletonRanker,
    fused_ranks,
    heldout_mrr,
    objective_value,
    solve_weights,
)
from sift.filters.representations import FusionVectorizer, TextRepresentations
from sift.filters.state import encode_array

D = np.array([[0.2, 0.6], [0.6, 0.2], [0.1, 0.9], [0.9, 0.1], [0.5, 0.5]])
D3 = np.column_stack([D, [0.7, 0.7, 0.7, 0.7, 0.1]])
SCORES = [0.0, 0.1, 0.2, 0.3, 0.4]
TEXTS = ["wheat exports rose sharply", "wheat crop harvest grain", "oil prices fell today",
         "crude oil output cut", "grain shipments of wheat", "corn and wheat futures",
         "opec oil quota", "bank rates rise"]


# --------------------------------------------------------------------------- finding 1, 8


@pytest.fixture(scope="module")
def solved() -> tuple[FusionModel, Any, Any, ExampleSet, dict[str, Any]]:
    texts = TEXTS * 3
    v = FusionVectorizer(n_features=2**10, lsa_components=3).fit(texts)
    X, fw = v.transform(texts), v.feature_weights()
    lab = np.array([1 if ("wheat" in t or "grain" in t) else -1 for t in texts], dtype=np.int8)
    ex = ExampleSet(None, X.shape[1])
    m = FusionModel(resolve_every=1, time_limit=0.3)
    m.bind(X.shape[1], fw, ex)
    m.start(None)
    w, real = np.ones(len(texts)), np.ones(len(texts), bool)
    m.learn(X, lab, w, real)
    ex.add(X, lab, w, real)
    m.score(X)
    assert m.alpha_ is not None and len(m.components_) == 6
    return m, X, fw, ex, json.loads(json.dumps(m.state_dict()))


def _load(solved: Any, change: Any) -> FusionModel:
    _m, X, fw, ex, st = solved
    s = copy.deepcopy(st)
    change(s)
    m2 = FusionModel(resolve_every=1, time_limit=0.3)
    m2.bind(X.shape[1], fw, ex)
    m2.load_state_dict(s)
    return m2


def test_the_state_round_trips(solved: Any) -> None:
    m, X, *_ = solved
    m2 = _load(solved, lambda s: None)
    assert np.array_equal(m2.score(X), m.score(X))


def _set(key: str, value: Any) -> Any:
    return lambda s: s.update({key: value})


J6 = 6


@pytest.mark.parametrize(("change", "match"), [
    (_set("scale", encode_array(np.full(J6, 1e-320))), "fusion.scale"),
    (_set("scale", encode_array(np.full(J6, 1e-13))), "fusion.scale"),
    (_set("lo", encode_array(np.full(J6, 1e308))), "fusion.lo"),
    (_set("tie", encode_array(np.array([0.0, 1e-320]))), "fusion.tie"),
    (_set("tie", encode_array(np.array([1e308, 1.0]))), "fusion.tie"),
    (_set("alpha", encode_array(np.zeros(J6))), "fusion.alpha"),
    (_set("alpha", encode_array(np.full(J6, 1e308))), "fusion.alpha"),
    (_set("alpha", encode_array(np.full(J6, 7.0))), "fusion.alpha"),
    (_set("alpha", encode_array(np.array([1.5, -0.5, 0, 0, 0, 0]))), "fusion.alpha"),
    (lambda s: s.update(alpha=None, lo=encode_array(np.zeros(1))), "fusion.lo"),
    (lambda s: s.update(alpha=None, scale=encode_array(np.ones(2))), "fusion.scale"),
    (lambda s: s.update(alpha=None, scale=encode_array(np.full(J6, 1e-300))), "fusion.scale"),
    (_set("version", True), "version"),
    (_set("version", 1.0), "version"),
    (_set("n_pos", 3.7), "fusion.n_pos"),
    (_set("n_pos", "9"), "fusion.n_pos"),
    (_set("n_pos", 10**30), "fusion.n_pos"),
    (_set("n_solves", True), "fusion.n_solves"),
    (_set("n_pos_at_solve", -1), "fusion.n_pos_at_solve"),
    (_set("last_solve", [["a", 1]]), "fusion.last_solve"),
    (_set("last_solve", "xy"), "fusion.last_solve"),
    (_set("pending", 1), "pending"),
    (_set("components", "word"), "components"),
])
def test_a_corrupt_state_is_refused_naming_the_field(solved: Any, change: Any, match: str) -> None:
    with pytest.raises(StateError, match=match):
        _load(solved, change)


def test_a_state_not_a_dict_is_a_state_error(solved: Any) -> None:
    _m, X, fw, ex, _ = solved
    m2 = FusionModel()
    m2.bind(X.shape[1], fw, ex)
    for bad in ([1, 2], None, "fusion"):
        with pytest.raises(StateError):
            m2.load_state_dict(bad)  # type: ignore[arg-type]


def test_valid_states_still_load(solved: Any) -> None:
    _m, X, *_ = solved
    # a normalised alpha that is off in its last bits, and a scaling of exactly 1 (the
    # floor _solve puts on a constant column)
    a = np.array([0.1] * 6)
    a = a / a.sum()  # sums to 1 within rounding
    m2 = _load(solved, _set("alpha", encode_array(a)))
    assert np.all(np.isfinite(m2.score(X)))
    m3 = _load(solved, _set("scale", encode_array(np.ones(6))))
    assert np.all(np.isfinite(m3.score(X)))
    # a state before the first solve: no weights, empty scaling
    m4 = _load(solved, lambda s: s.update(alpha=None, lo=encode_array(np.zeros(0)),
                                          scale=encode_array(np.zeros(0)), n_pos_at_solve=0))
    assert m4.alpha_ is None


# --------------------------------------------------------------------------- finding 2


@pytest.mark.parametrize(("call", "match"), [
    (lambda: heldout_mrr(SCORES, [-1], exclude=[0, 1]), r"heldout .*-1"),
    (lambda: heldout_mrr(SCORES, [3.9], exclude=[0, 1]), r"heldout .*3\.9"),
    (lambda: heldout_mrr(SCORES, [2, 2, 4], exclude=[0, 1]), "heldout .*duplicate"),
    (lambda: heldout_mrr(SCORES, [2], exclude=[-1]), r"exclude .*-1"),
    (lambda: heldout_mrr(SCORES, [2], exclude=[0, 0]), "exclude .*duplicate"),
    (lambda: heldout_mrr(SCORES, [7]), r"heldout .*7 outside \[0, 5\)"),
    (lambda: heldout_mrr([], [0]), r"heldout .*0 outside \[0, 0\)"),
    (lambda: heldout_mrr(SCORES, [True]), "heldout"),
    (lambda: heldout_mrr(SCORES, ["1"]), "heldout"),
    (lambda: heldout_mrr([0, np.inf, 1], [0]), "scores .*inf"),
    (lambda: heldout_mrr(["a", "b"], [0]), "scores"),
    (lambda: fused_ranks([1, 2, 3], [-1]), r"pool .*-1"),
    (lambda: fused_ranks([1, 2, 3], [0.7]), r"pool .*0\.7"),
    (lambda: fused_ranks([1, 2, 3], [5]), r"pool .*5 outside \[0, 3\)"),
    (lambda: fused_ranks([1, 2, 3], [1, 1]), "pool .*duplicate"),
    (lambda: fused_ranks([np.nan, 1, 2]), "scores .*nan"),
])
def test_bad_indices_and_scores_are_fusion_errors(call: Any, match: str) -> None:
    with pytest.raises(FusionError, match=match):
        call()


def test_heldout_mrr_values_worked_out_by_hand() -> None:
    # pool {2, 3, 4}: item 4 is third -> 1/3; integral floats and numpy ints are indices
    assert heldout_mrr(SCORES, [4], exclude=[0, 1]) == pytest.approx(1 / 3)
    assert heldout_mrr(SCORES, [4.0], exclude=np.array([0, 1], dtype=np.uint8)) == pytest.approx(1 / 3)
    assert heldout_mrr(SCORES, [np.int64(3)], exclude=[0, 1]) == 0.5
    assert fused_ranks([1, 2, 3], np.array([2, 0])).tolist() == [2.0, 1.0]
    assert fused_ranks([1, 2, 3], []).tolist() == []


# --------------------------------------------------------------------------- finding 3, 5, 14


def test_singleton_checks_the_width_it_was_fitted_on() -> None:
    s = SingletonRanker(seed=0).fit(D, [0, 1])
    with pytest.raises(FusionError, match=r"dissimilarities must have J = 2 columns \(as fitted\), got 3"):
        s.score(np.column_stack([D, D[:, :1]]))
    wide = np.column_stack([D, [0.7] * 4 + [0.1]])
    s3 = SingletonRanker(seed=0).fit(wide, [0, 1])
    with pytest.raises(FusionError, match="J = 3 columns"):
        s3.score(D[:, :1])
    assert s.score(D).tolist() == D[:, s.column_].tolist()


def test_fusion_score_names_the_dissimilarities() -> None:
    f = DissimilarityFusion().fit(D, [0, 1])
    with pytest.raises(FusionError, match=r"dissimilarities must have J = 2 columns \(as fitted\), got 3"):
        f.score(np.ones((5, 3)))


@pytest.mark.parametrize("est", [DissimilarityFusion(), SingletonRanker()])
def test_score_before_fit_is_a_not_fitted_error(est: Any) -> None:
    with pytest.raises(FusionError, match="not fitted"):
        est.score(D)
    with pytest.raises(FusionError, match="not fitted"):
        est.rank(D)


def test_weights_do_not_share_the_result_array() -> None:
    f = DissimilarityFusion().fit(D, [0, 1])
    f.weights_[0] = 9.0
    assert f.result_.weights.tolist() == [0.5, 0.5]


# --------------------------------------------------------------------------- finding 5, 6, 9


@pytest.mark.parametrize(("kw", "match"), [
    ({"seed": -1}, "seed .*-1"),
    ({"seed": 1.5}, r"seed .*1\.5"),
    ({"seed": True}, "seed .*True"),
    ({"time_limit": "5"}, "time_limit .*'5'"),
    ({"time_limit": True}, "time_limit .*True"),
    ({"time_limit": float("nan")}, "time_limit .*nan"),
    ({"start": "ab"}, "start .*'ab'"),
    ({"start": [1j, 1]}, "start"),
    ({"objective": "mrr", "mrr_cutoff": 2.0}, "mrr_cutoff"),
    ({"objective": "mrr", "mrr_cutoff": True}, "mrr_cutoff"),
])
def test_solve_weights_parameters(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(FusionError, match=match):
        solve_weights(D, [0, 1], **kw)


def test_runner_must_be_callable() -> None:
    with pytest.raises(FusionError, match=r"runner .*5"):
        solve_weights(D3, [0, 1], method="milp", runner=5)  # type: ignore[arg-type]


def test_numpy_scalars_are_accepted_like_python_numbers() -> None:
    ref = solve_weights(D3, [0, 1], objective="mrr", mrr_cutoff=5, seed=1, time_limit=None)
    r = solve_weights(D3, [0, 1], objective="mrr", mrr_cutoff=np.int64(5), seed=np.int64(1),
                      time_limit=None)
    assert r.weights.tolist() == ref.weights.tolist()
    r2 = solve_weights(D, [0, 1], time_limit=np.float32(5))
    assert r2.weights.tolist() == [0.5, 0.5]
    FusionModel(resolve_every=np.int64(2), seed=np.int64(1), time_limit=np.float32(1))
    m = FusionModel(resolve_every=np.int64(2), seed=np.int64(1), time_limit=np.float32(1),
                    batch_solve_seconds=np.float32(2))
    assert type(m.resolve_every) is int and type(m.seed) is int and type(m.time_limit) is float
    assert type(m.batch_solve_seconds) is float


@pytest.mark.parametrize(("kw", "match"), [
    ({"resolve_every": True}, "resolve_every"),
    ({"seed": np.int64(-1)}, "seed"),
    ({"time_limit": np.bool_(True)}, "time_limit"),
    ({"time_limit": 0}, "time_limit"),
])
def test_fusion_model_still_refuses(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        FusionModel(**kw)


def test_objective_value_weights_must_be_numbers() -> None:
    with pytest.raises(FusionError, match=r"weights .*'a'"):
        objective_value(D, [0, 1], ["a", "b"])


@pytest.mark.parametrize("bad", [D.astype(complex) + 1j, D.astype(str), D.astype(bytes),
                                 np.array([[0.2, None], [0.6, 0.2]], dtype=object),
                                 np.array([[0.2, "0.6"], [0.6, 0.2]], dtype=object),
                                 [["0.2", "0.6"], ["0.6", "0.2"]]])
def test_complex_string_and_object_dissimilarities_are_refused(bad: Any) -> None:
    with pytest.raises(FusionError, match=r"dissimilarities must be .*numbers"):
        solve_weights(bad, [0])


def test_object_arrays_of_python_numbers_still_work() -> None:
    assert solve_weights(D.astype(object), [0, 1]).weights.tolist() == [0.5, 0.5]
    big = np.array([[10**30, 1], [1, 2], [3, 0]], dtype=object)
    assert objective_value(big, [0], [0.0, 1.0]) == objective_value(big.astype(float), [0],
                                                                     [0.0, 1.0])


def test_positives_beyond_int64_show_their_value() -> None:
    with pytest.raises(FusionError, match="9223372036854775813"):
        solve_weights(D, np.array([2**63 + 5], dtype=np.uint64))


@pytest.mark.parametrize(("kw", "match"), [
    ({"objective": "x"}, "objective"),
    ({"method": "x"}, "method"),
    ({"time_limit": -1}, "time_limit"),
    ({"seed": -1}, "seed"),
])
def test_dissimilarity_fusion_checks_its_parameters_at_init(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(FusionError, match=match):
        DissimilarityFusion(**kw)


@pytest.mark.parametrize(("kw", "match"), [({"objective": "x"}, "objective"),
                                           ({"seed": 1.5}, "seed")])
def test_singleton_checks_its_parameters_at_init(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(FusionError, match=match):
        SingletonRanker(**kw)


@pytest.mark.parametrize(("kw", "match"), [
    ({"char_ngram_range": (2.9, 5.5)}, r"char_ngram_range .*2\.9"),
    ({"char_ngram_range": ("a", "b")}, "char_ngram_range"),
    ({"char_ngram_range": (3,)}, "char_ngram_range"),
    ({"char_ngram_range": 3}, "char_ngram_range"),
    ({"char_ngram_range": (5, 3)}, "char_ngram_range"),
    ({"char_top": True}, "char_top .*True"),
    ({"char_top": 2.0}, "char_top"),
    ({"lsa_components": True}, "lsa_components .*True"),
    ({"lsa_columns": np.bool_(True)}, "lsa_columns"),
    ({"char_weight": False}, "char_weight .*False"),
    ({"char_weight": "0.5"}, "char_weight"),
    ({"char_weight": 1.0}, "char_weight"),
    ({"seed": -5}, "seed .*-5"),
    ({"seed": "s"}, "seed"),
    ({"seed": 1.5}, "seed"),
])
def test_fusion_vectorizer_parameters(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        FusionVectorizer(n_features=2**10, **kw)


def test_fusion_vectorizer_accepts_numpy_scalars() -> None:
    v = FusionVectorizer(n_features=2**10, char_weight=np.float32(0.5), char_top=np.int64(5),
                         lsa_components=np.int64(2), lsa_columns=np.int32(50), seed=np.int64(3),
                         char_ngram_range=np.array([3, 4]))
    p = v.params()
    assert (p["char_weight"], p["char_top"], p["lsa_components"], p["lsa_columns"], p["seed"],
            p["char_ngram_range"]) == (0.5, 5, 2, 50, 3, [3, 4])
    assert all(type(p[k]) is int for k in ("char_top", "lsa_components", "lsa_columns", "seed"))
    orjson.dumps(p)


# --------------------------------------------------------------------------- finding 4


@pytest.mark.parametrize(("kw", "match"), [
    ({"lsa_components": 2.5}, r"lsa_components .*2\.5"),
    ({"lsa_components": "2"}, "lsa_components .*'2'"),
    ({"lsa_components": 0}, "lsa_components .*0"),
    ({"lsa_components": True}, "lsa_components"),
    ({"min_df": 0}, "min_df .*0"),
    ({"min_df": 2.0}, r"min_df .*2\.0"),
    ({"seed": -1}, "seed .*-1"),
    ({"seed": 2**32}, "seed"),
    ({"names": "word"}, "names .*'word'"),
    ({"names": ["word", "bag"]}, "names"),
    ({"names": []}, "names"),
])
def test_text_representations_parameters(kw: dict[str, Any], match: str) -> None:
    with pytest.raises((ParameterError, FusionError), match=match):
        TextRepresentations(**kw).fit(TEXTS)


def test_text_representations_texts() -> None:
    with pytest.raises(ParameterError, match="texts"):
        TextRepresentations().fit("hello world")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"texts\[8\]"):
        TextRepresentations().fit([*TEXTS, None])  # type: ignore[list-item]
    with pytest.raises(FusionError, match="vocabulary"):
        TextRepresentations().fit(["the and", "of the"])
    with pytest.raises(FusionError, match="lsa"):
        TextRepresentations(names=["lsa"]).fit(["wheat", "wheat"])
    # a generator works as the list does
    a = TextRepresentations(lsa_components=2).fit(t for t in TEXTS).dissimilarities(1)
    b = TextRepresentations(lsa_components=2).fit(TEXTS).dissimilarities(1)
    assert np.array_equal(a, b)
    # without LSA, one word is enough
    one = TextRepresentations(names=["word"]).fit(["wheat", "wheat", "oil"]).dissimilarities(0)
    assert one[:, 0].tolist() == [0.0, 0.0, 1.0]


def test_text_representations_dissimilarities_indices() -> None:
    with pytest.raises(FusionError, match="not fitted"):
        TextRepresentations().dissimilarities(0)
    r = TextRepresentations(lsa_components=2).fit(TEXTS)
    for bad in (1.0, True, "1", None):
        with pytest.raises(FusionError, match="query"):
            r.dissimilarities(bad)  # type: ignore[arg-type]
    with pytest.raises(FusionError, match=r"query = 8 is outside \[0, 8\)"):
        r.dissimilarities(8)
    assert np.array_equal(r.dissimilarities(np.int64(1)), r.dissimilarities(1))


# --------------------------------------------------------------------------- finding 7


def test_scale_invariance_for_a_column_spanning_3e308() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((30, 3))
    X[:, 0] = (X[:, 0] * 2 - 1) * 1.7e308
    Y = X.copy()
    Y[:, 0] *= 1e-300
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        rx = solve_weights(X, [0, 1, 2], time_limit=None)
    ry = solve_weights(Y, [0, 1, 2], time_limit=None)
    assert (rx.objective, rx.optimal) == (ry.objective, ry.optimal) == (15.0, True)
    r2x = solve_weights(X[:, :2], [0, 1, 2], time_limit=None)
    r2y = solve_weights(Y[:, :2], [0, 1, 2], time_limit=None)
    assert (r2x.objective, r2x.optimal) == (r2y.objective, r2y.optimal)
    assert r2x.message == ""


# --------------------------------------------------------------------------- finding 10


def test_mrr_reaching_its_bound_is_optimal() -> None:
    X = np.random.default_rng(0).random((500, 3))
    r = solve_weights(X[:60], [5], objective="mrr", time_limit=None)
    assert (r.objective, r.bound, r.optimal, r.gap) == (0.1, 0.1, True, 0.0)


# --------------------------------------------------------------------------- finding 12, 13


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nominate_refuses_a_time_limit_that_is_not_finite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    rc = main(["nominate", "--simulate", "rdpg", "--runs", "2", "--k", "5",
               f"--time-limit={value}", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "--time-limit" in err and value in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_rdpg_intervals_stay_in_the_unit_interval() -> None:
    res = simulate_rdpg(0, runs=2, k=5)
    los = [x for by in res["mrr"].values() for s in by.values() for x in s["lo"]]
    his = [x for by in res["mrr"].values() for s in by.values() for x in s["hi"]]
    assert min(los) == 0.0 and max(his) == 1.0  # both clipped at seed 0 with two runs
    for by in res["mrr"].values():
        for s in by.values():
            assert all(lo <= m <= hi for lo, m, hi in zip(s["lo"], s["mean"], s["hi"], strict=True))


def test_docs_rdpg_statements_match_the_committed_numbers() -> None:
    root = Path(__file__).resolve().parents[2]
    res = json.loads((root / "benchmarks/results/fusion_rdpg.json").read_text())["redrawn"]["mrr"]
    doc = (root / "docs/fusion.md").read_text()
    alphas = [round(0.1 * i, 1) for i in range(11)]
    for obs in ("P", "Abar"):
        m = {r: res[obs][r] for r in ("ilp", "ase", "lse")}
        inside, overlap, above = [], [], []
        for i in range(1, 10):
            better = max(("ase", "lse"), key=lambda r: m[r]["mean"][i])
            ilp = m["ilp"]["mean"][i]
            if m[better]["lo"][i] <= ilp <= m[better]["hi"][i] or ilp > m[better]["mean"][i]:
                inside.append(alphas[i])
            if m["ilp"]["hi"][i] >= m[better]["lo"][i]:
                overlap.append(alphas[i])
            if ilp > m["ase"]["mean"][i] and ilp > m["lse"]["mean"][i]:
                above.append(alphas[i])
        start = min(a for a in above if all(b in above for b in alphas[alphas.index(a):10]))
        if obs == "Abar":
            assert (len(inside), len(overlap), start) == (7, 8, 0.4)
        else:
            assert (len(inside), start) == (7, 0.3)
    assert "7 of 9 with `Abar` (misses 0.1, 0.2" in doc
    assert "0.3 (P) / 0.4 (Abar) to 0.9" in doc


def test_a_small_program_is_solved_by_the_milp_under_a_short_limit() -> None:
    # finding 11: with a fixed 1 s overhead estimate and the 4x rule, no solve under a
    # limit below about 5.5 s started HiGHS; this 60-row program (which HiGHS proves
    # optimal at 9 in a few hundredths of a second) ran line searches for the whole
    # limit and came back not optimal. A fusion profile solves with a 1 s limit.
    X = np.random.default_rng(0).random((500, 3))
    free = solve_weights(X[:60], [5], time_limit=None)
    assert free.optimal and free.objective == 9.0
    for limit in (1.0, 0.7):
        res = solve_weights(X[:60], [5], time_limit=limit)
        assert res.optimal, res.message
        assert res.objective == 9.0 and res.method == "milp"
        assert "not started" not in res.message
