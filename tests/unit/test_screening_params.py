"""Review mode: the warm-up window, the learners and the pseudo document's weight."""

from __future__ import annotations

import numpy as np
import pytest

from sift.filters.screening import Review, ScreeningError


def _corpus(n: int = 120) -> tuple[list[str], list[str], dict[str, int]]:
    ids, texts, gold = [], [], {}
    for i in range(n):
        rel = i % 8 == 0
        ids.append(f"d{i}")
        texts.append(f"copper chelation wilson disease trial {i % 3}" if rel
                     else f"weather report number {i} rain wind {i % 5}")
        gold[f"d{i}"] = int(rel)
    return ids, texts, gold


def _judge(review: Review, gold: dict[str, int]) -> list[str]:
    batch = review.next_batch()
    for doc_id in batch:
        review.record_judgment(doc_id, bool(gold[doc_id]))
    return batch


def test_warmup_window_counts_only_records_after_the_first_relevant() -> None:
    ids, texts, gold = _corpus()
    review = Review("wilson disease copper", draws=6, n_top=5, growth=0.0,
                    warmup_precision=0.05, warmup_window=20, random_state=0)
    review.add_documents(ids, texts)
    while not any(b["b"] > 0 for b in review.batches_):
        _judge(review, gold)
    first = next(i for i, d in enumerate(review.order_) if gold[d])
    start = next(t for t, b in enumerate(review.batches_) if b["b"] > 0)
    judged_before = sum(len(b["certain"]) for b in review.batches_[:start])
    # sampling began only once 20 records had been judged after the first relevant one,
    # and the last 20 of them held fewer than 5% relevant (none)
    assert judged_before - first - 1 >= 20
    assert sum(gold[d] for d in review.order_[judged_before - 20 : judged_before]) == 0


def test_warmup_window_zero_is_the_last_batch_rule() -> None:
    ids, texts, gold = _corpus()
    runs = []
    for params in ({}, {"warmup_window": 0}):
        review = Review("wilson disease copper", draws=6, n_top=5, random_state=3, **params)
        review.add_documents(ids, texts)
        runs.append([_judge(review, gold) for _ in range(6)])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("learner", ["lr", "svm", "lr+svm"])
def test_learners_rank_the_relevant_records_first(learner: str) -> None:
    ids, texts, gold = _corpus()
    review = Review("wilson disease copper", draws=4, n_top=5, learner=learner,  # type: ignore[arg-type]
                    topic_weight=2.0, random_state=0)
    review.add_documents(ids, texts)
    _judge(review, gold)
    batch = _judge(review, gold)  # a trained model ranks this batch
    assert gold[batch[0]] == 1
    state = review.to_state()
    assert Review.from_state(state).to_state() == state


def test_new_params_are_validated() -> None:
    for kwargs, pattern in (({"warmup_window": -1}, "warmup_window"),
                            ({"learner": "tree"}, "learner"),
                            ({"topic_weight": 0.0}, "topic_weight"),
                            ({"topic_weight": float("inf")}, "topic_weight"),
                            ({"svm_C": 0.0}, "svm_C")):
        with pytest.raises(ScreeningError, match=pattern):
            Review(**kwargs)  # type: ignore[arg-type]


def test_topic_weight_changes_the_model_scores() -> None:
    ids, texts, gold = _corpus()
    scores = []
    for w in (1.0, 5.0):
        review = Review("wilson disease copper", draws=4, n_top=5, topic_weight=w,
                        random_state=0)
        review.add_documents(ids, texts)
        _judge(review, gold)
        _judge(review, gold)
        assert review._scores is not None
        scores.append(review._scores.copy())
    assert not np.allclose(scores[0], scores[1])
