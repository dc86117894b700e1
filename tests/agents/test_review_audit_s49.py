"""Review mode audit, forty-ninth session: review records and chunks that are bad in ways
not tested before, odd but legal sequences, and what the status says in each. Each test
is a finding (R1..R6 of the audit, docs/reliability.md item 77) and failed before its fix.

The promise: a bad review record costs its own review (one line, ``review_bad_state``,
its documents and judgments dead-lettered ``unknown_review``), never every batch that
names it; only the worker that owns a review's partition writes it; the status never
says more than the state behind it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from unittest.mock import AsyncMock

import numpy as np
import orjson
import pytest

import sift.agents.review as review_mod
from sift.agents.review import (
    ReviewHooks,
    ReviewService,
    decode_review_record,
    gold_reviewer,
    guarded,
    review_record_obj,
)
from sift.agents.service import UNUSABLE, InputMessage, Service, shard_of
from sift.filters.screening import Review
from sift.filters.screening.errors import ScreeningError
from sift.topics.review import ReviewDocuments, ReviewStatus, encode_review
from tests.agents.offline import training_set
from tests.agents.test_review import NAME, PARAMS, P, _documents, _screening, collection, msg, spec

QUERY = "wilson disease therapy"


def review_spec(name: str, **params: Any) -> bytes:
    return orjson.dumps({"profile": name, "mode": "review", "query": QUERY,
                         "params": {**PARAMS, **params}})


def at(value: bytes, topic: str, name: str, offset: int = 0, partition: int | None = None
       ) -> InputMessage:
    """A message of review ``name`` on its own partition (or on ``partition``)."""
    part = shard_of(name, P) if partition is None else partition
    return InputMessage(value, topic, part, offset, name.encode())


def judgment(name: str, doc_id: str, relevant: bool, offset: int = 0,
             partition: int | None = None, key: str | None = None) -> InputMessage:
    return at(orjson.dumps({"id": key or f"{name}/{doc_id}", "doc_id": doc_id, "profile": name,
                            "relevant": relevant}), "judgments", name, offset, partition)


def compressed(obj: Any) -> bytes:
    return review_mod._compress(obj)


# ------------------------------------------------------------------------------ R1
def two_reviews() -> tuple[dict[str, bytes], dict[str, bool]]:
    """Reviews ``a`` and ``b`` (one partition each way), the same 80 documents each, their
    first batches asked for."""
    docs, gold = collection(80)
    svc, table = ReviewService(n_shards=P), {}
    for name in ("a", "b"):
        assert not svc.apply_specs([at(review_spec(name), "profiles", name)], table).dead_letters
        batch = ReviewDocuments(name, tuple(d["id"] for d in docs), tuple(d["text"] for d in docs))
        assert svc.add_documents([at(encode_review(batch), "review-documents", name)],
                                 table).requests
    return table, gold


def breaking(monkeypatch: pytest.MonkeyPatch, victim: str, exc: BaseException) -> None:
    real = review_mod.decode_review_record

    def decode(data: bytes, name: str | None = None, chunks: Any = None) -> Any:
        if name == victim:
            raise exc
        return real(data, name, chunks)

    monkeypatch.setattr(review_mod, "decode_review_record", decode)


def test_r1_an_unforeseen_error_decoding_one_review_costs_that_review_only(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Before: the whole batch failed and was retried message by message (each decoding
    its review again), ``a``'s judgments went out ``internal_error`` with a traceback each,
    nothing was counted or remembered, so every later batch did the same."""
    table, gold = two_reviews()
    breaking(monkeypatch, "a", ZeroDivisionError("nobody anticipated this"))
    fresh = ReviewService(n_shards=P)
    batch = [judgment(n, f"d{i}", gold[f"d{i}"], k) for k, (n, i) in
             enumerate([("a", 0), ("b", 0), ("a", 1), ("b", 1)])]
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        out = guarded(fresh.apply_judgments, batch, table)
        again = guarded(fresh.apply_judgments, [judgment("a", "d2", False, 9)], table)
    assert [(d.reason, d.offset) for d in out.dead_letters + again.dead_letters] == [
        ("unknown_review", 0), ("unknown_review", 2), ("unknown_review", 9)]
    assert out.dead_letters[0].message == f"judgment for review 'a', {UNUSABLE}"
    assert fresh.stats["review_bad_state"] == 1 and fresh.stats["review_judgments"] == 2
    assert not any("retrying" in r.getMessage() for r in caplog.records)
    lines = [r.getMessage() for r in caplog.records if "'a'" in r.getMessage()]
    assert len(lines) == 1 and "unusable state record" in lines[0]
    assert "ZeroDivisionError: nobody anticipated this" in lines[0] and "\n" not in lines[0]
    assert not any(r.exc_info for r in caplog.records)
    breaking(monkeypatch, "b", MemoryError())  # the worker's, not the value's: not skipped
    with pytest.raises(MemoryError):
        ReviewService(n_shards=P).entry("b", table)


def test_r1_a_review_whose_record_raised_can_be_deleted_and_rebuilt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The log line's remedy (send the spec again) and a deletion were ``internal_error``
    too: the review could never be taken out of the worker."""
    table, _ = two_reviews()
    breaking(monkeypatch, "a", IndexError("\x00 a value no check foresaw"))
    svc = ReviewService(n_shards=P)
    rebuilt = guarded(svc.apply_specs, [at(review_spec("a"), "profiles", "a")], table)
    assert not rebuilt.dead_letters and rebuilt.statuses and svc.stats["reviews_created"] == 1
    monkeypatch.undo()
    assert decode_review_record(table["a"], "a", table).review.n_documents == 0  # a new one
    breaking(monkeypatch, "a", IndexError("still broken"))
    svc = ReviewService(n_shards=P)
    gone = guarded(svc.apply_specs, [at(orjson.dumps({"profile": "a", "mode": "review",
                                                      "delete": True}), "profiles", "a")],
                   table)
    assert not gone.dead_letters and svc.stats["reviews_deleted"] == 1
    assert sorted(table) == sorted(k for k in table if k.startswith("b"))
    assert "a" not in table and "b" in table


# ------------------------------------------------------------------------------ R2
def test_r2_a_judgment_on_another_partition_goes_to_the_reviews_shard() -> None:
    """Worker A wrote ``wilson`` and lost its partition to B (Faust's memory store keeps
    the keys a worker wrote itself); a judgment of ``wilson`` keyed otherwise reached A's
    partition. Before: A claimed it and wrote its stale copy of the review, whose record
    goes to the changelog partition B owns (B's later judgments lost at the next
    recovery). Now A leaves it to the standing agent, which forwards it to the shard."""
    docs, gold = collection(120)
    answer = gold_reviewer(gold)
    p = shard_of(NAME, P)
    a, a_table = ReviewService(n_shards=P), {}
    a.apply_specs([msg(spec(), "profiles")], a_table)
    out = a.add_documents([_documents(docs, 0)], a_table)
    out = a.apply_judgments([msg(orjson.dumps(answer(r)), "judgments", offset=i)
                             for i, r in enumerate(out.requests)], a_table)
    b, b_table = ReviewService(n_shards=P), dict(a_table)  # B recovers p from A's writes
    out = b.apply_judgments([msg(orjson.dumps(answer(r)), "judgments", offset=100 + i)
                             for i, r in enumerate(out.requests)], b_table)
    assert not out.dead_letters and out.statuses[-1].screened == 10
    stale = dict(a_table)
    late = judgment(NAME, out.requests[0].doc_id, True, 7, partition=1 - p, key="late")
    assert not a.claims(late, a_table)
    hooks = ReviewHooks(a, a_table, {}, AsyncMock())
    rest = asyncio.run(hooks.take_judgments([late]))
    assert rest == [late] and a_table == stale  # nothing written by A
    forwarded = Service(training_set(), n_shards=P).apply_judgments([late], {})
    assert [(f.topic, f.partition, f.key) for f in forwarded.forwards] == [
        ("judgments", p, NAME.encode())]
    assert b.claims(InputMessage(late.value, "judgments", p, 8), b_table)  # the owner's


# ------------------------------------------------------------------------------ R3
@pytest.fixture(scope="module")
def joined() -> dict[str, bytes]:
    """A review that stopped at 120 documents, then 80 joined (a batch pending)."""
    from tests.agents.test_review import run_review

    docs, gold = collection(200)
    svc, table = ReviewService(n_shards=P), {}
    statuses, _ = run_review(svc, table, docs[:120], gold)
    assert statuses[-1].stop
    out = svc.add_documents([_documents(docs[120:], 5)], table)
    assert out.requests and out.statuses[-1].recall_estimate is None
    return table


@pytest.mark.parametrize("shift", [-100, -1, 1])
def test_r3_an_epoch_start_that_disagrees_with_the_collection_is_refused(
        joined: dict[str, bytes], shift: int) -> None:
    """``epoch_start`` is the number of batches made before the last documents joined
    (those ranked fewer documents than the review holds). Before, any value in
    ``[0, batches]`` loaded: one too low counted a batch of the old collection toward the
    stopping rule and published a recall estimate the new documents had no part in."""
    obj = review_record_obj(joined[NAME])
    state = obj["state"]
    epoch = state["epoch_start"]
    assert 0 < epoch < len(state["batches"])
    state["epoch_start"] = max(0, epoch + shift)
    table = {**joined, NAME: compressed(obj)}
    with pytest.raises(ScreeningError, match="epoch_start"):
        decode_review_record(table[NAME], NAME, table)
    svc = ReviewService(n_shards=P)
    assert svc.entry(NAME, table) is None and svc.stats["review_bad_state"] == 1
    assert decode_review_record(joined[NAME], NAME, joined).review.epoch_start_ == epoch


def test_r3_a_batch_that_ranked_all_documents_before_they_joined_is_refused() -> None:
    """The core's own check: batches before ``epoch_start`` ranked fewer documents than
    the review holds, the ones after it all of them."""
    docs, gold = collection(60)
    review = Review(QUERY, draws=6, n_top=3, n_negatives=10, warmup_precision=0.0,
                    random_state=0)
    review.add_documents([d["id"] for d in docs[:40]], [d["text"] for d in docs[:40]])
    for _ in range(2):
        for d in review.next_batch():
            review.record_judgment(d, gold[d])
    review.add_documents([d["id"] for d in docs[40:]], [d["text"] for d in docs[40:]])
    review.next_batch()
    state = review.to_state()
    assert state["epoch_start"] == 2 and Review.from_state(state).epoch_start_ == 2
    with pytest.raises(ScreeningError, match="epoch_start"):
        Review.from_state({**state, "epoch_start": 3})  # the last batch ranked all 60


# ------------------------------------------------------------------------------ R4
def status_ok(s: ReviewStatus) -> None:
    """What every status must say, whatever came before."""
    obj = orjson.loads(encode_review(s))
    assert all(v is None or not isinstance(v, float) or np.isfinite(v) for v in obj.values())
    assert s.screened <= s.documents and s.found <= s.screened and s.pending <= s.documents
    assert s.r_hat >= s.found and s.r_hat_var >= 0
    if s.recall_estimate is None:
        assert s.recall_lower == 0.0 and s.r_hat == s.found and s.r_hat_var == 0.0
    if s.complete:  # R is known: what was found
        assert s.stop and s.recall_estimate == s.recall_lower == 1.0
        assert s.r_hat == s.found and s.r_hat_var == 0.0
    if s.stop and not s.complete:
        assert s.recall_estimate is not None and s.pending == 0


def test_r4_a_complete_reviews_status_says_r_is_what_was_found() -> None:
    """Every document judged: recall 1.0 exactly, and before, beside it, the HH estimate's
    R-hat 23.6 and variance 15.1 for 20 relevant found (``sift review status``: "found 20,
    R-hat 23.6, recall 1.000")."""
    docs, gold = collection(100, every=5, seed=10)
    for i, d in enumerate(docs):
        if gold[d["id"]] and i % 10 == 5:  # relevant without the topic's words
            d["text"] = d["text"].split(" wilson")[0]
    answer = gold_reviewer(gold)
    svc, table = ReviewService(n_shards=P), {}
    out = svc.apply_specs([msg(spec(min_batches=1000, random_state=10, warmup_precision=0.0,
                                    hh_window=50), "profiles")], table)
    statuses = list(out.statuses)
    out = svc.add_documents([_documents(docs, 0)], table)
    while out.requests:
        statuses.extend(out.statuses)
        out = svc.apply_judgments([msg(orjson.dumps(answer(r)), "judgments", offset=i)
                                   for i, r in enumerate(out.requests)], table)
    statuses.extend(out.statuses)
    last = statuses[-1]
    assert last.complete and last.found == sum(gold.values()) == 20
    assert svc.entry(NAME, table).review.estimate().r_hat > 20  # the estimator's, kept apart
    # the same judgment again publishes nothing; a correction (another id) is taken
    d = next(k for k, v in gold.items() if v)
    assert not svc.apply_judgments([judgment(NAME, d, True)], table).statuses
    corrected = svc.apply_judgments([judgment(NAME, d, False, key="fix")], table).statuses
    assert corrected[-1].found == 19
    for s in [*statuses, *corrected]:
        status_ok(s)


# ------------------------------------------------------------------------------ R5
def test_r5_the_batch_a_spec_sent_again_asks_for_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a batch that could not be computed, the spec sent again asks for it (the
    documented remedy); before, the batch lived only in the service's memory: the table
    said nothing pending, and a new worker took its answers as unrequested judgments and
    drew another batch."""
    service, table, out, answers = _screening()
    real = Review.next_batch

    def broken(self: Review) -> list[str]:
        if self.pending_:
            return real(self)
        raise ValueError("model bug")

    monkeypatch.setattr(Review, "next_batch", broken)
    assert not guarded(service.apply_judgments, answers(out.requests), table).requests
    monkeypatch.undo()
    again = service.apply_specs([msg(spec(), "profiles")], table)
    asked = [r.doc_id for r in again.requests]
    assert asked and again.statuses[-1].pending == len(asked)
    stored = decode_review_record(table[NAME], NAME, table).review
    assert stored.pending_ == asked and len(stored.batches_) == again.statuses[-1].batches == 2
    fresh = ReviewService(n_shards=P)  # a restart or a rebalance
    result = fresh.apply_judgments(answers(again.requests), table)
    assert not result.dead_letters and result.statuses[-1].batches == 3
    assert result.statuses[-1].screened == 10


# ------------------------------------------------------------------------------ R6
def test_r6_a_record_whose_state_contradicts_its_spec_is_refused() -> None:
    """Every record is written from one spec and the review built from it (the query its
    topic, each param the spec sets as given); before, a state run with other params than
    its spec's loaded, and the same spec sent again was taken as this review's. An older
    record's ``hh_window`` 0, which the core reads as 1, still agrees with its spec."""
    service, table, _, _ = _screening()
    for where, value in (("min_batches", 1), ("draws", 12), ("topic", "another topic")):
        obj = review_record_obj(table[NAME])
        obj["state"]["params"][where] = value
        bad = {**table, NAME: compressed(obj)}
        with pytest.raises(ScreeningError, match="not its spec's"):
            decode_review_record(bad[NAME], NAME, bad)
        assert ReviewService(n_shards=P).entry(NAME, bad) is None
    entry = service.entry(NAME, table)
    assert entry is not None
    state = entry.review.to_state()
    legacy = {"format": 1, "spec": {**entry.spec.to_obj(),
                                    "params": {**entry.spec.params, "hh_window": 0}},
              "state": {**state, "params": {**state["params"], "hh_window": 0}},
              "judged": list(entry.judged)}
    loaded = decode_review_record(orjson.dumps(legacy), NAME)
    assert loaded.review.hh_window == 1 and loaded.spec.params["hh_window"] == 0
