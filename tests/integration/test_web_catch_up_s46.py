"""A ``sift web`` started over topics that already hold profiles (forty-sixth session).

CI's secured-broker test failed once on a 404 "no profile 'wheat'" from a web that was
answering ``/api/stats`` but had not yet read the profile's spec: a restarted web called
profiles that exist "no profile" until it had read the topics. Until it has caught up
with what the topics held at its start it now answers 503 with ``Retry-After``, and its
``/api/stats`` says ``caught_up``.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from pathlib import Path

import orjson

from sift.agents.harness import WebProcess, send_all, wait_for
from sift.devbroker import free_port
from sift.kafkaclient import ensure_topics
from sift.settings import Settings

N_PROFILES = 2_000
N_DOC_MESSAGES = 200  # 100 documents each: reading them keeps the web busy a moment


def status_of(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After", "")


def test_a_web_started_over_existing_profiles_never_calls_one_missing(
        broker_url: str, topic_prefix: str, tmp_path: Path) -> None:
    settings = Settings(broker=broker_url, topic_prefix=topic_prefix,
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=2,
                        web_port=free_port(), api_token="t")
    ensure_topics(settings, [settings.topic(t) for t in ("profiles", "documents")])
    send_all(settings, settings.topic("documents"), [
        (None, orjson.dumps({"documents": [{"id": f"d{m}-{i}", "text": f"filler text {i} " * 20}
                                           for i in range(100)]}))
        for m in range(N_DOC_MESSAGES)])
    names = [f"p{i:04d}" for i in range(N_PROFILES)]
    send_all(settings, settings.topic("profiles"),
             [(n.encode(), orjson.dumps({"profile": n, "query": f"query of {n}"})) for n in names])

    web = WebProcess(settings, tmp_path / "web.log").start()
    try:
        def answering() -> bool:
            web.ready()  # raises if the process exited
            try:
                return status_of(web.url + "/api/stats")[0] == 200
            except urllib.error.URLError:  # not listening yet
                return False

        wait_for(answering, 60, "sift web answering")
        seen: list[tuple[int, str]] = []
        while not web.get("/api/stats")["caught_up"]:
            seen.append(status_of(web.url + f"/api/profiles/{names[-1]}"))
            assert len(seen) < 10_000, "sift web did not catch up"
        # before it caught up: the profile was served, or "not yet"; never "no profile"
        assert set(seen) <= {(200, ""), (503, "2")}, sorted(set(seen))
        assert web.get("/api/stats")["behind"] is None
        listed = [p["profile"] for p in web.get("/api/profiles")["profiles"]]
        assert listed == names
        assert status_of(web.url + f"/api/profiles/{names[-1]}") == (200, "")
        assert status_of(web.url + "/api/profiles/nosuch") == (404, "")
    finally:
        web.stop()
