"""Forty-fifth session, wire audit: the worker and the web API on the audit's inputs.

Finding 1: a spec with a value nested 1,000 levels deep raised RecursionError in the
worker (the batch retried one by one, the spec dead-lettered ``internal_error``) and made
the web API answer 500. Finding 3: a title-only document counted its title twice against
``max_document_bytes``.
"""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from sift.agents.app import guarded
from sift.agents.service import InputMessage, Service, TrainingSet
from sift.filters.vectorize import Vectorizer
from sift.settings import Settings
from sift.web.app import create_web_app
from sift.web.state import WebState
from tests.web.conftest import TOKEN, Recorder, auth

DEEP = b"[" * 1000 + b"]" * 1000
TRAIN = [("t1", "wheat exports rose"), ("t2", "crude oil prices fell"), ("t3", "gold mine output")]


@pytest.fixture
def service() -> Service:
    vec = Vectorizer(n_features=2**10).fit(t for _, t in TRAIN)
    training = TrainingSet(vec, vec.transform([t for _, t in TRAIN]),
                           {i: k for k, (i, _) in enumerate(TRAIN)})
    return Service(training, n_shards=1, recent_documents=50, max_document_bytes=1000)


@pytest.mark.parametrize(("field", "reason"), [
    ("model", "bad_model"), ("update", "bad_update"), ("measure", "bad_measure"),
    ("bags", "bad_bags"), ("bag_rule", "bad_bags")])
def test_f1_the_worker_dead_letters_a_deep_spec_with_its_reason(
        service: Service, field: str, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    bad = b'{"profile":"p","query":"q","%s":' % field.encode() + DEEP + b"}"
    good = orjson.dumps({"profile": "ok", "query": "wheat exports"})
    msgs = [InputMessage(bad, "profiles", 0, 1, b"p"), InputMessage(good, "profiles", 0, 2, b"ok")]
    table: dict[str, bytes] = {}
    with caplog.at_level(logging.ERROR, logger="sift.worker"):
        out = guarded(service.apply_specs, msgs, table, stats=service.stats)
    assert [(d.reason, d.offset) for d in out.dead_letters] == [(reason, 1)]
    letter = out.dead_letters[0]
    assert "\n" not in letter.message and len(letter.message) < 300
    assert out.changed == ["ok"] and "ok" in table
    assert not caplog.records  # no traceback: the batch was not retried one by one
    assert service.stats["dead_letters.internal_error"] == 0


@pytest.mark.parametrize(("doc", "refused"), [
    ({"id": "t", "title": "T" * 1000}, False), ({"id": "t", "title": "T" * 1001}, True),
    ({"id": "u", "title": "\u00e9" * 500}, False), ({"id": "u", "title": "\u00e9" * 501}, True),
    ({"id": "a", "title": "T" * 300, "abstract": "A" * 699}, False),
    ({"id": "a", "title": "T" * 300, "abstract": "A" * 700}, True),
    # unchanged: a text, a text and a title that it does not begin with
    ({"id": "x", "text": "w" * 1000}, False), ({"id": "x", "text": "w" * 1001}, True),
    ({"id": "y", "title": "T" * 400, "text": "w" * 600}, False),
    ({"id": "y", "title": "T" * 400, "text": "w" * 601}, True),
])
def test_f3_the_size_limit_counts_a_title_once(service: Service, doc: dict[str, str],
                                               refused: bool) -> None:
    for offset, value in enumerate((orjson.dumps(doc), orjson.dumps({"documents": [doc]}))):
        result = service.route([InputMessage(value, "documents", 0, offset)])
        assert [d.reason for d in result.dead_letters] == (["too_large"] if refused else [])
        if refused:
            assert "over the limit of 1000" in result.dead_letters[0].message


def test_f1_f6_the_web_api_refuses_bad_specs_with_400() -> None:
    state = WebState()
    settings = Settings(topic_prefix="t.", api_token=TOKEN)
    recorder = Recorder()

    async def main() -> list[tuple[int, str]]:
        app = create_web_app(state, settings, recorder)
        out = []
        async with TestClient(TestServer(app)) as client:
            for body in (b'{"profile":"p","query":"q","model":' + DEEP + b"}",
                         b'{"profile":"p","query":"q","params":' + DEEP + b"}",
                         b'{"profile":"p","query":"q","params":[]}',
                         b'{"profile":"p","query":"q","positives":""}'):
                resp = await client.post("/api/profiles", headers={**auth(),
                                         "Content-Type": "application/json"}, data=body)
                out.append((resp.status, (await resp.json())["error"]))
        return out

    answers = asyncio.run(main())
    assert [s for s, _ in answers] == [400] * 4, answers
    assert all("\n" not in e and len(e) < 300 for _, e in answers)
    assert not recorder.sent


@pytest.mark.parametrize("model", ["rocchio", "knn", "kantor", "fusion"])
@pytest.mark.parametrize("params", [{"alpha": "x" * 100_000}, {"x" * 100_000: 1},
                                    {"k": ["y" * 50_000] * 3}])
def test_f4_a_dead_letter_message_is_one_bounded_line(service: Service, model: str,
                                                      params: dict[str, object]) -> None:
    """A model's own error can quote a parameter whole (kNN: 150,059 characters)."""
    spec = orjson.dumps({"profile": "p", "query": "q", "model": model, "params": params})
    out = service.apply_specs([InputMessage(spec, "profiles", 0, 1)], {})
    assert [d.reason for d in out.dead_letters] == ["bad_params"]
    message = out.dead_letters[0].message
    assert message.isprintable() and len(message) <= 1000
