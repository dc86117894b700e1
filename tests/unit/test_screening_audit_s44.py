"""Review mode: the findings of the forty-fourth session's audit (S1-S7; docs/screening.md,
"Forty-fourth session"); each case failed on the code before."""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from sift.cli import main
from sift.filters.screening.cal import Review, _enc
from sift.filters.screening.errors import ScreeningError
from sift.topics.errors import RecordError
from sift.topics.review import ReviewSpec, ReviewStatus
from tests.unit.test_screening_audit import _collection  # the audits' synthetic set


def _judge(review: Review, gold: dict[str, int], batches: int) -> None:
    for _ in range(batches):
        for d in review.next_batch():
            review.record_judgment(d, bool(gold[d]))


# --------------------------------------------------------------------------- S1


@pytest.mark.parametrize(("name", "value"), [
    ("C", 1e160), ("C", math.inf), ("C", 2e6), ("svm_C", math.inf), ("svm_C", 1e200),
    ("class_ratio", math.inf), ("class_ratio", 1e7), ("topic_weight", 1e308),
    ("topic_weight", 1e7), ("topic_weight", math.inf), ("class_ratio", math.nan),
])
def test_parameters_a_review_cannot_use_are_refused_at_construction(name: str,
                                                                    value: float) -> None:
    # before: accepted, then liblinear never returned (C 1e160) or the first model raised
    with pytest.raises(ScreeningError) as err:
        Review("topic", **{name: value})
    assert str(err.value).startswith(f"{name} ") and repr(value) in str(err.value)


def test_the_largest_allowed_values_run() -> None:
    ids, texts, gold, topic = _collection(200, 15)
    review = Review(topic, random_state=0, C=1e6, svm_C=1e6, class_ratio=1e6, topic_weight=1e6,
                    learner="lr+svm")
    review.add_documents(ids, texts)
    _judge(review, gold, 6)
    assert review.estimate().found > 0


# --------------------------------------------------------------------------- S2


def test_no_sampling_batch_is_no_estimate_not_recall_one() -> None:
    from sift.agents.review import status_of
    from sift.commands.review import describe

    ids, texts, gold, topic = _collection(600, 30)
    review = Review(topic, random_state=0)
    review.add_documents(ids[:300], texts[:300])
    for when in ("start", "warm-up"):
        est = review.estimate()
        assert not est.sampled, when
        assert math.isnan(est.recall()) and est.recall_lower(0.95) == 0.0
        st = status_of("x", review)
        # before: recall_estimate 1.0, recall_lower 1.0
        assert st.recall_estimate is None and st.recall_lower == 0.0 and not st.stop
        raw = orjson.dumps(st.to_obj())
        obj = json.loads(raw)  # valid JSON: null, not NaN
        assert obj["recall_estimate"] is None and obj["recall_lower"] == 0.0
        assert ReviewStatus.from_obj(obj) == st
        line = describe(st)
        assert "no estimate yet" in line and "1.000" not in line
        _judge(review, gold, 1)
    while review.n_sampling_batches() == 0:
        _judge(review, gold, 1)
    est = review.estimate()
    assert est.sampled and 0 < est.recall() <= 1 and 0 < est.recall_lower(0.95) <= 1
    st = status_of("x", review)
    assert st.recall_estimate == est.recall() and "no estimate yet" not in describe(st)
    # documents join: no sampling batch of the new epoch yet
    _judge(review, gold, 4)
    review.add_documents(ids[300:], texts[300:])
    est = review.estimate()
    assert not est.sampled and math.isnan(est.recall()) and est.recall_lower(0.95) == 0.0
    assert status_of("x", review).recall_estimate is None


def test_ht_without_a_sampling_batch_is_no_estimate_either() -> None:
    ids, texts, gold, topic = _collection()
    review = Review(topic, random_state=0, estimator="ht", draws=0)  # greedy CAL: no draws
    review.add_documents(ids, texts)
    _judge(review, gold, 3)
    est = review.estimate()
    assert est.found > 0 and not est.sampled and math.isnan(est.recall())
    review = Review(topic, random_state=0, estimator="ht", warmup_precision=0.0)
    review.add_documents(ids, texts)
    _judge(review, gold, 2)
    assert review.estimate().sampled


def test_a_review_screened_whole_without_sampling_reports_recall_one() -> None:
    from sift.agents.review import status_of

    ids, texts, gold, topic = _collection(12, 3)
    review = Review(topic, random_state=0, n_top=20)
    review.add_documents(ids, texts)
    _judge(review, gold, 1)
    assert review.screened == 12 and not review.estimate().sampled
    st = status_of("x", review)
    assert st.complete and st.recall_estimate == 1.0 and st.recall_lower == 1.0


# --------------------------------------------------------------------------- S3


def _write(path: Path, n: int = 48, *, opener: Any = gzip.open, **fields: Any) -> Path:
    ids, texts, gold, _ = _collection(n, 8)
    with opener(path, "wt", encoding="utf-8") as fh:
        for i, t in zip(ids, texts, strict=True):
            fh.write(json.dumps({"id": i, "title": t, "label": gold[i], **fields}) + "\n")
    return path


SMALL = ["--draws", "6", "--n-top", "4"]


def test_screen_without_a_topic_says_so_and_records_the_topic(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "a.jsonl.gz")
    out = tmp_path / "out"
    assert main(["screen", "--data", str(f), *SMALL, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (f"no topic for {f} (no reviews.json beside it): ranking starts at random; "
            "give --topic") in err
    assert json.loads((out / "metrics.json").read_text())["topic"] is None
    (tmp_path / "reviews.json").write_text(json.dumps({"b": "something else"}))
    assert main(["screen", "--data", str(f), *SMALL, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (f"no topic for {f} (no entry in reviews.json): ranking starts at random; "
            "give --topic") in err
    (tmp_path / "reviews.json").write_text(json.dumps({"a": "rw0 rw1 rw2"}))
    assert main(["screen", "--data", str(f), *SMALL, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "no topic" not in captured.err and "topic: rw0 rw1 rw2" in captured.out
    assert json.loads((out / "metrics.json").read_text())["topic"] == "rw0 rw1 rw2"
    assert main(["screen", "--data", str(f), *SMALL, "--topic", "rw3", "--out", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["topic"] == "rw3"
    assert main(["screen", "--data", str(f), *SMALL, "--topic", " ", "--out", str(out)]) == 0
    assert "(--topic is empty)" in capsys.readouterr().err


def test_screen_all_records_each_files_topic(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        _write(tmp_path / f"{name}.jsonl.gz")
    (tmp_path / "reviews.json").write_text(json.dumps({"a": "rw0 rw1 rw2"}))
    out = tmp_path / "out"
    assert main(["screen", "--all", str(tmp_path), "--seeds", "2", *SMALL,
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("no topic for") == 1  # once per file, not per seed
    assert "no entry in reviews.json): ranking starts at random; add its title" in err
    summary = json.loads((out / "summary.json").read_text())
    assert [m["topic"] for m in summary["a"]] == ["rw0 rw1 rw2"] * 2
    assert [m["topic"] for m in summary["b"]] == [None, None]


# --------------------------------------------------------------------------- S4


def _mid_batch() -> tuple[Review, dict[str, Any], dict[str, int]]:
    ids, texts, gold, topic = _collection()
    review = Review(topic, random_state=2, warmup_precision=0.0)
    review.add_documents(ids, texts)
    _judge(review, gold, 6)
    batch = review.next_batch()
    for d in batch[:2]:
        review.record_judgment(d, bool(gold[d]))
    return review, orjson.loads(orjson.dumps(review.to_state())), gold


def test_a_pending_list_off_the_last_batch_is_refused() -> None:
    review, state, _ = _mid_batch()
    assert len(review.pending_) > 2
    Review.from_state(copy.deepcopy(state))  # the genuine state loads
    for pending in ([], review.pending_[1:],
                    [d for d in review.ids_ if d not in review.order_
                     and d not in review.pending_][:1],
                    [*review.pending_, next(d for d in review.ids_ if d not in review.order_
                                            and d not in review.pending_)]):
        bad = {**copy.deepcopy(state), "pending": pending}
        with pytest.raises(ScreeningError, match="state field 'pending'"):
            Review.from_state(bad)
    # the order of the pending ids is not part of the check
    Review.from_state({**copy.deepcopy(state), "pending": review.pending_[::-1]})


def test_a_log_miss_off_the_batches_is_refused() -> None:
    review, state, _ = _mid_batch()
    bad = {**copy.deepcopy(state), "log_miss": _enc(np.zeros(review.n_documents))}
    with pytest.raises(ScreeningError, match="state field 'log_miss'"):
        Review.from_state(bad)
    shifted = review.log_miss_.copy()
    i = int(np.flatnonzero(np.isfinite(shifted) & (shifted < 0))[0])
    shifted[i] *= 1.001
    with pytest.raises(ScreeningError, match="state field 'log_miss'"):
        Review.from_state({**copy.deepcopy(state), "log_miss": _enc(shifted)})


def test_states_of_a_growing_review_still_round_trip() -> None:
    ids, texts, gold, topic = _collection(300, 20)
    review = Review(topic, random_state=1, warmup_precision=0.0)
    review.add_documents(ids[:200], texts[:200])
    _judge(review, gold, 3)
    review.next_batch()
    review.add_documents(ids[200:], texts[200:])  # documents join mid-batch
    for d in list(review.pending_):
        review.record_judgment(d, bool(gold[d]))
    _judge(review, gold, 2)
    review.record_judgment(ids[250], True)  # unrequested
    state = orjson.loads(orjson.dumps(review.to_state()))
    assert Review.from_state(state).to_state() == review.to_state()


# --------------------------------------------------------------------------- S5


def test_ordering_keeps_the_last_models_order_when_documents_join() -> None:
    ids, texts, gold, topic = _collection(300, 20, seed=1)
    review = Review(topic, random_state=0)
    review.add_documents(ids[:290], texts[:290])
    _judge(review, gold, 4)
    before, th = review.ordering()
    review.add_documents(ids[290:], texts[290:])
    after, th2 = review.ordering()
    # before: the 200-odd unscreened records fell back to insertion order
    assert th2 == th and after[:th] == before[:th]
    assert after[th:] == before[th:] + ids[290:]


# --------------------------------------------------------------------------- S6


def test_review_spec_profile_and_params_types() -> None:
    with pytest.raises(RecordError) as err:
        ReviewSpec.from_obj({"profile": 5, "mode": "review", "query": "x"})
    assert err.value.reason == "bad_profile"  # before: missing_profile
    with pytest.raises(RecordError) as err:
        ReviewSpec.from_obj({"mode": "review", "query": "x"})
    assert err.value.reason == "missing_profile"
    for params in ([], False, 0, "", None, [["draws", 3]]):
        with pytest.raises(RecordError) as err:
            ReviewSpec.from_obj({"profile": "p", "mode": "review", "query": "x",
                                 "params": params})
        assert err.value.reason == "bad_params", params
    assert ReviewSpec.from_obj({"profile": "p", "mode": "review", "query": "x"}).params == {}


STATUS = {"review": "r", "documents": 10, "screened": 4, "found": 1, "pending": 0,
          "batches": 1, "r_hat": 2.0, "r_hat_var": 0.5, "recall_estimate": 0.5,
          "recall_lower": 0.0, "estimator": "bound", "target_recall": 0.95, "stop": False,
          "complete": False, "ts": 1.0}


@pytest.mark.parametrize(("key", "value"), [
    ("stop", "false"), ("stop", 0), ("complete", [0]), ("documents", 2.9),
    ("documents", True), ("found", -1), ("estimator", None), ("estimator", 3),
    ("r_hat", "1"), ("r_hat", True), ("recall_lower", None), ("recall_estimate", "0.5"),
    ("target_recall", None), ("ts", "now"),
])
def test_a_review_status_of_the_wrong_types_is_refused(key: str, value: Any) -> None:
    # before: "stop": "false" was a stop, 2.9 documents were 2, a null estimator None
    assert ReviewStatus.from_obj(STATUS).to_obj() == STATUS
    with pytest.raises(RecordError) as err:
        ReviewStatus.from_obj({**STATUS, key: value})
    assert err.value.reason == "bad_status" and repr(key) in str(err.value)


# --------------------------------------------------------------------------- S7


@pytest.mark.parametrize(("fields", "says"), [
    ({"title": 0}, "'title' must be a string or null, got 0"),
    ({"abstract": []}, "'abstract' must be a string or null, got []"),
])
def test_screen_refuses_text_that_is_not_a_string(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any],
        says: str) -> None:
    f = _write(tmp_path / "a.jsonl.gz", **fields)
    assert main(["screen", "--data", str(f), *SMALL, "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{f}:1:" in err and says in err


def test_screen_warns_about_records_with_no_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.jsonl"
    _write(f, opener=open)
    with f.open("a") as fh:
        for i in range(3):
            fh.write(json.dumps({"id": f"e{i}", "title": None, "abstract": " ",
                                 "label": 0}) + "\n")
    assert main(["screen", "--data", str(f), *SMALL, "--topic", "rw0",
                 "--out", str(tmp_path / "o")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "no text" in x]
    assert lines == [f"sift screen: {f}: 3 of 51 records have no text (no title or "
                     "abstract); the model has nothing to rank them by"]


def test_screen_reads_gzip_by_its_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "a.jsonl")  # gzip, named .jsonl
    out = tmp_path / "o"
    assert main(["screen", "--data", str(f), *SMALL, "--topic", "rw0", "--out", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["n_records"] == 48
    capsys.readouterr()
    # a .gz name still means gzip, as for every JSONL reader: plain text so named is refused
    plain = _write(tmp_path / "b.jsonl.gz", opener=open)
    assert main(["screen", "--data", str(plain), *SMALL, "--topic", "rw0",
                 "--out", str(tmp_path / "o2")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{plain}: cannot read: Not a gzipped file" in err, err


def test_screen_all_on_a_missing_folder(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["screen", "--all", str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'nope'}: no such folder" in err
    f = _write(tmp_path / "a.jsonl.gz")
    assert main(["screen", "--all", str(f)]) == 1
    assert f"{f}: not a folder" in capsys.readouterr().err


def test_screen_checks_out_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sift.commands.screen as screen

    def never(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the simulation ran")

    monkeypatch.setattr(screen, "simulate", never)
    f = _write(tmp_path / "a.jsonl.gz")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile, afile / "sub"):
        assert main(["screen", "--data", str(f), "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--out {out}:" in err and "not a folder" in err
    assert main(["screen", "--all", str(tmp_path), "--out", str(afile)]) == 1
    assert "not a folder" in capsys.readouterr().err


def test_record_judgment_takes_numpy_integers() -> None:
    review = Review("x")
    review.add_documents(["a", "b", "c"], ["x y", "y z", "z"])
    review.record_judgment("a", np.int64(1))  # type: ignore[arg-type]
    review.record_judgment("b", np.uint8(0))  # type: ignore[arg-type]
    assert review.labels_.tolist() == [1, 0, -1]
    for bad in (np.int64(2), np.float64(1.0), "1"):
        with pytest.raises(ScreeningError, match="relevant must be a boolean"):
            review.record_judgment("c", bad)  # type: ignore[arg-type]
