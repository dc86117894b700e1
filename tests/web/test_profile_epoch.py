"""The judging page and a profile's epoch (fifty-second session): a judgment from the page
carries the epoch of the decision that queued its document, and a queue does not show
the deliveries of an earlier life of its profile (docs/streaming.md, "A profile's epoch")."""

from __future__ import annotations

import asyncio
import time

import orjson
from aiohttp.test_utils import TestClient, TestServer

from sift.settings import Settings
from sift.topics.records import new_profile_epoch
from sift.web.app import create_web_app
from sift.web.state import WebState
from tests.web.conftest import Recorder, auth, state_record

OLD, NEW = new_profile_epoch(), new_profile_epoch()


def record(epoch: str) -> bytes:
    obj = orjson.loads(state_record(0.25, 3))
    obj["profile_epoch"] = epoch
    return orjson.dumps(obj)


def deliver(state: WebState, doc_id: str, epoch: str | None, profile: str = "earn") -> None:
    now = time.time()
    state.on_documents(orjson.dumps({"documents": [{"id": doc_id, "text": f"text {doc_id}"}]}),
                       now - 1)
    d = {"doc_id": doc_id, "profile": profile, "score": 0.5, "threshold": 0.25,
         "model_version": 3, "ts": now}
    if epoch is not None:
        d["profile_epoch"] = epoch
    state.on_decision(orjson.dumps(d))


def post(state: WebState, settings: Settings, recorder: Recorder, body: dict[str, object]) -> int:
    state.set_behind(0)

    async def main() -> int:
        async with TestClient(TestServer(create_web_app(state, settings, recorder))) as client:
            resp = await client.post("/api/judgments", headers=auth(), json=body)
            return resp.status

    return asyncio.run(main())


def test_a_judgment_from_the_page_carries_its_decisions_epoch(settings: Settings,
                                                              recorder: Recorder) -> None:
    state = WebState()
    state.on_profile_state("earn", record(NEW), time.time())
    deliver(state, "d0", NEW)
    deliver(state, "d1", None)  # a decision of a profile from before epochs
    [item] = [it for it in state.pending("earn") if it["doc_id"] == "d0"]
    assert item["profile_epoch"] == NEW
    assert "profile_epoch" not in next(it for it in state.pending("earn") if it["doc_id"] == "d1")
    assert post(state, settings, recorder, {"doc_id": "d0", "profile": "earn",
                                            "relevant": True}) == 202
    assert post(state, settings, recorder, {"doc_id": "d1", "profile": "earn",
                                            "relevant": True}) == 202
    sent = [orjson.loads(v) for _, _, v in recorder.sent]
    assert sent[0]["profile_epoch"] == NEW and "profile_epoch" not in sent[1]


def test_an_epoch_given_is_sent_as_given_and_a_bad_one_is_a_400(settings: Settings,
                                                                recorder: Recorder) -> None:
    state = WebState()
    state.on_profile_state("earn", record(NEW), time.time())
    deliver(state, "d0", NEW)
    deliver(state, "d1", NEW)
    assert post(state, settings, recorder, {"doc_id": "d0", "profile": "earn", "relevant": True,
                                            "profile_epoch": OLD}) == 202
    assert orjson.loads(recorder.sent[0][2])["profile_epoch"] == OLD
    assert post(state, settings, recorder, {"doc_id": "d1", "profile": "earn", "relevant": True,
                                            "profile_epoch": 5}) == 400
    assert len(recorder.sent) == 1


def test_a_queue_drops_the_deliveries_of_an_earlier_life() -> None:
    """The decisions of a profile deleted and created again may be read after the new
    one's record (the topics have no order between them, and a restarted page reads them
    all again): they leave its queue, whose judgments the workers would refuse."""
    state = WebState()
    state.on_profile_state("earn", record(NEW), time.time())
    deliver(state, "d0", OLD)
    deliver(state, "d1", NEW)
    deliver(state, "d2", None)
    assert [it["doc_id"] for it in state.pending("earn")] == ["d1", "d2"]
    deliver(state, "d3", OLD)  # read after the new life's record was decoded
    assert [it["doc_id"] for it in state.pending("earn")] == ["d1", "d2"]
    state.refresh_states()
    summary = state.profile_summary(state.profiles["earn"])
    assert summary["pending"] == 2 and summary["profile_epoch"] == NEW
    assert summary["delivered"] == 4  # still deliveries under the name, as before


def test_a_new_life_read_later_empties_the_queue_of_the_old() -> None:
    state = WebState()
    state.on_profile_state("earn", record(OLD), time.time())
    deliver(state, "d0", OLD)
    deliver(state, "d1", OLD)
    assert len(state.pending("earn")) == 2
    state.on_profile_state("earn", record(NEW), time.time() + 60)  # past STATE_REFRESH
    deliver(state, "d2", NEW)
    state.refresh_states(time.time() + 60)
    assert [it["doc_id"] for it in state.pending("earn")] == ["d2"]


def test_a_decision_of_a_life_whose_record_is_not_read_yet_stays() -> None:
    """Read before its own profile's record (the topics have no order between them), a
    decision of a newer life is kept: only older lives' leave a queue."""
    state = WebState()
    state.on_profile_state("earn", record(OLD), time.time())
    deliver(state, "d0", NEW)
    assert [it["doc_id"] for it in state.pending("earn")] == ["d0"]


def test_epochs_of_records_from_before_epochs_keep_every_delivery() -> None:
    """A record from before the fifty-second session has its journal's random epoch,
    which says nothing of order: nothing is dropped against it, nor for it."""
    state = WebState()
    state.on_profile_state("earn", state_record(0.25, 3, epoch="f" * 32), time.time())
    deliver(state, "d0", OLD)
    deliver(state, "d1", "0" * 32)
    assert [it["doc_id"] for it in state.pending("earn")] == ["d0", "d1"]


def test_the_profile_epoch_of_a_record_from_before_epochs_is_its_journals() -> None:
    state = WebState()
    state.on_profile_state("earn", state_record(0.25, 3, epoch="c" * 32), time.time())
    state.refresh_states()
    assert state.profile_summary(state.profiles["earn"])["profile_epoch"] == "c" * 32


def request(state: WebState, doc_id: str, epoch: str, review: str = "wilson") -> None:
    state.on_request(orjson.dumps({"review": review, "doc_id": doc_id, "batch": 1, "rank": 1,
                                   "ts": time.time(), "profile_epoch": epoch}), time.time())


def test_a_reviews_queue_follows_its_newest_life_and_judgments_carry_it(
        settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    request(state, "r0", OLD)
    request(state, "r1", OLD)
    assert [it["profile_epoch"] for it in state.pending("wilson")] == [OLD, OLD]
    request(state, "r2", NEW)  # the review was deleted and started again
    request(state, "r3", OLD)  # a request of the old one read late
    assert [it["doc_id"] for it in state.pending("wilson")] == ["r2"]
    assert post(state, settings, recorder, {"doc_id": "r2", "profile": "wilson",
                                            "relevant": True}) == 202
    assert orjson.loads(recorder.sent[0][2])["profile_epoch"] == NEW


def status(state: WebState, epoch: str, screened: int, review: str = "wilson") -> None:
    state.on_review_status(orjson.dumps({
        "review": review, "documents": 100, "screened": screened, "found": 3, "pending": 0,
        "batches": 2, "r_hat": 4.0, "r_hat_var": 1.0, "recall_estimate": 0.75,
        "recall_lower": 0.5, "estimator": "hh", "target_recall": 0.8, "stop": True,
        "complete": False, "ts": time.time(), "profile_epoch": epoch}), time.time())


def test_a_deleted_reviews_status_read_late_is_not_the_reviews() -> None:
    state = WebState()
    request(state, "r0", NEW)
    status(state, NEW, 10)
    status(state, OLD, 90)
    assert state.reviews["wilson"]["screened"] == 10.0
    assert state.skipped["stale-status"] == 1
