"""What a judgment costs the streaming service, in process (no Kafka): CPU and bytes written.

Builds ``--profiles`` query-only profiles from the stream benchmark's corpus (IDF on 2,000
Reuters training documents, as ``stream_bench.py``), keeps the vectors of 5,000 routed
documents, then applies ``--batches`` consumed batches of ``--batch`` random judgments
(random documents and profiles, 30 % relevant, ``update=every``) with
``Service.apply_judgments``, with the judgment journal and without it (a state record per
changed profile and batch, as before the twenty-first session), by turns, each on a
service of its own built the same way. Reports CPU per judgment and the bytes written to
the state table and the journal table per judgment (what the changelog topics carry),
checks that both ways end with the same profiles, bit for bit, and times a fresh
service recovering every profile from each way's tables (as a worker taking the
profiles over does), ``--recoveries`` times by turns (the median is reported). Then
``--corrections`` judgments give judged pairs the other label, each in a batch of its own
(forty-seventh session): CPU and bytes a correction costs.

    python benchmarks/service_judgments.py --out benchmarks/results/service_judgments.json
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stream_bench import Corpus, distinct_pairs, load  # noqa: E402
from sift.agents.service import InputMessage, Service, TrainingSet  # noqa: E402


class CountingTable(dict[str, bytes]):
    """A dict that counts the bytes written to it."""

    written = 0
    writes = 0

    def __setitem__(self, key: str, value: bytes) -> None:
        self.written += len(value)
        self.writes += 1
        super().__setitem__(key, value)


def build(training: TrainingSet, corpus: Corpus, n_profiles: int, journal: bool,
          docs: list[dict[str, Any]]) -> tuple[Service, CountingTable, CountingTable]:
    table, jtable = CountingTable(), CountingTable()
    svc = Service(training, n_shards=4, journal=jtable if journal else None)
    svc.apply_specs([InputMessage(orjson.dumps(s), "profiles", svc.shard(s["profile"]))
                     for s in corpus.specs(n_profiles)], table)
    for i in range(0, len(docs), 100):
        routed = svc.route([InputMessage(orjson.dumps({"documents": docs[i:i + 100]}),
                                         "documents", 0, i // 100)])
        for ids, X in routed.parts:
            svc.store.put(ids, X)
    table.written = table.writes = 0
    return svc, table, jtable


def batches(svc: Service, ids: list[str], n_profiles: int, n: int, size: int,
            seed: int, used: set[tuple[str, str]],
            labels: dict[tuple[str, str], bool]) -> list[list[InputMessage]]:
    """``n`` batches of ``size`` judgments of (document, profile) pairs not judged before
    (``used``, over the rounds; ``labels`` gets each pair's label): a pair judged again is
    a repeat or a correction since the forty-seventh session, measured apart
    (:func:`corrections`)."""
    rng = random.Random(seed)
    names = [f"p{i:04d}" for i in range(n_profiles)]
    pairs = distinct_pairs(rng, ids, names, n * size, used)
    out = []
    for b in range(n):
        batch = []
        for k in range(size):
            doc, p = pairs[b * size + k]
            j = {"id": f"j{seed}-{b}-{k}", "doc_id": doc, "profile": p,
                 "relevant": rng.random() < 0.3}
            labels[(doc, p)] = j["relevant"]
            batch.append(InputMessage(orjson.dumps(j), "judgments", svc.shard(p), b * size + k))
        out.append(batch)
    return out


def run_one(svc: Service, table: MutableMapping[str, bytes],
            todo: list[list[InputMessage]], corrections: bool = False) -> float:
    t = time.process_time()
    for batch in todo:
        res = svc.apply_judgments(batch, table)
        if res.dead_letters:
            raise RuntimeError(f"dead letters: {res.dead_letters[:1]}")
    if svc.stats["judgments_repeated"] or (svc.stats["judgments_corrected"] and not corrections):
        raise RuntimeError("a (document, profile) pair was judged twice")
    return time.process_time() - t


def corrections(services: dict[str, tuple[Service, CountingTable, CountingTable]],
                labels: dict[tuple[str, str], bool], n: int) -> dict[str, Any]:
    """``n`` judgments giving judged pairs the other label (corrections), each a consumed
    batch of its own (one alone pays its profile's re-threshold and journal append, or
    record without the journal, by itself: the dear case), on both services by turns:
    CPU and bytes written per correction."""
    rng = random.Random(99)
    pairs = rng.sample(sorted(labels), n)
    out: dict[str, Any] = {"corrections": n, "one_per_batch": True}
    for mode, (svc, table, jtable) in services.items():
        w0, j0, c0 = table.written, jtable.written, svc.stats["judgments_corrected"]
        todo = []
        for k, (doc, p) in enumerate(pairs):
            j = {"id": f"c-{k}", "doc_id": doc, "profile": p, "relevant": not labels[(doc, p)]}
            todo.append([InputMessage(orjson.dumps(j), "judgments", svc.shard(p), k)])
        cpu = run_one(svc, table, todo, corrections=True)
        if svc.stats["judgments_corrected"] - c0 != n:
            raise RuntimeError(f"{mode}: {svc.stats['judgments_corrected'] - c0} of {n} corrected")
        out[mode] = {"us_per_correction": round(1e6 * cpu / n, 1),
                     "state_bytes_per_correction": round((table.written - w0) / n),
                     "journal_bytes_per_correction": round((jtable.written - j0) / n)}
    for doc, p in pairs:
        labels[(doc, p)] = not labels[(doc, p)]
    print(f"  corrections: {out}", flush=True)
    return out


def measure(training: TrainingSet, corpus: Corpus, n_profiles: int, n_batches: int,
            size: int, rounds: int, recoveries: int = 3, n_corrections: int = 0) -> dict[str, Any]:
    docs = corpus.documents(5000)
    ids = [d["id"] for d in docs]
    services = {mode: build(training, corpus, n_profiles, mode == "journal", docs)
                for mode in ("journal", "record per batch")}
    out: dict[str, Any] = {"profiles": n_profiles, "batch": size, "rounds": []}
    used: set[tuple[str, str]] = set()
    labels: dict[tuple[str, str], bool] = {}
    for r in range(rounds):  # by turns: the machine's speed drifts
        todo = batches(services["journal"][0], ids, n_profiles, n_batches, size, seed=r,
                       used=used, labels=labels)
        row: dict[str, Any] = {}
        for mode, (svc, table, jtable) in services.items():
            w0, j0 = table.written, jtable.written
            cpu = run_one(svc, table, todo)
            n = n_batches * size
            row[mode] = {"us_per_judgment": round(1e6 * cpu / n, 1),
                         "judgments_per_cpu_s": round(n / cpu),
                         "state_bytes_per_judgment": round((table.written - w0) / n),
                         "journal_bytes_per_judgment": round((jtable.written - j0) / n)}
        out["rounds"].append(row)
        print(f"  {n_profiles} profiles, round {r}: {row}", flush=True)
    for mode in services:
        out[mode] = {k: statistics.median(row[mode][k] for row in out["rounds"])
                     for k in out["rounds"][0][mode]}
    if n_corrections:
        out["corrections"] = corrections(services, labels, n_corrections)
    a, b = services["journal"], services["record per batch"]
    same = all(orjson.dumps(a[0].entry(p, a[1]).profile.to_state())  # type: ignore[union-attr]
               == orjson.dumps(b[0].entry(p, b[1]).profile.to_state())  # type: ignore[union-attr]
               for p in (s["profile"] for s in corpus.specs(n_profiles)))
    out["same_profiles"] = same
    # what a worker taking the profiles over pays: decoding each record (and re-learning
    # its journal's batches after it, in one step: Profile.relearn_rows); the two ways by
    # turns, the median of ``recoveries`` rounds (one round moves with the machine)
    times: dict[str, list[float]] = {mode: [] for mode in services}
    for _ in range(recoveries):
        for mode, (_, table, jtable) in services.items():
            gc.collect()
            fresh = Service(training, n_shards=4, journal=dict(jtable) if jtable else None)
            t = time.process_time()
            for name in list(table):
                fresh.entry(name, table)
            times[mode].append(round(time.process_time() - t, 2))
            out[mode]["journal_batches_relearned"] = fresh.stats["journal_replayed"]
            del fresh
    for mode, (_, table, jtable) in services.items():
        out[mode]["recovery_cpu_s"] = statistics.median(times[mode])
        out[mode]["recovery_cpu_s_rounds"] = times[mode]
        out[mode]["state_mb"] = round(sum(len(v) for v in table.values()) / 1e6, 1)
        out[mode]["journal_mb"] = round(sum(len(v) for v in jtable.values()) / 1e6, 1)
    out["state_records_with_journal"] = a[0].stats["state_records"]
    out["journal_appends"] = a[0].stats["journal_appends"]
    out["speedup"] = round(out["record per batch"]["us_per_judgment"]
                           / out["journal"]["us_per_judgment"], 2)
    if not same:
        raise RuntimeError("the journal and the record-per-batch services disagree")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=lambda s: [int(x) for x in s.split(",")],
                    default=[100, 1000])
    ap.add_argument("--batches", type=int, default=40, help="consumed batches per round")
    ap.add_argument("--batch", type=int, default=1024, help="judgments per consumed batch")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds on the same services (the first fills the journals)")
    ap.add_argument("--recoveries", type=int, default=3,
                    help="recovery rounds (each way by turns; the median is reported)")
    ap.add_argument("--corrections", type=int, default=200,
                    help="corrections after the rounds, one a consumed batch (0: none)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.recoveries < 1:
        ap.error(f"--recoveries must be at least 1, got {args.recoveries}")
    corpus = Corpus()
    training = TrainingSet.load(corpus.idf)
    result: dict[str, Any] = {
        "benchmark": "service_judgments", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python benchmarks/service_judgments.py " + " ".join(sys.argv[1:]),
        "load_at_start": load(), "runs": []}
    for n in args.profiles:
        result["runs"].append(measure(training, corpus, n, args.batches, args.batch,
                                      args.rounds, args.recoveries, args.corrections))
    result["load_at_end"] = load()
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
