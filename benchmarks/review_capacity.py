"""How many documents a review holds in the streaming service, and what its records cost.

A review's state is one record of the review table (ids, labels, the ranks each batch
records), whose changelog takes at most ``MAX_STATE_BYTES`` (16 MiB), beside chunk records
of its documents' texts (since the thirty-ninth session; before, the texts were in the
record too). The service compresses both and lets documents fill ``DOCUMENTS_SHARE`` of
the record, keeping the rest for batches. This feeds a screening collection, repeated
with fresh ids, to the service without a broker, 100 documents a message and 64 messages
a call (the review agent's batch), until documents are refused or ``--max-documents`` are
in; then screens with a gold-label reviewer for ``--batches`` batches and records the
record's size as it grows and the bytes each call writes to the table (its changelog
traffic).

Usage: .venv/bin/python benchmarks/review_capacity.py [--data data/screening/Radjenovic_2013.jsonl.gz]
       [--max-documents 100000] [--batches 40] [--out benchmarks/results/review_capacity.json]
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents import review as review_mod  # noqa: E402
from sift.agents.review import (  # noqa: E402
    REVIEW_DOCUMENTS_TOPIC,
    ReviewService,
    decode_review_record,
    gold_reviewer,
    review_record_obj,
)
from sift.agents.service import InputMessage, shard_of  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.topics.review import ReviewDocuments, decode_request, encode_review  # noqa: E402

NAME = "capacity"
SHARDS = 4


class CountingTable(dict[str, bytes]):
    """A review table that counts the bytes written to it (what its changelog carries)."""

    written = 0

    def __setitem__(self, key: str, value: bytes) -> None:
        self.written += len(value)
        super().__setitem__(key, value)


def _msg(value: bytes, topic: str, offset: int) -> InputMessage:
    return InputMessage(value, topic, shard_of(NAME, SHARDS), offset, NAME.encode())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "data/screening/Radjenovic_2013.jsonl.gz"))
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--max-documents", type=int, default=100_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/review_capacity.json"))
    args = ap.parse_args(argv)

    with gzip.open(args.data) as fh:
        rows = [orjson.loads(line) for line in fh]
    texts = [f"{r.get('title') or ''} {r.get('abstract') or ''}".strip() for r in rows]
    labels = [bool(r.get("label")) for r in rows]
    service, table = ReviewService(n_shards=SHARDS), CountingTable()
    spec = {"profile": NAME, "mode": "review", "query": "software fault prediction metrics",
            "params": {"random_state": 0}}
    service.apply_specs([_msg(orjson.dumps(spec), "profiles", 0)], table)

    gold: dict[str, bool] = {}
    offset, refused, calls, requests = 0, 0, [], []
    t_add = 0.0
    while not refused and offset < args.max_documents:
        msgs = []
        for _ in range(64):
            ids, part = [], []
            for _ in range(100):
                i = offset % len(texts)
                doc_id = f"c{offset}"
                ids.append(doc_id)
                part.append(texts[i])
                gold[doc_id] = labels[i]
                offset += 1
            msgs.append(_msg(encode_review(ReviewDocuments(NAME, tuple(ids), tuple(part))),
                             REVIEW_DOCUMENTS_TOPIC, offset))
        t0, w0 = time.process_time(), table.written
        out = service.add_documents(msgs, table)
        t_add += time.process_time() - t0
        refused = sum(d.reason == "state_too_large" for d in out.dead_letters)
        requests.extend(out.requests)
        calls.append({"documents": len(decode_review_record(table[NAME], NAME, table).review.ids_),
                      "record_bytes": len(table[NAME]), "bytes_written": table.written - w0,
                      "seconds": round(time.process_time() - t0, 3)})
        print(calls[-1], flush=True)
    held = calls[-1]["documents"]
    plain = len(orjson.dumps(review_record_obj(table[NAME])))

    answer = gold_reviewer(gold)
    growth: list[dict[str, Any]] = []
    for b in range(args.batches):
        if not requests:
            break
        msgs = [_msg(orjson.dumps(answer(decode_request(orjson.dumps(r.to_obj())))), "judgments", i)
                for i, r in enumerate(requests)]
        t0, w0 = time.process_time(), table.written
        out = service.apply_judgments(msgs, table)
        spent = time.process_time() - t0
        requests = list(out.requests)
        growth.append({"batch": b + 1, "judgments": len(msgs), "record_bytes": len(table[NAME]),
                       "bytes_written": table.written - w0, "seconds": round(spent, 3),
                       "dead_letters": len(out.dead_letters)})
        if b % 5 == 0:
            print(growth[-1], flush=True)
    result = {
        "data": Path(args.data).name,
        "max_state_bytes": review_mod.MAX_STATE_BYTES,
        "max_record_bytes": review_mod.MAX_RECORD_BYTES,
        "documents_share": review_mod.DOCUMENTS_SHARE,
        "documents_held": held,
        "documents_refused": refused,
        "max_documents": args.max_documents,
        "text_chunks": len(texts_keys := [k for k in table if k.startswith(NAME + "\x00")
                                          and not k.rpartition("\x00")[2].startswith("r")]),
        "text_chunk_bytes": sum(len(table[k]) for k in texts_keys),
        "ranks_chunks": len(ranks_keys := [k for k in table if k.startswith(NAME + "\x00r")]),
        "ranks_chunk_bytes": sum(len(table[k]) for k in ranks_keys),
        "record_bytes_after_documents": calls[-1]["record_bytes"],
        "record_bytes_uncompressed": plain,
        "compression_ratio": round(plain / calls[-1]["record_bytes"], 2),
        "documents_cpu_seconds": round(t_add, 2),
        "calls": calls,
        "judgment_batches": growth,
    }
    write_json(Path(args.out), result)
    print(f"held {held} documents ({refused} refused); record {calls[-1]['record_bytes'] / 2**20:.2f} MiB "
          f"({plain / 2**20:.2f} MiB uncompressed); after {len(growth)} batches "
          f"{growth[-1]['record_bytes'] / 2**20 if growth else 0:.2f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
