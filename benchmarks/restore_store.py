"""What filling a starting worker's document store costs (``sift/agents/restore.py``).

A starting worker reads the newest documents back from the documents topic before it
joins its group, so that judgments of documents scored before it started still work.
This measures that read on a local broker: ``--documents`` Reuters-21578 test documents
(repeated with fresh ids), ``--per-message`` a message, on 4 partitions, the group's
offsets committed at the end of the topic (as a worker that had processed everything
leaves them), then :func:`restore_document_store` into the store of a fresh
``Service`` (capacity ``--capacity``, the default ``SIFT_RECENT_DOCUMENTS``), timed
(wall clock and this process's CPU), ``--repeat`` times.

    .venv/bin/python benchmarks/restore_store.py --documents 100000 --per-message 100
    .venv/bin/python benchmarks/restore_store.py --documents 100000 --per-message 1 \\
        --out benchmarks/results/restore_store_single.json
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.harness import send_all  # noqa: E402
from sift.agents.restore import restore_document_store  # noqa: E402
from sift.agents.service import Service, TrainingSet  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.devbroker import DevBroker  # noqa: E402
from sift.kafkaclient import ensure_topics  # noqa: E402
from sift.settings import Settings  # noqa: E402
from sift.topics.codecs import read_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

REUTERS = ROOT / "data" / "reuters21578"


def commit_ends(settings: Settings, topic: str, partitions: int) -> None:
    """Commit the group's offsets at the end of every partition of ``topic``."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    from sift.kafkaclient import client_config

    cons = KafkaConsumer(**client_config(settings), group_id=settings.app_id,
                         enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = cons.end_offsets(tps)
        cons.commit({tp: OffsetAndMetadata(ends[tp], "", -1) for tp in tps})
    finally:
        cons.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=100_000)
    ap.add_argument("--per-message", type=int, default=100)
    ap.add_argument("--capacity", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/restore_store.json")
    args = ap.parse_args(argv)

    test = [d.text for d in read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj)]
    docs = [{"id": f"r{k}-{uuid.uuid4().hex[:6]}", "text": test[k % len(test)]}
            for k in range(args.documents)]
    broker = DevBroker.throwaway("sift-restore-kafka-")
    try:
        settings = Settings(broker=broker.url, topic_prefix=f"rs{uuid.uuid4().hex[:6]}.",
                            app_id=f"sift-{uuid.uuid4().hex[:8]}", partitions=4,
                            recent_documents=args.capacity)
        topic = settings.topic("documents")
        ensure_topics(settings, [topic], 4)
        k = args.per_message
        if k == 1:
            msgs = [(d["id"].encode(), orjson.dumps(d)) for d in docs]
        else:
            msgs = [(docs[i]["id"].encode(), orjson.dumps({"documents": docs[i:i + k]}))
                    for i in range(0, len(docs), k)]
        t0 = time.monotonic()
        sent = send_all(settings, topic, msgs)
        print(f"produced {args.documents:,} documents in {sent:,} messages "
              f"in {time.monotonic() - t0:.1f} s", flush=True)
        commit_ends(settings, topic, 4)
        training = TrainingSet.load(None)
        runs: list[dict[str, Any]] = []
        for _ in range(args.repeat):
            service = Service(training, n_shards=4, recent_documents=args.capacity)
            c0, w0 = time.process_time(), time.monotonic()
            done = restore_document_store(settings, service)
            runs.append({"documents": done.documents, "messages": done.messages,
                         "seconds": round(time.monotonic() - w0, 3),
                         "cpu_seconds": round(time.process_time() - c0, 3),
                         "stored": len(list(service.store.ids()))})
            print(runs[-1], flush=True)
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    out = {"benchmark": "restore_store", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "command": "python benchmarks/restore_store.py " + " ".join(
               sys.argv[1:] if argv is None else argv),
           "documents_in_topic": args.documents, "documents_per_message": k,
           "capacity": args.capacity, "runs": runs,
           "median_seconds": statistics.median(r["seconds"] for r in runs),
           "median_cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs)}
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
