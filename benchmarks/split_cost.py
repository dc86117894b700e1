"""What splitting the profiles over two workers costs in sift's own code, in one process.

Two workers on 4 partitions each route half the documents and score them against the
profiles of the two shards they hold; each routed batch goes once, as a copy of term
counts, to the other worker, which scores it against the rest (docs/streaming.md).
This replays that with the :class:`~sift.agents.service.Service` objects alone (no
broker, no Faust): one service holding all four shards (*one worker*), and two holding
shards 0-1 and 2-3 (*two workers*: the first routes, scores its shards and encodes the
copies, the second decodes, stores and scores them). Every step is timed by its thread
CPU time, per document, both set-ups by turns on the same batches of the stream
benchmark's documents and profiles (``benchmarks/stream_bench.py``: Reuters-21578 test
documents, profiles of three random training words), and the two set-ups must deliver
the same decisions.

The extra CPU of two workers here is the floor of what the split costs: in a worker,
Faust's handling of the copies' messages and aiokafka's producer and consumer come on
top (``benchmarks/scale_concurrent.py`` measures the whole).

    .venv/bin/python benchmarks/split_cost.py                      # 100 profiles
    .venv/bin/python benchmarks/split_cost.py --profiles 1000 --out /tmp/s.json
    .venv/bin/python benchmarks/split_cost.py --processes --worker-cores 0.4 \
        --out benchmarks/results/split_cost_processes.json

``--processes`` runs the same steps in three processes at once, as
``benchmarks/scale_concurrent.py`` runs three workers: one worker (all four shards) on
its own, and the pair's router (shards 0-1) and receiver (shards 2-3), the router's
copies passed to the receiver through a pipe; still no broker and no Faust. The pair
gets twice the steps, so that the three end at about the same time. With
``--worker-cores`` each process is capped in a cgroup of its own (``cpucap.py``). What
the steps cost there against what they cost by turns in one process is what running as
separate processes on one machine adds (each process's own caches, vectorizer and
banks, the cores shared), apart from Faust and aiokafka.

Writes ``benchmarks/results/split_cost.json``: per set-up and step, the median over the
rounds of µs a document, the extra of two workers in µs and as a share of one worker's,
and the speedup two workers would reach if nothing else cost more
(``2 * one / two``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import stream_bench as sb  # noqa: E402
from sift.agents.service import InputMessage, Service, TrainingSet  # noqa: E402

STEPS_ONE = ("route", "score")
STEPS_TWO = ("route", "score_here", "encode_copies", "score_copies")


def service_with_profiles(training: TrainingSet, specs: list[dict[str, Any]]
                          ) -> tuple[Service, dict[str, bytes]]:
    svc = Service(training, n_shards=4)
    table: dict[str, bytes] = {}
    msgs = [InputMessage(orjson.dumps(s), "profiles", svc.shard(s["profile"]), i,
                         s["profile"].encode()) for i, s in enumerate(specs)]
    result = svc.apply_specs(msgs, table)
    if result.dead_letters:
        raise SystemExit(f"split_cost: a profile was refused: {result.dead_letters[0]}")
    return svc, table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--batch", type=int, default=2000, help="documents a routing step")
    ap.add_argument("--per-message", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warm-up", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/split_cost.json")
    ap.add_argument("--processes", action="store_true",
                    help="one worker and the pair's two in three processes at once (above)")
    ap.add_argument("--worker-cores", type=float, default=None, metavar="CORES",
                    help="with --processes: cap each process at CORES in a cgroup of its own")
    args = ap.parse_args(argv)

    corpus = sb.Corpus()
    try:
        return (run_processes if args.processes else run)(args, corpus, argv)
    finally:
        shutil.rmtree(corpus.dir, ignore_errors=True)


def step_messages(corpus: sb.Corpus, batch: int, per_message: int,
                  offset: int) -> list[InputMessage]:
    """One routing step: the corpus's next ``batch`` documents, ``per_message`` a message,
    as messages of partition 0 from ``offset`` on."""
    docs = corpus.documents(batch)
    return [InputMessage(orjson.dumps({"documents": docs[i : i + per_message]}), "documents", 0,
                         offset + j)
            for j, i in enumerate(range(0, len(docs), per_message))]


def run(args: argparse.Namespace, corpus: sb.Corpus, argv: list[str] | None) -> int:
    training = TrainingSet.load(corpus.idf)
    specs = corpus.specs(args.profiles)
    one, t_one = service_with_profiles(training, specs)
    router, t_router = service_with_profiles(training, specs)
    receiver, t_receiver = service_with_profiles(training, specs)
    here, elsewhere = [0, 1], [2, 3]
    clock = time.thread_time_ns
    times: dict[str, dict[str, list[float]]] = {"one": {s: [] for s in STEPS_ONE},
                                                "two": {s: [] for s in STEPS_TWO}}
    payloads: list[int] = []
    offset = 0
    for k in range(args.warm_up + args.rounds):
        msgs = step_messages(corpus, args.batch, args.per_message, offset)
        runs: dict[str, dict[str, int]] = {}
        decisions: dict[str, set[tuple[str, str]]] = {}
        for setup in (("one", "two") if k % 2 == 0 else ("two", "one")):
            if setup == "one":
                t0 = clock()
                routed = one.route(msgs)
                t1 = clock()
                ((ids, X),) = routed.parts
                got = one.score_here([0, 1, 2, 3], ids, X, t_one)
                t2 = clock()
                runs[setup] = {"route": t1 - t0, "score": t2 - t1}
            else:
                t0 = clock()
                routed = router.route(msgs)
                t1 = clock()
                ((ids, X),) = routed.parts
                got = router.score_here(here, ids, X, t_router)
                t2 = clock()
                copies = router.copies(ids, X, routed.counts[0], elsewhere)
                t3 = clock()
                for j, (p, payload) in enumerate(copies):
                    got += receiver.score_copies([InputMessage(payload, "shard", p, offset + j)],
                                                 t_receiver, set(elsewhere)).decisions
                t4 = clock()
                runs[setup] = {"route": t1 - t0, "score_here": t2 - t1,
                               "encode_copies": t3 - t2, "score_copies": t4 - t3}
                payloads.append(len(copies))
            decisions[setup] = {(d.doc_id, d.profile) for d in got}
        if decisions["one"] != decisions["two"]:
            raise SystemExit("split_cost: one worker and two delivered different decisions")
        offset += len(msgs)
        if k >= args.warm_up:
            for setup, steps in runs.items():
                for step, ns in steps.items():
                    times[setup][step].append(ns / 1000 / args.batch)

    med = {setup: {step: round(statistics.median(v), 3) for step, v in steps.items()}
           for setup, steps in times.items()}
    total = {setup: round(sum(steps.values()), 3) for setup, steps in med.items()}
    extra = round(total["two"] - total["one"], 3)
    out = {"benchmark": "split_cost", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "command": "python benchmarks/split_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "machine": {"cpus": os.cpu_count(), "load": sb.load()},
           "profiles": args.profiles, "documents_a_step": args.batch,
           "documents_a_message": args.per_message, "rounds": args.rounds,
           "copy_payloads_a_step": statistics.median(payloads),
           "us_per_document": med, "total_us_per_document": total,
           "extra_us_per_document": extra, "extra_share": round(extra / total["one"], 3),
           "speedup_if_nothing_else": round(2 * total["one"] / total["two"], 3)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("us_per_document", "total_us_per_document",
                                          "extra_us_per_document", "extra_share",
                                          "speedup_if_nothing_else", "copy_payloads_a_step")},
                     indent=1))
    return 0


def _child(role: str, args: argparse.Namespace, corpus: sb.Corpus, steps: int,
           start: Any, pipe: Any, report: Any) -> None:
    """One process of ``--processes``: ``solo`` (all four shards), ``router`` (shards 0-1,
    its copies sent on ``pipe``) or ``receiver`` (scores the copies from ``pipe``).
    Reports, as JSON bytes on ``report``: per timed step the thread CPU of each part (µs),
    the decisions of every step, and the process's CPU over the timed steps."""
    training = TrainingSet.load(corpus.idf)
    svc, table = service_with_profiles(training, corpus.specs(args.profiles))
    here, elsewhere = [0, 1], [2, 3]
    clock = time.thread_time_ns
    times: list[dict[str, int]] = []
    decided: list[list[tuple[str, str]]] = []
    start.wait()
    cpu0 = time.process_time()
    offset = 0
    for k in range(args.warm_up + steps):
        if k == args.warm_up:
            cpu0 = time.process_time()
        part: dict[str, int] = {}
        if role == "receiver":
            n = int(pipe.recv_bytes())
            payloads = [pipe.recv_bytes() for _ in range(n)]
            t0 = clock()
            got = []
            for j, payload in enumerate(payloads):
                got += svc.score_copies([InputMessage(payload, "shard", elsewhere[0], offset + j)],
                                        table, set(elsewhere)).decisions
            part["score_copies"] = clock() - t0
            offset += len(payloads)
        else:
            msgs = step_messages(corpus, args.batch, args.per_message, offset)
            offset += len(msgs)
            t0 = clock()
            routed = svc.route(msgs)
            t1 = clock()
            ((ids, X),) = routed.parts
            got = svc.score_here([0, 1, 2, 3] if role == "solo" else here, ids, X, table)
            t2 = clock()
            part = {"route": t1 - t0, "score" if role == "solo" else "score_here": t2 - t1}
            if role == "router":
                copies = svc.copies(ids, X, routed.counts[0], elsewhere)
                part["encode_copies"] = clock() - t2
                pipe.send_bytes(str(len(copies)).encode())
                for _, payload in copies:
                    pipe.send_bytes(payload)
        if k >= args.warm_up:
            times.append(part)
        decided.append([(d.doc_id, d.profile) for d in got])
    cpu = time.process_time() - cpu0
    report.send_bytes(orjson.dumps({"role": role, "times": times, "decided": decided,
                                    "process_cpu_s": cpu}))


def run_processes(args: argparse.Namespace, corpus: sb.Corpus, argv: list[str] | None) -> int:
    """``--processes`` (see the module docstring)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")  # the children share the parent's corpus
    steps = {"solo": args.rounds, "router": 2 * args.rounds, "receiver": 2 * args.rounds}
    start = ctx.Barrier(3)
    copy_out, copy_in = ctx.Pipe(duplex=False)
    reports = {role: ctx.Pipe(duplex=False) for role in steps}
    procs = {role: ctx.Process(target=_child, name=f"split-{role}",
                               args=(role, args, corpus, steps[role], start,
                                     copy_out if role == "receiver" else copy_in,
                                     reports[role][1]))
             for role in steps}
    cap = None
    if args.worker_cores is not None:
        from benchmarks.cpucap import CpuCap
        cap = CpuCap(args.worker_cores)
    try:
        for p in procs.values():
            p.start()
            if cap is not None:
                cap.add(p.pid)
        got = {role: orjson.loads(reports[role][0].recv_bytes()) for role in steps}
        for p in procs.values():
            p.join(timeout=60)
    finally:
        for p in procs.values():
            if p.is_alive():
                p.kill()
        if cap is not None:
            cap.close()
    # the same documents: the solo's steps against the pair's first ones
    for k in range(args.warm_up + args.rounds):
        one = set(map(tuple, got["solo"]["decided"][k]))
        two = set(map(tuple, got["router"]["decided"][k])) | set(map(tuple, got["receiver"]["decided"][k]))
        if one != two:
            raise SystemExit(f"split_cost: step {k}: one worker and two delivered different decisions")
    per_doc = {role: {part: round(statistics.median(t[part] for t in r["times"]) / 1000 / args.batch, 3)
                      for part in r["times"][0]}
               for role, r in got.items()}
    one = sum(per_doc["solo"].values())
    two = sum(per_doc["router"].values()) + sum(per_doc["receiver"].values())
    process_cpu = {role: round(1e6 * r["process_cpu_s"] / (steps[role] * args.batch), 3)
                   for role, r in got.items()}
    proc_two = process_cpu["router"] + process_cpu["receiver"]
    out = {"benchmark": "split_cost", "mode": "processes",
           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "command": "python benchmarks/split_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "machine": {"cpus": os.cpu_count(), "load": sb.load()},
           "worker_cores_cap": args.worker_cores,
           "profiles": args.profiles, "documents_a_step": args.batch,
           "documents_a_message": args.per_message, "steps": steps,
           "us_per_document": per_doc,
           "total_us_per_document": {"one": round(one, 3), "two": round(two, 3)},
           "extra_share": round((two - one) / one, 3),
           "speedup_if_nothing_else": round(2 * one / two, 3),
           "process_cpu_us_per_document": {**process_cpu, "two": round(proc_two, 3)},
           "process_extra_share": round((proc_two - process_cpu["solo"]) / process_cpu["solo"], 3)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("us_per_document", "total_us_per_document", "extra_share",
                                          "speedup_if_nothing_else", "process_cpu_us_per_document",
                                          "process_extra_share")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
