"""``sift worker --web`` against the real broker: ``/metrics`` (Prometheus text) and
``/sift/stats`` (JSON) report what the worker did."""

from __future__ import annotations

import dataclasses
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import orjson
import pytest

from sift.agents.harness import WorkerProcess, send_all, total, wait_for
from sift.devbroker import free_port
from sift.settings import Settings
from sift.topics.records import Document

from .test_service import doc_messages, make_corpus, specs_for


def get(port: int, path: str, host: str | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as exc:  # a 4xx's body is read the same way
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def sample(text: str, name: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    assert len(lines) == 1, f"{name}: {lines}"
    return float(lines[0].split()[-1])


def test_worker_serves_metrics_and_stats(broker_url: str, topic_prefix: str, tmp_path: Path,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """With ``SIFT_LOG_JSON`` (the other broker tests log plain text): every line of the
    worker's log is a JSON object, Faust's own too (the worker ignored the setting)."""
    corpus, train, test = make_corpus(tmp_path_factory)
    port = free_port()
    settings = Settings(broker=broker_url, topic_prefix=topic_prefix,
                        app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=2,
                        data_dir=str(tmp_path / "w1"), idf_corpus=str(corpus), web_port=port)
    w = WorkerProcess(settings, "w1", args=["--web"], extra_env={"SIFT_LOG_JSON": "true"}).start()
    try:
        w.wait_ready()
        specs = specs_for(train, 1)
        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        wait_for(lambda: total([w], "profiles_created") == 1, 60, "profile created")
        docs: list[Document] = test[:50]
        send_all(settings, settings.topic("documents"), list(doc_messages(docs, 10)))
        send_all(settings, settings.topic("documents"), [(None, b"not json")])
        wait_for(lambda: total([w], "documents") == 50 and total([w], "dead_letters") == 1, 60,
                 "documents routed")

        def done(text: str) -> bool:
            # a document is counted when routed; it is scored after a round trip through
            # the shard topic, and its message's latency observed once the batch's sends
            # are on the broker: the page is sampled when both have caught up
            return (sample(text, "sift_worker_pairs_scored_total") >= 50
                    and sample(text, "sift_worker_document_latency_seconds_count") >= 6)

        wait_for(lambda: done(get(port, "/metrics")[2].decode()), 60, "documents scored")
        status, ctype, body = get(port, "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        text = body.decode()
        assert sample(text, "sift_worker_documents_total") == 50
        assert sample(text, "sift_worker_pairs_scored_total") == 50  # one profile
        assert sample(text, 'sift_worker_dead_letters_total{reason="bad_json"}') == 1
        assert sample(text, "sift_worker_profiles") == 1
        assert sample(text, "sift_worker_shards") == 2
        assert sample(text, "sift_worker_document_batch_seconds_count") >= 1
        # one latency per document message (5 of 10 documents, and the refused one)
        assert sample(text, "sift_worker_document_latency_seconds_count") == 6
        assert sample(text, "sift_worker_document_latency_seconds_sum") > 0
        status, ctype, body = get(port, "/sift/stats")
        stats = orjson.loads(body)
        assert status == 200 and stats["stats"]["documents"] == 50
        assert stats["partitions"] == [0, 1]
        # bound to 127.0.0.1, another name (a site rebound to it: DNS rebinding) is refused
        for path in ("/metrics", "/sift/stats"):
            status, ctype, body = get(port, path, host=f"evil.example:{port}")
            assert status == 403 and b"SIFT_WEB_ALLOWED_HOSTS" in body, (path, status, body)
            assert get(port, path, host=f"localhost:{port}")[0] == 200
    finally:
        w.stop()
    # a restarted worker (a fresh data dir: recovered from the changelog) says it holds the
    # profile before any document arrives: it said 0 until its first document
    again = WorkerProcess(dataclasses.replace(settings, data_dir=str(tmp_path / "w2")), "w2").start()
    try:
        again.wait_ready()
        wait_for(lambda: again.stats().get("profiles") == [specs[0]["profile"]], 60,
                 "the held profile loaded without a document")
        assert total([again], "documents") == 0
    finally:
        again.stop()
    lines = [line for line in w.log_path.read_text().splitlines() if line.strip()]
    records = [orjson.loads(line) for line in lines]  # each line parses
    assert all({"ts", "level", "logger", "message"} <= r.keys() for r in records)
    messages = [r["message"] for r in records]
    assert any(m.startswith("training corpus ") for m in messages)
    assert any("Worker]: Ready" in m for m in messages)
    assert any(m.startswith("dead letter bad_json from ") for m in messages)
