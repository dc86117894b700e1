"""The service's judgment path, two versions of the code by turns, batch by batch.

    git worktree add /tmp/old <commit>
    python benchmarks/judgments_ab.py --old /tmp/old --out benchmarks/results/judgments_ab.json

On this shared 2-core machine one process's speed moves by a factor of 1.5 within
minutes, so two runs of ``benchmarks/service_judgments.py`` cannot tell a change of a few
per cent. Here two processes, one on this checkout and one on ``--old`` (a checkout of
another commit), each build the same service in process (``--profiles`` query-only
profiles of the stream benchmark's corpus, 5,000 stored documents, the judgment journal
on, as ``service_judgments.py`` builds it) and then apply the same consumed batches of
``--batch`` random judgments (``update=every``), one batch at a time by turns, the order
alternating, so a change of the machine's speed hits both alike. Reports the CPU per
judgment of each batch in each version and the median of the per-batch ratios, and
checks that both end with the same profile states, bit for bit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]


def child(n_profiles: int, n_batches: int, size: int, warm: int) -> None:
    """Build the service, then apply batch ``i`` for each line ``i`` read from stdin,
    answering with the CPU seconds it took; ``digest`` answers with a hash of every
    profile's state."""
    sys.path.insert(0, str(Path.cwd()))
    import orjson

    from benchmarks import service_judgments as sj
    from benchmarks.stream_bench import Corpus
    from sift.agents.service import TrainingSet

    corpus = Corpus()
    training = TrainingSet.load(corpus.idf)
    docs = corpus.documents(5000)
    ids = [d["id"] for d in docs]
    svc, table, _ = sj.build(training, corpus, n_profiles, True, docs)
    todo = sj.batches(svc, ids, n_profiles, n_batches + warm, size, seed=0, used=set(),
                      labels={})
    sj.run_one(svc, table, todo[:warm])
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "digest":
            h = hashlib.sha256()
            for spec in corpus.specs(n_profiles):
                entry = svc.entry(spec["profile"], table)
                h.update(orjson.dumps(entry.profile.to_state()))  # type: ignore[union-attr]
            print(h.hexdigest(), flush=True)
            continue
        t = time.process_time()
        sj.run_one(svc, table, [todo[warm + int(cmd)]])
        print(time.process_time() - t, flush=True)


def start(checkout: Path, args: argparse.Namespace) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(checkout), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--profiles", str(args.profiles),
           "--batches", str(args.batches), "--batch", str(args.batch), "--warm", str(args.warm)]
    proc = subprocess.Popen(cmd, cwd=checkout, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    return proc


def ask(proc: subprocess.Popen[str], line: str) -> str:
    stdin: IO[str] | None = proc.stdin
    stdout: IO[str] | None = proc.stdout
    assert stdin is not None and stdout is not None
    stdin.write(line + "\n")
    stdin.flush()
    answer = stdout.readline().strip()
    if not answer:
        raise RuntimeError(f"the {line!r} step got no answer (the child process failed)")
    return answer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, help="a checkout of the other version")
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=30, help="batches timed in each version")
    ap.add_argument("--batch", type=int, default=1024, help="judgments per consumed batch")
    ap.add_argument("--warm", type=int, default=5, help="batches applied before timing")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.profiles, args.batches, args.batch, args.warm)
        return
    if args.old is None:
        ap.error("--old is required")
    procs: dict[str, subprocess.Popen[str]] = {}
    for name, checkout in (("new", ROOT), ("old", args.old.resolve())):
        procs[name] = start(checkout, args)
        assert procs[name].stdout is not None
        if procs[name].stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {name} version did not start")
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(args.batches):
        for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
            cpu[name].append(float(ask(procs[name], str(i))))
    digests = {name: ask(proc, "digest") for name, proc in procs.items()}
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    per = {name: [1e6 * t / args.batch for t in ts] for name, ts in cpu.items()}
    ratios = [n / o for n, o in zip(per["new"], per["old"], strict=True)]
    old_commit = subprocess.run(["git", "-C", str(args.old), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    new_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    result: dict[str, Any] = {
        "benchmark": "judgments_ab", "command": "python benchmarks/judgments_ab.py " + " ".join(sys.argv[1:]),
        "old_commit": old_commit, "new_commit": new_commit, "profiles": args.profiles,
        "batch": args.batch, "batches": args.batches,
        "us_per_judgment": {name: [round(x, 1) for x in v] for name, v in per.items()},
        "median_us_per_judgment": {name: round(statistics.median(v), 1) for name, v in per.items()},
        "median_new_over_old": round(statistics.median(ratios), 3),
        "batches_new_faster": sum(r < 1 for r in ratios),
        "same_profiles": digests["old"] == digests["new"], "load_average": os.getloadavg()[0]}
    print(f"{args.profiles} profiles: old {result['median_us_per_judgment']['old']} µs, new "
          f"{result['median_us_per_judgment']['new']} µs a judgment (medians of {args.batches} "
          f"batches by turns); new/old {result['median_new_over_old']}, new faster in "
          f"{result['batches_new_faster']} of {args.batches}; same profiles: {result['same_profiles']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    if not result["same_profiles"]:
        sys.exit("the two versions' profiles differ")


if __name__ == "__main__":
    main()
