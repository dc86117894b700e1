"""How long a review's work holds the worker's event loop.

A review's work grows with its collection: the call that brings 100,000 abstracts fits
the review's vectorizer and first model over all of them and ranks them, and each batch
of judgments trains a model again. The review hooks run that work in a thread
(``ReviewHooks.run``); this measures what the event loop sees meanwhile: a coroutine
that wakes every 10 ms records the gaps between its wake-ups while the hooks add the
documents (in messages of 1,000) and then apply the first batch of judgments.
``--inline`` runs the same calls on the loop, as before the thirty-ninth session.

Usage: .venv/bin/python benchmarks/review_loop.py [--documents 100000] [--inline]
       [--out benchmarks/results/review_loop.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sift.agents.review import (  # noqa: E402
    REVIEW_DOCUMENTS_TOPIC,
    ReviewHooks,
    ReviewService,
    gold_reviewer,
    guarded,
)
from sift.agents.service import InputMessage, shard_of  # noqa: E402
from sift.commands._common import write_json  # noqa: E402
from sift.topics.review import ReviewDocuments, decode_request, encode_review  # noqa: E402

NAME = "loop"
SHARDS = 4


def _msg(value: bytes, topic: str, offset: int) -> InputMessage:
    return InputMessage(value, topic, shard_of(NAME, SHARDS), offset, NAME.encode())


async def _measure(hooks: ReviewHooks, fn: Any, messages: list[InputMessage], kind: str,
                   inline: bool) -> tuple[dict[str, Any], Any]:
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    t0 = time.perf_counter()
    if inline:
        result = guarded(fn, messages, hooks.table)
    else:
        result = await hooks.run(fn, messages, kind)
    wall = time.perf_counter() - t0
    done = True
    await task
    gaps.sort()
    return {"wall_seconds": round(wall, 2), "messages": len(messages),
            "statuses": len(result.statuses), "dead_letters": len(result.dead_letters),
            "ticks": len(gaps), "longest_gap_ms": round(1000 * gaps[-1], 1),
            "gap_p99_ms": round(1000 * gaps[int(0.99 * (len(gaps) - 1))], 1),
            "gap_median_ms": round(1000 * gaps[len(gaps) // 2], 1)}, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "data/screening/Radjenovic_2013.jsonl.gz"))
    ap.add_argument("--documents", type=int, default=100_000)
    ap.add_argument("--inline", action="store_true", help="run the review's work on the loop")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/review_loop.json"))
    args = ap.parse_args(argv)
    with gzip.open(args.data) as fh:
        rows = [orjson.loads(line) for line in fh]
    texts = [f"{r.get('title') or ''} {r.get('abstract') or ''}".strip() for r in rows]
    labels = [bool(r.get("label")) for r in rows]
    table: dict[str, bytes] = {}
    hooks = ReviewHooks(ReviewService(n_shards=SHARDS), table, {}, AsyncMock())
    service = hooks.service
    spec = {"profile": NAME, "mode": "review", "query": "software fault prediction metrics",
            "params": {"random_state": 0}}
    service.apply_specs([_msg(orjson.dumps(spec), "profiles", 0)], table)
    gold: dict[str, bool] = {}
    msgs = []
    for start in range(0, args.documents, 1000):
        ids = [f"c{i}" for i in range(start, min(start + 1000, args.documents))]
        part = [texts[i % len(texts)] for i in range(start, start + len(ids))]
        gold.update({d: labels[i % len(texts)] for d, i in zip(ids, range(start, start + len(ids)),
                                                               strict=True)})
        msgs.append(_msg(encode_review(ReviewDocuments(NAME, tuple(ids), tuple(part))),
                         REVIEW_DOCUMENTS_TOPIC, len(msgs)))

    async def both() -> dict[str, Any]:
        docs, out = await _measure(hooks, service.add_documents, msgs, "documents", args.inline)
        answer = gold_reviewer(gold)
        judgments = [_msg(orjson.dumps(answer(decode_request(orjson.dumps(r.to_obj())))),
                          "judgments", i) for i, r in enumerate(out.requests)]
        first, _ = await _measure(hooks, service.apply_judgments, judgments, "judgments",
                                  args.inline)
        return {"documents_call": docs, "first_judgments_call": first}

    res = {"documents": args.documents, "mode": "inline" if args.inline else "thread",
           **asyncio.run(both())}
    path = Path(args.out)
    doc = orjson.loads(path.read_bytes()) if path.exists() else {}
    doc[res["mode"]] = res
    write_json(path, doc)
    print(res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
