"""Review mode: the findings of the forty-third session's audit that were fixed (F5, F6;
docs/screening.md, "Forty-third session"); each case failed on the code before."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sift.cli import main
from sift.filters.screening.cal import Review
from sift.filters.screening.errors import ScreeningError
from sift.filters.screening.estimators import hansen_hurwitz


def _collection(n: int = 300, n_rel: int = 20, seed: int = 12345) -> tuple[
        list[str], list[str], dict[str, int], str]:
    """The audit's synthetic set: relevant records use the "rw*" words more often."""
    rng = np.random.default_rng(seed)
    rel_words = [f"rw{i}" for i in range(30)]
    other = [f"w{i}" for i in range(400)]
    ids, texts, gold = [], [], {}
    for i in range(n):
        label = 1 if i < n_rel else 0
        words = [*rng.choice(rel_words, rng.binomial(12, 0.35 if label else 0.08)),
                 *rng.choice(other, 25)]
        rng.shuffle(words)
        ids.append(f"d{i}")
        texts.append(" ".join(str(w) for w in words))
        gold[f"d{i}"] = label
    return ids, texts, gold, "rw0 rw1 rw2 topic"


def _review(batches: int, **kw: Any) -> tuple[Review, dict[str, int]]:
    ids, texts, gold, topic = _collection()
    review = Review(topic, random_state=0, warmup_precision=0.0, min_batches=1, **kw)
    review.add_documents(ids, texts)
    for _ in range(batches):
        for d in review.next_batch():
            review.record_judgment(d, bool(gold[d]))
    return review, gold


def _hh_by_hand(review: Review) -> float:
    """The mean of the window's batch estimates, the known part from the judgment order
    and the current labels (what the estimate must be after a correction)."""
    use = [b for b in review._complete_batches()[review.epoch_start_:] if b["b"] > 0]
    use = use[-review.hh_window:]
    ests = []
    for b in use:
        known = sum(review.labels_[review.index_[d]] == 1
                    for d in review.order_[: b["judged_before"]])
        top = float(np.sum(review.labels_[b["certain"]] == 1))
        hit = (review.labels_[b["draws"]] == 1) & b["draw_new"]
        mean, _ = hansen_hurwitz(np.where(hit, 1.0 / b["draw_p"], 0.0))
        ests.append(known + top + mean)
    return max(float(np.mean(ests)), float(np.sum(review.labels_ == 1)))


# --------------------------------------------------------------------------- F5


def test_a_corrected_judgment_reaches_the_hh_batch_estimates() -> None:
    # the audit's t13_relabel.py: three batches, then every relevant judgment corrected
    review, _ = _review(3, hh_window=3)
    assert review.estimate_hh().found == 10
    for d in list(review.order_):
        if review.labels_[review.index_[d]] == 1:
            review.record_judgment(d, False)
    est = review.estimate_hh()
    # before: r_hat 3.67 from the frozen counts [0, 3, 8], with nothing relevant left
    assert (est.found, est.r_hat, est.var) == (0, 0.0, 0.0)
    assert review.estimate_ht().r_hat == 0.0


def test_a_correction_to_relevant_raises_every_later_batch_estimate() -> None:
    review, gold = _review(4, hh_window=10)
    before = review.estimate_hh()
    assert before.r_hat > before.found + 1  # not held up by found
    # a record the first batch took with certainty, judged non-relevant, corrected: it
    # counts in that batch's take-all term and as known in each of the three after it
    first = review.batches_[0]
    d = next(review.ids_[i] for i in first["certain"]
             if gold[review.ids_[i]] == 0 and i not in first["draws"])
    review.record_judgment(d, True)
    after = review.estimate_hh()
    assert after.found == before.found + 1
    # every one of the four R_t is one higher (before: only the first, +0.25 on the mean)
    assert after.r_hat == pytest.approx(before.r_hat + 1.0)
    assert after.r_hat == pytest.approx(_hh_by_hand(review))


def test_nothing_corrected_gives_the_stored_counts_and_the_state_round_trips() -> None:
    review, gold = _review(2)
    # judgments outside the sample, between batches, count as known to the next batch
    extra = [d for d in review.ids_ if review.labels_[review.index_[d]] < 0][:5]
    for d in extra:
        review.record_judgment(d, bool(gold[d]))
    for _ in range(3):
        for d in review.next_batch():
            review.record_judgment(d, bool(gold[d]))
    assert [b["found_before"] for b in review.batches_] == review._found_before(review.batches_)
    assert review.estimate_hh().r_hat == pytest.approx(_hh_by_hand(review), abs=0.0)
    state = review.to_state()
    assert all("judged_before" in b for b in state["batches"])
    back = Review.from_state(json.loads(json.dumps(state)))
    assert back.to_state() == state
    assert back.estimate_hh() == review.estimate_hh()
    assert back.estimate_ht() == review.estimate_ht()


def test_a_state_without_judged_before_still_loads() -> None:
    review, gold = _review(3)
    state = review.to_state()
    for b in state["batches"]:
        del b["judged_before"]  # a state written before the forty-third session
    old = Review.from_state(state)
    assert old.estimate_hh() == review.estimate_hh()
    assert old.to_state() == state  # written back as it was read
    for d in old.next_batch():  # a new batch stores its judged_before
        old.record_judgment(d, bool(gold[d]))
    written = old.to_state()["batches"]
    assert ["judged_before" in b for b in written] == [False] * 3 + [True]
    assert Review.from_state(old.to_state()).estimate_hh() == old.estimate_hh()


@pytest.mark.parametrize("how", ["beyond the judgments", "decreasing", "off the order",
                                 "below found_before", "a float"])
def test_a_judged_before_off_the_judgment_order_is_refused(how: str) -> None:
    review, _ = _review(3)
    state = copy.deepcopy(review.to_state())
    batches = state["batches"]
    if how == "beyond the judgments":
        batches[-1]["judged_before"] = len(state["order"]) + 1
    elif how == "decreasing":
        batches[2]["judged_before"] = batches[1]["judged_before"] - 1
    elif how == "off the order":  # its own take-all documents judged before it
        batches[1]["judged_before"] = batches[2]["judged_before"]
    elif how == "below found_before":
        batches[2]["judged_before"] = batches[2]["found_before"] - 1
    else:
        batches[1]["judged_before"] = float(batches[1]["judged_before"])
    with pytest.raises(ScreeningError, match=r"judged_before"):
        Review.from_state(state)


# --------------------------------------------------------------------------- F6


def test_hh_window_must_be_at_least_one() -> None:
    with pytest.raises(ScreeningError, match=r"^hh_window must be an integer >= 1, got 0$"):
        Review(hh_window=0)
    assert Review(hh_window=1).hh_window == 1
    # a stored review of before, whose params hold 0 (which always averaged one batch)
    review, _ = _review(2, hh_window=1)
    state = review.to_state()
    state["params"]["hh_window"] = 0
    loaded = Review.from_state(state)
    assert loaded.hh_window == 1 and loaded.estimate_hh() == review.estimate_hh()
    state["params"]["hh_window"] = -1
    with pytest.raises(ScreeningError, match=r"params.*hh_window"):
        Review.from_state(state)


def _write(path: Path, n: int = 48) -> Path:
    ids, texts, gold, _ = _collection(n, 8)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for i, t in zip(ids, texts, strict=True):
            fh.write(json.dumps({"id": i, "title": t, "label": gold[i]}) + "\n")
    return path


@pytest.mark.parametrize(("extra", "says"), [
    (["--seed", "3"], "--seed is for --data FILE; with --all give --seeds N"),
    (["--topic", "rw0 rw1"], "--topic is for --data FILE; with --all each file's topic"),
])
def test_screen_all_refuses_seed_and_topic(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           extra: list[str], says: str) -> None:
    _write(tmp_path / "a.jsonl.gz")
    assert main(["screen", "--all", str(tmp_path), "--draws", "6", "--n-top", "4",
                 *extra]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and says in captured.err
    assert "dataset" not in captured.out  # refused before any run


def test_screen_data_refuses_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "a.jsonl.gz")
    out = tmp_path / "out"
    assert main(["screen", "--data", str(f), "--seeds", "3", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seeds is for --all FOLDER; with --data give --seed S" in err
    assert not (out / "metrics.json").exists()
    # --seed with --data, and --seeds with --all, are what they were
    assert main(["screen", "--data", str(f), "--seed", "2", "--draws", "6", "--n-top", "4",
                 "--topic", "rw0 rw1 rw2", "--out", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["seed"] == 2
    assert main(["screen", "--all", str(tmp_path), "--seeds", "2", "--draws", "6",
                 "--n-top", "4"]) == 0
    assert "rule bound@0.95, 2 seeds" in capsys.readouterr().out
