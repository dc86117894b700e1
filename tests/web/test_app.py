"""The web app through aiohttp's test client: auth, judging, escaping, API, SSE, metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from openapi_spec_validator import validate  # a test dependency (pyproject.toml): no skip

from sift.settings import Settings
from sift.topics.records import ProfileSpec
from sift.web.app import ROUTES, create_web_app
from sift.web.assets import CSS, JS
from sift.web.openapi import openapi
from sift.web.state import WebState
from tests.web.conftest import HOSTILE, TOKEN, Recorder, auth, fill, review_fill


def with_client(state: WebState, settings: Settings, recorder: Recorder,
                body: Callable[[TestClient], Awaitable[Any]], *, caught_up: bool = True) -> Any:
    """Run ``body`` against the app over ``state``, marked caught up with the topics (as
    the feed marks it once read) unless ``caught_up`` is false."""
    if caught_up:
        state.set_behind(0)

    async def main() -> Any:
        app = create_web_app(state, settings, recorder)
        async with TestClient(TestServer(app)) as client:
            return await body(client)

    return asyncio.run(main())


WRITES = [
    ("POST", "/api/judgments", {"doc_id": "d0", "profile": "earn", "relevant": True}),
    ("POST", "/api/profiles", {"profile": "new", "query": "new things"}),
    ("DELETE", "/api/profiles/earn", None),
]
BAD_AUTH = [
    {},
    {"Authorization": "Bearer wrong"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": "Bearer "},
    {"X-Sift-Token": TOKEN[:-1]},
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
@pytest.mark.parametrize("headers", BAD_AUTH)
def test_write_without_the_right_token_is_401_and_changes_nothing(
        settings: Settings, recorder: Recorder, method: str, path: str,
        body: dict[str, Any] | None, headers: dict[str, str]) -> None:
    state = WebState()
    fill(state)
    state.set_behind(0)
    before = orjson.dumps(state.snapshot(now=1.0))

    async def go(client: TestClient) -> None:
        resp = await client.request(method, path, json=body, headers=headers)
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        data = await resp.json()
        assert "token" in data["error"] and "\n" not in data["error"]

    with_client(state, settings, recorder, go)
    assert recorder.sent == []
    assert orjson.dumps(state.snapshot(now=1.0)) == before
    assert [it["doc_id"] for it in state.pending("earn")] == ["d0", "d1", "d2"]


def test_no_configured_token_refuses_every_write(recorder: Recorder) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> None:
        for headers in ({}, {"Authorization": "Bearer "}, {"X-Sift-Token": ""}):
            resp = await client.post("/api/judgments", headers=headers,
                                     json={"doc_id": "d0", "profile": "earn", "relevant": True})
            assert resp.status == 401
            assert "SIFT_API_TOKEN" in (await resp.json())["error"]

    with_client(state, Settings(api_token=""), recorder, go)
    assert recorder.sent == []


def test_judgment_is_published_keyed_by_profile_and_leaves_the_queue(
        settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> None:
        resp = await client.post("/api/judgments", headers=auth(),
                                 json={"doc_id": "d1", "profile": "earn", "relevant": True})
        assert resp.status == 202, await resp.text()
        assert (await resp.json())["judgment"]["doc_id"] == "d1"
        pend = await (await client.get("/api/pending", params={"profile": "earn"})).json()
        assert [it["doc_id"] for it in pend["items"]] == ["d0", "d2"]
        again = await client.post("/api/judgments", headers=auth(),
                                  json={"doc_id": "d1", "profile": "earn", "relevant": False})
        assert again.status == 409
        unknown = await client.post("/api/judgments", headers=auth(),
                                    json={"doc_id": "d1", "profile": "nope", "relevant": True})
        assert unknown.status == 404
        bad = await client.post("/api/judgments", headers=auth(),
                                data=b"{not json", )
        assert bad.status == 400 and "JSON" in (await bad.json())["error"]
        bad = await client.post("/api/judgments", headers=auth(),
                                json={"doc_id": "d2", "profile": "earn", "relevant": "yes"})
        assert bad.status == 400
        prof = await (await client.get("/api/profiles/earn")).json()
        assert prof["judged"] == 1 and prof["relevant"] == 1 and prof["precision"] == 1.0
        assert prof["pending"] == 2 and prof["threshold"] == 0.25 and prof["model_version"] == 3

    with_client(state, settings, recorder, go)
    assert len(recorder.sent) == 1
    topic, key, value = recorder.sent[0]
    assert topic == "t.judgments" and key == b"earn"
    j = orjson.loads(value)
    assert j["doc_id"] == "d1" and j["profile"] == "earn" and j["relevant"] is True
    assert j["judge"] == "web" and j["id"].startswith("web-")
    # the text as the workers scored it, the title included (forty-seventh session: the
    # text alone made another vector than the one scored)
    assert j["text"] == "Title d1\n" + "text of d1 " * 5


def test_publish_failure_is_503_and_the_item_stays(settings: Settings,
                                                    recorder: Recorder) -> None:
    state = WebState()
    fill(state)
    recorder.fail = True

    async def go(client: TestClient) -> None:
        resp = await client.post("/api/judgments", headers=auth(),
                                 json={"doc_id": "d0", "profile": "earn", "relevant": True})
        assert resp.status == 503
        assert "t.judgments" in (await resp.json())["error"]

    with_client(state, settings, recorder, go)
    assert state.pending("earn")[0]["doc_id"] == "d0"


def test_profiles_post_and_delete_publish_specs(settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> None:
        resp = await client.post("/api/profiles", headers=auth(),
                                 json={"profile": "wheat", "query": "wheat", "model": "knn"})
        assert resp.status == 202
        bad = await client.post("/api/profiles", headers=auth(),
                                json={"profile": "x", "model": "nonsense", "query": "q"})
        assert bad.status == 400 and "model" in (await bad.json())["error"]
        names = [p["profile"] for p in (await (await client.get("/api/profiles")).json())[
            "profiles"]]
        assert names == ["earn", "wheat"]
        resp = await client.delete("/api/profiles/earn", headers=auth())
        assert resp.status == 202
        assert (await client.delete("/api/profiles/zzz", headers=auth())).status == 404
        assert (await client.get("/api/profiles/earn")).status == 404

    with_client(state, settings, recorder, go)
    assert [(t, k) for t, k, _ in recorder.sent] == [("t.profiles", b"wheat"),
                                                      ("t.profiles", b"earn")]
    assert orjson.loads(recorder.sent[1][2]) == {"profile": "earn", "delete": True}


def test_hostile_document_text_is_escaped_everywhere(settings: Settings,
                                                      recorder: Recorder) -> None:
    state = WebState()
    fill(state, profile=HOSTILE, n=2, title=HOSTILE)
    state.on_dead_letter(orjson.dumps({"reason": "<b>bad</b>"}), 1.0)
    state.on_review_status(orjson.dumps({"review": HOSTILE, "r_hat": 3, "stop": True}), 1.0)

    async def go(client: TestClient) -> list[str]:
        from urllib.parse import quote

        pages = []
        for path in ("/", "/judge/" + quote(HOSTILE, safe="")):
            resp = await client.get(path)
            assert resp.status == 200, path
            csp = resp.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            pages.append(await resp.text())
        return pages

    dashboard, judge = with_client(state, settings, recorder, go)
    for html in (dashboard, judge):
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "<b>bad" not in html
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
        # the only script is the page's own, from /static, its URL carrying a digest of the
        # assets (a browser holding an older script fetches the new one after an upgrade)
        version = hashlib.sha256((CSS + JS).encode()).hexdigest()[:12]
        assert re.findall(r"<script[^>]*>", html) == [f'<script src="/static/app.js?v={version}" defer>']
        assert "&amp;amp;" in html
    assert judge.count('class="item"') == 2


def test_static_assets_and_unknown_paths(settings: Settings, recorder: Recorder) -> None:
    async def go(client: TestClient) -> None:
        js = await client.get("/static/app.js")
        assert js.status == 200 and js.content_type == "text/javascript"
        text = await js.text()
        assert "innerHTML" not in text and "eval(" not in text
        assert (await client.get("/static/other.js")).status == 404
        assert (await client.get("/judge/nope")).status == 404
        missing = await client.get("/api/pending")
        assert missing.status == 400

    with_client(WebState(), settings, recorder, go)


def test_openapi_document_is_valid_and_matches_the_routes(settings: Settings,
                                                          recorder: Recorder) -> None:
    async def go(client: TestClient) -> Any:
        resp = await client.get("/api/openapi.json")
        assert resp.status == 200 and resp.content_type == "application/json"
        return await resp.json()

    doc = with_client(WebState(), settings, recorder, go)
    assert doc == orjson.loads(orjson.dumps(openapi()))
    assert doc["openapi"].startswith("3.1") and doc["info"]["title"] and doc["info"]["version"]
    # the profile spec's schema names every field the wire record has
    spec = doc["components"]["schemas"]["ProfileSpec"]["properties"]
    assert set(spec) == {f.name for f in dataclasses.fields(ProfileSpec)}

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            return ([node["$ref"]] if "$ref" in node else []) + [
                r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(doc):
        target: Any = doc
        assert ref.startswith("#/")
        for part in ref[2:].split("/"):
            target = target[part]
    op_ids = []
    documented = set()
    for path, item in doc["paths"].items():
        params = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert params == set(re.findall(r"{(\w+)}", path)), path
        for method, op in item.items():
            if method == "parameters":
                continue
            documented.add((method.upper(), path))
            op_ids.append(op["operationId"])
            assert op["responses"], (method, path)
            for status in op["responses"]:
                assert re.fullmatch(r"[1-5]\d\d", status)
            if op.get("security"):
                assert "401" in op["responses"]
                assert set(op["security"][0]) <= set(doc["components"]["securitySchemes"])
    assert len(op_ids) == len(set(op_ids))
    routes = {(m, re.sub(r"{(\w+):[^}]+}", r"{\1}", p)) for m, p, _ in ROUTES
              if p.startswith("/api")}
    assert routes == documented


def test_openapi_passes_a_validator() -> None:
    validate(orjson.loads(orjson.dumps(openapi())))  # raises on an invalid document


def test_server_sent_events_stream_stats(settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> dict[str, Any]:
        resp = await client.get("/api/events")
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        buf = b""
        while b"\n\n" not in buf.split(b"event: stats", 1)[-1]:
            buf += await asyncio.wait_for(resp.content.readany(), 5)
        resp.close()
        event = buf.split(b"event: stats\n", 1)[1].split(b"\n\n", 1)[0]
        assert event.startswith(b"data: ")
        return dict(orjson.loads(event[6:]))

    snap = with_client(state, settings, recorder, go)
    assert snap["profiles"][0]["profile"] == "earn" and snap["profiles"][0]["delivered"] == 3


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"'
                    r'(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*)\})? '
                    r"(-?[0-9.e+-]+|[+-]Inf|NaN)$")


def test_metrics_text_format(settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state, profile='we"ird\nname\\', n=3)
    state.on_dead_letter(orjson.dumps({"reason": "bad_json"}), 1.0)
    state.set_lag({"documents": 7})

    async def go(client: TestClient) -> tuple[str, str]:
        resp = await client.get("/metrics")
        assert resp.status == 200
        return resp.headers["Content-Type"], await resp.text()

    ctype, text = with_client(state, settings, recorder, go)
    assert ctype.startswith("text/plain; version=0.0.4")
    assert text.endswith("\n")
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in {"counter", "gauge", "histogram"}
            types[name] = kind
        elif line.startswith("# HELP "):
            continue
        else:
            m = SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            base = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
            assert m.group(1) in types or base in types, line
    assert types["sift_documents_total"] == "counter"
    assert types["sift_scoring_latency_seconds"] == "histogram"
    assert 'sift_profile_delivered{profile="we\\"ird\\nname\\\\"} 3' in text
    assert 'sift_dead_letters_total{reason="bad_json"} 1' in text
    assert 'sift_consumer_lag{topic="documents"} 7' in text
    assert 'sift_events_per_second{kind="decisions"}' in text
    buckets = [int(v) for v in re.findall(
        r'^sift_scoring_latency_seconds_bucket\{le="[^"]+"\} (\d+)$', text, re.M)]
    assert buckets == sorted(buckets) and buckets[-1] == 3
    assert re.search(r'le="\+Inf"\} 3$', text, re.M)
    assert "sift_scoring_latency_seconds_count 3" in text


# -- found by breaking the web side on purpose (thirty-seventh session) ----------------------
class SlowRecorder(Recorder):
    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await asyncio.sleep(0.05)
        await super().send(topic, key, value)


def test_two_judgments_of_one_document_at_once_publish_one(settings: Settings) -> None:
    state, slow = WebState(), SlowRecorder()
    fill(state)

    async def go(client: TestClient) -> list[int]:
        posts = [client.post("/api/judgments", headers=auth(),
                             json={"doc_id": "d0", "profile": "earn", "relevant": rel})
                 for rel in (True, False)]
        return sorted([r.status for r in await asyncio.gather(*posts)])

    assert with_client(state, settings, slow, go) == [202, 409]
    assert len(slow.sent) == 1 and not state.claimed


def test_a_judgment_id_used_for_another_document_is_refused(settings: Settings,
                                                            recorder: Recorder) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> list[int]:
        out = []
        for doc in ("d0", "d1"):
            resp = await client.post("/api/judgments", headers=auth(),
                                     json={"doc_id": doc, "profile": "earn", "relevant": True,
                                           "id": "dup"})
            out.append(resp.status)
        return out

    assert with_client(state, settings, recorder, go) == [202, 409]
    assert [orjson.loads(v)["doc_id"] for _, _, v in recorder.sent] == ["d0"]


def test_a_null_or_blank_id_or_judge_gets_the_defaults(settings: Settings, recorder: Recorder) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> None:
        for doc, extra in (("d0", {"id": None, "judge": None}), ("d1", {"id": " ", "judge": ""})):
            resp = await client.post("/api/judgments", headers=auth(),
                                     json={"doc_id": doc, "profile": "earn", "relevant": True, **extra})
            assert resp.status == 202

    with_client(state, settings, recorder, go)
    for _, _, value in recorder.sent:
        j = orjson.loads(value)
        assert j["id"].startswith("web-") and j["judge"] == "web"


def test_a_deleted_profile_stays_deleted_and_takes_no_judgment(settings: Settings,
                                                               recorder: Recorder) -> None:
    state = WebState()
    fill(state, profile="old")
    state.on_profile_spec(orjson.dumps({"profile": "old", "delete": True}))
    state.on_profile_state("old", None, time.time())
    late = {"doc_id": "d9", "profile": "old", "score": 1.0, "threshold": 0.5,
            "model_version": 1, "ts": time.time()}
    assert state.on_decision(orjson.dumps(late)) is None
    state.on_judgment(orjson.dumps({"doc_id": "d9", "profile": "gone", "relevant": True}), 0.0)

    async def go(client: TestClient) -> tuple[list[str], list[int]]:
        names = [p["profile"] for p in (await (await client.get("/api/profiles")).json())["profiles"]]
        codes = [(await client.post("/api/judgments", headers=auth(),
                                    json={"doc_id": "d0", "profile": p, "relevant": True})).status
                 for p in ("old", "gone")]
        return names, codes

    names, codes = with_client(state, settings, recorder, go)
    assert "old" not in names and codes == [404, 404] and recorder.sent == []
    assert state.skipped["deleted-profile"] == 1
    # created again, it is back
    state.on_profile_spec(orjson.dumps({"profile": "old", "query": "again"}))
    assert state.on_decision(orjson.dumps(late)) is not None


def test_an_out_of_range_count_in_a_record_is_skipped_not_a_500(settings: Settings,
                                                                recorder: Recorder) -> None:
    state = WebState()
    fill(state)
    state.on_profile_state("big", orjson.dumps({"state": {"model_version": 1e30}}), time.time())
    state.refresh_states(now=time.time() + 10)

    async def go(client: TestClient) -> list[int]:
        return [(await client.get(path)).status
                for path in ("/api/stats", "/api/profiles", "/api/profiles/big")]

    assert with_client(state, settings, recorder, go) == [200, 200, 200]
    assert state.skipped["profile-state"] == 1


def test_a_bagged_spec_shows_its_bags_before_its_state(settings: Settings,
                                                       recorder: Recorder) -> None:
    state = WebState()
    state.on_profile_spec(orjson.dumps({"profile": "bag", "query": "q", "bags": 3}))

    async def go(client: TestClient) -> Any:
        return await (await client.get("/api/profiles/bag")).json()

    assert with_client(state, settings, recorder, go)["bags"] == 3


def test_a_method_the_path_does_not_take_names_the_ones_it_does(settings: Settings,
                                                                recorder: Recorder) -> None:
    async def go(client: TestClient) -> Any:
        resp = await client.put("/api/judgments", headers=auth(), json={})
        return resp.status, resp.headers.get("Allow", "")

    status, allow = with_client(WebState(), settings, recorder, go)
    assert status == 405 and "POST" in allow


def test_a_review_is_judged_on_its_own_page_and_the_judgment_keyed_by_review(
        settings: Settings, recorder: Recorder) -> None:
    """A review's requests (``sift.requests``) are a judging queue like a profile's
    deliveries: its page lists them with batch and rank, a judgment is published keyed by
    the review, and the dashboard links the review to its page."""
    state = WebState()
    ids = review_fill(state, "wil son/x")
    state.on_review_status(orjson.dumps({"review": "wil son/x", "screened": 0, "found": 0,
                                         "r_hat": 0.0, "recall_estimate": 0.0, "stop": False,
                                         "ts": 1.0}), 1.0)

    async def go(client: TestClient) -> None:
        page = await client.get("/judge/wil%20son%2Fx")
        assert page.status == 200
        html = await page.text()
        assert "batch 1 · rank 1 · r0" in html and "Abstract r2" in html and "R-hat" in html
        assert "wilson disease" in html  # the review's query
        dash = await (await client.get("/")).text()
        assert 'href="/judge/wil%20son%2Fx"' in dash
        resp = await client.post("/api/judgments", headers=auth(),
                                 json={"doc_id": "r0", "profile": "wil son/x", "relevant": True})
        assert resp.status == 202, await resp.text()
        again = await client.post("/api/judgments", headers=auth(),
                                  json={"doc_id": "r0", "profile": "wil son/x", "relevant": True})
        assert again.status == 409
        pend = await (await client.get("/api/pending", params={"profile": "wil son/x"})).json()
        assert [it["doc_id"] for it in pend["items"]] == ids[1:]
        assert all(it["review"] and it["batch"] == 1 for it in pend["items"])
        stats = await (await client.get("/api/stats")).json()
        assert stats["profiles"] == [] and stats["reviews"][0]["pending"] == 2

    with_client(state, settings, recorder, go)
    assert len(recorder.sent) == 1
    topic, key, value = recorder.sent[0]
    j = orjson.loads(value)
    assert topic == "t.judgments" and key == b"wil son/x"
    assert (j["doc_id"], j["profile"], j["relevant"]) == ("r0", "wil son/x", True)


# -- operations audit, forty-fourth session -------------------------------------------------
@pytest.mark.parametrize(("body", "match"), [
    ({"profile": "rv1", "mode": "review", "query": "x y"},
     "reviews are created with `sift review start`"),
    ({"profile": "rv1", "mode": 1, "query": "x y"}, "reviews are created with `sift review start`"),
    ({"profile": "rv1", "query": "x y", "positive": ["r5"]}, "unknown field 'positive'"),
    ({"profile": "rv1", "query": "x y", "a": 1, "b": 2}, "unknown fields 'a', 'b'"),
])
def test_a_review_spec_or_an_unknown_field_is_not_turned_into_a_profile(
        settings: Settings, recorder: Recorder, body: dict[str, Any], match: str) -> None:
    """``POST /api/profiles`` published a review spec as a standing profile (``mode``
    dropped), and any unknown field silently."""

    async def go(client: TestClient) -> tuple[int, str]:
        resp = await client.post("/api/profiles", headers=auth(), json=body)
        return resp.status, (await resp.json())["error"]

    state = WebState()
    status, message = with_client(state, settings, recorder, go)
    assert status == 400 and match in message and "\n" not in message, message
    assert recorder.sent == [] and not state.known("rv1") and not state.is_review("rv1")


@pytest.mark.parametrize("limit", ["1_0", "\uff15", " 2 ", "+5", "-1", "0", "1001", "10000",
                                   "00001", "", "5.0", "\u0665"])
def test_pending_limit_takes_only_ascii_digits_in_range(settings: Settings, recorder: Recorder,
                                                        limit: str) -> None:
    state = WebState()
    fill(state)

    async def go(client: TestClient) -> tuple[int, Any]:
        resp = await client.get("/api/pending", params={"profile": "earn", "limit": limit})
        return resp.status, await resp.json()

    status, body = with_client(state, settings, recorder, go)
    assert status == 400 and "limit" in body["error"], (limit, body)


def test_pending_of_an_unknown_name_is_404_and_known_ones_are_200(settings: Settings,
                                                                  recorder: Recorder) -> None:
    state = WebState()
    fill(state)
    review_fill(state, "wilson")

    async def go(client: TestClient) -> list[tuple[int, Any]]:
        out = []
        for params in ({"profile": "nosuch"}, {"profile": "earn", "limit": "2"},
                       {"profile": "wilson", "limit": "0001"}, {"profile": "earn", "limit": "1000"}):
            resp = await client.get("/api/pending", params=params)
            out.append((resp.status, await resp.json()))
        return out

    (s404, b404), (s1, b1), (s2, b2), (s3, _) = with_client(state, settings, recorder, go)
    assert s404 == 404 and b404["error"] == "no profile or review 'nosuch'"
    assert s1 == 200 and [it["doc_id"] for it in b1["items"]] == ["d0", "d1"]
    assert s2 == 200 and len(b2["items"]) == 1 and s3 == 200
    assert "404" in openapi()["paths"]["/api/pending"]["get"]["responses"]


def test_the_event_stream_and_a_page_404_have_the_security_headers(settings: Settings,
                                                                   recorder: Recorder) -> None:
    """``/api/events`` prepared its response before the middleware could add them."""

    async def go(client: TestClient) -> list[Any]:
        resp = await client.get("/api/events")
        headers = dict(resp.headers)
        resp.close()
        missing = await client.get("/nope")
        return [headers, dict(missing.headers)]

    for headers in with_client(WebState(), settings, recorder, go):
        assert headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["X-Frame-Options"] == "DENY" and headers["Referrer-Policy"] == "no-referrer"


def test_a_409_says_which_verdict_counts_and_the_page_does_not_call_it_saved(
        settings: Settings, recorder: Recorder) -> None:
    """The judging page showed "Relevant: <doc>" for a 409, even when the document had been
    judged the other way (by someone else) and the click changed nothing."""
    from sift.web import assets

    state = WebState()
    fill(state)
    review_fill(state, "wilson")
    state.on_judgment(orjson.dumps({"doc_id": "d0", "profile": "earn", "relevant": False}), 1.0)
    state.on_judgment(orjson.dumps({"doc_id": "r0", "profile": "wilson", "relevant": True}), 1.0)

    async def go(client: TestClient) -> list[Any]:
        out = []
        for body in ({"doc_id": "d0", "profile": "earn", "relevant": True},
                     {"doc_id": "r0", "profile": "wilson", "relevant": False},
                     {"doc_id": "d0", "profile": "earn", "relevant": False, "id": "x1"}):
            resp = await client.post("/api/judgments", headers=auth(), json=body)
            out.append((resp.status, await resp.json()))
        return out

    (s1, b1), (s2, b2), (s3, b3) = with_client(state, settings, recorder, go)
    assert (s1, b1["relevant"]) == (409, False) and "already judged" in b1["error"]
    assert (s2, b2["relevant"]) == (409, True)
    assert s3 == 409 and b3["relevant"] is False and recorder.sent == []
    validate(orjson.loads(orjson.dumps(openapi())))
    js = assets.JS
    assert "r.status === 202 || r.status === 409" not in js
    assert "Already judged" in js and "body.relevant" in js
