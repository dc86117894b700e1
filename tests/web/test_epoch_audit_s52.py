"""Audit of the profile epoch on the web side (fifty-second session): a judgment from the
judging page must carry the epoch of the delivery the person judged, also when the page
shows a document its queue has dropped since (the profile was reset, or deleted and
created again, while the page was open) and for a correction (the change button), whose
document has left the queue: without it the judgment reached the profile's new life as
one of its own, the very thing the epoch is for (docs/streaming.md, "A profile's epoch")."""

from __future__ import annotations

import time

import orjson

from sift.settings import Settings
from sift.web.assets import JS
from sift.web.state import WebState
from tests.web.conftest import Recorder
from tests.web.test_profile_epoch import NEW, OLD, deliver, post, record


def sent(recorder: Recorder) -> list[dict[str, object]]:
    return [orjson.loads(v) for _, _, v in recorder.sent]


def test_a_document_dropped_from_the_queue_by_a_reset_keeps_its_deliverys_epoch(
        settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    state.on_profile_state("earn", record(OLD), time.time())
    deliver(state, "d0", OLD)
    assert [it["doc_id"] for it in state.pending("earn")] == ["d0"]  # the page shows it
    # the profile is replaced with "reset": a new life, whose record drops d0 from the queue
    state.on_profile_state("earn", record(NEW), time.time() + 60)
    state.refresh_states(time.time() + 60)
    assert state.pending("earn") == []
    # the page, loaded before, still shows d0: its judgment is meant for the old life
    assert post(state, settings, recorder, {"doc_id": "d0", "profile": "earn",
                                            "relevant": True}) == 202
    assert sent(recorder)[0].get("profile_epoch") == OLD


def test_a_correction_carries_the_epoch_of_the_delivery_it_corrects(
        settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    state.on_profile_state("earn", record(NEW), time.time())
    deliver(state, "d0", NEW)
    assert post(state, settings, recorder, {"doc_id": "d0", "profile": "earn",
                                            "relevant": True}) == 202
    assert post(state, settings, recorder, {"doc_id": "d0", "profile": "earn",
                                            "relevant": False, "correct": True}) == 202
    assert [j.get("profile_epoch") for j in sent(recorder)] == [NEW, NEW]


def test_a_judgment_read_from_the_topic_does_not_forget_the_deliverys_epoch(
        settings: Settings, recorder: Recorder) -> None:
    """Judged elsewhere (``sift`` CLI, another page), then corrected here."""
    state = WebState()
    state.on_profile_state("earn", record(OLD), time.time())
    deliver(state, "d0", OLD)
    state.on_judgment(orjson.dumps({"doc_id": "d0", "profile": "earn", "relevant": True,
                                    "profile_epoch": OLD}), time.time())
    assert post(state, settings, recorder, {"doc_id": "d0", "profile": "earn",
                                            "relevant": False, "correct": True}) == 202
    assert sent(recorder)[0].get("profile_epoch") == OLD


def test_the_judging_page_sends_the_epoch_of_the_item_it_shows() -> None:
    """A profile deleted and created again while the page is open leaves the server
    nothing of the old life (its view is dropped): only the page knows which life
    delivered the card clicked, so it sends the item's ``profile_epoch`` (and keeps it
    for the change button)."""
    assert "li.dataset.epoch = it.profile_epoch || ''" in JS
    assert "epochOf(li.dataset.epoch)" in JS
    assert "epoch: last.epoch}" in JS and "epochOf(fix.epoch)" in JS
