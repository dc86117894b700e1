"""What the store of recent documents costs the garbage collector, against its
predecessor.

Every document a worker scores goes into its :class:`~sift.agents.service.DocumentStore`
(the vectors kept for judgments that arrive later; 100,000 documents by default), and
once the store is full each batch evicts as many as it adds. Until the twenty-sixth
session the store mapped each id to a ``(matrix, row)`` tuple in an ``OrderedDict``: a
100,000 tuples for every full collection to walk. It now maps ids to ints and keeps the
matrices per batch (no tracked object per document).

This runs what a worker runs between Faust's hands, :meth:`Service.route` then
:meth:`Service.score_here` for all four shards (the stream benchmark's documents and
profiles, ``benchmarks/stream_bench.py``), after ``gc.freeze()`` as ``sift worker``
does, over ``--documents`` documents, once with the current store and once with the
tuple store (:class:`TupleStore`, the old design, kept here as the baseline), each in a
fresh process, by turns for ``--rounds`` rounds. Reports per run the thread CPU a
document over the second half (the store full) and the collector's pauses by
generation (count, total, longest; ``sift.agents.gcwatch``), and the medians.

    .venv/bin/python benchmarks/store_gc.py                      # 300,000 documents, 3 rounds
    .venv/bin/python benchmarks/store_gc.py --documents 20000 --rounds 1 --out /tmp/s.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import split_cost as sc  # noqa: E402
from benchmarks import stream_bench as sb  # noqa: E402
from sift.agents import service  # noqa: E402
from sift.agents.gcwatch import GcPauses  # noqa: E402
from sift.agents.service import TrainingSet  # noqa: E402

STORES = ("ints", "tuples")
STEP = 2000  # documents a routing step, 100 a message


class TupleStore:
    """The store before the twenty-sixth session: an ``OrderedDict`` of ``(matrix, row)``
    tuples, filled and evicted one document at a time (same behaviour, the baseline)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(int(capacity), 0)
        self._rows: OrderedDict[str, tuple[sp.csr_matrix, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rows

    def holds_any(self, ids: Iterable[str]) -> bool:
        return not self._rows.keys().isdisjoint(ids)

    def put(self, ids: Sequence[str], X: sp.csr_matrix) -> None:
        if self.capacity == 0:
            return
        rows = self._rows
        for i, doc_id in enumerate(ids):
            if doc_id in rows:
                continue
            rows[doc_id] = (X, i)
        while len(rows) > self.capacity:
            rows.popitem(last=False)

    def get(self, doc_id: str) -> sp.csr_matrix | None:
        hit = self._rows.get(doc_id)
        return None if hit is None else hit[0][hit[1]]

    def locate(self, doc_id: str) -> tuple[sp.csr_matrix, int] | None:
        return self._rows.get(doc_id)


def one_run(store: str, documents: int, profiles: int) -> dict[str, Any]:
    """Route and score ``documents`` with the ``store`` kind in this process."""
    if store == "tuples":
        service.DocumentStore = TupleStore  # type: ignore[misc, assignment]
    corpus = sb.Corpus()
    try:
        training = TrainingSet.load(corpus.idf)
        svc, table = sc.service_with_profiles(training, corpus.specs(profiles))
        steps = max(documents // STEP, 2)
        gc.collect()
        gc.freeze()  # as sift worker does once it has started
        watch = GcPauses().install()
        cpu: list[int] = []
        for k in range(steps):
            msgs = sc.step_messages(corpus, STEP, 100, k * (STEP // 100))
            t0 = time.thread_time_ns()
            routed = svc.route(msgs)
            ((ids, X),) = routed.parts
            svc.score_here([0, 1, 2, 3], ids, X, table)
            cpu.append(time.thread_time_ns() - t0)
        watch.uninstall()
        half = cpu[steps // 2 :]
        return {"store": store, "documents": steps * STEP, "stored": len(svc.store),
                "us_per_document_second_half": round(sum(half) / len(half) / STEP / 1000, 3),
                "gc": watch.summary()}
    finally:
        shutil.rmtree(corpus.dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=300_000)
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/store_gc.json")
    ap.add_argument("--one", choices=STORES, help=argparse.SUPPRESS)  # a child's run
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.one, args.documents, args.profiles)))
        return 0
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for store in (STORES if r % 2 == 0 else STORES[::-1]):
            proc = subprocess.run(
                [sys.executable, __file__, "--one", store, "--documents", str(args.documents),
                 "--profiles", str(args.profiles)],
                capture_output=True, text=True, check=False,
                env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
            if proc.returncode:
                raise SystemExit(f"store_gc: the {store} run failed:\n{proc.stderr[-2000:]}")
            run = json.loads(proc.stdout.strip().splitlines()[-1])
            run["round"] = r
            runs.append(run)
            g = run["gc"]
            print(f"round {r} {store:6s} {run['us_per_document_second_half']:7.3f} µs a document, "
                  f"full collections {g['collections'][2]} ({g['pause_ms_total'][2]:.1f} ms, "
                  f"longest {g['pause_ms_max'][2]:.1f} ms)", flush=True)

    def med(store: str, fn: Any) -> float:
        return round(statistics.median(fn(r) for r in runs if r["store"] == store), 3)

    summary = {store: {
        "us_per_document_second_half": med(store, lambda r: r["us_per_document_second_half"]),
        "gc_pause_ms_total_by_generation": [med(store, lambda r, g=g: r["gc"]["pause_ms_total"][g])
                                            for g in range(3)],
        "gc_pause_ms_longest_by_generation": [med(store, lambda r, g=g: r["gc"]["pause_ms_max"][g])
                                              for g in range(3)],
    } for store in STORES}
    out = {"benchmark": "store_gc", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "command": "python benchmarks/store_gc.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "machine": {"cpus": os.cpu_count(), "load": sb.load()},
           "documents": args.documents, "profiles": args.profiles, "rounds": args.rounds,
           "medians": summary, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
