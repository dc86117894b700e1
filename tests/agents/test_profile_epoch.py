"""A profile's epoch (fifty-second session): the id of a profile's life, on its decisions,
carried back by judgments, so that a judgment meant for a profile since deleted (or reset)
is not learned by the profile created again under its name (docs/streaming.md, "A
profile's epoch"; docs/reliability.md item 85)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sift.agents.review import ReviewService, decode_review_record, gold_reviewer
from sift.agents.service import (
    InputMessage,
    Service,
    ServiceError,
    TrainingSet,
    decode_profile_record,
    encode_profile_record,
)
from sift.topics.errors import RecordError
from sift.topics.records import MAX_EPOCH_CHARS, Decision, Judgment, epoch_before
from sift.topics.review import ReviewDocuments, encode_review
from tests.agents.offline import TRAIN, training_set
from tests.agents.test_lifecycle_audit_s50 import spec
from tests.agents.test_review import P, collection
from tests.agents.test_review_audit_s49 import at, review_spec
from tests.agents.test_review_audit_s49 import judgment as review_judgment


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return training_set()



def judgment(i: int, name: str, doc: int, relevant: bool, **fields: Any) -> InputMessage:
    return InputMessage(orjson.dumps({"id": f"j{i}", "doc_id": f"t{doc}", "profile": name,
                                      "relevant": relevant, "text": TRAIN[doc], **fields}),
                        "judgments", 0, 100 + i)


def decisions(svc: Service, table: dict[str, bytes]) -> list[Decision]:
    vec = svc.vectorizer
    return svc.score_here([0], [f"d{i}" for i in range(len(TRAIN))], vec.transform(TRAIN), table)


def epoch_of(svc: Service, table: dict[str, bytes], name: str) -> str:
    entry = svc.entry(name, table)
    assert entry is not None
    return entry.profile_epoch


# ------------------------------------------------------------------------- the records
def test_judgment_and_decision_carry_the_epoch_and_round_trip() -> None:
    j = Judgment.from_obj({"doc_id": "d1", "profile": "p", "relevant": True,
                           "profile_epoch": "ab12"})
    assert j.profile_epoch == "ab12" and Judgment.from_obj(j.to_obj()) == j
    assert "profile_epoch" not in Judgment("d1", "p", True).to_obj()
    d = Decision("d1", "p", 0.5, 0.25, 3, 1.0, "ab12")
    assert d.to_obj()["profile_epoch"] == "ab12" and Decision.from_obj(d.to_obj()) == d
    old = Decision("d1", "p", 0.5, 0.25, 3, 1.0)  # a profile from before epochs
    assert "profile_epoch" not in old.to_obj() and Decision.from_obj(old.to_obj()) == old


@pytest.mark.parametrize("value", [7, True, "", "   ", ["e"], {"e": 1}, "x" * (MAX_EPOCH_CHARS + 1)])
def test_a_bad_epoch_is_refused_with_its_reason(value: Any) -> None:
    for make in (lambda: Judgment.from_obj({"doc_id": "d", "profile": "p", "relevant": True,
                                            "profile_epoch": value}),
                 lambda: Decision.from_obj({"doc_id": "d", "profile": "p", "score": 1.0,
                                            "threshold": 0.5, "profile_epoch": value})):
        with pytest.raises(RecordError) as err:
            make()
        assert err.value.reason == "bad_profile_epoch"
        assert "profile_epoch" in str(err.value) and "\n" not in str(err.value)


def test_a_null_epoch_is_absent() -> None:
    j = Judgment.from_obj({"doc_id": "d", "profile": "p", "relevant": True, "profile_epoch": None})
    assert j.profile_epoch is None


# ------------------------------------------------------------------------- the service
def test_the_epoch_lives_through_replacements_and_not_through_delete_or_reset(
        training: TrainingSet) -> None:
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    first = epoch_of(svc, table, "wheat")
    assert len(first) == 33 and int(first.replace("-", ""), 16) > 0
    hits = decisions(svc, table)
    assert hits and {d.profile_epoch for d in hits} == {first}
    svc.apply_specs([spec("wheat", "wheat crop", 1)], table)  # a replacement: the same life
    assert epoch_of(svc, table, "wheat") == first
    svc.apply_specs([spec("wheat", "wheat crop", 2, reset=True)], table)  # starts afresh
    reset = epoch_of(svc, table, "wheat")
    assert reset != first
    svc.apply_specs([spec("wheat", "", 3, delete=True)], table)
    svc.apply_specs([spec("wheat", "wheat", 4)], table)
    again = epoch_of(svc, table, "wheat")
    assert again not in (first, reset)
    assert epoch_before(first, reset) and epoch_before(reset, again)  # in the order given
    assert {d.profile_epoch for d in decisions(svc, table)} == {again}
    # another profile has a life of its own
    svc.apply_specs([spec("oil", "crude oil", 5)], table)
    assert epoch_of(svc, table, "oil") not in (first, reset, again)


def test_a_judgment_for_an_earlier_life_is_dead_lettered_and_learns_nothing(
        training: TrainingSet) -> None:
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    old = epoch_of(svc, table, "wheat")
    svc.apply_specs([spec("wheat", "", 1, delete=True), spec("wheat", "wheat", 2)], table)
    new = epoch_of(svc, table, "wheat")
    before = orjson.dumps(svc.entry("wheat", table).profile.to_state())  # type: ignore[union-attr]
    out = svc.apply_judgments([judgment(0, "wheat", 0, True, profile_epoch=old)], table)
    assert [d.reason for d in out.dead_letters] == ["stale_profile"]
    letter = out.dead_letters[0]
    assert old in letter.message and new in letter.message and "'t0'" in letter.message
    assert (letter.topic, letter.offset) == ("judgments", 100)
    assert svc.stats["dead_letters.stale_profile"] == 1
    entry = svc.entry("wheat", table)
    assert entry is not None and not entry.judged and "t0" not in entry.labels
    assert orjson.dumps(entry.profile.to_state()) == before
    # the same judgment meant for this life is learned; one with no epoch is not checked
    out = svc.apply_judgments([judgment(1, "wheat", 0, True, profile_epoch=new),
                               judgment(2, "wheat", 2, False)], table)
    assert not out.dead_letters and entry.profile.n_judged_ == 2


def test_a_replacement_keeps_taking_the_judgments_of_its_decisions(training: TrainingSet) -> None:
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    life = epoch_of(svc, table, "wheat")
    svc.apply_specs([spec("wheat", "wheat crop", 1, model="knn")], table)
    out = svc.apply_judgments([judgment(0, "wheat", 1, True, profile_epoch=life)], table)
    assert not out.dead_letters
    assert svc.entry("wheat", table).profile.n_judged_ == 1  # type: ignore[union-attr]


def test_the_epoch_is_in_the_record_and_a_worker_reading_it_agrees(training: TrainingSet) -> None:
    table: dict[str, bytes] = {}
    journal: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal=journal)
    svc.apply_specs([spec("wheat", "wheat")], table)
    svc.apply_judgments([judgment(0, "wheat", 0, True)], table)  # a journal append
    life = epoch_of(svc, table, "wheat")
    fresh = Service(training, n_shards=1, journal=dict(journal))
    assert epoch_of(fresh, dict(table), "wheat") == life
    assert {d.profile_epoch for d in decisions(fresh, dict(table))} == {life}
    out = fresh.apply_judgments([judgment(1, "wheat", 1, True, profile_epoch="0" * 32)],
                                dict(table))
    assert [d.reason for d in out.dead_letters] == ["stale_profile"]


def test_a_record_from_before_epochs_reads_its_journal_epoch(training: TrainingSet) -> None:
    """Records written before the fifty-second session have no ``profile_epoch``: the
    journal's epoch, which every worker reads from the same record, stands for it; with
    no journal epoch either (before the twenty-first session) nothing is checked."""
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    obj = orjson.loads(table["wheat"])
    del obj["profile_epoch"]
    w = training.vectorizer.feature_weights()
    entry = decode_profile_record(orjson.dumps(obj), w, "wheat")
    assert entry.profile_epoch == obj["journal"]["epoch"] != ""
    obj["journal"] = {"epoch": "", "seq": 0}
    legacy = decode_profile_record(orjson.dumps(obj), w, "wheat")
    assert legacy.profile_epoch == ""
    assert "profile_epoch" not in orjson.loads(encode_profile_record(legacy))
    legacy_table = {"wheat": orjson.dumps(obj)}
    out = Service(training, n_shards=1, journal={}).apply_judgments(
        [judgment(0, "wheat", 0, True, profile_epoch="any")], legacy_table)
    assert not out.dead_letters


@pytest.mark.parametrize("value", [7, "x" * (MAX_EPOCH_CHARS + 1)])
def test_a_record_with_a_bad_epoch_is_a_bad_record(training: TrainingSet, value: Any) -> None:
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    obj = orjson.loads(table["wheat"])
    obj["profile_epoch"] = value
    with pytest.raises(ServiceError, match="profile_epoch"):
        decode_profile_record(orjson.dumps(obj), training.vectorizer.feature_weights(), "wheat")


# ------------------------------------------------------------------------- review mode
def test_a_reviews_requests_carry_its_epoch_and_an_earlier_lifes_answers_are_refused() -> None:
    docs, gold = collection(80)
    svc, table = ReviewService(n_shards=P), {}
    name = "wilson"

    def start() -> list[Any]:
        assert not svc.apply_specs([at(review_spec(name), "profiles", name)], table).dead_letters
        batch = ReviewDocuments(name, tuple(d["id"] for d in docs), tuple(d["text"] for d in docs))
        out = svc.add_documents([at(encode_review(batch), "review-documents", name)], table)
        assert out.statuses and {st.profile_epoch for st in out.statuses} \
            == {r.profile_epoch for r in out.requests}  # its statuses carry it too
        return out.requests

    first = start()
    (old,) = {r.profile_epoch for r in first}
    assert len(old) == 33
    assert decode_review_record(table[name], name, table).profile_epoch == old
    answer = gold_reviewer(gold)
    sent = answer(first[0])
    assert sent["profile_epoch"] == old
    svc.apply_specs([at(orjson.dumps({"profile": name, "mode": "review", "delete": True}),
                        "profiles", name)], table)
    again = start()
    (new,) = {r.profile_epoch for r in again}
    assert epoch_before(old, new)
    stale = at(orjson.dumps(sent), "judgments", name, 7)
    out = svc.apply_judgments([stale], table)
    assert [d.reason for d in out.dead_letters] == ["stale_review"]
    assert old in out.dead_letters[0].message and new in out.dead_letters[0].message
    assert not svc.entry(name, table).review.order_  # type: ignore[union-attr]
    # the new life's answer, and one with no epoch, are taken
    fresh = orjson.dumps(answer(again[0]))
    out = svc.apply_judgments([at(fresh, "judgments", name, 8),
                               review_judgment(name, again[1].doc_id, True, 9)], table)
    assert not out.dead_letters
    assert len(svc.entry(name, table).review.order_) == 2  # type: ignore[union-attr]


def test_sift_profiles_list_shows_the_epoch(training: TrainingSet) -> None:
    from sift.commands.profiles import _record

    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([spec("wheat", "wheat")], table)
    assert _record(table["wheat"])["profile_epoch"] == epoch_of(svc, table, "wheat")
    obj = orjson.loads(table["wheat"])
    del obj["profile_epoch"]  # a record from before: the journal's epoch, as workers read it
    assert _record(orjson.dumps(obj))["profile_epoch"] == obj["journal"]["epoch"]
