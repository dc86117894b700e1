"""Review mode in the stream without a broker: the plain-Python ReviewService and the hooks."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from unittest.mock import AsyncMock

import numpy as np
import orjson
import pytest

from sift.agents.review import (
    REVIEW_DOCUMENTS_TOPIC,
    ReviewResult,
    ReviewService,
    decode_review_record,
    gold_reviewer,
    review_record_obj,
)
from sift.agents.service import InputMessage, shard_of
from sift.filters.screening.errors import ScreeningError
from sift.topics.review import ReviewStatus, decode_request, decode_status, encode_review
from tests.agents.offline import agent, offline_worker

P = 2
NAME = "wilson"
PARAMS = {"draws": 10, "n_top": 5, "min_batches": 3, "n_negatives": 30, "random_state": 0}


def collection(n: int = 160, every: int = 8, seed: int = 0) -> tuple[list[dict[str, Any]],
                                                                   dict[str, bool]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(300)]
    docs, gold = [], {}
    for i in range(n):
        rel = i % every == 0
        text = " ".join(rng.choice(words, 12))
        if rel:
            text += " wilson disease copper chelation therapy trial"
        docs.append({"id": f"d{i}", "text": text, "metadata": {"review": NAME}})
        gold[f"d{i}"] = rel
    return docs, gold


def spec(**params: Any) -> bytes:
    return orjson.dumps({"profile": NAME, "mode": "review", "query": "wilson disease therapy",
                         "params": {**PARAMS, **params}})


def msg(value: bytes, topic: str, partition: int | None = None, offset: int = 0) -> InputMessage:
    part = shard_of(NAME, P) if partition is None else partition
    return InputMessage(value, topic, part, offset, NAME.encode())


def run_review(service: ReviewService, table: dict[str, bytes], docs: list[dict[str, Any]],
               gold: dict[str, bool], *, restart_every: int = 0) -> tuple[list[ReviewStatus], int]:
    """Create, load, answer requests from gold labels until the stop signal."""
    out = service.apply_specs([msg(spec(), "profiles")], table)
    assert not out.dead_letters and out.statuses and not out.requests  # no documents yet
    routed = service.route_documents([msg(orjson.dumps({"documents": docs}), "documents")])
    assert [d.review for d in routed.documents] == [NAME]
    from sift.topics.review import encode_review

    result = service.add_documents([msg(encode_review(d), REVIEW_DOCUMENTS_TOPIC)
                                    for d in routed.documents], table)
    statuses = list(result.statuses)
    requests = list(result.requests)
    answer = gold_reviewer(gold)
    rounds = 0
    while requests:
        rounds += 1
        judgments = [msg(orjson.dumps(answer(decode_request(orjson.dumps(r.to_obj())))),
                         "judgments") for r in requests]
        if restart_every and rounds % restart_every == 0:
            service = ReviewService(n_shards=P)  # a new worker: state from the table only
        result = service.apply_judgments(judgments, table)
        assert not result.dead_letters
        statuses.extend(result.statuses)
        requests = list(result.requests)
    return statuses, rounds


def test_review_service_reaches_the_stop_signal_from_gold_labels() -> None:
    docs, gold = collection()
    table: dict[str, bytes] = {}
    statuses, rounds = run_review(ReviewService(n_shards=P), table, docs, gold)
    last = statuses[-1]
    assert last.stop and last.pending == 0 and rounds >= PARAMS["min_batches"]
    assert last.documents == len(docs) and last.screened < len(docs)
    assert last.found == sum(1 for d in docs if gold[d["id"]] and d["id"] in
                             decode_review_record(table[NAME], NAME, table).review.order_)
    # the stop signal follows the rule: bound rule at the target recall
    assert last.recall_lower >= last.target_recall
    assert all(not s.stop for s in statuses[:-1])
    # the status round-trips through its codec
    assert decode_status(orjson.dumps(last.to_obj())) == last


def test_review_state_survives_a_new_worker_exactly() -> None:
    docs, gold = collection()
    t1: dict[str, bytes] = {}
    t2: dict[str, bytes] = {}
    s1, _ = run_review(ReviewService(n_shards=P), t1, docs, gold)
    s2, _ = run_review(ReviewService(n_shards=P), t2, docs, gold, restart_every=2)
    strip = [(s.screened, s.found, s.r_hat, s.stop) for s in s1]
    assert strip == [(s.screened, s.found, s.r_hat, s.stop) for s in s2]
    assert decode_review_record(t1[NAME], NAME, t1).review.order_ == \
        decode_review_record(t2[NAME], NAME, t2).review.order_


def test_documents_joining_a_running_review_are_requested_later() -> None:
    docs, gold = collection(n=200)
    first, later = docs[:120], docs[120:]
    service = ReviewService(n_shards=P)
    table: dict[str, bytes] = {}
    statuses, _ = run_review(service, table, first, gold)
    assert statuses[-1].stop
    from sift.topics.review import encode_review

    routed = service.route_documents([msg(orjson.dumps({"documents": later}), "documents")])
    out = service.add_documents([msg(encode_review(d), REVIEW_DOCUMENTS_TOPIC)
                                 for d in routed.documents], table)
    # the collection grew: the stop signal is withdrawn and sampling goes on over all 200
    assert out.statuses[-1].documents == 200 and not out.statuses[-1].stop
    assert out.requests
    # re-delivery of the same documents changes nothing
    again = service.add_documents([msg(encode_review(d), REVIEW_DOCUMENTS_TOPIC)
                                   for d in routed.documents], table)
    assert not again.requests and not again.statuses


def test_bad_review_input_is_dead_lettered_with_a_reason() -> None:
    service = ReviewService(n_shards=P, standing={"earn": b"x"})
    table: dict[str, bytes] = {}
    bad_specs = [
        orjson.dumps({"profile": NAME, "mode": "review"}),  # no query
        orjson.dumps({"profile": NAME, "mode": "review", "query": "q", "params": {"bogus": 1}}),
        orjson.dumps({"profile": NAME, "mode": "review", "query": "q",
                      "params": {"draws": -3}}),
        orjson.dumps({"profile": NAME, "mode": "review", "query": "q", "delete": True}),
    ]
    out = service.apply_specs([msg(b, "profiles") for b in bad_specs], table)
    assert [d.reason for d in out.dead_letters] == ["missing_query", "bad_params", "bad_params",
                                                     "unknown_review"]
    earn = orjson.dumps({"profile": "earn", "mode": "review", "query": "q"})
    out = service.apply_specs([msg(earn, "profiles", shard_of("earn", P))], table)
    assert [d.reason for d in out.dead_letters] == ["profile_exists"]
    # documents before the review exists; a bad metadata.review
    routed = service.route_documents([msg(orjson.dumps(
        {"documents": [{"id": "a", "text": "x", "metadata": {"review": NAME}},
                       {"id": "b", "text": "x", "metadata": {"review": 5}}]}), "documents")])
    assert [d.reason for d in routed.dead_letters] == ["bad_review"]
    from sift.topics.review import encode_review

    out = service.add_documents([msg(encode_review(routed.documents[0]), "rd")], table)
    assert [d.reason for d in out.dead_letters] == ["unknown_review"]
    out = service.add_documents([msg(b"{not json", "rd")], table)
    assert [d.reason for d in out.dead_letters] == ["bad_json"]
    # judgments: unknown document, bad value; a changed spec is refused
    assert not service.apply_specs([msg(spec(), "profiles")], table).dead_letters
    out = service.apply_judgments([
        msg(orjson.dumps({"doc_id": "zz", "profile": NAME, "relevant": True}), "judgments"),
        msg(orjson.dumps({"doc_id": "a", "profile": NAME, "relevant": "maybe"}), "judgments"),
    ], table)
    assert [d.reason for d in out.dead_letters] == ["unknown_document", "bad_relevant"]
    out = service.apply_specs([msg(spec(draws=12), "profiles")], table)
    assert [d.reason for d in out.dead_letters] == ["review_exists"]
    # a spec on the wrong partition is forwarded to the review's shard
    wrong = 1 - shard_of(NAME, P)
    out = service.apply_specs([msg(spec(), "profiles", wrong)], table)
    assert [f.partition for f in out.forwards] == [shard_of(NAME, P)]


def test_the_same_spec_again_republishes_pending_requests() -> None:
    docs, _ = collection()
    service = ReviewService(n_shards=P)
    table: dict[str, bytes] = {}
    service.apply_specs([msg(spec(), "profiles")], table)
    routed = service.route_documents([msg(orjson.dumps({"documents": docs}), "documents")])
    from sift.topics.review import encode_review

    first = service.add_documents([msg(encode_review(routed.documents[0]), "rd")], table)
    again = service.apply_specs([msg(spec(), "profiles")], table)
    assert [r.doc_id for r in again.requests] == [r.doc_id for r in first.requests]
    assert isinstance(again, ReviewResult) and again.statuses[-1].pending == len(first.requests)


# ----------------------------------------------------------------------- the Faust hooks


@pytest.fixture
def worker(tmp_path: Any) -> Any:
    return offline_worker(str(tmp_path), P)


def test_hooks_take_review_specs_and_judgments_and_leave_the_rest(worker: Any) -> None:
    part = shard_of(NAME, P)
    docs, gold = collection(n=40, every=4)
    hooks = worker.reviews

    async def run() -> None:
        async with agent(worker, "apply_specs").test_context() as a:
            await a.put(spec(), key=NAME.encode(), partition=part)
            await a.put(orjson.dumps({"profile": "wheat", "query": "wheat", "positives": ["t0"]}),
                        key=b"wheat", partition=shard_of("wheat", P))
            await asyncio.sleep(0.1)
        async with agent(worker, "route_documents").test_context() as a:  # reviews' hook too
            await a.put(orjson.dumps({"documents": docs}))
            await asyncio.sleep(0.1)
        sends = hooks.topics[REVIEW_DOCUMENTS_TOPIC].send.await_args_list
        assert [c.kwargs["partition"] for c in sends] == [part]
        async with agent(worker, "apply_review_documents").test_context() as a:
            for c in sends:
                await a.put(c.kwargs["value"], key=c.kwargs["key"], partition=part)
            await asyncio.sleep(0.2)
        requests = [decode_request(c.kwargs["value"])
                    for c in hooks.topics["requests"].send.await_args_list]
        assert requests and all(r.review == NAME for r in requests)
        # its batches count as the worker's work for the tail watch (idle otherwise)
        assert worker.busy.finished(hooks.topics[REVIEW_DOCUMENTS_TOPIC].get_topic_name()) >= 1
        async with agent(worker, "apply_judgments").test_context() as a:
            for r in requests:
                await a.put(orjson.dumps(gold_reviewer(gold)(r)), key=NAME.encode(),
                            partition=part)
            await a.put(orjson.dumps({"doc_id": "t1", "profile": "wheat", "relevant": True,
                                     "text": "wheat crop"}),
                        key=b"wheat", partition=shard_of("wheat", P))
            for _ in range(50):  # the judgments' take window is 0.25 s
                await asyncio.sleep(0.1)
                if worker.service.stats["judgments"]:
                    break

    asyncio.run(run())
    # the standing profile was created by the standing service, the review by the hook
    assert worker.service.stats["profiles_created"] == 1
    assert worker.service.stats["judgments"] == 1
    assert hooks.service.stats["reviews_created"] == 1
    assert hooks.service.stats["review_judgments"] > 0
    statuses = [decode_status(c.kwargs["value"])
                for c in hooks.topics["review-status"].send.await_args_list]
    assert statuses[-1].screened == hooks.service.stats["review_judgments"]
    assert not worker.topics["dead-letters"].send.await_args_list


def test_review_dead_letters_and_counters_reach_the_workers_stats_and_metrics(
        worker: Any) -> None:
    """Bad review input increments the worker's dead-letter counter by reason, as any other
    bad input does, and review mode's counters are in ``/sift/stats`` and ``/metrics``
    (they were kept apart, so a worker refusing review specs showed no dead letter)."""
    hooks = worker.reviews
    part = shard_of(NAME, P)
    bad = [orjson.dumps({"profile": NAME, "mode": "review", "query": "q",
                         "params": {"bogus": 1}}),
           orjson.dumps({"profile": NAME, "mode": "review", "delete": True})]

    async def run() -> None:
        rest = await hooks.take_specs([msg(b, "profiles", part, i) for i, b in enumerate(bad)])
        assert rest == []
        rest = await hooks.take_specs([msg(spec(), "profiles", part, 2)])
        assert rest == []

    asyncio.run(run())
    sent = worker.topics["dead-letters"].send.await_args_list
    assert [c.kwargs["key"] for c in sent] == [b"bad_params", b"unknown_review"]
    stats = worker.stats()["stats"]
    assert stats["dead_letters"] == 2
    assert stats["dead_letters.bad_params"] == 1 and stats["dead_letters.unknown_review"] == 1
    assert stats["reviews_created"] == 1
    text = worker.metrics_text()
    assert 'sift_worker_dead_letters_total{reason="unknown_review"} 1' in text
    assert "sift_worker_reviews_created_total 1" in text


def test_every_review_parameter_can_be_set_from_a_spec() -> None:
    """The wire contract's list of review params is the core Review's parameters (its
    ``topic`` is the spec's ``query``): a new core option must be reachable."""
    import inspect

    from sift.filters.screening.cal import Review
    from sift.topics.review import REVIEW_PARAMS

    core = set(inspect.signature(Review.__init__).parameters) - {"self", "topic"}
    assert set(REVIEW_PARAMS) == core


def judgment(doc_id: str, relevant: bool) -> InputMessage:
    return msg(orjson.dumps({"id": f"{NAME}/{doc_id}", "doc_id": doc_id, "profile": NAME,
                             "relevant": relevant}), "judgments")


def test_an_unrequested_judgment_drawn_again_keeps_the_ht_status() -> None:
    """A document judged relevant unrequested and drawn in the pending batch, in no
    completed batch (a warm-up batch draws nothing): the HT status is computed from the
    completed batches, the document counts as found."""
    docs, gold = collection()
    service = ReviewService(n_shards=P)
    table: dict[str, bytes] = {}
    service.apply_specs([msg(spec(estimator="ht", warmup_precision=0.9), "profiles")], table)
    routed = service.route_documents([msg(orjson.dumps({"documents": docs}), "documents")])
    from sift.topics.review import encode_review

    first = service.add_documents([msg(encode_review(d), REVIEW_DOCUMENTS_TOPIC)
                                   for d in routed.documents], table)
    asked = [r.doc_id for r in first.requests]
    assert decode_review_record(table[NAME], NAME, table).review.batches_[-1]["b"] == 0  # warm-up
    x = next(d for d in gold if gold[d] and d not in asked)
    out = service.apply_judgments([judgment(x, True)]
                                  + [judgment(d, i == 0) for i, d in enumerate(asked)], table)
    assert not out.dead_letters and out.requests and out.statuses
    review = decode_review_record(table[NAME], NAME, table).review
    assert review.pending_ and review.index_[x] in review.batches_[-1]["draws"]
    last = out.statuses[-1]
    assert last.found == 2 and last.r_hat == 2.0 and last.r_hat_var == 0.0
    # no sampling batch has completed (the warm-up draws nothing): no recall estimate
    # (null; 1.0 before the forty-fourth session's S2)
    assert last.recall_estimate is None and last.recall_lower == 0.0 and not last.stop
    assert service.stats["review_status_errors"] == 0


def test_a_status_that_cannot_be_computed_does_not_stop_the_review(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from sift.filters.screening import Review

    def broken(self: Review) -> Any:
        raise ValueError("estimator bug\nsecond line")

    docs, gold = collection()
    service = ReviewService(n_shards=P)
    table: dict[str, bytes] = {}
    monkeypatch.setattr(Review, "estimate", broken)
    with caplog.at_level("WARNING", logger="sift.worker"):
        out = service.apply_specs([msg(spec(min_batches=1), "profiles")], table)
        routed = service.route_documents([msg(orjson.dumps({"documents": docs}), "documents")])
        from sift.topics.review import encode_review

        out = service.add_documents([msg(encode_review(d), REVIEW_DOCUMENTS_TOPIC)
                                     for d in routed.documents], table)
        answer = gold_reviewer(gold)
        for _ in range(3):  # the rule would be asked (min_batches=1): it fails, screening goes on
            assert out.requests and not out.statuses and not out.dead_letters
            out = service.apply_judgments([msg(orjson.dumps(answer(r)), "judgments")
                                           for r in out.requests], table)
    review = decode_review_record(table[NAME], NAME, table).review
    assert review.screened == len(review.order_) > 0  # judgments applied and written
    assert service.stats["review_status_errors"] == 5  # one per review and call
    lines = [r.getMessage() for r in caplog.records if "status not computed" in r.getMessage()]
    assert lines and all("\n" not in m and "estimator bug second line" in m for m in lines)
    monkeypatch.undo()
    out = service.apply_specs([msg(spec(min_batches=1), "profiles")], table)  # statuses again
    assert out.statuses and not out.dead_letters


def test_documents_name_their_review_with_or_without_escapes() -> None:
    """A "review" key written with JSON escapes names a review like a plain one (review
    routing reads decoded documents, never the raw bytes)."""
    service = ReviewService(n_shards=P)
    plain = b'{"id": "a", "text": "x\\u0003", "metadata": {"other": 1}}'
    escaped = b'{"id": "b", "text": "x\\u0003", "metadata": {"r\\u0065view": "%s"}}' % (
        NAME.encode())
    all_escaped = (b'{"id": "c", "text": "y", "metadata": {"\\u0072\\u0065\\u0076\\u0069'
                   b'\\u0065\\u0077": "%s"}}' % NAME.encode())
    assert orjson.loads(escaped)["metadata"] == {"review": NAME}
    routed = service.route_documents([msg(b, "documents", offset=i)
                                      for i, b in enumerate((plain, escaped, all_escaped))])
    assert not routed.dead_letters
    assert [(d.review, d.ids) for d in routed.documents] == [(NAME, ("b", "c"))]


# -- a review whose record would outgrow its changelog (thirty-eighth session) ----------
def test_records_are_compressed_and_older_plain_ones_still_load() -> None:
    from sift.agents.review import ZLIB_PREFIX, review_record_obj

    service, table = ReviewService(n_shards=P), {}
    docs, gold = collection(60)
    run_review(service, table, docs, gold)
    raw = table[NAME]
    assert raw.startswith(ZLIB_PREFIX)
    obj = review_record_obj(raw)
    plain = orjson.dumps(obj)  # as records were written before
    assert len(raw) < len(plain) / 2
    assert (decode_review_record(plain, NAME, table).review.ids_
            == decode_review_record(raw, NAME, table).review.ids_)
    with pytest.raises(ScreeningError, match="truncated"):
        decode_review_record(raw[: len(raw) // 2], NAME)
    with pytest.raises(ScreeningError, match="not zlib"):
        decode_review_record(ZLIB_PREFIX + b"garbage", NAME)


def _documents(part: list[dict[str, Any]], offset: int) -> InputMessage:
    from sift.topics.review import ReviewDocuments, encode_review

    batch = ReviewDocuments(NAME, tuple(d["id"] for d in part), tuple(d["text"] for d in part))
    return msg(encode_review(batch), REVIEW_DOCUMENTS_TOPIC, offset=offset)


def test_documents_a_review_cannot_hold_are_dead_lettered_and_the_rest_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sift.agents.review as review_mod

    # each review's record holds the id of its life, random hex that compresses to a few
    # bytes more or less: the limit measured on one record must hold for the other's
    # (it failed about one run in three), so both have ids of the same make
    lives = iter(["18ef0b2f6b1eea63-3e2e905c2ace2029", "18ef0b2f6b1eea64-3e2e905c2ace2029"])
    monkeypatch.setattr(review_mod, "new_profile_epoch", lambda: next(lives))
    docs, gold = collection(400)
    parts = [docs[i:i + 50] for i in range(0, 400, 50)]
    # the record with the first three messages' 150 documents, the first batch asked for
    scratch, scratch_table = ReviewService(n_shards=P), {}
    scratch.apply_specs([msg(spec(), "profiles")], scratch_table)
    scratch.add_documents([_documents(p, i) for i, p in enumerate(parts[:3])], scratch_table)
    three = len(scratch_table[NAME])
    monkeypatch.setattr(review_mod, "MAX_RECORD_BYTES", int(three / review_mod.DOCUMENTS_SHARE) + 1)

    service, table = ReviewService(n_shards=P), {}
    assert not service.apply_specs([msg(spec(), "profiles")], table).dead_letters
    out = service.add_documents([_documents(p, i) for i, p in enumerate(parts[:6])], table)
    assert [d.reason for d in out.dead_letters] == ["state_too_large"] * 3
    assert [d.offset for d in out.dead_letters] == [3, 4, 5]
    assert f"review {NAME!r} cannot take 50 more document(s)" in out.dead_letters[0].message
    review = decode_review_record(table[NAME], NAME, table).review
    assert list(review.ids_) == [d["id"] for p in parts[:3] for d in p]
    # the same as if only those had come (but for the id of each review's life)
    same = [review_record_obj(t[NAME]) for t in (table, scratch_table)]
    assert same[0].pop("profile_epoch") != same[1].pop("profile_epoch") and same[0] == same[1]
    assert service.stats["review_documents"] == 150
    assert service.stats["review_state_too_large"] == 3
    assert out.requests and len(out.statuses) == 1  # the first batch, asked once
    # a full review refuses the next message, and a new worker sees the same review
    again = service.add_documents([_documents(parts[6], 6)], table)
    assert [d.reason for d in again.dead_letters] == ["state_too_large"] and not again.requests
    assert list(decode_review_record(table[NAME], NAME, table).review.ids_) == list(review.ids_)
    # the review goes on: its requests are answered as before
    answer = gold_reviewer(gold)
    result = ReviewService(n_shards=P).apply_judgments(
        [msg(orjson.dumps(answer(decode_request(orjson.dumps(r.to_obj())))), "judgments")
         for r in out.requests], table)
    assert not result.dead_letters and result.statuses


def _screening() -> tuple[ReviewService, dict[str, bytes], ReviewResult, Any]:
    """A review of 160 documents with its first batch asked for, and ``answers(requests)``:
    the gold-label judgments of requests, as judgments-topic messages."""
    docs, gold = collection(160)
    service, table = ReviewService(n_shards=P), {}
    service.apply_specs([msg(spec(), "profiles")], table)
    out = service.add_documents([_documents(docs, 0)], table)
    answer = gold_reviewer(gold)

    def answers(requests: list[Any]) -> list[InputMessage]:
        return [msg(orjson.dumps(answer(decode_request(orjson.dumps(r.to_obj())))), "judgments",
                    offset=i) for i, r in enumerate(requests)]

    return service, table, out, answers


def test_judgments_that_would_outgrow_the_record_are_dead_lettered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sift.agents.review as review_mod

    service, table, out, answers = _screening()

    first = service.apply_judgments(answers(out.requests), table)
    assert first.requests
    # no room left for another batch's ranks
    monkeypatch.setattr(review_mod, "MAX_RECORD_BYTES", len(table[NAME]) + 1)
    judged = len(decode_review_record(table[NAME], NAME, table).judged)
    batch = answers(first.requests)
    refused = service.apply_judgments(batch, table)
    # the judgments that leave the batch open fit; the one completing it (the next batch's
    # ranks would be recorded) and any after it are refused, the next batch not asked for
    assert refused.dead_letters and {d.reason for d in refused.dead_letters} == {"state_too_large"}
    kept = len(batch) - len(refused.dead_letters)
    assert [d.offset for d in refused.dead_letters] == list(range(kept, len(batch)))
    assert "cannot take the judgment of" in refused.dead_letters[0].message
    assert not refused.requests
    record = decode_review_record(table[NAME], NAME, table)
    assert len(record.judged) == judged + kept and record.review.pending_
    assert len(table[NAME]) <= review_mod.MAX_RECORD_BYTES
    assert service.stats["review_state_too_large"] == len(refused.dead_letters)
    assert service.entry(NAME, table).judged == record.judged  # what the service holds


def test_a_failed_batch_is_retried_from_the_table_not_from_what_it_left_in_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a bug on one judgment fails the batch after the judgments before it were applied to
    # the review held in memory; the retry, message by message, must apply them again
    # (before, it found their keys in memory, skipped them as duplicates, and they were
    # never written: lost)
    from sift.agents.review import guarded
    from sift.filters.screening import Review

    service, table, out, answers = _screening()
    batch = answers(out.requests)
    bad = orjson.loads(batch[2].value)["doc_id"]
    real = Review.record_judgment

    def flaky(self: Review, doc_id: str, relevant: bool) -> None:
        if doc_id == bad:
            raise RuntimeError("a bug")
        real(self, doc_id, relevant)

    monkeypatch.setattr(Review, "record_judgment", flaky)
    result = guarded(service.apply_judgments, batch, table)
    assert [d.reason for d in result.dead_letters] == ["internal_error"]
    assert result.dead_letters[0].offset == 2
    record = decode_review_record(table[NAME], NAME, table)
    assert len(record.judged) == len(batch) - 1  # every other judgment written
    assert service.stats["review_judgments"] == len(batch) - 1
    assert service.stats["review_judgments_duplicate"] == 0


# -- the texts in chunk records of their own (thirty-ninth session) ----------------------
def test_texts_live_in_chunks_and_judgments_rewrite_none(monkeypatch: pytest.MonkeyPatch) -> None:
    import sift.agents.review as review_mod
    from sift.agents.review import chunk_key, ranks_key, review_record_obj

    monkeypatch.setattr(review_mod, "CHUNK_TEXT_BYTES", 2_000)  # about 25 texts a chunk
    docs, gold = collection(160)
    service, table = ReviewService(n_shards=P), {}
    service.apply_specs([msg(spec(), "profiles")], table)
    out = service.add_documents([_documents(docs[:100], 0)], table)
    added = service.add_documents([_documents(docs[100:], 1)], table)
    assert not out.dead_letters and not added.dead_letters
    record = review_record_obj(table[NAME])
    assert record["format"] == 2 and "texts" not in record["state"]
    starts = record["texts"]["starts"]
    assert len(starts) >= 5 and record["texts"]["count"] == 160
    keys = [chunk_key(NAME, k) for k in range(len(starts))]
    n_batches = len(record["state"]["batches"])
    assert n_batches == 1 and "ranks" not in record["state"]["batches"][0]
    assert sorted(table) == sorted([NAME, *keys, ranks_key(NAME, 0)])
    chunks = [review_record_obj(table[k]) for k in keys]
    assert [c["start"] for c in chunks] == starts
    assert all(sum(len(t) for t in c["texts"]) <= 2_000 for c in chunks)
    assert [t for c in chunks for t in c["texts"]] == [d["text"] for d in docs]
    # the record holds no text: it is smaller than the texts alone
    assert len(table[NAME]) < sum(len(d["text"]) for d in docs) / 2
    # a judgment batch rewrites the record and writes the ranks of the batch it asks for
    written = service.stats["review_chunks_written"]
    before = dict(table)
    answer = gold_reviewer(gold)
    result = service.apply_judgments([msg(orjson.dumps(answer(r)), "judgments")
                                      for r in out.requests], table)
    assert not result.dead_letters and result.statuses and result.requests
    assert service.stats["review_chunks_written"] == written + 1
    assert sorted(table) == sorted([*before, ranks_key(NAME, 1)])
    assert all(table[k] is before[k] for k in before if k != NAME)
    # a new worker reads the texts back from the chunks: the same review
    fresh = ReviewService(n_shards=P).entry(NAME, table)
    assert fresh is not None and list(fresh.review.texts_) == [d["text"] for d in docs]
    assert fresh.starts == starts and fresh.stored == 160 and fresh.ranks_stored == 2
    assert [list(b["ranks"]) for b in fresh.review.batches_] == [
        list(b["ranks"]) for b in service.entry(NAME, table).review.batches_]
    # deleting the review deletes its chunks too
    gone = service.apply_specs([msg(orjson.dumps({"profile": NAME, "mode": "review",
                                                  "delete": True}), "profiles")], table)
    assert not gone.dead_letters and table == {}


def test_adding_documents_rewrites_only_the_last_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    import sift.agents.review as review_mod
    from sift.agents.review import review_record_obj

    monkeypatch.setattr(review_mod, "CHUNK_TEXT_BYTES", 2_000)
    docs, _ = collection(200)
    service, table = ReviewService(n_shards=P), {}
    service.apply_specs([msg(spec(), "profiles")], table)
    service.add_documents([_documents(docs[:90], 0)], table)
    n_chunks = len(review_record_obj(table[NAME])["texts"]["starts"])
    kept = {k: v for k, v in table.items() if k != NAME}
    written = service.stats["review_chunks_written"]
    service.add_documents([_documents(docs[90:92], 1)], table)  # two more: the last chunk
    assert service.stats["review_chunks_written"] == written + 1
    changed = [k for k in kept if table[k] is not kept[k]]
    assert changed == [f"{NAME}\x00{n_chunks - 1}"]


def again_batches(table: dict[str, bytes]) -> list[Any]:
    from sift.agents.review import review_record_obj

    return list(review_record_obj(table[NAME])["state"]["batches"])


def test_a_record_written_before_chunks_loads_and_is_moved_to_chunks() -> None:
    from sift.agents.review import ReviewEntry, review_record_obj

    service, table, out, answers = _screening()
    entry = service.entry(NAME, table)
    assert entry is not None
    # the record as the thirty-eighth session wrote it: format 1, texts in the state
    legacy = {"format": 1, "spec": entry.spec.to_obj(), "state": entry.review.to_state(),
              "judged": list(entry.judged)}
    old_table = {NAME: orjson.dumps(legacy)}
    old = decode_review_record(old_table[NAME], NAME, old_table)
    assert isinstance(old, ReviewEntry) and old.stored == 0
    assert list(old.review.texts_) == list(entry.review.texts_)
    worker = ReviewService(n_shards=P)
    result = worker.apply_judgments(answers(out.requests), old_table)
    assert not result.dead_letters and result.statuses
    assert review_record_obj(old_table[NAME])["format"] == 2
    # the record, one chunk of all its texts, the ranks of every batch
    assert sorted(old_table) == sorted([NAME, f"{NAME}\x000", *(
        f"{NAME}\x00r{t}" for t in range(len(again_batches(old_table))))])
    again = decode_review_record(old_table[NAME], NAME, old_table)
    assert list(again.review.texts_) == list(entry.review.texts_)


def test_a_review_name_with_a_nul_is_refused() -> None:
    service, table = ReviewService(n_shards=P), {}
    bad = orjson.dumps({"profile": "a\x00b", "mode": "review", "query": "q"})
    out = service.apply_specs([msg(bad, "profiles")], table)
    assert [d.reason for d in out.dead_letters] == ["bad_profile"]
    assert "NUL" in out.dead_letters[0].message and table == {}


def test_a_judgment_naming_a_chunk_key_is_not_a_reviews() -> None:
    from sift.agents.review import chunk_key

    service, table, _, _ = _screening()
    key = chunk_key(NAME, 0)
    assert key in table
    stray = msg(orjson.dumps({"doc_id": "d1", "profile": key, "relevant": True}), "judgments")
    assert not service.claims(stray, table)
    assert service.entry(key, table) is None and service.stats["review_bad_state"] == 0


def test_the_review_table_puts_a_chunk_beside_its_review(worker: Any) -> None:
    """The worker's review table places ``name\\x00k`` in the partition of ``name``: the
    record and its chunks share one changelog partition, in the order written (the
    standing profiles' table keeps placing a whole key)."""
    from sift.agents.review import chunk_key

    table = worker.reviews.table.table
    assert table.partitions == P
    names = [f"review {i}" for i in range(20)] + ["ü", "a"]
    assert len({shard_of(n, P) for n in names}) == P
    for name in names:
        for k in (0, 1, 17):
            assert table.partition_for_key(chunk_key(name, k).encode()) == shard_of(name, P)
        assert table.partition_for_key(name.encode()) == shard_of(name, P)
    key = chunk_key("review 0", 3)
    assert worker.table.table.partition_for_key(key.encode()) == shard_of(key, P)


# -- a review's work off the event loop (thirty-ninth session) ---------------------------
class _Recording(dict[str, bytes]):
    """A table that records which thread wrote or read each key."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[int, str]] = []
        self.reads: list[int] = []

    def __setitem__(self, key: str, value: bytes) -> None:
        self.writes.append((threading.get_ident(), key))
        super().__setitem__(key, value)

    def __contains__(self, key: object) -> bool:
        self.reads.append(threading.get_ident())
        return super().__contains__(key)


def _hooks(table: dict[str, bytes], standing: Any = None) -> Any:
    from sift.agents.review import ReviewHooks

    return ReviewHooks(ReviewService(n_shards=P, standing=standing), table, {}, AsyncMock())


def test_review_work_runs_off_the_event_loop_and_the_loop_writes_the_table() -> None:
    """The review's work (here held until a coroutine on the loop releases it: on the
    loop itself it would wait forever) runs in a thread; the table is written by the
    loop, after it, chunks before the record."""
    docs, gold = collection(160)
    table = _Recording()
    hooks = _hooks(table)
    service = hooks.service
    loop_thread = threading.get_ident()
    released = threading.Event()
    seen: dict[str, Any] = {}

    def held(messages: list[InputMessage], tbl: Any) -> ReviewResult:
        seen["thread"] = threading.get_ident()
        seen["released"] = released.wait(20)
        seen["writes_before"] = len(table.writes)
        return service.apply_judgments(messages, tbl)

    async def main() -> ReviewResult:
        await hooks.run(service.apply_specs, [msg(spec(), "profiles")], "specs")
        out = await hooks.run(service.add_documents, [_documents(docs, 0)], "documents")
        answer = gold_reviewer(gold)
        judgments = [msg(orjson.dumps(answer(r)), "judgments", offset=i)
                     for i, r in enumerate(out.requests)]
        n = len(table.writes)

        asyncio.get_running_loop().call_soon(released.set)  # runs only if the loop is free
        result = await hooks.run(held, judgments, "judgments")
        seen["new_writes"] = table.writes[n:]
        return result

    result = asyncio.run(main())
    assert seen["released"] and seen["thread"] != loop_thread
    assert not result.dead_letters and result.statuses and result.requests
    assert seen["writes_before"] == len(table.writes) - len(seen["new_writes"])  # none yet
    assert seen["new_writes"] and all(t == loop_thread for t, _ in table.writes)
    assert [k for _, k in seen["new_writes"]] == [f"{NAME}\x00r1", NAME]  # the ranks first
    review = decode_review_record(table[NAME], NAME, table).review
    assert review.screened > 0 and len(review.batches_) == 2


def test_the_standing_profiles_are_looked_up_on_the_loop() -> None:
    standing = _Recording()
    dict.__setitem__(standing, "wheat", b"x")
    hooks = _hooks({}, standing)
    loop_thread = threading.get_ident()
    taken = orjson.dumps({"profile": "wheat", "mode": "review", "query": "q"})
    out = asyncio.run(hooks.run(hooks.service.apply_specs,
                                [msg(taken, "profiles", partition=shard_of("wheat", P))], "specs"))
    assert [d.reason for d in out.dead_letters] == ["profile_exists"]
    assert standing.reads and set(standing.reads) == {loop_thread}
    fresh = asyncio.run(hooks.run(hooks.service.apply_specs, [msg(spec(), "profiles")], "specs"))
    assert not fresh.dead_letters and hooks.table[NAME]


def test_a_failed_call_off_the_loop_is_retried_message_by_message() -> None:
    """``guarded`` still retries a failed batch one message at a time in the thread (the
    bound method inside a partial is still recognised, so the review held in memory is
    dropped before the retry)."""
    hooks = _hooks({})
    calls: list[int] = []
    real = hooks.service.apply_specs

    def flaky(messages: list[InputMessage], table: Any, **kw: Any) -> ReviewResult:
        calls.append(len(messages))
        if len(messages) > 1:
            raise RuntimeError("a bug")
        return real(messages, table, **kw)

    flaky.__self__ = hooks.service  # type: ignore[attr-defined]
    other = orjson.dumps({"profile": "other", "mode": "review", "query": "q"})
    out = asyncio.run(hooks.run(flaky, [msg(spec(), "profiles"),
                                        msg(other, "profiles", partition=shard_of("other", P))],
                                "specs"))
    assert calls == [2, 1, 1] and not out.dead_letters
    assert NAME in hooks.table and "other" in hooks.table


def test_a_call_whose_task_was_cancelled_ends_before_the_next_starts() -> None:
    """A rebalance may cancel the task awaiting a review call; the thread goes on, and
    the next call on the same service waits for it (never two at once)."""
    hooks = _hooks({})
    gate, running = threading.Event(), threading.Event()
    order: list[str] = []

    def first(messages: list[InputMessage], table: Any) -> ReviewResult:
        running.set()
        gate.wait(20)
        order.append("first ended")
        return ReviewResult()

    def second(messages: list[InputMessage], table: Any) -> ReviewResult:
        order.append("second started")
        return ReviewResult()

    async def main() -> None:
        task = asyncio.create_task(hooks.run(first, [], "specs"))
        assert await asyncio.to_thread(running.wait, 20)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        later = asyncio.create_task(hooks.run(second, [], "specs"))
        await asyncio.sleep(0.1)  # room for the second call to start, if it could
        gate.set()
        await later

    asyncio.run(main())
    assert order == ["first ended", "second started"]


# -- the forty-fourth session's audit (S1, S2) ------------------------------------------
@pytest.mark.parametrize(("param", "value"), [("topic_weight", 1e308), ("C", 1e200),
                                              ("class_ratio", 1e300), ("svm_C", 1e160)])
def test_a_spec_whose_params_the_review_cannot_use_is_refused_at_creation(
        param: str, value: float) -> None:
    """Before, the review was created and its first round of judgments raised (or, with a
    C of 1e200, never returned), so every judgment of it was dead-lettered."""
    service, table = ReviewService(n_shards=P), {}
    out = service.apply_specs([msg(spec(**{param: value}), "profiles")], table)
    assert [d.reason for d in out.dead_letters] == ["bad_params"]
    assert param in out.dead_letters[0].message and repr(value) in out.dead_letters[0].message
    assert NAME not in table and not out.statuses


def test_a_batch_that_cannot_be_computed_keeps_the_judgments_and_the_worker(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A failure in ``next_batch`` is guarded as the status is: the judgments are applied and
    written, none is dead-lettered, one line is logged and ``review_batch_errors`` counted;
    the spec sent again asks for the batch once the cause is gone."""
    from sift.agents.review import guarded
    from sift.filters.screening import Review

    service, table, out, answers = _screening()
    first = out.requests
    real = Review.next_batch

    def broken(self: Review) -> list[str]:
        if self.pending_:
            return real(self)
        raise ValueError("model bug\nsecond line")

    monkeypatch.setattr(Review, "next_batch", broken)
    with caplog.at_level("WARNING", logger="sift.worker"):
        result = guarded(service.apply_judgments, answers(first), table)
    assert not result.dead_letters and not result.requests
    assert result.statuses and not result.statuses[-1].stop
    assert service.stats["review_batch_errors"] == 1
    record = decode_review_record(table[NAME], NAME, table)
    assert len(record.judged) == len(first) and not record.review.pending_
    lines = [r.getMessage() for r in caplog.records if "next batch not computed" in r.getMessage()]
    assert len(lines) == 1 and "model bug second line" in lines[0] and "\n" not in lines[0]
    monkeypatch.undo()
    again = service.apply_specs([msg(spec(), "profiles")], table)
    assert again.requests and not again.dead_letters


def test_the_status_before_any_sampling_batch_has_no_recall_estimate() -> None:
    """No completed sampling batch in the current epoch: ``recall_estimate`` null and
    ``recall_lower`` 0.0 (before: 1.0 and 1.0, with nothing screened)."""
    service, table, out, answers = _screening()
    assert out.statuses[-1].screened == 0
    for status in (out.statuses[-1], service.apply_judgments(answers(out.requests),
                                                             table).statuses[-1]):
        obj = orjson.loads(encode_review(status))
        assert obj["recall_estimate"] is None and obj["recall_lower"] == 0.0
        assert decode_status(encode_review(status)) == status
