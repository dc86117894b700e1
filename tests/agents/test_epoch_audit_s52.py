"""Audit of the profile and review epochs (fifty-second session): what the session's tests
left unpinned, and ``sift review answer`` stopping on a deleted review's stop signal read
before the new review's records (docs/screening.md, "A review's epoch")."""

from __future__ import annotations

from collections import namedtuple
from typing import Any, ClassVar

import orjson
import pytest

import sift.kafkaclient as kafkaclient
from sift.agents.service import InputMessage, Service, TrainingSet
from sift.commands import review as review_cmd
from sift.settings import Settings
from sift.topics.errors import RecordError
from sift.topics.records import new_profile_epoch
from sift.topics.review import JudgmentRequest, decode_request
from tests.agents.offline import training_set

TP = namedtuple("TP", "topic partition")
Rec = namedtuple("Rec", "value")


@pytest.fixture(scope="module")
def training() -> TrainingSet:
    return training_set()


def test_a_request_carries_its_epoch_on_the_wire() -> None:
    req = JudgmentRequest("wilson", "d1", 2, 3, 1.0, new_profile_epoch())
    assert decode_request(orjson.dumps(req.to_obj())) == req


def test_a_replaced_record_from_before_journals_gets_an_epoch(training: TrainingSet) -> None:
    """A record with neither a profile epoch nor a journal epoch (before the twenty-first
    session) replaced by a spec: the profile's life starts being checked then."""
    table: dict[str, bytes] = {}
    svc = Service(training, n_shards=1, journal={})
    svc.apply_specs([InputMessage(orjson.dumps({"profile": "wheat", "query": "wheat"}),
                                  "profiles", 0, 0)], table)
    obj = orjson.loads(table["wheat"])
    del obj["profile_epoch"]
    obj["journal"] = {"epoch": "", "seq": 0}
    table = {"wheat": orjson.dumps(obj)}
    svc = Service(training, n_shards=1, journal={})
    assert svc.entry("wheat", table).profile_epoch == ""  # type: ignore[union-attr]
    svc.apply_specs([InputMessage(orjson.dumps({"profile": "wheat", "query": "wheat crop"}),
                                  "profiles", 0, 1)], table)
    life = svc.entry("wheat", table).profile_epoch  # type: ignore[union-attr]
    assert len(life) == 33 and orjson.loads(table["wheat"])["profile_epoch"] == life


class FakeConsumer:
    """Polls that return the records given, a batch at a time, with positions."""

    def __init__(self, polls: list[list[tuple[str, dict[str, Any]]]]) -> None:
        self.polls = polls
        self.tps = [TP("t.requests", 0), TP("t.review-status", 0)]
        self.pos = {tp: 0 for tp in self.tps}
        self.ends = {tp: sum(1 for p in polls for t, _ in p if t == tp.topic) for tp in self.tps}

    def assignment(self) -> set[Any]:
        return set(self.tps)

    def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: self.ends[tp] for tp in tps}

    def position(self, tp: Any) -> int:
        return self.pos[tp]

    def poll(self, timeout_ms: int = 0) -> dict[Any, list[Any]]:
        if not self.polls:
            return {}
        out: dict[Any, list[Any]] = {}
        for topic, obj in self.polls.pop(0):
            tp = next(tp for tp in self.tps if tp.topic == topic)
            out.setdefault(tp, []).append(Rec(orjson.dumps(obj)))
            self.pos[tp] += 1
        return out

    def close(self) -> None:
        pass


class FakeSends:
    sent: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, prod: Any) -> None:
        pass

    def send(self, topic: str, key: bytes, value: bytes, what: str) -> None:
        FakeSends.sent.append(orjson.loads(value))

    def flush(self, timeout: float = 0) -> None:
        pass


class FakeProducer:
    def close(self, timeout: float = 0) -> None:
        pass


def status(epoch: str, screened: int, stop: bool) -> tuple[str, dict[str, Any]]:
    return ("t.review-status", {
        "review": "wilson", "documents": 100, "screened": screened, "found": 1, "pending": 0,
        "batches": 1, "r_hat": 1.0, "r_hat_var": 0.0, "recall_estimate": 1.0,
        "recall_lower": 1.0, "estimator": "hh", "target_recall": 0.8, "stop": stop,
        "complete": False, "ts": 1.0 + screened, "profile_epoch": epoch})


def request(doc: str, epoch: str) -> tuple[str, dict[str, Any]]:
    return ("t.requests", {"review": "wilson", "doc_id": doc, "batch": 1, "rank": 1,
                           "ts": 1.0, "profile_epoch": epoch})


def test_the_answerer_does_not_stop_on_a_deleted_reviews_stop_read_first(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Read from the start, the status partition holds the deleted review's statuses
    first, its stop signal among them; a poll may return them without the new review's
    (read in order, a few hundred records a poll): the answerer stopped there, having
    answered nothing. It waits until it has read what the topic held when it started."""
    old, new = new_profile_epoch(), new_profile_epoch()
    polls = [[request("a", old), status(old, 5, True)],
             [status(new, 0, False), request("b", new)],
             [status(new, 1, True)]]
    cons = FakeConsumer(polls)
    monkeypatch.setattr(review_cmd, "_follow", lambda *a, **k: cons)
    monkeypatch.setattr(kafkaclient, "producer", lambda settings: FakeProducer())
    monkeypatch.setattr(kafkaclient, "Sends", FakeSends)
    FakeSends.sent = []
    n = review_cmd.answer(Settings(topic_prefix="t."), "wilson", {"a": True, "b": False}, 5.0)
    assert n == 1
    assert [(j["doc_id"], j.get("profile_epoch")) for j in FakeSends.sent] == [("a", old),
                                                                                ("b", new)]
    assert "answered 1 requests" in capsys.readouterr().out


@pytest.mark.parametrize("value", [0, False, [], {}, 7, "x" * 65])
def test_a_requests_epoch_of_another_type_is_refused_not_taken_for_none(value: object) -> None:
    """``0``, ``false`` or ``[]`` were read as no epoch (falsy), where the judgment's
    decoder refuses them: a request's is checked the same way."""
    with pytest.raises(RecordError) as err:
        JudgmentRequest.from_obj({"review": "r", "doc_id": "d", "batch": 1, "rank": 1,
                                  "profile_epoch": value})
    assert err.value.reason == "bad_profile_epoch"
    ok = JudgmentRequest.from_obj({"review": "r", "doc_id": "d", "batch": 1, "rank": 1,
                                   "profile_epoch": None})
    assert ok.profile_epoch == ""
