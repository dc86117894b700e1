"""Review mode: estimators, stopping rules, the Review object, the command."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sift.cli import main
from sift.commands.screen import load_records
from sift.filters.screening import Review, ScreeningError
from sift.filters.screening.estimators import (
    Estimate,
    hansen_hurwitz,
    horvitz_thompson,
    pairwise_inclusion,
    power_law,
)
from sift.filters.screening.metrics import recall_at, wss
from sift.filters.screening.simulation import simulate
from sift.filters.screening.stopping import (
    bound_rule,
    fixed_budget_rule,
    knee_point,
    knee_rule,
    target_rule,
)

# ----------------------------------------------------------------- estimators


def test_ht_hand_computed_single_unit() -> None:
    # one relevant unit with inclusion probability 1/4: R-hat 4, var (1-.25)/.25^2 = 12
    r, v = horvitz_thompson(np.array([1.0]), np.array([[0.25]]))
    assert r == pytest.approx(4.0)
    assert v == pytest.approx(12.0)


def test_ht_hand_computed_pair() -> None:
    # pi = .5, .5, pi_12 = .2: var = 2 * (.5/.25) + 2 * (.2 - .25)/(.2 * .25) = 4 - 2
    r, v = horvitz_thompson(np.array([1.0, 1.0]), np.array([[0.5, 0.2], [0.2, 0.5]]))
    assert (r, v) == (pytest.approx(4.0), pytest.approx(2.0))


def test_pairwise_inclusion_by_enumeration() -> None:
    # two units, p = (.5, .5), b = 2 draws: outcomes 11, 12, 21, 22 each 1/4
    pij = pairwise_inclusion(np.array([[0.5, 0.5]]), np.zeros((1, 2), bool), np.array([2]))
    assert pij[0, 0] == pytest.approx(0.75)
    assert pij[0, 1] == pytest.approx(0.5)
    # with one draw both can never be included together
    pij1 = pairwise_inclusion(np.array([[0.5, 0.5]]), np.zeros((1, 2), bool), np.array([1]))
    assert pij1[0, 1] == pytest.approx(0.0)
    # a unit taken with certainty has pi = 1 and pi_ij = pi_j
    pijc = pairwise_inclusion(
        np.array([[0.0, 0.3]]), np.array([[True, False]]), np.array([2])
    )
    assert pijc[0, 0] == 1.0
    assert pijc[0, 1] == pytest.approx(pijc[1, 1])


def test_ht_and_hh_unbiased_by_enumeration() -> None:
    """Over every outcome of 2 draws from p = (.5, .3, .2), E[HT] = E[HH] = sum y."""
    p = np.array([0.5, 0.3, 0.2])
    y = np.array([1.0, 0.0, 1.0])
    pij_all = pairwise_inclusion(p[None, :], np.zeros((1, 3), bool), np.array([2]))
    e_ht = e_hh = 0.0
    for draws in itertools.product(range(3), repeat=2):
        prob = float(np.prod(p[list(draws)]))
        s = sorted(set(draws))
        ht, v = horvitz_thompson(y[s], pij_all[np.ix_(s, s)])
        hh, vh = hansen_hurwitz(y[list(draws)] / p[list(draws)])
        assert v >= 0 and vh >= 0
        e_ht += prob * ht
        e_hh += prob * hh
    assert e_ht == pytest.approx(2.0)
    assert e_hh == pytest.approx(2.0)


def test_hh_hand_computed() -> None:
    assert hansen_hurwitz(np.array([0.0, 4.0, 0.0, 0.0])) == (1.0, 1.0)
    assert hansen_hurwitz(np.array([])) == (0.0, 0.0)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=2, max_value=6),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=30),
    st.integers(min_value=0, max_value=2**31 - 1),
)
def test_ht_variance_non_negative(m: int, t: int, b: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(m + 3), size=t)[:, :m]
    certain = rng.random((t, m)) < 0.1
    pij = pairwise_inclusion(p, certain, np.full(t, b))
    assert np.all(np.diag(pij) > 0)
    assert np.all(pij <= np.minimum.outer(np.diag(pij), np.diag(pij)) + 1e-12)
    _, var = horvitz_thompson(np.ones(m), pij)
    assert var >= 0.0


def test_power_law() -> None:
    p = power_law(np.array([2, 0, 1]), 1.0)
    assert p.tolist() == pytest.approx([1 / 3, 0.0, 2 / 3])
    with pytest.raises(ScreeningError, match="exponent"):
        power_law(np.array([1]), -1.0)


def test_estimate_bounds() -> None:
    e = Estimate(r_hat=10.0, var=4.0, found=9)
    assert e.upper(0.95) == pytest.approx(10.0 + 1.6448536 * 2.0)
    assert e.recall() == pytest.approx(0.9)
    assert e.recall_lower(0.95) < e.recall()
    assert Estimate(5.0, 0.0, 7).upper(0.95) == 7.0  # never below what was found


# ------------------------------------------------------------------- stopping


def test_target_and_bound_rules() -> None:
    assert target_rule(19, 20.0, 0.95)
    assert not target_rule(18, 20.0, 0.95)
    assert not target_rule(0, 0.0, 0.95)  # nothing found: never stop
    assert bound_rule(19, 20.0, 0.95)
    assert not bound_rule(19, 21.0, 0.95)
    with pytest.raises(ScreeningError, match="target recall"):
        target_rule(1, 1.0, 1.5)


def test_knee_rule_hand_computed() -> None:
    labels = [1] * 10 + [0] * 200
    assert knee_point(labels) == (10, 10)
    # rho = (10/10) / ((10 - 10 + 1)/(210 - 10)) = 200 >= 156 - 10
    assert knee_rule(labels)
    assert not knee_rule([1] * 10 + [0] * 100)  # fewer than 150 screened
    # a steady gain curve has no knee: rho is about 1
    assert not knee_rule([1, 0, 0, 0] * 100)
    # rho = (10/10)/((12 - 10 + 1)/(300 - 10)) = 96.7 < 156 - 12
    assert not knee_rule([1] * 10 + [0] * 140 + [1, 1] + [0] * 148)


def test_fixed_budget_rule() -> None:
    assert fixed_budget_rule(50, 100, 0.5)
    assert not fixed_budget_rule(49, 100, 0.5)
    with pytest.raises(ScreeningError, match="budget"):
        fixed_budget_rule(1, 10, 0.0)


def test_metrics_hand_computed() -> None:
    order = [1, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    # R = 2, ceil(.95 * 2) = 2 found after 3 of 10: (10 - 3)/10 - .05
    assert wss(order, 0.95) == pytest.approx(0.65)
    assert wss([0, 1], 1.0, n_total=4, n_relevant=2) == pytest.approx(0.0)  # never: n_r = N
    assert recall_at(order, 0.1) == 0.5


# --------------------------------------------------------------- the Review


def _corpus(n: int = 80) -> tuple[list[str], list[str], list[int]]:
    ids, texts, labels = [], [], []
    for i in range(n):
        rel = i % 8 == 0
        ids.append(f"d{i}")
        texts.append(
            f"copper chelation wilson disease trial {i % 3}" if rel
            else f"weather report number {i} rain wind {i % 5}"
        )
        labels.append(int(rel))
    return ids, texts, labels


def _run_batches(review: Review, gold: dict[str, int], n: int) -> None:
    for _ in range(n):
        for doc_id in review.next_batch():
            review.record_judgment(doc_id, bool(gold[doc_id]))


def test_review_finds_relevant_first() -> None:
    ids, texts, _ = _corpus()
    review = Review("wilson disease copper", draws=5, n_top=5, random_state=1)
    review.add_documents(ids, texts)
    batch = review.next_batch()
    assert texts[ids.index(batch[0])].startswith("copper")


def test_params_validated_with_name_and_value() -> None:
    with pytest.raises(ScreeningError, match=r"draws .*-1"):
        Review(draws=-1)
    with pytest.raises(ScreeningError, match=r"estimator .*'xx'"):
        Review(estimator="xx")  # type: ignore[arg-type]
    with pytest.raises(ScreeningError, match=r"target_recall .*1\.5"):
        Review(target_recall=1.5)
    with pytest.raises(ScreeningError, match="duplicate document id 'a'"):
        Review().add_documents(["a", "a"], ["x", "y"])
    with pytest.raises(ScreeningError, match="unknown document id 'zz'"):
        Review().record_judgment("zz", True)
    with pytest.raises(ScreeningError, match="no documents"):
        Review().next_batch()


def test_pending_batch_is_returned_again_and_blocks_stopping() -> None:
    ids, texts, _ = _corpus()
    review = Review("wilson", draws=5, n_top=3, min_batches=0, random_state=0)
    review.add_documents(ids, texts)
    first = review.next_batch()
    review.record_judgment(first[0], True)
    assert review.next_batch() == first[1:]
    assert not review.should_stop()


def test_state_round_trip_is_exact_and_continues_identically() -> None:
    ids, texts, labels = _corpus()
    gold = dict(zip(ids, labels, strict=True))
    review = Review("wilson disease", draws=6, n_top=4, random_state=3)
    review.add_documents(ids, texts)
    _run_batches(review, gold, 3)
    review.next_batch()  # leave a batch pending
    state = orjson.loads(orjson.dumps(review.to_state()))
    copy = Review.from_state(state)
    assert copy.to_state() == review.to_state()
    assert copy.estimate_ht() == review.estimate_ht()
    for doc_id in review.next_batch():
        review.record_judgment(doc_id, bool(gold[doc_id]))
        copy.record_judgment(doc_id, bool(gold[doc_id]))
    assert copy.next_batch() == review.next_batch()
    assert np.array_equal(copy.inclusion_probabilities(), review.inclusion_probabilities())


def test_state_without_texts_and_ranks_is_whole_once_they_are_put_back() -> None:
    """``to_state(without=...)`` leaves out the parts a caller stores apart (the streaming
    service keeps texts and each batch's ranks in records of their own); put back, the
    state is the full one."""
    ids, texts, labels = _corpus()
    review = Review("wilson disease", draws=6, n_top=4, random_state=3)
    review.add_documents(ids, texts)
    _run_batches(review, dict(zip(ids, labels, strict=True)), 3)
    full = review.to_state()
    part = review.to_state(without=("texts", "ranks"))
    assert "texts" not in part and all("ranks" not in b for b in part["batches"])
    assert review.to_state(without=["texts"])["batches"] == full["batches"]
    back = {**part, "texts": list(texts),
            "batches": [{**b, "ranks": Review.encode_ranks(batch)}
                        for b, batch in zip(part["batches"], review.batches_, strict=True)]}
    assert back == full
    assert Review.from_state(back).to_state() == full
    for bad in (("text",), "texts", ("texts", "scores")):
        with pytest.raises(ScreeningError, match="without must name"):
            review.to_state(without=bad)


def test_state_errors() -> None:
    with pytest.raises(ScreeningError, match="version"):
        Review.from_state({"version": 99})
    state = Review().to_state()
    state["labels"] = {"dtype": "<f8", "shape": [3], "b64": "AAAA"}
    with pytest.raises(ScreeningError, match="labels"):
        Review.from_state(state)


def test_documents_arriving_mid_review_restart_the_stopping_clock() -> None:
    ids, texts, labels = _corpus()
    gold = dict(zip(ids, labels, strict=True))
    review = Review("wilson disease", draws=6, n_top=4, min_batches=2, random_state=0)
    review.add_documents(ids[:60], texts[:60])
    _run_batches(review, gold, 3)
    review.add_documents(ids[60:], texts[60:])
    assert review.epoch_start_ == 3
    assert not review.should_stop()  # no batch yet covers the new documents
    _run_batches(review, gold, 2)
    pi = review.inclusion_probabilities()
    assert np.all(pi[60:] > 0)  # new documents now have a positive inclusion probability
    est = review.estimate_ht()
    assert est.r_hat >= est.found


def test_simulation_is_reproducible_and_stops() -> None:
    ids, texts, labels = _corpus()
    kw = {"topic": "wilson disease", "seed": 4, "params": {"draws": 6, "n_top": 4}}
    a = simulate(ids, texts, labels, **kw)  # type: ignore[arg-type]
    b = simulate(ids, texts, labels, **kw)  # type: ignore[arg-type]
    assert a.ids == b.ids
    assert a.stops.keys() == b.stops.keys()
    assert "hh@0.95" in a.stops
    assert sum(a.labels) == a.n_relevant
    ordering, threshold = a.ordering, a.threshold
    assert len(ordering) == len(ids) and 0 < threshold <= len(ids)


# ----------------------------------------------------------------- command


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def test_load_records_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ScreeningError, match="no 'label'"):
        load_records(_write(tmp_path / "a.jsonl.gz", [{"id": "1", "title": "x"}]))
    with pytest.raises(ScreeningError, match="no records"):
        load_records(_write(tmp_path / "b.jsonl.gz", []))
    with pytest.raises(ScreeningError, match="single class"):
        load_records(_write(tmp_path / "c.jsonl.gz", [
            {"id": "1", "title": "x", "label": 0}, {"id": "2", "title": "y", "label": 0}]))


def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "c.jsonl.gz", [{"id": "1", "title": "x", "label": 1}])
    assert main(["screen", "--data", str(f), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "single class" in err


def test_cli_runs_and_writes_metrics(tmp_path: Path) -> None:
    ids, texts, labels = _corpus(60)
    f = _write(tmp_path / "tiny.jsonl.gz", [
        {"id": i, "title": t, "abstract": "", "label": y}
        for i, t, y in zip(ids, texts, labels, strict=True)
    ])
    (tmp_path / "reviews.json").write_text(json.dumps({"tiny": "wilson disease copper"}))
    out = tmp_path / "out"
    rc = main(["screen", "--data", str(f), "--estimator", "hh", "--seed", "1",
               "--draws", "6", "--n-top", "4", "--out", str(out)])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    for key in ("recall_at_stop", "cost_at_stop", "r_hat", "r_hat_var", "wss95",
                "recall_at_10pct", "screening_order"):
        assert key in m
    assert 0 < m["cost_at_stop"] <= 1 and 0 <= m["recall_at_stop"] <= 1


def test_cli_greedy_cal_ranks_everything_and_says_it_has_no_estimate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--draws 0`` is greedy CAL (the tuned ranking option): no sample, so no R-hat and
    no stop; the whole collection is ranked and the output says why it did not stop."""
    ids, texts, labels = _corpus(60)
    f = _write(tmp_path / "tiny.jsonl.gz", [
        {"id": i, "title": t, "abstract": "", "label": y}
        for i, t, y in zip(ids, texts, labels, strict=True)
    ])
    out = tmp_path / "out"
    rc = main(["screen", "--data", str(f), "--topic", "wilson disease copper", "--estimator",
               "ht", "--draws", "0", "--negatives", "30", "--out", str(out)])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["stopped"] is False and m["r_hat"] is None
    assert m["cost_at_stop"] == 1.0 and m["recall_at_stop"] == 1.0
    assert sorted(m["screening_order"]) == sorted(str(i) for i in ids)
    assert "never fired (no draws, so no estimate: ranking only)" in capsys.readouterr().out


def test_cli_all_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids, texts, labels = _corpus(48)
    for name in ("a", "b"):
        _write(tmp_path / f"{name}.jsonl.gz", [
            {"id": i, "title": t, "label": y} for i, t, y in zip(ids, texts, labels, strict=True)
        ])
    rc = main(["screen", "--all", str(tmp_path), "--seeds", "2", "--estimator", "hh",
               "--draws", "6", "--n-top", "4"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "dataset" in out and "\na " in out and "\nb " in out


def test_warmup_draws_nothing_until_precision_drops() -> None:
    ids, texts, labels = _corpus()
    gold = dict(zip(ids, labels, strict=True))
    review = Review("wilson disease copper", draws=6, n_top=4, warmup_precision=0.5,
                    random_state=0)
    review.add_documents(ids, texts)
    _run_batches(review, gold, 1)
    assert review.batches_[0]["b"] == 0  # the first greedy batch is all relevant
    _run_batches(review, gold, 6)
    assert any(b["b"] > 0 for b in review.batches_)  # relevant ran out: sampling began
    assert review.n_sampling_batches() == sum(b["b"] > 0 for b in review.batches_)


def test_take_all_stratum_stops_growing_once_sampling_starts() -> None:
    ids, texts, labels = _corpus(200)
    gold = dict(zip(ids, labels, strict=True))
    review = Review("wilson disease copper", draws=6, n_top=2, growth=0.2,
                    warmup_precision=0.5, grow_when_sampling=False, random_state=0)
    review.add_documents(ids, texts)
    _run_batches(review, gold, 12)
    sizes = [(len(b["certain"]), b["b"]) for b in review.batches_]
    assert any(b > 0 for _, b in sizes) and any(b == 0 and c > 2 for c, b in sizes)
    assert all(c == 2 for c, b in sizes if b > 0)  # sampling batches take n_top only


def test_class_ratio_weights_and_validation() -> None:
    from sift.filters.screening.cal import class_weights

    w = class_weights(np.array([1, 1, 0, 0, 0, 0]), 4.0)
    assert w[:2].sum() == pytest.approx(4 * w[2:].sum()) and w.sum() == pytest.approx(6)
    with pytest.raises(ScreeningError, match=r"class_ratio .*0"):
        Review(class_ratio=0)
    with pytest.raises(ScreeningError, match=r"max_df .*1\.5"):
        Review(max_df=1.5)
    with pytest.raises(ScreeningError, match=r"grow_when_sampling .*'no'"):
        Review(grow_when_sampling="no")  # type: ignore[arg-type]


def test_strip_design_drops_only_the_subtitle_design_words() -> None:
    from sift.filters.screening.cal import strip_design

    assert strip_design("Wilson disease therapies: A systematic review and meta-analysis "
                        "of controlled studies") == "Wilson disease therapies: of controlled studies"
    assert strip_design("Fault metrics: A systematic literature review") == "Fault metrics"
    assert strip_design("Systematic literature reviews in software engineering \u2013 "
                        "A tertiary study") == "Systematic literature reviews in software engineering"
    assert strip_design("The rigour of systematic reviews in health") == \
        "The rigour of systematic reviews in health"  # no subtitle: the topic is reviews
    review = Review("Copper therapy: a systematic review", random_state=0)
    review.add_documents(["a", "b"], ["systematic review of reviews", "copper therapy trial"])
    assert review.next_batch()[0] == "b"
    plain = Review("Copper therapy: a systematic review", strip_design=False, random_state=0)
    assert plain.get_params()["strip_design"] is False


def test_hh_variance_max_adds_the_spread_of_the_batch_estimates() -> None:
    ids, texts, labels = _corpus(200)
    gold = dict(zip(ids, labels, strict=True))
    reviews = {v: Review("wilson disease", draws=8, n_top=2, warmup_precision=0.0,
                         hh_variance=v, random_state=4) for v in ("within", "max")}
    for review in reviews.values():
        review.add_documents(ids, texts)
        _run_batches(review, gold, 6)
    within, mx = reviews["within"].estimate_hh(), reviews["max"].estimate_hh()
    # the same process (the option only changes the variance), so the same point estimate
    assert reviews["within"].order_ == reviews["max"].order_
    assert mx.r_hat == within.r_hat
    r = reviews["max"]
    ests = []
    for batch in [b for b in r._complete_batches() if b["b"] > 0][-r.hh_window:]:
        top = float(np.sum(r.labels_[batch["certain"]] == 1))
        hit = (r.labels_[batch["draws"]] == 1) & batch["draw_new"]
        ests.append(batch["found_before"] + top
                    + float(np.mean(np.where(hit, 1.0 / batch["draw_p"], 0.0))))
    spread = float(np.var(ests, ddof=1)) / len(ests)
    assert mx.var == pytest.approx(max(within.var, spread))
    assert mx.var >= within.var
    with pytest.raises(ScreeningError, match=r"hh_variance .*'sd'"):
        Review(hh_variance="sd")  # type: ignore[arg-type]


def test_min_batches_default_is_longer_for_the_point_rules() -> None:
    assert Review().min_batches_for("bound") == 5
    assert Review().min_batches_for("ht") == Review().min_batches_for("hh") == 10
    assert Review(min_batches=2).min_batches_for("hh") == 2
    ids, texts, labels = _corpus(400)
    gold = dict(zip(ids, labels, strict=True))
    reviews = [Review("wilson disease", estimator="hh", target_recall=0.5, draws=20, n_top=2,
                      warmup_precision=0.0, random_state=0, min_batches=m) for m in (None, 5)]
    for review in reviews:
        review.add_documents(ids, texts)
    stops: list[list[bool]] = [[], []]
    while reviews[0].n_sampling_batches() < 9:
        for review, out in zip(reviews, stops, strict=True):
            _run_batches(review, gold, 1)
            out.append(review.should_stop())
    assert not any(stops[0])  # the point rule waits for 10 batches by default
    assert any(stops[1])  # while the same review with min_batches=5 would have stopped
