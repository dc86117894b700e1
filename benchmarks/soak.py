"""Soak: many documents through one ``sift worker`` against 100 profiles, judgments flowing.

Samples, every ``--interval`` seconds, the worker's resident memory (``VmRSS`` from
``/proc``), its documents/judgments counters (``stats.json``) and the consumer lag of
its group; writes ``benchmarks/results/soak.json`` and a PNG of RSS and throughput over
time (``docs/img/soak_rss.png``).

The producer runs closed-loop: it stays at most ``--ahead`` documents ahead of the
worker (so the backlog, and the broker's disk, stay bounded), sends a judgment (with
its text) for one document in ``--judge-every``, then stops; the run ends when the lag
is back to zero.

    .venv/bin/python benchmarks/soak.py                       # 1,000,000 documents
    .venv/bin/python benchmarks/soak.py --documents 100000    # shorter

Without ``SIFT_BROKER`` a local broker is started on free ports and stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.harness import WorkerProcess, total, wait_for  # noqa: E402
from sift.devbroker import DevBroker, free_port  # noqa: E402
from sift.replay import query_from_name  # noqa: E402
from sift.settings import Settings  # noqa: E402
from sift.topics.codecs import read_jsonl, write_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

REUTERS = ROOT / "data" / "reuters21578"
MODELS = ("rocchio", "knn")


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def lag(settings: Settings) -> int:
    from sift.kafkaclient import group_lag

    return group_lag(settings, ("documents", "judgments", "shard-documents"))


def seek_lines(worker: WorkerProcess, most: int = 20) -> list[str]:
    """The first ``most`` of the worker's log lines about a tail seek (which partition,
    from which offset, at what time)."""
    try:
        lines = worker.log_path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if "seeking back" in line][:most]


def profile_specs(train: list[Document], n: int) -> list[dict[str, Any]]:
    """``n`` profile specs: the ``n / 2`` largest categories of ``train`` (rounded up),
    each with its first three positives as ids, Rocchio first then kNN. ``train`` must be
    the worker's training corpus: a positive id it does not hold is refused
    (``unknown_positive``). Each model takes its half of the categories: taken over all
    of them Rocchio's came first, and the 100 profiles of a run were 90 Rocchio and 10
    kNN ones (100 and none over the whole training set) where the soak means 50 of each
    (fifty-first session)."""
    by_cat: dict[str, list[str]] = {}
    for d in train:
        for t in d.topics:
            by_cat.setdefault(t, []).append(d.id)
    cats = sorted(by_cat, key=lambda c: (-len(by_cat[c]), c))[: -(-n // len(MODELS))]
    specs = []
    for model in MODELS:
        for c in cats:
            if len(specs) == n:
                return specs
            specs.append({"profile": f"{c}-{model}", "query": query_from_name(c), "model": model,
                          "positives": by_cat[c][:3]})
    return specs


def stream(pool: list[Document], n: int) -> Iterator[tuple[int, Document]]:
    i = 0
    k = 0
    while i < n:
        for d in pool:
            if i == n:
                return
            yield i, Document(f"{d.id}~{k}", d.text, d.title, None, None, d.topics)
            i += 1
        k += 1


class Producer(threading.Thread):
    """Closed-loop sender of document batches and judgments."""

    def __init__(self, settings: Settings, worker: WorkerProcess, pool: list[Document], n: int,
                 specs: list[dict[str, Any]], batch: int, ahead: int, judge_every: int) -> None:
        super().__init__(daemon=True)
        self.settings, self.worker, self.pool, self.n = settings, worker, pool, n
        self.specs, self.batch, self.ahead, self.judge_every = specs, batch, ahead, judge_every
        self.sent_documents = 0
        self.sent_judgments = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        from sift.kafkaclient import producer

        prod = producer(self.settings)
        docs_topic = self.settings.topic("documents")
        judg_topic = self.settings.topic("judgments")
        names = [str(s["profile"]) for s in self.specs]
        try:
            buf: list[dict[str, Any]] = []
            judgments: list[dict[str, Any]] = []
            for i, d in stream(self.pool, self.n):
                buf.append({"id": d.id, "title": d.title, "text": d.text})
                if i % self.judge_every == 0:
                    name = names[(i // self.judge_every) % len(names)]
                    cat = name.rsplit("-", 1)[0]
                    judgments.append({"id": f"j-{d.id}", "doc_id": d.id, "profile": name,
                                      "relevant": cat in d.topics, "text": d.text})
                if len(buf) == self.batch:
                    self._send(prod, docs_topic, judg_topic, buf, judgments)
                    buf, judgments = [], []
            if buf:
                self._send(prod, docs_topic, judg_topic, buf, judgments)
            prod.flush(timeout=120)
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            prod.close(timeout=30)

    def _send(self, prod: Any, docs_topic: str, judg_topic: str, buf: list[dict[str, Any]],
              judgments: list[dict[str, Any]]) -> None:
        # paced on documents *scored* (scored pairs / profiles), not routed: the shard topic's
        # backlog is what Faust buffers in memory
        n = len(self.specs)
        while self.sent_documents - total([self.worker], "scored") / n > self.ahead:
            time.sleep(0.2)
        prod.send(docs_topic, key=str(buf[0]["id"]).encode(),
                  value=orjson.dumps({"documents": buf}))
        for j in judgments:
            prod.send(judg_topic, key=str(j["profile"]).encode(), value=orjson.dumps(j))
        self.sent_documents += len(buf)
        self.sent_judgments += len(judgments)


def plot(samples: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t"] / 60 for s in samples]
    fig, (ax0, ax1, ax2) = plt.subplots(3, 1, figsize=(8, 9))
    ax0.plot([s["documents"] / 1000 for s in samples], [s["rss_mb"] for s in samples],
             color="tab:blue")
    ax0.set_xlabel("documents scored (thousands)")
    ax0.set_ylabel("worker RSS (MB)")
    ax0.set_ylim(bottom=0)
    ax0.grid(alpha=0.3)
    ax0.set_title(title)
    ax1.plot(t, [s["rss_mb"] for s in samples], color="tab:blue")
    ax1.set_ylabel("worker RSS (MB)")
    ax1.set_ylim(bottom=0)
    ax1.grid(alpha=0.3)
    ax2.plot(t, [s["docs_per_s"] for s in samples], color="tab:green", label="documents/s")
    ax2.set_ylabel("documents/s")
    ax2.set_xlabel("minutes")
    ax1.sharex(ax2)
    ax2.grid(alpha=0.3)
    ax3 = ax2.twinx()
    ax3.plot(t, [s["lag"] for s in samples], color="tab:red", alpha=0.6, label="lag (messages)")
    ax3.set_ylabel("consumer lag (messages)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def caps(documents: int, n_profiles: int, idf_docs: int, out: Path) -> dict[str, Any]:
    """In-process (no Kafka): the service's memory once every profile's state is at its caps.

    ``n_profiles`` profiles (half Rocchio, half kNN) get a judgment for every other
    document, so their example sets reach ``max_examples`` (2,000) early; RSS (after a
    ``malloc_trim``), the total size of the profile records and the example-set sizes
    are recorded every 10,000 documents.
    """
    import gc

    from sift.agents.service import (
        InputMessage,
        Service,
        TrainingSet,
        release_free_memory,
        shard_of,
    )

    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))
    tmp = Path(tempfile.mkdtemp(prefix="sift-caps-"))
    idf = tmp / "idf.jsonl.gz"
    write_jsonl(idf, train[:idf_docs])
    svc = Service(TrainingSet.load(idf), n_shards=4, recent_documents=20_000)
    table: dict[str, bytes] = {}
    every = profile_specs(train[:idf_docs], 100)
    specs = ([s for s in every if s["profile"].endswith("-rocchio")][: n_profiles // 2]
             + [s for s in every if s["profile"].endswith("-knn")][: n_profiles - n_profiles // 2])
    for i, spec in enumerate(specs):
        svc.apply_specs([InputMessage(orjson.dumps(spec), "profiles",
                                      shard_of(str(spec["profile"]), 4), i)], table)
    names = [str(s["profile"]) for s in specs]
    rows: list[dict[str, Any]] = []
    buf: list[dict[str, Any]] = []
    judged: list[Any] = []
    n_judged, start = 0, time.monotonic()
    for i, d in stream(test + train[idf_docs:], documents):
        buf.append({"id": d.id, "title": d.title, "text": d.text})
        if i % 2 == 0:
            name = names[(i // 2) % len(names)]
            judged.append(InputMessage(orjson.dumps(
                {"id": f"j-{d.id}", "doc_id": d.id, "profile": name,
                 "relevant": name.rsplit("-", 1)[0] in d.topics}), "judgments",
                shard_of(name, 4), i))
        if len(buf) < 1000:
            continue
        routed = svc.route([InputMessage(orjson.dumps({"documents": buf}), "documents", 0,
                                         i)])
        for p in range(4):
            for payload in routed.payloads:
                svc.score(p, payload, table)
        for part in range(4):
            svc.apply_judgments([m for m in judged if m.partition == part], table)
        n_judged += len(judged)
        buf, judged = [], []
        if (i + 1) % 10_000 == 0:
            gc.collect()
            release_free_memory()
            sizes = [len(e.profile.examples_) for n in names
                     if (e := svc.entry(n, table)) is not None]
            rows.append({"documents": i + 1, "judgments": n_judged,
                         "rss_mb": round(rss_bytes(os.getpid()) / 2**20, 1),
                         "records_mb": round(sum(len(table[n]) for n in names) / 2**20, 1),
                         "examples_min": min(sizes), "examples_max": max(sizes),
                         "seconds": round(time.monotonic() - start, 1)})
            print(json.dumps(rows[-1]), flush=True)
    result = {"command": f"benchmarks/soak.py --caps --documents {documents} "
                         f"--profiles {n_profiles}",
              "documents": documents, "profiles": n_profiles, "judge_every": 2,
              "cpu_count": os.cpu_count(), "load_average_at_end": os.getloadavg(),
              "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--documents", type=int, default=1_000_000)
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--batch", type=int, default=100, help="documents per message")
    ap.add_argument("--ahead", type=int, default=5_000, help="max documents not yet scored")
    ap.add_argument("--judge-every", type=int, default=50)
    ap.add_argument("--recent", type=int, default=20_000, help="SIFT_RECENT_DOCUMENTS")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--idf-docs", type=int, default=2000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "soak.json"))
    ap.add_argument("--png", default=str(ROOT / "docs" / "img" / "soak_rss.png"))
    ap.add_argument("--caps", action="store_true",
                    help="in-process: memory once every profile's state is at its caps "
                         "(writes benchmarks/results/soak_caps.json)")
    args = ap.parse_args(argv)
    if args.caps:
        caps(args.documents, args.profiles, args.idf_docs,
             ROOT / "benchmarks" / "results" / "soak_caps.json")
        return 0

    load_start = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="sift-soak-"))
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))
    test = list(read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj))
    idf = tmp / "idf.jsonl.gz"
    write_jsonl(idf, train[: args.idf_docs])
    broker: DevBroker | None = None
    url = os.environ.get("SIFT_BROKER", "").strip()
    if not url:
        broker = DevBroker(port=free_port(), controller_port=free_port(), data_dir=tmp / "kafka",
                           die_with_parent=True)
        broker.start(timeout=180)
        url = broker.url
    settings = Settings(broker=url, topic_prefix=f"soak{uuid.uuid4().hex[:6]}.",
                        app_id=f"soak-{uuid.uuid4().hex[:8]}", partitions=args.partitions,
                        data_dir=str(tmp / "w1"), idf_corpus=str(idf),
                        recent_documents=args.recent)
    worker = WorkerProcess(settings, "w1").start()
    samples: list[dict[str, float]] = []
    result: dict[str, Any] = {}
    try:
        worker.wait_ready(timeout=300)
        specs = profile_specs(train[: args.idf_docs], args.profiles)
        from sift.agents.harness import send_all

        send_all(settings, settings.topic("profiles"),
                 [(str(s["profile"]).encode(), orjson.dumps(s)) for s in specs])
        # a refused spec is a dead letter: fail at once rather than wait for it
        wait_for(lambda: total([worker], "profiles_created") + total([worker], "dead_letters")
                 >= len(specs), 600, "profiles")
        if total([worker], "dead_letters"):
            raise SystemExit(f"soak: {total([worker], 'dead_letters')} profile specs refused "
                             f"(see {settings.data_dir}/w1.log)")
        assert worker.proc is not None
        pid = worker.proc.pid
        prod = Producer(settings, worker, test + train[args.idf_docs:], args.documents, specs,
                        args.batch, args.ahead, args.judge_every)
        t0 = time.monotonic()
        prod.start()
        last_docs, last_t = total([worker], "documents"), t0
        produced_at: float | None = None
        while True:
            time.sleep(args.interval)
            worker.ready()  # raises if the worker died
            now = time.monotonic()
            docs = total([worker], "scored") // len(specs)  # documents scored
            try:
                current_lag = lag(settings)
            except Exception:
                current_lag = -1
            memory = worker.stats().get("memory", {})
            samples.append({"t": now - t0, "rss_mb": rss_bytes(pid) / 2**20, "documents": docs,
                            "python_blocks": memory.get("python_blocks"),
                            "documents_kept": worker.stats().get("documents_kept"),
                            "judgments": total([worker], "judgments"),
                            "docs_per_s": (docs - last_docs) / (now - last_t),
                            "lag": current_lag, "sent": prod.sent_documents})
            last_docs, last_t = docs, now
            s = samples[-1]
            print(f"{s['t']:7.0f}s docs {docs:>9,} ({s['docs_per_s']:6.0f}/s) "
                  f"judgments {int(s['judgments']):>7,} rss {s['rss_mb']:6.0f} MB lag {current_lag}",
                  flush=True)
            if prod.error is not None:
                raise prod.error
            if not prod.is_alive() and produced_at is None:
                produced_at = now
            if produced_at is not None and docs >= args.documents and current_lag == 0:
                break
            if produced_at is not None and now - produced_at > 900:
                raise TimeoutError("lag did not return to zero within 15 minutes")
        elapsed = time.monotonic() - t0
        busy = [s for s in samples if s["t"] <= (produced_at or now) - t0 and s["t"] > 30]
        fifth = max(1, len(busy) // 5)
        first = sum(s["docs_per_s"] for s in busy[:fifth]) / fifth if busy else 0.0
        last = sum(s["docs_per_s"] for s in busy[-fifth:]) / fifth if busy else 0.0
        half = samples[len(samples) // 2:]
        step = max(args.documents // 10, 1)
        rss_by_documents = []
        for mark in range(step, args.documents + 1, step):
            at = next((x for x in samples if x["documents"] >= mark), samples[-1])
            rss_by_documents.append({"documents": mark, "t": round(at["t"], 1),
                                     "rss_mb": round(at["rss_mb"], 1), "lag": at["lag"]})
        result = {
            "command": "benchmarks/soak.py " + " ".join(argv if argv is not None
                                                        else sys.argv[1:]),
            "rss_by_documents": rss_by_documents,
            "load_average_at_start": load_start,
            "documents": args.documents, "profiles": len(specs), "partitions": args.partitions,
            "documents_per_message": args.batch, "judge_every": args.judge_every,
            "judgments_sent": prod.sent_judgments,
            "judgments_applied": total([worker], "judgments"),
            "judgments_duplicate": total([worker], "judgments_duplicate"),
            # the tail watch's seeks back (sift/agents/tails.py) and the messages they
            # delivered again, which the worker then skipped: 0 when no long batch was
            # taken for a lost tail (docs/reliability.md, items 81 and 83)
            "tail_seeks": total([worker], "tail_seeks"),
            # stalls not sought back because the partition's next messages were seen
            # waiting in the worker's buffers (fifty-third session)
            "tail_waits": total([worker], "tail_waits"),
            "redelivered_skipped": total([worker], "redelivered_skipped"),
            "tail_seek_lines": seek_lines(worker),
            "recent_documents": args.recent, "idf_documents": args.idf_docs,
            "seconds": round(elapsed, 1),
            "documents_per_second": round(args.documents / elapsed, 1),
            "throughput_first_fifth": round(first, 1), "throughput_last_fifth": round(last, 1),
            "throughput_last_over_first": round(last / first, 3) if first else None,
            "rss_mb_max": round(max(s["rss_mb"] for s in samples), 1),
            "rss_mb_final": round(samples[-1]["rss_mb"], 1),
            "rss_mb_second_half_min": round(min(s["rss_mb"] for s in half), 1),
            "rss_mb_second_half_max": round(max(s["rss_mb"] for s in half), 1),
            "final_lag": samples[-1]["lag"],
            "seconds_to_zero_lag_after_last_send": round(now - (produced_at or now), 1),
            "dead_letters": total([worker], "dead_letters"),
            "state_bytes_max": int(worker.stats().get("stats", {}).get("state_bytes_max", 0)),
            "cpu_count": os.cpu_count(), "load_average_at_end": os.getloadavg(),
            "samples": samples,
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))
        plot(samples, Path(args.png), f"sift soak: {args.documents:,} documents, {len(specs)} "
             f"profiles, one worker")
        print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    finally:
        worker.stop()
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data, ignore_errors=True)  # gigabytes of log segments
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
