"""What a worker holds after a second worker takes half its shards: its profiles count
and its resident memory, before and after (docs/reliability.md item 89).

One worker creates ``--profiles`` profiles of ``--model`` (Reuters categories, query =
name) and scores ``--documents`` documents; its RSS is read after a memory trim; a
second worker joins the group; once the group has settled (and a trim later) the first
worker's profile count and RSS are read again. Run it against older code by putting
that code first on ``PYTHONPATH`` and running from another directory (the workers are child
processes of this script; the JSON records their ``PYTHONPATH``).

    python benchmarks/release_memory.py --broker kafka://127.0.0.1:19192 \\
        --out benchmarks/results/release_memory.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.harness import WorkerProcess, send_all, total, wait_for  # noqa: E402
from sift.agents.service import shard_of  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.settings import Settings  # noqa: E402
from sift.topics.codecs import read_jsonl  # noqa: E402
from sift.topics.records import Document  # noqa: E402

REUTERS = ROOT / "data" / "reuters21578"
#: the worker trims freed memory every 30 s (sift.agents.app.TRIM_INTERVAL)
TRIM_WAIT_S = 35.0


def rss_mb(w: WorkerProcess, reads: int = 5) -> float:
    values = []
    for _ in range(reads):
        values.append(w.stats().get("memory", {}).get("rss_bytes", 0) / 2**20)
        time.sleep(1.0)
    return round(statistics.median(values), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", required=True)
    ap.add_argument("--profiles", type=int, default=40)
    ap.add_argument("--model", default="knn", choices=["rocchio", "kantor", "knn"])
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sift-release-memory"))
    ap.add_argument("--workers-code", default="",
                    help="what the workers run, when PYTHONPATH puts other code first "
                         "(recorded as given; default: this checkout's HEAD)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/release_memory.json")
    args = ap.parse_args(argv)
    train = list(read_jsonl(REUTERS / "train.jsonl.gz", Document.from_obj))
    counts: dict[str, int] = {}
    for d in train:
        for t in d.topics:
            counts[t] = counts.get(t, 0) + 1
    names = sorted(counts, key=lambda c: (-counts[c], c))[:args.profiles]
    docs = [d for _, d in zip(range(args.documents),
                              read_jsonl(REUTERS / "test.jsonl.gz", Document.from_obj),
                              strict=False)]
    tag = uuid.uuid4().hex[:6]
    settings = Settings(broker=args.broker, topic_prefix=f"rm{tag}.", app_id=f"sift-rm-{tag}",
                        partitions=4, data_dir=str(args.workdir / tag / "w1"),
                        batch_timeout=0.05)
    w1 = WorkerProcess(settings, "w1").start()
    w2 = WorkerProcess(replace(settings, data_dir=str(args.workdir / tag / "w2")), "w2")
    try:
        w1.wait_ready(180)
        send_all(settings, settings.topic("profiles"),
                 [(n.encode(), orjson.dumps({"profile": n, "query": n.replace("-", " "),
                                             "model": args.model})) for n in names])
        wait_for(lambda: total([w1], "profiles_created") == len(names), 300, "profiles")
        msgs = [(None, orjson.dumps({"documents": [{"id": d.id, "text": d.text}
                                                   for d in docs[a:a + 100]]}))
                for a in range(0, len(docs), 100)]
        send_all(settings, settings.topic("documents"), msgs)
        wait_for(lambda: total([w1], "scored") >= len(docs) * len(names), 600, "scored")
        time.sleep(TRIM_WAIT_S)
        before = {"profiles": len(w1.stats()["profiles"]), "rss_mb": rss_mb(w1)}
        w2.start().wait_ready(180)

        def settled() -> bool:
            s1, s2 = w1.stats(), w2.stats()
            return bool(s1.get("partitions")) and bool(s2.get("partitions")) and sorted(
                s1["partitions"] + s2["partitions"]) == list(range(settings.partitions))

        wait_for(settled, 180, "both workers assigned")
        time.sleep(TRIM_WAIT_S)
        s1 = w1.stats()
        own = [n for n in names if shard_of(n, settings.partitions) in s1["partitions"]]
        after = {"profiles": len(s1["profiles"]), "profiles_of_its_shards": len(own),
                 "rss_mb": rss_mb(w1), "profiles_released": s1["stats"].get("profiles_released", 0),
                 "second_worker_rss_mb": rss_mb(w2, 3)}
    finally:
        w1.stop()
        w2.stop()
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    out: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/release_memory.py", *sys.argv[1:]]),
        "code": code, "workers_code": args.workers_code or code, "workers_pythonpath": os.environ.get("PYTHONPATH", ""),
        "model": args.model, "profiles": len(names), "documents": len(docs),
        "first_worker_before_join": before, "first_worker_after_join": after}
    write_json(args.out, out)
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
