"""A large review through a real broker: a screening set repeated with fresh ids.

Until the thirty-ninth session a review's state was one table record, full at about
29,100 abstracts; now its texts and each batch's ranks are chunk records beside it
(docs/screening.md, Limits). This runs ``--repeat`` copies of a bundled screening set
(fresh ids, the same labels) through a local broker and one worker, answered by the
simulated reviewer (``sift review answer``) until the stop signal, then reads the review
table's changelog back and records the largest record written, the number of chunk
records and the recall and cost at the stop.

    .venv/bin/python benchmarks/review_broker.py --data Radjenovic_2013 --repeat 5
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.app import prepare_topics  # noqa: E402
from sift.agents.harness import WorkerProcess, read_all, send_all  # noqa: E402
from sift.agents.review import REVIEW_TABLE  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.commands.demo import broker_for  # noqa: E402
from sift.commands.review import answer, review_spec, statuses  # noqa: E402
from sift.commands.review import start as start_review  # noqa: E402
from sift.settings import Settings  # noqa: E402

SCREENING = ROOT / "data" / "screening"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="Radjenovic_2013")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--port", type=int, default=9392)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/review_broker.json")
    args = ap.parse_args(argv)
    with gzip.open(SCREENING / f"{args.data}.jsonl.gz") as fh:
        rows = [orjson.loads(line) for line in fh]
    title = orjson.loads((SCREENING / "reviews.json").read_bytes())[args.data]
    docs, gold = [], {}
    for k in range(args.repeat):
        for r in rows:
            doc_id = f"{r['id']}-{k}"
            text = " ".join(x.strip() for x in (r.get("title"), r.get("abstract")) if x and x.strip())
            docs.append({"id": doc_id, "text": text, "title": r.get("title") or "",
                         "metadata": {"review": "big"}})
            gold[doc_id] = bool(r["label"])
    base = Settings.from_env()
    with broker_for(base, args.port, False) as url:
        run = uuid.uuid4().hex[:6]
        settings = replace(base, broker=url, topic_prefix=f"rb{run}.", app_id=f"sift-rb-{run}",
                           data_dir=str(Path(tempfile.mkdtemp(prefix="sift-rb-")) / "worker"))
        prepare_topics(settings)
        worker = WorkerProcess(settings, "worker").start()
        try:
            worker.wait_ready(timeout=180)
            t0 = time.monotonic()
            if start_review(settings, review_spec("big", title, {"random_state": 0}), 60.0):
                raise SystemExit("the review was refused")
            send_all(settings, settings.topic("documents"),
                     [(None, orjson.dumps({"documents": docs[i:i + 100]}))
                      for i in range(0, len(docs), 100)])
            answered = answer(settings, "big", gold, 3600.0)
            seconds = time.monotonic() - t0
            final = statuses(settings)["big"]
            stats = worker.stats().get("stats", {})
        finally:
            worker.stop()
        changelog = read_all(settings, f"{settings.app_id}-{REVIEW_TABLE}-changelog", idle=2.0)
    keys = [(k or b"").decode("utf-8", "replace") for k, _, _, _ in changelog]
    sizes = [len(v) for _, v, _, _ in changelog if v]
    record = [len(v) for (k, v, _, _), key in zip(changelog, keys, strict=True)
              if v and key == "big"]
    relevant = sum(gold.values())
    result: dict[str, Any] = {
        "data": args.data, "repeat": args.repeat, "documents": len(docs), "relevant": relevant,
        "answered": answered, "screened": final.screened, "found": final.found,
        "recall_at_stop": final.found / relevant, "cost_at_stop": final.screened / len(docs),
        "r_hat": final.r_hat, "batches": final.batches, "stop": final.stop,
        "seconds_from_spec_to_stop": round(seconds, 1),
        "changelog_records": len(changelog), "record_writes": len(record),
        "largest_record_bytes": max(record), "last_record_bytes": record[-1],
        "text_chunk_keys": len({k for k in keys if "\x00" in k and not k.rpartition("\x00")[2].startswith("r")}),
        "ranks_chunk_keys": len({k for k in keys if k.rpartition("\x00")[2].startswith("r")}),
        "largest_value_bytes": max(sizes), "bytes_written": sum(sizes),
        "worker_dead_letters": stats.get("dead_letters", 0),
    }
    write_json(args.out, result)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
