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

- ``weights``: what the workers send, :func:`sift.agents.service.encode_vector_batch`
  (float64 weights, int32 columns: 12 bytes a non-zero), decoded by
  :func:`read_vector_batch`;
- ``counts``: the alternative looked at in the nineteenth session, the documents' term
  counts (uint8, or uint16 when a count exceeds 255) and columns, 5 bytes a non-zero,
  re-weighted on receipt by the vectorizer's own arithmetic (log-TF, the corpus weights,
  the length normalisation); the benchmark checks that the re-weighted vectors equal the
  router's bit for bit.

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
import struct
import sys
import tempfile
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
    TrainingSet,
    chunks,
    default_corpus,
    encode_vector_batch,
    read_vector_batch,
)
from sift.devbroker import DevBroker, bootstrap_servers, free_port  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "copy_cost.json"
#: documents a routing step vectorizes at once (a worker's step is up to
#: SIFT_BATCH_BYTES of messages; about 500 documents of 100 a message here)
STEP = 500
COUNTS_MAGIC = b"SIFTCC\x01\x00"
_LEN = struct.Struct("<I")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ----------------------------------------------------------------------------- payloads
def encode_counts(ids: list[str], C: sp.csr_matrix) -> bytes:
    """Term counts and columns (``C`` as the vectorizer counts them: columns sorted)."""
    counts = C.data
    dtype = "<u1" if counts.size == 0 or counts.max() < 256 else "<u2"
    head = orjson.dumps({"ids": ids, "shape": list(C.shape), "nnz": int(C.nnz), "dtype": dtype})
    head += b" " * ((-(len(COUNTS_MAGIC) + _LEN.size + len(head))) % 8)
    return b"".join((COUNTS_MAGIC, _LEN.pack(len(head)), head,
                     np.asarray(C.indptr, dtype="<i8").tobytes(),
                     np.asarray(C.indices, dtype="<i4").tobytes(),
                     counts.astype(dtype).tobytes()))


def decode_counts(data: bytes, weigh: Callable[[sp.csr_matrix], sp.csr_matrix]
                  ) -> tuple[list[str], sp.csr_matrix]:
    k = len(COUNTS_MAGIC)
    if data[:k] != COUNTS_MAGIC:
        raise ValueError("not a counts payload")
    (hlen,) = _LEN.unpack_from(data, k)
    body = k + _LEN.size + hlen
    head = orjson.loads(data[k + _LEN.size:body])
    n, m = head["shape"]
    nnz = head["nnz"]
    indptr = np.frombuffer(data, dtype="<i8", count=n + 1, offset=body)
    indices = np.frombuffer(data, dtype="<i4", count=nnz, offset=body + 8 * (n + 1))
    counts = np.frombuffer(data, dtype=head["dtype"], count=nnz,
                           offset=body + 8 * (n + 1) + 4 * nnz)
    C = sp.csr_matrix((counts.astype(np.float64), indices, indptr), shape=(n, m))
    return head["ids"], weigh(C)


def weigher(training: TrainingSet) -> Callable[[sp.csr_matrix], sp.csr_matrix]:
    """The vectorizer's weighting of counts, the steps of ``Vectorizer.transform`` after
    counting, in the same order (checked bit for bit against it below)."""
    vec = training.vectorizer
    if vec.tf != "log" or not vec.normalize:
        raise SystemExit("copy_cost: written for log-TF with length normalisation")
    weights = vec.feature_weights()

    def weigh(C: sp.csr_matrix) -> sp.csr_matrix:
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        np.log(C.data, out=C.data)
        C.data += 1.0
        C.data *= weights[C.indices]
        norms = np.sqrt(np.bincount(rows, weights=C.data**2, minlength=C.shape[0]))
        norms[norms == 0] = 1.0
        C.data /= norms[rows]
        return C

    return weigh


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
    training = TrainingSet.load(default_corpus())
    vec = training.vectorizer
    weigh = weigher(training)
    docs = texts(args.documents)
    steps = []  # (ids, X, C): each routing step's vectors and counts, cut as the router cuts
    for a in range(0, len(docs), STEP):
        part = docs[a:a + STEP]
        ids = [f"d{a + i}" for i in range(len(part))]
        X = vec.transform(part)
        C, _ = vec._count(part)
        for (cids, cX) in chunks(ids, X):
            lo, hi = ids.index(cids[0]), ids.index(cids[-1]) + 1
            steps.append((cids, cX, C[lo:hi]))
    n_docs = sum(len(s[0]) for s in steps)
    # the counts payload gives the router's vectors back bit for bit
    for cids, cX, cC in steps:
        _, back = decode_counts(encode_counts(cids, cC), weigh)
        if not (np.array_equal(back.indptr, cX.indptr) and np.array_equal(back.indices, cX.indices)
                and np.array_equal(back.data, cX.data)):
            raise SystemExit("copy_cost: re-weighted counts differ from the router's vectors")
    c0 = cpu()
    weights_payloads = [encode_vector_batch(cids, cX, shards=[1]) for cids, cX, _ in steps]
    weights_encode = cpu() - c0
    c0 = cpu()
    counts_payloads = [encode_counts(cids, cC) for cids, _, cC in steps]
    counts_encode = cpu() - c0
    formats: dict[str, tuple[list[bytes], Callable[[bytes], Any], float]] = {
        "weights": (weights_payloads, lambda b: read_vector_batch(b)[:2], weights_encode),
        "counts": (counts_payloads, lambda b: decode_counts(b, weigh), counts_encode)}
    broker = None
    if args.broker:
        bootstrap = bootstrap_servers(args.broker)
    else:
        broker = DevBroker(port=free_port(), controller_port=free_port(),
                           data_dir=Path(tempfile.mkdtemp(prefix="sift-copy-cost-")),
                           die_with_parent=True, heap="1g")
        print(f"starting a broker on {broker.bootstrap}", flush=True)
        broker.start(timeout=180)
        bootstrap = broker.bootstrap
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in formats}
    try:
        for r in range(args.rounds):
            for name, (payloads, decode, encode_s) in formats.items():
                got = one_round(bootstrap, name, payloads, n_docs, decode, encode_s)
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
        "payloads": len(steps),
        "nonzeros_per_document": round(sum(s[1].nnz for s in steps) / n_docs, 1),
        "formats": {},
    }
    for name, (payloads, _, _) in formats.items():
        keys = rounds[name][0].keys()
        result["formats"][name] = {
            "bytes_per_document": round(sum(map(len, payloads)) / n_docs, 1),
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
