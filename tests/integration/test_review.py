"""Review mode against a real broker: a simulated reviewer reaches the stop signal.

A ``sift worker`` process runs the review; the test plays the client: it creates the
review on the profiles topic, sends a screening collection (Donners_2021, 258 records)
on the documents topic with ``metadata.review``, answers every judgment request on
``<prefix>requests`` from the gold labels via the judgments topic, and reads
``<prefix>review-status`` until the stop signal.
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from sift.agents.harness import WorkerProcess, read_all, send_all, wait_for
from sift.kafkaclient import consumer, producer
from sift.settings import Settings
from sift.topics.review import decode_request, decode_status

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "screening" / "Donners_2021.jsonl.gz"
NAME = "donners"
PARAMS = {"draws": 20, "n_top": 10, "min_batches": 5, "target_recall": 0.9,
          "estimator": "bound", "random_state": 0}


@pytest.fixture
def settings(review_settings: Settings) -> Settings:
    return review_settings


def load() -> tuple[list[dict[str, object]], dict[str, bool]]:
    with gzip.open(DATA, "rb") as fh:
        rows = [orjson.loads(line) for line in fh if line.strip()]
    rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
    docs = [{"id": str(r["id"]), "title": r.get("title") or "", "text": "",
             "abstract": r.get("abstract") or "", "metadata": {"review": NAME}} for r in rows]
    return docs, {str(r["id"]): bool(r["label"]) for r in rows}


def test_simulated_reviewer_reaches_the_stop_signal(settings: Settings) -> None:
    docs, gold = load()
    w = WorkerProcess(settings, "w1").start()
    try:
        w.wait_ready()
        statuses = consumer(settings, settings.topic("review-status"))
        requests = consumer(settings, settings.topic("requests"))
        prod = producer(settings)
        title = orjson.loads((DATA.parent / "reviews.json").read_bytes())["Donners_2021"]
        spec = {"profile": NAME, "mode": "review", "query": title, "params": PARAMS}
        bad = {"profile": "nope", "mode": "review"}  # no query: a dead letter
        prod.send(settings.topic("profiles"), key=b"nope", value=orjson.dumps(bad))
        prod.send(settings.topic("profiles"), key=NAME.encode(), value=orjson.dumps(spec))
        prod.flush()

        def poll(cons: object) -> list[bytes]:
            out = []
            for records in cons.poll(timeout_ms=200).values():  # type: ignore[attr-defined]
                out.extend(r.value for r in records)
            return out

        wait_for(lambda: poll(statuses), 60, "the review's first status")
        send_all(settings, settings.topic("documents"),
                 [(None, orjson.dumps({"documents": docs[i:i + 100]}))
                  for i in range(0, len(docs), 100)])
        last = None
        judged: set[str] = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for value in poll(requests):
                req = decode_request(value)
                assert req.review == NAME and req.doc_id in gold
                if req.doc_id in judged:
                    continue
                judged.add(req.doc_id)
                j = {"id": f"{NAME}/{req.doc_id}", "doc_id": req.doc_id, "profile": NAME,
                     "relevant": gold[req.doc_id]}
                prod.send(settings.topic("judgments"), key=NAME.encode(), value=orjson.dumps(j))
            prod.flush()
            for value in poll(statuses):
                last = decode_status(value)
            if last is not None and last.stop:
                break
        assert last is not None and last.stop, f"no stop signal; last status {last}"
        assert last.documents == len(docs) and last.pending == 0
        assert last.screened == len(judged)
        relevant = sum(gold.values())
        assert last.found == sum(gold[d] for d in judged) <= relevant
        assert last.recall_lower >= PARAMS["target_recall"] or last.complete
        letters = [orjson.loads(v) for _, v, _, _ in
                   read_all(settings, settings.topic("dead-letters"), idle=1.0)]
        assert [d["reason"] for d in letters] == ["missing_query"]
        prod.close()
        statuses.close()
        requests.close()
    finally:
        w.stop()
