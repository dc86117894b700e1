"""Rebalance under load: a second worker joins, then leaves, while documents flow at a
steady rate; how long scoring pauses, and whether anything is lost or scored twice.

One ``sift worker`` (w1) scores a paced stream of documents (``--rate`` documents/s in
messages of ``--batch``) against ``--profiles`` profiles with ``update: never`` (their
decisions are a pure function of the documents, so an in-process :class:`Service` gives
the exact expected set) plus two learning profiles that receive judgments (with text)
for one document in ten. While the stream flows:

1. **join**: w2 starts (same group) ``--join-after`` seconds into the stream; Faust's
   assignor moves half of the partitions (shards, with their table state) to it;
2. **leave**: ``--stay`` seconds after w2 first scored, it gets SIGTERM (commits, leaves
   the group) and w1 takes every partition back;
3. (``--crash``) optionally a third worker is then started and SIGKILLed in the same way,
   so the group waits for its session timeout.

Every ``--interval`` seconds both workers' counters (``stats.json``) are sampled. For each
event the script reports:

* ``stall_seconds``: the longest time, from the event until 120 s after it, during which
  the group scored nothing while documents were waiting (the pause a consumer of
  decisions sees: "time to resume");
* ``resumed_after_seconds``: from the event until scoring had caught up with everything
  sent before the event plus the stall;
* decision latency (decision ``ts`` minus the time the producer sent the document) of the
  documents sent in the 30 s after the event, against the steady state before the join.

At the end (lag zero): decisions of the fixed profiles after de-duplication on
(``profile``, ``doc_id``) must equal the reference (``missing`` and ``unexpected`` 0;
repeats counted, and checked to carry the same score); every judgment is applied once
(judgment keys and ``n_judged`` of the learning profiles' table records).

    .venv/bin/python benchmarks/rebalance.py            # writes benchmarks/results/rebalance.json

Without ``SIFT_BROKER`` a local broker is started on free ports and stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.harness import (  # noqa: E402
    HarnessError,
    WorkerProcess,
    read_all,
    recovered_profiles,
    send_all,
    total,
    wait_for,
)
from sift.agents.keys import key_digests  # noqa: E402
from sift.agents.service import (  # noqa: E402
    InputMessage,
    Service,
    TrainingSet,
    shard_of,
)
from sift.devbroker import DevBroker, free_port  # noqa: E402
from sift.replay import query_from_name  # noqa: E402
from sift.settings import Settings  # noqa: E402
from sift.topics.codecs import read_jsonl, write_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

REUTERS = ROOT / "data" / "reuters21578"
JUDGE_EVERY = 10


def specs_for(train: list[Document], n_fixed: int, n_learn: int) -> list[dict[str, Any]]:
    """``n_fixed`` profiles that never learn and ``n_learn`` that learn from every judgment."""
    by_cat: dict[str, list[str]] = {}
    for d in train:
        for t in d.topics:
            by_cat.setdefault(t, []).append(d.id)
    cats = sorted(by_cat, key=lambda c: (-len(by_cat[c]), c))
    fixed = [{"profile": f"fixed-{c}", "query": query_from_name(c), "positives": by_cat[c][:3],
              "update": "never"} for c in cats[:n_fixed]]
    learn = [{"profile": f"learn-{c}", "query": query_from_name(c), "positives": by_cat[c][:3],
              "update": "every"} for c in cats[:n_learn]]
    return fixed + learn


class Sender(threading.Thread):
    """Sends ``messages`` (documents, with the judgments due after each) at ``rate`` documents/s."""

    def __init__(self, settings: Settings, messages: list[tuple[list[dict[str, Any]],
                                                                list[dict[str, Any]]]],
                 rate: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.messages, self.rate = settings, messages, rate
        self.sent_at: dict[str, float] = {}  # document id -> wall time sent
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from sift.kafkaclient import producer

        prod = producer(self.settings, linger_ms=0)
        docs_topic = self.settings.topic("documents")
        judg_topic = self.settings.topic("judgments")
        start = time.monotonic()
        try:
            for docs, judgments in self.messages:
                due = start + self.sent / self.rate
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                now = time.time()
                for attempt in range(5):  # the same message again is harmless: keys dedupe
                    try:
                        prod.send(docs_topic, key=str(docs[0]["id"]).encode(),
                                  value=orjson.dumps({"documents": docs}))
                        for j in judgments:
                            prod.send(judg_topic, key=str(j["profile"]).encode(),
                                      value=orjson.dumps(j))
                        prod.flush(timeout=60)
                        break
                    except Exception as exc:
                        print(f"sender: attempt {attempt + 1}: {exc!r}", file=sys.stderr,
                              flush=True)
                        if attempt == 4:
                            raise
                for d in docs:
                    self.sent_at[str(d["id"])] = now
                self.sent += len(docs)
        except BaseException as exc:  # reported by the main thread
            traceback.print_exc()
            self.error = exc
        finally:
            prod.close(timeout=30)


class Sampler(threading.Thread):
    """Samples the workers' counters every ``interval`` seconds."""

    def __init__(self, workers: dict[str, WorkerProcess], n_profiles: int, sender: Sender,
                 interval: float) -> None:
        super().__init__(daemon=True)
        self.workers, self.n_profiles, self.sender = workers, n_profiles, sender
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            row: dict[str, Any] = {"t": time.time(), "sent": self.sender.sent}
            scored = 0
            for name, w in self.workers.items():
                s = w.stats() if w.proc is not None else {}
                n = int(s.get("stats", {}).get("scored", 0))
                row[f"{name}_scored"] = n
                row[f"{name}_partitions"] = s.get("partitions", [])
                scored += n
            row["scored_documents"] = scored / self.n_profiles
            self.samples.append(row)


def stall(samples: list[dict[str, Any]], start: float, end: float) -> float:
    """Longest time in [start, end] with no scoring progress while documents were waiting.

    Counters of a worker that stopped freeze at their last value (its final stats.json),
    so the group total never goes down.
    """
    longest = 0.0
    since: float | None = None
    last: float | None = None
    prev_t = start
    for s in samples:
        if s["t"] < start - 1.0 or s["t"] > end:
            continue
        waiting = s["sent"] > s["scored_documents"] + 0.5
        if last is not None and s["scored_documents"] <= last + 1e-9 and waiting:
            since = since if since is not None else prev_t
            longest = max(longest, s["t"] - since)
        else:
            since = None
        last, prev_t = s["scored_documents"], s["t"]
    return round(longest, 2)


def caught_up(samples: list[dict[str, Any]], start: float) -> float | None:
    """Seconds from ``start`` until scoring reached what had been sent by ``start``."""
    before = [s for s in samples if s["t"] <= start]
    if not before:
        return None
    target = before[-1]["sent"]
    for s in samples:
        if s["t"] > start and s["scored_documents"] >= target:
            return round(s["t"] - start, 2)
    return None


def latency(decisions: list[dict[str, Any]], sent_at: dict[str, float], start: float,
            end: float) -> dict[str, Any]:
    """Decision latency (first decision of a document) for documents sent in [start, end)."""
    first: dict[str, float] = {}
    for d in decisions:
        doc = str(d["doc_id"])
        if doc in sent_at and start <= sent_at[doc] < end:
            first[doc] = min(first.get(doc, float("inf")), float(d["ts"]) - sent_at[doc])
    lat = sorted(first.values())
    if not lat:
        return {"documents": 0}
    return {"documents": len(lat), "p50_ms": round(1000 * statistics.median(lat), 1),
            "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
            "max_ms": round(1000 * lat[-1], 1)}


def reanalyze(path: Path) -> None:
    """Stall per event, from the saved samples, in the window up to the next event."""
    result = json.loads(path.read_text())
    events = result["events"]
    starts = sorted(ev.get("joined_at", ev["at"]) for ev in events.values())
    for ev in events.values():
        end = min([x for x in starts if x > ev["at"]] + [ev["at"] + 120])
        ev["stall_seconds"] = stall(result["samples"], ev["at"], end)
        ev["stall_window_seconds"] = round(end - ev["at"], 2)
    result["analyzed_with"] = f"benchmarks/rebalance.py --analyze {path.name}"
    path.write_text(json.dumps(result, indent=1))
    print(json.dumps(events, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=100.0, help="documents per second sent")
    ap.add_argument("--batch", type=int, default=10, help="documents per message")
    ap.add_argument("--seconds", type=float, default=150.0, help="length of the stream")
    ap.add_argument("--profiles", type=int, default=20, help="fixed (update: never) profiles")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--join-after", type=float, default=20.0)
    ap.add_argument("--stay", type=float, default=20.0, help="seconds w2 scores before leaving")
    ap.add_argument("--crash", action="store_true",
                    help="then start w3 and SIGKILL it (the group waits for its session timeout)")
    ap.add_argument("--session-timeout", type=float, default=None, metavar="SECONDS",
                    help="the workers' SIFT_SESSION_TIMEOUT (heartbeats every tenth of it); "
                         "default: the service's (60 s)")
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--idf-docs", type=int, default=2000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rebalance.json"))
    ap.add_argument("--analyze", metavar="JSON",
                    help="recompute the stalls of a result file from its samples, in place")
    args = ap.parse_args(argv)
    if args.analyze:
        reanalyze(Path(args.analyze))
        return 0
    load_start = os.getloadavg()

    tmp = Path(tempfile.mkdtemp(prefix="sift-rebalance-"))
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))
    idf = tmp / "idf.jsonl.gz"
    write_jsonl(idf, train[: args.idf_docs])
    n_docs = int(args.rate * args.seconds) // args.batch * args.batch
    pool = test + train[args.idf_docs:]
    docs = [Document(f"{pool[i % len(pool)].id}~{i // len(pool)}", pool[i % len(pool)].text,
                     pool[i % len(pool)].title, None, None, pool[i % len(pool)].topics)
            for i in range(n_docs)]
    specs = specs_for(train, args.profiles, 2)
    fixed = {str(s["profile"]) for s in specs if s["update"] == "never"}
    learn = [str(s["profile"]) for s in specs if s["update"] == "every"]
    messages = []
    for a in range(0, n_docs, args.batch):
        part = docs[a:a + args.batch]
        judged = [{"id": f"j-{d.id}-{p}", "doc_id": d.id, "profile": p,
                   "relevant": p.split("-", 1)[1] in d.topics, "text": d.text}
                  for i, d in enumerate(part, a) if i % JUDGE_EVERY == 0 for p in learn]
        messages.append(([{"id": d.id, "title": d.title, "text": d.text} for d in part], judged))

    # the reference: the service in-process, on the same documents
    ref = Service(TrainingSet.load(idf), n_shards=args.partitions)
    table: dict[str, bytes] = {}
    ref.apply_specs([InputMessage(orjson.dumps(s), "profiles", shard_of(str(s["profile"]),
                                                                        args.partitions))
                     for s in specs], table)
    expected: set[tuple[str, str, float]] = set()
    for m, _ in messages:
        routed = ref.route([InputMessage(orjson.dumps({"documents": m}))])
        for payload in routed.payloads:
            for p in range(args.partitions):
                expected |= {(d.doc_id, d.profile, round(d.score, 9))
                             for d in ref.score(p, payload, table) if d.profile in fixed}
    judgments = [j for _, js in messages for j in js]

    broker: DevBroker | None = None
    url = os.environ.get("SIFT_BROKER", "").strip()
    if not url:
        broker = DevBroker(port=free_port(), controller_port=free_port(), data_dir=tmp / "kafka",
                           die_with_parent=True)
        broker.start(timeout=180)
        url = broker.url
    settings = Settings(broker=url, topic_prefix=f"rb{uuid.uuid4().hex[:6]}.",
                        app_id=f"rebalance-{uuid.uuid4().hex[:8]}", partitions=args.partitions,
                        data_dir=str(tmp / "w1"), idf_corpus=str(idf), batch_size=32,
                        batch_timeout=0.05)
    if args.session_timeout is not None:
        settings = replace(settings, session_timeout=args.session_timeout,
                           heartbeat_interval=args.session_timeout / 10)
    w1 = WorkerProcess(settings, "w1")
    w2 = WorkerProcess(replace(settings, data_dir=str(tmp / "w2")), "w2")
    w3 = WorkerProcess(replace(settings, data_dir=str(tmp / "w3")), "w3")
    workers = {"w1": w1, "w2": w2, "w3": w3}
    sender = Sender(settings, messages, args.rate)
    sampler = Sampler(workers, len(specs), sender, args.interval)
    events: dict[str, dict[str, Any]] = {}
    try:
        w1.start().wait_ready(timeout=300)
        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        wait_for(lambda: total([w1], "profiles_created") == len(specs), 300, "profiles")
        def sender_ok() -> bool:
            if sender.error is not None:
                raise sender.error
            return True

        t0 = time.time()
        sampler.start()
        sender.start()
        time.sleep(args.join_after)

        # 1. join
        join = {"at": time.time()}
        w2.start()
        w2.wait_ready(timeout=300)
        join["ready_after"] = round(time.time() - join["at"], 2)
        wait_for(lambda: sender_ok() and total([w2], "scored") > 0, 300, "w2 scoring")
        join["scoring_after"] = round(time.time() - join["at"], 2)
        join["w2_partitions"] = w2.stats().get("partitions")
        events["join"] = join
        time.sleep(args.stay)

        # 2. leave (SIGTERM: commit and leave the group)
        leave: dict[str, Any] = {"at": time.time()}
        code = w2.stop()
        leave["exit_code"] = code
        leave["stopped_after"] = round(time.time() - leave["at"], 2)
        wait_for(lambda: len(w1.stats().get("partitions", [])) == args.partitions, 300,
                 "w1 has every partition again")
        leave["w1_all_partitions_after"] = round(time.time() - leave["at"], 2)
        events["leave"] = leave

        if args.crash:  # 3. a worker joins and is killed
            time.sleep(10)
            crash: dict[str, Any] = {"joined_at": time.time()}
            w3.start()
            w3.wait_ready(timeout=300)
            wait_for(lambda: sender_ok() and total([w3], "scored") > 0, 300, "w3 scoring")
            time.sleep(5)
            crash["at"] = time.time()
            w3.kill()
            wait_for(lambda: len(w1.stats().get("partitions", [])) == args.partitions, 300,
                     "w1 has every partition after the crash")
            crash["w1_all_partitions_after"] = round(time.time() - crash["at"], 2)
            events["crash"] = crash

        sender.join()
        if sender.error is not None:
            raise sender.error
        sent_end = time.time()
        from sift.kafkaclient import group_lag

        def complete() -> bool:
            got = {(str(d["doc_id"]), str(d["profile"]), round(float(d["score"]), 9))
                   for d in all_decisions() if d["profile"] in fixed}
            return expected <= got and group_lag(
                settings, ("documents", "judgments", "shard-documents")) == 0

        def all_decisions() -> list[dict[str, Any]]:
            return [orjson.loads(v) for _, v, _, _ in
                    read_all(settings, settings.topic("decisions"), idle=1.5)]

        try:  # a loss is a result too: record it rather than stop here
            wait_for(complete, 300, "every expected decision and zero lag", interval=2.0)
            completed = True
        except HarnessError:
            completed = False
        done = time.time()
        sampler.stop_event.set()
        sampler.join()

        decisions = all_decisions()
        got = [(str(d["doc_id"]), str(d["profile"]), round(float(d["score"]), 9))
               for d in decisions if d["profile"] in fixed]
        keys = Counter((d, p) for d, p, _ in got)
        recovered = recovered_profiles(settings, ref)  # the state and journal changelogs
        judged_ok = {}
        for name in learn:
            entry = recovered[name]
            want = {str(j["id"]) for j in judgments if j["profile"] == name}
            held = sorted(entry.judged.digests().tolist())
            judged_ok[name] = {"sent": len(want), "keys_equal": held == sorted(key_digests(want)),
                               "n_judged": entry.profile.n_judged_}
        steady = latency(decisions, sender.sent_at, t0 + 5, events["join"]["at"])
        starts = sorted(ev.get("joined_at", ev["at"]) for ev in events.values())
        for ev in events.values():
            # until the next event begins (a join begins when its worker starts)
            end = min([x for x in starts if x > ev["at"]] + [ev["at"] + 120])
            ev["stall_seconds"] = stall(sampler.samples, ev["at"], end)
            ev["stall_window_seconds"] = round(end - ev["at"], 2)
            ev["caught_up_after"] = caught_up(sampler.samples, ev["at"])
            ev["latency_next_30s"] = latency(decisions, sender.sent_at, ev["at"], ev["at"] + 30)
            for k in ("at", "joined_at"):
                if k in ev:
                    ev[k] = round(ev[k] - t0, 2)
        result = {
            "command": "benchmarks/rebalance.py " + " ".join(argv if argv is not None
                                                             else sys.argv[1:]),
            "documents": n_docs, "rate": args.rate, "documents_per_message": args.batch,
            "partitions": args.partitions, "fixed_profiles": len(fixed),
            "session_timeout": settings.session_timeout,
            "learning_profiles": len(learn), "judgments": len(judgments),
            "events": events,
            "steady_latency_before_join": steady,
            "seconds_to_complete_after_last_send": round(done - sent_end, 1),
            "fixed_decisions_expected": len(expected),
            "fixed_decisions_received": len(got),
            "completed": completed,
            "missing": len(expected - set(got)),
            "missing_sample": sorted((d, p) for d, p, _ in expected - set(got))[:10],
            "unexpected": len(set(got) - expected),
            "repeated": len(got) - len(keys),
            "repeats_with_another_score": len(set(got)) - len(keys),
            "documents_scored_per_worker": {n: int(w.stats().get("stats", {}).get("documents", 0))
                                            for n, w in workers.items() if w.proc is not None},
            "judgments_check": judged_ok,
            "cpu_count": os.cpu_count(), "load_average_at_start": load_start,
            "load_average_at_end": os.getloadavg(),
            "samples": [{k: (round(v - t0, 2) if k == "t" else v) for k, v in s.items()}
                        for s in sampler.samples],
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
        ok = (completed and result["missing"] == 0 and result["unexpected"] == 0
              and result["repeats_with_another_score"] == 0
              and all(v["keys_equal"] and v["n_judged"] == v["sent"] for v in judged_ok.values()))
        return 0 if ok else 1
    finally:
        sampler.stop_event.set()
        for w in (w3, w2, w1):
            w.kill() if w is w3 else w.stop()
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data, ignore_errors=True)  # gigabytes of log segments


if __name__ == "__main__":
    raise SystemExit(main())
