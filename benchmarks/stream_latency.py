"""Decision latency of one worker, measured again and again on the same worker.

Starts one ``sift worker`` on a broker, creates ``--profiles`` profiles, scores one
warm-up document, then offers ``--rate`` documents a second (one a message) for
``--seconds``, ``--repeats`` times (the latency phase of ``stream_bench.py``). The
first phase is the one a fresh worker serves: a stall there (a partition's first
message waiting for something) shows in its ``max_ms_per_half_second`` and p99, and
not in the later ones.

    python benchmarks/stream_latency.py --broker kafka://127.0.0.1:19092 \\
        --out benchmarks/results/stream_latency.json
"""

from __future__ import annotations

import argparse
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
    latency,
    load,
    start_workers,
    warm_up,
)
from sift.commands._common import write_json  # noqa: E402
from sift.settings import Settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", required=True, help="kafka://host:port")
    ap.add_argument("--profiles", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    corpus = Corpus()
    settings, run_dir = fresh_run(Settings.from_env(broker=args.broker), corpus, 4, "lat")
    result: dict[str, Any] = {
        "benchmark": "stream_latency", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "python benchmarks/stream_latency.py " + " ".join(sys.argv[1:]),
        "load_at_start": load(), "profiles": args.profiles, "phases": []}
    workers = start_workers(settings, 1, run_dir)
    try:
        add_profiles(settings, corpus, workers, args.profiles)
        warm_up(settings, corpus, workers, args.profiles)
        for i in range(args.repeats):
            print(f"phase {i} starts", flush=True)
            r = latency(settings, corpus, workers, args.rate, args.seconds, 1)
            print(f"phase {i}: p50 {r.get('p50_ms')} p99 {r.get('p99_ms')} max {r.get('max_ms')} "
                  f"ms; slowest per half second {r.get('max_ms_per_half_second')}", flush=True)
            result["phases"].append(r)
    finally:
        for w in workers:
            w.stop()
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
