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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from sift.agents.keys import JudgmentKeys
from sift.agents.service import MAX_JUDGED_KEYS


class DictKeys:
    """The keys as a profile held them before the fifty-third session: a dict of the
    strings, the oldest forgotten first (``ProfileEntry.remember``), listed in the record."""

    def __init__(self, capacity: int, keys: Iterable[str] = ()) -> None:
        self.capacity = capacity
        self.d: dict[str, None] = {}
        for k in keys:
            self.add(k)

    def __contains__(self, key: str) -> bool:
        return key in self.d

    def add(self, key: str) -> None:
        self.d[key] = None
        while len(self.d) > self.capacity:
            del self.d[next(iter(self.d))]

    def to_obj(self) -> list[str]:
        return list(self.d)

    @classmethod
    def from_obj(cls, obj: list[str], capacity: int) -> DictKeys:
        out = cls(capacity)
        out.d = dict.fromkeys(str(k) for k in obj)
        return out


def measure(make_keys: Any, cap: int, steady: int) -> dict[str, Any]:
    keys = [make_keys(i) for i in range(cap + steady)]
    out: dict[str, Any] = {"example_key": keys[0], "cap": cap}
    kinds: dict[str, Any] = {"dict": DictKeys, "digests": JudgmentKeys}
    for name, kind in kinds.items():
        gc.collect()
        tracemalloc.start()
        held = kind(cap, keys[:cap])
        memory = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        # (a dict's key strings are the caller's here: counted apart, as in a worker the
        # strings decoded from the record belong to the dict alone)
        strings = sum(k.__sizeof__() for k in keys[:cap]) if name == "dict" else 0
        # a membership test and an add a judgment: filling (below the cap), then full
        # (each add forgets the oldest)
        filling = kind(cap)
        t = time.perf_counter()
        for k in keys[:cap]:
            if k not in filling:
                filling.add(k)
        below = (time.perf_counter() - t) / cap * 1e6
        del filling
        record = orjson.dumps(held.to_obj())
        t = time.perf_counter()
        for k in keys[cap:]:
            if k not in held:
                held.add(k)
        per = (time.perf_counter() - t) / steady * 1e6
        t = time.perf_counter()
        kind.from_obj(orjson.loads(record), cap)
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
