"""Internal-data audit, forty-ninth session: the worker on bad table values (profile
records, journals, review records) and bad shard-topic payloads, read at start-up (a
fresh service on a recovered table) and arriving live (a value changing under a profile
held). Each test is a finding of the audit (F1..F11); each failed before its fix.

The promise (docs/reliability.md): a bad value is logged once on one line naming its key,
counted, and costs its own profile only (skipped, or its record used without the bad
journal); a bad payload is dead-lettered ``bad_vector_batch``; the worker goes on with
every other profile, never scoring with a model it no longer has, never failing every
batch over one value.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from typing import Any

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

import sift.agents.service as service_module
from sift.agents import journal as jr
from sift.agents.metrics import WorkerMetrics
from sift.agents.review import ReviewService
from sift.agents.service import (
    InputMessage,
    Service,
    ServiceError,
    TrainingSet,
    decode_profile_record,
    encode_profile_record,
    encode_vector_batch,
    read_vector_batch,
)
from sift.filters.state import encode_csr
from sift.topics.errors import RecordError
from tests.agents.offline import TRAIN, agent, offline_worker, training_set

PROFILES = {"wheat": "wheat", "oil": "crude oil", "gold": "gold mine"}


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return training_set()


def spec(name: str, query: str, offset: int = 0) -> InputMessage:
    return InputMessage(orjson.dumps({"profile": name, "query": query}), "profiles", 0, offset)


def judgment(i: int, name: str, doc: int, relevant: bool) -> InputMessage:
    return InputMessage(orjson.dumps({"id": f"j{i}", "doc_id": f"t{doc}", "profile": name,
                                      "relevant": relevant, "text": TRAIN[doc]}),
                        "judgments", 0, 100 + i)


def world(training: TrainingSet) -> tuple[Service, dict[str, bytes], dict[str, bytes]]:
    """One shard of three profiles, ``wheat`` with two journal batches after its record."""
    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal=journal)
    out = svc.apply_specs([spec(n, q, i) for i, (n, q) in enumerate(PROFILES.items())], table)
    assert not out.dead_letters
    for batch in ([judgment(0, "wheat", 0, True), judgment(1, "wheat", 2, False)],
                  [judgment(2, "wheat", 1, True)]):
        assert not svc.apply_judgments(batch, table).dead_letters
    assert len(orjson.loads(journal["wheat"])["batches"]) == 2
    return svc, table, journal


def payload(training: TrainingSet) -> bytes:
    """The training texts as a shard-topic copy of term counts (what routers send)."""
    vec = training.vectorizer
    X, counts = vec.transform_counts(TRAIN)
    return encode_vector_batch([f"d{i}" for i in range(len(TRAIN))], X, counts=counts,
                               vectorizer=vec.fingerprint())


def with_batch(journal: bytes, **batch: Any) -> bytes:
    """``journal`` with one more batch, numbered after its last."""
    obj = orjson.loads(journal)
    obj["batches"].append({"seq": obj["batches"][-1]["seq"] + 1, "coalesce": True, **batch})
    return orjson.dumps(obj)


def record_alone(training: TrainingSet, table: dict[str, bytes], name: str) -> bytes:
    entry = Service(training, n_shards=1).entry(name, dict(table))
    assert entry is not None
    return orjson.dumps(entry.profile.to_state())


# ------------------------------------------------------------------------------ F1
def test_f1_a_journal_batch_without_rows_costs_its_profile_not_the_shards_scoring(
        training: TrainingSet, caplog: pytest.LogCaptureFixture) -> None:
    """A batch of no rows was read as a correction (step 0 is not a run) and raised
    IndexError out of the replay, the sync and every scoring call of the worker."""
    _, table, journal = world(training)
    empty = encode_csr(sp.csr_matrix((0, training.vectorizer.n_features)))
    bad = {**journal, "wheat": with_batch(journal["wheat"], X=empty, relevant=[], keys=[])}
    fresh = Service(training, n_shards=1, journal=bad)
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        decisions = fresh.score(0, payload(training), dict(table))
    assert fresh.counters()["profiles"] == sorted(PROFILES)
    assert fresh.stats["bad_journal"] == 1 and fresh.stats["scored"] == 3 * len(TRAIN)
    assert {d.profile for d in decisions} <= set(PROFILES)
    entry = fresh.entry("wheat", dict(table))
    assert entry is not None
    assert orjson.dumps(entry.profile.to_state()) == record_alone(training, table, "wheat")
    line = next(r.getMessage() for r in caplog.records if "wheat" in r.getMessage())
    assert "unusable judgment journal" in line and "no rows" in line and "\n" not in line
    with pytest.raises(jr.JournalError, match="no rows"):
        jr.decode_journal(bad["wheat"], "wheat", training.vectorizer.n_features)


@pytest.mark.parametrize("where", ["record", "journal"])
def test_f1_an_unforeseen_error_decoding_one_profile_costs_that_profile_only(
        training: TrainingSet, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Whatever a value makes the decoders raise, the other profiles are still scored: the
    record's profile is skipped (``bad_state``), a journal's record used alone."""
    _, table, journal = world(training)
    real = service_module.decode_profile_record if where == "record" else \
        service_module.decode_journal

    def breaks_on_wheat(data: bytes, *args: Any, **kwargs: Any) -> Any:
        if b'"wheat"' in data:
            raise ZeroDivisionError("nobody anticipated this")
        return real(data, *args, **kwargs)

    monkeypatch.setattr(service_module, f"decode_{'profile_record' if where == 'record' else 'journal'}",
                        breaks_on_wheat)
    fresh = Service(training, n_shards=1, journal=dict(journal))
    fresh.score(0, payload(training), dict(table))  # raised ZeroDivisionError
    held = sorted(PROFILES) if where == "journal" else ["gold", "oil"]
    assert fresh.counters()["profiles"] == held
    assert fresh.stats["bad_state" if where == "record" else "bad_journal"] == 1
    fresh.score(0, payload(training), dict(table))  # counted once per value
    assert fresh.stats["bad_state"] + fresh.stats["bad_journal"] == 1


def test_f1_through_the_shard_agent_a_bad_journal_leaves_the_documents_scored(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness: a worker of one partition whose ``wheat`` journal holds a batch of no
    rows scores a shard-topic copy against its profiles; before the fix the copy was
    dead-lettered ``internal_error`` (and so was every other one)."""
    import sift.agents.app as app_module

    w = offline_worker(str(tmp_path), partitions=1)
    svc = w.service
    out = svc.apply_specs([spec(n, q, i) for i, (n, q) in enumerate(PROFILES.items())], w.table)
    assert not out.dead_letters
    assert not svc.apply_judgments([judgment(0, "wheat", 0, True)], w.table).dead_letters
    empty = encode_csr(sp.csr_matrix((0, svc.vectorizer.n_features)))
    svc.journal["wheat"] = with_batch(svc.journal["wheat"], X=empty, relevant=[], keys=[])
    monkeypatch.setattr(app_module, "start_offsets", lambda settings, tps: dict.fromkeys(tps, 0))
    w.app.topics.acks_enabled_for = lambda topic: True
    # words no profile knows: scored, nothing delivered (no producer here for decisions)
    X, counts = svc.vectorizer.transform_counts(["zyzzyva quokka"])
    copy = encode_vector_batch(["q0"], X, [0], counts=counts,
                               vectorizer=svc.vectorizer.fingerprint())

    async def run() -> None:
        async with agent(w, "score_documents").test_context() as a:
            a.sent_offset = 0
            await a.put(copy, partition=0)
            await asyncio.sleep(0.3)

    asyncio.run(run())
    dead = [orjson.loads(c.kwargs["value"])["reason"]
            for c in w.topics["dead-letters"].send.await_args_list]
    assert dead == []
    assert svc.stats["scored"] == 3 and svc.stats["bad_journal"] == 1


# ------------------------------------------------------------------------------ F2
def test_f2_a_journal_failing_part_way_leaves_the_record_alone(
        training: TrainingSet, caplog: pytest.LogCaptureFixture) -> None:
    """A correction of a row the profile never learned fails after the runs before it were
    relearned: the profile held part of the journal while its position and keys said
    "the record alone" (as the log line did)."""
    _, table, journal = world(training)
    X = training.vectorizer.transform([TRAIN[3], TRAIN[4]])
    X.sort_indices()
    bad = {**journal, "wheat": with_batch(journal["wheat"], X=encode_csr(X),
                                          relevant=[True, True], keys=["k3", "k4"],
                                          docs=["t3", "t4"], steps=[1, -1])}
    fresh = Service(training, n_shards=1, journal=bad)
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        entry = fresh.entry("wheat", dict(table))
    assert entry is not None and fresh.stats["bad_journal"] == 1
    assert "used alone" in caplog.text
    assert entry.seq == 0 and not entry.judged
    assert orjson.dumps(entry.profile.to_state()) == record_alone(training, table, "wheat")


# ------------------------------------------------------------------------------ F3
def test_f3_a_record_going_bad_live_drops_the_profile_held(
        training: TrainingSet, caplog: pytest.LogCaptureFixture) -> None:
    """A value that no longer decodes (say, a newer worker's record recovered after a
    rebalance) left the model decoded from the previous value in the bank: scored,
    listed, while its judgments were refused. Now live is as at start-up: skipped."""
    svc, table, _ = world(training)
    copy = payload(training)
    assert "oil" in {d.profile for d in svc.score(0, copy, table)}
    newer = orjson.loads(table["oil"])
    table["oil"] = orjson.dumps({**newer, "format": 2})
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        decisions = svc.score(0, copy, table)
    assert "oil" not in {d.profile for d in decisions}
    assert svc.counters()["profiles"] == ["gold", "wheat"]
    assert svc.stats["bad_state"] == 1 and svc.entry("oil", table) is None
    assert [r.getMessage() for r in caplog.records if "'oil'" in r.getMessage()] == [
        "profile 'oil': unusable state record, profile skipped (send its spec again to "
        "rebuild it): profile record format 2 is not 1"]
    # the spec sent again rebuilds it, and it scores again
    assert not svc.apply_specs([spec("oil", "crude oil", 9)], table).dead_letters
    assert "oil" in {d.profile for d in svc.score(0, copy, table)}


# ------------------------------------------------------------------------------ F4, F5
def weights_copy(X: sp.csr_matrix) -> bytes:
    return encode_vector_batch([f"w{i}" for i in range(X.shape[0])], X)


@pytest.mark.parametrize("case", ["narrow", "wide", "huge", "past_float"])
def test_f4_a_weights_copy_the_profiles_cannot_take_is_refused_before_it_is_stored(
        training: TrainingSet, case: str) -> None:
    """Another width raised in scoring, after the rows were stored (every later judgment
    of them then failed too); values past what a profile learns (1e6) were scored, up to
    an infinite score, written as ``null`` on the decisions topic."""
    svc, table, _ = world(training)
    n = training.vectorizer.n_features
    if case in ("narrow", "wide"):
        X = sp.csr_matrix(np.full((1, 10 if case == "narrow" else n + 1), 0.1))
    else:
        X = training.vectorizer.transform([TRAIN[0]])
        X.data[:] = 1e300 if case == "huge" else 1.7e308
    with pytest.raises(RecordError) as err:
        svc.score(0, weights_copy(X), table)
    assert err.value.reason == "bad_vector_batch" and "\n" not in str(err.value)
    assert "w0" not in svc.store
    # the worker's own copies of weights are read as before
    good = training.vectorizer.transform(TRAIN)
    ids, got, _ = read_vector_batch(weights_copy(good), training.vectorizer)
    assert np.array_equal(got.data, good.data) and len(ids) == len(TRAIN)


@pytest.mark.parametrize("value", [b'{"ids": ["a"], "X": {"shape": [1, 4096]', b'{"ids": ["a"]}',
                                   b'{"ids": ["a"], "X": 5}', b'{"ids": "a", "X": {}}'])
def test_f5_a_malformed_copy_of_the_first_format_is_a_bad_vector_batch(
        training: TrainingSet, value: bytes) -> None:
    with pytest.raises(RecordError) as err:
        read_vector_batch(value, training.vectorizer)
    assert err.value.reason == "bad_vector_batch" and "\n" not in str(err.value)


def test_f5_the_first_format_is_read_at_the_vectorizers_width(training: TrainingSet) -> None:
    X = training.vectorizer.transform(TRAIN[:2])
    old = orjson.dumps({"ids": ["a", "b"], "X": encode_csr(X)})
    ids, got, shards = read_vector_batch(old, training.vectorizer)
    assert ids == ["a", "b"] and shards is None and (got != X).nnz == 0
    narrow = orjson.dumps({"ids": ["a"], "X": encode_csr(sp.csr_matrix(np.ones((1, 3))))})
    with pytest.raises(RecordError, match="columns"):
        read_vector_batch(narrow, training.vectorizer)


def test_f5_through_the_shard_agent_a_truncated_old_copy_is_dead_lettered_with_its_reason(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sift.agents.app as app_module

    w = offline_worker(str(tmp_path), partitions=1)
    monkeypatch.setattr(app_module, "start_offsets", lambda settings, tps: dict.fromkeys(tps, 0))
    w.app.topics.acks_enabled_for = lambda topic: True
    X = w.service.vectorizer.transform(["wheat"])
    old = orjson.dumps({"ids": ["a"], "X": encode_csr(X)})

    async def run() -> None:
        async with agent(w, "score_documents").test_context() as a:
            a.sent_offset = 0
            await a.put(old[:-9], partition=0)
            await asyncio.sleep(0.3)

    asyncio.run(run())
    dead = [orjson.loads(c.kwargs["value"]) for c in w.topics["dead-letters"].send.await_args_list]
    assert [d["reason"] for d in dead] == ["bad_vector_batch"]
    assert w.service.stats["dead_letters.bad_vector_batch"] == 1


# ------------------------------------------------------------------------------ F6
@pytest.mark.parametrize("seq", [2**64 - 1, 2**53])
def test_f6_a_journal_position_no_batch_can_follow_is_refused(training: TrainingSet,
                                                               seq: int) -> None:
    """At 2**64 - 1 the next batch's number could not be encoded: every judgment of the
    profile was dead-lettered ``internal_error``, for ever."""
    _, table, _ = world(training)
    obj = orjson.loads(table["oil"])
    obj["journal"]["seq"] = seq
    with pytest.raises(ServiceError, match="journal position"):
        decode_profile_record(orjson.dumps(obj), training.vectorizer.feature_weights(), "oil",
                              n_features=training.vectorizer.n_features)
    X = training.vectorizer.transform([TRAIN[0]])
    X.sort_indices()
    data = jr.encode_journal("oil", "e", [jr.encode_batch(seq, X, [True], ["k"], True)])
    with pytest.raises(jr.JournalError, match="seq"):
        jr.decode_journal(data, "oil", training.vectorizer.n_features)
    # the largest a batch may have is accepted
    ok = jr.encode_journal("oil", "e", [jr.encode_batch(jr.MAX_SEQ - 1, X, [True], ["k"], True)])
    assert jr.decode_journal(ok, "oil", training.vectorizer.n_features)[1][0].seq == jr.MAX_SEQ - 1


# ------------------------------------------------------------------------------ F7
def test_f7_a_table_key_that_is_not_utf8_is_skipped_said_once_and_counted(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    w = offline_worker(str(tmp_path), partitions=1)
    svc = w.service
    assert not svc.apply_specs([spec("wheat", "wheat")], w.table).dead_letters
    w.table.table.data[b"\xffbad"] = b"{}"  # as recovered from a foreign write
    copy = encode_vector_batch(["a"], svc.vectorizer.transform(["wheat exports"]))
    with caplog.at_level(logging.WARNING, logger="sift.worker"):
        svc.score(0, copy, w.table)  # raised UnicodeDecodeError
        svc.score(0, copy, w.table)
    assert svc.counters()["profiles"] == ["wheat"] and svc.stats["scored"] == 2
    assert svc.stats["bad_table_keys"] == 1
    lines = [r.getMessage() for r in caplog.records if "not UTF-8" in r.getMessage()]
    assert len(lines) == 1 and "b'\\xffbad'" in lines[0]


# ------------------------------------------------------------------------------ F8
def test_f8_a_judgment_of_a_profile_whose_record_is_unusable_says_so(
        training: TrainingSet) -> None:
    svc, table, _ = world(training)
    table["oil"] = b"\x00garbage"
    out = svc.apply_judgments([judgment(7, "oil", 2, True),
                               InputMessage(orjson.dumps({"doc_id": "t1", "profile": "nope",
                                                          "relevant": True}), "judgments", 0, 8)],
                              table)
    assert [(d.reason, d.message) for d in out.dead_letters] == [
        ("unknown_profile", "judgment for profile 'oil', whose state record is unusable (the "
                            "worker's log says why); send its spec again to rebuild it"),
        ("unknown_profile", "judgment for unknown profile 'nope'")]


def test_f8_a_judgment_or_documents_of_a_review_whose_record_is_unusable_say_so() -> None:
    table = {"rev": b"\x00garbage"}
    svc = ReviewService(n_shards=1)
    j = InputMessage(orjson.dumps({"doc_id": "d1", "profile": "rev", "relevant": True}),
                     "judgments", 0, 1)
    docs = InputMessage(orjson.dumps({"review": "rev", "ids": ["d1"], "texts": ["x"]}),
                        "review-documents", 0, 2)
    out = svc.apply_judgments([j], table)
    out.extend(svc.add_documents([docs], table))
    assert [(d.reason, d.message) for d in out.dead_letters] == [
        ("unknown_review", "judgment for review 'rev', whose state record is unusable (the "
                           "worker's log says why); send its spec again to rebuild it"),
        ("unknown_review", "1 document(s) for review 'rev', whose state record is unusable "
                           "(the worker's log says why); send its spec again to rebuild it")]
    assert svc.stats["review_bad_state"] == 1


# ------------------------------------------------------------------------------ F9
def test_f9_unusable_records_journals_and_keys_are_on_the_metrics_page() -> None:
    text = WorkerMetrics().render({"stats": {"bad_state": 2, "bad_journal": 3,
                                             "bad_table_keys": 1}})
    lines = set(text.splitlines())
    assert {"sift_worker_bad_state_total 2", "sift_worker_bad_journal_total 3",
            "sift_worker_bad_table_keys_total 1"} <= lines


# ------------------------------------------------------------------------------ F10
def test_f10_a_compressed_record_is_inflated_only_up_to_the_limit(
        training: TrainingSet, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record of zeros compressed (16 MiB of them make 16 GB) was inflated whole: out of
    memory at every recovery of its partition."""
    svc, table, _ = world(training)
    entry = svc.entry("oil", table)
    assert entry is not None
    packed = encode_profile_record(entry, compress=True)
    w, n = training.vectorizer.feature_weights(), training.vectorizer.n_features
    assert decode_profile_record(packed, w, "oil", n_features=n).spec.profile == "oil"
    plain = len(zlib.decompress(packed))
    monkeypatch.setattr(service_module, "MAX_RECORD_JSON_BYTES", plain - 1, raising=False)
    with pytest.raises(ServiceError, match="decompressed"):
        decode_profile_record(packed, w, "oil", n_features=n)
    bomb = zlib.compress(b"{" + b" " * (plain * 4), 9)
    with pytest.raises(ServiceError, match="decompressed"):
        decode_profile_record(bomb, w, "oil", n_features=n)


# ------------------------------------------------------------------------------ F11
@pytest.mark.parametrize("coalesce", ["no", 0, 0.5, [], None])
def test_f11_a_journal_batchs_coalesce_must_be_a_boolean(training: TrainingSet,
                                                          coalesce: Any) -> None:
    X = training.vectorizer.transform([TRAIN[0]])
    X.sort_indices()
    obj = orjson.loads(jr.encode_journal("p", "e", [jr.encode_batch(1, X, [True], ["k"], True)]))
    obj["batches"][0]["coalesce"] = coalesce
    with pytest.raises(jr.JournalError, match="coalesce"):
        jr.decode_journal(orjson.dumps(obj), "p", training.vectorizer.n_features)
    del obj["batches"][0]["coalesce"]  # absent: true, as journals have always been read
    assert jr.decode_journal(orjson.dumps(obj), "p", training.vectorizer.n_features)[1][0].coalesce
