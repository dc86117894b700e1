"""Memory, record bytes and time of a profile's judgment keys at their cap.

A profile remembers up to ``MAX_JUDGED_KEYS`` (200,000) judgment keys. Until the
fifty-third session they were a ``dict`` of strings in memory and a list of strings in
the state record; since, :class:`sift.agents.keys.JudgmentKeys` holds their 8-byte
digests. This measures both at the cap, for keys as the command line and the web make
them (a UUID, 36 characters) and for the key of a judgment without an id (the document
profile and document ids, here ``"grain\\x1fr12345"``):

- memory: ``tracemalloc``'s traced bytes of the structure filled to the cap;
- record: the bytes of its part of the state record (orjson);
- time: microseconds per judgment, a membership test and an add, while the structure
  fills and once it is full (each add forgets the oldest key), and the time to read
  the record's part back.

    python benchmarks/judgment_keys.py --out benchmarks/results/judgment_keys.json
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import orjson

from sift.agents.keys import JudgmentKeys
from sift.agents.service import MAX_JUDGED_KEYS


def dict_keys(keys: list[str], cap: int) -> dict[str, None]:
    d: dict[str, None] = {}
    for k in keys:
        d[k] = None
        while len(d) > cap:
            del d[next(iter(d))]
    return d


def measure(make_keys: Any, cap: int, steady: int) -> dict[str, Any]:
    keys = [make_keys(i) for i in range(cap + steady)]
    out: dict[str, Any] = {"example_key": keys[0], "cap": cap}
    for name in ("dict", "digests"):
        gc.collect()
        tracemalloc.start()
        if name == "dict":
            held: Any = dict_keys(keys[:cap], cap)
        else:
            held = JudgmentKeys(cap, keys[:cap])
        memory = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        # (a dict's key strings are the caller's here: counted apart, as in a worker the
        # strings decoded from the record belong to the dict alone)
        strings = sum(k.__sizeof__() for k in keys[:cap]) if name == "dict" else 0
        # filling, below the cap: a membership test and an add a judgment
        t = time.perf_counter()
        if name == "dict":
            filling: Any = {}
            for k in keys[:cap]:
                if k not in filling:
                    filling[k] = None
        else:
            filling = JudgmentKeys(cap)
            for k in keys[:cap]:
                if k not in filling:
                    filling.add(k)
        below = (time.perf_counter() - t) / cap * 1e6
        del filling
        record = (orjson.dumps(list(held)) if name == "dict"
                  else orjson.dumps(held.to_obj()))
        t = time.perf_counter()
        for k in keys[cap:]:
            if k not in held:
                if name == "dict":
                    held[k] = None
                    while len(held) > cap:
                        del held[next(iter(held))]
                else:
                    held.add(k)
        per = (time.perf_counter() - t) / steady * 1e6
        t = time.perf_counter()
        if name == "dict":
            dict.fromkeys(str(k) for k in orjson.loads(record))
        else:
            JudgmentKeys.from_obj(orjson.loads(record), cap)
        read = time.perf_counter() - t
        out[name] = {"memory_mb": round((memory + strings) / 1e6, 2),
                     "record_mb": round(len(record) / 1e6, 2),
                     "us_per_judgment_below_cap": round(below, 2),
                     "us_per_judgment_at_cap": round(per, 2),
                     "record_read_s": round(read, 3)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cap", type=int, default=MAX_JUDGED_KEYS)
    ap.add_argument("--steady", type=int, default=100_000,
                    help="judgments timed with the structure full")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = {
        "command": "python benchmarks/judgment_keys.py" + (f" --out {args.out}" if args.out else ""),
        "uuid_ids": measure(lambda i: str(uuid.UUID(int=i * 0x9E3779B97F4A7C15 % 2**128)),
                            args.cap, args.steady),
        "document_ids": measure(lambda i: f"grain\x1fr{i}", args.cap, args.steady),
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
