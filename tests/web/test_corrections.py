"""Corrections through sift web (forty-seventh session): ``"correct": true`` gives a judged
document of a standing profile the other label, and the counts follow corrections read."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp.test_utils import TestClient

from sift.settings import Settings
from sift.web.state import WebState
from tests.web.conftest import Recorder, auth, fill, review_fill
from tests.web.test_app import with_client


def test_a_correction_is_published_and_the_counts_follow_it(settings: Settings,
                                                            recorder: Recorder) -> None:
    state = WebState()
    fill(state)
    review_fill(state, "wilson")
    state.on_judgment(orjson.dumps({"doc_id": "d0", "profile": "earn", "relevant": True}), 1.0)
    state.on_judgment(orjson.dumps({"doc_id": "r0", "profile": "wilson", "relevant": True}), 1.0)
    view = state.profiles["earn"]
    assert (view.judged, view.relevant) == (1, 1)

    async def go(client: TestClient) -> list[Any]:
        out = []
        for body in ({"doc_id": "d0", "profile": "earn", "relevant": False},  # not a correction
                     {"doc_id": "d0", "profile": "earn", "relevant": True, "correct": True},
                     {"doc_id": "r0", "profile": "wilson", "relevant": False, "correct": True},
                     {"doc_id": "d0", "profile": "earn", "relevant": False, "correct": "yes"},
                     {"doc_id": "d0", "profile": "earn", "relevant": False, "correct": True}):
            resp = await client.post("/api/judgments", headers=auth(), json=body)
            out.append((resp.status, await resp.json()))
        stats = await (await client.get("/api/stats")).json()
        out.append(stats["corrections"])
        return out

    (s1, _), (s2, b2), (s3, _), (s4, b4), (s5, _), corrections = with_client(
        state, settings, recorder, go)
    assert (s1, s2, s3, s4, s5) == (409, 409, 409, 400, 202)
    assert b2["relevant"] is True  # the same label: nothing to correct
    assert "'correct' must be a boolean" in b4["error"]
    assert len(recorder.sent) == 1
    sent = orjson.loads(recorder.sent[0][2])
    assert (sent["doc_id"], sent["relevant"]) == ("d0", False) and "correct" not in sent
    assert corrections == 1 and state.verdict("earn", "d0") is False
    assert (view.judged, view.relevant, view.judgments) == (1, 0, 1)


def test_a_correction_read_from_the_topic_moves_the_counts() -> None:
    state = WebState()
    fill(state)
    for rel in (False, True, True, False):
        state.on_judgment(orjson.dumps({"doc_id": "d1", "profile": "earn", "relevant": rel}), 1.0)
    view = state.profiles["earn"]
    assert (view.judged, view.relevant, view.judgments, state.corrections) == (1, 0, 1, 2)
    assert state.verdict("earn", "d1") is False


def test_the_judging_page_offers_a_change_for_profiles_and_not_for_reviews() -> None:
    from sift.web.assets import JS
    from sift.web.pages import judge_page

    page = judge_page("earn", [], {"delivered": 1, "judged": 1, "precision": 1.0,
                                   "threshold": 0.2, "model_version": 3})
    assert '<button type="button" id="change" hidden></button>' in page
    assert "<kbd>u</kbd> changes the last verdict" in page
    review = judge_page("wilson", [], None, review={"screened": 3, "found": 1})
    assert 'id="change"' not in review and "<kbd>u</kbd>" not in review
    # the button posts the other label as a correction
    assert "correct: true" in JS and "relevant: !last.relevant" in JS


def test_a_reviews_later_verdict_is_the_one_shown_as_in_its_workers() -> None:
    state = WebState()
    review_fill(state, "wilson")
    for rel in (True, False):
        state.on_judgment(orjson.dumps({"doc_id": "r1", "profile": "wilson", "relevant": rel,
                                        "id": f"j{rel}"}), 1.0)
    assert state.verdict("wilson", "r1") is False and state.corrections == 1
