"""Decision latency of one worker, measured again and again on the same worker.

Starts one ``sift worker`` on a broker, creates ``--profiles`` profiles, scores one
warm-up document, then offers ``--rate`` documents a second (one a message) for
``--seconds``, ``--repeats`` times (the latency phase of ``stream_bench.py``). The
first phase is the one a fresh worker serves on fresh topics: a stall there (a
partition's first messages waiting for something) shows in its
``max_ms_per_half_second`` and p99, and not in the later ones. ``--runs`` does it all
again on new topics and a new worker, to count how often phase 0 stalls.
``--burst N`` sends N judgments at once ``--burst-at`` seconds into each phase (what a
burst of feedback does to the documents' latency). ``--split`` splits each document's
latency at the broker's append time (send -> append, append -> decision);
``--prefill-kib`` writes into every documents and decisions partition before the
worker starts, so that phase 0 is not the partitions' first few KiB.

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
    add_profiles,
    fresh_run,
    latency,
    load,
    start_workers,
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


def one_run(broker: str, corpus: Corpus, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Fresh topics and a fresh worker; ``args.repeats`` latency phases on it."""
    settings, run_dir = fresh_run(Settings.from_env(broker=broker), corpus, PARTITIONS, "lat")
    if args.split:
        append_time(settings)
    if args.prefill_kib:
        prefill(settings, corpus, args.prefill_kib)
    phases = []
    names = [str(s["profile"]) for s in corpus.specs(args.profiles)]  # as add_profiles names them
    workers = start_workers(settings, 1, run_dir)
    try:
        add_profiles(settings, corpus, workers, args.profiles)
        warm_up(settings, corpus, workers, args.profiles)
        time.sleep(args.idle)
        for i in range(args.repeats):
            r = latency(settings, corpus, workers, args.rate, args.seconds, 1, split=args.split,
                        burst=args.burst, burst_at=args.burst_at, burst_relevant=args.burst_relevant,
                        profiles=names)
            print(f"phase {i}: p50 {r.get('p50_ms')} p99 {r.get('p99_ms')} max {r.get('max_ms')} "
                  f"ms; slowest per half second {r.get('max_ms_per_half_second')}", flush=True)
            print(f"  broker's acknowledgement {r.get('max_ack_ms_per_half_second')}", flush=True)
            if args.split:
                print(f"  send -> append {r.get('max_send_to_append_ms_per_half_second')}\n"
                      f"  append -> decision {r.get('max_append_to_decision_ms_per_half_second')}",
                      flush=True)
            if args.burst:
                print(f"  burst {r.get('burst')}", flush=True)
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
    ap.add_argument("--broker-heap", default=None,
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
    ap.add_argument("--burst", type=int, default=0, metavar="N",
                    help="send N judgments at once --burst-at seconds into each phase (random "
                         "profiles, documents of the phase): the documents' latency meanwhile")
    ap.add_argument("--burst-at", type=float, default=2.0, metavar="S")
    ap.add_argument("--burst-relevant", type=float, default=0.0, metavar="SHARE",
                    help="share of the burst's judgments that are relevant (default none: "
                         "relevant ones lower the thresholds, and the extra deliveries are a "
                         "load of their own)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.burst and not 1.0 <= args.burst_at < args.seconds:
        ap.error(f"--burst-at must be in [1, --seconds), got {args.burst_at}")
    if not 0.0 <= args.burst_relevant <= 1.0:
        ap.error(f"--burst-relevant must be in [0, 1], got {args.burst_relevant}")
    extra = {}
    for item in args.broker_config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--broker-config takes KEY=VALUE, got {item!r}")
        extra[key] = value
    if (extra or args.broker_heap) and args.broker:
        ap.error("--broker-config and --broker-heap apply to the broker started here: "
                 "leave out --broker")
    heap = args.broker_heap or "1g"
    corpus = Corpus()
    result: dict[str, Any] = {
        "benchmark": "stream_latency", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python benchmarks/stream_latency.py " + " ".join(sys.argv[1:]),
        "load_at_start": load(), "profiles": args.profiles, "runs": []}
    own = None if args.broker else DevBroker.throwaway(prefix="sift-latency-kafka-",
                                                        heap=heap, extra_config=extra)
    try:
        broker = args.broker or f"kafka://{own.bootstrap}"  # type: ignore[union-attr]
        if own is not None:
            props = own.properties()
            result["broker_properties"] = {k: props.get(k, "broker default") for k in sorted(
                {"log.index.size.max.bytes", *extra})}
            result["broker_heap"] = heap
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
