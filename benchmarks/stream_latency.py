"""Decision latency of one worker, measured again and again on the same worker.

Starts one ``sift worker`` on a broker, creates ``--profiles`` profiles, scores one
warm-up document, then offers ``--rate`` documents a second (one a message) for
``--seconds``, ``--repeats`` times (the latency phase of ``stream_bench.py``). The
first phase is the one a fresh worker serves on fresh topics: a stall there (a
partition's first messages waiting for something) shows in its
``max_ms_per_half_second`` and p99, and not in the later ones. ``--runs`` does it all
again on new topics and a new worker, to count how often phase 0 stalls.
``--split`` splits each document's latency at the broker's append time (send ->
append, append -> decision); ``--prefill-kib`` writes into every documents and
decisions partition before the worker starts, so that phase 0 is not the partitions'
first few KiB.

Without ``--broker`` it starts a broker of its own (``sift.devbroker``, free ports, a
temporary data directory), with ``--broker-config KEY=VALUE`` overriding its
properties and ``--broker-heap`` its heap. The thirty-first session compared the
broker's segment index size (``log.index.size.max.bytes``, 10 MiB by default) and heap
this way, for example::

    python benchmarks/stream_latency.py --runs 5 --repeats 2 \\
        --broker-config log.index.size.max.bytes=1048576 \\
        --out benchmarks/results/stream_latency_s31_index1m.json
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from benchmarks.stream_bench import (  # noqa: E402
    Corpus,
    WorkerProcess,
    add_profiles,
    fresh_run,
    latency,
    load,
    start_workers,
    total,
    warm_up,
)
from sift.commands._common import write_json  # noqa: E402
from sift.devbroker import DevBroker  # noqa: E402
from sift.kafkaclient import bootstrap  # noqa: E402
from sift.settings import Settings  # noqa: E402

PARTITIONS = 4


def append_time(settings: Settings) -> None:
    """The documents topic stamps records with the broker's append time (LogAppendTime),
    so that a document's latency splits at the broker."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap(settings))
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, settings.topic("documents"),
                                            configs={"message.timestamp.type": "LogAppendTime"})])
    finally:
        admin.close()


def prefill(settings: Settings, corpus: Corpus, kib: int) -> None:
    """At least ``kib`` KiB into every partition of the documents topic (documents, which
    the worker then routes as a backlog before the warm-up ends) and of the decisions
    topic (padded records with ``doc_id`` ``"prefill"``, which the measurement skips:
    it reads the decisions from their end)."""
    from kafka import KafkaProducer

    prod = KafkaProducer(bootstrap_servers=bootstrap(settings))
    try:
        for part in range(PARTITIONS):
            written = 0
            while written < kib * 1024:
                doc = corpus.documents(1)[0]
                value = orjson.dumps(doc)
                prod.send(settings.topic("documents"), value, key=str(doc["id"]).encode(),
                          partition=part)
                written += len(value)
            pad = orjson.dumps({"doc_id": "prefill", "profile": "prefill", "pad": "x" * 1000})
            for _ in range(-(-kib * 1024 // len(pad))):
                prod.send(settings.topic("decisions"), pad, key=b"prefill", partition=part)
        prod.flush()
    finally:
        prod.close()


def split_latency(settings: Settings, corpus: Corpus, workers: list[WorkerProcess],
                  rate: float, seconds: float) -> dict[str, Any]:
    """The latency phase of ``stream_bench.latency`` (one document a message), with each
    document's time split at the broker's append (the documents topic on LogAppendTime):
    per half second, the slowest decision, the slowest send -> append (the benchmark's
    producer and the broker's produce handling) and the slowest append -> decision (the
    broker's fetch, the worker, up to the decision's send)."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    docs = corpus.documents(int(rate * seconds))
    sent: dict[str, float] = {}
    appended: dict[str, float] = {}
    decided: dict[str, float] = {}
    base = total(workers, "documents")
    doc_topic = settings.topic("documents")

    async def go() -> None:
        cons = AIOKafkaConsumer(settings.topic("decisions"), doc_topic,
                                bootstrap_servers=bootstrap(settings), auto_offset_reset="latest",
                                enable_auto_commit=False, group_id=None)
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap(settings), acks=1, linger_ms=0)
        await cons.start()
        await prod.start()
        await cons.seek_to_end()
        stop = asyncio.Event()

        async def collect() -> None:
            while not stop.is_set():
                for tp, records in (await cons.getmany(timeout_ms=100)).items():
                    for r in records:
                        ts = r.timestamp / 1000.0
                        if tp.topic == doc_topic:
                            appended[r.key.decode()] = ts
                            continue
                        doc = orjson.loads(r.value)["doc_id"]
                        if doc not in decided or ts < decided[doc]:
                            decided[doc] = ts

        task = asyncio.create_task(collect())
        start = time.time()
        for i, d in enumerate(docs):
            delay = start + i / rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            sent[str(d["id"])] = time.time()
            await prod.send(doc_topic, orjson.dumps(d), key=str(d["id"]).encode())
        await prod.flush()
        deadline = time.monotonic() + 120
        while total(workers, "documents") < base + len(docs) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)
        stop.set()
        await task
        await prod.stop()
        await cons.stop()

    asyncio.run(go())
    t0 = min(sent.values())
    halves: dict[int, list[float]] = {}
    lat = []
    for doc, at in sent.items():
        if doc not in decided or doc not in appended:
            continue
        k = int((at - t0) / 0.5)
        a, b = 1000 * (appended[doc] - at), 1000 * (decided[doc] - appended[doc])
        lat.append(a + b)
        h = halves.setdefault(k, [0.0, 0.0, 0.0])
        h[0], h[1], h[2] = max(h[0], a + b), max(h[1], a), max(h[2], b)
    lat.sort()
    if not lat:
        return {"documents": len(docs), "documents_with_decisions": 0}
    keys = range(max(halves) + 1)
    return {"documents": len(docs), "documents_with_decisions": len(lat),
            "p50_ms": round(lat[len(lat) // 2], 1),
            "p99_ms": round(lat[min(int(0.99 * len(lat)), len(lat) - 1)], 1),
            "max_ms": round(lat[-1], 1),
            "max_ms_per_half_second": [round(halves.get(k, [0, 0, 0])[0]) for k in keys],
            "max_send_to_append_ms_per_half_second": [round(halves.get(k, [0, 0, 0])[1])
                                                      for k in keys],
            "max_append_to_decision_ms_per_half_second": [round(halves.get(k, [0, 0, 0])[2])
                                                          for k in keys],
            "load": load()}


def one_run(broker: str, corpus: Corpus, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fresh topics and a fresh worker; ``args.repeats`` latency phases on it."""
    settings, run_dir = fresh_run(Settings.from_env(broker=broker), corpus, PARTITIONS, "lat")
    if args.split:
        append_time(settings)
    if args.prefill_kib:
        prefill(settings, corpus, args.prefill_kib)
    phases = []
    workers = start_workers(settings, 1, run_dir)
    try:
        add_profiles(settings, corpus, workers, args.profiles)
        warm_up(settings, corpus, workers, args.profiles)
        time.sleep(args.idle)
        for i in range(args.repeats):
            r = (split_latency(settings, corpus, workers, args.rate, args.seconds) if args.split
                 else latency(settings, corpus, workers, args.rate, args.seconds, 1))
            print(f"phase {i}: p50 {r.get('p50_ms')} p99 {r.get('p99_ms')} max {r.get('max_ms')} "
                  f"ms; slowest per half second {r.get('max_ms_per_half_second')}", flush=True)
            if not args.split:
                print(f"  broker's acknowledgement {r.get('max_ack_ms_per_half_second')}",
                      flush=True)
            if args.split:
                print(f"  send -> append {r.get('max_send_to_append_ms_per_half_second')}\n"
                      f"  append -> decision {r.get('max_append_to_decision_ms_per_half_second')}",
                      flush=True)
            phases.append(r)
    finally:
        for w in workers:
            w.stop()
    return phases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", default=None,
                    help="kafka://host:port (default: start a broker of its own)")
    ap.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a property of the broker started here (repeatable)")
    ap.add_argument("--broker-heap", default="1g",
                    help="JVM -Xmx of the broker started here (default 1g, as stream_bench.py's; "
                         "`python -m sift.devbroker start` gives 512m)")
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1,
                    help="times to start over on new topics with a new worker")
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds to wait between the warm-up and the first phase")
    ap.add_argument("--split", action="store_true",
                    help="split each latency at the broker's append time of the document")
    ap.add_argument("--prefill-kib", type=int, default=0, metavar="KIB",
                    help="write this many KiB into every documents and decisions partition "
                         "before the worker starts")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    extra = {}
    for item in args.broker_config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--broker-config takes KEY=VALUE, got {item!r}")
        extra[key] = value
    if (extra or args.broker_heap != "1g") and args.broker:
        ap.error("--broker-config and --broker-heap apply to the broker started here: "
                 "leave out --broker")
    corpus = Corpus()
    result: dict[str, Any] = {
        "benchmark": "stream_latency", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python benchmarks/stream_latency.py " + " ".join(sys.argv[1:]),
        "load_at_start": load(), "profiles": args.profiles, "runs": []}
    own = None if args.broker else DevBroker.throwaway(prefix="sift-latency-kafka-",
                                                        heap=args.broker_heap, extra_config=extra)
    try:
        broker = args.broker or f"kafka://{own.bootstrap}"  # type: ignore[union-attr]
        if own is not None:
            result["broker_properties"] = {k: own.properties()[k] for k in sorted(
                {"log.index.size.max.bytes", *extra})}
            result["broker_heap"] = args.broker_heap
        for n in range(args.runs):
            print(f"run {n}", flush=True)
            result["runs"].append({"phases": one_run(broker, corpus, args)})
    finally:
        if own is not None:
            own.stop()
            shutil.rmtree(own.data, ignore_errors=True)
    firsts = [run["phases"][0]["max_ms_per_half_second"][0] for run in result["runs"]
              if run["phases"] and run["phases"][0].get("max_ms_per_half_second")]
    result["phase0_first_half_second_max_ms"] = firsts
    print(f"phase 0, slowest decision of its first half second, run by run: {firsts}", flush=True)
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
