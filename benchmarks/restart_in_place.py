"""A worker killed (SIGKILL) and started again in place: how long until it scores again,
with and without an instance id (``SIFT_INSTANCE_ID``, Kafka's static membership)?

Each run: a fresh group and topics, one worker with ``--profiles`` profiles that scores
a first batch of documents; SIGKILL; the same worker started again (same data
directory, same instance id if any) while a second batch is produced at once; the time
from the kill to the restarted worker having scored the whole second batch. Without an
instance id the restarted worker's join waits for the dead member until its session
ends or the rebalance times out (Faust's 60 s).

    python benchmarks/restart_in_place.py --broker kafka://127.0.0.1:19192 --runs 3 \\
        --out benchmarks/results/restart_in_place.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.harness import WorkerProcess, send_all, total, wait_for  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.settings import Settings  # noqa: E402
from sift.topics.codecs import read_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

REUTERS = ROOT / "data" / "reuters21578"


def one_run(broker: str, workdir: Path, named: bool, profiles: list[str],
            docs: list[Document], session_timeout: float) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    settings = Settings(broker=broker, topic_prefix=f"rip{tag}.", app_id=f"sift-rip-{tag}",
                        partitions=4, data_dir=str(workdir / tag), batch_timeout=0.05,
                        session_timeout=session_timeout,
                        instance_id=f"rip-{tag}" if named else "")
    half = len(docs) // 2

    def messages(part: list[Document]) -> list[tuple[bytes, bytes]]:
        return [(d.id.encode(), orjson.dumps({"id": d.id, "text": d.text})) for d in part]

    first = WorkerProcess(settings, "first").start()
    again = WorkerProcess(settings, "again")
    try:
        first.wait_ready(180)
        send_all(settings, settings.topic("profiles"),
                 [(p.encode(), orjson.dumps({"profile": p, "query": p})) for p in profiles])
        wait_for(lambda: total([first], "profiles_created") == len(profiles), 60, "profiles")
        send_all(settings, settings.topic("documents"), messages(docs[:half]))
        wait_for(lambda: total([first], "scored") == half * len(profiles), 120, "first half")
        time.sleep(2.0)  # a commit of the offsets scored
        first.kill()
        killed = time.monotonic()
        again.start()
        send_all(settings, settings.topic("documents"), messages(docs[half:]))
        need = (len(docs) - half) * len(profiles)
        wait_for(lambda: again.alive() and total([again], "scored") >= need, 600,
                 "second half scored by the restarted worker")
        seconds = time.monotonic() - killed
        return {"named": named, "seconds_to_scored": round(seconds, 2),
                "scored": total([again], "scored"), "expected": need}
    finally:
        first.kill()
        again.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", required=True, help="kafka://HOST:PORT")
    ap.add_argument("--runs", type=int, default=3, help="runs of each kind (default 3)")
    ap.add_argument("--documents", type=int, default=200)
    ap.add_argument("--profiles", type=int, default=10)
    ap.add_argument("--session-timeout", type=float, default=60.0,
                    help="SIFT_SESSION_TIMEOUT of the workers (default 60, the default)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sift-restart-in-place"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/restart_in_place.json")
    args = ap.parse_args(argv)
    docs = [d for _, d in zip(range(args.documents),
                              read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj),
                              strict=False)]
    profiles = ["crude", "grain", "money", "trade", "interest", "ship", "wheat", "corn",
                "sugar", "coffee", "gold", "oil", "acq", "earn", "jobs", "cocoa"]
    if not 1 <= args.profiles <= len(profiles):
        ap.error(f"--profiles must be in [1, {len(profiles)}], got {args.profiles}")
    profiles = profiles[:args.profiles]
    runs = []
    for i in range(args.runs):
        for named in (False, True):  # by turns, so that drift of the machine hits both
            r = one_run(args.broker, args.workdir, named, profiles, docs, args.session_timeout)
            print(f"run {i + 1}: {'named' if named else 'unnamed'} "
                  f"{r['seconds_to_scored']} s", flush=True)
            runs.append(r)
    out = {"command": " ".join(["python", "benchmarks/restart_in_place.py", *sys.argv[1:]]),
           "session_timeout_s": args.session_timeout, "documents": len(docs),
           "profiles": len(profiles), "runs": runs,
           "median_seconds": {
               kind: statistics.median(r["seconds_to_scored"] for r in runs
                                       if r["named"] == (kind == "named"))
               for kind in ("unnamed", "named")}}
    write_json(args.out, out)
    print(orjson.dumps(out["median_seconds"]).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
