"""A fresh worker started on a backlog, again and again: does Faust hand it every partition
from its committed offset, or drop the head (read back by the worker) or lose the tail
(sought back by the tail watch after ``TAIL_STALL_S``)?

Creates ``--profiles`` profiles (so that each start recovers a table), then ``--starts``
times: ``--documents`` single-document messages produced while no worker runs, a new
worker (fresh data directory, same group) started, and its counters read once it has
routed them. A start counts as bad when the worker logged a skipped head or a tail seek.

    python benchmarks/restart_heads.py --broker kafka://127.0.0.1:19092 \\
        --out benchmarks/results/restart_heads.json
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stream_bench import (  # noqa: E402
    Corpus,
    add_profiles,
    fresh_run,
    load,
    produce_fast,
    single,
    start_workers,
)
from sift.commands._common import write_json  # noqa: E402
from sift.settings import Settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", required=True, help="kafka://host:port")
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--starts", type=int, default=12)
    ap.add_argument("--documents", type=int, default=3000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    corpus = Corpus()
    settings, tmp = fresh_run(Settings.from_env(broker=args.broker), corpus, 4, "rh")
    workers = start_workers(settings, 1, tmp / "profiles")
    try:
        add_profiles(settings, corpus, workers, args.profiles)
    finally:
        for w in workers:
            w.stop()
    starts: list[dict[str, Any]] = []
    for i in range(args.starts):
        produce_fast(settings, settings.topic("documents"), single(corpus.documents(args.documents)))
        t0 = time.monotonic()
        workers = start_workers(settings, 1, tmp / f"start{i}")
        ready = time.monotonic() - t0
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if workers[0].stats().get("stats", {}).get("documents", 0) >= args.documents:
                    break
                time.sleep(0.1)
            done = time.monotonic() - t0 - ready
            stats = workers[0].stats().get("stats", {})
        finally:
            for w in workers:
                w.stop()
        log = "".join(p.read_text(errors="replace") for p in (tmp / f"start{i}").rglob("*.log"))
        row = {"ready_s": round(ready, 2), "routed_s": round(done, 2),
               "documents": stats.get("documents", 0),
               "skipped_head_warnings": len(re.findall("consumer skipped", log)),
               "tail_seeks": len(re.findall("seeking back", log)),
               "offsets_recovered": stats.get("offsets_recovered", 0),
               "redelivered_skipped": stats.get("redelivered_skipped", 0)}
        print(f"start {i}: {row}", flush=True)
        starts.append(row)
    bad = sum(1 for r in starts if r["skipped_head_warnings"] or r["tail_seeks"])
    print(f"{bad} of {len(starts)} starts had a skipped head or a lost tail")
    if args.out:
        write_json(args.out, {
            "benchmark": "restart_heads", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": "python benchmarks/restart_heads.py " + " ".join(sys.argv[1:]),
            "load": load(), "bad_starts": bad, "starts": starts})
    return 0


if __name__ == "__main__":
    sys.exit(main())
