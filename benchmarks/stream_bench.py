"""End-to-end speed of the streaming service through a real local Kafka broker.

    .venv/bin/python benchmarks/stream_bench.py                   # everything (~10 min)
    .venv/bin/python benchmarks/stream_bench.py --profiles 100 --skip-two-workers
    .venv/bin/python benchmarks/stream_bench.py --broker kafka://127.0.0.1:9092

Starts its own broker (free ports, temporary data dir) unless ``--broker`` is given.
Documents are Reuters-21578 test documents (about 760 characters of text each),
cycled with fresh ids; the IDF comes from the first 2,000 training documents.
Every figure is measured from outside, through Kafka, with ``sift worker``
subprocesses (the figure is the worker's own counter in ``stats.json``,
sampled every 0.25 s, and its CPU time from ``/proc``).

Measured, in one run and on the same broker:

1. ``aiokafka-getmany`` and ``faust-default`` (pass-through agent) reading the
   single-document topic, with :mod:`benchmarks.kafka_throughput`'s own code;
2. for 100 and 1,000 profiles: sift with one document per message, sift with
   100 documents per message, decision latency at 1,000 documents/s offered
   (one document per message), and judgments applied per second;
3. one worker against two in one group on 4 partitions (100 documents a message),
   started together on a backlog and steady, at the profile counts of
   ``--two-workers`` (e.g. ``100:300000,1000:120000``).

``--worker-cores 0.5`` caps every worker process at half a core (a cgroup each, needs
root): each worker then has the same fixed CPU budget whether one or two run, and the
broker the rest of the machine, as with a worker per host (:mod:`cpucap`).

Results go to ``benchmarks/results/stream_bench.json``. The machine has 2 cores
shared with the broker (and, during development, with other work): read the
wall-clock rates with ``load`` and compare CPU microseconds per document.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "benchmarks")):
    if p not in sys.path:
        sys.path.insert(0, p)

from cpucap import CpuCap, CpuCapError  # noqa: E402

from sift.agents.app import prepare_topics  # noqa: E402
from sift.agents.harness import WorkerProcess, send_all, total, wait_for  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.devbroker import DevBroker  # noqa: E402
from sift.settings import Settings  # noqa: E402
from sift.topics.codecs import read_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "stream_bench.json"
REUTERS = ROOT / "data" / "reuters21578"
TICK = 0.05



def distinct_pairs(rng: random.Random, docs: Sequence[str], profiles: Sequence[str], n: int,
                   used: set[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """``n`` random (document, profile) pairs, none twice (nor in ``used``, which gets
    them): the workers keep one label per document and profile, so a pair judged again
    is a repeat or a correction, not another judgment (forty-seventh session)."""
    seen: set[tuple[str, str]] = set() if used is None else used
    if n > len(docs) * len(profiles) - len(seen):
        raise ValueError(f"{n} distinct pairs wanted of {len(docs)} documents and "
                         f"{len(profiles)} profiles ({len(seen)} used)")
    out: list[tuple[str, str]] = []
    while len(out) < n:
        pair = (rng.choice(docs), rng.choice(profiles))
        if pair not in seen:
            seen.add(pair)
            out.append(pair)
    return out

def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core; /proc/stat: all but
    idle and iowait) since boot: over a window, busy seconds / wall seconds is the
    number of cores in use, whoever used them (workers, broker, this script)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Corpus:
    def __init__(self, train_n: int = 2000) -> None:
        train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))[:train_n]
        self.test = [Document(d.id, d.text, d.title, d.date)
                     for d in read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj)]
        self.dir = Path(tempfile.mkdtemp(prefix="sift-bench-"))
        # removed when the corpus is collected or the process exits (each run left
        # its ~1 MB training file behind until the twenty-seventh session)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, True)
        self.idf = self.dir / "train.jsonl.gz"
        with gzip.open(self.idf, "wb") as fh:
            for d in train:
                fh.write(orjson.dumps(d.to_obj()) + b"\n")
        words = sorted({w for d in train[:500] for w in d.text.lower().split()
                        if w.isalpha() and len(w) > 4})
        self.words = words
        self.serial = 0

    def documents(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            d = self.test[self.serial % len(self.test)]
            out.append({"id": f"{d.id}-{self.serial}", "text": d.text, "title": d.title})
            self.serial += 1
        return out

    def specs(self, n: int, seed: int = 0, bags: int = 1) -> list[dict[str, Any]]:
        """``n`` query-only profile specs (bagged profiles of ``bags`` members when > 1)."""
        rng = random.Random(seed)
        return [{"profile": f"p{i:04d}", "query": " ".join(rng.sample(self.words, 3)),
                 **({"bags": bags} if bags > 1 else {})}
                for i in range(n)]


def single(docs: list[dict[str, Any]]) -> list[tuple[bytes | None, bytes]]:
    return [(str(d["id"]).encode(), orjson.dumps(d)) for d in docs]


def batched(docs: list[dict[str, Any]], size: int = 100) -> list[tuple[bytes | None, bytes]]:
    return [(str(docs[i]["id"]).encode(), orjson.dumps({"documents": docs[i:i + size]}))
            for i in range(0, len(docs), size)]


def produce_fast(settings: Settings, topic: str,
                 msgs: list[tuple[bytes | None, bytes]]) -> float:
    """Send with aiokafka (kafka-python computes CRC32C in pure Python: ~2 MB/s); seconds."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    from sift.kafkaclient import bootstrap

    async def go() -> float:
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap(settings), acks=1, linger_ms=20,
                                max_batch_size=1024 * 1024, max_request_size=8 * 1024 * 1024)
        await prod.start()
        t0 = time.monotonic()
        try:
            for key, value in msgs:
                await prod.send(topic, value, key=key)
            await prod.flush()
        finally:
            await prod.stop()
        return time.monotonic() - t0

    return asyncio.run(go())


#: the local broker's process, when this script started it (its CPU over each window)
BROKER_PID: int | None = None
# --worker-cores: every worker process capped at this many cores (a cgroup each)
CAP: CpuCap | None = None
# --pin-workers: worker i runs on CPU i mod the CPU count (all its threads)
PIN = False
#: members of each profile (--bags; 1: plain profiles)
BAGS = 1


def pin(pid: int, cpu: int) -> int:
    """Pin every thread of process ``pid`` to CPU ``cpu``; how many threads were pinned
    (threads a pinned thread starts later inherit its CPU)."""
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(int(task.name), {cpu})
            n += 1
    return n


def broker_cpu() -> float:
    return cpu_seconds(BROKER_PID) if BROKER_PID else 0.0


def measure(workers: list[WorkerProcess], key: str, base: int, target: int,
            timeout: float = 300.0) -> dict[str, Any]:
    """Rate of a counter from its first move past ``base`` until it reaches ``target``."""
    pids = [w.proc.pid for w in workers if w.proc is not None]
    t0 = c0 = None
    first = last = base
    moved = time.monotonic()
    t1 = c1 = m0 = m1 = b0 = b1 = 0.0
    deadline = time.monotonic() + timeout
    samples: list[tuple[float, int, float]] = []  # (time, count, workers' CPU) at each move
    while True:
        now = total(workers, key)
        if t0 is None and now > base:
            t0, c0, first = time.monotonic(), sum(cpu_seconds(p) for p in pids), now
            m0 = m1 = machine_busy_seconds()
            b0 = b1 = broker_cpu()
        if now != last:
            last, moved = now, time.monotonic()
            t1, c1 = moved, sum(cpu_seconds(p) for p in pids)
            samples.append((t1, now, c1))
            if t0 is not None:
                m1 = machine_busy_seconds()
                b1 = broker_cpu()
        if now >= target:
            break
        # a few messages can stay in Faust's take() buffer (see docs/streaming.md): stop
        # when the counter is still for 15 s past 99 % and report what is missing
        if (now - base >= 0.99 * (target - base) and time.monotonic() - moved > 15) \
                or time.monotonic() > deadline:
            break
        time.sleep(TICK)
    if t0 is None:
        raise TimeoutError(f"{key}: {last - base} of {target - base} in {timeout:.0f}s")
    if last == first:  # one sample saw them all: no interval to time them over
        raise ValueError(f"{key}: all {last - base} counted between two samples "
                         f"({TICK} s apart): too few to time, send more")
    assert t0 is not None and c0 is not None
    n = last - first  # counted from the first sample that moved
    wall = max(t1 - t0, 1e-9)
    out = {"count": n, "missing": target - last, "seconds": round(wall, 3),
           "per_s": round(n / wall),
           "cpu_seconds": round(c1 - c0, 3), "cpu_us_per_item": round(1e6 * (c1 - c0) / n, 1),
           "per_cpu_s": round(n / max(c1 - c0, 1e-9)),
           # cores in use over the window: by the workers, and by the whole machine (the
           # broker, the producer and anything else too); the machine has os.cpu_count()
           "worker_cores": round((c1 - c0) / wall, 2),
           "machine_busy_cores": round((m1 - m0) / wall, 2)}
    if BROKER_PID:
        out["broker_cores"] = round((b1 - b0) / wall, 2)
    # the same from the sample past 10 % of the count to the one past 90 %: the rate
    # once every worker is busy and before the first runs out of its share (with two
    # workers the partitions rarely drain together; the tail runs on one worker)
    lo = next((x for x in samples if x[1] - base >= 0.1 * (target - base)), None)
    hi = next((x for x in samples if x[1] - base >= 0.9 * (target - base)), None)
    if lo is not None and hi is not None and hi[0] > lo[0] and hi[2] > lo[2]:
        out["middle_80"] = {"count": hi[1] - lo[1], "seconds": round(hi[0] - lo[0], 3),
                            "per_s": round((hi[1] - lo[1]) / (hi[0] - lo[0])),
                            "per_cpu_s": round((hi[1] - lo[1]) / (hi[2] - lo[2]))}
    return out


def latency(settings: Settings, corpus: Corpus, workers: list[WorkerProcess], rate: float,
            seconds: float, per_message: int = 1, split: bool = False,
            burst: int = 0, burst_at: float = 2.0, profiles: Sequence[str] = (),
            burst_relevant: float = 0.0) -> dict[str, Any]:
    """Offer ``rate`` documents per second (``per_message`` a message); decision latency.

    Latency of a document = Kafka timestamp of its first decision minus the time its
    message was handed to the producer (aiokafka: kafka-python's pure-Python CRC32C
    would make the benchmark's own client the bottleneck). ``split`` (one document a
    message, the documents topic on LogAppendTime: ``stream_latency.py --split``) also
    reads the documents back and splits each latency at the broker's append: send ->
    append (the benchmark's producer and the broker's produce handling) and append ->
    decision (the broker's fetch and the worker), the slowest of each per half second.
    ``burst`` judgments (random ``profiles``, of documents of the phase sent at least a
    second before, a share ``burst_relevant`` of them relevant) are sent at once
    ``burst_at`` seconds into the phase: what a burst of feedback does to the documents'
    latency (``stream_latency.py --burst``). With the default of none relevant the
    thresholds rise and the profiles deliver less; random relevant judgments lower them,
    and the deliveries that follow (about 220 a document at 1,000 profiles after 3,000
    judgments, 30 % relevant) are a load of their own.
    """
    if split and per_message != 1:
        raise ValueError("latency: split needs one document a message")
    if burst and (not profiles or burst_at < 1.0 or burst_at >= seconds):
        raise ValueError("latency: a burst needs profiles and 1 <= burst_at < seconds")
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from sift.kafkaclient import bootstrap

    docs = corpus.documents(int(rate * seconds))
    sent_at: dict[str, float] = {}
    acked_at: dict[str, float] = {}  # the broker's acknowledgement of the document's message
    first_decision: dict[str, float] = {}
    appended: dict[str, float] = {}  # with split: the broker's append time of each document
    base = total(workers, "documents")
    # with a burst: the workers' counters at the phase's start
    counts = ("judgments", "judgment_batches", "judgment_profile_batches", "document_batches",
              "document_batch_complete_us", "document_batch_route_us", "document_batch_publish_us",
              "document_batch_wait_us", "document_batch_work_us") if burst else ()
    counts_base = {k: total(workers, k) for k in counts}
    judged_base = counts_base.get("judgments", 0)
    doc_topic = settings.topic("documents")
    burst_info: dict[str, Any] = {}

    async def go() -> float:
        topics = [settings.topic("decisions")] + ([doc_topic] if split else [])
        cons = AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap(settings),
                                auto_offset_reset="latest", enable_auto_commit=False,
                                group_id=None)
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap(settings), acks=1, linger_ms=0)
        await cons.start()
        await prod.start()
        await cons.seek_to_end()
        stop = asyncio.Event()

        async def collect() -> None:
            while not stop.is_set():
                batches = await cons.getmany(timeout_ms=100)
                for tp, records in batches.items():
                    for r in records:
                        ts = r.timestamp / 1000.0
                        if tp.topic == doc_topic:
                            appended[r.key.decode()] = ts
                            continue
                        doc = orjson.loads(r.value)["doc_id"]
                        if doc not in first_decision or ts < first_decision[doc]:
                            first_decision[doc] = ts

        async def send_burst(i: int) -> None:
            rng = random.Random(7)
            older = [str(d["id"]) for d in docs[: max(i - int(rate), 1)]]
            t = time.time()
            futs = []
            for k, (doc, p) in enumerate(distinct_pairs(rng, older, list(profiles), burst)):
                j = {"id": f"burst-{t}-{k}", "doc_id": doc, "profile": p,
                     "relevant": rng.random() < burst_relevant}
                futs.append(await prod.send(settings.topic("judgments"), orjson.dumps(j),
                                            key=p.encode()))
            await asyncio.gather(*futs)
            burst_info.update({"judgments": burst, "relevant_share": burst_relevant,
                               "at_s": round(t - start, 3),
                               "sent_in_s": round(time.time() - t, 3)})
            until = time.monotonic() + 120
            while total(workers, "judgments") < judged_base + burst and time.monotonic() < until:
                await asyncio.sleep(0.1)  # the stats files: every SIFT_STATS_INTERVAL
            burst_info["applied_after_s"] = round(time.time() - t, 2)
            burst_info["applied"] = total(workers, "judgments") - judged_base

        async def timeline() -> None:
            """The workers' counters every half second, until the phase's documents are
            scored: where the documents' throughput goes around the burst."""
            rows = burst_info.setdefault("timeline", [])
            until = time.monotonic() + 120
            while time.monotonic() < until:
                st = [w.stats() for w in workers]
                c = {k: sum(int(x.get("stats", {}).get(k, 0)) for x in st)
                     for k in ("documents", "judgments", "document_batches", "decisions")}
                c["consumer_polls"] = sum(int(x.get("consumer_polls", 0)) for x in st)
                rows.append({"t": round(time.time() - start, 2), **c})
                if c["documents"] >= base + len(docs):
                    return
                await asyncio.sleep(0.5)

        task = asyncio.create_task(collect())
        start = time.time()
        burst_task = None
        line = asyncio.create_task(timeline()) if burst else None
        for i in range(0, len(docs), per_message):
            delay = start + i / rate - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if burst and burst_task is None and i >= burst_at * rate:
                burst_task = asyncio.create_task(send_burst(i))
            part = docs[i:i + per_message]
            value = orjson.dumps(part[0] if per_message == 1 else {"documents": part})
            now = time.time()
            ids = [str(d["id"]) for d in part]
            for d in ids:
                sent_at[d] = now
            fut = await prod.send(settings.topic("documents"), value, key=ids[0].encode())
            fut.add_done_callback(lambda _f, ids=ids: acked_at.update(dict.fromkeys(ids, time.time())))
        await prod.flush()
        offered = len(docs) / (time.time() - start)
        if burst_task is not None:
            await burst_task
            # where the documents agent's time went, from the phase's start until the
            # judgments were applied (the documents sent then are still in flight)
            burst_info.update({k: total(workers, k) - v for k, v in counts_base.items()
                               if k != "judgments"})
        deadline = time.monotonic() + 120
        while total(workers, "documents") < base + len(docs) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        if line is not None:
            await line
        await asyncio.sleep(2.0)
        stop.set()
        await task
        await prod.stop()
        await cons.stop()
        return offered

    offered = asyncio.run(go())
    pairs = sorted((sent_at[d], 1000 * (t - sent_at[d])) for d, t in first_decision.items()
                   if d in sent_at)
    lat = sorted(ms for _, ms in pairs)
    if not lat:
        return {"offered_per_s": round(offered), "documents_with_decisions": 0}
    t0 = pairs[0][0]
    n_halves = int((pairs[-1][0] - t0) / 0.5) + 1

    def slowest(items: Iterable[tuple[float, float]]) -> list[int]:
        """The largest ms of the documents sent in each half second, from (sent, ms)."""
        out = [0.0] * n_halves
        for at, ms in items:
            k = int((at - t0) / 0.5)
            if k < n_halves:
                out[k] = max(out[k], ms)
        return [round(ms) for ms in out]

    def q(p: float, values: list[float] = lat) -> float:
        """The ``p`` quantile of sorted ``values``."""
        return round(values[min(int(p * len(values)), len(values) - 1)], 1)

    # the slowest decision of the documents sent in each half second: a stall shows where;
    # and the slowest acknowledgement of their messages by the broker (the benchmark's
    # producer and the broker's produce handling: a stall there is not the worker's)
    out = {"offered_per_s": round(offered), "documents": len(docs),
           "documents_per_message": per_message,
           "documents_with_decisions": len(lat), "p50_ms": q(0.5), "p90_ms": q(0.9),
           "p99_ms": q(0.99), "max_ms": round(lat[-1], 1),
           "max_ms_per_half_second": slowest(pairs),
           "max_ack_ms_per_half_second": slowest(
               (at, 1000 * (acked_at[d] - at)) for d, at in sent_at.items() if d in acked_at)}
    if split:
        both = [(sent_at[d], appended[d], t) for d, t in first_decision.items()
                if d in sent_at and d in appended]
        out["max_send_to_append_ms_per_half_second"] = slowest(
            (s, 1000 * (a - s)) for s, a, _ in both)
        out["max_append_to_decision_ms_per_half_second"] = slowest(
            (s, 1000 * (t - a)) for s, a, t in both)
    if burst:
        # the documents sent from the burst until its judgments were applied
        lo = t0 + burst_info["at_s"]
        during = sorted(ms for at, ms in pairs if lo <= at <= lo + burst_info["applied_after_s"])
        burst_info["documents_during"] = len(during)
        if during:
            burst_info["p99_ms_during"] = q(0.99, during)
            burst_info["max_ms_during"] = round(during[-1], 1)
        out["burst"] = burst_info
    out["load"] = load()
    return out


def warm_up(settings: Settings, corpus: Corpus, workers: list[WorkerProcess],
            n_profiles: int) -> int:
    """One document, scored against every profile (the profiles decoded); then wait until
    the workers have drained whatever earlier phases left uncommitted (re-delivered at
    least once), so that a latency clock does not start behind a backlog. Returns the
    number of documents the workers processed meanwhile besides the warm-up one."""
    before = total(workers, "scored")
    docs = total(workers, "documents")
    produce_fast(settings, settings.topic("documents"), single(corpus.documents(1)))
    wait_for(lambda: total(workers, "scored") >= before + n_profiles, 300, "warm-up scored")
    # routed and scored: the scoring agent may still be working through the shard
    # messages of a re-delivered backlog after routing has gone quiet
    wait_for(lambda: _still(workers, "documents", 2.0) and _still(workers, "scored", 2.0),
             300, "backlog drained")
    return total(workers, "documents") - docs - 1


def start_workers(settings: Settings, n: int, tmp: Path) -> list[WorkerProcess]:
    workers = [WorkerProcess(replace(settings, data_dir=str(tmp / f"w{i}")), f"w{i}").start()
               for i in range(n)]
    if CAP is not None:
        for w in workers:
            assert w.proc is not None
            CAP.add(w.proc.pid)
    cpus = sorted(os.sched_getaffinity(0))

    def pin_workers() -> None:
        for i, w in enumerate(workers):
            assert w.proc is not None
            pin(w.proc.pid, cpus[i % len(cpus)])

    if PIN:
        pin_workers()
    for w in workers:
        w.wait_ready(180)
    if PIN:  # again: the threads started meanwhile (the executor's, aiokafka's)
        pin_workers()
    wait_for(lambda: sorted(p for w in workers for p in w.stats().get("partitions", []))
             == list(range(settings.partitions)) and all(w.stats().get("partitions")
                                                         for w in workers),
             120, "partitions assigned")
    return workers


def add_profiles(settings: Settings, corpus: Corpus, workers: list[WorkerProcess],
                 n: int) -> dict[str, Any]:
    specs = corpus.specs(n, bags=BAGS)
    t0 = time.monotonic()
    send_all(settings, settings.topic("profiles"),
             [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
    wait_for(lambda: total(workers, "profiles_created") >= n, 900, "profiles")
    seconds = time.monotonic() - t0
    return {"profiles": n, "seconds": round(seconds, 2), "per_s": round(n / seconds, 1),
            "state_bytes_max": max(int(w.stats()["stats"].get("state_bytes_max", 0))
                                   for w in workers)}


def per_document(pairs: dict[str, Any], n_profiles: int) -> dict[str, Any]:
    """:func:`measure` of (document, profile) pairs expressed per document."""
    out = {**pairs, "count": round(pairs["count"] / n_profiles),
           "per_s": round(pairs["per_s"] / n_profiles),
           # from the unrounded figures (the pairs' is rounded to 0.1 us)
           "cpu_us_per_item": round(1e6 * pairs["cpu_seconds"] * n_profiles / pairs["count"], 1),
           "per_cpu_s": round(pairs["per_cpu_s"] / n_profiles),
           "missing_pairs": pairs["missing"]}
    out.pop("missing")
    if "middle_80" in pairs:
        mid = pairs["middle_80"]
        out["middle_80"] = {**mid, "count": round(mid["count"] / n_profiles),
                            "per_s": round(mid["per_s"] / n_profiles),
                            "per_cpu_s": round(mid["per_cpu_s"] / n_profiles)}
    return out


def throughput(settings: Settings, corpus: Corpus, n_workers: int, n: int, batch: int,
               tmp: Path, n_profiles: int) -> dict[str, Any]:
    """Documents produced while no worker runs, then consumed by fresh workers (recovering
    the profiles from the changelog): the rate is the workers', not the producer's."""
    warm = corpus.documents(1)  # scored first: the worker decodes its profiles lazily
    docs = corpus.documents(n)
    msgs = single(docs) if batch == 1 else batched(docs, batch)
    produce_fast(settings, settings.topic("documents"), single(warm))
    produce_s = produce_fast(settings, settings.topic("documents"), msgs)
    t0 = time.monotonic()
    workers = start_workers(settings, n_workers, tmp / f"run{corpus.serial}")
    try:
        ready_s = time.monotonic() - t0
        # (document, profile) pairs scored; a document counts when all its profiles did
        pairs = measure(workers, "scored", n_profiles, (n + 1) * n_profiles)
        out = per_document(pairs, n_profiles)
        out["document_batches"] = batch_split(workers)
        out["incidents"] = incidents(workers)
        capped(out, workers)
    finally:
        for w in workers:
            w.stop()
    out["produce_per_s"] = round(n / produce_s)
    out["restart_and_recovery_s"] = round(ready_s, 2)
    out["documents_per_message"] = batch
    out["workers"] = n_workers
    out["load"] = load()
    return out


def incidents(workers: list[WorkerProcess]) -> dict[str, Any]:
    """What can slow a phase besides its work, over the workers' lives: the tail watch's
    seeks back and the messages they delivered again (skipped), the gaps found, and each
    worker's garbage collections (``gc``: counts and pauses by generation)."""
    keys = ("tail_seeks", "tail_waits", "redelivered_skipped", "offset_gaps", "offsets_recovered")
    out: dict[str, Any] = {k: total(workers, k) for k in keys}
    out["gc"] = [w.stats().get("gc") for w in workers]
    # the first of the consumer's skips read back (app.complete), as the worker logged it
    skips = []
    for w in workers:
        with contextlib.suppress(OSError):
            skips += [line for line in w.log_path.read_text(errors="replace").splitlines()
                      if "consumer skipped" in line][:1]
    out["first_skip"] = skips
    # every counter of the workers, for a phase that went otherwise than the others
    out["worker_stats"] = [w.stats().get("stats", {}) for w in workers]
    return out


def batch_split(workers: list[WorkerProcess]) -> dict[str, Any]:
    """The routing agents' batches over the workers' lives (the measured phase is most of
    it): how many, their mean size in messages, and the share of the agent's time spent
    waiting for a batch (Faust reading and delivering messages, or no input) against
    processing one."""
    s: dict[str, float] = {}
    for w in workers:
        for k, v in w.stats().get("stats", {}).items():
            if k.startswith(("document_batch", "shard_")):
                s[k] = s.get(k, 0) + v
    n = s.get("document_batches", 0)
    wait, work = s.get("document_batch_wait_us", 0), s.get("document_batch_work_us", 0)
    out: dict[str, Any] = {
        "batches": int(n),
        "mean_messages": round(s.get("document_batch_messages", 0) / n, 1) if n else None,
        "wait_s": round(wait / 1e6, 3), "work_s": round(work / 1e6, 3),
        "wait_share": round(wait / (wait + work), 3) if wait + work else None}
    for part in ("complete", "route", "publish"):  # parts of the work (since 18th session)
        if f"document_batch_{part}_us" in s:
            out[f"{part}_s"] = round(s[f"document_batch_{part}_us"] / 1e6, 3)
    if s.get("shard_payloads"):
        # shard-topic messages against the payloads scored: copies of one routed batch
        # for several shards held by one worker are scored as one (Service.score_copies)
        out["shard_messages"] = int(s.get("shard_messages", 0))
        out["shard_payloads"] = int(s["shard_payloads"])
        # payloads sent on for shards their receiver did not hold (since the 19th session)
        out["shard_forwards"] = int(s.get("shard_forwards", 0))
    return out


def steady_throughput(settings: Settings, corpus: Corpus, n_workers: int, n: int, batch: int,
                      tmp: Path, n_profiles: int) -> dict[str, Any]:
    """Workers started, assigned and warmed up first (no rebalance while measuring), then
    ``n`` documents produced at once (aiokafka produces ~200,000 documents/s here, faster
    than the workers consume) and the workers' rate measured as in :func:`throughput`."""
    workers = start_workers(settings, n_workers, tmp / f"steady{corpus.serial}")
    try:
        warm_up(settings, corpus, workers, n_profiles)
        base = total(workers, "scored")
        msgs = batched(corpus.documents(n), batch) if batch > 1 else single(corpus.documents(n))
        produce_fast(settings, settings.topic("documents"), msgs)
        # timed from the end of the production (a second or so of this process's CPU,
        # which the workers would otherwise share the machine with, while they start)
        pairs = measure(workers, "scored", total(workers, "scored"), base + n * n_profiles)
        out = per_document(pairs, n_profiles)
        out["document_batches"] = batch_split(workers)
        out["incidents"] = incidents(workers)
        capped(out, workers)
    finally:
        for w in workers:
            w.stop()
    out["documents_per_message"] = batch
    out["workers"] = n_workers
    out["load"] = load()
    return out


def capped(out: dict[str, Any], workers: list[WorkerProcess]) -> None:
    """With ``--worker-cores``: the cap, and how much of the workers' lives it held them
    back (periods throttled of those with demand, summed over the workers)."""
    if CAP is None:
        return
    use = [CAP.usage(w.proc.pid) for w in workers if w.proc is not None]
    periods = sum(u["periods"] for u in use)
    out["worker_cores_cap"] = CAP.cores
    out["throttled_share"] = round(sum(u["throttled_periods"] for u in use) / periods, 3) \
        if periods else None


def fresh_run(base: Settings, corpus: Corpus, partitions: int,
              name: str = "bench") -> tuple[Settings, Path]:
    """Settings for a run of its own: topics under a new prefix (created here), a new
    consumer group and data directory, the benchmark's IDF corpus; and the run's
    directory (``corpus.dir / <run id>``)."""
    run_id = uuid.uuid4().hex[:6]
    run_dir = corpus.dir / run_id
    settings = replace(base, topic_prefix=f"{name}{run_id}.", app_id=f"{name}-{run_id}",
                       partitions=partitions, idf_corpus=str(corpus.idf), data_dir=str(run_dir))
    prepare_topics(settings)
    return settings, run_dir


def scale_out(base: Settings, corpus: Corpus, n_prof: int, n_docs: int,
              partitions: int, repeat: int = 1, per_message: int = 100) -> dict[str, Any]:
    """One worker against two on fresh topics with ``partitions`` partitions and ``n_prof``
    profiles, ``n_docs`` documents ``per_message`` a message (100, or 1 where Faust's
    per-message work is the wall): started together on a backlog (the
    start-up rebalance inside the window), then steady (workers up, assigned and warm
    before the documents are produced), ``repeat`` pairs of steady phases (medians of
    their ratios in ``steady_repeats``). ``broker_cpu_seconds``: the local broker's CPU
    over each steady phase, to see whether the machine had a core left."""
    settings, tmp = fresh_run(base, corpus, partitions)
    print(f"[1 vs 2 workers, {partitions} partitions, {n_prof} profiles, {n_docs:,} documents, "
          f"{per_message} a message]", flush=True)
    workers = start_workers(settings, 2, tmp)
    try:
        add_profiles(settings, corpus, workers, n_prof)
    finally:
        for w in workers:
            w.stop()
    out: dict[str, Any] = {"documents": n_docs, "documents_per_message": per_message,
                           "backlog": {}, "steady": {}}
    for n in (1, 2):
        out["backlog"][f"{n}_workers"] = throughput(settings, corpus, n, n_docs, per_message,
                                                    tmp, n_prof)
        print(f"  backlog, {n} worker(s): {out['backlog'][f'{n}_workers']}", flush=True)
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for _ in range(repeat):  # one worker, then two, then (with --repeat) again
        pair = []
        for n in (1, 2):
            b0 = broker_cpu()
            w0 = time.monotonic()
            r = steady_throughput(settings, corpus, n, n_docs, per_message, tmp, n_prof)
            if BROKER_PID:
                r["broker_cpu_seconds_whole_phase"] = round(broker_cpu() - b0, 2)
                r["phase_seconds"] = round(time.monotonic() - w0, 1)
            pair.append(r)
            print(f"  steady, {n} worker(s): {r}", flush=True)
        pairs.append((pair[0], pair[1]))
    out["steady"]["1_workers"], out["steady"]["2_workers"] = pairs[0]
    for phase in ("backlog", "steady"):
        one, two = out[phase]["1_workers"], out[phase]["2_workers"]
        out[phase]["speedup"] = round(two["per_s"] / one["per_s"], 2)
        out[phase]["per_cpu_s_ratio"] = round(two["per_cpu_s"] / one["per_cpu_s"], 2)
        if "middle_80" in one and "middle_80" in two:
            out[phase]["middle_80_speedup"] = round(
                two["middle_80"]["per_s"] / one["middle_80"]["per_s"], 2)
    if repeat > 1:
        # the machine's speed drifts between phases: each pair is measured back to back,
        # and the median of the pairs' ratios is the figure
        speedups = [b["per_s"] / a["per_s"] for a, b in pairs]
        middle = [b["middle_80"]["per_s"] / a["middle_80"]["per_s"] for a, b in pairs
                  if "middle_80" in a and "middle_80" in b]
        per_cpu = [b["per_cpu_s"] / a["per_cpu_s"] for a, b in pairs]
        out["steady_repeats"] = {
            "pairs": [{"1_workers": a, "2_workers": b} for a, b in pairs],
            "speedups": [round(x, 2) for x in speedups],
            "per_cpu_s_ratios": [round(x, 2) for x in per_cpu],
            "median_speedup": round(statistics.median(speedups), 2),
            "median_per_cpu_s_ratio": round(statistics.median(per_cpu), 2),
            "middle_80_speedups": [round(x, 2) for x in middle],
            "median_middle_80_speedup": round(statistics.median(middle), 2) if middle else None}
        print(f"  steady pairs: {out['steady_repeats']['speedups']}, median "
              f"{out['steady_repeats']['median_speedup']}", flush=True)
    return out


def judgments(settings: Settings, corpus: Corpus, workers: list[WorkerProcess], n: int,
              n_profiles: int, since: int = 0) -> dict[str, Any]:
    """``n`` judgments of recently scored documents, spread over the profiles.

    The documents are among the last 5,000 sent from serial ``since`` on (when the
    workers started): a worker keeps the vectors of the documents it scored, so a
    judgment of one scored by an earlier worker is dead-lettered (``unknown_document``)
    and never counted.
    """
    # let the backlog of the latency runs drain: a judgment needs its document scored
    wait_for(lambda: _still(workers, "scored"), 600, "backlog drained")
    rng = random.Random(1)
    recent = [f"{corpus.test[i % len(corpus.test)].id}-{i}"
              for i in range(max(corpus.serial - 5000, since), corpus.serial)]
    # distinct (document, profile) pairs: a document judged again for a profile is a
    # repeat or a correction since the forty-seventh session, not a judgment learned
    js = [{"id": uuid.uuid4().hex, "doc_id": doc, "profile": p, "relevant": rng.random() < 0.3}
          for doc, p in distinct_pairs(rng, recent, [f"p{i:04d}" for i in range(n_profiles)], n)]
    base = total(workers, "judgments")
    batches = total(workers, "judgment_batches")
    per_profile = total(workers, "judgment_profile_batches")
    send_all(settings, settings.topic("judgments"),
             [(str(j["profile"]).encode(), orjson.dumps(j)) for j in js])
    out = measure(workers, "judgments", base, base + n, timeout=600)
    # how far the batches amortised: judgments per consumed batch, and per profile in
    # a batch (each profile's share of a batch is one re-threshold and one state write)
    done = total(workers, "judgments") - base
    batches = total(workers, "judgment_batches") - batches
    per_profile = total(workers, "judgment_profile_batches") - per_profile
    out["judgments_per_batch"] = round(done / batches, 1) if batches else None
    out["judgments_per_profile_batch"] = round(done / per_profile, 2) if per_profile else None
    out["load"] = load()
    return out


def _still(workers: list[WorkerProcess], key: str, quiet: float = 3.0) -> bool:
    """True once the counter has not moved for ``quiet`` seconds."""
    before = total(workers, key)
    time.sleep(quiet)
    return total(workers, key) == before


def baselines(settings: Settings, n: int) -> dict[str, Any]:
    """Raw aiokafka and a pass-through Faust agent on the single-document topic."""
    import kafka_throughput as kt

    args = argparse.Namespace(messages=n, partitions=settings.partitions, limit=180.0)
    out = {}
    for variant in ("aiokafka-getmany", "faust-default"):
        out[variant] = kt._run_child(variant, settings.broker, settings.topic("documents"), args)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    corpus = Corpus()
    base = Settings.from_env(broker=args.broker_url)
    result: dict[str, Any] = {
        "benchmark": "stream_bench", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python benchmarks/stream_bench.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "load_at_start": load()},
        "worker_cores_cap": CAP.cores if CAP is not None else None,
        "workers_pinned": PIN,
        "documents": "Reuters-21578 test texts, ~760 characters, cycled",
        "partitions": args.partitions, "runs": {}, "bags": BAGS,
        # the workers' settings that change what is measured (SIFT_* in this environment)
        "settings": {"journal": base.journal, "score_here": base.score_here,
                     "judgment_batch_size": base.judgment_batch_size,
                     "judgment_batch_timeout": base.judgment_batch_timeout},
    }
    for n_prof in [] if args.only_two_workers else args.profiles:
        settings, run_dir = fresh_run(base, corpus, args.partitions)
        print(f"[{n_prof} profiles] starting a worker", flush=True)
        r: dict[str, Any] = {}
        workers = start_workers(settings, 1, run_dir)
        try:
            r["profile_creation"] = add_profiles(settings, corpus, workers, n_prof)
            print(f"  profiles: {r['profile_creation']}", flush=True)
        finally:
            for w in workers:
                w.stop()
        r["one_per_message"] = throughput(settings, corpus, 1, args.single, 1, run_dir,
                                         n_prof)
        print(f"  one document per message: {r['one_per_message']}", flush=True)
        r["batched_100"] = throughput(settings, corpus, 1, args.batched, 100, run_dir, n_prof)
        print(f"  100 documents per message: {r['batched_100']}", flush=True)
        workers = start_workers(settings, 1, run_dir / "live")
        since = corpus.serial
        try:
            # warm up: the worker decodes its profiles lazily, on its first scoring batch;
            # latency is measured on a worker that has done that
            r["live_warm_up_redelivered_documents"] = warm_up(settings, corpus, workers, n_prof)
            for per in (1, 10) if args.latency_s > 0 else ():  # 0: no latency phases
                key = f"latency_1000_per_s_{per}_per_message"
                r[key] = latency(settings, corpus, workers, 1000.0, args.latency_s, per)
                print(f"  latency ({per} per message): {r[key]}", flush=True)
            if args.judgments > 0:  # 0: no judgments phase (it waited for none, in vain)
                r["judgments"] = judgments(settings, corpus, workers, args.judgments, n_prof,
                                           since)
                print(f"  judgments: {r['judgments']}", flush=True)
        finally:
            for w in workers:
                w.stop()
        if n_prof == args.profiles[0]:
            print("  baselines on the same single-document topic", flush=True)
            r["baselines"] = baselines(settings, args.single)
            print(f"  {r['baselines']}", flush=True)
            r["one_per_message"]["ratio_to_passthrough"] = round(
                r["one_per_message"]["per_s"] / r["baselines"]["faust-default"]["msgs_per_s"], 3)
            r["one_per_message"]["cpu_ratio_to_passthrough"] = round(
                r["baselines"]["faust-default"]["cpu_us_per_msg"]
                / r["one_per_message"]["cpu_us_per_item"], 3)
        result["runs"][f"{n_prof}_profiles"] = r
    if not args.skip_two_workers:
        result["two_workers"] = {}
        for n_prof, n_docs, *rest in args.two_workers:
            per_message = rest[0] if rest else 100
            key = f"{n_prof}_profiles" + ("" if per_message == 100 else f"_{per_message}_per_message")
            runs = sum(k.split("#")[0] == key for k in result["two_workers"])
            # a profile count given again is measured again: "100_profiles#2", ...
            result["two_workers"][key if not runs else f"{key}#{runs + 1}"] = scale_out(
                base, corpus, n_prof, n_docs, args.partitions, args.repeat, per_message)
    result["machine"]["load_at_end"] = load()
    return result


def main(argv: list[str] | None = None) -> int:
    global BROKER_PID, CAP, PIN, BAGS
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--broker", default="", help="kafka://host:port (default: start a local one)")
    p.add_argument("--profiles", type=lambda s: [int(x) for x in s.split(",")],
                   default=[100, 1000])
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--single", type=int, default=10_000, help="documents sent one per message")
    p.add_argument("--batched", type=int, default=30_000, help="documents sent 100 per message")
    p.add_argument("--judgments", type=int, default=3_000)
    p.add_argument("--latency-s", type=float, default=10.0)
    p.add_argument("--skip-two-workers", action="store_true")
    p.add_argument("--only-two-workers", action="store_true",
                   help="run the 1-vs-2-worker phases (--two-workers) alone")
    p.add_argument("--two-workers", type=lambda s: [tuple(int(v) for v in x.split(":"))
                                                    for x in s.split(",")],
                   default=None, metavar="PROFILES:DOCUMENTS[:PER_MESSAGE],...",
                   help="1 vs 2 workers at these profile counts with this many documents, "
                        "PER_MESSAGE a message (default 100; 1: one document a message); "
                        "default: the first --profiles with --batched")
    p.add_argument("--repeat", type=int, default=1,
                   help="pairs of steady phases (one worker, then two) per --two-workers "
                        "entry; with more than one, the medians of their ratios")
    p.add_argument("--worker-cores", type=float, default=None, metavar="CORES",
                   help="cap every worker process at CORES cores (a Linux cgroup each; "
                        "root): a fixed CPU budget per worker, the rest for the broker")
    p.add_argument("--pin-workers", action="store_true",
                   help="pin worker i to CPU i (mod the CPUs): a core of its own per worker, "
                        "as on separate hosts, without a quota's throttling; the broker and "
                        "this script are not pinned")
    p.add_argument("--bags", type=int, default=1, metavar="B",
                   help="the profiles bagged, B members each (a spec's bags; default 1)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    BAGS = args.bags
    if args.repeat < 1:
        p.error(f"--repeat: expected at least 1, got {args.repeat}")
    PIN = args.pin_workers
    if args.worker_cores is not None:
        try:
            CAP = CpuCap(args.worker_cores)
        except (CpuCapError, ValueError, OSError) as exc:
            p.error(f"--worker-cores: {exc}")
    if args.two_workers is None:
        args.two_workers = [(args.profiles[0], args.batched)]
    if any(len(t) not in (2, 3) or min(t) < 1 for t in args.two_workers):
        p.error("--two-workers: expected PROFILES:DOCUMENTS[:PER_MESSAGE],..., "
                f"got {args.two_workers}")
    broker = None
    if args.broker:
        args.broker_url = args.broker
    else:
        broker = DevBroker.throwaway()
        args.broker_url = broker.url
        BROKER_PID = broker.pid()
    try:
        result = run(args)
    finally:
        if broker is not None:
            broker.stop()
            # its log segments: gigabytes a run (the documents, copies and decisions)
            shutil.rmtree(broker.data, ignore_errors=True)
        if CAP is not None:
            CAP.close()
    write_json(args.out, result)
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
