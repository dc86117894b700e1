"""What a vector copy costs, per document, through a real broker: the floor of scale-out.

With two workers, a document routed by one is scored there for the profile shards it
holds and sent once, as a vector copy, to the other for the rest (``Service.shard_copies``;
docs/streaming.md). This measures that copy's cost alone, in one process, outside Faust:
the router's part (encode the payload, ``AIOKafkaProducer.send`` it and wait for the
broker's acknowledgement) and the receiver's (fetch it with ``AIOKafkaConsumer.getmany``,
CRCs checked as the worker's consumer does, decode it, store its rows for judgments).
The figure is this process's CPU time (``getrusage``: Python, numpy and the kernel's
socket work on both sides; the broker's own CPU is not in it), per document. Faust's
own layers on both sides (its producer buffer, its consumer thread, its per-message
delivery, the shard agent's batching) come on top of it in a worker, so this is a
lower bound of what a copy costs two workers.

Two payloads:

- ``weights``: format 2 of :func:`sift.agents.service.encode_vector_batch`, what the
  workers sent until the twentieth session (float64 weights, int32 columns: 12 bytes a
  non-zero);
- ``counts``: format 3, what they send now, the documents' term counts (uint8, or wider
  when a count needs it) and columns, 5 bytes a non-zero, weighed on receipt by the
  receiver's vectorizer (:meth:`Vectorizer.weigh`); the benchmark checks that the
  vectors come back equal to the router's bit for bit.

Both are cut and encoded by :meth:`Service.copies`, as the router does, and decoded by
:func:`read_vector_batch`, as the receiver does.

``encode_us`` and ``decode_us`` are the same steps without the broker (the payloads
encoded, and decoded and stored, in memory), so ``transport`` = total - those.

    .venv/bin/python benchmarks/copy_cost.py                  # 200,000 documents, 3 rounds
    .venv/bin/python benchmarks/copy_cost.py --documents 50000 --rounds 1 --out /tmp/c.json

Writes ``benchmarks/results/copy_cost.json``: per payload, the bytes a document, and the
medians over the rounds (the formats by turns within each round) of the router's and the
receiver's CPU per document.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import gzip
import resource
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402

from sift.agents.app import MAX_STATE_BYTES, PRODUCER_BATCH_BYTES  # noqa: E402
from sift.agents.service import (  # noqa: E402
    DocumentStore,
    Service,
    TrainingSet,
    default_corpus,
    read_vector_batch,
)
from sift.devbroker import DevBroker, bootstrap_servers  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "copy_cost.json"
#: documents a routing step vectorizes at once (a worker's step is up to
#: SIFT_BATCH_BYTES of messages; about 500 documents of 100 a message here)
STEP = 500


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ----------------------------------------------------------------------------- the rounds
async def send_all(bootstrap: str, topic: str, payloads: list[bytes]) -> float:
    """CPU seconds to send ``payloads`` and have them acknowledged (acks=all, as Faust)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                                max_batch_size=PRODUCER_BATCH_BYTES,
                                max_request_size=MAX_STATE_BYTES)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", partition=0)
        c0 = cpu()
        futures = [await producer.send(topic, p, partition=0) for p in payloads]
        await asyncio.gather(*futures)
        return cpu() - c0
    finally:
        await producer.stop()


async def receive_all(bootstrap: str, topic: str, n: int,
                      handle: Callable[[bytes], None]) -> float:
    """CPU seconds to fetch ``n`` payloads (after the warm-up record) and handle each."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", check_crcs=True,
                                max_partition_fetch_bytes=MAX_STATE_BYTES,
                                fetch_max_bytes=4 * MAX_STATE_BYTES)
    await consumer.start()
    try:
        first = await consumer.getone()  # the warm-up record: connection and metadata
        assert first.value == b"warm-up"
        got = 0
        c0 = cpu()
        while got < n:
            batch = await consumer.getmany(timeout_ms=2000)
            if not batch:
                raise SystemExit(f"copy_cost: {got} of {n} payloads came back")
            for records in batch.values():
                for r in records:
                    handle(r.value)
                    got += 1
        return cpu() - c0
    finally:
        await consumer.stop()


def create_topic(bootstrap: str, name: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs={
            "max.message.bytes": str(MAX_STATE_BYTES)})])
    finally:
        admin.close()


def one_round(bootstrap: str, name: str, payloads: list[bytes], n_docs: int,
              decode: Callable[[bytes], tuple[list[str], sp.csr_matrix]],
              encode_s: float) -> dict[str, float]:
    topic = f"sift-copy-cost-{name}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    send_s = asyncio.run(send_all(bootstrap, topic, payloads))
    store = DocumentStore(100_000)

    def handle(value: bytes) -> None:
        ids, X = decode(value)
        store.put(ids, X)

    recv_s = asyncio.run(receive_all(bootstrap, topic, len(payloads), handle))
    local = DocumentStore(100_000)  # the same decoding and storing without the broker
    c0 = cpu()
    for p in payloads:
        ids, X = decode(p)
        local.put(ids, X)
    decode_s = cpu() - c0
    us = 1e6 / n_docs
    return {"router_us": round((send_s + encode_s) * us, 3), "encode_us": round(encode_s * us, 3),
            "receiver_us": round(recv_s * us, 3), "decode_us": round(decode_s * us, 3),
            "total_us": round((send_s + encode_s + recv_s) * us, 3),
            "transport_us": round((send_s + recv_s - decode_s) * us, 3)}


def texts(n: int) -> list[str]:
    path = ROOT / "data" / "reuters21578" / "test.jsonl.gz"
    with gzip.open(path, "rb") as f:
        corpus = [t for t in (orjson.loads(line).get("text", "") for line in f) if t]
    return [corpus[i % len(corpus)] for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--documents", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--broker", default="", help="kafka://host:port (default: start a local one)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if args.documents < STEP or args.rounds < 1:
        p.error(f"--documents must be >= {STEP} and --rounds >= 1, "
                f"got {args.documents} and {args.rounds}")
    print("vectorizing", flush=True)
    service = Service(TrainingSet.load(default_corpus()))
    vec = service.vectorizer
    docs = texts(args.documents)
    # each routing step's copies for one other shard, cut and encoded as the router does
    # (Service.copies): of the weights (the earlier format) and of the term counts
    routed: list[sp.csr_matrix] = []
    encode_s = {"weights": 0.0, "counts": 0.0}
    payloads: dict[str, list[bytes]] = {"weights": [], "counts": []}
    for a in range(0, len(docs), STEP):
        part = docs[a:a + STEP]
        ids = [f"d{a + i}" for i in range(len(part))]
        X, counts = vec.transform_counts(part)
        routed.append(X)
        for name, c in (("weights", None), ("counts", counts)):
            c0 = cpu()
            payloads[name] += [p for _, p in service.copies(ids, X, c, [1])]
            encode_s[name] += cpu() - c0
    n_docs = len(docs)
    # the counts come back as the router's vectors, bit for bit
    back = sp.vstack([read_vector_batch(p, vec)[1] for p in payloads["counts"]], format="csr")
    want = sp.vstack(routed, format="csr")
    if not (np.array_equal(back.indptr, want.indptr) and np.array_equal(back.indices, want.indices)
            and np.array_equal(back.data, want.data)):
        raise SystemExit("copy_cost: re-weighed counts differ from the router's vectors")
    formats: dict[str, tuple[list[bytes], Callable[[bytes], Any], float]] = {
        name: (payloads[name], lambda b: read_vector_batch(b, vec)[:2], encode_s[name])
        for name in ("weights", "counts")}
    broker = None
    if args.broker:
        bootstrap = bootstrap_servers(args.broker)
    else:
        broker = DevBroker.throwaway("sift-copy-cost-")
        bootstrap = broker.bootstrap
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in formats}
    try:
        for r in range(args.rounds):
            for name, (sent, decode, encoding_s) in formats.items():
                got = one_round(bootstrap, name, sent, n_docs, decode, encoding_s)
                rounds[name].append(got)
                print(f"round {r + 1} {name}: {got}", flush=True)
    finally:
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data, ignore_errors=True)
    result: dict[str, Any] = {
        "benchmark": "copy_cost",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python benchmarks/copy_cost.py " + " ".join(sys.argv[1:] if argv is None
                                                                else argv),
        "machine": {"cpus": os.cpu_count(), "load": list(os.getloadavg())},
        "documents": n_docs,
        "payloads": {name: len(p) for name, p in payloads.items()},
        "nonzeros_per_document": round(sum(X.nnz for X in routed) / n_docs, 1),
        "formats": {},
    }
    for name, (sent, _, _) in formats.items():
        keys = rounds[name][0].keys()
        result["formats"][name] = {
            "bytes_per_document": round(sum(map(len, sent)) / n_docs, 1),
            "rounds": rounds[name],
            **{f"median_{k}": round(statistics.median(x[k] for x in rounds[name]), 3)
               for k in keys}}
    result["counts_bit_identical"] = True
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
    print(orjson.dumps({k: {m: v for m, v in f.items() if m != "rounds"}
                        for k, f in result["formats"].items()},
                       option=orjson.OPT_INDENT_2).decode())
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
